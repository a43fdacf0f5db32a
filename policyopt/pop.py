"""POP (partitioned optimization problems): split jobs and workers into ``k`` groups, solve the ``k``
sub-problems in parallel processes, merge the allocations.

``pop(policy, k, seed)`` wraps any policy whose jobs interact only through per-type capacity rows
and whose objective recombines over groups (the policy's ``pop_combine``: ``"sum"`` — sub-objectives
add; ``"min"`` — max-min objectives take the smallest; ``"max"`` — min-max objectives such as
makespan take the largest).

One ``pop`` serves every kind of problem: what differs between kinds (how a group's problem is
cut out, which space a sub-problem is solved over, what the merged result carries) lives in a
:class:`PopAdapter`. A problem type supplies its own by defining ``pop_adapter(self) ->
PopAdapter``; plain :class:`~policyopt.problem.Problem` objects use :class:`PopAdapter` itself.
(``policyopt.reconfig`` does so for ``ReconfigProblem``: the dependency points from there to here.)

What the partition guarantees (:class:`PopState`):

* **balanced, seeded, stratified**: jobs are sorted into strata (the adapter's optional priority,
  scale factor, then the adapter's stratum label — for plain problems the ``job_type``, else the
  job's fastest physical type), shuffled inside
  each stratum with ``numpy.random.default_rng(seed)`` and dealt round-robin, so group sizes differ
  by at most one and every stratum is spread as evenly as possible (every group is a miniature of
  the workload);
* **capacity**: part ``p`` of a type with ``c`` units gets ``c//k + (p' < c mod k)`` units, where
  ``p' = (p − o_t) mod k`` rotates the parts that get the extra unit from type to type
  (``o_t`` = sum of the earlier types' remainders), so no group collects every remainder. A unit is
  one worker for plain problems, one node (``gpus_per_server`` GPUs) where the adapter says so.
  Once the jobs are dealt the adapter may move units between groups by their demand
  (:meth:`PopAdapter.split_capacity`; reconfigurable problems do, see
  :mod:`policyopt.reconfig.pop_support`);
* **never an allocation that cannot run**: a job runs in a group only on a type of which the group
  has at least ``scale_factor`` workers. A job whose dealt group has no such type is *routed* to the
  least-loaded group that has one (swapping a flexible job back to keep sizes balanced); if some
  job fits no group, or the adapter rejects the partition (:meth:`PopAdapter.check_partition`),
  ``k`` is lowered until it is accepted and every group has a worker. Both are reported
  (``routed``, ``k``, ``k_requested``, ``k_reason``);
* **stable across rounds**: the state keeps each job in its group; arrivals go to the eligible
  group holding the fewest jobs of their stratum (then the fewest jobs), departures are followed
  by the fewest moves that bring group sizes back within one of each other. A new cluster
  (types or counts) repartitions from scratch;
* **pairs within groups**: a sub-problem holds only its own jobs, so space-sharing pairs exist
  only inside a group; stratification gives every group the same mix of job types, hence the same
  kinds of pairs.

Normalizers of plain problems are cluster-wide: each sub-problem's ``thr(m, X_equal)`` uses the
whole cluster's counts (``X_equal[m,c] = count_c/Σcount``) and the whole cluster's fits, so
sub-objectives are on one scale. (Policies must build their space through
:meth:`Policy.make_space`, which POP overrides for plain problems.)

Parallel execution (``workers`` processes: this one and ``workers − 1`` pool processes): the
groups form one queue, largest first, from which every process takes the next group when it is
free (self-scheduling, so a process slowed down by other load takes fewer). The pool processes are
started with ``forkserver`` (``spawn`` where there is none), never ``fork``: this process may
already run HiGHS's thread pool, and forking a multi-threaded process can deadlock the child
(Python 3.12 warns about it). Each pool process receives the full problem, the partition and the
policy once (pickled) and cuts its own sub-problems; only each group's allocation, throughputs and
a small report come back. Before the pool starts the adapter may warm caches that then travel with
it (:meth:`PopAdapter.prepare_workers`).

Timings in ``result.extra["pop"]``: ``partition_seconds[p]`` = wall seconds of sub-problem ``p``
where it ran (cutting it out of the full problem and solving it); ``partition_cpu_seconds[p]`` =
the CPU seconds of the same (wall well above CPU means the process waited for a core);
``worker_seconds[w]`` = the wall seconds process ``w`` spent on sub-problems (``w = 0``: the calling
process); ``sequential_seconds`` = the sum of ``partition_seconds``; ``parallel_seconds`` = measured
wall time of the parallel phase including process start-up and transfers (``None`` when run
sequentially).
"""
from __future__ import annotations

