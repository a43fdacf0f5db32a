r"""LP policies aimed at job completion times, usable over any allocation space.

``fluid_srpt`` — maximize the total rate at which jobs finish their remaining work:

.. math::  \max_X \sum_m w_m \cdot \frac{thr(m)}{s_m}

(``s_m`` remaining steps, ``w_m`` weights; finished jobs take no part), subject to the space's rows
(over :class:`~.space.MultiResourceSpace`: GPUs, cores, host memory, quotas, SLAs, the
reconfiguration rule). ``thr(m)/s_m`` is the fraction of job ``m``'s remaining work done per second,
so the LP favours jobs that are close to finishing and jobs that use resources efficiently — the
fluid analogue of shortest-remaining-processing-time, re-solved every round. Rows are scaled by the
solver layer (``τ/s_m`` with ``τ`` the median of ``s_m/thr(m, X_equal)`` keeps coefficients near 1).
The reported objective is the optimal ``Σ w_m·thr(m)/s_m`` (1/s).

``fluid_srpt_floor`` — the same objective above *floors*, a lexicographic LP solved on one loaded
model (each stage's optimum held at ``level ×`` itself while the next stage is optimized):

1. useful work (``efficiency``, default 1): with ``W[m,c]`` the workers slot ``(m, c)`` occupies
   (:meth:`~policyopt.allocation.AllocationSpace.slot_workers`: GPUs ``g_c`` in the reconfiguration
   space) and ``eff_m = max_c T[m,c]/W[m,c]``, ``E* = max Σ_m thr(m)/eff_m`` — the work done per
   second in workers running at their best efficiency; later stages keep ``Σ thr/eff ≥ level·E*``;
2. completion rate (``makespan``, default off): ``z* = max min_m thr(m)/s_m``; later stages keep
   ``thr(m)/s_m ≥ level·z*`` for every active job;
3. fairness (``fair``, default off): ``t* = max min_m thr(m)/(w_m·thr(m, X_equal))``; later stages
   keep ``thr(m) ≥ level·t*·w_m·thr(m, X_equal)``;
4. ``max Σ_m w_m·(τ/ρ_m)^γ·thr(m)/thr(m, X_equal)``, ``ρ_m = s_m/thr(m, X_equal)`` (γ = 1: the SRPT
   objective above).

Why: the SRPT LP is linear, so each GPU goes to the job with the largest ``w_m·ΔT_m/s_m`` — short jobs
are scaled up where a GPU adds little, long jobs get nothing and run last, and the cluster does less
work per GPU-hour, which stretches p99 JCT and makespan. With the efficiency floor SRPT only chooses
*which* jobs run among allocations doing (nearly) the most work. Only the space's rows, ``thr`` and
``slot_workers`` are used. Reported objective: ``Σ w_m·thr(m)/s_m`` (1/s) of the returned
allocation; ``extra["floor_levels"]`` has each stage's optimum, ``extra["lp_solves"]`` the solves.
"""
from __future__ import annotations

from typing import Any

import time

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.formulations._common import LoadedLP, slot_workers_matrix
from policyopt.formulations.makespan import isolated_makespan, makespan_rows
from policyopt.modeling import Model, Variable
from policyopt.policy import LPPolicy, Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

__all__ = ["FluidSRPT", "FluidSRPTFloor", "srpt_coefficients", "useful_work_scale"]


def srpt_coefficients(space: AllocationSpace, gamma: float = 1.0) -> tuple[np.ndarray, float]:
    """Per-job coefficients of ``thr(m)`` in the scaled objective and the scale ``τ``.

    With ``r_m = thr(m, X_equal)`` and ``ρ_m = s_m/r_m`` (remaining seconds at the equal-share
    rate), the coefficient is ``w_m·(τ/ρ_m)^γ / r_m`` (0 for finished jobs), ``τ`` = median of
    ``ρ_m`` over active jobs (coefficients near 1). ``γ = 1`` gives ``w_m·τ/s_m`` (SRPT:
    ``Σ w·thr/s``); ``γ = 0`` gives ``w_m/r_m`` (total normalized throughput)."""
    steps = np.asarray(space.steps, float)
    active = steps > 0
    ref = np.maximum(space.equal_share_throughput(), 1e-300)
    rho = np.where(active, steps / ref, 1.0)
    tau = float(np.median(rho[active])) if active.any() else 1.0
    coef = np.where(active, space.weights * (tau / rho) ** gamma / ref, 0.0)
    return coef, tau


@register_policy("fluid_srpt")
class FluidSRPT(LPPolicy):
    """Fluid SRPT: max Σ_m w_m·thr(m)/s_m (rate of finishing remaining work), one LP."""

    pop_combine = "sum"

    def build(self, model: Model, space: AllocationSpace, X: Variable) -> Variable | None:
        coef, tau = srpt_coefficients(space)
        model.maximize((space.throughput(X) * coef).sum())
        self._tau = tau
        return None

    def objective_value(self, raw, obj_var):
        v = super().objective_value(raw, obj_var)
        return None if v is None else v / self._tau


