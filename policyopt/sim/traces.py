"""Traces: seeded generators (Gavel, static, Shockwave/Tesserae mix) and CSV/JSON trace files.

A trace is a list of :class:`TraceJob` sorted by arrival time. Each job has a *job type*
(``"<model>#<scale factor>"``) whose measured throughputs (alone, and paired with other types)
come from a :class:`~policyopt.data.gavel.GavelThroughputs` table, a number of steps, an optional
weight, SLO and entity.

Gavel's generator (``gavel``): Poisson arrivals at ``rate`` jobs/hour (exponential gaps); model
drawn uniformly among the models measured at the drawn scale factor; scale factor 1/2/4/8 with
probabilities 0.70/0.10/0.15/0.05 (``multi_gpu``; else always 1); duration ``60·10^U(1.5,3)`` s
with probability 0.8 else ``60·10^U(3,4)`` s on a V100, converted to steps with the type's
consolidated V100 throughput; optional priority weight 5 for 20 % of jobs; optional SLO
``factor × duration`` with factor drawn from {1.2, 2, 10}.

Shockwave/Tesserae mix (``shockwave``): 80 jobs/hour by default; sizes S/M/L/XL with probabilities
0.72/0.20/0.05/0.03 and GPU counts 1/2/4/8 with 0.60/0.30/0.09/0.01. The published mix gives size
classes by duration; we use (our assumption, stated in docs/simulator.md) V100 durations drawn
log-uniformly in S: [0.2, 1) h, M: [1, 4) h, L: [4, 16) h, XL: [16, 48) h.

``static``: every job arrives at t = 0 (makespan experiments).
"""
from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from ..data.gavel import GavelThroughputs
from ..errors import InputError

__all__ = ["TraceJob", "gavel_trace", "shockwave_trace", "load_trace", "save_trace", "job_type_name",
           "parse_job_type", "assign_entities", "continue_arrivals", "GENERATORS"]

SCALE_FACTORS = (1, 2, 4, 8)


def job_type_name(model: str, scale_factor: int) -> str:
    return f"{model}#{scale_factor}"


def parse_job_type(name: str) -> tuple[str, int]:
    model, sep, sf = name.rpartition("#")
    if not sep or not sf.isdigit():
        raise InputError("job_type", name, "must look like '<model>#<scale factor>'")
    return model, int(sf)


@dataclass(frozen=True)
class TraceJob:
    """One job of a trace (``arrival`` in seconds; ``steps`` to run)."""

    id: str
    arrival: float
    job_type: str
    scale_factor: int
    steps: float
    weight: float = 1.0
    slo_seconds: float | None = None
    entity: str | None = None
    duration_v100: float | None = None  # the generator's drawn duration (for reference)
    priority: bool = False
    extra: dict[str, Any] = field(default_factory=dict, compare=False)


def _durations(rng: np.random.Generator, n: int) -> np.ndarray:
    short = rng.random(n) < 0.8
    exp = np.where(short, rng.uniform(1.5, 3.0, n), rng.uniform(3.0, 4.0, n))
    return 60.0 * 10.0 ** exp


def _arrivals(rng: np.random.Generator, n: int, rate_per_hour: float | None, static: bool) -> np.ndarray:
    if static or not rate_per_hour:
        return np.zeros(n)
    gaps = rng.exponential(3600.0 / rate_per_hour, n)
    gaps[0] = 0.0
    return np.cumsum(gaps)


def _draw_types(table: GavelThroughputs, rng: np.random.Generator, sfs: np.ndarray) -> list[int]:
    v100 = table.configs.index("v100")
    out = []
    for sf in sfs:
        cands = table.types_with_scale(int(sf))
        cands = cands[table.alone[cands, v100] > 0]
        out.append(int(rng.choice(cands)))
    return out


