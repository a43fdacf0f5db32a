"""Priority policies: rank active jobs, then admit as many as fit alone.

Ranking policies sort jobs by a key (``high_priority`` jobs always first) and admit them in
that order: each job takes the first worker type in its preference list (``JobInfo.worker_types``,
else the cluster's type order) with at least ``scale_factor`` free GPUs; jobs that fit nowhere
stay pending, in rank order. Keys (smaller = earlier):

* ``las``       -- least attained service (GPU-seconds), then arrival time;
* ``tiresias``  -- discretized LAS (Tiresias' 2D-LAS): queue ``q = #{thresholds <= service}``,
  FIFO by arrival inside a queue;
* ``fifo``      -- arrival time;
* ``ftf``       -- finish-time fairness: largest ``rho`` first, then arrival time;
* ``mechanism`` -- an optimization policy's allocation realized by :class:`RoundMechanism`
  (the mechanism picks jobs *and* pairs from its allocation; ``jobs`` is not consulted).
"""
from __future__ import annotations

from abc import abstractmethod
from typing import Mapping, Sequence

import numpy as np

from policyopt.errors import InputError, UnknownNameError
from policyopt.mechanism.rounds import Combination, RoundAssignment, RoundMechanism
from policyopt.placement.stages import PRIORITY_POLICIES, JobInfo, PriorityPolicy

__all__ = [
    "RankingPolicy",
    "LeastAttainedService",
    "Tiresias",
    "FirstInFirstOut",
    "FinishTimeFairness",
    "MechanismPolicy",
    "admit",
]


def admit(jobs: Sequence[JobInfo], order: np.ndarray, capacity: Mapping[str, int]) -> RoundAssignment:
    """Admit ``jobs`` in ``order`` greedily (module docstring); ``O(n * types)``."""
    left = {str(t): int(n) for t, n in capacity.items()}
    types = tuple(left)
    remaining = sum(left.values())
    combos: list[Combination] = []
    pending: list[str] = []
    order_list = order.tolist()
    for pos, i in enumerate(order_list):
        if remaining == 0:
            pending.extend(jobs[k].job_id for k in order_list[pos:])
            break
        job = jobs[i]
        for t in job.worker_types if job.worker_types is not None else types:
            if t not in left:
                raise UnknownNameError(f"jobs[{i}].worker_types", t, types)
            if left[t] >= job.scale_factor:
                left[t] -= job.scale_factor
                remaining -= job.scale_factor
                combos.append(Combination((job.job_id,), t, job.scale_factor))
                break
        else:
            pending.append(job.job_id)
    return RoundAssignment(tuple(combos), tuple(pending))


def _check_jobs(jobs: Sequence[JobInfo]) -> None:
    ids = [j.job_id for j in jobs]
    if len(set(ids)) != len(ids):
        seen: set[str] = set()
        dup = next(j for j in ids if j in seen or seen.add(j))  # type: ignore[func-returns-value]
        raise InputError("jobs[*].job_id", dup, "duplicate job id")
    for i, j in enumerate(jobs):
        if isinstance(j.scale_factor, bool) or not isinstance(j.scale_factor, (int, np.integer)) or j.scale_factor < 1:
            raise InputError(f"jobs[{i}].scale_factor", j.scale_factor, "must be a positive integer")


class RankingPolicy(PriorityPolicy):
    """A policy defined by sort keys; see the module docstring."""

    @abstractmethod
    def keys(self, jobs: Sequence[JobInfo]) -> list[np.ndarray]:
        """Sort keys, most significant first; smaller sorts earlier."""

    def rank(self, jobs: Sequence[JobInfo]) -> np.ndarray:
        """Job indices, highest priority first (stable: input order breaks remaining ties)."""
        _check_jobs(jobs)
        high = np.fromiter((not j.high_priority for j in jobs), dtype=bool, count=len(jobs))
        keys = [high, *self.keys(jobs)]
        return np.lexsort(tuple(reversed(keys))) if jobs else np.zeros(0, dtype=np.int64)

    def select(self, jobs: Sequence[JobInfo], capacity: Mapping[str, int]) -> RoundAssignment:
        return admit(jobs, self.rank(jobs), capacity)


def _column(jobs: Sequence[JobInfo], attr: str) -> np.ndarray:
    return np.fromiter((float(getattr(j, attr)) for j in jobs), dtype=float, count=len(jobs))


@PRIORITY_POLICIES.register("las")
class LeastAttainedService(RankingPolicy):
    """Least attained service first."""

    def keys(self, jobs: Sequence[JobInfo]) -> list[np.ndarray]:
        return [_column(jobs, "attained_service"), _column(jobs, "arrival_time")]


@PRIORITY_POLICIES.register("tiresias")
class Tiresias(RankingPolicy):
    """Discretized LAS: queue by attained-service thresholds (GPU-seconds), FIFO inside a queue."""

    def __init__(self, thresholds: Sequence[float] = (3600.0, 36000.0)) -> None:
        th = np.asarray(thresholds, dtype=float)
        if th.ndim != 1 or not np.all(np.isfinite(th)) or np.any(np.diff(th) <= 0):
            raise InputError("thresholds", list(thresholds), "must be finite and strictly increasing")
        self.thresholds = th

    def keys(self, jobs: Sequence[JobInfo]) -> list[np.ndarray]:
        queue = np.searchsorted(self.thresholds, _column(jobs, "attained_service"), side="right")
        return [queue, _column(jobs, "arrival_time")]


@PRIORITY_POLICIES.register("fifo")
class FirstInFirstOut(RankingPolicy):
    """Earliest arrival first."""

    def keys(self, jobs: Sequence[JobInfo]) -> list[np.ndarray]:
        return [_column(jobs, "arrival_time")]


@PRIORITY_POLICIES.register("ftf")
class FinishTimeFairness(RankingPolicy):
    """Largest finish-time-fairness ratio ``rho`` (furthest behind) first."""

    def keys(self, jobs: Sequence[JobInfo]) -> list[np.ndarray]:
        return [-_column(jobs, "rho"), _column(jobs, "arrival_time")]


@PRIORITY_POLICIES.register("mechanism")
class MechanismPolicy(PriorityPolicy):
    """An optimization policy's allocation, realized round by round by a :class:`RoundMechanism`.

    ``select`` returns ``mechanism.schedule_round()``; call ``mechanism.record_round`` with the
    returned assignment (``RoundResult.selection``) once the round has run.
    """

    def __init__(self, mechanism: RoundMechanism) -> None:
        self.mechanism = mechanism

    def select(self, jobs: Sequence[JobInfo], capacity: Mapping[str, int]) -> RoundAssignment:
        counts = dict(zip(self.mechanism.worker_types,
                          (capacity.get(t, 0) for t in self.mechanism.worker_types)))
        mech_counts = self.mechanism.worker_counts
        if counts != mech_counts:
            raise InputError("capacity", dict(capacity),
                             f"differs from the mechanism's worker counts {mech_counts}")
        return self.mechanism.schedule_round()
