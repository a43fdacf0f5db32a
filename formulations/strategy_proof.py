"""Strategy-proof max-min fairness: Nash social welfare with partial allocation (PA).

Gavel's ``max_min_fairness_strategy_proof`` (after Cole, Gkatzelis and Goel's PA mechanism).
With normalized throughputs ``u_m(X) = thr(m, X)/thr(m, X_equal)`` and priority weights ``w_m``:

.. math::

    X^* = \\arg\\max_X \\sum_m w_m \\log u_m(X), \\qquad
    f_i = \\prod_{j \\ne i} \\Big(\\frac{u_j(X^*)}{u_j(X^*_{-i})}\\Big)^{w_j}, \\qquad
    X^{PA}_i = f_i \\, X^*_i

over the allocation polytope (job time ≤ 1, capacity per worker type), where ``X*_{-i}`` is the
Nash-social-welfare (NSW) optimum of the problem without job ``i``. ``f_i ∈ [0, 1]`` is the
externality job ``i`` imposes on the others; scaling its share by it removes any gain from
misreporting its throughputs. With every ``w_m = 1`` this is Gavel's mechanism (Gavel multiplies
each job's throughput by its weight inside a geometric mean, which scales ``u_m`` by a constant and
so leaves the argmax unchanged: Gavel's weights have no effect; ours enter as exponents, the
weighted NSW). Jobs that cannot run anywhere take no part (allocation 0, ``f = 1``).

Methods (option ``method``; ``auto``, the default, takes ``conic`` when cvxpy is installed, else
``pwl``; measured in ``benchmarks/strategy_proof_bench.py``: the conic path is the faster one here;
when a conic solve ends ``optimal_inaccurate``, ``auto`` returns the ``pwl`` result instead):

* ``pwl`` — an outer piecewise-linear approximation of ``log`` solved by HiGHS with
  cutting planes (Kelley). ``log`` is concave, so every tangent
  ``z_m ≤ log a + (u_m − a)/a`` over-estimates it: the LP ``max Σ w_m z_m`` is an upper bound
  ``UB`` on the NSW optimum, and its allocation ``X`` achieves ``LB = Σ w_m log u_m(X)``. Tangents
  are added at ``u_m(X)`` for the jobs whose term is over-estimated, until
  ``UB − LB ≤ tol·Σ_m w_m`` over the jobs in the objective (``tol`` per unit of weight: the weighted
  geometric mean of the ``u_m`` is within a factor ``e^{tol}`` of the optimum). A tolerance per job
  because the LP's own feasibility tolerance leaves slack in every job's term: with HiGHS at 1e-9,
  a gap absolute on the whole log-sum stalled at 3e-7 with 512 jobs and 1.2e-6 with 2,048 and
  could not reach 1e-7. HiGHS's feasibility tolerances are set to ``min(1e-9, tol/10)``.
  The LP is loaded once; the ``n`` problems without job ``i`` fix job
  ``i``'s columns to 0 and its cost to 0 in place and re-solve warm, reusing every cut (a tangent
  of ``log`` is valid for every problem).
* ``conic`` — the exact convex program through cvxpy with exponential cones (Clarabel), one
  parametrized problem re-solved ``n + 1`` times: exact to the conic solver's tolerance (the
  reference the ``pwl`` method is checked against).
"""
from __future__ import annotations

import importlib.util
import time
from typing import Any

import numpy as np
import scipy.sparse as sp

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError, SolverNotAvailableError
from policyopt.modeling import Model, Variable
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings
from policyopt.solver_api import SolverOptions

from ._common import LoadedLP, base_rows_only

#: tangent points of the first LP: hi·r^-k, k = 0..K-1 (a coarse grid; the cuts refine it)
_GRID_RATIO, _GRID_POINTS = 4.0, 3
#: tangents are never placed below this fraction of a job's largest possible ``u`` (conditioning)
_FLOOR = 1e-4


def _utility_matrix(space: AllocationSpace, X: Variable, n_cols: int) -> tuple[sp.csr_matrix, np.ndarray]:
    """``(U, hi)``: ``u = U x`` over the model's columns (``u_m = thr(m)/thr(m, X_equal)``) and
    ``hi_m`` = the largest coefficient of row ``m`` (an upper bound on ``u_m``: job time ≤ 1)."""
    tr = space.throughput_matrix()
    eq = space.equal_share_throughput()
    with np.errstate(divide="ignore"):
        norm = np.where(eq > 0, 1.0 / eq, 0.0)
    cols = X.cols.ravel()[tr.cols]
    keep = cols >= 0
    U = sp.csr_matrix((tr.vals[keep] * norm[tr.rows[keep]], (tr.rows[keep], cols[keep])),
                      shape=(len(space.jobs), n_cols))
    hi = U.max(axis=1).toarray().ravel() if U.nnz else np.zeros(U.shape[0])
    return U, hi


