"""POP's partition: which group each job and each worker belongs to, kept stable across rounds.

:class:`PopState` deals a problem's jobs and splits its workers into ``k`` groups
(:class:`Partition`); :func:`policyopt.pop.pop` then solves one sub-problem per group. What the
partition guarantees:

* **balanced, seeded, stratified**: jobs are sorted into strata (the adapter's optional priority,
  scale factor, then the adapter's stratum label — for plain problems the ``job_type``, else the
  job's fastest physical type), shuffled inside
  each stratum with ``numpy.random.default_rng(seed)`` and dealt round-robin, so group sizes differ
  by at most one and every stratum is spread as evenly as possible (every group is a miniature of
  the workload);
* **capacity** (:func:`split_counts`): part ``p`` of a type with ``c`` units gets
  ``c//k + (p' < c mod k)`` units, where
  ``p' = (p − o_t) mod k`` rotates the parts that get the extra unit from type to type
  (``o_t`` = sum of the earlier types' remainders), so no group collects every remainder. A unit is
  one worker for plain problems, one node (``gpus_per_server`` GPUs) where the adapter says so.
  Once the jobs are dealt the adapter may move units between groups by their demand
  (:meth:`~policyopt.pop_adapter.PopAdapter.split_capacity`; reconfigurable problems do, see
  :mod:`policyopt.reconfig.pop_support`);
* **never an allocation that cannot run**: a job runs in a group only on a type of which the group
  has at least ``scale_factor`` workers. A job whose dealt group has no such type is *routed* to the
  least-loaded group that has one (swapping a flexible job back to keep sizes balanced); if some
  job fits no group, or the adapter rejects the partition
  (:meth:`~policyopt.pop_adapter.PopAdapter.check_partition`),
  ``k`` is lowered until it is accepted and every group has a worker. Both are reported
  (``routed``, ``k``, ``k_requested``, ``k_reason``);
* **stable across rounds**: the state keeps each job in its group; arrivals go to the eligible
  group holding the fewest jobs of their stratum (then the fewest jobs), departures are followed
  by the fewest moves that bring group sizes back within one of each other. A new cluster
  (types or counts) repartitions from scratch;
* **pairs within groups**: a sub-problem holds only its own jobs, so space-sharing pairs exist
  only inside a group; stratification gives every group the same mix of job types, hence the same
  kinds of pairs.

How a problem type is cut into groups (strata labels, capacity units, vetoes) is its adapter's
business (:mod:`policyopt.pop_adapter`); this module only deals and splits.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .errors import InputError
from .pop_adapter import PopAdapter, pop_adapter
from .problem import Problem, physical_type

__all__ = ["split_counts", "Partition", "PopState"]

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
