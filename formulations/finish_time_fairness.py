"""Finish-time fairness (Themis), heterogeneity-aware, solved exactly.

.. math::  \\min_X \\max_m \\rho_m(X), \\qquad
           \\rho_m(X) = \\frac{t_m + s_m/thr(m)}{c_m + s_m/thr(m, X_{iso})}

``t_m`` time since start, ``s_m`` steps remaining, ``c_m`` the cumulative isolated time (below),
``X_iso`` the isolated allocation (each of ``n`` jobs gets ``1/n`` of every type divided by its scale
factor, rows capped at 1). Jobs with no remaining steps are finished and take no part.

The denominator is the time the job would take in isolation: ``c_m + s_m/thr(m, X_iso)`` with
``c_m`` the job's ``isolated_time`` — the seconds it would have needed in isolation for the steps
it has done so far, which Gavel accumulates from call to call (``c_m += Δsteps_m/thr_prev(m,
X_iso)``; :class:`policyopt.mechanism.IsolatedTimeTracker` does that for the simulator, and a
caller may pass it per job). Without it ``c_m = t_m``, so ``ρ(X_iso) = 1`` and the optimum is
``≤ 1`` (sharing incentive); with it ``ρ(X_iso)`` may differ from 1 and is the starting upper bound.
The result carries ``isolated_throughputs`` (``thr(m, X_iso)`` per job) for the next call's update.

Method — parametric LP with certified bounds
--------------------------------------------
Write ``D_m = c_m + s_m/thr(m, X_iso)``, ``w_m = thr(m, X_iso)`` and ``v = 1/ρ``. For a level ``ρ`` (with
``v < D_m/t_m``) ``ρ_m(X) ≤ ρ  ⟺  thr(m) ≥ s_m/(ρ·D_m − t_m)``, a linear constraint whose right-hand
side alone depends on ``ρ``. Define the slack LP (the same matrix for every ``v``; only row bounds
change, so it is loaded once and re-solved in place with warm starts)

.. math::  G(v) = \\max_{X, \\lambda}\\; \\lambda \\;\\; \\text{s.t.}\\;\\;
           \\frac{thr(m)}{w_m} - \\lambda \\ge \\beta_m(v) = \\frac{s_m\\, v}{(D_m - t_m v)\\,w_m}

over the allocation polytope. Facts used (proofs in one line each):

1. ``1/v`` is achievable iff ``G(v) ≥ 0``; ``v* = 1/ρ* = max{v : G(v) ≥ 0}``.
2. ``G`` is strictly decreasing (every ``β_m`` strictly increases in ``v``).
3. ``G`` is concave: each ``β_m`` is convex in ``v``, so ``{(X, λ, v) : rows hold}`` is convex and the
   maximum of ``λ`` over its ``v``-slices is concave.
4. Any allocation ``X`` gives an upper bound ``ρ* ≤ ρ(X) = max_m ρ_m(X)``, exactly evaluated.
5. Dual-model bound: with LP duals ``π_m ≤ 0`` of the rows (HiGHS convention: sensitivity of the
   optimum to the row bound), the LP value ``V(β)`` is concave with supergradient ``π``, so
   ``G(v) ≤ Ĝ(v) = G(v_k) + Σ_m π_m (β_m(v) − β_m(v_k))`` for every ``v``. ``Ĝ`` is decreasing; its root
   ``v̂`` (a 1-D root find on numpy data, no LP) has ``G(v̂) ≤ 0``, hence ``v̂ ≥ v*`` and ``1/v̂ ≤ ρ*`` —
   a lower bound. ``Ĝ`` keeps ``β`` exact (only the LP is linearized) so it lies below the tangent
   ``G(v_k) + g(v − v_k)``, ``g = Σ π β'``, and is exact while the optimal basis does not change.
   Also ``G(v_k) < 0`` certifies ``1/v_k < ρ*``.

Algorithm: start at ``ρ_0 = max_m (t_m + s_m/thrmax_m)/D_m`` (no job can beat its best throughput: a
lower bound) with ``UB = 1`` (``X_iso``); at each ``v_k`` solve ``G``, tighten ``UB`` with ``ρ(X_k)`` and
``LB`` with facts 4–5, then move to the model root ``v̂`` (a Newton-type step on the piecewise-linear
LP value: monotone, and finite once the optimal basis is found); bisect ``[LB, UB]`` when no dual
step is available (a backend without duals). Stop when ``UB − LB ≤ tol·UB`` (default ``1e-7``): the
returned allocation's objective ``ρ(X) = UB`` is within ``tol`` of the optimum — exact to the
solver's tolerance, not a bisection stopped at a 5% bracket. When every ``t_m = 0``,
``β_m(v) = v`` is linear, ``G(v) = F − v`` and the first step is exact: one LP. Otherwise
typically 2–3 LP solves. With ``algorithm="auto"`` the backend picks per solve (the structured
fast path, interior point cold on large LPs, warm simplex re-solves: ``solver_api.auto_algorithm``).

**Second stage (``fill``, off by default).** The optimum pins only the jobs at ``max ρ``; the search's
allocation gives every other job just enough for ``ρ_m ≤ ρ*`` and may leave whole worker types idle.
``-o fill=true`` re-solves the loaded LP in place with ``λ = 0`` and rows ``thr(m)/w_m ≥ β_m(1/(ρ*(1 +
10⁻⁹)))`` (every ``ρ_m ≤ ρ*(1 + 10⁻⁹)``), maximizing ``Σ_m thr(m)/thr(m, X_equal)`` (as
``max_min_fairness``'s fill). ``extra["fill"]`` reports its seconds and whether its allocation was
used. Gavel's policy does not fill (ECOS returns an interior point of the optimal face), but Gavel's
simulator gives idle workers to jobs of zero priority (the simulator's ``backfill``).

``finish_time_fairness_agnostic``: the heterogeneity-agnostic baseline — by default
(``reference="one"``) the policy sees every throughput as 1 (pairs as packed/alone ratios), so it
equalizes time shares; the objective it reports is in those terms, and ``real_objective`` evaluates
``max ρ_m`` with the real throughputs. ``reference="fastest"`` is Gavel's own baseline
(``FinishTimeFairnessPolicy`` hard-codes each job's V100 throughput on every worker type): the policy
sees ``thr_m`` = the job's throughput on its fastest type, on every type it can run on (pairs: the
packed/alone ratio times that). The two differ only when ``t_m > 0`` or ``c_m > 0``: ``ρ_m`` adds
elapsed seconds ``t_m`` to remaining ``s_m/thr``, which with throughput 1 is counted in steps, so the
elapsed time barely weighs against the remaining work of a job with many steps.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from ._common import LoadedLP, isolated_throughput, max_throughput, policy_data
from .makespan import normalized_throughput_costs
from .max_min_fairness import FILL_TOLERANCE


def _model_root(lam: float, pi: np.ndarray, v: float, beta: Callable[[float], np.ndarray],
                dbeta: Callable[[float], np.ndarray], s: np.ndarray, D: np.ndarray, t: np.ndarray) -> float | None:
    """Root of the dual model ``Ĝ(w) = λ + Σ_m π_m (β_m(w) − β_m(v))`` (decreasing in ``w``).

    The LP value is concave in the right-hand sides with supergradient ``π`` (≤ 0), so ``Ĝ ≥ G``
    everywhere and its root ``ŵ ≥ v*``: ``1/ŵ`` is a lower bound on ``ρ*``. ``Ĝ`` keeps ``β`` exact
    (only the LP is linearized), so it lies below the tangent and is exact while the optimal basis
    does not change. ``None`` when the model gives no step (all ``π = 0``).
    """
    if not np.any(pi < 0):
        return None
    b0 = beta(v)

    def model(w: float) -> float:
        return lam + float(pi @ (beta(w) - b0))

    if lam == 0.0:
        return v
    if lam < 0:  # root in (0, v]: Ĝ(0) = λ − π·β(v) ≥ G(0) ≥ 0
        lo, hi = 0.0, v
    else:        # root in [v, w_max): β → ∞ as w → min D/t over jobs with π < 0 and t > 0
        live = (pi < 0) & (t > 0)
        w_max = float(np.min(D[live] / t[live])) if live.any() else np.inf
        if not np.isfinite(w_max):  # β linear where it matters: the tangent step is exact
            g = float(pi @ dbeta(v))
            return v - lam / g if g < 0 else None
        lo, hi = v, w_max * (1 - 1e-12)
        if model(hi) > 0:
            return None
    if model(lo) * model(hi) > 0:
        return None
    from scipy.optimize import brentq  # lazy: scipy.optimize costs ~0.2 s to import

    return float(brentq(model, lo, hi, xtol=1e-15 * max(v, 1.0), rtol=4 * np.finfo(float).eps, maxiter=200))


def isolated_times(space: AllocationSpace) -> np.ndarray:
    """``c_m`` per job of the space: the job's ``isolated_time``, else its ``time_since_start``."""
    c = np.fromiter((np.nan if j.isolated_time is None else j.isolated_time for j in space.problem.jobs),
                    float, len(space.problem.jobs))
    return np.where(np.isnan(c), space.time_since_start, c)


