"""Minimum makespan: finish all remaining work as early as possible — one exact LP.

.. math::  \\min_X \\max_m \\frac{s_m}{thr(m)}

The objective is quasi-convex in ``X``, but the substitution ``z = 1/M`` makes it linear:
``s_m/thr(m) ≤ M  ⟺  thr(m) ≥ s_m·z`` (``thr(m) ≥ 0``, ``M > 0``), so

.. math::  \\max_{X, z}\\; z \\quad \\text{s.t.}\\quad thr(m) - s_m z \\ge 0 \\;\\; \\forall m:\\, s_m > 0

plus the allocation constraints, and ``M* = 1/z*``. The LP and the original problem have the same
optimal allocations, so the makespan is exact to the LP solver's tolerance — no bisection (Gavel
bisected on ``M`` to a 5% bracket).

Scaling: ``s_m`` (10^5–10^7 steps) against throughputs (1–10^3 steps/s) and time fractions makes the
rows badly scaled. Each row is divided by ``s_m/τ`` and ``z = u/τ`` with ``τ`` the makespan of the
isolated allocation, so row ``m`` reads ``(τ/s_m)·thr(m) − u ≥ 0``: coefficients are ``O(1)`` and
``u* ≥ 1`` (the isolated allocation is feasible with ``u = 1``). Reported objective: the makespan
``max_m s_m/thr(m)`` of the returned allocation (seconds), which equals ``M* = τ/u*`` (also reported,
as ``optimal_makespan``) to the solver's tolerance. Jobs with no remaining steps take no part.

``fill=True`` (second LP, re-solved in place): among makespan-optimal allocations, maximize the
total normalized throughput ``Σ_m thr(m)/thr(m, X_equal)`` (``u`` is held at ``u*(1 − 1e-7)``; if that
LP fails the first optimum is returned), so capacity the
bottleneck jobs do not need is not left idle.
"""
from __future__ import annotations

import time

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model, Variable
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from ._common import LoadedLP, isolated_throughput


def makespan_rows(model: Model, space: AllocationSpace, X: Variable, active: np.ndarray,
                  tau: float) -> Variable:
    """Add ``u ≥ 0`` and rows ``(τ/s_m)·thr(m) − u ≥ 0`` for the jobs at positions ``active``
    (block ``"makespan"``); the makespan of the allocation is ``τ/u``."""
    u = model.add_variable("u", lower=0.0)
    thr = space.throughput(X).select("jobs", active)
    model.add_constraints(thr * (tau / space.steps[active]) - u.expr() >= 0.0, "makespan")
    return u


def isolated_makespan(space: AllocationSpace, active: np.ndarray) -> float:
    """``τ = max_m s_m / thr(m, X_iso)`` over the active jobs (finite: every job runs under X_iso)."""
    thr_iso = isolated_throughput(space, space.T, space.Tp)
    return float(np.max(space.steps[active] / thr_iso[active]))


def normalized_throughput_costs(space: AllocationSpace, X: Variable, T: np.ndarray | None = None,
                                Tp: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """LP columns of ``X`` and their coefficients in ``Σ_m thr(m)/thr(m, X_equal)`` (under the
    throughput data ``T``, ``Tp``; default the problem's)."""
    flat = X.cols.ravel()
    ok = flat >= 0
    T_ = space.T if T is None else T
    if not space.num_pairs and type(space).throughput_matrix is AllocationSpace.throughput_matrix \
            and flat.size == T_.size:
        # without pair rows each slot has one term: T[m,c] / thr(m, X_equal) where the job can run
        dense = np.zeros(T_.shape)
        np.divide(T_, space.equal_share_throughput(T)[:, None], out=dense, where=space.single_mask)
        return flat[ok], dense.ravel()[ok]
    M = space.throughput_matrix(T, Tp)
    per_slot = np.bincount(M.cols, weights=M.vals / space.equal_share_throughput(T)[M.rows],
                           minlength=M.shape[1])
    return flat[ok], per_slot[ok]


@register_policy("makespan")
class Makespan(Policy):
    """Minimum makespan: min max_m s_m/thr(m), one exact LP via z = 1/M (rows scaled)."""

    pop_combine = "max"  # how POP recombines sub-problem objectives

    objective_sense = "min"
    options = (Option("fill", bool, False,
                      "second in-place LP: among makespan-optimal allocations maximize Σ normalized throughput"),)

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        active = np.flatnonzero(space.steps > 0)
        if active.size == 0:
            timings.build = time.perf_counter() - t0
            return self.result(space, space.full_from_single(space.isolated_allocation()), Status.OPTIMAL, 0.0,
                               "none", timings, "no job has remaining steps: makespan 0 (isolated allocation)")
        tau = isolated_makespan(space, active)
        model = Model(self.name)
        X = space.add_allocation(model)
        u = makespan_rows(model, space, X, active, tau)
        model.maximize(u)
        timings.build = time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        raw = lp.solve()
        if not raw.ok or raw.x is None:
            Xf, msg = self.fallback(space, raw, X)
            return self.result(space, Xf, raw.status, None, lp.solver_name, timings, msg)
        u_star = float(u.value(raw.x).ravel()[0])
        x = raw.x
        if self.config["fill"]:
            cols, costs = normalized_throughput_costs(space, X)
            lp.set_col_bounds(LoadedLP.cols(u), u_star * (1 - 1e-7), np.inf)
            lp.set_costs(LoadedLP.cols(u), 0.0)
            lp.set_costs(cols, costs)
            raw2 = lp.solve()
            if raw2.ok and raw2.x is not None:
                x = raw2.x
        Xv = X.value(x)
        with np.errstate(divide="ignore"):
            achieved = float(np.max(space.steps[active] / space.throughput_values(Xv)[active]))
        return self.result(space, Xv, Status.OPTIMAL, achieved, lp.solver_name, timings,
                           lp_solves=lp.solves, optimal_makespan=tau / u_star)