def _discounts(w: np.ndarray, alive: np.ndarray, logu_full: np.ndarray, without: np.ndarray) -> np.ndarray:
    """``f_i = exp(Σ_{j≠i} w_j log u_j(X*) − NSW_{-i})`` clipped to ``[0, 1]`` (``without[i]`` =
    ``NSW_{-i}``, the optimum without job ``i``); 1 for jobs that take no part."""
    total = float(np.sum(w[alive] * logu_full[alive]))
    f = np.ones(w.size)
    idx = np.flatnonzero(alive)
    f[idx] = np.exp(np.minimum(total - w[idx] * logu_full[idx] - without[idx], 0.0))
    return f


class _CuttingPlaneNSW:
    """The NSW LP with tangent cuts, loaded once; :meth:`solve` refines it to ``tol`` for the jobs
    currently in the objective, :meth:`without` re-solves it in place with one job removed."""

    def __init__(self, policy: Policy, space: AllocationSpace, w: np.ndarray, tol: float,
                 max_rounds: int, timings: Timings) -> None:
        model = Model(f"{policy.name}_pwl")
        self.X = space.add_allocation(model)
        n = len(space.jobs)
        n_x = model.num_cols
        U, hi = _utility_matrix(space, self.X, n_x)
        self.alive = hi > 0
        zmax = np.where(self.alive, np.log(np.where(self.alive, hi, 1.0)), 0.0)
        z = model.add_variables("z", (space.jobs,), np.where(self.alive, -np.inf, 0.0), zmax)
        self.w = np.where(self.alive, w, 0.0)
        model.maximize((z.expr() * self.w).sum())
        self.zcols = z.cols.ravel()
        self.lp = LoadedLP(policy, model, timings)
        self.U = sp.hstack([U, sp.csr_matrix((n, model.num_cols - n_x))], format="csr")
        self.hi, self.tol, self.max_rounds = hi, tol, max_rounds
        self.active = self.alive.copy()
        self.cuts = 0
        self.last = np.full(n, np.nan)  # the latest tangent point per job
        jobs = np.flatnonzero(self.alive)
        k = np.arange(_GRID_POINTS)
        grid = hi[jobs, None] * _GRID_RATIO ** (-k[None, :])
        self._add_cuts(np.repeat(jobs, k.size), grid.ravel())
        self._xcols = [c[c >= 0] for c in self.X.cols.reshape(n, -1)]
        self._bounds = (self.lp.sf.col_lower.copy(), self.lp.sf.col_upper.copy())

    def _add_cuts(self, jobs: np.ndarray, a: np.ndarray) -> None:
        """Tangents ``z_m − u_m/a ≤ log a − 1`` (one row per ``(m, a)``)."""
        if jobs.size == 0:
            return
        rows = sp.diags(-1.0 / a) @ self.U[jobs]
        zpart = sp.csr_matrix((np.ones(jobs.size), (np.arange(jobs.size), self.zcols[jobs])), shape=rows.shape)
        self.lp.add_rows((rows + zpart).tocsr(), -np.inf, np.log(a) - 1.0)
        self.cuts += jobs.size

    def solve(self) -> tuple[Status, np.ndarray | None, np.ndarray, float, float]:
        """Cut until ``UB − LB ≤ tol·Σ w`` (active jobs): ``(status, x, log u, LB, UB)`` (``x`` None on
        failure; ``time_limit`` when the cuts run out or ``max_rounds`` is reached first)."""
        act = self.active
        n_act = max(int(act.sum()), 1)
        gap = self.tol * max(float(self.w[act].sum()), 1.0)  # tol per unit of weight (module docstring)
        ub = lb = np.nan
        for _ in range(self.max_rounds):
            raw = self.lp.solve()
            if not raw.ok or raw.x is None:
                return raw.status, None, np.zeros(0), lb, ub
            x = raw.x
            u = self.U @ x
            with np.errstate(divide="ignore"):
                logu = np.log(np.maximum(u, 0.0))
            ub = float(self.lp.sf.objective_value(x))  # the LP value: an upper bound on the NSW optimum
            lb = float(np.sum(self.w[act] * logu[act]))
            if ub - lb <= gap:
                return Status.OPTIMAL, x, logu, lb, ub
            over = self.w * (x[self.zcols] - logu)
            a = np.maximum(u, _FLOOR * self.hi)
            # a job whose tangent at this very point is already in the LP gets no new cut
            sel = np.flatnonzero(act & (over > gap / n_act) & ~(np.abs(a - self.last) <= 1e-12 * a))
            if sel.size == 0:  # the LP cannot be tightened further at its tolerances
                break
            self.last[sel] = a[sel]
            self._add_cuts(sel, a[sel])
        return Status.TIME_LIMIT, x, logu, lb, ub

    def without(self, i: int) -> tuple[Status, float]:
        """NSW optimum (to ``tol``) without job ``i``, then job ``i`` restored: ``(status, LB_{-i})``."""
        cols, lo, up = self._xcols[i], *self._bounds
        self.lp.set_col_bounds(cols, 0.0, 0.0)
        self.lp.set_costs(self.zcols[i:i + 1], 0.0)
        self.active[i] = False
        status, _, _, lb, _ = self.solve()
        self.active[i] = True
        self.lp.set_costs(self.zcols[i:i + 1], self.w[i])
        self.lp.set_col_bounds(cols, lo[cols], up[cols])
        return status, lb