@register_policy("fluid_srpt_floor")
class FluidSRPTFloor(Policy):
    """Fluid SRPT above floors (useful work rate, completion rate, fairness): a lexicographic LP."""

    pop_combine = "sum"
    options = (
        Option("efficiency", float, 1.0, "floor on the useful work rate Σ thr/eff as a fraction of "
               "its maximum (stage 1; 0: none)"),
        Option("makespan", float, 0.0, "per-job floor thr(m)/s_m ≥ level·z*, z* = max min thr/s "
               "(stage 2; 0: none)"),
        Option("fair", float, 0.0, "per-job floor thr(m)/(w_m·thr_equal(m)) ≥ level·t*, t* the "
               "max-min fairness level (stage 3; 0: none)"),
        Option("gamma", float, 1.0, "exponent of the remaining-time weight (1: SRPT Σ w·thr/s; "
               "0: total normalized throughput Σ w·thr/thr_equal)"),
    )
    STAGES = ("efficiency", "makespan", "fair")

    def solve(self, problem: Problem) -> PolicyResult:
        levels = {k: float(self.config[k]) for k in self.STAGES}
        for k, v in levels.items():
            if not 0.0 <= v <= 1.0:
                raise InputError(f"options.{k}", v, "must be in [0, 1]")
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        coef, _ = srpt_coefficients(space, float(self.config["gamma"]))
        active = np.flatnonzero(np.asarray(space.steps, float) > 0)
        if active.size == 0:
            timings.build = time.perf_counter() - t0
            return self.result(space, space.full_from_single(space.isolated_allocation()), Status.OPTIMAL,
                               0.0, "none", timings, "no job has remaining steps (isolated allocation)")
        model = Model(self.name)
        X = space.add_allocation(model)
        stages = [(k, *self._stage_rows(k, model, space, X, active)) for k in self.STAGES if levels[k] > 0]
        model.maximize(stages[0][1] if stages else (space.throughput(X) * coef).sum())
        timings.build = time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        x_cols, x_costs = _slot_costs(space, X, coef)
        reached: dict[str, float] = {}
        for i, (name, var, unit) in enumerate(stages):
            if i > 0:  # this stage's variable becomes the objective
                lp.set_costs(LoadedLP.cols(stages[i - 1][1]), 0.0)
                lp.set_costs(LoadedLP.cols(var), 1.0)
            raw = lp.solve()
            if not raw.ok or raw.x is None:
                Xf, msg = self.fallback(space, raw, X)
                return self.result(space, Xf, raw.status, None, lp.solver_name, timings,
                                   f"stage {name}: {msg}", floor_levels=reached)
            best = float(var.value(raw.x).ravel()[0])
            reached[name] = best * unit
            # hold it at its level (a hair below, for the solver's tolerance)
            lp.set_col_bounds(LoadedLP.cols(var), levels[name] * best * (1 - 1e-7), np.inf)
        if stages:
            lp.set_costs(LoadedLP.cols(stages[-1][1]), 0.0)
            lp.set_costs(x_cols, x_costs)
        raw = lp.solve()
        if not raw.ok or raw.x is None:
            Xf, msg = self.fallback(space, raw, X)
            return self.result(space, Xf, raw.status, None, lp.solver_name, timings,
                               f"SRPT stage: {msg}", floor_levels=reached)
        Xv = X.value(raw.x)
        srpt, tau1 = srpt_coefficients(space, 1.0)
        objective = float(np.sum(srpt * space.throughput_values(Xv)) / tau1)  # Σ w·thr/s (1/s)
        extra: dict[str, Any] = {k: float(levels[k]) for k in self.STAGES}
        return self.result(space, Xv, Status.OPTIMAL, objective, lp.solver_name, timings,
                           lp_solves=lp.solves, floor_levels=reached, gamma=float(self.config["gamma"]), **extra)

    @staticmethod
    def _stage_rows(name: str, model: Model, space: AllocationSpace, X: Variable, active: np.ndarray
                    ) -> tuple[Variable, float]:
        """Rows of one floor and its epigraph variable ``u``; returns ``(u, unit)``, the stage's level
        being ``u·unit`` (efficiency: useful workers; makespan: ``z*`` in 1/s; fair: ``t*``)."""
        if name == "makespan":
            tau_iso = isolated_makespan(space, active)
            return makespan_rows(model, space, X, active, tau_iso), 1.0 / tau_iso
        u = model.add_variable(f"u_{name}", lower=0.0)
        if name == "efficiency":
            model.add_constraints((space.throughput(X) * useful_work_scale(space)).sum() - u.expr() >= 0.0,
                                  "efficiency_floor")
            return u, 1.0
        denom = space.weights[active] * np.maximum(space.equal_share_throughput()[active], 1e-300)
        thr = space.throughput(X).select("jobs", active)
        model.add_constraints(thr * (1.0 / denom) - u.expr() >= 0.0, "fair_floor")
        return u, 1.0


def useful_work_scale(space: AllocationSpace) -> np.ndarray:
    """Per job ``1/eff_m`` with ``eff_m = max_c T[m,c]/W[m,c]`` its best throughput per worker, so
    ``Σ_m thr(m)/eff_m`` is the work done per second in workers-at-best-efficiency (0 for jobs that
    cannot run)."""
    W = slot_workers_matrix(space)
    with np.errstate(divide="ignore", invalid="ignore"):
        per_worker = np.where(space.single_mask & (W > 0), space.T / np.where(W > 0, W, 1.0), 0.0)
    eff = per_worker.max(axis=1)
    return np.where(eff > 0, 1.0 / np.where(eff > 0, eff, 1.0), 0.0)


def _slot_costs(space: AllocationSpace, X: Variable, coef: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """LP columns of ``X`` and their coefficients in ``Σ_m coef_m·thr(m)``."""
    M = space.throughput_matrix()
    per_slot = np.bincount(M.cols, weights=M.vals * coef[M.rows], minlength=M.shape[1])
    flat = X.cols.ravel()
    ok = flat >= 0
    return flat[ok], per_slot[ok]
