"""How POP cuts a problem into sub-problems and merges their results: :class:`PopAdapter`.

One :func:`policyopt.pop.pop` serves every kind of problem: what differs between kinds (how a
group's problem is cut out, which space a sub-problem is solved over, what the merged result
carries) lives in a :class:`PopAdapter`. A problem type supplies its own by defining
``pop_adapter(self) -> PopAdapter``; plain :class:`~policyopt.problem.Problem` objects use
:class:`PopAdapter` itself (:func:`pop_adapter` picks). (``policyopt.reconfig`` does so for
``ReconfigProblem``: the dependency points from there to here.)

Normalizers of plain problems are cluster-wide (:class:`PopSpace`): each sub-problem's
``thr(m, X_equal)`` uses the whole cluster's counts (``X_equal[m,c] = count_c/Σcount``) and the
whole cluster's fits, so sub-objectives are on one scale. (Policies must build their space through
:meth:`Policy.make_space`, which POP overrides for plain problems.)

A sub-problem's solve sends back a :class:`PartResult` — its allocation, status, objective,
timings and the adapter's compact report, no allocation space — and :meth:`PopAdapter.finish`
completes the merged result (the merged array ``X`` over the whole cluster's space).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .allocation import AllocationSpace, PairPruning
from .policy import Policy
from .problem import Cluster, Problem, WorkerType
from .result import PolicyResult, Status, Timings

if TYPE_CHECKING:  # the partition module imports this one (for pop_adapter)
    from .pop_partition import Partition

__all__ = ["PopSpace", "PartResult", "PopAdapter", "pop_adapter"]

# ---------------------------------------------------------------------------------------- sub-spaces
class PopSpace(AllocationSpace):
    """A sub-problem's allocation space whose normalizers use the whole cluster: ``thr(m, X_equal)``
    with ``X_equal = count_c/Σcount`` and fits of the *cluster's* counts."""

    def __init__(self, problem: Problem, space_sharing: bool, pruning: PairPruning,
                 full_counts: np.ndarray) -> None:
        super().__init__(problem, space_sharing=space_sharing, pruning=pruning)
        self.full_counts = np.asarray(full_counts, float)

    def equal_share_throughput(self, T: np.ndarray | None = None) -> np.ndarray:
        T = self.T if T is None else T
        fits = self.scale[:, None] <= self.full_counts[self.config_type][None, :]
        allowed = np.where((self.T > 0) & fits & self._placement_ok(), T, 0.0)
        best = np.zeros((len(self.jobs), len(self.worker_types)))
        np.maximum.at(best.T, self.config_type, allowed.T)
        return best @ (self.full_counts / self.full_counts.sum())

    def _placement_ok(self) -> np.ndarray:
        """False on a consolidated slot of a job that spans servers and has unconsolidated data."""
        ok = np.ones(self.T.shape, bool)
        gps = self.gpus_per_server[self.config_type]
        for cu in np.flatnonzero(self.config_unconsolidated):
            same = np.flatnonzero((self.config_type == self.config_type[cu]) & ~self.config_unconsolidated)
            for cp in same:
                ok[(self.scale > gps[cp]) & (self.T[:, cu] > 0), cp] = False
        return ok


# ---------------------------------------------------------------------------------------- adapters
@dataclass
class PartResult:
    """What a sub-problem's solve sends back: the allocation (``allocation``/``throughputs`` as the
    policy reported them, ``X`` = its single-job rows over ``configs`` for the merged array),
    status, objective, timings and the adapter's compact ``report``. No allocation space."""

    status: Status
    objective: float | None
    allocation: dict[str, dict[str, float]]
    colocated: list[dict[str, Any]]
    throughputs: dict[str, float]
    timings: Timings
    message: str
    seconds: float
    cpu_seconds: float
    solver: str
    jobs: list[str] | None = None
    configs: list[str] | None = None
    X: np.ndarray | None = None
    report: dict[str, Any] = field(default_factory=dict)
    group: int = -1   # the group it solved
    worker: int = 0   # the process that solved it (0: the calling process)


