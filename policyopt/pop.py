"""POP (partitioned optimization problems): split jobs and workers into ``k`` groups, solve the ``k``
sub-problems in parallel processes, merge the allocations.

``pop(policy, k, seed)`` wraps any policy whose jobs interact only through per-type capacity rows
and whose objective recombines over groups (the policy's ``pop_combine``: ``"sum"`` — sub-objectives
add; ``"min"`` — max-min objectives take the smallest; ``"max"`` — min-max objectives such as
makespan take the largest).

What the partition guarantees (:class:`PopState`):

* **balanced, seeded, stratified**: jobs are sorted into strata (scale factor, then job type — the
  ``job_type`` label, else the throughput vector), shuffled inside each stratum with
  ``numpy.random.default_rng(seed)`` and dealt round-robin, so group sizes differ by at most one and
  every stratum is spread as evenly as possible (every group is a miniature of the workload);
* **capacity**: part ``p`` of a type with ``c`` workers gets ``c//k + (p' < c mod k)`` workers, where
  ``p' = (p − o_t) mod k`` rotates the parts that get the extra worker from type to type
  (``o_t`` = sum of the earlier types' remainders), so no group collects every remainder;
* **never an allocation that cannot run**: a job runs in a group only on a type of which the group
  has at least ``scale_factor`` workers. A job whose dealt group has no such type is *routed* to the
  least-loaded group that has one (swapping a flexible job back to keep sizes balanced); if some
  job fits no group, ``k`` is lowered until every job fits and every group has a worker. Both are
  reported (``routed``, ``k``, ``k_requested``, ``k_reason``);
* **stable across rounds**: the state keeps each job in its group; arrivals go to the eligible
  group holding the fewest jobs of their stratum (then the fewest jobs), departures are followed
  by the fewest moves that bring group sizes back within one of each other. A new cluster
  (types or counts) repartitions from scratch;
* **pairs within groups**: a sub-problem holds only its own jobs, so space-sharing pairs exist
  only inside a group; stratification gives every group the same mix of job types, hence the same
  kinds of pairs.

Normalizers are cluster-wide: each sub-problem's ``thr(m, X_equal)`` uses the whole cluster's counts
(``X_equal[m,c] = count_c/Σcount``) and the whole cluster's fits, so sub-objectives are on one
scale. (Policies must build their space through :meth:`Policy.make_space`, which POP overrides.)

Timings in ``result.extra["pop"]``: ``partition_seconds[p]`` = wall seconds of sub-problem ``p``'s
solve where it ran; ``sequential_seconds`` = their sum; ``parallel_seconds`` = measured wall time of
the parallel phase including process start-up and transfers (``None`` when run sequentially).
"""
from __future__ import annotations

import copy
import functools
import multiprocessing as mp
import os
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .allocation import AllocationSpace, PairPruning
from .errors import InputError
from .policy import Policy, get_policy
from .problem import Cluster, Job, Problem, WorkerType, physical_type
from .result import PolicyResult, Status, Timings

__all__ = ["pop", "PopPolicy", "PopState", "Partition", "split_counts", "PopSpace"]

COMBINE = ("sum", "min", "max")


# ---------------------------------------------------------------------------------------- capacity
def split_counts(counts: np.ndarray, k: int) -> np.ndarray:
    """``(k × types)`` workers per group: ``c//k + (p' < c mod k)`` with the rotated part index
    ``p' = (p − o_t) mod k``, ``o_t = (Σ_{t'<t} c_t' mod k) mod k``."""
    c = np.asarray(counts, np.int64)
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

    def summary(self) -> dict[str, Any]:
        return {"k": self.k, "k_requested": self.k_requested, "seed": self.seed,
                "group_sizes": self.sizes().tolist(),
                "group_counts": {t: self.counts[:, i].tolist() for i, t in enumerate(self.worker_types)},
                "routed": list(self.routed), "k_reason": self.k_reason, "moved": self.moved,
                "arrivals": self.arrivals, "departures": self.departures}


