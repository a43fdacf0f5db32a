"""POP (partitioned optimization problems): split jobs and workers into ``k`` groups, solve the ``k``
sub-problems in parallel processes, merge the allocations.

``pop(policy, k, seed)`` wraps any policy whose jobs interact only through per-type capacity rows
and whose objective recombines over groups (the policy's ``pop_combine``: ``"sum"`` — sub-objectives
add; ``"min"`` — max-min objectives take the smallest; ``"max"`` — min-max objectives such as
makespan take the largest).

One solve of :class:`PopPolicy` is three steps, each in its own module (every name is also
importable from here):

* **partition** (:mod:`policyopt.pop_partition`: :class:`PopState`, :class:`Partition`,
  :func:`split_counts`) — balanced, seeded, stratified groups that never hold an allocation that
  cannot run, kept stable across rounds;
* **cut and merge per problem kind** (:mod:`policyopt.pop_adapter`: :class:`PopAdapter`,
  :func:`pop_adapter`, :class:`PopSpace`, :class:`PartResult`) — what differs between kinds of
  problem (how a group's problem is cut out, which space a sub-problem is solved over, what the
  merged result carries); a problem type supplies its own adapter by defining
  ``pop_adapter(self) -> PopAdapter`` (``policyopt.reconfig`` does so for ``ReconfigProblem``: the
  dependency points from there to here);
* **execution** (:mod:`policyopt.pop_parallel`) — the groups solved in this process or in a pool of
  ``forkserver``/``spawn`` processes that take them from one queue, largest first.

This module holds the policy itself: :meth:`PopPolicy.merge` takes the union of the groups'
allocations (by configuration label), recombines the objective by ``combine`` and keeps the worst
status; the adapter completes the result (:meth:`PopAdapter.finish`).

Timings in ``result.extra["pop"]``: ``partition_seconds[p]`` = wall seconds of sub-problem ``p``
where it ran (cutting it out of the full problem and solving it); ``partition_cpu_seconds[p]`` =
the CPU seconds of the same (wall well above CPU means the process waited for a core);
``worker_seconds[w]`` = the wall seconds process ``w`` spent on sub-problems (``w = 0``: the calling
process); ``sequential_seconds`` = the sum of ``partition_seconds``; ``parallel_seconds`` = measured
wall time of the parallel phase including process start-up and transfers (``None`` when run
sequentially).
"""
from __future__ import annotations

import sys
import time
import types
from typing import Any

from .errors import InputError
from .policy import Policy, get_policy
from .pop_adapter import PartResult, PopAdapter, PopSpace, pop_adapter
from .pop_parallel import START_METHOD as START_METHOD
from .pop_parallel import _cpu_count, _run_parallel, _solve_group
from .pop_partition import Partition, PopState, split_counts
from .problem import Problem
from .result import PolicyResult, Status, Timings

__all__ = ["pop", "PopPolicy", "PopState", "Partition", "split_counts", "PopSpace", "PopAdapter",
           "pop_adapter", "PartResult"]

COMBINE = ("sum", "min", "max")