class PopAdapter:
    """How POP cuts a problem into groups and merges their results — the plain problem's way.

    A problem type with other needs defines ``pop_adapter(self) -> PopAdapter`` returning a
    subclass (see :func:`pop_adapter`). One adapter is made per ``solve`` for that problem.
    Hooks, all optional to override:

    * :meth:`strata_labels` — one label per job; jobs are stratified by (scale factor, label);
    * :meth:`strata_priority` — an optional key before the scale factor (e.g. guaranteed first);
    * :meth:`capacity_units` — workers per indivisible unit of each type (1: any split);
    * :meth:`split_capacity` — re-split the units once the jobs are dealt (default: the even split);
    * :meth:`check_partition` — veto a partition (a reason string lowers ``k``);
    * :meth:`sub_problem` — group ``p``'s problem: its jobs, its share of the cluster;
    * :meth:`prepare_workers` — warm caches before the parallel phase;
    * :meth:`make_space` (class method) — the space a sub-problem is solved over (used where
      ``overrides_space``; otherwise the policy's own :meth:`Policy.make_space`);
    * :meth:`part_report` (class method) — a compact dict a worker sends back with its allocation;
    * :meth:`finish` — complete the merged result (array over the full space, reports).
    """

    #: solve sub-problems over :meth:`make_space` instead of the policy's own space
    overrides_space: bool = True

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.full_counts = np.array([w.count for w in problem.cluster.worker_types], float)

    # ------------------------------------------------------------------ partition
    def strata_labels(self) -> list[str]:
        """The ``job_type`` of each job ('' = unlabelled: the throughput vector is the stratum)."""
        return [j.job_type or "" for j in self.problem.jobs]

    def strata_priority(self) -> np.ndarray | None:
        """An optional first stratum key (jobs are dealt in increasing order of it, so each class
        is dealt round-robin as one block); None: no such key."""
        return None

    def capacity_units(self) -> np.ndarray:
        """Workers per indivisible unit of each type: 1 (workers are split one by one)."""
        return np.ones(len(self.problem.cluster.worker_types), np.int64)

    def split_capacity(self, group: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """``(k × types)`` workers per group once the jobs are dealt (``group``: job position →
        group), given the even split ``counts``. Plain problems keep ``counts``; an adapter may move
        units towards the groups that need more (same totals per type; a split that leaves a job
        without a type it can run on, or a group without workers, is ignored)."""
        return counts

    def check_partition(self, group: np.ndarray, counts: np.ndarray) -> str | None:
        """None to accept ``group`` (job position → group) with ``counts`` (k × types) workers, else
        the reason (POP then lowers ``k``). Plain problems: always accepted."""
        return None

    # ------------------------------------------------------------------ sub-problems
    def group_cluster(self, counts: np.ndarray) -> Cluster:
        """The full cluster with ``counts`` workers of each type (GPUs per server, prices kept)."""
        return Cluster(tuple(WorkerType(w.name, int(counts[i]), w.gpus_per_server, w.price_per_hour)
                             for i, w in enumerate(self.problem.cluster.worker_types)))

    def sub_problem(self, part: Partition, members: np.ndarray, p: int) -> Problem:
        """Group ``p``: the jobs at ``members`` (problem order), pairs inside the group, its workers."""
        jobs = [self.problem.jobs[i] for i in members.tolist()]
        return self.problem.with_jobs(jobs, cluster=self.group_cluster(part.counts[p]))

    def prepare_workers(self) -> None:
        """Called before the pool processes start: fill caches that travel with the adapter (or that
        this process, which solves groups too, reuses). Plain problems: nothing to do."""

    def context(self) -> Any:
        """What :meth:`make_space` needs besides the sub-problem (sent to workers): the full
        cluster's counts."""
        return self.full_counts

    @classmethod
    def make_space(cls, policy: Policy, context: Any, sub: Problem) -> AllocationSpace:
        """:class:`PopSpace`: the policy's options, cluster-wide normalizers."""
        return PopSpace(sub, bool(policy.config["space_sharing"]),
                        PairPruning(policy.config["pair_threshold"], policy.config["pair_top_k"]), context)

    @classmethod
    def part_report(cls, result: PolicyResult) -> dict[str, Any]:
        """Compact extras of one sub-problem's result (none for plain problems)."""
        return {}

    # ------------------------------------------------------------------ merge
    def finish(self, result: PolicyResult, parts: list[PartResult]) -> None:
        """Attach the merged allocation as an array over the whole cluster's space (when no pairs
        are allocated): ``result.X``, ``result.space``; vectorized scatter by configuration label."""
        if result.colocated_allocation or any(p.X is None or p.jobs is None for p in parts):
            return
        prob = self.problem if not self.problem.colocated else self.problem.with_jobs(self.problem.jobs, colocated=())
        space = AllocationSpace(prob, space_sharing=False)
        X = np.zeros((len(space.rows), len(space.configs)))
        for p in parts:
            assert p.X is not None and p.jobs is not None and p.configs is not None
            rows = space.jobs.positions(p.jobs)
            cols = space.configs.positions(p.configs)
            X[np.ix_(rows, cols)] = p.X
        result.X, result.space = X, space


def pop_adapter(problem: Problem) -> PopAdapter:
    """The problem's adapter: ``problem.pop_adapter()`` where its type defines one, else
    :class:`PopAdapter` (plain problems)."""
    hook = getattr(problem, "pop_adapter", None)
    return hook() if callable(hook) else PopAdapter(problem)
