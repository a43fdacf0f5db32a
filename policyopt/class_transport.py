"""A max-sum throughput policy's first problem, when jobs repeat: its transportation LP over the job classes.

Max-sum throughput on the plain allocation space is a transportation LP
(:mod:`policyopt.solvers.transport`): per job ``j`` and worker type ``k`` only the better of the
type's configurations matters, ``V_jk = max_{c∈k} v_jc``, and

.. math::  \\max \\sum_{j,k} V_{jk} x_{jk} \\quad\\text{s.t.}\\quad \\sum_k x_{jk} \\le 1,\\quad
           \\sum_j s_j x_{jk} \\le C_k,\\quad x \\ge 0 .

Jobs of a class (equal throughputs, scale factor and weight: :func:`policyopt.aggregate_cold.job_classes`,
checked exactly) have equal ``V_j`` and ``s_j``. With ``m_g`` jobs in class ``g``, the LP over the
classes with values ``m_g V_gk`` and scale factors ``m_g s_g``,

.. math::  \\max \\sum_{g,k} m_g V_{gk} x_{gk} \\quad\\text{s.t.}\\quad \\sum_k x_{gk} \\le 1,\\quad
           \\sum_g m_g s_g x_{gk} \\le C_k,\\quad x \\ge 0 ,

is the whole LP restricted to equal rows within a class: ``X_j = x_{g(j)}`` has the same objective
and the same capacity rows. Its certificate (:func:`policyopt.solvers.transport.certify`: every row
to 1e-9, prices ``p ≥ 0`` and ``y_g = max(0, max_k m_g V_gk − m_g s_g p_k)`` whose Lagrangian bound
``Σ_g y_g + Σ_k C_k p_k`` equals the objective to 1e-9 relative) is the whole LP's: ``y_j = y_g / m_g``
for each of the ``m_g`` jobs of class ``g`` gives the same bound, dual feasible for every job's
columns. So the class LP's certified optimum, gathered per job, is the whole LP's.

The route answers a policy's **first** problem only (no model kept, none answered by it before):
it builds no modeling-layer model, no compiled form and no kept model. It keeps the classes and the
LP's optimal basis instead (:mod:`policyopt.transport_resolve`), from which the policy's next
problems (arrivals and completions) are re-solved; where that route declines, the usual way (the
class space's reduced LP, :mod:`policyopt.aggregate_cold`, kept for the re-solves after it). Fewer than
:data:`~policyopt.aggregate_cold.MIN_JOBS` jobs, more classes than
:data:`~policyopt.aggregate_cold.MAX_CLASS_SHARE` of the jobs, a space or option the kept model
would refuse (:func:`policyopt.incremental.eligible`), ``verbose``, a ``time_limit``, or a failed
certificate: ``None``, and the policy solves as before.
"""
from __future__ import annotations

import time
import weakref
from typing import Any

import numpy as np

from . import aggregate_cold, incremental, transport_resolve
from .problem import Problem
from .result import PolicyResult, Status, Timings
from .solvers import transport

__all__ = ["answered", "applies", "solve"]

#: per policy object, the problems this route answered (tests and benchmarks read it)
_ANSWERED: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


def answered(policy: Any) -> int:
    """How many of ``policy``'s problems this route answered (0 or 1)."""
    return _ANSWERED.get(policy, 0)


def applies(policy: Any, n: int) -> bool:
    """Whether :func:`solve` may answer ``policy``'s problem of ``n`` jobs (before the space is made):
    its first problem, from :data:`~policyopt.aggregate_cold.MIN_JOBS` jobs, not ``verbose``, no
    ``time_limit`` (the LP path applies it and reports a time-out as documented)."""
    return (n >= aggregate_cold.MIN_JOBS and policy not in _ANSWERED and not policy.config["verbose"]
            and policy.config["time_limit"] is None and incremental.state(policy) is None)


def solve(policy: Any, problem: Problem) -> PolicyResult | None:
    """``policy``'s result on ``problem`` by the class transportation LP, or ``None`` (module docstring)."""
    t0 = time.perf_counter()
    if not applies(policy, len(problem.jobs)):
        return None
    space = policy.make_space(problem)
    if not incremental.eligible(policy, space):
        return None
    got = aggregate_cold.job_classes(space.T, space.scale, space.weights)
    if got is None:
        return None
    group, rep = got
    if rep.size > aggregate_cold.MAX_CLASS_SHARE * group.size:
        return None
    T, scale = space.T.take(rep, axis=0), space.scale.take(rep)
    mask, eq_share = space.class_rows(T, scale)
    values = T / eq_share[:, None] if policy.config["normalize"] else T
    V, best = transport.per_type(values, mask, space.config_type, len(space.worker_types))
    if not np.isfinite(V[V > -np.inf]).all():  # (a class of zero equal share under normalize)
        return None
    m = np.bincount(group, minlength=rep.size).astype(np.float64)
    t1 = time.perf_counter()
    ans = transport.solve(V * m[:, None], space.row_scale.take(rep) * m, space.counts, policy.config["threads"])
    if ans is None:
        return None
    t2 = time.perf_counter()
    _ANSWERED[policy] = 1
    gg, kk = ans.x.nonzero()
    Xc = np.zeros(mask.shape)
    Xc[gg, best[gg, kk]] = ans.x[gg, kk]
    space.declare_classes(group, mask, eq_share)  # (each job's mask row and equal share: its class's)
    transport_resolve.keep(policy, space, group, (rep, T, scale), mask, eq_share, V, best, m, ans)  # (re-solves)
    timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return policy.class_result(space, Xc, Status.OPTIMAL, ans.objective, "highs", timings, certified=True)