class PopPolicy(Policy):
    """``policy`` applied to ``k`` partitions of the problem (see the module docstring)."""

    def __init__(self, policy: Policy | str, k: int, seed: int = 0, *, combine: str | None = None,
                 parallel: bool = True, max_workers: int | None = None) -> None:
        inner = get_policy(policy) if isinstance(policy, str) else policy
        if isinstance(inner, PopPolicy):
            raise InputError("policy", inner.name, "POP cannot wrap a POP policy")
        how = combine if combine is not None else type(inner).pop_combine
        if how not in COMBINE:
            raise InputError("policy", inner.name,
                             f"POP needs the policy's pop_combine (one of {', '.join(COMBINE)}) to merge "
                             f"sub-objectives; this policy has {how!r}")
        if max_workers is not None and (isinstance(max_workers, bool) or max_workers < 1):
            raise InputError("pop.max_workers", max_workers, "must be >= 1")
        self.inner = inner
        self.name = inner.name  # type: ignore[misc]
        self.doc = inner.doc  # type: ignore[misc]
        self.objective_sense = inner.objective_sense  # type: ignore[misc]
        self.config = dict(inner.config)
        self.combine = how
        self.state = PopState(k, seed)
        self.parallel = parallel
        self.max_workers = max_workers

    def __repr__(self) -> str:
        return f"pop({self.inner!r}, k={self.state.k_requested}, seed={self.state.seed})"

    def solve(self, problem: Problem) -> PolicyResult:
        t0 = time.perf_counter()
        adapter = pop_adapter(problem)
        part = self.state.update(problem, adapter)
        members = part.members(problem)
        t_part = time.perf_counter() - t0
        todo = [p for p in range(part.k) if members[p].size]  # a group can empty out between rounds
        workers = min(len(todo), self.max_workers or _cpu_count())
        parallel = self.parallel and workers > 1
        t1 = time.perf_counter()
        if parallel:
            solved = _run_parallel(self.inner, adapter, part, members, todo, workers)
        else:
            solved = [_solve_group(self.inner, adapter, part, members, p) for p in todo]
        wall = time.perf_counter() - t1
        res = self.merge(problem, part, solved, adapter)
        res.timings.build += t_part
        seconds, cpu = [0.0] * part.k, [0.0] * part.k
        busy = [0.0] * (workers if parallel else 1)
        for p, r in zip(todo, solved):
            seconds[p], cpu[p] = r.seconds, r.cpu_seconds
            busy[r.worker] += r.seconds
        res.extra["pop"] = {**part.summary(), **res.extra.get("pop", {}), "combine": self.combine,
                            "mode": "parallel" if parallel else "sequential",
                            "workers": workers if parallel else 1, "partition_seconds": seconds,
                            "partition_cpu_seconds": cpu, "worker_seconds": busy,
                            "sequential_seconds": float(sum(seconds)),
                            "parallel_seconds": wall if parallel else None}
        return res

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def sub_problems(problem: Problem, part: Partition) -> list[Problem]:
        """One problem per group (the problem's adapter cuts them: jobs in problem order, pairs inside
        the group, the group's workers)."""
        adapter = pop_adapter(problem)
        return [adapter.sub_problem(part, m, p) for p, m in enumerate(part.members(problem))]

    def merge(self, problem: Problem, part: Partition, results: list[PartResult],
              adapter: PopAdapter | None = None) -> PolicyResult:
        """Union of the groups' allocations (by configuration label); objective recombined by
        ``combine``; worst status; the adapter completes it (:meth:`PopAdapter.finish`)."""
        t0 = time.perf_counter()
        adapter = adapter if adapter is not None else pop_adapter(problem)
        timings = Timings()
        for r in results:
            timings.add(r.timings)
        objs = [r.objective for r in results]
        objective: float | None = None
        if all(o is not None for o in objs) and objs:
            vals = [float(o) for o in objs]  # type: ignore[arg-type]
            objective = sum(vals) if self.combine == "sum" else (min(vals) if self.combine == "min" else max(vals))
        bad = [r for r in results if r.status is not Status.OPTIMAL]
        status = bad[0].status if bad else Status.OPTIMAL
        message = "; ".join(f"group {r.group if r.group >= 0 else i}: {r.message}"
                            for i, r in enumerate(results) if r.message)
        allocation: dict[str, dict[str, float]] = {}
        throughputs: dict[str, float] = {}
        colocated: list[dict[str, Any]] = []
        for r in results:
            allocation.update(r.allocation)
            throughputs.update(r.throughputs)
            colocated.extend(r.colocated)
        order = problem.job_ids
        res = PolicyResult(policy=self.name, solver=results[0].solver if results else "", status=status,
                           objective=objective, allocation={j: allocation[j] for j in order},
                           colocated_allocation=colocated,
                           effective_throughputs={j: throughputs[j] for j in order}, timings=timings,
                           message=message)
        adapter.finish(res, results)
        res.timings.extract += time.perf_counter() - t0
        return res


def pop(policy: Policy | str, k: int, seed: int = 0, *, combine: str | None = None, parallel: bool = True,
        max_workers: int | None = None) -> PopPolicy:
    """Wrap ``policy`` (an instance or a registered name) with POP: ``k`` groups, partition seeded by
    ``seed``; sub-problems solved in up to ``max_workers`` processes (default: the CPUs this process
    may use) when ``parallel``. ``combine`` overrides the policy's ``pop_combine``. The returned
    policy keeps its partition across calls of ``solve`` (stable rounds). Works for any problem
    type: its :class:`PopAdapter` (:func:`pop_adapter`) says how to cut and merge it."""
    return PopPolicy(policy, k, seed, combine=combine, parallel=parallel, max_workers=max_workers)


class _CallableModule(types.ModuleType):
    """``policyopt.pop`` names both this module and :func:`pop`: once the submodule is imported,
    Python sets the package attribute to the module, so the module forwards calls to the function."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return pop(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
