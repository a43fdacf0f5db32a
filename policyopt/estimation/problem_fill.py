"""Fill a :class:`~policyopt.problem.Problem`'s missing colocations (and multi-GPU throughputs) from
estimates.

:func:`predicted_colocations` gives one :class:`~policyopt.problem.TypeColocation` per unordered pair
of job types present in the problem and worker type the estimator knows, for which the problem's
table has no entry and the estimator predicts the pair feasible::

    throughputs = (N̂[A, w, B] · alone(A, w),  N̂[B, w, A] · alone(B, w))

with ``alone(X, w)`` the mean throughput on ``w`` of the problem's jobs of type ``X`` (so
predictions are in the problem's own units). :func:`estimate_problem` returns the problem with
those entries added to ``colocated_types`` and, with a :class:`~.scaling.ScalingModel`, with
multi-GPU jobs' missing configurations filled by ``g · e[c, g] · thr(1, type(c))`` (single-GPU
throughput from the estimator's ``alone`` of the type ``"<model>#1"``).

Multi-GPU job types (``scale_factor > 1``) get pair estimates only with ``multi_gpu_pairs=True``:
by linear scaling of packed pairs the normalized throughputs of ``"<model>#g"`` equal those of
``"<model>#1"`` (Gavel's file has no multi-GPU pair measurements to check this against).
"""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..errors import InputError, UnknownNameError
from ..problem import Problem, TypeColocation, physical_type, UNCONSOLIDATED_SUFFIX
from .colocation import ColocationEstimator
from .scaling import ScalingModel

__all__ = ["estimate_problem", "predicted_colocations", "split_label"]


def split_label(label: str) -> tuple[str, int] | None:
    """``"<model>#<sf>"`` → ``(model, sf)``; ``None`` if the label does not follow that convention."""
    model, sep, sf = label.rpartition("#")
    return (model, int(sf)) if sep and model and sf.isdigit() else None


def _type_alone(problem: Problem, types: list[str], configs: list[str]) -> np.ndarray:
    """Mean throughput ``[type, config]`` over the problem's jobs of each type (0 where none runs)."""
    arr = problem.arrays
    pos = {c: i for i, c in enumerate(arr.configs)}
    tpos = {t: i for i, t in enumerate(types)}
    code = np.array([tpos.get(j.job_type, -1) if j.job_type is not None else -1 for j in problem.jobs], np.int64)
    has = code >= 0
    cols = np.array([pos.get(c, -1) for c in configs], np.int64)
    T = np.where(cols[None, :] >= 0, arr.T[:, np.maximum(cols, 0)], 0.0)
    total = np.zeros((len(types), len(configs)))
    cnt = np.zeros((len(types), len(configs)))
    np.add.at(total, code[has], T[has])
    np.add.at(cnt, code[has], (T[has] > 0).astype(float))
    return np.where(cnt > 0, total / np.maximum(cnt, 1), 0.0)


def _estimator_rows(problem: Problem, est: ColocationEstimator, multi_gpu_pairs: bool
                    ) -> tuple[list[str], list[int]]:
    """Problem job types that take part, and the estimator row standing for each."""
    sf_of: dict[str, int] = {}
    first_job: dict[str, str] = {}
    for j in problem.jobs:
        if j.job_type is not None:
            sf_of.setdefault(j.job_type, j.scale_factor)
            first_job.setdefault(j.job_type, j.id)
    types, rows = [], []
    for t in sorted(sf_of):
        if t in est._pos:
            types.append(t)
            rows.append(est._pos[t])
            continue
        if sf_of[t] > 1:
            parts = split_label(t)
            single = f"{parts[0]}#1" if parts else None
            if multi_gpu_pairs and single in est._pos:
                types.append(t)
                rows.append(est._pos[single])
            continue  # multi-GPU types are packed only when asked (and their single-GPU type is known)
        raise UnknownNameError(f"jobs[{first_job[t]}].job_type", t, est.labels)
    return types, rows


