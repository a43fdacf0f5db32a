"""Minimum makespan under a dollar budget.

.. math::  \\min_{X, M}\\; M \\quad\\text{s.t.}\\quad thr(m) \\ge s_m/M \\;\\forall m,\\qquad
           \\frac{M}{3600} \\sum_m cost(m) \\le B

with ``cost(m) = Σ_c price_c·sf_m·X[m,c]`` in $/h (a pair's cost split between its jobs), ``M`` in
seconds and the budget ``B`` in dollars: the allocation runs at a constant cost rate for ``M``
seconds.

``method="lp"`` (default, exact): with ``z = 1/M`` both constraints are linear —
``thr(m) ≥ s_m·z`` and ``Σ_m cost(m)/3600 ≤ B·z`` — so ``max z`` is one LP (rows scaled as in
``makespan``: ``z = u/τ``). ``method="bisection"``: Gavel's approach — bisection on ``M`` over the
feasibility LP ``thr(m) ≥ s_m/M, Σ cost ≤ 3600·B/M``, re-solved in place (only row bounds change),
from a bracket ``[M_lo, M_hi]`` with ``M_lo`` = the budget-free bound ``max_m s_m/max thr(m)`` and
``M_hi`` doubled until feasible, to a relative width ``bisection_tol``; kept to cross-check the LP.

The problem is feasible iff ``B`` is at least the cheapest ``cost·makespan`` product; scaling an
allocation down does not help (both sides scale alike), so a too-small budget is reported as
``infeasible`` with the documented fallback (isolated allocation) and ``min_budget`` — the smallest
feasible budget, ``min Σ cost(Y)/3600`` s.t. ``thr(Y) ≥ s`` over unscaled ``Y = M·X`` (see
:meth:`MakespanUnderBudget._infeasible`).
"""
from __future__ import annotations

import time

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.modeling import LinExpr, Model, Variable
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from ._common import LoadedLP, job_prices, max_throughput
from .makespan import isolated_makespan, makespan_rows


def total_cost(space: AllocationSpace, X: Variable) -> LinExpr:
    """``Σ_m cost(m)`` ($/h) as a scalar expression."""
    return space.cost_rate(X).sum()


