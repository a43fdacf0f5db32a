"""Migration minimization: relabel this round's GPUs so the fewest jobs move.

A placement plan only fixes *which jobs share a server / a GPU*; any permutation of servers of
the same type and size, combined with a permutation of GPUs inside each server, yields an
equivalent plan (same consolidation, same pairs). We pick the permutation closest to last
round's placement. Three rules:

* ``matching`` (:class:`MatchingMigration`, the default): job-exact -- fewest jobs whose GPU set
  changes (:mod:`policyopt.placement.job_exact`), never more than the simple rule;
* ``tesserae`` (:class:`TesseraeMigration`): Tesserae's published two-level matching, below;
* ``simple`` (:class:`SimpleRuleMigration`): "same GPU as last round, else move" (Gavel-style).

**Tesserae's rule.** Cost of mapping new GPU ``v`` onto old GPU ``u`` (``w_j = 0.5 / |GPUs of j|`` in the plan the job
is counted in; a job moved out of ``u`` or into ``v`` costs its ``w``)::

    cost(u, v) = sum_{j in old(u) \\ new(v)} w_j + sum_{j in new(v) \\ old(u)} w'_j
               = W_old(u) + W_new(v) - sum_{j in old(u) & new(v)} (w_j + w'_j)

so a single-GPU job that moves costs 1, and a ``k``-GPU job costs ``m / k`` when ``m`` of its
GPUs change. Two levels:

1. GPU level: for every (old server ``a``, new server ``b``) pair, the GPU bijection minimizing
   ``sum_v cost(sigma(v), v)`` (Hungarian, ``scipy.optimize.linear_sum_assignment``). If ``a``
   and ``b`` share no job the cost is ``W_old(a) + W_new(b)`` for *every* bijection, so the
   Hungarian runs only for server pairs that share a job (found with a sparse product).
2. Server level: a Hungarian over the ``C[a, b]`` server-pair costs, per (type, server size).

The result minimizes the total cost over all topology-preserving relabelings, hence never has
more cost than any other relabeling (the simple rule or the identity). Consolidated jobs stay
consolidated because whole servers map onto whole servers. It minimizes GPUs moved, not jobs
restarted: a ``k``-GPU job that changes one GPU restarts as a whole but costs only ``1 / k``, so
on multi-GPU jobs it can trade one job kept whole for several jobs moved.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Mapping

import numpy as np
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment

from policyopt.placement.job_exact import job_exact_relabeling
from policyopt.placement.layout import ClusterLayout
from policyopt.placement.plan import Placement

__all__ = [
    "MigrationMinimizer",
    "MatchingMigration",
    "TesseraeMigration",
    "SimpleRuleMigration",
    "NoMigrationMinimization",
    "matching_relabeling",
    "tesserae_relabeling",
    "simple_rule_relabeling",
    "migration_cost",
]


class MigrationMinimizer(ABC):
    """Stage: relabel a new plan's GPUs given last round's placement."""

    name: str = ""

    @abstractmethod
    def mapping(self, previous: Placement, plan: Placement) -> np.ndarray:
        """``new_to_old[g]``: the GPU id that plan GPU ``g`` is renamed to."""

    def relabel(self, previous: Placement | None, plan: Placement) -> Placement:
        """The relabeled plan (``plan`` itself when there is no previous round)."""
        if previous is None or not previous.gpus or not plan.gpus:
            return plan
        return plan.relabel(self.mapping(previous, plan))


def _slot_weights(previous: Placement, plan: Placement) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Slots (job index per GPU, -1 empty) and weights 0.5/|GPUs| for both plans, same vocabulary."""
    vocab: dict[str, int] = {j: i for i, j in enumerate(previous.gpus)}
    for j in plan.gpus:
        vocab.setdefault(j, len(vocab))
    size_old = np.ones(max(len(vocab), 1))
    size_new = np.ones(max(len(vocab), 1))
    size_old[[vocab[j] for j in previous.gpus]] = [len(g) for g in previous.gpus.values()]
    size_new[[vocab[j] for j in plan.gpus]] = [len(g) for g in plan.gpus.values()]
    so, sn = previous.slots(vocab), plan.slots(vocab)
    wo = np.where(so >= 0, 0.5 / size_old[np.maximum(so, 0)], 0.0)
    wn = np.where(sn >= 0, 0.5 / size_new[np.maximum(sn, 0)], 0.0)
    return so, wo, sn, wn