def gavel_trace(table: GavelThroughputs, num_jobs: int, rate_per_hour: float | None = None, *, seed: int = 0,
                multi_gpu: bool = False, static: bool = False, priorities: bool = False,
                slo_factors: Sequence[float] | None = None) -> list[TraceJob]:
    """Gavel's synthetic trace generator (see module docstring)."""
    if num_jobs <= 0:
        raise InputError("jobs", num_jobs, "must be a positive number of jobs")
    if not static and not (rate_per_hour and rate_per_hour > 0):
        raise InputError("rate", rate_per_hour, "a positive arrival rate (jobs/hour) is required unless static")
    rng = np.random.default_rng(seed)
    arrivals = _arrivals(rng, num_jobs, rate_per_hour, static)
    sfs = rng.choice(SCALE_FACTORS, size=num_jobs, p=[0.7, 0.1, 0.15, 0.05]) if multi_gpu else np.ones(num_jobs, int)
    types = _draw_types(table, rng, sfs)
    dur = _durations(rng, num_jobs)
    weights = np.where(rng.random(num_jobs) < 0.2, 5.0, 1.0) if priorities else np.ones(num_jobs)
    slo = None
    if slo_factors:
        slo = rng.choice(np.asarray(slo_factors, float), size=num_jobs) * dur
    v100 = table.configs.index("v100")
    jobs = []
    for i in range(num_jobs):
        model, sf = table.job_types[types[i]]
        steps = float(np.ceil(dur[i] * table.alone[types[i], v100]))
        jobs.append(TraceJob(str(i), float(arrivals[i]), job_type_name(model, sf), sf, steps, float(weights[i]),
                             None if slo is None else float(slo[i]), None, float(dur[i])))
    return jobs


SHOCKWAVE_SIZES = {"S": (0.2, 1.0), "M": (1.0, 4.0), "L": (4.0, 16.0), "XL": (16.0, 48.0)}


def shockwave_trace(table: GavelThroughputs, num_jobs: int, rate_per_hour: float = 80.0, *, seed: int = 0,
                    static: bool = False) -> list[TraceJob]:
    """Shockwave/Tesserae job mix (see module docstring for the duration assumption)."""
    if num_jobs <= 0:
        raise InputError("jobs", num_jobs, "must be a positive number of jobs")
    rng = np.random.default_rng(seed)
    arrivals = _arrivals(rng, num_jobs, rate_per_hour, static)
    sizes = rng.choice(list(SHOCKWAVE_SIZES), size=num_jobs, p=[0.72, 0.20, 0.05, 0.03])
    sfs = rng.choice(SCALE_FACTORS, size=num_jobs, p=[0.60, 0.30, 0.09, 0.01])
    types = _draw_types(table, rng, sfs)
    v100 = table.configs.index("v100")
    jobs = []
    for i in range(num_jobs):
        lo, hi = SHOCKWAVE_SIZES[str(sizes[i])]
        dur = 3600.0 * float(np.exp(rng.uniform(np.log(lo), np.log(hi))))
        model, sf = table.job_types[types[i]]
        steps = float(np.ceil(dur * table.alone[types[i], v100]))
        jobs.append(TraceJob(str(i), float(arrivals[i]), job_type_name(model, sf), sf, steps,
                             duration_v100=dur, extra={"size": str(sizes[i])}))
    return jobs


#: trace generators by name: ``generator(table, num_jobs, ...) -> list[TraceJob]``
GENERATORS: dict[str, Callable[..., list[TraceJob]]] = {"gavel": gavel_trace, "shockwave": shockwave_trace}

_COLUMNS = ["id", "arrival", "job_type", "scale_factor", "steps", "weight", "slo_seconds", "entity", "priority"]


