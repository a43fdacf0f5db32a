"""Consolidating placement: multi-GPU jobs on as few servers as possible, biggest first.

Given this round's combinations (a job or a pair, ``g`` GPUs of one type):

1. *Lease renewal* (``renew=True``): in order of decreasing ``g``, a combination whose job held
   exactly ``g`` GPUs of the same type last round keeps them when they are all still free
   (for a pair, the first member's GPUs are tried, then the second's).
2. The rest, in order of decreasing ``g`` (stable, so the caller's priority order breaks ties):
   *best fit* -- the server of that type with the fewest free GPUs that still has ``>= g`` free;
   if none has, the job is *spread* over the servers with the most free GPUs first (the fewest
   servers possible for that free-GPU profile). Within a server the lowest free GPU ids are used.

Spread jobs are reported in :attr:`Placement.spread`; they run at the ``<type>_unconsolidated``
throughput where the data has one (see :func:`policyopt.placement.plan.unconsolidated_type`).
"""
from __future__ import annotations

import heapq

from typing import Sequence

import numpy as np

from policyopt.errors import InputError
from policyopt.mechanism.rounds import Combination, RoundAssignment
from policyopt.placement.layout import ClusterLayout
from policyopt.placement.plan import Placement

__all__ = ["consolidate", "first_fit", "check_capacity"]


def check_capacity(layout: ClusterLayout, combinations: Sequence[Combination]) -> None:
    """Raise :class:`InputError` unless every worker type has enough GPUs for its combinations."""
    need: dict[str, int] = {}
    for i, comb in enumerate(combinations):
        layout.type_index(comb.worker_type)
        if comb.num_gpus < 1 or not 1 <= len(comb.jobs) <= 2:
            raise InputError(f"assignment.combinations[{i}]", comb, "needs 1 or 2 jobs and >= 1 GPU")
        need[comb.worker_type] = need.get(comb.worker_type, 0) + comb.num_gpus
    have = layout.worker_counts()
    for t, n in need.items():
        if n > have[t]:
            raise InputError("assignment.combinations", n, f"need {n} GPUs of type {t}, the layout has {have[t]}")


def _result(layout: ClusterLayout, combs: Sequence[Combination], got: list[np.ndarray]) -> Placement:
    """The placement of ``combs`` on the GPUs ``got`` (distinct free GPUs of each combination's type, as
    the placers take them: valid by construction, so only the spread jobs are computed)."""
    gpus: dict[str, tuple[int, ...]] = {}
    pairs: set[tuple[str, str]] = set()
    spread: list[str] = []
    lengths = np.fromiter((g.size for g in got), np.int64, len(got))
    if lengths.size:
        srv = layout.gpu_server[np.concatenate(got)]
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1]))
        spread_mask = (np.minimum.reduceat(srv, starts) != np.maximum.reduceat(srv, starts)).tolist()
    else:
        spread_mask = []
    for comb, g, sp in zip(combs, got, spread_mask):
        ids = tuple(sorted(g.tolist()))
        for j in comb.jobs:
            if j in gpus:
                raise InputError("assignment.combinations", j, "a job appears in two combinations")
            gpus[j] = ids
            if sp:
                spread.append(j)
        if len(comb.jobs) == 2:
            a, b = sorted(comb.jobs)
            pairs.add((a, b))
    return Placement(layout, gpus, frozenset(pairs), frozenset(spread))


