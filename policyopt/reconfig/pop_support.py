r"""POP over reconfigurable problems: sub-problems solved over the multi-resource space.

:func:`policyopt.pop.pop` builds every sub-problem's space as a plain ``PopSpace`` (fixed
configurations), does not split tenant quotas, and merges allocations onto a plain
``AllocationSpace``. :class:`ReconfigPop` keeps POP's partition (:class:`~policyopt.pop.PopState`:
balanced, seeded, stratified, stable across rounds) and changes exactly those three points for a
:class:`~.spec.ReconfigProblem`:

* each group's problem keeps the ``reconfig`` section (:meth:`ReconfigProblem.with_jobs`), its
  nodes follow the group's GPUs, and its quotas are scaled by the group's share of the GPUs;
* each sub-problem is solved with the policy's registered space (:class:`~.space.MultiResourceSpace`;
  its normalizer, the reference throughput, does not depend on the cluster, so no cluster-wide
  correction is needed);
* the merged result holds the union of the groups' allocations (configuration labels) and
  throughputs; ``result.extra["pop"]`` has the partition summary and per-group seconds.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from policyopt.pop import PopPolicy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from .spec import ReconfigProblem

__all__ = ["ReconfigPop", "reconfig_pop"]

_TASKS: tuple[Any, list[ReconfigProblem]] | None = None


def _solve(policy: Any, sub: ReconfigProblem) -> tuple[PolicyResult, float]:
    t0 = time.perf_counter()
    res = policy.solve(sub)
    res.X, res.space = None, None  # not sent back across processes
    if hasattr(res, "assignment"):
        del res.assignment
    return res, time.perf_counter() - t0


def _solve_forked(i: int) -> tuple[PolicyResult, float]:
    assert _TASKS is not None
    return _solve(_TASKS[0], _TASKS[1][i])


class ReconfigPop(PopPolicy):
    """POP for :class:`ReconfigProblem` (plain problems go to :class:`PopPolicy` unchanged)."""

    def solve(self, problem: Problem) -> PolicyResult:
        if not isinstance(problem, ReconfigProblem):
            return super().solve(problem)
        global _TASKS
        t0 = time.perf_counter()
        part = self.state.update(problem)
        subs = self.sub_problems(problem, part)
        total = float(part.counts.sum())
        subs = [s.scaled_quotas(float(part.counts[p].sum()) / total) if isinstance(s, ReconfigProblem) else s
                for p, s in enumerate(subs)]
        t_part = time.perf_counter() - t0
        workers = min(part.k, self.max_workers or os.cpu_count() or 1)
        parallel = self.parallel and part.k > 1 and workers > 1 and "fork" in mp.get_all_start_methods()
        t1 = time.perf_counter()
        if parallel:
            _TASKS = (self.inner, subs)
            try:
                with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork")) as ex:
                    out = list(ex.map(_solve_forked, range(len(subs))))
            finally:
                _TASKS = None
        else:
            out = [_solve(self.inner, s) for s in subs]
        wall = time.perf_counter() - t1
        results = [r for r, _ in out]
        seconds = [s for _, s in out]
        timings = Timings()
        for r in results:
            timings.add(r.timings)
        timings.build += t_part
        objs = [r.objective for r in results]
        objective = None
        if objs and all(o is not None for o in objs):
            vals = [float(o) for o in objs]  # type: ignore[arg-type]
            objective = sum(vals) if self.combine == "sum" else (min(vals) if self.combine == "min" else max(vals))
        bad = [r for r in results if r.status is not Status.OPTIMAL]
        allocation: dict[str, dict[str, float]] = {}
        throughputs: dict[str, float] = {}
        for r in results:
            allocation.update(r.allocation)
            throughputs.update(r.effective_throughputs)
        order = problem.job_ids
        res = PolicyResult(policy=self.name, solver=results[0].solver if results else "",
                           status=bad[0].status if bad else Status.OPTIMAL, objective=objective,
                           allocation={j: allocation[j] for j in order},
                           effective_throughputs={j: throughputs[j] for j in order}, timings=timings,
                           message="; ".join(f"group {i}: {r.message}" for i, r in enumerate(results) if r.message))
        res.extra["pop"] = {**part.summary(), "combine": self.combine, "mode": "parallel" if parallel else "sequential",
                            "workers": workers if parallel else 1, "partition_seconds": seconds,
                            "sequential_seconds": float(sum(seconds)), "parallel_seconds": wall if parallel else None}
        sla = [rep for r in results for rep in r.extra.get("sla_report", [])]
        if sla:
            res.extra["sla_report"] = sla
        return res


def reconfig_pop(policy: Any, k: int, seed: int = 0, **kwargs: Any) -> ReconfigPop:
    """:func:`policyopt.pop.pop` for reconfigurable problems (see the module docstring)."""
    return ReconfigPop(policy, k, seed, **kwargs)