def predicted_colocations(problem: Problem, estimator: ColocationEstimator, method: str = "completed", *,
                          multi_gpu_pairs: bool = False, margin: float = 0.0,
                          infeasible_above: float | None = None) -> list[TypeColocation]:
    """Estimated :class:`TypeColocation` entries for the pairs of job types the problem's table lacks
    (see the module docstring); ``margin`` is subtracted from every predicted normalized throughput
    (a pessimistic estimate: a policy then packs only pairs whose predicted gain exceeds the error);
    ``infeasible_above`` overrides the estimator's feasibility cut-off."""
    if not isinstance(problem, Problem):
        raise InputError("problem", type(problem).__name__, "must be a policyopt Problem")
    if isinstance(margin, bool) or not isinstance(margin, (int, float)) or not 0 <= margin < 1:
        raise InputError("margin", margin, "must be a number in [0, 1)")
    types, rows = _estimator_rows(problem, estimator, multi_gpu_pairs)
    cfgs = [w for w in estimator.worker_types if w in problem.configurations]
    if not types or not cfgs:
        return []
    wcol = np.array([estimator.worker_index(w) for w in cfgs], np.int64)
    r = np.array(rows, np.int64)
    P = estimator.predict_matrix(method)[np.ix_(r, wcol, r)]      # (n, C, n)
    F = estimator.predict_feasible(infeasible_above=infeasible_above)[np.ix_(r, wcol, r)]
    alone = _type_alone(problem, types, cfgs)                       # (n, C)
    tpos = {t: i for i, t in enumerate(types)}
    cpos = {c: i for i, c in enumerate(cfgs)}
    have = np.zeros(P.shape, bool)
    known = [(tpos[tc.job_types[0]], cpos[tc.worker_type], tpos[tc.job_types[1]])
             for tc in problem.colocated_types
             if tc.job_types[0] in tpos and tc.job_types[1] in tpos and tc.worker_type in cpos]
    if known:
        k = np.array(known, np.int64)
        have[k[:, 0], k[:, 1], k[:, 2]] = have[k[:, 2], k[:, 1], k[:, 0]] = True
    a, c, b = np.nonzero(F & ~have)
    keep = a <= b
    a, c, b = a[keep], c[keep], b[keep]
    ta = np.maximum(P[a, c, b] - margin, 0.0) * alone[a, c]
    tb = np.maximum(P[b, c, a] - margin, 0.0) * alone[b, c]
    ok = (ta > 0) & (tb > 0)
    return [TypeColocation((types[x], types[y]), cfgs[z], (float(u), float(v)))
            for x, z, y, u, v in zip(a[ok].tolist(), c[ok].tolist(), b[ok].tolist(), ta[ok].tolist(), tb[ok].tolist())]


def _fill_scaling(problem: Problem, est: ColocationEstimator, scaling: ScalingModel) -> tuple[Any, ...]:
    """Jobs with ``scale_factor > 1``: missing configurations filled by the scaling model."""
    names = problem.cluster.names
    jobs = []
    for j in problem.jobs:
        parts = split_label(j.job_type) if j.job_type else None
        single = f"{parts[0]}#1" if parts else None
        if j.scale_factor <= 1 or single not in est._pos:
            jobs.append(j)
            continue
        row = est.alone[est._pos[single]]
        cand = [(w, c) for w in est.worker_types if w in names
                for c in (w, w + UNCONSOLIDATED_SUFFIX) if c not in j.throughputs]
        cand = [(w, c) for w, c in cand if np.isfinite(row[est.worker_index(w)])]
        if not cand:
            jobs.append(j)
            continue
        single_thr = np.array([row[est.worker_index(w)] for w, _ in cand])
        pred = scaling.predict(single_thr, np.full(len(cand), j.scale_factor), [c for _, c in cand])
        thr = dict(j.throughputs)
        thr.update({c: float(v) for (_, c), v in zip(cand, pred.tolist()) if physical_type(c) in names})
        jobs.append(dataclasses.replace(j, throughputs=thr))
    return tuple(jobs)


def estimate_problem(problem: Problem, estimator: ColocationEstimator | None = None, method: str = "completed", *,
                     scaling: ScalingModel | None = None, multi_gpu_pairs: bool = False,
                     margin: float = 0.0, infeasible_above: float | None = None) -> Problem:
    """``problem`` with estimated colocations added (measured entries are kept as they are).

    ``estimator`` defaults to one fitted on the problem's own ``colocated_types`` table
    (:meth:`ColocationEstimator.from_problem`). ``method``: any of
    :data:`~policyopt.estimation.colocation.METHODS`. ``scaling``: also fill multi-GPU jobs' missing
    configurations (see the module docstring). ``margin``, ``infeasible_above``: see
    :func:`predicted_colocations` (``margin=0.1, infeasible_above=0.2`` is the cautious setting
    measured in docs/estimation.md).
    """
    if not isinstance(problem, Problem):
        raise InputError("problem", type(problem).__name__, "must be a policyopt Problem")
    est = estimator if estimator is not None else ColocationEstimator.from_problem(problem).fit()
    jobs = problem.jobs if scaling is None else _fill_scaling(problem, est, scaling)
    base = problem if scaling is None else Problem(problem.cluster, jobs, problem.colocated, problem.entities,
                                                   problem.colocated_types)
    extra = predicted_colocations(base, est, method, multi_gpu_pairs=multi_gpu_pairs, margin=margin,
                                  infeasible_above=infeasible_above)
    return Problem(problem.cluster, jobs, problem.colocated, problem.entities,
                   tuple(problem.colocated_types) + tuple(extra))