def finish_time_ratios(space: AllocationSpace, X: np.ndarray, T: np.ndarray, Tp: np.ndarray,
                       active: np.ndarray, iso: np.ndarray | None = None) -> np.ndarray:
    """``ρ_m(X) = (t_m + s_m/thr(m))/(c_m + s_m/thr(m, X_iso))`` of the active jobs under the data
    ``(T, Tp)`` (``inf`` where ``thr(m) = 0``); ``iso`` = ``thr(m, X_iso)`` of the active jobs under
    the same data, if already known."""
    thr = space.throughput_values(X, T, Tp)[active]
    if iso is None:
        iso = isolated_throughput(space, T, Tp)[active]
    s, t = space.steps[active], space.time_since_start[active]
    c = isolated_times(space)[active]
    with np.errstate(divide="ignore"):
        return (t + s / thr) / (c + s / iso)


@register_policy("finish_time_fairness")
class FinishTimeFairness(Policy):
    """Finish-time fairness (Themis): min max_m ρ_m, exact (parametric LP re-solved in place, certified bounds)."""

    pop_combine = "max"  # how POP recombines sub-problem objectives
    degenerate_lp = True  # ρ tied across many jobs at the optimum: a hint for algorithm=auto

    objective_sense = "min"
    agnostic = False
    options: ClassVar[tuple[Option, ...]] = (
        Option("tol", float, 1e-7, "relative gap (UB − LB)/UB at which the search stops"),
        Option("max_iterations", int, 60, "LP solves at most (the best allocation found is returned)"),
        Option("fill", bool, False, "second in-place LP: among allocations with max ρ within 1e-9 of the optimum, "
               "maximize the total normalized throughput (no capacity left idle that a job could use)"),
    )

    def _policy_data(self, space: AllocationSpace) -> tuple[np.ndarray, np.ndarray]:
        """``(T, Tp)`` the policy optimizes over (the real data here)."""
        return policy_data(space, self.agnostic)

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        T, Tp = self._policy_data(space)
        X_iso = space.full_from_single(space.isolated_allocation())
        active = np.flatnonzero(space.steps > 0)
        if active.size == 0:
            timings.build = time.perf_counter() - t0
            return self.result(space, X_iso, Status.OPTIMAL, None, "none", timings,
                               "no job has remaining steps: nothing to equalize (isolated allocation)")
        s, t = space.steps[active], space.time_since_start[active]
        iso_all = isolated_throughput(space, T, Tp)
        w = iso_all[active]
        D = isolated_times(space)[active] + s / w
        model = Model(self.name)
        X = space.add_allocation(model)
        lam = model.add_variable("lam")
        thr = space.throughput(X, T, Tp).select("jobs", active)
        model.add_constraints((thr / w - lam.expr()).between(-np.inf, np.inf), "ftf")
        model.maximize(lam)
        timings.build = time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        rows = lp.rows("ftf")

        # parametrize by v = 1/ρ: β_m(v) = s_m·v/((D_m − t_m·v)·w_m) is linear when t_m = 0
        def beta(v: float) -> np.ndarray:
            return s * v / ((D - t * v) * w)

        def dbeta(v: float) -> np.ndarray:
            return s * D / ((D - t * v) ** 2 * w)

        lb = float(np.max((t + s / max_throughput(space, T, Tp)[active]) / D))
        ub, X_best = float(np.max((t + s / w) / D)), X_iso  # ρ(X_iso): 1 unless isolated_time is given
        v = 1.0 / lb
        tol, status = self.config["tol"], Status.OPTIMAL
        for _ in range(self.config["max_iterations"]):
            lp.set_row_bounds(rows, beta(v), np.inf)
            raw = lp.solve()
            if not raw.ok or raw.x is None:
                status = raw.status
                break
            lam_k = float(lam.value(raw.x).ravel()[0])
            Xk = X.value(raw.x)
            rho_x = float(np.max(finish_time_ratios(space, Xk, T, Tp, active, w)))
            if rho_x < ub:
                ub, X_best = rho_x, Xk
            if lam_k < 0:
                lb = max(lb, 1.0 / v)  # G(v) < 0: level 1/v is not achievable
            root = None
            if raw.row_duals is not None:
                root = _model_root(lam_k, np.minimum(raw.row_duals[rows], 0.0), v, beta, dbeta, s, D, t)
                if root is not None:
                    lb = max(lb, min(1.0 / root, ub))
            if ub - lb <= tol * ub:
                break
            # the model root when it gives the new lower bound and moves; else bisect [lb, ub]
            moves = root is not None and 1.0 / root == lb and abs(root - v) > 1e-15 * v
            v = root if (moves and root is not None) else 2.0 / (lb + ub)
        else:
            status = Status.TIME_LIMIT
        gap = (ub - lb) / ub
        fill: dict[str, Any] | None = None
        if self.config["fill"] and status is Status.OPTIMAL:
            X_best, fill = self._fill(space, lp, rows, X, lam, T, Tp, active, w, beta, ub, X_best)
        extra: dict[str, Any] = {"lower_bound": lb, "relative_gap": gap, "lp_solves": lp.solves,
                 "isolated_throughputs": dict(zip(space.jobs.labels.tolist(), iso_all.tolist()))}
        if fill is not None:
            extra["fill"] = fill
        if self.agnostic:
            extra["real_objective"] = float(np.max(finish_time_ratios(space, X_best, space.T, space.Tp, active)))
        if status is Status.OPTIMAL:
            return self.result(space, X_best, status, ub, lp.solver_name, timings, **extra)
        # the best allocation seen is feasible (X_iso at worst, the documented fallback)
        msg = (f"{status.value}: stopped with relative gap {gap:.3g} after {lp.solves} LP(s); returning the "
               f"best allocation found ({'the isolated allocation' if X_best is X_iso else f'objective {ub:.6g}'})")
        return self.result(space, X_best, status, None, lp.solver_name, timings, msg, **extra)


    def _fill(self, space: AllocationSpace, lp: LoadedLP, rows: np.ndarray, X: Any, lam: Any, T: np.ndarray,
              Tp: np.ndarray, active: np.ndarray, w: np.ndarray, beta: Callable[[float], np.ndarray], ub: float,
              X_best: np.ndarray) -> tuple[np.ndarray, dict[str, Any]]:
        """Second stage: ``max Σ_m thr(m)/thr(m, X_equal)`` s.t. ``ρ_m(X) ≤ ρ*(1 + 10⁻⁹)`` for every
        active job (rows ``thr(m)/w_m ≥ β_m(1/(ρ*(1 + 10⁻⁹)))``, ``λ`` fixed at 0), in place. The
        allocation found by the search keeps these rows, so the LP is feasible; if it does not solve
        to optimality, or its ``max ρ`` exceeds ``ρ*(1 + 10⁻⁶)``, the search's allocation is kept."""
        t1 = time.perf_counter()
        lam_col = LoadedLP.cols(lam)
        cols, costs = normalized_throughput_costs(space, X, T, Tp)
        lp.set_row_bounds(rows, beta(1.0 / (ub * (1 + FILL_TOLERANCE))), np.inf)
        lp.set_col_bounds(lam_col, 0.0, 0.0)
        lp.set_costs(np.concatenate([lam_col, cols]), np.concatenate([[0.0], costs]))
        raw = lp.solve()
        out, used = X_best, False
        if raw.ok and raw.x is not None:
            Xf = X.value(raw.x)
            if float(np.max(finish_time_ratios(space, Xf, T, Tp, active, w))) <= ub * (1 + 1e-6):
                out, used = Xf, True
        return out, {"seconds": time.perf_counter() - t1, "used": used}


