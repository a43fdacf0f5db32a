"""Job lists for the executor: ``JOBS.json``, the built-in ``small`` example, throughput tables.

``JOBS.json`` is a list of jobs, or an object ``{"jobs": [...]}``::

    {"jobs": [{"id": "a", "job_type": "resnet-bs32", "steps": 300},
              {"id": "b", "job_type": "lstm-bs10", "steps": 300, "arrival": 5.0, "seed": 1, "weight": 2.0}]}

| field | meaning |
| --- | --- |
| ``id`` | unique job id (string; numbers are converted); its files live in ``<run-dir>/jobs/<name>`` where ``<name>`` is the id with every character but letters, digits, ``_ - .`` percent-encoded (:func:`job_file_name`) |
| ``job_type`` | a job type of :data:`policyopt.jobs.JOB_TYPES` |
| ``steps`` | steps to train (the job finishes at exactly this step count) |
| ``arrival`` | seconds after the run starts (executor clock), default 0 |
| ``seed`` | model and data seed, default 0 |
| ``weight`` | priority weight for the policy, default 1 |
| ``scale_factor`` | ``K``: the job trains data-parallel on ``K`` workers of one type (``K`` ranks), default 1 |

The **throughput table** the policy sees is a profiler table (``throughputs.json`` written by
``policyopt profile``, format in ``docs/jobs.md``): ``job_types[<type>].throughputs[<worker type>]``
in steps/s and optional ``colocated`` pairs. A job with ``scale_factor`` ``K > 1`` uses the
table's ``K``-worker row, ``job_types[<type>].scale_factors["K"].throughputs[<worker type>]`` (the
whole job's steps/s on ``K`` workers; ``policyopt profile --plans dpK-ga1-gc0`` measures it), and
``throughputs_unconsolidated`` there when the row has it (ranks spread over several machines).
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping, Sequence

from policyopt.errors import InputError, UnknownNameError

__all__ = ["JobSpec", "parse_jobs", "load_jobs", "example_jobs", "EXAMPLES", "example_throughputs_path",
           "load_throughput_table", "check_table", "table_row", "job_file_name"]

_FIELDS = ("id", "job_type", "steps", "arrival", "seed", "weight", "scale_factor")
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
    scale_factor: int = 1

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        if self.scale_factor == 1:  # the job list of runs made before scale factors existed
            del d["scale_factor"]
        return d


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
        job_file_name(jid, f"{where}.id")  # refused here, before anything runs, if it cannot be a file name
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
        if (isinstance(arrival, bool) or not isinstance(arrival, (int, float)) or not math.isfinite(arrival)
                or arrival < 0):
            raise InputError(f"{where}.arrival", arrival, "must be a finite number >= 0 (seconds)")
        seed = item.get("seed", 0)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InputError(f"{where}.seed", seed, "must be an integer >= 0")
        weight = item.get("weight", 1.0)
        if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not math.isfinite(weight) or weight <= 0:
            raise InputError(f"{where}.weight", weight, "must be a finite number > 0")
        scale = item.get("scale_factor", 1)
        if isinstance(scale, bool) or not isinstance(scale, int) or scale < 1:
            raise InputError(f"{where}.scale_factor", scale, "must be an integer >= 1 (workers the job trains on)")
        batch = known[jtype].batch_size
        if batch % scale:
            raise InputError(f"{where}.scale_factor", scale,
                             f"the global batch {batch} of {jtype} is not divisible by it "
                             "(each rank takes B/K samples)")
        out.append(JobSpec(jid, str(jtype), int(steps), float(arrival), int(seed), float(weight), int(scale)))
    return out


#: bytes of a job's directory name at most (file systems allow 255 per path component)
_MAX_NAME_BYTES = 200


def job_file_name(job_id: str, field: str = "id") -> str:
    """The directory name of job ``job_id`` under ``<run-dir>/jobs/`` — the one way a job id
    becomes part of a path. Letters, digits, ``_``, ``-`` and ``.`` stay; every other character
    is percent-encoded (``/`` → ``%2F``, so ``../x`` is ``..%2Fx``); an id made only of dots is
    encoded whole (``..`` → ``%2E%2E``). The mapping is one-to-one, and its result is a single
    path component that is never ``.`` or ``..``. An id that cannot be mapped (empty, not valid
    Unicode, or longer than 200 bytes once encoded) is an :class:`InputError` on ``field``."""
    from urllib.parse import quote

    if not isinstance(job_id, str) or not job_id:
        raise InputError(field, job_id, "a job id must be a non-empty string")
    try:
        name = quote(job_id, safe="", encoding="utf-8", errors="strict")
    except UnicodeEncodeError:
        raise InputError(field, job_id, "a job id must be valid Unicode (no lone surrogates)") from None
    name = name.replace("~", "%7E")
    if set(name) == {"."}:
        name = "%2E" * len(name)
    if len(name.encode()) > _MAX_NAME_BYTES:
        raise InputError(field, job_id, f"too long to name a file ({len(name.encode())} bytes once encoded, "
                                        f"at most {_MAX_NAME_BYTES})")
    return name


def _read_json(path: str | Path, field: str) -> Any:
    """A JSON file's content; a missing or malformed file is an :class:`InputError` on ``field``."""
    from policyopt import json_input

    return json_input.read(path, field)  # not UTF-8, too deep, huge integers, lone surrogates: one line


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
    # two 2-worker (data-parallel) and two 1-worker jobs for cpu1=2,cpu2=2
    "multi": [
        {"id": "resnet-dp2", "job_type": "resnet-bs32", "steps": 300, "seed": 0, "scale_factor": 2},
        {"id": "transformer-dp2", "job_type": "transformer-bs16", "steps": 240, "seed": 2, "scale_factor": 2},
        {"id": "lstm", "job_type": "lstm-bs10", "steps": 240, "seed": 1},
        {"id": "recommendation", "job_type": "recommendation-bs128", "steps": 400, "seed": 3, "arrival": 4.0},
    ],
}