def _common_weight(o: np.ndarray, wo: np.ndarray, n: np.ndarray, wn: np.ndarray) -> np.ndarray:
    """Savings: sum over jobs on both old GPU u and new GPU v of (w + w'); broadcast over leading dims.

    ``o, wo`` have shape ``(..., U, 2)``, ``n, wn`` shape ``(..., V, 2)``; result ``(..., U, V)``.
    """
    eq = (o[..., :, None, :, None] == n[..., None, :, None, :]) & (o[..., :, None, :, None] >= 0)
    return (eq * (wo[..., :, None, :, None] + wn[..., None, :, None, :])).sum(axis=(-1, -2))


def migration_cost(previous: Placement, plan: Placement) -> float:
    """Tesserae's total ``sum_g cost(g, g)`` of keeping ``plan``'s GPU ids as they are."""
    so, wo, sn, wn = _slot_weights(previous, plan)
    common = _common_weight(so[:, None, :], wo[:, None, :], sn[:, None, :], wn[:, None, :])[:, 0, 0]
    return float(wo.sum() + wn.sum() - common.sum())


def _server_classes(layout: ClusterLayout) -> list[np.ndarray]:
    """Groups of interchangeable servers: same worker type and same size."""
    key = layout.server_type * (int(layout.server_size.max(initial=0)) + 1) + layout.server_size
    return [np.flatnonzero(key == k) for k in np.unique(key)]


def matching_relabeling(previous: Placement, plan: Placement, costs: Mapping[str, float] | None = None
                        ) -> np.ndarray:
    """Job-exact relabeling (:func:`~policyopt.placement.job_exact.job_exact_relabeling`): fewest jobs
    (weighted by ``costs``, e.g. checkpoint-restore seconds; default 1) whose GPU set changes, never
    more than the simple rule; returns ``new_to_old``."""
    return job_exact_relabeling(previous, plan, costs)


def tesserae_relabeling(previous: Placement, plan: Placement) -> np.ndarray:
    """Tesserae's optimal two-level relabeling for its GPU-amortized cost (module docstring);
    returns ``new_to_old``."""
    layout = plan.layout
    so, wo, sn, wn = _slot_weights(previous, plan)
    n_jobs = int(max(so.max(initial=-1), sn.max(initial=-1))) + 1
    mapping = np.arange(layout.num_gpus)
    for servers in _server_classes(layout):
        size = int(layout.server_size[servers[0]])
        s = servers.size
        gid = layout.first_gpu[servers][:, None] + np.arange(size)[None, :]  # (S, G)
        o, n, woo, wnn = so[gid], sn[gid], wo[gid], wn[gid]  # (S, G, 2)
        cost = woo.sum(axis=(1, 2))[:, None] + wnn.sum(axis=(1, 2))[None, :]

        def incidence(slots: np.ndarray, s: int = s) -> sp.csr_matrix:
            node = np.broadcast_to(np.arange(s)[:, None, None], slots.shape)
            m = slots >= 0
            return sp.csr_matrix((np.ones(int(m.sum())), (node[m], slots[m])), shape=(s, max(n_jobs, 1)))

        shared = (incidence(o) @ incidence(n).T).tocoo()
        ia, jb = shared.row.astype(np.int64), shared.col.astype(np.int64)
        local: dict[tuple[int, int], np.ndarray] = {}
        if ia.size:
            sav = _common_weight(o[ia], woo[ia], n[jb], wnn[jb])  # (K, G, G): rows old, cols new GPU
            best = np.empty(ia.size)
            for k in range(ia.size):
                r, c = linear_sum_assignment(sav[k], maximize=True)
                best[k] = sav[k][r, c].sum()
                inv = np.empty(size, dtype=np.int64)
                inv[c] = r  # new local GPU c[r] -> old local GPU r
                local[(int(ia[k]), int(jb[k]))] = inv
            cost[ia, jb] -= best
        rows, cols = linear_sum_assignment(cost)  # rows: old server, cols: new server
        mapping[gid[cols]] = gid[rows]
        for a, b in zip(rows.tolist(), cols.tolist()):
            inv_ab = local.get((a, b))
            if inv_ab is not None:
                mapping[gid[b]] = gid[a][inv_ab]
    return mapping