def _job_arrays(problem: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per job: scale factor, best throughput per physical type (n × types), stratum id. Strata are
    (scale factor, job type) — the ``job_type`` label, else the throughput vector — numbered in
    order of scale factor."""
    arr = problem.arrays
    names = problem.cluster.names
    tpos = {t: i for i, t in enumerate(names)}
    ctype = np.array([tpos[physical_type(c)] for c in arr.configs], np.int64)
    n = len(problem.jobs)
    best = np.zeros((len(names), n))
    np.maximum.at(best, ctype, arr.T.T)
    sf = arr.scale.astype(np.int64)
    labels = [j.job_type or "" for j in problem.jobs]
    _, code = np.unique(np.array(labels, dtype=object).astype(str), return_inverse=True)
    has = np.array([lab != "" for lab in labels])
    kind = np.where(has[:, None], 0.0, arr.T)  # unlabelled jobs: their throughput vector is the kind
    key = np.column_stack([sf, has, np.where(has, code.ravel(), -1), kind])
    _, strata = np.unique(key, axis=0, return_inverse=True)
    return sf, best.T, strata.ravel().astype(np.int64)


def _eligible(sf: np.ndarray, best: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """``(n × k)``: job m can run in group p (some type with throughput and ≥ sf_m workers)."""
    return np.any((best[:, None, :] > 0) & (sf[:, None, None] <= counts[None, :, :]), axis=2)


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
    def update(self, problem: Problem) -> Partition:
        key = tuple((w.name, w.count) for w in problem.cluster.worker_types)
        if self.partition is None or key != self._cluster_key:
            self.partition = self._fresh(problem)
            self._cluster_key = key
            return self.partition
        return self._incremental(problem)

    # ------------------------------------------------------------------ from scratch
    def _fresh(self, problem: Problem) -> Partition:
        counts = np.array([w.count for w in problem.cluster.worker_types], np.int64)
        sf, best, strata = _job_arrays(problem)
        n = sf.size
        k, reason = self.k_requested, None
        if k > n:
            k, reason = n, f"k capped at the number of jobs ({n})"
        while True:
            parts = split_counts(counts, k)
            elig = _eligible(sf, best, parts)
            empty = parts.sum(axis=1) == 0
            if k == 1 or (not empty.any() and elig.any(axis=1).all()):
                break
            bad = np.flatnonzero(~elig.any(axis=1))
            why = (f"job {problem.jobs[bad[0]].id} (scale factor {sf[bad[0]]}) fits no group" if bad.size
                   else "a group would have no workers")
            k, reason = k - 1, f"k lowered from {self.k_requested}: with {k} groups {why}"
        order = np.lexsort((self.rng.permutation(n), strata))
        group = np.empty(n, np.int64)
        group[order] = (np.arange(n) + int(self.rng.integers(k))) % k
        routed = self._route(group, elig, strata)
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
    def _incremental(self, problem: Problem) -> Partition:
        part = self.partition
        assert part is not None
        k = part.k
        sf, best, strata = _job_arrays(problem)
        elig = _eligible(sf, best, part.counts)
        if not elig.any(axis=1).all():  # a new job fits no group at this k: start over
            self.partition = self._fresh(problem)
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
        self.partition = Partition(k, self.k_requested, self.seed, dict(zip(ids, group.tolist())), part.counts,
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


def _pop_make_space(policy: Policy, full_counts: np.ndarray, problem: Problem) -> AllocationSpace:
    return PopSpace(problem, bool(policy.config["space_sharing"]),
                    PairPruning(policy.config["pair_threshold"], policy.config["pair_top_k"]), full_counts)


@dataclass
class _PartResult:
    """What a worker sends back (no allocation space: it is rebuilt where needed)."""

    status: Status
    objective: float | None
    allocation: dict[str, dict[str, float]]
    colocated: list[dict[str, Any]]
    throughputs: dict[str, float]
    timings: Timings
    message: str
    seconds: float
    solver: str


_FORKED: tuple[Policy, list[Problem], np.ndarray] | None = None  # tasks handed to forked workers


def _worker_init() -> None:
    """A forked worker starts HiGHS's thread scheduler afresh (threads do not survive ``fork``)."""
    try:
        import highspy

        highspy.Highs.resetGlobalScheduler(True)
    except (ImportError, AttributeError):  # pragma: no cover - older highspy
        pass


def _solve_forked(index: int) -> _PartResult:
    assert _FORKED is not None
    policy, subs, full_counts = _FORKED
    return _solve_part(policy, subs[index], full_counts)


def _solve_part(policy: Policy, sub: Problem, full_counts: np.ndarray) -> _PartResult:
    """Solve one sub-problem (runs in a worker process or in-process)."""
    t0 = time.perf_counter()
    pol = copy.copy(policy)
    pol.config = dict(policy.config)
    pol.make_space = functools.partial(_pop_make_space, pol, full_counts)  # type: ignore[method-assign]
    res = pol.solve(sub)
    return _PartResult(res.status, res.objective, res.allocation, res.colocated_allocation,
                       res.effective_throughputs, res.timings, res.message, time.perf_counter() - t0, res.solver)


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
        if max_workers is not None and max_workers < 1:
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
        part = self.state.update(problem)
        subs = self.sub_problems(problem, part)
        full_counts = np.array([w.count for w in problem.cluster.worker_types], float)
        t_part = time.perf_counter() - t0
        workers = min(part.k, self.max_workers or os.cpu_count() or 1)
        parallel = self.parallel and part.k > 1 and workers > 1
        t1 = time.perf_counter()
        todo = [p for p, s in enumerate(subs) if s.jobs]  # a group can empty out between rounds
        if parallel:
            solved = _run_parallel(self.inner, [subs[p] for p in todo], full_counts, workers)
        else:
            solved = [_solve_part(self.inner, subs[p], full_counts) for p in todo]
        wall = time.perf_counter() - t1
        results = solved
        res = self.merge(problem, part, results)
        res.timings.build += t_part
        seconds = [0.0] * part.k
        for p, r in zip(todo, solved):
            seconds[p] = r.seconds
        res.extra["pop"] = {**part.summary(), "combine": self.combine, "mode": "parallel" if parallel else "sequential",
                            "workers": workers if parallel else 1, "partition_seconds": seconds,
                            "sequential_seconds": float(sum(seconds)),
                            "parallel_seconds": wall if parallel else None}
        return res

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def sub_problems(problem: Problem, part: Partition) -> list[Problem]:
        """One problem per group: its jobs (original order), its workers, pairs inside it."""
        buckets: list[list[Job]] = [[] for _ in range(part.k)]
        for j in problem.jobs:
            buckets[part.group[j.id]].append(j)
        subs = []
        for p, jobs in enumerate(buckets):
            cluster = Cluster(tuple(WorkerType(w.name, int(part.counts[p, i]), w.gpus_per_server, w.price_per_hour)
                                    for i, w in enumerate(problem.cluster.worker_types)))
            subs.append(problem.with_jobs(jobs, cluster=cluster))
        return subs

    def merge(self, problem: Problem, part: Partition, results: list[_PartResult]) -> PolicyResult:
        """Union of the groups' allocations; objective recombined by ``combine``; worst status."""
        t0 = time.perf_counter()
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
        message = "; ".join(f"group {i}: {r.message}" for i, r in enumerate(results) if r.message)
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
        if not colocated:  # the merged allocation as an array over the whole cluster's space
            space = AllocationSpace(problem.with_jobs(problem.jobs, colocated=()), space_sharing=False)
            cfg = {c: i for i, c in enumerate(space.configs.labels.tolist())}
            X = np.zeros((len(space.rows), len(space.configs)))
            for i, jid in enumerate(order):
                for c, f in allocation[jid].items():
                    X[i, cfg[c]] = f
            res.X, res.space = X, space
        res.timings.extract += time.perf_counter() - t0
        return res


def _run_parallel(policy: Policy, subs: list[Problem], full_counts: np.ndarray, workers: int) -> list[_PartResult]:
    """Solve the sub-problems in ``workers`` processes. Where ``fork`` exists the workers inherit the
    sub-problems (nothing is pickled on the way in); elsewhere they are pickled."""
    global _FORKED
    if "fork" in mp.get_all_start_methods():
        _FORKED = (policy, subs, full_counts)
        try:
            with ProcessPoolExecutor(max_workers=workers, mp_context=mp.get_context("fork"),
                                     initializer=_worker_init) as ex:
                return list(ex.map(_solve_forked, range(len(subs))))
        finally:
            _FORKED = None
    with ProcessPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(_solve_part, [policy] * len(subs), subs, [full_counts] * len(subs)))


def pop(policy: Policy | str, k: int, seed: int = 0, *, combine: str | None = None, parallel: bool = True,
        max_workers: int | None = None) -> PopPolicy:
    """Wrap ``policy`` (an instance or a registered name) with POP: ``k`` groups, partition seeded by
    ``seed``; sub-problems solved in up to ``max_workers`` processes (default: CPU count) when
    ``parallel``. ``combine`` overrides the policy's ``pop_combine``. The returned policy keeps its
    partition across calls of ``solve`` (stable rounds)."""
    return PopPolicy(policy, k, seed, combine=combine, parallel=parallel, max_workers=max_workers)