def example_jobs(name: str) -> list[JobSpec]:
    """The built-in example ``name`` (``small``, ``multi``)."""
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
    from .configurations import parse_configurations

    parse_configurations(table)  # a malformed per-configuration list fails here, naming the field
    return dict(table)


def table_row(table: Mapping[str, Any], job_type: str, scale_factor: int = 1) -> tuple[str, Mapping[str, Any] | None]:
    """``(field, row)``: the table's entry with ``throughputs`` for ``job_type`` on ``scale_factor``
    workers (the job type's own entry for 1, ``scale_factors["K"]`` for ``K``), or ``None``."""
    entry = (table.get("job_types") or {}).get(job_type)
    field = f"throughputs.job_types.{job_type}"
    if scale_factor == 1 or not isinstance(entry, Mapping):
        return field, entry if isinstance(entry, Mapping) else None
    row = (entry.get("scale_factors") or {}).get(str(scale_factor))
    return f"{field}.scale_factors.{scale_factor}", row if isinstance(row, Mapping) else None


def check_table(table: Mapping[str, Any], jobs: Sequence[JobSpec],
                worker_types: Sequence[str] | Mapping[str, int]) -> None:
    """Every (job type, scale factor ``K``) of ``jobs`` has a positive throughput on at least one
    worker type, and a number (possibly 0 = cannot run) for each worker type of the cluster.

    ``worker_types`` may map each type to its worker count: a type with fewer than ``K`` workers
    can never hold a ``K``-worker job, so its ``K``-worker row may be absent (it counts as 0)."""
    job_types = table.get("job_types")
    if not isinstance(job_types, Mapping):
        raise InputError("throughputs.job_types", job_types, "must be an object")
    counts = dict(worker_types) if isinstance(worker_types, Mapping) else None
    for jt, k in sorted({(j.job_type, j.scale_factor) for j in jobs}):
        where, entry = table_row(table, jt, k)
        if entry is None or not isinstance(entry.get("throughputs"), Mapping):
            how = f" --plans dp{k}-ga1-gc0" if k > 1 else ""
            raise InputError(where, None, "not in the throughput table (profile it: policyopt profile "
                                          f"--job-types {jt}{how})")
        thr = entry["throughputs"]
        fits = [wt for wt in worker_types if counts is None or int(counts[wt]) >= k]
        if counts is not None and not fits:
            raise InputError(f"jobs[job_type={jt}].scale_factor", k,
                             f"needs {k} workers of one type; the cluster has at most {max(counts.values(), default=0)}")
        for wt in worker_types:
            value = thr.get(wt)
            if value is None and wt not in fits:
                continue
            if value is None:
                raise InputError(f"{where}.throughputs.{wt}", None, "worker type not profiled for this job type")
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
                raise InputError(f"{where}.throughputs.{wt}", value, "must be a number >= 0")
        if fits and not any(float(thr[wt]) > 0 for wt in fits):
            raise InputError(f"{where}.throughputs", dict(thr),
                             "the job type cannot run on any worker type of the cluster")
