"""Seeded synthetic interchange problems for service tests, docs and the load benchmark.

Throughputs (steps/s) per job are drawn as ``v100 ~ U(20, 60)``, ``p100 = v100 · U(0.5, 0.8)``,
``k80 = v100 · U(0.15, 0.4)`` (faster types are faster for every job, by job-dependent factors, as
in Gavel's measurements); scale factors from {1, 1, 1, 2, 4}; steps remaining ``U(1e4, 1e6)``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["synthetic_cluster", "synthetic_jobs", "synthetic_problem"]

TYPES = ("v100", "p100", "k80")


def synthetic_cluster(gpus_per_type: int, gpus_per_server: int = 4) -> dict[str, Any]:
    """``{"worker_types": {t: {"count", "gpus_per_server"}}}`` with the same count for each type."""
    return {"worker_types": {t: {"count": int(gpus_per_type), "gpus_per_server": int(gpus_per_server)}
                             for t in TYPES}}


def synthetic_jobs(n: int, seed: int = 0, prefix: str = "job", max_scale: int = 4) -> list[dict[str, Any]]:
    """``n`` interchange job objects (ids ``{prefix}{i}``) drawn as in the module docstring."""
    rng = np.random.default_rng(seed)
    v100 = rng.uniform(20.0, 60.0, n)
    thr = np.stack([v100, v100 * rng.uniform(0.5, 0.8, n), v100 * rng.uniform(0.15, 0.4, n)], axis=1)
    scales = rng.choice(np.array([1, 1, 1, 2, 4]), n)
    scales = np.minimum(scales, max_scale)
    steps = rng.uniform(1e4, 1e6, n)
    return [{"id": f"{prefix}{i}", "throughputs": dict(zip(TYPES, row)), "scale_factor": int(s),
             "steps_remaining": float(st)}
            for i, (row, s, st) in enumerate(zip(thr.round(3).tolist(), scales.tolist(), steps.round(0).tolist()))]


def synthetic_problem(n_jobs: int, gpus_per_type: int | None = None, seed: int = 0) -> dict[str, Any]:
    """An interchange problem with ``n_jobs`` jobs on three worker types (default ``n_jobs // 2``
    GPUs per type, at least 4)."""
    g = max(4, n_jobs // 2) if gpus_per_type is None else gpus_per_type
    return {"cluster": synthetic_cluster(g), "jobs": synthetic_jobs(n_jobs, seed)}
