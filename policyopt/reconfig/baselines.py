r"""Baseline schedulers over the multi-resource space: ``rubick_greedy``, ``synergy_like``, ``sia_like``.

All three return an *integral* allocation (one configuration per running job, ``X ∈ {0, 1}``) with
a per-node placement (``result.extra["placements"]``; the :class:`~.placement.Assignment` is
``result.assignment``), as a scheduler would run for one round. ``effective_throughputs`` are the
placed throughputs (a spread placement may run slower than its column).

``rubick_greedy`` — the published greedy (our reading of it):

1. guaranteed jobs first (arrival order), each on its cheapest configuration meeting its SLA
   target, shrinking best-effort jobs above their minimum when needed for the guarantee;
2. best-effort jobs sorted by resource-sensitivity slope (largest first: the best normalized
   throughput gain per GPU-equivalent over their minimum configuration), each admitted on its
   minimum configuration, shrinking the lowest-slope job above its minimum if the newcomer's
   normalized throughput exceeds the loss;
3. growth: repeatedly the upgrade with the best gain per extra GPU-equivalent that can be placed;
   a blocked upgrade may shrink lowest-slope jobs when that raises the total;
4. with ``options.quota = "reserve"`` (the default): a quota-free growth phase — the tenant quotas,
   which bounded steps 1–3, stop binding and step 3 runs again without shrinking, so capacity left
   idle flows on to the guaranteed jobs the quota held back (as the LP policies' work-conserving
   stage does; ``extra["quota_free_moves"]``). Under ``"cap"`` the quotas bound every step.

Plans are the best per placement (:class:`~.placement.NodePool` re-plans spread placements),
memory per plan (host bytes of the configuration). ``reconfigure`` picks the variant: ``all``
(Rubick), ``plans`` (E: plans only, resources fixed), ``resources`` (R: resources only, plan
strategy fixed), ``none`` (N); default: the problem's ``reconfig.options.reconfigure``.

``synergy_like`` — multi-resource allocation with fixed plans and fixed GPU demands (Synergy-TUNE
style): guaranteed then arrival order, each job on its requested cores if they fit, else fewer;
leftover cores and host memory go to the jobs that gain most per core. No shrinking. Under
``options.quota = "reserve"`` the leftover is handed out once more with the quotas lifted.

``sia_like`` — DP-only elastic scaling (Sia style): the LP ``max Σ_m thr(m)/r_m`` over pure
data-parallel plans on any GPU count (jobs whose original plan is not pure DP keep their request),
rounded to one configuration per job with :func:`~.placement.integralize` (under ``"reserve"`` its
rounding fills leftover capacity past the quotas, as for every LP policy).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from policyopt.errors import InputError
from policyopt.modeling import Model
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from .home_nodes import keep_current_nodes
from .placement import Assignment, Greedy, integralize
from .space import MultiResourceSpace
from .spec import ReconfigProblem

__all__ = ["RubickGreedy", "SynergyLike", "SiaLike", "assignment_result", "arrival_order"]


def _space(problem: Problem, mode: str | None) -> MultiResourceSpace:
    if not isinstance(problem, ReconfigProblem):
        raise InputError("problem", type(problem).__name__,
                         "this policy needs a problem with a 'reconfig' section (ReconfigProblem)")
    return MultiResourceSpace(problem, reconfigure=mode)


def _quota_free_growth(space: MultiResourceSpace, g: Greedy, jobs: list[int] | None = None) -> int | None:
    """Under ``options.quota = "reserve"`` (the default), once every job is placed under the quotas:
    the quotas stop binding and ``g`` grows again into what is left, without shrinking any job —
    the integral counterpart of the LP policies' work-conserving stage (idle capacity flows on to
    the jobs the quotas held back; no job loses anything). Returns the moves (None under ``cap``)."""
    if not space.quotas_reserve():
        return None
    g.lift_quotas()
    return g.grow(jobs=jobs, shrink=False)


def arrival_order(space: MultiResourceSpace, jobs: np.ndarray) -> np.ndarray:
    """``jobs`` sorted by ``Job.arrival`` (problem order where missing; stable)."""
    arr = np.array([np.nan if j.arrival is None else j.arrival for j in space.problem.jobs], float)
    key = np.where(np.isnan(arr), np.arange(arr.size, dtype=float), arr)
    return jobs[np.argsort(key[jobs], kind="stable")]


def assignment_result(policy: Policy, space: MultiResourceSpace, assign: Assignment, timings: Timings,
                      solver: str, **extra: Any) -> PolicyResult:
    """Package an integral assignment: ``X`` 0/1, placed throughputs, per-job placements. Running
    jobs that keep their configuration stay on their current nodes where the others fit around them
    (:func:`~.home_nodes.keep_current_nodes`)."""
    assign = keep_current_nodes(space, assign)
    X = assign.X(space)
    thr = assign.throughputs(len(space.jobs))
    norm = float(np.sum(thr / space.ref_thr))
    res = policy.result(space, X, Status.OPTIMAL, norm, solver, timings, **extra)
    res.effective_throughputs = dict(zip(space.jobs.labels.tolist(), thr.tolist()))
    labels = space.configs.labels
    res.extra["placements"] = {
        str(space.jobs.labels[m]): {"config": str(labels[p.col]), "nodes": list(p.nodes), "gpus": list(p.gpus),
                                    "cpus": [float(c) for c in p.cpus], "spread": p.spread,
                                    **({"spread_plan": {k: (v.item() if hasattr(v, "item") else v)
                                                        for k, v in p.spread_plan.items()}}
                                       if p.spread_plan else {})}
        for m, p in sorted(assign.placements.items())}
    res.extra["sla_report"] = space.sla_report
    res.extra["integral"] = True
    res.assignment = assign  # type: ignore[attr-defined]
    return res


@register_policy("rubick_greedy")
class RubickGreedy(Policy):
    """Rubick's greedy: guaranteed first, then by sensitivity slope, shrink lowest-slope jobs."""

    options = (Option("reconfigure", str, None,
                      "what may change: all (Rubick), plans (E), resources (R), none (N); "
                      "default: the problem's reconfig.options.reconfigure",
                      ("all", "plans", "resources", "none")),)

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = _space(problem, self.config["reconfigure"])
        t1 = time.perf_counter()
        g = Greedy(space)
        # guaranteed first; largest minimum first so whole-node jobs are packed before small ones
        guaranteed = arrival_order(space, space.sla_jobs[g.guaranteed[space.sla_jobs]])
        guaranteed = guaranteed[np.argsort(-space.cfg_gpus[g.minimum[guaranteed]], kind="stable")]
        g.admit(guaranteed.tolist(), shrink=True)
        be = np.flatnonzero(~g.guaranteed)
        be = be[g.minimum[be] >= 0]
        slope = self._slopes(g, be)
        be = be[np.argsort(-slope, kind="stable")]
        g.admit(be.tolist(), shrink=True)
        g.grow(shrink=True)
        grown = _quota_free_growth(space, g)
        timings.build, timings.solve = t1 - t0, time.perf_counter() - t1
        return assignment_result(self, space, g.assign, timings, "greedy",
                                 reconfigure=space.reconfigure, quota_free_moves=grown)

    @staticmethod
    def _slopes(g: Greedy, jobs: np.ndarray) -> np.ndarray:
        """Resource-sensitivity slope at the minimum: best (value gain)/(extra cost) over it."""
        out = np.zeros(jobs.size)
        for i, m in enumerate(jobs.tolist()):
            c0 = g.minimum[m]
            cols = g.cols[m]
            extra = g.cost[m, cols] - g.cost[m, c0]
            gain = g.value[m, cols] - g.value[m, c0]
            ok = extra > 1e-12
            out[i] = float(np.max(gain[ok] / extra[ok])) if ok.any() else 0.0
        return out