def simple_rule_relabeling(previous: Placement, plan: Placement) -> np.ndarray:
    """Greedy "same GPU as last round, else move" relabeling; returns ``new_to_old``.

    Each plan GPU ``v`` *prefers* the old GPU its job used at the same rank (the job's ``i``-th
    GPU now -> its ``i``-th GPU last round; the first job on ``v`` that ran last round decides).
    New servers, in id order, take the unclaimed old server (same type and size) preferred by
    most of their GPUs (lowest id on ties, or the lowest unclaimed one); inside it each GPU takes
    its preferred old GPU when still free, the rest fill the remaining GPUs in order.
    """
    layout = plan.layout
    pref = np.full(layout.num_gpus, -1, dtype=np.int64)
    for j, new in plan.gpus.items():  # the first job (in plan order) on a GPU decides
        old = previous.gpus.get(j)
        if old is None:
            continue
        for v, u in zip(new, old):
            if pref[v] < 0:
                pref[v] = u
    mapping = np.arange(layout.num_gpus)
    for servers in _server_classes(layout):
        size = int(layout.server_size[servers[0]])
        in_class = np.zeros(layout.num_servers, dtype=bool)
        in_class[servers] = True
        if size == 1:  # one-GPU servers: the same rule on plain ints, no numpy call per server
            _simple_rule_single(layout, servers, pref, in_class, mapping)
            continue
        claimed: set[int] = set()
        order = servers.tolist()
        free = 0  # order[:free] are all claimed: the lowest unclaimed server is found in O(1) amortized
        for b in order:
            lo_b = int(layout.first_gpu[b])
            want = pref[lo_b:lo_b + size]
            want_srv = layout.gpu_server[want[want >= 0]]
            want_srv = want_srv[in_class[want_srv]]
            a = -1
            if want_srv.size:
                cand, votes = np.unique(want_srv, return_counts=True)
                for c_ in cand[np.argsort(-votes, kind="stable")].tolist():
                    if c_ not in claimed:
                        a = c_
                        break
            if a < 0:
                while order[free] in claimed:
                    free += 1
                a = order[free]
            claimed.add(a)
            lo_a = int(layout.first_gpu[a])
            taken = np.zeros(size, dtype=bool)
            target = np.full(size, -1, dtype=np.int64)
            for v in range(size):
                u = int(want[v]) - lo_a
                if 0 <= u < size and not taken[u]:
                    taken[u] = True
                    target[v] = u
            target[target < 0] = np.flatnonzero(~taken)
            mapping[lo_b:lo_b + size] = lo_a + target
    return mapping


def _simple_rule_single(layout: ClusterLayout, servers: np.ndarray, pref: np.ndarray, in_class: np.ndarray,
                        mapping: np.ndarray) -> None:
    """:func:`simple_rule_relabeling` for a class of one-GPU servers (identical result): server
    ``b`` takes the old server of its GPU's preference when unclaimed, else the lowest unclaimed."""
    first = layout.first_gpu[servers]
    want = pref[first]
    wsrv = np.full(servers.size, -1, dtype=np.int64)
    ok = want >= 0
    wsrv[ok] = layout.gpu_server[want[ok]]
    wsrv[ok] = np.where(in_class[wsrv[ok]], wsrv[ok], -1)
    order = servers.tolist()
    first_of = layout.first_gpu.tolist()
    claimed: set[int] = set()
    free = 0
    for b, a in zip(order, wsrv.tolist()):
        if a < 0 or a in claimed:
            while order[free] in claimed:
                free += 1
            a = order[free]
        claimed.add(a)
        mapping[first_of[b]] = first_of[a]


class MatchingMigration(MigrationMinimizer):
    """Job-exact relabeling (:func:`matching_relabeling`); ``costs`` weigh jobs (default 1 each)."""

    name = "matching"

    def __init__(self, costs: Mapping[str, float] | None = None) -> None:
        self.costs = costs

    def mapping(self, previous: Placement, plan: Placement) -> np.ndarray:
        return matching_relabeling(previous, plan, self.costs)


class TesseraeMigration(MigrationMinimizer):
    """Tesserae's published two-level Hungarian relabeling (:func:`tesserae_relabeling`)."""

    name = "tesserae"

    def mapping(self, previous: Placement, plan: Placement) -> np.ndarray:
        return tesserae_relabeling(previous, plan)


class SimpleRuleMigration(MigrationMinimizer):
    """Greedy "same GPU as last round, else move" (:func:`simple_rule_relabeling`)."""

    name = "simple"

    def mapping(self, previous: Placement, plan: Placement) -> np.ndarray:
        return simple_rule_relabeling(previous, plan)


class NoMigrationMinimization(MigrationMinimizer):
    """Keep the plan's GPU ids (identity relabeling)."""

    name = "none"

    def mapping(self, previous: Placement, plan: Placement) -> np.ndarray:
        return np.arange(plan.layout.num_gpus)