class _ConicNSW:
    """The exact NSW program in cvxpy (exponential cones), parametrized by which job is removed."""

    def __init__(self, space: AllocationSpace, w: np.ndarray) -> None:
        try:
            import cvxpy as cp
        except ImportError:
            raise SolverNotAvailableError("method 'conic' needs cvxpy: pip install 'policyopt[cvxpy]'") from None
        self.cp = cp
        model = Model("nsw_conic")
        X = space.add_allocation(model)
        sf = model.compile()
        self.X = X
        U, hi = _utility_matrix(space, X, sf.num_cols)
        self.alive = hi > 0
        self.w = np.where(self.alive, w, 0.0)
        n = sf.num_cols
        x = cp.Variable(n)
        A = sf.A.tocsr()
        rlo, rhi = sf.row_lower, sf.row_upper
        self.col_upper = np.minimum(sf.col_upper, 1e6)
        self.ub = cp.Parameter(n, nonneg=True, value=self.col_upper)
        self.wp = cp.Parameter(U.shape[0], nonneg=True, value=self.w)
        self.off = cp.Parameter(U.shape[0], nonneg=True, value=(~self.alive).astype(float))
        cons = [x >= sf.col_lower, x <= self.ub]
        fl, fh = np.flatnonzero(np.isfinite(rlo)), np.flatnonzero(np.isfinite(rhi))
        if fl.size:
            cons.append(A[fl] @ x >= rlo[fl])
        if fh.size:
            cons.append(A[fh] @ x <= rhi[fh])
        s = cp.Variable(U.shape[0])  # epigraph of log: keeps the parametrized problem DPP
        cons.append(s <= cp.log(U @ x + self.off))
        self.prob = cp.Problem(cp.Maximize(self.wp @ s), cons)
        self.x, self.U = x, U
        n_jobs = U.shape[0]
        self._xcols = [c[c >= 0] for c in X.cols.reshape(n_jobs, -1)]
        self.solver = "CLARABEL" if "CLARABEL" in cp.installed_solvers() else None

    def solve(self) -> tuple[Status, np.ndarray | None, np.ndarray, float, float]:
        """``(status, x, log u, NSW achieved, NSW achieved)`` (exact: no separate bound)."""
        self.prob.solve(solver=self.solver)
        if self.prob.status not in ("optimal", "optimal_inaccurate") or self.x.value is None:
            return Status.ERROR, None, np.zeros(0), np.nan, np.nan
        x = np.maximum(self.x.value, 0.0)
        u = self.U @ x
        with np.errstate(divide="ignore"):
            logu = np.log(np.maximum(u, 0.0))
        act = np.asarray(self.wp.value) > 0
        val = float(np.sum(self.w[act] * logu[act]))
        # cvxpy's optimal_inaccurate keeps its own status (not proven optimal: the caller falls back)
        status = Status.OPTIMAL if self.prob.status == "optimal" else Status.OPTIMAL_INACCURATE
        return status, x, logu, val, val

    def without(self, i: int) -> tuple[Status, float]:
        ub, w, off = self.col_upper.copy(), self.w.copy(), (~self.alive).astype(float)
        ub[self._xcols[i]] = 0.0
        w[i], off[i] = 0.0, 1.0
        self.ub.value, self.wp.value, self.off.value = ub, w, off
        status, _, _, val, _ = self.solve()
        self.ub.value, self.wp.value, self.off.value = self.col_upper, self.w, (~self.alive).astype(float)
        return status, val