def save_trace(jobs: Sequence[TraceJob], path: str | Path) -> None:
    """Write a trace as CSV (``.csv``) or JSON (anything else)."""
    path = Path(path)
    if path.suffix == ".csv":
        with path.open("w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=_COLUMNS)
            w.writeheader()
            for j in jobs:
                d = asdict(j)
                w.writerow({k: ("" if d[k] is None else d[k]) for k in _COLUMNS})
    else:
        path.write_text(json.dumps([{k: v for k, v in asdict(j).items() if k != "extra"} for j in jobs], indent=1))


def load_trace(path: str | Path, table: GavelThroughputs | None = None) -> list[TraceJob]:
    """Read a CSV or JSON trace; every error names the row and field. With ``table``, job types
    are checked against the throughput data."""
    path = Path(path)
    if not path.exists():
        raise InputError("trace", str(path), "file not found")
    if path.suffix == ".csv":
        with path.open(newline="") as f:
            rows: list[dict[str, Any]] = list(csv.DictReader(f))
        src = "trace.csv"
    else:
        try:
            rows = json.loads(path.read_text())
        except json.JSONDecodeError as exc:
            raise InputError(str(path), f"line {exc.lineno}", f"malformed JSON: {exc.msg}") from None
        if not isinstance(rows, list):
            raise InputError("trace", type(rows).__name__, "a JSON trace must be a list of job objects")
        src = "trace"
    known = None
    if table is not None:
        known = {job_type_name(m, s) for m, s in table.job_types}
    jobs = []
    seen: set[str] = set()
    for i, r in enumerate(rows):
        where = f"{src}[{i}]"
        if not isinstance(r, dict):
            raise InputError(where, r, "must be an object")
        for req in ("arrival", "job_type", "steps"):
            if r.get(req) in (None, ""):
                raise InputError(f"{where}.{req}", r.get(req), "is required")
        jid = str(r.get("id") or i)
        if jid in seen:
            raise InputError(f"{where}.id", jid, "duplicate job id")
        seen.add(jid)
        jt = str(r["job_type"])
        model, sf_from_name = parse_job_type(jt)
        if known is not None and jt not in known:
            raise InputError(f"{where}.job_type", jt, "not in the throughput data")

        def num(key: str, default: float | None = None, minimum: float = 0.0, strict: bool = False,
                r: dict[str, Any] = r, where: str = where) -> float | None:
            v = r.get(key)
            if v in (None, ""):
                return default
            try:
                x = float(v)
            except (TypeError, ValueError):
                raise InputError(f"{where}.{key}", v, "must be a number") from None
            if not np.isfinite(x) or x < minimum or (strict and x == minimum):
                raise InputError(f"{where}.{key}", v, f"must be finite and {'>' if strict else '>='} {minimum:g}")
            return x

        def need(key: str, default: float | None = None, strict: bool = False, where: str = where,
                 num: Callable[..., float | None] = num) -> float:
            x = num(key, default, strict=strict)
            if x is None:
                raise InputError(f"{where}.{key}", None, "is required")
            return x

        sf = int(num("scale_factor", float(sf_from_name), 1.0) or 1)
        if sf != sf_from_name:
            raise InputError(f"{where}.scale_factor", sf, f"does not match job_type {jt!r}")
        prio = r.get("priority")
        jobs.append(TraceJob(jid, need("arrival"), jt, sf, need("steps", strict=True),
                             need("weight", 1.0, strict=True), num("slo_seconds", None, strict=True),
                             (r.get("entity") or None), None, str(prio).lower() in ("true", "1")))
    jobs.sort(key=lambda j: (j.arrival, j.id))
    return jobs


def assign_entities(jobs: Sequence[TraceJob], entities: Sequence[str], *, seed: int = 0,
                    probabilities: Sequence[float] | None = None) -> list[TraceJob]:
    """A copy of ``jobs`` with each job's ``entity`` drawn (seeded) from ``entities`` — uniformly, or
    with ``probabilities`` (for the hierarchical-policy experiments)."""
    names = list(entities)
    if not names:
        raise InputError("entities", names, "at least one entity is required")
    p = None
    if probabilities is not None:
        p = np.asarray(probabilities, float)
        if p.shape != (len(names),) or np.any(p < 0) or not np.isclose(p.sum(), 1.0):
            raise InputError("probabilities", list(probabilities),
                             "one non-negative probability per entity, summing to 1")
    rng = np.random.default_rng(np.random.SeedSequence([int(seed), 11]))
    draw = rng.choice(len(names), size=len(jobs), p=p)
    return [replace(j, entity=names[int(k)]) for j, k in zip(jobs, draw)]


def _more_seed(seed: int, chunk: int = 0) -> int:
    """The seed of chunk ``chunk`` of the jobs that continue trace ``seed`` (a stream of its own per chunk,
    so the first jobs, and the earlier chunks, are unchanged by a longer continuation)."""
    key = [int(seed), 21] if chunk == 0 else [int(seed), 21, int(chunk)]
    return int(np.random.SeedSequence(key).generate_state(1)[0])


def continue_arrivals(trace: Sequence[Any], more: Sequence[Any]) -> list[Any]:
    """``trace`` followed by ``more[1:]``: ``more`` is a trace of the same generator and rate whose first
    job arrives at 0, so its arrival times shifted by ``trace``'s last arrival continue the Poisson
    process (the gaps of ``more`` are exponential draws); the added jobs are numbered on from ``len(trace)``."""
    last = max(j.arrival for j in trace)
    n = len(trace)
    return [*trace, *(replace(j, id=str(n + i), arrival=last + j.arrival) for i, j in enumerate(more[1:]))]
