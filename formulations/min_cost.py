"""Cost-aware policies: throughput per dollar, optionally under SLOs.

``min_cost`` — two precisely stated objectives (the Gavel dissertation writes a sum of per-job
ratios ``Σ_m thr(m)/cost(m)``, which is not an LP; neither option optimizes that):

* ``exact_ratio=False`` (default, Gavel's linear form): each slot's throughput is divided by the
  price of the workers it occupies,

  .. math::  \\max_X \\sum_{r,c} \\frac{\\sum_{m \\in r} T[r,c,m]}{price_c \\cdot sf_r}\\, X[r,c]

  — steps/s per $/h summed over slots (a pair slot counts both jobs' throughputs once against the
  one set of ``sf`` workers it occupies). One LP. It fills the cluster with the most
  cost-efficient work, capacity permitting. ``sf_r`` is, in general, the workers slot ``(r, c)``
  occupies (:meth:`~policyopt.allocation.AllocationSpace.slot_workers`): over execution-plan
  configurations, the configuration's GPUs ``g_c``, so ``price_c·g_c`` is the slot's $/h.
* ``exact_ratio=True``: the cluster-wide ratio of total throughput to total cost rate,

  .. math::  \\max_X \\frac{\\sum_m thr(m)}{\\sum_m cost(m)},\\qquad
             cost(m) = \\sum_c price_c\\, sf_m\\, X[m,c]

  a linear-fractional program, solved exactly by the Charnes–Cooper transformation
  ``Y = τX, τ = 1/Σcost(X)``: ``max Σ thr(Y)`` s.t. ``Σ cost(Y) = 1``, every row of the
  allocation space homogenized (``Σ_r∋m Σ_c Y ≤ τ``, capacity ``≤ count·τ``, and whatever rows the
  space adds — cores, host memory, quotas ``≤ limit·τ``, guarantees ``≥ target·τ`` — read back from
  ``space.add_allocation`` by :func:`._common.add_homogenized_allocation`; ``Y ≤ τ`` is implied), ``τ ≥ 0``; then
  ``X = Y/τ`` (``τ > 0`` at every feasible point: ``τ = 0`` forces ``Y = 0``, contradicting
  ``Σcost(Y) = 1``). Scale-invariant: without SLOs it runs only the best-ratio work and leaves the
  rest idle, which is what that objective asks for; use it with ``min_cost_slo``.

``min_cost_slo`` — the same objectives subject to ``thr(m) ≥ s_m/SLO_m`` for every job with
``slo_seconds`` (and remaining steps). If those SLOs cannot all be met, the policy reports which
jobs: the LP ``min Σ_m u_m`` s.t. ``thr(m) + u_m·r_m ≥ r_m``, ``0 ≤ u_m ≤ 1`` (``r_m = s_m/SLO_m``;
``u_m`` = the fraction of job m's required throughput it misses) gives a least total normalized
shortfall, and the jobs with ``u_m > 1e-7`` are listed in ``slo_violations`` with their required and
best-effort throughputs. Then the documented fallback (``slo_fallback``): ``"best_effort"``
(default) keeps every job at least at its shortfall-LP level ``thr(m) ≥ (1 − u_m*)·r_m`` — met SLOs
stay met — and optimizes the cost objective under that; ``"drop"`` ignores all SLOs (Gavel's
fallback). The result then has status ``infeasible`` (the problem as posed has no solution), the
fallback allocation, and ``fallback_objective``. In the linear form the three solves reuse one
loaded LP (column bounds and costs changed in place).
"""
from __future__ import annotations

import time
from typing import Any, ClassVar

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import LinExpr, Model, Triplets, Variable
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from ._common import LoadedLP, add_homogenized_allocation, job_prices

_SLO_TOL = 1e-7


def per_dollar_objective(space: AllocationSpace, X: Variable) -> LinExpr:
    """``Σ_{r,c} (Σ_{m∈r} T[r,c,m]) / (price_c·w(r,c)) · X[r,c]`` as a scalar expression, ``w(r,c)``
    the workers the slot occupies (:meth:`AllocationSpace.slot_workers`: ``sf_r`` in the base space,
    the configuration's GPUs in the execution-plan space)."""
    prices = job_prices(space)
    M = space.throughput_matrix()
    per_slot = np.bincount(M.cols, weights=M.vals, minlength=M.shape[1])
    C = len(space.configs)
    slots = np.flatnonzero(per_slot)
    r, c = slots // C, slots % C
    vals = per_slot[slots] / (prices[space.config_type[c]] * space.slot_workers(r, c))
    return LinExpr.from_matrix(Triplets(np.zeros(slots.size, np.int64), slots, vals, (1, M.shape[1])), X, ())