@register_policy("max_min_fairness_strategy_proof")
class MaxMinFairnessStrategyProof(Policy):
    """Strategy-proof max-min fairness: Nash social welfare with partial allocation (Gavel's)."""

    objective_sense = "max"
    options = (
        Option("method", str, "auto",
               "conic: exact via cvxpy (exponential cones); pwl: HiGHS with tangent cuts to `tol`; "
               "auto: conic when cvxpy is installed, else pwl", ("auto", "pwl", "conic")),
        Option("tol", float, 1e-9, "pwl: stop when the NSW log-sum upper bound is within tol per unit of weight "
               "(tol·Σw) of the achieved value"),
        Option("max_rounds", int, 500, "pwl: cut rounds at most per NSW solve"),
    )

    def solver_options(self, sf: object | None = None) -> SolverOptions:
        """HiGHS with feasibility tolerances well below ``tol``: the LP's value is the upper bound of
        the certificate, so its row violations must not exceed what ``tol`` resolves."""
        opts = super().solver_options(sf)
        if self.get_solver().name == "highs":
            tight = min(1e-9, self.config["tol"] / 10)  # the slack each job's term may keep
            opts = opts.with_(extra={**opts.extra, "primal_feasibility_tolerance": tight,
                                     "dual_feasibility_tolerance": tight})
        return opts

    def solve(self, problem: Problem) -> PolicyResult:
        if self.config["space_sharing"]:
            raise InputError("options.space_sharing", True,
                             "max_min_fairness_strategy_proof does not support space sharing")
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        if not base_rows_only(space):
            # rows such as guaranteed throughputs are lower bounds that neither the leave-one-out
            # problems (job i removed) nor the discounted shares f_i·X*_i can respect
            raise InputError("policy", self.name, "partial allocation needs the base allocation space (job time "
                             "and capacity rows only); this problem's space adds rows (e.g. execution plans with "
                             "guarantees)")
        method = self.config["method"]
        if method != "auto":
            return self._solve(space, method, timings, t0)
        if importlib.util.find_spec("cvxpy") is None:
            return self._solve(space, "pwl", timings, t0)
        res = self._solve(space, "conic", timings, t0)
        if res.status is Status.OPTIMAL:
            return res
        # the conic solver left some NSW solve inaccurate (measured at 512 jobs): the certified method
        out = self._solve(space, "pwl", Timings(), time.perf_counter())
        out.extra["conic_status"] = res.status.value
        return out

    def _solve(self, space: AllocationSpace, method: str, timings: Timings, t0: float) -> PolicyResult:
        """The mechanism by ``method`` (``conic`` or ``pwl``) on a base allocation space."""
        w = np.asarray(space.weights, float)
        conic = method == "conic"
        nsw: _CuttingPlaneNSW | _ConicNSW
        if conic:
            nsw = _ConicNSW(space, w)
        else:
            nsw = _CuttingPlaneNSW(self, space, w, self.config["tol"], self.config["max_rounds"], timings)
        timings.build += time.perf_counter() - t0
        t1 = time.perf_counter()
        status, x, logu, lb, ub = nsw.solve()
        solver = "cvxpy:" + (getattr(nsw, "solver", None) or "default") if conic else "highs"
        if status is not Status.OPTIMAL or x is None:
            Xf = space.full_from_single(space.isolated_allocation())
            return self.result(space, Xf, status, None, solver, timings,
                               f"{status.value}: the Nash-social-welfare solve did not finish; "
                               "returning the isolated allocation (fallback)")
        X_star = nsw.X.value(x)
        without = np.full(w.size, np.nan)
        worst = Status.OPTIMAL
        for i in np.flatnonzero(nsw.alive):
            st, without[i] = nsw.without(int(i))
            if st is not Status.OPTIMAL:
                worst = st
        f = _discounts(nsw.w, nsw.alive, logu, without)
        if conic:  # the cutting-plane LP accumulates its own compile/solve timings
            timings.solve += time.perf_counter() - t1
        X_pa = X_star * f[:, None]
        labels = space.jobs.labels.tolist()
        extra: dict[str, Any] = {"method": method, "nsw": lb, "discount_factors": dict(zip(labels, f.tolist()))}
        if isinstance(nsw, _CuttingPlaneNSW):
            extra.update(nsw_upper_bound=ub, cuts=nsw.cuts, lp_solves=nsw.lp.solves)
        if worst is not Status.OPTIMAL:
            return self.result(space, X_pa, worst, lb, solver, timings,
                               f"{worst.value}: some leave-one-out NSW solve did not reach the tolerance; "
                               "its discount factor may be off", **extra)
        return self.result(space, X_pa, Status.OPTIMAL, lb, solver, timings, **extra)
