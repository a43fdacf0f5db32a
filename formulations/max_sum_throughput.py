"""Maximum total throughput (Gavel's throughput-maximizing baseline).

.. math::  \\max_X \\sum_m thr(m)        (default)
.. math::  \\max_X \\sum_m \\frac{thr(m)}{thr(m, X_{equal})}   (``normalize=True``)

subject to the allocation constraints (job time ≤ 1, capacity per type, space-sharing pair rows).
Raw steps/s of different models are not commensurable (a fast model's steps dominate the sum);
``normalize=True`` counts every job in units of its equal-share throughput instead. One LP; the
reported objective is the optimal sum.
"""
from __future__ import annotations

from policyopt import class_transport, solver_api, transport_resolve, transport_route
from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model, Variable
from policyopt.policy import LPPolicy, Option, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult


@register_policy("max_sum_throughput")
class MaxSumThroughput(LPPolicy):
    """Maximum total throughput: max Σ_m thr(m) (optionally normalized by thr(m, X_equal))."""

    pop_combine = "sum"  # how POP recombines sub-problem objectives
    incremental_lp = True  # a job's columns and costs use its own data only (normalize: per-job X_equal)

    options = (Option("normalize", bool, False,
                      "divide each job's throughput by its equal-share throughput thr(m, X_equal)"),)

    def build(self, model: Model, space: AllocationSpace, X: Variable) -> Variable | None:
        thr = space.throughput(X)
        if self.config["normalize"]:
            thr = thr / space.equal_share_throughput()
        model.maximize(thr.sum())
        return None

    def solve(self, problem: Problem) -> PolicyResult:
        # small problems: the transportation LP from the space's arrays (policyopt.transport_route);
        # a policy's first larger problem where jobs repeat: the transportation LP over the job
        # classes (policyopt.class_transport), else, up to transport_route.MAX_SUM_MAX_JOBS jobs, the
        # arrays route (a policy's first problem: not after a class LP); otherwise, or when they
        # decline, the LP built by build() above (its model kept for re-solves)
        n = len(problem.jobs)
        if n <= solver_api.TRANSPORT_MAX_JOBS:
            res = transport_route.solve(self, problem)
        else:  # (after the class LP: its re-solves from the kept basis, policyopt.transport_resolve)
            res = transport_resolve.solve(self, problem) or class_transport.solve(self, problem)
            if res is None and n <= transport_route.MAX_SUM_MAX_JOBS and not class_transport.answered(self):
                res = transport_route.solve(self, problem)
        return res if res is not None else super().solve(problem)