@register_policy("synergy_like")
class SynergyLike(Policy):
    """Synergy-like multi-resource allocation: fixed plans and GPU demands, cores by sensitivity."""

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = _space(problem, "cpus_only")
        t1 = time.perf_counter()
        g = Greedy(space)
        n = len(space.jobs)
        order = np.concatenate([arrival_order(space, space.sla_jobs),
                                arrival_order(space, np.setdiff1d(np.arange(n), space.sla_jobs))])
        req = space.jobs_frame["cpus"].to_numpy(float)
        cands: dict[int, list[int]] = {}
        for m in order.tolist():
            cols = g.cols[m]
            if g.guaranteed[m]:
                cols = cols[g.sla_ok[m, cols]]
            at_or_below = cols[space.cfg_cpus[cols] <= req[m]]
            first = at_or_below[np.argsort(-space.cfg_cpus[at_or_below], kind="stable")]
            cands[m] = [int(c) for c in first] or [int(c) for c in cols[np.argsort(space.cfg_cpus[cols])]]
        g.admit(order.tolist(), cands, shrink=False)
        g.grow(jobs=sorted(g.assign.placements), shrink=False)
        grown = _quota_free_growth(space, g, jobs=sorted(g.assign.placements))
        timings.build, timings.solve = t1 - t0, time.perf_counter() - t1
        return assignment_result(self, space, g.assign, timings, "greedy", reconfigure="cpus_only",
                                 quota_free_moves=grown)


@register_policy("sia_like")
class SiaLike(Policy):
    """Sia-like DP-only elastic scaling: LP max Σ thr/r over pure data-parallel configurations, rounded."""

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = _space(problem, "dp_only")
        model = Model(self.name)
        X = space.add_allocation(model)
        model.maximize((space.throughput(X) / space.ref_thr).sum())
        t1 = time.perf_counter()
        sf = model.compile()
        t2 = time.perf_counter()
        raw = self.get_solver().solve(sf, self.solver_options())
        timings.build, timings.compile, timings.solve = t1 - t0, t2 - t1, raw.timings.solve
        Xf = X.value(raw.x) if raw.x is not None else space.isolated_allocation()
        t3 = time.perf_counter()
        assign = integralize(space, Xf)
        timings.extract = time.perf_counter() - t3
        return assignment_result(self, space, assign, timings, raw.solver, reconfigure="dp_only",
                                 lp_status=raw.status.value)
