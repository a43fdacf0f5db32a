"""Running jobs that keep their configuration stay on their nodes (``CurrentConfig.node_ids``).

Configurations record no nodes, so an allocator that places jobs one by one (:class:`~.placement.Greedy`,
:func:`~.placement.integralize`) can move a job whose configuration did not change — a migration,
with its checkpoint and restore. :func:`keep_current_nodes` re-places such an assignment: the same
columns, the same throughputs, more unchanged jobs on their current nodes.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from .placement import Assignment, NodePool, Placement
from .space import MultiResourceSpace

__all__ = ["keep_current_nodes"]


def _relabel_home(space: MultiResourceSpace, pool: NodePool, assign: Assignment, stay: list[int]
                  ) -> Assignment:
    """Nodes of a type with the same GPUs are interchangeable: the permutation ``π`` (placed node →
    node) maximizing ``Σ_{m ∈ stay} Σ_{i,j} [π(j) = i]·min(h_{m,i}, g_{m,j})`` — the GPUs of the
    unchanged jobs ``stay`` that land on their current nodes (``h``: current GPUs per node, ``g``:
    placed GPUs per node) — by a linear assignment; every placement is renamed by it, so the
    packing (and its feasibility) is unchanged."""
    from scipy.optimize import linear_sum_assignment

    placements = dict(assign.placements)
    for t, caps in enumerate(pool.free_gpu):
        mine = [m for m in stay if placements[m].node_type == t]
        if not mine or caps.size < 2:
            continue
        W = np.zeros((caps.size, caps.size))
        gpn = int(pool.gpn[t])
        for m in mine:  # one entry per (current node, placed node) of an unchanged job
            home = np.asarray(pool.home[m], np.int64)
            g = int(space.cfg_gpus[space.current_col[m]])
            h = np.minimum(gpn, np.maximum(g - gpn * np.arange(home.size), 0))
            p = placements[m]
            W[home[:, None], np.asarray(p.nodes, np.int64)[None, :]] += np.minimum(h[:, None],
                                                                                 np.asarray(p.gpus)[None, :])
        size = pool.free_gpu[t]  # the pool is fresh: every node's GPUs
        W[size[:, None] != size[None, :]] = -1e9  # only nodes of one size are exchanged
        old, new = linear_sum_assignment(W, maximize=True)
        perm = np.empty(caps.size, np.int64)
        perm[new] = old
        for m, p in placements.items():
            if p.node_type == t:
                placements[m] = replace(p, nodes=tuple(int(perm[n]) for n in p.nodes))
    return Assignment(placements)


def _at_home(pool: NodePool, assign: Assignment, stay: list[int]) -> int:
    return sum(set(assign.placements[m].nodes) == set(pool.home[m]) for m in stay)


def keep_current_nodes(space: MultiResourceSpace, assign: Assignment) -> Assignment:
    """The same columns, placed so that running jobs that keep their configuration stay on their
    nodes (``CurrentConfig.node_ids``) where possible.

    Configurations record no nodes, so an allocator that places jobs one by one can move a job
    whose configuration did not change (a migration, with its checkpoint and restore). Three steps,
    each kept only when more unchanged jobs end on their current nodes:

    1. rename nodes (:func:`_relabel_home`: a permutation of interchangeable nodes, the packing
       stays as it is);
    2. swap an unchanged one-node job with a job of as many GPUs on its current node
       (:func:`_swap_home`, cores and host memory checked);
    3. re-place: the unchanged jobs first — each on its current nodes where they have room — then
       every other job on its column, most GPUs first (best fit), used only when each of them gets
       the same kind of placement (consolidated or spread) and throughput as before."""
    pool = NodePool(space)
    placements = assign.placements
    stay = [m for m, p in sorted(placements.items()) if m in pool.home and p.col == space.current_col[m]]
    best, home_best = assign, _at_home(pool, assign, stay)
    if home_best == len(stay):
        return assign
    for step in (_relabel_home, _swap_home):
        moved = step(space, pool, best, stay)
        if _at_home(pool, moved, stay) > home_best:
            best, home_best = moved, _at_home(pool, moved, stay)
    if home_best == len(stay):
        return best
    new: dict[int, Placement] = {}
    for m in stay:
        p = pool.place(m, placements[m].col)
        if p is None or p.spread != placements[m].spread:
            return best
        new[m] = p
    for m in sorted((j for j in placements if j not in new), key=lambda j: (-sum(placements[j].gpus), j)):
        old = placements[m]
        p = pool.place(m, old.col)
        if p is None or p.spread != old.spread or not np.isclose(p.thr, old.thr, rtol=1e-12, atol=0.0):
            return best
        new[m] = p
    repacked = Assignment(dict(sorted(new.items())))
    return repacked if _at_home(pool, repacked, stay) > home_best else best


def _swap_home(space: MultiResourceSpace, pool: NodePool, assign: Assignment, stay: list[int]) -> Assignment:
    """Swap each unchanged one-node job that is not on its current node with a job there of as
    many GPUs that is not itself unchanged-and-home, when both nodes' cores and host bytes still fit."""
    placements = dict(assign.placements)
    cap_c, cap_h = pool.free_cpu, pool.free_mem  # the pool is fresh: every node's capacity
    used_c = [np.zeros(a.size) for a in cap_c]
    used_h = [np.zeros(a.size) for a in cap_h]
    for p in placements.values():
        for nd, ci, hi in zip(p.nodes, p.cpus, p.host):
            used_c[p.node_type][nd] += ci
            used_h[p.node_type][nd] += hi
    fixed = {m for m in stay if set(placements[m].nodes) == set(pool.home[m])}
    for m in stay:
        p = placements[m]
        if m in fixed or len(p.nodes) != 1 or len(pool.home[m]) != 1 or p.spread:
            continue
        t, x, y = p.node_type, p.nodes[0], pool.home[m][0]
        for o, q in sorted(placements.items()):
            if (o in fixed or q.node_type != t or q.nodes != (y,) or q.spread or q.gpus != p.gpus):
                continue
            dc, dh = p.cpus[0] - q.cpus[0], p.host[0] - q.host[0]
            if (used_c[t][y] + dc <= cap_c[t][y] + 1e-9 and used_c[t][x] - dc <= cap_c[t][x] + 1e-9
                    and used_h[t][y] + dh <= cap_h[t][y] + 1e-6 and used_h[t][x] - dh <= cap_h[t][x] + 1e-6):
                placements[m], placements[o] = replace(p, nodes=(y,)), replace(q, nodes=(x,))
                used_c[t][y] += dc
                used_c[t][x] -= dc
                used_h[t][y] += dh
                used_h[t][x] -= dh
                fixed.add(m)
                break
    return Assignment(placements)
