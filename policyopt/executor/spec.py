"""Job lists for the executor: ``JOBS.json``, the built-in ``small`` example, throughput tables.

``JOBS.json`` is a list of jobs, or an object ``{"jobs": [...]}``::

    {"jobs": [{"id": "a", "job_type": "resnet-bs32", "steps": 300},
              {"id": "b", "job_type": "lstm-bs10", "steps": 300, "arrival": 5.0, "seed": 1, "weight": 2.0}]}

| field | meaning |
| --- | --- |
| ``id`` | unique job id (string; numbers are converted) |
| ``job_type`` | a job type of :data:`policyopt.jobs.JOB_TYPES` |
| ``steps`` | steps to train (the job finishes at exactly this step count) |
| ``arrival`` | seconds after the run starts (executor clock), default 0 |
| ``seed`` | model and data seed, default 0 |
| ``weight`` | priority weight for the policy, default 1 |

The **throughput table** the policy sees is a profiler table (``throughputs.json`` written by
``policyopt profile``, format in ``docs/jobs.md``): ``job_types[<type>].throughputs[<worker type>]``
in steps/s and optional ``colocated`` pairs.
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from policyopt.errors import InputError, UnknownNameError

__all__ = ["JobSpec", "parse_jobs", "load_jobs", "example_jobs", "EXAMPLES", "example_throughputs_path",
           "load_throughput_table", "check_table"]

_FIELDS = ("id", "job_type", "steps", "arrival", "seed", "weight")
_HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class JobSpec:
    """One job of a run."""

    id: str
    job_type: str
    steps: int
    arrival: float = 0.0
    seed: int = 0
    weight: float = 1.0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _job_types() -> Mapping[str, Any]:
    from policyopt.jobs.zoo import JOB_TYPES

    return JOB_TYPES


def parse_jobs(data: Any, field: str = "jobs") -> list[JobSpec]:
    """Validate a job list (see the module docstring); errors name the field, e.g. ``jobs[2].steps``."""
    if isinstance(data, Mapping):
        unknown = set(data) - {"jobs"}
        if unknown:
            key = sorted(unknown)[0]
            raise InputError(f"{field}.{key}", data[key], "unknown field (expected only 'jobs')")
        if "jobs" not in data:
            raise InputError(f"{field}.jobs", None, "missing")
        data = data["jobs"]
    if not isinstance(data, list) or not data:
        raise InputError(field, data, "must be a non-empty list of jobs")
    known = _job_types()
    out: list[JobSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(data):
        where = f"{field}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(where, item, "must be an object")
        unknown = set(item) - set(_FIELDS)
        if unknown:
            key = sorted(unknown)[0]
            raise InputError(f"{where}.{key}", item[key], f"unknown field (known: {', '.join(_FIELDS)})")
        for key in ("id", "job_type", "steps"):
            if key not in item:
                raise InputError(f"{where}.{key}", None, "missing")
        jid = item["id"]
        if isinstance(jid, bool) or not isinstance(jid, (str, int)) or str(jid) == "":
            raise InputError(f"{where}.id", jid, "must be a non-empty string or an integer")
        jid = str(jid)
        if jid in seen:
            raise InputError(f"{where}.id", jid, "duplicate job id")
        seen.add(jid)
        jtype = item["job_type"]
        if jtype not in known:
            raise UnknownNameError(f"{where}.job_type", jtype, known)
        steps = item["steps"]
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise InputError(f"{where}.steps", steps, "must be an integer >= 1")
        arrival = item.get("arrival", 0.0)
        if isinstance(arrival, bool) or not isinstance(arrival, (int, float)) or not math.isfinite(arrival) or arrival < 0:
            raise InputError(f"{where}.arrival", arrival, "must be a finite number >= 0 (seconds)")
        seed = item.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"{where}.seed", seed, "must be an integer >= 0")
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
            raise InputError(f"{where}.weight", weight, "must be a finite number > 0")
        out.append(JobSpec(jid, str(jtype), int(steps), float(arrival), int(seed), float(weight)))
    return out


def _read_json(path: str | Path, field: str) -> Any:
    """A JSON file's content; a missing or malformed file is an :class:`InputError` on ``field``."""
    p = Path(path)
    try:
        return json.loads(p.read_text())
    except FileNotFoundError:
        raise InputError(field, str(p), "file not found") from None
    except json.JSONDecodeError as exc:
        raise InputError(field, str(p), f"malformed JSON at line {exc.lineno}: {exc.msg}") from None


def load_jobs(path: str | Path) -> list[JobSpec]:
    """Read and validate ``JOBS.json``."""
    return parse_jobs(_read_json(path, "jobs"))


#: built-in examples: ``small`` = four real CPU jobs, one per family, a few hundred steps each
#: (about 5–10 s of training each on one thread of the development machine); the last arrives later.
EXAMPLES: dict[str, list[dict[str, Any]]] = {
    "small": [
        {"id": "resnet", "job_type": "resnet-bs32", "steps": 240, "seed": 0},
        {"id": "lstm", "job_type": "lstm-bs10", "steps": 240, "seed": 1},
        {"id": "transformer", "job_type": "transformer-bs16", "steps": 200, "seed": 2},
        {"id": "recommendation", "job_type": "recommendation-bs128", "steps": 400, "seed": 3, "arrival": 4.0},
    ],
}


def example_jobs(name: str) -> list[JobSpec]:
    """The built-in example ``name`` (``small``)."""
    if name not in EXAMPLES:
        raise UnknownNameError("example", name, EXAMPLES)
    return parse_jobs(EXAMPLES[name], field=f"examples.{name}")


def example_throughputs_path(name: str = "small") -> Path:
    """The shipped throughput table of example ``name``: measured with ``policyopt profile`` on the
    2-core development machine (see ``docs/executor.md``)."""
    return _HERE / "data" / f"{name}_throughputs.json"


def load_throughput_table(path: str | Path) -> dict[str, Any]:
    """Read a profiler ``throughputs.json``."""
    table = _read_json(path, "throughputs")
    if not isinstance(table, Mapping) or not isinstance(table.get("job_types"), Mapping):
        raise InputError("throughputs.job_types", None, "a profiler table needs a 'job_types' object")
    return dict(table)


def check_table(table: Mapping[str, Any], jobs: Sequence[JobSpec], worker_types: Sequence[str]) -> None:
    """Every job type of ``jobs`` has a positive throughput on at least one worker type, and a
    number (possibly 0 = cannot run) for each worker type of the cluster."""
    job_types = table.get("job_types")
    if not isinstance(job_types, Mapping):
        raise InputError("throughputs.job_types", job_types, "must be an object")
    for jt in sorted({j.job_type for j in jobs}):
        entry = job_types.get(jt)
        if not isinstance(entry, Mapping) or not isinstance(entry.get("throughputs"), Mapping):
            raise InputError(f"throughputs.job_types.{jt}", None,
                             "job type not in the throughput table (profile it: policyopt profile --job-types ...)")
        thr = entry["throughputs"]
        for wt in worker_types:
            value = thr.get(wt)
            if value is None:
                raise InputError(f"throughputs.job_types.{jt}.throughputs.{wt}", None,
                                 "worker type not profiled for this job type")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InputError(f"throughputs.job_types.{jt}.throughputs.{wt}", value, "must be a number >= 0")
        if not any(float(thr[wt]) > 0 for wt in worker_types):
            raise InputError(f"throughputs.job_types.{jt}.throughputs", dict(thr),
                             "the job type cannot run on any worker type of the cluster")
