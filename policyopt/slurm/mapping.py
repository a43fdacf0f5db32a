"""Which Slurm jobs the controller manages, and the policyopt job each one becomes.

Opt-in is the job's comment (``sbatch --comment=...``)::

    policyopt                               manage me, type unknown (agnostic)
    policyopt:type=NAME                     manage me as job type NAME of the throughput table
    policyopt:type=NAME,steps=N,weight=W    with my step budget and a weight
    policyopt:file=/path/job.json           the same keys from a JSON file {"type", "steps", "weight"}

A job whose comment does not start with ``policyopt`` is never managed. The job's GPU count is its
GPU request (``--gpus``, ``--gres=gpu:N`` times its nodes, ``--gpus-per-task`` times its tasks); a
GPU type named in that request pins the job to that type. Throughputs come from the table row of
its type; a job without a type, or with a type not in the table, is *agnostic*: 1 step/s on every
GPU type (the policy then treats it as equally fast everywhere). Its weight is ``weight=`` if given,
else ``--weight qos:NAME=W`` for its QOS, else ``--weight account:NAME=W`` for its account, else 1.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from policyopt.errors import InputError
from policyopt.slurm.slurmcmd import SlurmJob
from policyopt.slurm.throughputs import ThroughputTable

__all__ = ["OPT_IN", "JobSpec", "ManagedJob", "parse_opt_in", "managed_job", "parse_weights"]

OPT_IN = "policyopt"
_KEYS = ("type", "steps", "weight", "file")


@dataclass(frozen=True)
class JobSpec:
    """What a job's opt-in says about it."""

    job_type: str | None = None
    steps: float | None = None
    weight: float | None = None


def _positive(field: str, value: Any) -> float:
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise InputError(field, value, "must be a positive number") from None
    if not math.isfinite(v) or v <= 0:
        raise InputError(field, value, "must be a positive number")
    return v


def parse_opt_in(comment: str) -> JobSpec | None:
    """The spec in a job comment, or ``None`` when the job did not opt in (module docstring)."""
    text = (comment or "").strip()
    if text != OPT_IN and not text.startswith(OPT_IN + ":"):
        return None
    fields: dict[str, Any] = {}
    for item in filter(None, (p.strip() for p in text[len(OPT_IN) + 1:].split(","))):
        key, sep, value = item.partition("=")
        if not sep or key not in _KEYS:
            raise InputError("comment", comment, f"expected policyopt:KEY=VALUE,... with KEY in {list(_KEYS)}")
        fields[key] = value
    if "file" in fields:
        path = Path(fields.pop("file"))
        try:
            data = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError) as exc:
            raise InputError("comment.file", str(path), f"cannot read the job's JSON file: {exc}") from None
        if not isinstance(data, Mapping):
            raise InputError("comment.file", str(path), "must hold a JSON object")
        unknown = sorted(set(data) - {"type", "steps", "weight"})
        if unknown:
            raise InputError(f"comment.file.{unknown[0]}", data[unknown[0]], "unknown key (type, steps, weight)")
        fields = {**{k: v for k, v in data.items()}, **fields}
    job_type = fields.get("type")
    if job_type is not None and (not isinstance(job_type, str) or not job_type):
        raise InputError("comment.type", job_type, "must be a non-empty job type name")
    return JobSpec(job_type=job_type,
                   steps=None if fields.get("steps") is None else _positive("comment.steps", fields["steps"]),
                   weight=None if fields.get("weight") is None else _positive("comment.weight", fields["weight"]))


def parse_weights(items: Sequence[str] | None) -> dict[str, float]:
    """``["qos:high=2", "account:phys=0.5"]`` -> ``{"qos:high": 2.0, "account:phys": 0.5}``."""
    out: dict[str, float] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        kind, colon, name = key.partition(":")
        if not sep or not colon or kind not in ("qos", "account") or not name:
            raise InputError("--weight", item, "must look like qos:NAME=W or account:NAME=W")
        out[key] = _positive("--weight", value)
    return out


@dataclass(frozen=True)
class ManagedJob:
    """A managed Slurm job as the policy sees it."""

    job_id: str
    job_type: str | None  # None: agnostic
    gpus: int
    weight: float
    steps: float | None
    throughputs: dict[str, float]  # GPU type -> steps/s of the whole job


def managed_job(job: SlurmJob, table: ThroughputTable, gpu_types: Sequence[str],
                weights: Mapping[str, float]) -> ManagedJob | None:
    """The managed view of ``job`` (``None`` when it did not opt in). Raises ``InputError`` for an
    opt-in the controller cannot act on (no GPUs requested, malformed comment)."""
    spec = parse_opt_in(job.comment)
    if spec is None:
        return None
    if job.gpus < 1:
        raise InputError(f"job {job.job_id}.gpus", job.gpus, "a managed job must request GPUs (--gpus=N)")
    known = spec.job_type is not None and spec.job_type in table
    thr = ({t: float(table[spec.job_type].get(t, 0.0)) for t in gpu_types} if known  # type: ignore[index]
           else {t: 1.0 for t in gpu_types})
    if job.gpu_type is not None:
        thr = {t: (v if t == job.gpu_type else 0.0) for t, v in thr.items()}
    weight = spec.weight or weights.get(f"qos:{job.qos}") or weights.get(f"account:{job.account}") or 1.0
    return ManagedJob(job.job_id, spec.job_type if known else None, job.gpus, float(weight), spec.steps, thr)
