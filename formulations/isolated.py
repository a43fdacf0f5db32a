"""Isolated (static equal partition) baseline.

Each of the ``n`` jobs gets ``1/n`` of every worker type, divided by its scale factor (a job of
``sf`` workers holding ``count_t/n`` workers of type ``t`` runs ``count_t/(n·sf)`` of the time), on
its best allowed placement for that type; a job whose row sums to more than 1 is scaled down to 1.
Types with fewer workers than the job's scale factor give it nothing. No optimization (objective
``None``); it is the reference point of the sharing-incentive property — every fairness policy
must do at least as well on its own objective — and the fallback allocation of every policy.
Space sharing is never used.
"""
from __future__ import annotations

import time

from policyopt.policy import Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings


@register_policy("isolated")
class Isolated(Policy):
    """Isolated baseline: each job gets 1/n of every type (÷ scale factor, rows capped at 1)."""

    pop_combine = "sum"  # how POP recombines sub-problem objectives

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        X = space.full_from_single(space.isolated_allocation())
        timings.build = time.perf_counter() - t0
        return self.result(space, X, Status.OPTIMAL, None, "none", timings)
