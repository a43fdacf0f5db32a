"""Convert a policy's allocation (plain dicts) into arrays over combinations x worker types.

A *combination* is a single job ``(a,)`` or a declared pair ``(a, b)`` that shares the same
workers. Row ``k`` of ``x`` holds ``X[k, c]``, the fraction of time combination ``k`` should run
on worker type ``c``. Validation enforces the constraints every Gavel-style allocation satisfies:

* ``0 <= X[k, c] <= 1``;
* per job ``j``: ``sum_c X[(j,), c] + sum_{pairs k containing j} sum_c X[k, c] <= 1``;
* per worker type ``c``: ``sum_k X[k, c] * scale_factor_k <= num_workers_c``;
* both jobs of a pair have the same scale factor (they share the same ``scale_factor`` workers).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from policyopt.errors import InputError, UnknownNameError

__all__ = ["AllocationArrays", "build_allocation_arrays", "validate_worker_counts", "TOLERANCE"]

#: Slack allowed on the sum constraints (solver output is only feasible up to this).
TOLERANCE = 1e-6


@dataclass(frozen=True)
class AllocationArrays:
    """Dense view of an allocation.

    ``combos[k]`` is ``(job,)`` or ``(job_a, job_b)``; singles come first, one per job, in
    ``job_ids`` order, then pairs. ``members[k]`` are job indices (``-1`` pads singles),
    ``scale[k]`` the number of workers the combination needs, ``x[k, c]`` its time fraction.
    """

    worker_types: tuple[str, ...]
    job_ids: tuple[str, ...]
    combos: tuple[tuple[str, ...], ...]
    members: np.ndarray
    scale: np.ndarray
    x: np.ndarray

    @property
    def num_singles(self) -> int:
        return len(self.job_ids)


def validate_worker_counts(worker_counts: Mapping[str, int]) -> dict[str, int]:
    """Check worker counts are non-negative integers; return a plain dict (order kept)."""
    if not isinstance(worker_counts, Mapping) or not worker_counts:
        raise InputError("worker_counts", worker_counts, "must be a non-empty mapping type -> count")
    out: dict[str, int] = {}
    for wt, n in worker_counts.items():
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
            raise InputError(f"worker_counts.{wt}", n, "must be a non-negative integer")
        out[str(wt)] = int(n)
    return out


def _scale_of(job: str, scale_factors: Mapping[str, int]) -> int:
    if job not in scale_factors:
        raise InputError(f"scale_factors.{job}", None, "missing scale factor for a job in the allocation")
    sf = scale_factors[job]
    if isinstance(sf, bool) or not isinstance(sf, (int, np.integer)) or sf < 1:
        raise InputError(f"scale_factors.{job}", sf, "must be a positive integer")
    return int(sf)


def _fraction(field: str, value: Any) -> float:
    try:
        f = float(value)
    except (TypeError, ValueError):
        raise InputError(field, value, "time fraction must be a number") from None
    if not np.isfinite(f) or f < 0.0 or f > 1.0 + TOLERANCE:
        raise InputError(field, value, "time fraction must lie in [0, 1]")
    return f


def build_allocation_arrays(
    allocation: Mapping[str, Mapping[str, float]],
    colocated: Sequence[Mapping[str, Any]],
    scale_factors: Mapping[str, int],
    worker_counts: Mapping[str, int],
) -> AllocationArrays:
    """Validate ``allocation`` / ``colocated`` and return :class:`AllocationArrays`.

    ``colocated`` entries look like ``{"jobs": [a, b], "worker_type": t, "fraction": f}``.
    A job that appears only in pairs gets an all-zero single row (it never runs alone).
    """
    counts = validate_worker_counts(worker_counts)
    worker_types = tuple(counts)
    type_index = {t: i for i, t in enumerate(worker_types)}
    if not isinstance(allocation, Mapping):
        raise InputError("allocation", allocation, "must be a mapping job -> {worker_type: fraction}")

    job_ids: list[str] = [str(j) for j in allocation]
    job_index = {j: i for i, j in enumerate(job_ids)}
    pair_rows: list[tuple[str, str]] = []
    pair_x: list[tuple[int, int, float]] = []  # (pair row, type index, fraction)
    pair_row_of: dict[tuple[str, str], int] = {}
    seen: set[tuple[int, int]] = set()
    for i, entry in enumerate(colocated):
        field = f"colocated[{i}]"
        if not isinstance(entry, Mapping) or not {"jobs", "worker_type", "fraction"} <= set(entry):
            raise InputError(field, entry, "needs keys 'jobs', 'worker_type', 'fraction'")
        jobs = entry["jobs"]
        if isinstance(jobs, str) or len(jobs) != 2 or str(jobs[0]) == str(jobs[1]):
            raise InputError(f"{field}.jobs", jobs, "must name two different jobs")
        a, b = sorted((str(jobs[0]), str(jobs[1])))
        wt = str(entry["worker_type"])
        if wt not in type_index:
            raise UnknownNameError(f"{field}.worker_type", wt, worker_types)
        frac = _fraction(f"{field}.fraction", entry["fraction"])
        if _scale_of(a, scale_factors) != _scale_of(b, scale_factors):
            raise InputError(f"{field}.jobs", jobs, "pair members have different scale factors")
        for j in (a, b):
            if j not in job_index:
                job_index[j] = len(job_ids)
                job_ids.append(j)
        key = (a, b)
        if key not in pair_row_of:
            pair_row_of[key] = len(pair_rows)
            pair_rows.append(key)
        cell = (pair_row_of[key], type_index[wt])
        if cell in seen:
            raise InputError(field, entry, "pair listed twice for the same worker type")
        seen.add(cell)
        pair_x.append((cell[0], cell[1], frac))

    n, p, nc = len(job_ids), len(pair_rows), len(worker_types)
    x = np.zeros((n + p, nc))
    for j, per_type in allocation.items():
        if not isinstance(per_type, Mapping):
            raise InputError(f"allocation.{j}", per_type, "must map worker_type -> fraction")
        for wt, f in per_type.items():
            if str(wt) not in type_index:
                raise UnknownNameError(f"allocation.{j}", wt, worker_types)
            x[job_index[str(j)], type_index[str(wt)]] = _fraction(f"allocation.{j}.{wt}", f)
    if pair_x:
        rows, cols, vals = (np.asarray(v) for v in zip(*pair_x))
        x[n + rows.astype(int), cols.astype(int)] = vals

    members = np.full((n + p, 2), -1, dtype=np.int64)
    members[:n, 0] = np.arange(n)
    if p:
        members[n:, 0] = [job_index[a] for a, _ in pair_rows]
        members[n:, 1] = [job_index[b] for _, b in pair_rows]
    job_scale = np.array([_scale_of(j, scale_factors) for j in job_ids], dtype=np.int64)
    scale = job_scale[members[:, 0]]

    # Per-job time budget: single row + every pair row the job belongs to.
    row_total = x.sum(axis=1)
    per_job = np.zeros(n)
    np.add.at(per_job, members[:, 0], row_total)
    second = members[:, 1] >= 0
    np.add.at(per_job, members[second, 1], row_total[second])
    bad = np.flatnonzero(per_job > 1.0 + TOLERANCE)
    if bad.size:
        j = job_ids[int(bad[0])]
        raise InputError(f"allocation.{j}", float(per_job[bad[0]]),
                         "time fractions of the job (alone and in pairs) sum to more than 1")
    # Per-type capacity: every combination occupies scale workers while it runs.
    used = (x * scale[:, None]).sum(axis=0)
    cap = np.array([counts[t] for t in worker_types], dtype=float)
    over = np.flatnonzero(used > cap + 1e-6 * np.maximum(cap, 1.0))
    if over.size:
        t = worker_types[int(over[0])]
        raise InputError(f"allocation[*].{t}", float(used[over[0]]),
                         f"sum of fraction x scale_factor exceeds the {counts[t]} workers of type {t}")

    combos = tuple((j,) for j in job_ids) + tuple(pair_rows)
    return AllocationArrays(worker_types, tuple(job_ids), combos, members, scale, x)