@register_policy("makespan_under_budget")
class MakespanUnderBudget(Policy):
    """Minimum makespan with total cost M·Σcost ≤ budget: one exact LP via z = 1/M (or bisection on M)."""

    objective_sense = "min"
    idle_capacity_helps = False  # more GPU time costs more: it could break the budget
    options = (
        Option("budget", float, None, "dollars available for the whole makespan (required)"),
        Option("method", str, "lp", "lp (exact, z = 1/M) or bisection (Gavel's, in-place re-solves)",
               ("lp", "bisection")),
        Option("bisection_tol", float, 1e-7, "relative bracket width at which bisection stops"),
    )

    def solve(self, problem: Problem) -> PolicyResult:
        budget = self.config["budget"]
        if budget is None or not budget > 0:
            raise InputError("options.budget", budget, "makespan_under_budget needs a positive budget (dollars)")
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        job_prices(space)
        active = np.flatnonzero(space.steps > 0)
        if active.size == 0:
            timings.build = time.perf_counter() - t0
            return self.result(space, space.full_from_single(space.isolated_allocation()), Status.OPTIMAL, 0.0,
                               "none", timings, "no job has remaining steps: makespan 0")
        if self.config["method"] == "bisection":
            return self._bisection(space, active, float(budget), timings, t0)
        tau = isolated_makespan(space, active)
        model = Model(self.name)
        X = space.add_allocation(model)
        u = makespan_rows(model, space, X, active, tau)
        # Σcost/3600 ≤ B·u/τ  ⟺  Σcost·τ/(3600·B) − u ≤ 0
        model.add_constraints(total_cost(space, X) * (tau / (3600.0 * budget)) - u.expr() <= 0.0, "budget")
        model.maximize(u)
        timings.build = time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        raw = lp.solve()
        u_star = float(u.value(raw.x).ravel()[0]) if raw.ok and raw.x is not None else 0.0
        if not raw.ok or raw.x is None or u_star <= 1e-12:
            return self._infeasible(space, raw.status if not raw.ok else Status.INFEASIBLE, lp.solver_name, timings)
        return self.result(space, X.value(raw.x), Status.OPTIMAL, tau / u_star, lp.solver_name, timings,
                           lp_solves=lp.solves)

    # ------------------------------------------------------------------ Gavel-style bisection
    def _bisection(self, space: AllocationSpace, active: np.ndarray, budget: float, timings: Timings,
                   t0: float) -> PolicyResult:
        """Bisection on ``M`` (feasibility LP re-solved in place). The smallest feasible budget is
        checked first: below it no ``M`` is feasible, and for huge ``M`` the right-hand sides
        ``s_m/M`` fall under the solver's feasibility tolerance, so "feasible" would be meaningless."""
        min_budget = self._min_budget(space, active, timings)
        if min_budget is not None and budget < min_budget:
            return self._infeasible(space, Status.INFEASIBLE, "highs", timings, min_budget)
        steps = space.steps[active]
        tau = isolated_makespan(space, active)
        model = Model(self.name)
        X = space.add_allocation(model)
        thr = space.throughput(X).select("jobs", active)
        # scaled rows: thr(m)·τ/s_m ≥ τ/M and Σcost·τ/(3600·B) ≤ τ/M (bounds updated in place)
        model.add_constraints((thr * (tau / steps)).between(-np.inf, np.inf), "finish")
        model.add_constraints((total_cost(space, X) * (tau / (3600.0 * budget))).between(-np.inf, np.inf), "budget")
        model.maximize(LinExpr((), [], [], [], 0.0))
        timings.build += time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        finish, brow = lp.rows("finish"), lp.rows("budget")

        def feasible(M: float) -> tuple[bool, np.ndarray | None]:
            lp.set_row_bounds(finish, tau / M, np.inf)
            lp.set_row_bounds(brow, -np.inf, tau / M)
            raw = lp.solve()
            return raw.ok and raw.x is not None, raw.x

        lo = float(np.max(steps / max_throughput(space, space.T, space.Tp)[active]))
        hi = max(lo, tau)
        ok, x = feasible(hi)
        doublings = 0
        while not ok and doublings < 200:
            lo, hi = hi, 2 * hi
            ok, x = feasible(hi)
            doublings += 1
        if not ok:
            return self._infeasible(space, Status.INFEASIBLE, lp.solver_name, timings, min_budget)
        best_x = x
        ok_lo, x_lo = feasible(lo)
        if ok_lo:
            hi, best_x = lo, x_lo
        while hi - lo > self.config["bisection_tol"] * hi:
            mid = 0.5 * (lo + hi)
            ok, x = feasible(mid)
            if ok:
                hi, best_x = mid, x
            else:
                lo = mid
        assert best_x is not None
        return self.result(space, X.value(best_x), Status.OPTIMAL, hi, lp.solver_name, timings,
                           lp_solves=lp.solves + 1, lower_bound=lo)

    # ------------------------------------------------------------------ infeasible budget
    def _min_budget(self, space: AllocationSpace, active: np.ndarray, timings: Timings) -> float | None:
        """``B_min = min_Y Σ cost(Y)/3600`` s.t. ``thr(Y) ≥ s`` over ``Y ≥ 0`` without time or capacity
        limits (``Y = M·X``): scaling an allocation down changes neither ``cost·M`` nor feasibility, so
        every budget ``≥ B_min`` is feasible (with a long enough makespan) and none below it is."""
        model = Model(f"{self.name}_min_budget")
        Y = model.add_variables("Y", (space.rows, space.configs), 0.0, np.inf, mask=space.mask)
        thr = space.throughput(Y).select("jobs", active)
        model.add_constraints(thr / space.steps[active] >= 1.0, "finish")
        model.minimize(total_cost(space, Y) / 3600.0)
        raw = LoadedLP(self, model, timings).solve()
        return float(raw.objective) if raw.ok and raw.objective is not None else None

    def _infeasible(self, space: AllocationSpace, status: Status, solver: str, timings: Timings,
                    min_budget: float | None = None) -> PolicyResult:
        """Fallback: the isolated allocation, with the smallest feasible budget reported."""
        if min_budget is None:
            min_budget = self._min_budget(space, np.flatnonzero(space.steps > 0), timings)
        X_iso = space.full_from_single(space.isolated_allocation())
        msg = (f"infeasible: the budget {self.config['budget']:g} $ cannot pay for the remaining work "
               f"(smallest feasible budget {min_budget:.6g} $); returning the isolated allocation"
               if min_budget is not None else f"{status.value}: returning the isolated allocation")
        return self.result(space, X_iso, Status.INFEASIBLE if status is Status.OPTIMAL else status, None,
                           solver, timings, msg, min_budget=min_budget)
