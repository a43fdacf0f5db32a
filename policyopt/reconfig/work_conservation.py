r"""Work conservation for tenant quotas (``reconfig.options.quota = "reserve"``).

Under ``quota = "cap"`` a tenant's quota bounds what its admitted guaranteed jobs use, even when
the rest of the cluster is idle. Under ``"reserve"`` the quota bounds them while the policy decides
(stage 1: the policy's own LP, quota rows included, so under contention the other tenants get what
the policy gives them), and then capacity that allocation leaves idle flows on (stage 2, one LP over
the same space without the quota rows):

.. math::  \max_X \sum_m \frac{thr(m)}{r_m} \quad\text{s.t.}\quad thr(m) \ge (1 - 10^{-7})\,thr_1(m)\;\forall m,

and every other row of the space (job time, GPUs, cores and host memory per node type, SLAs),
``thr_1`` the stage-1 throughputs and ``r_m`` the reference throughput. No job gets less than the
policy gave it, so the policy's objective holds for every objective that does not decrease in any
job's throughput (fairness, SRPT, total throughput, makespan); only a job that some capacity left
idle could speed up gains. ``result.objective`` stays the policy's optimum under the quotas;
``extra["work_conservation"]`` reports the seconds, the total normalized throughput before and
after, and each quota row's use after (it may exceed the quota, with capacity no other job used).

Applied by :meth:`~.space.MultiResourceSpace.after_solve` to optimal results that are fractional
allocations over the space — not to the integral baselines (which place jobs on nodes), nor to
policies whose objective or rows a faster job could break (``Policy.idle_capacity_helps = False``:
``min_cost``, ``min_cost_slo``, ``makespan_under_budget`` — more GPU time costs more).
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from policyopt.modeling import Model
from policyopt.result import PolicyResult, Status

__all__ = ["HOLD_TOLERANCE", "conserve_work"]

#: relative slack on each job's stage-1 throughput (the solver's tolerance)
HOLD_TOLERANCE = 1e-7


def conserve_work(space: Any, policy: Any, result: PolicyResult) -> PolicyResult:
    """Stage 2 above on ``result`` (a stage-1 result over ``space``); ``result`` itself when it does
    not apply (no quota rows, not optimal, an integral baseline) or stage 2 does not solve."""
    quota_rows = space.quota_rows()
    if (not quota_rows.any() or result.status is not Status.OPTIMAL or result.X is None
            or not getattr(policy, "idle_capacity_helps", True)
            or "placements" in result.extra or "work_conservation" in result.extra):
        return result
    t0 = time.perf_counter()
    X1 = np.asarray(result.X, float)
    thr1 = space.throughput_values(X1)
    ref = np.maximum(space.equal_share_throughput(), 1e-300)
    model = Model("work_conservation")
    X = space.add_allocation(model, quotas=False)
    thr = space.throughput(X)
    model.add_constraints(thr >= np.maximum(thr1 * (1.0 - HOLD_TOLERANCE) - 1e-12, 0.0), "X_hold")
    model.maximize((thr * (1.0 / ref)).sum())
    raw = policy.get_solver().solve(model.compile(), policy.solver_options())
    seconds = time.perf_counter() - t0
    if raw.status is not Status.OPTIMAL or raw.x is None:
        result.extra["work_conservation"] = {"seconds": seconds, "status": raw.status.value}
        note = f"work conservation ended {raw.status.value}: the quotas cap the allocation"
        result.message = f"{result.message}; {note}" if result.message else note
        return result
    X2 = np.clip(X.value(raw.x), 0.0, 1.0)
    use = space.resource_matrix() @ X2.ravel()
    info = {"seconds": seconds, "status": raw.status.value,
            "normalized_throughput_before": float(np.sum(thr1 / ref)),
            "normalized_throughput_after": float(np.sum(space.throughput_values(X2) / ref)),
            "quota_use": {str(n): float(u) for n, u, q in zip(space.resources.labels.tolist(), use.tolist(),
                                                             quota_rows.tolist()) if q}}
    out = policy.result(space, X2, Status.OPTIMAL, result.objective, result.solver, result.timings,
                        result.message, **{**result.extra, "work_conservation": info})
    out.timings.solve += seconds
    return out