def slo_requirements(space: AllocationSpace) -> tuple[np.ndarray, np.ndarray]:
    """Positions of jobs with an SLO and remaining steps, and their required throughput ``s_m/SLO_m``."""
    slo = np.array([np.nan if j.slo_seconds is None else j.slo_seconds for j in space.problem.jobs], float)
    pos = np.flatnonzero(~np.isnan(slo) & (space.steps > 0))
    return pos, space.steps[pos] / slo[pos]


class _CostPolicy(Policy):
    """Shared machinery of ``min_cost`` and ``min_cost_slo``."""

    use_slos = False
    idle_capacity_helps = False  # more GPU time costs more: not a gain for a cost objective
    options: ClassVar[tuple[Option, ...]] = (Option("exact_ratio", bool, False,
                      "optimize Σ thr / Σ cost exactly (Charnes–Cooper) instead of Gavel's per-slot linear form"),)

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        job_prices(space)
        slo_pos, req = slo_requirements(space) if self.use_slos else (np.zeros(0, np.int64), np.zeros(0))
        if self.config["exact_ratio"]:
            return self._solve_ratio(space, slo_pos, req, timings, t0)
        model = Model(self.name)
        X = space.add_allocation(model)
        objective = per_dollar_objective(space, X)
        u = None
        if slo_pos.size:
            # thr(m)/r_m + u_m ≥ 1 (rows scaled by r_m); u fixed at 0 unless the SLOs are infeasible
            u = model.add_variables("u", (space.jobs,), 0.0, 0.0, mask=np.isin(np.arange(len(space.jobs)), slo_pos))
            thr = space.throughput(X).select("jobs", slo_pos) / req
            model.add_constraints(thr + u.expr().select("jobs", slo_pos) >= 1.0, "slo")
        model.maximize(objective)
        timings.build = time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        raw = lp.solve()
        if raw.ok and raw.x is not None:
            return self.result(space, X.value(raw.x), Status.OPTIMAL, raw.objective, lp.solver_name, timings,
                               lp_solves=lp.solves)
        if u is None or raw.status is not Status.INFEASIBLE:
            Xf, msg = self.fallback(space, raw, X)
            return self.result(space, Xf, raw.status, None, lp.solver_name, timings, msg)
        # SLOs infeasible: least total shortfall, in place
        ucols = LoadedLP.cols(u)
        xcols = LoadedLP.cols(X)
        lp.set_col_bounds(ucols, 0.0, 1.0)
        lp.set_costs(xcols, 0.0)
        lp.set_costs(ucols, 1.0)
        lp.set_sense("min")
        short = lp.solve()
        if not short.ok or short.x is None:
            Xf, msg = self.fallback(space, short, X)
            return self.result(space, Xf, short.status, None, lp.solver_name, timings, msg)
        u_star = np.clip(u.value(short.x)[slo_pos], 0.0, 1.0)
        violations = self._violations(space, slo_pos, req, u_star)
        if self.config["slo_fallback"] == "drop":
            lp.set_col_bounds(ucols, 0.0, 1.0)
        else:
            lp.set_col_bounds(ucols, 0.0, np.minimum(u_star + _SLO_TOL, 1.0))
        lp.set_costs(ucols, 0.0)
        lp.set_costs(xcols, self._objective_costs(objective, xcols))
        lp.set_sense("max")
        fb = lp.solve()
        if not fb.ok or fb.x is None:
            Xf, msg = self.fallback(space, fb, X)
            return self.result(space, Xf, fb.status, None, lp.solver_name, timings, msg,
                               slo_violations=violations)
        return self._infeasible_result(space, X.value(fb.x), fb.objective, violations, lp.solver_name, timings,
                                       lp.solves)

    # ------------------------------------------------------------------ helpers
    @staticmethod
    def _objective_costs(objective: LinExpr, cols: np.ndarray) -> np.ndarray:
        """The objective's coefficient on each LP column in ``cols``."""
        c = np.bincount(objective.cols, weights=objective.coefs, minlength=int(cols.max()) + 1 if cols.size else 0)
        return c[cols]

    @staticmethod
    def _violations(space: AllocationSpace, slo_pos: np.ndarray, req: np.ndarray,
                    u_star: np.ndarray) -> list[dict[str, Any]]:
        bad = np.flatnonzero(u_star > _SLO_TOL)
        return [{"job": str(space.jobs.labels[slo_pos[i]]), "required_throughput": float(req[i]),
                 "best_effort_throughput": float((1.0 - u_star[i]) * req[i]),
                 "shortfall_fraction": float(u_star[i])} for i in bad]

    def _infeasible_result(self, space: AllocationSpace, X: np.ndarray, objective: float | None,
                           violations: list[dict[str, Any]], solver: str, timings: Timings,
                           solves: int) -> PolicyResult:
        names = ", ".join(v["job"] for v in violations[:10]) + (" ..." if len(violations) > 10 else "")
        msg = (f"infeasible: the SLOs of {len(violations)} job(s) cannot all be met ({names}); "
               f"returning the '{self.config['slo_fallback']}' fallback")
        return self.result(space, X, Status.INFEASIBLE, None, solver, timings, msg, slo_violations=violations,
                           fallback_objective=objective, lp_solves=solves)

    # ------------------------------------------------------------------ Charnes–Cooper
    def _ratio_model(self, space: AllocationSpace, slo_pos: np.ndarray, req: np.ndarray
                     ) -> tuple[Model, Variable, Variable]:
        """``max Σthr(Y)`` s.t. ``Σcost(Y) = 1``, the space's rows homogenized, ``thr(Y)_m ≥ r_m·τ``."""
        model = Model(f"{self.name}_charnes_cooper")
        Y, tau = add_homogenized_allocation(space, model, "Y", "tau")
        te = tau.expr()
        model.add_constraints(space.cost_rate(Y).sum() == 1.0, "normalization")
        if slo_pos.size:
            model.add_constraints(space.throughput(Y).select("jobs", slo_pos) / req
                                  - te.broadcast((space.jobs,)).select("jobs", slo_pos) >= 0.0, "slo")
        model.maximize(space.throughput(Y).sum())
        return model, Y, tau

    def _solve_ratio(self, space: AllocationSpace, slo_pos: np.ndarray, req: np.ndarray, timings: Timings,
                     t0: float) -> PolicyResult:
        model, Y, tau = self._ratio_model(space, slo_pos, req)
        timings.build = time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        raw = lp.solve()
        if raw.ok and raw.x is not None:
            return self.result(space, self._unscale(Y, tau, raw.x), Status.OPTIMAL, raw.objective, lp.solver_name,
                               timings, lp_solves=lp.solves)
        if not slo_pos.size or raw.status is not Status.INFEASIBLE:
            Xf, msg = self.fallback(space, raw, None)
            return self.result(space, Xf, raw.status, None, lp.solver_name, timings, msg)
        u_star = self._shortfall(space, slo_pos, req, timings)
        violations = self._violations(space, slo_pos, req, u_star)
        if self.config["slo_fallback"] == "drop":
            keep, r2 = np.zeros(0, np.int64), np.zeros(0)
        else:
            keep, r2 = slo_pos, (1.0 - u_star) * req * (1 - _SLO_TOL)
            ok = r2 > 0
            keep, r2 = keep[ok], r2[ok]
        model2, Y2, tau2 = self._ratio_model(space, keep, r2)
        lp2 = LoadedLP(self, model2, timings)
        fb = lp2.solve()
        if not fb.ok or fb.x is None:
            Xf, msg = self.fallback(space, fb, None)
            return self.result(space, Xf, fb.status, None, lp2.solver_name, timings, msg, slo_violations=violations)
        return self._infeasible_result(space, self._unscale(Y2, tau2, fb.x), fb.objective, violations,
                                       lp2.solver_name, timings, lp.solves + lp2.solves + 1)

    @staticmethod
    def _unscale(Y: Variable, tau: Variable, x: np.ndarray) -> np.ndarray:
        t = float(tau.value(x).ravel()[0])
        return Y.value(x) / t if t > 0 else np.zeros(Y.shape)

    def _shortfall(self, space: AllocationSpace, slo_pos: np.ndarray, req: np.ndarray, timings: Timings
                   ) -> np.ndarray:
        """``u*``: least total normalized SLO shortfall (see the module docstring)."""
        model = Model(f"{self.name}_shortfall")
        X = space.add_allocation(model)
        u = model.add_variables("u", (space.jobs,), 0.0, 1.0, mask=np.isin(np.arange(len(space.jobs)), slo_pos))
        model.add_constraints(space.throughput(X).select("jobs", slo_pos) / req + u.expr().select("jobs", slo_pos)
                              >= 1.0, "slo")
        model.minimize(u.sum())
        raw = LoadedLP(self, model, timings).solve()
        if not raw.ok or raw.x is None:
            return np.ones(slo_pos.size)
        return np.clip(u.value(raw.x)[slo_pos], 0.0, 1.0)


@register_policy("min_cost")
class MinCost(_CostPolicy):
    """Throughput per dollar: Gavel's linear form max Σ T·X/(price·sf), or the exact ratio Σthr/Σcost."""

    pop_combine = "sum"  # how POP recombines sub-problem objectives

    use_slos = False


@register_policy("min_cost_slo")
class MinCostSLO(_CostPolicy):
    """min_cost subject to thr(m) ≥ s_m/SLO_m; infeasible SLOs: report the jobs, then the documented fallback."""

    pop_combine = "sum"  # how POP recombines sub-problem objectives

    use_slos = True
    options = _CostPolicy.options + (
        Option("slo_fallback", str, "best_effort",
               "when SLOs are infeasible: best_effort (keep the least-shortfall levels) or drop (ignore SLOs)",
               ("best_effort", "drop")),
    )