def consolidate(
    layout: ClusterLayout,
    assignment: RoundAssignment,
    previous: Placement | None = None,
    *,
    renew: bool = True,
) -> Placement:
    """Place ``assignment`` on ``layout`` (algorithm in the module docstring)."""
    combs = list(assignment.combinations)
    check_capacity(layout, combs)
    free = np.ones(layout.num_gpus, dtype=bool)
    free_per_server = layout.server_size.copy()
    got: list[np.ndarray | None] = [None] * len(combs)
    sizes = np.fromiter((c.num_gpus for c in combs), dtype=np.int64, count=len(combs))
    order = np.argsort(-sizes, kind="stable").tolist()

    # best fit without scanning every server per job: per worker type, heaps of server ids by free
    # GPUs (``buckets[t][f]``), updated lazily; free counts only fall, so a server's stale entries
    # are skipped when met (exactly the first server of smallest fitting free count, as a scan)
    buckets: dict[int, list[list[int]]] = {}

    def take(i: int, ids: np.ndarray) -> None:
        free[ids] = False
        got[i] = ids
        # per touched server (ascending ids), one GPU fewer free per GPU taken; plain ints: most
        # combinations touch one server and numpy's per-call overhead would dominate
        per_server: dict[int, int] = {}
        for s in layout.gpu_server[ids].tolist():
            per_server[s] = per_server.get(s, 0) + 1
        for s in sorted(per_server):
            free_per_server[s] -= per_server[s]
        for s in sorted(per_server):
            b = buckets.get(int(layout.server_type[s]))
            if b is not None:
                heapq.heappush(b[int(free_per_server[s])], s)

    def best_fit(t: int, srv: np.ndarray, g: int) -> int:
        b = buckets.get(t)
        if b is None:
            b = buckets[t] = [[] for _ in range(int(layout.server_size[srv].max(initial=0)) + 1)]
            for s in srv.tolist():  # ascending ids: each list is a valid heap
                b[int(free_per_server[s])].append(s)
        for f in range(g, len(b)):
            heap = b[f]
            while heap and free_per_server[heap[0]] != f:
                heapq.heappop(heap)
            if heap:
                return heap[0]
        return -1

    if renew and previous is not None:
        for i in order:
            comb = combs[i]
            t = layout.type_index(comb.worker_type)
            for j in comb.jobs:
                old = previous.gpus.get(j)
                if old is None or len(old) != comb.num_gpus:
                    continue
                ids = np.asarray(old, dtype=np.int64)
                if layout.gpu_type[ids[0]] == t and free[ids].all():
                    take(i, ids)
                    break

    servers_of = {t: layout.servers_of(t) for t in layout.worker_types}
    for i in order:
        if got[i] is not None:
            continue
        comb = combs[i]
        g = comb.num_gpus
        srv = servers_of[comb.worker_type]
        s = best_fit(layout.type_index(comb.worker_type), srv, g)
        if s >= 0:
            lo = layout.first_gpu[s]
            ids = lo + np.flatnonzero(free[lo:lo + layout.server_size[s]])[:g]
        else:
            fc = free_per_server[srv]
            by_free = srv[np.argsort(-fc, kind="stable")]
            parts, need = [], g
            for s in by_free.tolist():
                lo = layout.first_gpu[s]
                avail = lo + np.flatnonzero(free[lo:lo + layout.server_size[s]])
                parts.append(avail[:need])
                need -= min(need, avail.size)
                if need == 0:
                    break
            ids = np.concatenate(parts)
        take(i, ids)
    return _result(layout, combs, got)  # type: ignore[arg-type]


def first_fit(
    layout: ClusterLayout,
    assignment: RoundAssignment,
    previous: Placement | None = None,
    *,
    renew: bool = False,
) -> Placement:
    """Baseline placer: combinations in the given order take the lowest free GPU ids of their type.

    Ignores servers (jobs may be spread needlessly); with ``renew`` it first keeps renewed jobs'
    GPUs exactly as :func:`consolidate` does.
    """
    combs = list(assignment.combinations)
    check_capacity(layout, combs)
    free = np.ones(layout.num_gpus, dtype=bool)
    got: list[np.ndarray | None] = [None] * len(combs)
    if renew and previous is not None:
        for i, comb in enumerate(combs):
            t = layout.type_index(comb.worker_type)
            for j in comb.jobs:
                old = previous.gpus.get(j)
                if old is not None and len(old) == comb.num_gpus:
                    ids = np.asarray(old, dtype=np.int64)
                    if layout.gpu_type[ids[0]] == t and free[ids].all():
                        free[ids] = False
                        got[i] = ids
                        break
    for i, comb in enumerate(combs):
        if got[i] is None:
            t = layout.type_index(comb.worker_type)
            ids = np.flatnonzero(free & (layout.gpu_type == t))[: comb.num_gpus]
            free[ids] = False
            got[i] = ids
    return _result(layout, combs, got)  # type: ignore[arg-type]