import copy
import functools
import logging
import multiprocessing as mp
import os
import pickle
import sys
import time
import types
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .allocation import AllocationSpace, PairPruning
from .errors import InputError
from .policy import Policy, get_policy
from .problem import Cluster, Problem, WorkerType, physical_type
from .result import PolicyResult, Status, Timings

log = logging.getLogger(__name__)

__all__ = ["pop", "PopPolicy", "PopState", "Partition", "split_counts", "PopSpace", "PopAdapter",
           "pop_adapter", "PartResult"]

COMBINE = ("sum", "min", "max")


# ---------------------------------------------------------------------------------------- capacity
def split_counts(counts: np.ndarray, k: int, units: np.ndarray | None = None) -> np.ndarray:
    """``(k × types)`` workers per group: ``c//k + (p' < c mod k)`` with the rotated part index
    ``p' = (p − o_t) mod k``, ``o_t = (Σ_{t'<t} c_t' mod k) mod k``.

    With ``units`` (workers per indivisible unit of each type, e.g. GPUs per node) the formula
    splits whole units, ``c_t // u_t`` of them, and the ``c_t mod u_t`` workers of a partial unit go
    to the part with the fewest workers of that type."""
    c = np.asarray(counts, np.int64)
    if units is not None:
        u = np.maximum(np.asarray(units, np.int64), 1)
        parts = split_counts(c // u, k) * u[None, :]
        rem = c - (c // u) * u
        parts[np.argmin(parts, axis=0), np.arange(c.size)] += rem
        return parts
    rem = c % k
    offset = np.concatenate([[0], np.cumsum(rem)[:-1]]) % k
    p = np.arange(k)[:, None]
    return c[None, :] // k + (((p - offset[None, :]) % k) < rem[None, :]).astype(np.int64)


# ---------------------------------------------------------------------------------------- partition
@dataclass
class Partition:
    """A partition of a problem's jobs and workers into ``k`` groups."""

    k: int
    k_requested: int
    seed: int
    group: dict[str, int]                 # job id → group
    counts: np.ndarray                    # (k × types) workers per group
    worker_types: list[str]
    routed: list[str] = field(default_factory=list)
    k_reason: str | None = None
    moved: int = 0                        # jobs moved by the last update's rebalancing
    arrivals: int = 0
    departures: int = 0

    def sizes(self) -> np.ndarray:
        return np.bincount(np.fromiter(self.group.values(), np.int64, len(self.group)), minlength=self.k)

    def members(self, problem: Problem) -> list[np.ndarray]:
        """Per group, the positions of its jobs in ``problem.jobs`` (problem order)."""
        g = np.fromiter((self.group[j.id] for j in problem.jobs), np.int64, len(problem.jobs))
        order = np.argsort(g, kind="stable")
        return np.split(order, np.cumsum(np.bincount(g, minlength=self.k))[:-1])

    def summary(self) -> dict[str, Any]:
        return {"k": self.k, "k_requested": self.k_requested, "seed": self.seed,
                "group_sizes": self.sizes().tolist(),
                "group_counts": {t: self.counts[:, i].tolist() for i, t in enumerate(self.worker_types)},
                "routed": list(self.routed), "k_reason": self.k_reason, "moved": self.moved,
                "arrivals": self.arrivals, "departures": self.departures}


def _job_arrays(problem: Problem, labels: list[str], priority: np.ndarray | None = None
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job: scale factor, best throughput per physical type (n × types), stratum id. Strata are
    (priority, scale factor, stratum label) — for unlabelled jobs their fastest physical type (a
    coarse kind: a stratum per throughput vector would make every unlabelled job its own stratum and
    leave the seed nothing to shuffle) — numbered in that order (the order in which jobs are dealt)."""
    arr = problem.arrays
    names = problem.cluster.names
    tpos = {t: i for i, t in enumerate(names)}
    ctype = np.array([tpos[physical_type(c)] for c in arr.configs], np.int64)
    n = len(problem.jobs)
    best = np.zeros((len(names), n))
    np.maximum.at(best, ctype, arr.T.T)
    sf = arr.scale.astype(np.int64)
    _, code = np.unique(np.array(labels, dtype=object).astype(str), return_inverse=True)
    has = np.array([lab != "" for lab in labels], bool)
    fastest = np.argmax(best, axis=0)  # unlabelled jobs: their fastest physical type is the kind
    key = np.column_stack([sf, has, np.where(has, code.ravel(), -1), np.where(has, -1, fastest)])
    if priority is not None:
        key = np.column_stack([np.asarray(priority, float), key])
    _, strata = np.unique(key, axis=0, return_inverse=True)
    return sf, best.T, strata.ravel().astype(np.int64)


def _eligible(sf: np.ndarray, best: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``(n × k)``: job m can run in group p (some type with throughput and ≥ sf_m workers)."""
    return np.any((best[:, None, :] > 0) & (sf[:, None, None] <= counts[None, :, :]), axis=2)


def _resplit(adapter: "PopAdapter", group: np.ndarray, counts: np.ndarray, sf: np.ndarray,
             best: np.ndarray) -> np.ndarray:
    """The adapter's capacity split for the dealt ``group`` (:meth:`PopAdapter.split_capacity`),
    kept only when every job can still run in its group and every group keeps a worker; else
    ``counts``."""
    new = np.asarray(adapter.split_capacity(group, counts), np.int64)
    if new.shape != counts.shape or np.array_equal(new, counts) or not np.array_equal(new.sum(0), counts.sum(0)):
        return counts
    if (new.sum(axis=1) == 0).any() or not _eligible(sf, best, new)[np.arange(group.size), group].all():
        return counts
    return new


class PopState:
    """A partition kept across rounds (see the module docstring). :meth:`update` returns the
    partition for a problem; jobs already placed keep their group."""

    def __init__(self, k: int, seed: int = 0) -> None:
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise InputError("pop.k", k, "must be an integer >= 1")
        self.k_requested = int(k)
        self.seed = int(seed)
        self.rng = np.random.default_rng(seed)
        self.partition: Partition | None = None
        self._cluster_key: tuple[Any, ...] | None = None

    # ------------------------------------------------------------------ public
    def update(self, problem: Problem, adapter: "PopAdapter | None" = None) -> Partition:
        """The partition of ``problem`` (``adapter``: the problem's :class:`PopAdapter`, default
        :func:`pop_adapter`)."""
        adapter = adapter if adapter is not None else pop_adapter(problem)
        key = tuple((w.name, w.count) for w in problem.cluster.worker_types)
        if self.partition is None or key != self._cluster_key:
            self.partition = self._fresh(problem, adapter)
            self._cluster_key = key
            return self.partition
        return self._incremental(problem, adapter)

    # ------------------------------------------------------------------ from scratch
    def _fresh(self, problem: Problem, adapter: "PopAdapter") -> Partition:
        counts = np.array([w.count for w in problem.cluster.worker_types], np.int64)
        units = adapter.capacity_units()
        sf, best, strata = _job_arrays(problem, adapter.strata_labels(), adapter.strata_priority())
        n = sf.size
        k, reason = self.k_requested, None
        if k > n:
            k, reason = n, f"k capped at the number of jobs ({n})"
        while True:
            parts = split_counts(counts, k, units)
            elig = _eligible(sf, best, parts)
            empty = parts.sum(axis=1) == 0
            if k > 1 and (empty.any() or not elig.any(axis=1).all()):
                bad = np.flatnonzero(~elig.any(axis=1))
                why = (f"job {problem.jobs[bad[0]].id} (scale factor {sf[bad[0]]}) fits no group" if bad.size
                       else "a group would have no workers")
                k, reason = k - 1, f"k lowered from {self.k_requested}: with {k} groups {why}"
                continue
            order = np.lexsort((self.rng.permutation(n), strata))
            group = np.empty(n, np.int64)
            group[order] = (np.arange(n) + int(self.rng.integers(k))) % k
            routed = self._route(group, elig, strata)
            if k > 1:
                parts = _resplit(adapter, group, parts, sf, best)
            veto = adapter.check_partition(group, parts) if k > 1 else None
            if veto is None:
                break
            k, reason = k - 1, f"k lowered from {self.k_requested}: with {k} groups {veto}"
        ids = [j.id for j in problem.jobs]
        return Partition(k, self.k_requested, self.seed, dict(zip(ids, group.tolist())), parts,
                         problem.cluster.names, [ids[i] for i in routed], reason, arrivals=n)

    def _route(self, group: np.ndarray, elig: np.ndarray, strata: np.ndarray) -> list[int]:
        """Move every job dealt to a group it cannot run in to the least-loaded group it can; if that
        leaves the destination more than one job above the source, send back the job of the
        destination's most over-represented stratum (relative to the source) that can run there."""
        routed = []
        k = elig.shape[1]
        n_strata = int(strata.max()) + 1
        for m in np.flatnonzero(~elig[np.arange(group.size), group]).tolist():
            src = int(group[m])
            cand = np.flatnonzero(elig[m])
            sizes = np.bincount(group, minlength=k)
            dst = int(cand[np.argmin(sizes[cand])])
            group[m] = dst
            routed.append(m)
            if sizes[dst] + 1 - (sizes[src] - 1) > 1:
                back = np.flatnonzero((group == dst) & elig[:, src] & (np.arange(group.size) != m))
                if back.size:
                    excess = (np.bincount(strata[group == dst], minlength=n_strata)
                              - np.bincount(strata[group == src], minlength=n_strata))
                    group[back[np.argmax(excess[strata[back]])]] = src
        return routed

    # ------------------------------------------------------------------ rounds
    def _incremental(self, problem: Problem, adapter: "PopAdapter") -> Partition:
        part = self.partition
        assert part is not None
        k = part.k
        sf, best, strata = _job_arrays(problem, adapter.strata_labels(), adapter.strata_priority())
        elig = _eligible(sf, best, part.counts)
        if not elig.any(axis=1).all():  # a new job fits no group at this k: start over
            self.partition = self._fresh(problem, adapter)
            return self.partition
        ids = [j.id for j in problem.jobs]
        current = set(ids)
        departed = [j for j in part.group if j not in current]
        group = np.full(len(ids), -1, np.int64)
        for i, jid in enumerate(ids):
            g = part.group.get(jid, -1)
            if g >= 0 and elig[i, g]:
                group[i] = g
        arrivals = np.flatnonzero(group < 0)
        routed = [jid for jid in part.routed if jid in current]
        n_strata = int(strata.max()) + 1 if strata.size else 1
        for i in arrivals.tolist():
            placed = group >= 0
            per_stratum = np.bincount(group[placed & (strata == strata[i])], minlength=k)
            sizes = np.bincount(group[placed], minlength=k)
            cand = np.flatnonzero(elig[i])
            score = per_stratum[cand] * (len(ids) + 1) + sizes[cand]
            best_c = cand[score == score.min()]
            group[i] = int(best_c[self.rng.integers(best_c.size)])
        moved = 0
        while True:  # fewest moves that restore |size_p − size_q| ≤ 1
            sizes = np.bincount(group, minlength=k)
            big, small = int(np.argmax(sizes)), int(np.argmin(sizes))
            if sizes[big] - sizes[small] <= 1:
                break
            movable = np.flatnonzero((group == big) & elig[:, small])
            if not movable.size:
                break
            excess = (np.bincount(strata[group == big], minlength=n_strata)
                      - np.bincount(strata[group == small], minlength=n_strata))
            pick = movable[np.argmax(excess[strata[movable]])]
            group[pick] = small
            moved += 1
        counts = _resplit(adapter, group, part.counts, sf, best) if k > 1 else part.counts
        if k > 1 and adapter.check_partition(group, counts) is not None:
            self.partition = self._fresh(problem, adapter)  # the adapter rejects it: start over
            return self.partition
        self.partition = Partition(k, self.k_requested, self.seed, dict(zip(ids, group.tolist())), counts,
                                   part.worker_types, routed, part.k_reason, moved, int(arrivals.size), len(departed))
        return self.partition


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


# ---------------------------------------------------------------------------------------- workers
def _solve_sub(policy: Policy, adapter_cls: type[PopAdapter], context: Any, sub: Problem,
               t0: float, c0: float) -> PartResult:
    """Solve one sub-problem with ``policy`` over ``adapter_cls.make_space`` (in-process or in a
    worker); ``t0``/``c0`` = wall/CPU clocks when the part's work began."""
    pol = copy.copy(policy)
    pol.config = dict(policy.config)
    if adapter_cls.overrides_space:
        pol.make_space = functools.partial(adapter_cls.make_space, pol, context)  # type: ignore[method-assign]
    res = pol.solve(sub)
    X = jobs = configs = None
    if res.X is not None and res.space is not None:
        n = len(res.space.jobs)
        X, jobs, configs = np.asarray(res.X)[:n], res.space.jobs.labels.tolist(), res.space.configs.labels.tolist()
    return PartResult(res.status, res.objective, res.allocation, res.colocated_allocation,
                      res.effective_throughputs, res.timings, res.message, time.perf_counter() - t0,
                      time.process_time() - c0, res.solver, jobs, configs, X, adapter_cls.part_report(res))


def _solve_group(policy: Policy, adapter: PopAdapter, part: Partition, members: list[np.ndarray],
                 p: int) -> PartResult:
    """Cut group ``p`` out of the full problem and solve it (timed from the cut)."""
    t0, c0 = time.perf_counter(), time.process_time()
    sub = adapter.sub_problem(part, members[p], p)
    res = _solve_sub(policy, type(adapter), adapter.context(), sub, t0, c0)
    res.group = p
    return res


#: what every process of a parallel run works from: (policy, adapter, partition, members, queue order, shared
#: counter); set in this process by _run_parallel and in each pool process by _worker_init
_SHARED: tuple[Policy, PopAdapter, Partition, list[np.ndarray], list[int], Any] | None = None
#: start method of the pool processes: a fresh process (never ``fork``: module docstring)
START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
#: modules the fork server imports once, so each pool process starts without importing them again
_PRELOAD = ["numpy", "scipy.sparse", "highspy", "policyopt", "policyopt.pop", "policyopt.formulations"]


def _worker_init(payload: bytes, counter: Any) -> None:
    """A pool process: unpickle the shared state (one pickle for all workers) and keep the counter."""
    global _SHARED
    policy, adapter, part, members, order = pickle.loads(payload)
    _SHARED = (policy, adapter, part, members, order, counter)


class _Carried(Exception):
    """An exception raised in a worker, carried back as (class, args, attributes): some exceptions
    (e.g. :class:`InputError`, whose ``__init__`` takes three arguments) do not survive pickling."""

    def rebuild(self) -> BaseException:
        cls, args, state = self.args
        exc = cls.__new__(cls)
        exc.args = args
        exc.__dict__.update(state)
        return exc


def _carry(exc: Exception) -> Exception:
    """``exc`` if it survives pickling, else a :class:`_Carried` copy of it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to round-trip means: carry it
        return _Carried(type(exc), exc.args, dict(exc.__dict__))


def _drain(worker: int) -> list[PartResult]:
    """Solve groups taken one at a time from the shared queue (``order`` and a shared counter) until
    it is empty; ``worker`` 0 is the parent process."""
    assert _SHARED is not None
    policy, adapter, part, members, order, counter = _SHARED
    out: list[PartResult] = []
    while True:
        with counter.get_lock():
            i = counter.value
            counter.value = i + 1
        if i >= len(order):
            return out
        try:
            r = _solve_group(policy, adapter, part, members, order[i])
        except Exception as exc:
            if worker == 0:
                raise
            raise _carry(exc) from None
        r.worker = worker
        out.append(r)


def _run_parallel(policy: Policy, adapter: PopAdapter, part: Partition, members: list[np.ndarray],
                  todo: list[int], workers: int) -> list[PartResult]:
    """Solve groups ``todo`` in ``workers`` processes — this one and ``workers − 1`` pool processes
    (``forkserver``/``spawn``: module docstring) — that take groups from one shared queue, largest
    first (self-scheduling: a process slowed down by other load simply takes fewer groups). Each
    pool process gets the full problem, the partition and the policy once and cuts its own
    sub-problems; only results come back. Results in ``todo`` order."""
    global _SHARED
    order = sorted(todo, key=lambda p: -members[p].size)
    ctx = mp.get_context(START_METHOD)
    if START_METHOD == "forkserver":
        ctx.set_forkserver_preload(_PRELOAD)
    adapter.prepare_workers()
    counter = ctx.Value("i", 0)
    payload = pickle.dumps((policy, adapter, part, members, order), protocol=pickle.HIGHEST_PROTOCOL)
    _SHARED = (policy, adapter, part, members, order, counter)
    try:
        with ProcessPoolExecutor(max_workers=workers - 1, mp_context=ctx, initializer=_worker_init,
                                 initargs=(payload, counter)) as ex:
            futures = [ex.submit(_drain, w) for w in range(1, workers)]
            try:
                done = _drain(0)
                for f in futures:
                    try:
                        done += f.result()
                    except BrokenProcessPool as exc:  # e.g. a script without the __main__ guard
                        log.warning("POP: a pool process died (%s); its groups are solved in this process. "
                                    "Scripts that run POP in parallel need the `if __name__ == '__main__':` "
                                    "guard (the pool processes import the main module).", exc)
                solved = {r.group for r in done}
                for p in order:
                    if p not in solved:
                        r = _solve_group(policy, adapter, part, members, p)
                        r.worker = 0
                        done.append(r)
            except BaseException as exc:
                with counter.get_lock():  # empty the queue: the other processes stop early
                    counter.value = len(order)
                if isinstance(exc, _Carried):
                    raise exc.rebuild() from None
                raise
    finally:
        _SHARED = None
    out = {r.group: r for r in done}
    return [out[p] for p in todo]


# ---------------------------------------------------------------------------------------- the policy
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


def _cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1


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