@register_policy("finish_time_fairness_agnostic",
                 doc="Heterogeneity-agnostic finish-time fairness: every throughput seen as 1, or as the job's "
                     "fastest-type throughput (reference=fastest, Gavel's baseline).")
class FinishTimeFairnessAgnostic(FinishTimeFairness):
    """Heterogeneity-agnostic finish-time fairness: every throughput seen as 1, or (``reference="fastest"``,
    Gavel's baseline) as the job's throughput on its fastest type."""

    agnostic = True
    options = FinishTimeFairness.options + (
        Option("reference", str, "one", "throughput the policy sees on every type: 'one' (1), or 'fastest' (the "
               "job's throughput on its fastest type, as Gavel's agnostic finish-time fairness, which uses V100's)",
               choices=("one", "fastest")),
    )

    def _policy_data(self, space: AllocationSpace) -> tuple[np.ndarray, np.ndarray]:
        """``T1·ref_m`` and ``Tp1·ref`` of each pair side (``ref_m = max_c T[m, c]``) with ``reference="fastest"``,
        else ``(T1, Tp1)`` = :meth:`AllocationSpace.agnostic_throughputs`."""
        T1, Tp1 = space.agnostic_throughputs()
        if self.config["reference"] == "one":
            return T1, Tp1
        ref = space.T.max(axis=1)
        Tp_ref = Tp1.copy()
        if space.num_pairs:
            for side in (0, 1):
                Tp_ref[:, :, side] = Tp1[:, :, side] * ref[space.pair_jobs[:, side]][:, None]
        return T1 * ref[:, None], Tp_ref
