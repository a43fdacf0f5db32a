"""Small max-sum throughput problems answered by their transportation LP (no modeling layer).

For :class:`~formulations.max_sum_throughput.MaxSumThroughput` itself (not a subclass, which may
build differently) with ``algorithm="auto"`` on HiGHS, on the plain allocation space without pair
rows, at most :data:`~policyopt.solver_api.TRANSPORT_MAX_JOBS` jobs and no model kept for
re-solves, :func:`solve` builds the LP's data from the space's arrays (throughputs, masks, scale
factors, worker counts) and solves it as the transportation LP of :mod:`policyopt.solvers.transport`
(the same optimum as the policy's LP: per job and worker type only the better of the type's
configurations matters), certified on the whole LP. The answer is the policy's result as the LP
path gives it (allocation clipped and masked, objective the optimal sum, solver ``"highs"``). When
the route does not apply or its certificate fails it returns ``None`` and the policy solves as
before.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from . import incremental, solver_api
from .allocation import AllocationSpace
from .problem import Problem
from .result import PolicyResult, Status, Timings
from .solvers import transport

__all__ = ["applies", "solve"]


def applies(policy: Any, space: AllocationSpace) -> bool:
    """Whether :func:`solve` may answer ``policy`` on ``space`` (see the module docstring)."""
    return (len(space.jobs) <= solver_api.TRANSPORT_MAX_JOBS and not policy.config["verbose"]
            and incremental.eligible(policy, space) and incremental.state(policy) is None)


def solve(policy: Any, problem: Problem) -> PolicyResult | None:
    """``policy``'s result on ``problem`` by the transportation LP, or ``None`` (see the module
    docstring)."""
    t0 = time.perf_counter()
    space = policy.make_space(problem)
    if not applies(policy, space):
        return None
    values = space.T
    if policy.config["normalize"]:
        values = values / space.equal_share_throughput()[:, None]
    mask = space.single_mask
    V, best = transport.per_type(values, mask, space.config_type, len(space.worker_types))
    if not np.isfinite(V[V > -np.inf]).all():  # (a job of zero equal share under normalize)
        return None
    t1 = time.perf_counter()
    ans = transport.solve(V, space.row_scale, space.counts, policy.config["threads"])
    if ans is None:
        return None
    t2 = time.perf_counter()
    jj, kk = np.nonzero(ans.x)
    X = np.zeros(mask.shape)
    X[jj, best[jj, kk]] = ans.x[jj, kk]
    timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return policy.result(space, X, Status.OPTIMAL, ans.objective, "highs", timings)
