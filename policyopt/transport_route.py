"""Small max-sum throughput and max-min fairness problems answered from arrays (no modeling layer).

For :class:`~formulations.max_sum_throughput.MaxSumThroughput` itself (not a subclass, which may
build differently) with ``algorithm="auto"`` on HiGHS and no ``threads``, ``time_limit`` or
``verbose`` option, on the plain allocation space without pair rows, at most
:data:`MAX_SUM_MAX_JOBS` jobs (a policy object it answered before: at most
:data:`~policyopt.solver_api.TRANSPORT_RESOLVE_MAX_JOBS`) and no model kept for re-solves,
:func:`solve` builds the LP's data from the space's arrays (throughputs, masks, scale factors,
worker counts) and solves it as the transportation LP of :mod:`policyopt.solvers.transport`
(the same optimum as the policy's LP: per job and worker type only the better of the type's
configurations matters), certified on the whole LP. The answer is the policy's result as the LP
path gives it (allocation clipped and masked, objective the optimal sum, solver ``"highs"``); the
answer's capacity prices are kept on the policy object, where the next problem's exact
transportation route (:mod:`policyopt.solvers.transport_exact`) starts from them. No basis is
asked for (``transport.solve(basis=False)``: up to
:data:`~policyopt.solvers.transport_small.MAX_CELLS` jobs × types the exact method on Python
lists, :mod:`policyopt.solvers.transport_small`). When
the route does not apply or its certificate fails it returns ``None`` and the policy solves as
before.

:func:`solve_max_min` does the same for :class:`~formulations.max_min_fairness.MaxMinFairness`
itself (heterogeneity-aware): its epigraph LP and its ``fill`` stage on the per-type columns
(:func:`policyopt.solvers.transport.solve_max_min`; per job and type the better configuration
raises the job's level and the fill objective alike at the same time and workers, so both optima
are the policy's), the result as the policy's own (objective ``t*``, ``extra["fill"]`` with the
stage's seconds, the smallest level, the normalized throughput before and after, ``steps`` None).
Jobs of equal data (throughputs, scale factor, weight: :func:`policyopt.aggregate_cold.job_classes`)
are one row of the LPs, its capacity entries and fill costs times the class's size (by symmetry,
averaging an optimum over identical jobs keeps it feasible and optimal: the same optima); then only
the classes' mask rows are computed and their equal shares taken from the per-type values
(``max(V, 0)`` is the best allowed placement's throughput per type), both declared on the space
(:meth:`~policyopt.allocation.AllocationSpace.declare_classes`) and the result gathered per class
(:meth:`~policyopt.policy.Policy.class_result`). Its first problem takes the route up to
:data:`MAX_MIN_MAX_JOBS` jobs (above ``TRANSPORT_MAX_JOBS``), its re-solves as max-sum's. It
returns ``None`` (the policy solves as before) where the route does not apply, the first LP's point
leaves a row by more than 1e-9, or the fill stage ends other than optimal.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from . import aggregate_cold, incremental, solver_api
from .allocation import AllocationSpace
from .problem import Problem
from .result import PolicyResult, Status, Timings
from .solvers import transport

__all__ = ["applies", "solve", "solve_max_min"]

#: set on a policy object this route answered: its later problems (re-solves) take the route only
#: up to ``TRANSPORT_RESOLVE_MAX_JOBS`` jobs, larger ones build and keep the model as before
_ANSWERED = "_answered_from_arrays"
#: set with it: the capacity prices of that answer, the next problem's start for the exact
#: transportation route (:mod:`policyopt.solvers.transport_exact`; any prices are a valid start)
_PRICES = "_transport_prices"
#: max-min fairness's first problem (a policy object the route has not answered) takes the route up
#: to this many jobs, above ``TRANSPORT_MAX_JOBS``: its epigraph LP on per-type columns (per class
#: of identical jobs where there are classes) costs less than the kept model's build and aggregated
#: solve there (Gavel's workload, a process's first call, CPU: 256 jobs 4.6 against 9.9 ms, 512 jobs
#: 4.7 against 9.8; docs/solvers-small.md); its re-solves keep ``TRANSPORT_RESOLVE_MAX_JOBS``
MAX_MIN_MAX_JOBS = 512
#: max-sum throughput's first problem takes the route up to this many jobs, above
#: ``TRANSPORT_MAX_JOBS`` (where no kept class basis answers first: max_sum_throughput's ``solve``):
#: its transportation LP by the exact method costs less than the kept model's build and solve there
#: (Gavel's workload at 256 jobs, a process's first call; docs/solvers-small.md); its re-solves keep
#: ``TRANSPORT_RESOLVE_MAX_JOBS``
MAX_SUM_MAX_JOBS = 256


def applies(policy: Any, space: AllocationSpace, first_most: int | None = None) -> bool:
    """Whether :func:`solve` may answer ``policy`` on ``space`` (see the module docstring);
    ``first_most``: the size limit of a first problem (default ``TRANSPORT_MAX_JOBS``)."""
    cfg = policy.config
    return (_size_applies(policy, len(space.jobs), first_most) and not cfg["verbose"] and cfg["threads"] is None
            and cfg["time_limit"] is None and incremental.eligible(policy, space)
            and incremental.state(policy) is None)


def _size_applies(policy: Any, n: int, first_most: int | None = None) -> bool:
    """Whether ``n`` jobs are few enough for the route (checked before the space is made);
    ``first_most``: the limit of a first problem (default ``TRANSPORT_MAX_JOBS``)."""
    if policy.__dict__.get(_ANSWERED):
        return n <= solver_api.TRANSPORT_RESOLVE_MAX_JOBS
    return n <= (solver_api.TRANSPORT_MAX_JOBS if first_most is None else first_most)


def solve(policy: Any, problem: Problem) -> PolicyResult | None:
    """``policy``'s result on ``problem`` by the transportation LP, or ``None`` (see the module
    docstring)."""
    t0 = time.perf_counter()
    if not _size_applies(policy, len(problem.jobs), MAX_SUM_MAX_JOBS):
        return None
    space = policy.make_space(problem)
    if not applies(policy, space, MAX_SUM_MAX_JOBS):
        return None
    values = space.T
    normalize = policy.config["normalize"]
    if normalize:
        values = values / space.equal_share_throughput()[:, None]
    mask = space.single_mask
    V, best = transport.per_type(values, mask, space.config_type, len(space.worker_types))
    if normalize and not np.isfinite(V[V > -np.inf]).all():  # (a job of zero equal share)
        return None
    t1 = time.perf_counter()
    ans = transport.solve(V, space.row_scale, space.counts, None, start=policy.__dict__.get(_PRICES), basis=False)
    if ans is None:
        return None
    t2 = time.perf_counter()
    X = _expand(ans.x, best, mask.shape)
    timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    policy.__dict__[_ANSWERED] = True
    policy.__dict__[_PRICES] = ans.p
    return policy.certified_result(space, X, Status.OPTIMAL, ans.objective, "highs", timings)


def solve_max_min(policy: Any, problem: Problem, fill_tolerance: float) -> PolicyResult | None:
    """``policy``'s (max-min fairness) result on ``problem`` from arrays, or ``None`` (see the
    module docstring); ``fill_tolerance``: the fill stage's relative slack on ``t*``."""
    if policy.agnostic:
        return None
    t0 = time.perf_counter()
    most = MAX_MIN_MAX_JOBS
    if not _size_applies(policy, len(problem.jobs), most):  # (a larger problem: no space made here)
        return None
    space = policy.make_space(problem)
    if not applies(policy, space, most):
        return None
    group, rep, mult = _classes(space)
    if group is None:
        mask = space.single_mask
        V, best = transport.per_type(space.T, mask, space.config_type, len(space.worker_types))
        eq = space.equal_share_throughput()
    else:  # the classes' rows only, declared on the space (its jobs' mask rows and equal shares gathered)
        T_rep = space.T.take(rep, axis=0)
        mask = space.single_mask_of(T_rep, space.scale.take(rep))
        V, best = transport.per_type(T_rep, mask, space.config_type, len(space.worker_types))
        # thr(g, X_equal) from the per-type values: max(V, 0) is the best allowed placement's
        # throughput per type (AllocationSpace._best_placement), so the same numbers
        eq = np.maximum(V, 0.0) @ (space.counts / space.counts.sum())
        space.declare_classes(group, mask, eq)
    a = policy.normalizer(space)
    if not np.isfinite(a).all():  # (a job of zero equal share: no finite level)
        return None
    a_rows = a if group is None else a.take(rep)
    fill = bool(policy.config["fill"])
    t1 = time.perf_counter()
    ans = transport.solve_max_min(V, space.row_scale if group is None else space.row_scale.take(rep), space.counts,
                                  a_rows, V / eq[:, None], fill, fill_tolerance, None, mult)
    if ans is None or (fill and not ans.filled):
        return None
    t2 = time.perf_counter()
    X = _expand(ans.x, best, mask.shape)  # (per class where there are classes)
    timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    policy.__dict__[_ANSWERED] = True
    result = policy.result if group is None else policy.class_result
    if not fill:
        return result(space, X, Status.OPTIMAL, ans.t, "highs", timings)
    info = {"seconds": ans.seconds, "min_level": float(ans.level.min()) if ans.level.size else ans.t,
            "normalized_throughput_before": ans.before, "normalized_throughput_after": ans.after, "steps": None}
    return result(space, X, Status.OPTIMAL, ans.t, "highs", timings, fill=info)


def _classes(space: AllocationSpace) -> tuple[np.ndarray | None, np.ndarray, np.ndarray | None]:
    """``(group, rep, mult)``: job ``j`` of class ``group[j]`` of representative ``rep[g]`` and
    ``mult[g]`` jobs (equal throughputs, scale factor and weight: :func:`aggregate_cold.job_classes`),
    or ``(None, all jobs, None)`` when no two jobs are alike."""
    n = len(space.jobs)
    found = aggregate_cold.job_classes(space.T, space.scale, space.weights)
    if found is None or found[1].size == n:
        return None, np.arange(n), None
    group, rep = found
    return group, rep, np.bincount(group, minlength=rep.size)


def _expand(x: np.ndarray, best: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """The allocation (rows × configurations): each row's ``x`` of each type on its best
    configuration of that type (``best``)."""
    jj, kk = np.nonzero(x)
    X = np.zeros(shape)
    X[jj, best[jj, kk]] = x[jj, kk]
    return X
