"""Max-sum throughput's transportation LP solved exactly by a primal–dual method in the capacity prices.

The LP (:mod:`policyopt.solvers.transport`) is

.. math::  \\max \\sum_{j,k} V_{jk} x_{jk} \\quad\\text{s.t.}\\quad \\sum_k x_{jk} \\le 1 \\;(y_j),\\quad
           \\sum_j s_j x_{jk} \\le C_k \\;(p_k),\\quad x \\ge 0

over the columns with ``V_jk > 0``. In ``f_jk = s_j x_jk`` it is a transportation problem: job ``j``
supplies at most ``s_j``, type ``k`` takes at most ``C_k``, a unit on ``(j, k)`` is worth
``w_jk = V_jk / s_j``. Its dual in the ``K`` prices alone is

.. math::  \\min_{p \\ge 0} \\; \\varphi(p) = C \\cdot p + \\sum_j s_j \\max\\big(0, \\max_k (w_{jk} - p_k)\\big),

convex and piecewise linear. At prices ``p`` let ``u_j = max(0, max_k w_jk − p_k)`` and call job
``j``'s *admissible* types those with ``w_jk − p_k = u_j`` (and its idle slack when ``u_j = 0``).
``p`` is optimal exactly when a flow on admissible edges routes every job with ``u_j > 0`` whole
(*mandatory*), fills every type with ``p_k > 0`` exactly and overfills none (complementary
slackness). Jobs of equal admissible sets (and mandatory flag) are one group of supply ``Σ s_j``;
with few types the groups are few, and the flow is found by augmenting paths on the groups:

1. the mandatory groups routed into the types (capacity ``C_k``); where that fails, the types
   reached from an unrouted group form a set ``S`` over-demanded by the jobs whose every admissible
   type is in ``S``: the slope of ``t ↦ φ(p + t 1_S)`` at ``0+`` is ``C(S) −`` their supply ``< 0``;
2. then the optional groups and the load of types with ``p_k = 0`` pushed into the types with
   ``p_k > 0`` until each is full (paths that never take flow from a mandatory group); where that
   fails, the priced types not reached from a source form a set ``S`` whose admissible jobs cannot
   fill it: the slope of ``τ ↦ φ(p − τ 1_S)`` at ``0+`` is ``−C(S) +`` their supply ``< 0``.

Either way ``p`` moves along ``±1_S`` by an **exact line search**: ``φ`` restricted to the line is
``c·t +`` one hinge per job (its best value on ``S`` against its best off ``S``, or idle), so the
minimum is a weighted median of the hinges' breakpoints (one sort), capped where a price of ``S``
reaches 0. The start is ``p = 0`` or given prices (a previous problem's: few steps are left after
one arrival or completion); the steps are capped (:data:`MAX_STEPS` + :data:`STEPS_PER_TYPE` ``K``).

The optimal flow is split per group over its jobs by the north-west corner rule, after cycles of
the group flow are cancelled (each move along a cycle of admissible edges keeps the objective), so
the positive ``x`` form a forest in the LP's basis graph (nodes: job rows, capacity rows and the
slacks' ground; a column joins its job row and type row, a slack its row and the ground). It is
padded to a spanning tree with zero-valued admissible columns and slacks of rows with a zero
multiplier: a **basis** of the LP whose multipliers are ``(s_j u_j, p)`` and whose point is ``x``
(the form HiGHS's ``getBasicVariables`` gives, for :mod:`policyopt.transport_resolve`). Where no such
tree exists, a component of full priced types and the jobs routed whole into them is joined to
nothing else; lowering its prices together leaves ``φ`` (its load equals its capacity) and ``x``
optimal, so they are lowered until a price reaches 0 or a job outside ties on one of its types,
and the tree is sought again (at most ``K`` times).

:func:`solve` returns ``None`` — and the caller's HiGHS runs — on the step cap, a line search
without progress, more than :data:`MAX_TYPES` types, non-finite data or a non-positive scale
factor of a job with a column. Every answer is certified by
:func:`policyopt.solvers.transport.certify` (rows to 1e-9, the Lagrangian bound equal to the
objective to 1e-9 relative): the method only has to be fast, the certificate makes it exact.
"""
from __future__ import annotations

import numpy as np

from . import transport

__all__ = ["MAX_STEPS", "MAX_TYPES", "STEPS_PER_TYPE", "solve"]

#: more types than this: declined (the admissible sets are bit masks of one int64)
MAX_TYPES = 60
#: line-search steps before the method gives up (the caller's HiGHS answers): this many plus
#: :data:`STEPS_PER_TYPE` per type (random LPs of ~25 types took up to ~80 steps)
MAX_STEPS = 40
STEPS_PER_TYPE = 4

_Flow = list[dict[int, float]]


def solve(V: np.ndarray, s: np.ndarray, C: np.ndarray, start: np.ndarray | None = None, basis: bool = True
          ) -> transport.TransportAnswer | None:
    """The certified optimum of the transportation LP as a
    :class:`~policyopt.solvers.transport.TransportAnswer` (with a basis), or ``None`` (module
    docstring). ``start``: prices to start from instead of 0 (clipped at 0; ignored unless ``K``
    finite numbers) — a previous problem's ``p`` leaves a few steps to take. Without ``basis``
    no basis is formed (the answer's ``basic`` and ``cols`` are ``None``), nor are a
    dual-degenerate component's prices lowered (which only serves the basis): the same point, its
    prices those the steps ended at."""
    n, K = V.shape
    if n == 0 or K == 0 or K > MAX_TYPES or not np.isfinite(C).all() or (C < 0).any():
        return None
    use = V > 0
    active = use.any(axis=1)
    if (V == np.inf).any() or np.isnan(V).any() or (s[active] <= 0).any() or not np.isfinite(s[active]).all():
        return None
    act = active.nonzero()[0]
    sa = s.take(act)
    w = np.where(use[act], V[act] / sa[:, None], -np.inf)
    scale = float(w.max()) if act.size else 1.0  # (the largest value: every active row has one > 0)
    tol = 1e-12 * scale  # (relative to the values: with throughputs of ~1e-9, 1e-12 would tie values 1e-3 apart)
    ftol = 1e-12 * max(1.0, float(sa.sum()), float(C.sum()))
    p = np.zeros(K)
    if start is not None and start.shape == (K,) and np.isfinite(start).all():
        np.maximum(start, 0.0, out=p)
    wT = np.ascontiguousarray(w.T)  # (types × jobs: one row per type, as the steps read them)
    small = K <= 10
    weight = (2 << np.arange(K, dtype=np.int64))[:, None]  # (bit k + 1 of a job's key: type k admissible)
    lut = np.zeros(2 << K if small else 0, np.int64)
    Cl = C.tolist()
    decoded: dict[int, list[int]] = {}  # key → its admissible types
    for step in range(MAX_STEPS + STEPS_PER_TYPE * K):
        rT = wT - p[:, None]
        u = rT.max(axis=0) if act.size else np.zeros(0)
        np.maximum(u, 0.0, out=u)
        admT = rT >= u - tol
        mand = u > tol
        key = (admT * weight).sum(axis=0)
        key += mand
        if small:  # (the groups by a count over the keys' range: no sort)
            ukey = np.bincount(key, minlength=lut.size).nonzero()[0]
            lut[ukey] = np.arange(ukey.size)
            inv = lut.take(key)
        else:
            ukey, inv = np.unique(key, return_inverse=True)
            inv = inv.ravel()
        sup = np.bincount(inv, sa, ukey.size).tolist()
        keys = ukey.tolist()
        gmand = [bool(k & 1) for k in keys]
        gt = [decoded.get(g) or decoded.setdefault(g, [k for k in range(K) if g >> (k + 1) & 1]) for g in keys]
        priced = (p > 0).tolist()
        got = _route(gt, sup, gmand, Cl, priced, ftol)
        if isinstance(got[0], bool):
            raise_, S = got
            if not S:
                return None
            t = _line(rT, sa, Cl, S, raise_, p, tol, ftol)
            if t is None:
                return None
            if raise_:
                p[S] += t
            else:
                p[S] = np.maximum(p[S] - t, 0.0)
                p[S] = np.where(p[S] <= tol, 0.0, p[S])
            continue
        flow, room = got
        built = _point(n, K, act, sa, inv, sup, gt, flow, room, ftol)
        if built is None:
            return None
        x, idle = built
        if not basis:
            ok, obj, bound, y = transport.certify(V, s, C, x, p)
            return transport.TransportAnswer(x, obj, p, y, bound, step) if ok else None
        for _ in range(K + 1):
            basic = _basis(use, act, x, idle, room, admT.T, u <= tol, p, ftol)
            if not isinstance(basic, list):
                break
            # a dual-degenerate component: its prices lowered together (φ and x stay optimal) until
            # one reaches 0 or a job outside it ties on it (one at a time: each move joins it to more)
            Kc = basic[0]
            inside = admT[Kc].any(axis=0)
            gap = (u - rT[Kc].max(axis=0))[~inside]
            t = min(float(p[Kc].min()), float(gap.min()) if gap.size else np.inf)
            if not 0 < t < np.inf:
                return None
            p[Kc] = np.where(p[Kc] - t <= tol, 0.0, p[Kc] - t)
            rT = wT - p[:, None]
            u = np.maximum(rT.max(axis=0), 0.0)
            admT = rT >= u - tol
        if basic is None or isinstance(basic, list):
            return None
        ok, obj, bound, y = transport.certify(V, s, C, x, p)
        if not ok:
            return None
        jj, kk = np.nonzero(use)
        return transport.TransportAnswer(x, obj, p, y, bound, step, basic, (jj, kk))
    return None


def _route(gt: list[list[int]], sup: list[float], gmand: list[bool], C: list[float], priced: list[bool],
           ftol: float) -> tuple[_Flow, list[float]] | tuple[bool, list[int]]:
    """The groups' flow ``(flow, room)`` (``flow[g][k]``, each type's room left), or ``(raise, S)``:
    the types whose prices must rise together (``raise``) or fall (module docstring, steps 1–2)."""
    G, K = len(gt), len(C)
    flow: _Flow = [{} for _ in range(G)]
    room = list(C)
    res = [sup[g] if gmand[g] else 0.0 for g in range(G)]
    for g in range(G):  # greedy first: most groups have one type
        if res[g] > ftol:
            for k in gt[g]:
                a = min(res[g], room[k])
                if a > ftol:
                    flow[g][k] = a
                    room[k] -= a
                    res[g] -= a
    tg: list[list[int]] = [[] for _ in range(K)]
    for g in range(G):
        for k in gt[g]:
            tg[k].append(g)
    reach = _augment(gt, tg, flow, res, room, [True] * K, None, True, ftol)
    if reach is not None:
        return True, [k for k in range(K) if k in reach[1]]
    # step 2: optional groups and unpriced types' load into the priced types
    res = [0.0 if gmand[g] else sup[g] for g in range(G)]
    pull = [0.0] * K
    for k in range(K):
        if not priced[k]:
            pull[k] = C[k] - room[k]
    for g in range(G):
        if res[g] > ftol:
            for k in gt[g]:
                if priced[k]:
                    a = min(res[g], room[k])
                    if a > ftol:
                        flow[g][k] = flow[g].get(k, 0.0) + a
                        room[k] -= a
                        res[g] -= a
    reach = _augment(gt, tg, flow, res, room, priced, pull, False, ftol)
    if reach is not None:
        return False, [k for k in range(K) if priced[k] and k not in reach[1]]
    for g in range(G):
        if not gmand[g]:
            res[g] = max(res[g], 0.0)
    return flow, room


def _augment(gt: list[list[int]], tg: list[list[int]], flow: _Flow, res: list[float], room: list[float],
             target: list[bool], pull: list[float] | None, route: bool, ftol: float
             ) -> tuple[set[int], set[int]] | None:
    """Augment along shortest paths from the sources (groups with supply ``res`` left; types whose
    load ``pull`` may be taken back) to the ``target`` types with room, in place, until every group's
    supply is routed (``route``) or every target is full (otherwise); ``None`` then, else the groups
    and types reached from the sources (the cut)."""
    K = len(room)
    while True:
        if route and not any(r > ftol for r in res):
            return None
        if not route and not any(target[k] and room[k] > ftol for k in range(K)):
            return None
        came_g: dict[int, int] = {g: -1 for g in range(len(gt)) if res[g] > ftol}
        came_k: dict[int, int] = {}
        if pull is not None:
            for k in range(K):
                if pull[k] > ftol:
                    came_k[k] = -1
        queue: list[tuple[bool, int]] = [(True, g) for g in came_g] + [(False, k) for k in came_k]
        end = -1
        i = 0
        while i < len(queue) and end < 0:
            is_g, v = queue[i]
            i += 1
            if is_g:
                for k in gt[v]:
                    if k not in came_k:
                        came_k[k] = v
                        if target[k] and room[k] > ftol:
                            end = k
                            break
                        queue.append((False, k))
            else:
                for g in tg[v]:
                    if g not in came_g and flow[g].get(v, 0.0) > ftol:
                        came_g[g] = v
                        queue.append((True, g))
        if end < 0:
            return set(came_g), set(came_k)
        # the bottleneck along the path, then the flow moved
        amount = room[end]
        k = end
        while True:
            g = came_k[k]
            if g < 0:
                amount = min(amount, pull[k])  # type: ignore[index]
                break
            k2 = came_g[g]
            if k2 < 0:
                amount = min(amount, res[g])
                break
            amount = min(amount, flow[g][k2])
            k = k2
        room[end] -= amount
        k = end
        while True:
            g = came_k[k]
            if g < 0:
                pull[k] -= amount  # type: ignore[index]
                room[k] += amount
                break
            flow[g][k] = flow[g].get(k, 0.0) + amount
            k2 = came_g[g]
            if k2 < 0:
                res[g] -= amount
                break
            flow[g][k2] -= amount
            k = k2


def _line(rT: np.ndarray, sa: np.ndarray, C: list[float], S: list[int], raise_: bool, p: np.ndarray, tol: float,
          ftol: float) -> float | None:
    """The exact minimizer ``t > 0`` of ``φ(p ± t 1_S)`` (``+`` when ``raise_``; ``rT`` the reduced
    values ``w − p``, types × jobs), or ``None`` when the line gives no descent. Per job the hinge
    ``s_j max(a_j ∓ t, b_j)`` (``a_j`` its best reduced value on ``S``, ``b_j`` off ``S`` or idle):
    the slope is ``±C(S)`` plus the supply of the jobs on ``S`` at ``t``, so the minimum is where
    that supply crosses ``C(S)`` (a weighted median)."""
    K = rT.shape[0]
    off = [k for k in range(K) if k not in S]
    a = rT[S[0]] if len(S) == 1 else rT[S].max(axis=0)
    b = np.zeros(rT.shape[1]) if not off else np.maximum(rT[off[0]] if len(off) == 1 else rT[off].max(axis=0), 0.0)
    cs = sum(C[k] for k in S)
    if raise_:
        d = a - b
        sel = (d > tol).nonzero()[0]
        d = d.take(sel)
        order = np.argsort(-d)
        cum = np.cumsum(sa.take(sel.take(order)))
        i = int(np.searchsorted(cum, cs + ftol, side="right"))
        if i >= cum.size:
            return None
        t = float(d[order[i]])
        return t if t > 0 else None
    cap = float(p[S].min())
    e = b - a
    sel = (e < np.inf).nonzero()[0]
    e = e.take(sel)
    order = np.argsort(e)
    cum = np.cumsum(sa.take(sel.take(order)))
    i = int(np.searchsorted(cum, cs - ftol, side="left"))
    t = cap if i >= cum.size else min(float(e[order[i]]), cap)
    return t if t > 0 else None


def _point(n: int, K: int, act: np.ndarray, sa: np.ndarray, inv: np.ndarray, sup: list[float],
           gt: list[list[int]], flow: _Flow, room: list[float], ftol: float) -> tuple[np.ndarray, np.ndarray] | None:
    """``(x, idle)``: the groups' flow (its cycles cancelled) split over each group's jobs by the
    north-west corner rule (jobs in order, the group's types in order, its idle rest last), and
    which jobs keep part of their row idle; ``None`` if the cancelling does not end."""
    G = len(gt)
    left = [max(sup[g] - sum(flow[g].values()), 0.0) for g in range(G)]
    if not _uncycle(flow, left, room, K, ftol):
        return None
    seg_g: list[int] = []
    seg_k: list[int] = []
    seg_a: list[float] = []
    for g in range(G):
        items = [(k, a) for k, a in sorted(flow[g].items()) if a > ftol]
        if left[g] > ftol or not items:
            items.append((K, sup[g] - sum(a for _, a in items)))
        else:  # (a routed group: its flows sum to its supply up to rounding)
            items[-1] = (items[-1][0], max(sup[g] - sum(a for _, a in items[:-1]), 0.0))
        for k, a in items:
            seg_g.append(g)
            seg_k.append(k)
            seg_a.append(a)
    order = np.argsort(inv, kind="stable")
    job_end = np.cumsum(sa.take(order))
    seg_end = np.cumsum(np.array(seg_a, np.float64))
    cuts = np.concatenate([[0.0], job_end, seg_end])
    cuts.sort()
    lo, hi = cuts[:-1], cuts[1:]
    keep = hi - lo > ftol  # (equal cuts, and rounding between the two sums, give no interval)
    lo, hi = lo[keep], hi[keep]
    mid = 0.5 * (lo + hi)
    jpos = np.minimum(np.searchsorted(job_end, mid), order.size - 1)
    spos = np.minimum(np.searchsorted(seg_end, mid), len(seg_a) - 1)
    job = order.take(jpos)
    typ = np.array(seg_k, np.int64).take(spos)
    amt = (hi - lo) / sa.take(job)
    x = np.zeros((n, K))
    on = typ < K
    x[act.take(job[on]), typ[on]] = amt[on]
    idle = np.ones(n, bool)
    idle[act] = False
    idle[act.take(job[~on])] = True
    return x, idle


def _uncycle(flow: _Flow, left: list[float], room: list[float], K: int, ftol: float) -> bool:
    """Cancel the cycles of the group flow in place (nodes: groups, types and the ground; edges: the
    positive flows, the groups' idle rest ``left`` and the types' ``room``): along a cycle the flows
    alternately rise and fall by the smallest falling one, which keeps every group's and type's
    total (and, all edges admissible, the objective). ``False`` if it does not end."""
    G = len(flow)
    ground = G + K
    for _ in range(4 * (G + K) + 8):
        edges: dict[int, dict[int, float]] = {v: {} for v in range(G + K + 1)}
        for g in range(G):
            for k, a in flow[g].items():
                if a > ftol:
                    edges[g][G + k] = edges[G + k][g] = a
            if left[g] > ftol:
                edges[g][ground] = edges[ground][g] = left[g]
        for k in range(K):
            if room[k] > ftol:
                edges[G + k][ground] = edges[ground][G + k] = room[k]
        cycle = _find_cycle(edges)
        if cycle is None:
            return True
        if ground in cycle:  # start the alternation at the ground (it has no total to keep)
            i = cycle.index(ground)
            cycle = cycle[i:] + cycle[:i]
        pairs = list(zip(cycle, cycle[1:] + cycle[:1]))
        delta = min(edges[a][b] for a, b in pairs[1::2])
        for i, (a, b) in enumerate(pairs):
            change = delta if i % 2 == 0 else -delta
            lo, hi = min(a, b), max(a, b)
            if hi == ground:
                if lo < G:
                    left[lo] += change
                else:
                    room[lo - G] += change
            else:
                flow[lo][hi - G] = flow[lo].get(hi - G, 0.0) + change
        for g in range(G):
            for k in list(flow[g]):
                if flow[g][k] <= ftol:
                    del flow[g][k]
    return False


def _find_cycle(edges: dict[int, dict[int, float]]) -> list[int] | None:
    """A cycle of the undirected graph ``edges`` as its nodes in order, or ``None`` (a forest)."""
    seen: dict[int, int] = {}
    for root in edges:
        if root in seen:
            continue
        seen[root] = -1
        stack = [root]
        while stack:
            v = stack.pop()
            for nxt in edges[v]:
                if nxt == seen[v]:
                    continue
                if nxt in seen:
                    # the two tree paths up to their common ancestor
                    path_v = [v]
                    while path_v[-1] != -1:
                        path_v.append(seen[path_v[-1]])
                    path_n = [nxt]
                    while path_n[-1] not in path_v:
                        path_n.append(seen[path_n[-1]])
                    top = path_n[-1]
                    up = path_v[:path_v.index(top) + 1]
                    return up + path_n[-2::-1]
                seen[nxt] = v
                stack.append(nxt)
    return None


def _basis(use: np.ndarray, act: np.ndarray, x: np.ndarray, idle: np.ndarray, room: list[float], adm: np.ndarray,
           free: np.ndarray, p: np.ndarray, ftol: float) -> np.ndarray | list[list[int]] | None:
    """A basis of the LP (HiGHS's encoding, :class:`~policyopt.solvers.transport.TransportAnswer`)
    holding every positive ``x``, the slacks of idle jobs and of types with room, padded to a
    spanning tree with zero-valued admissible columns (``adm``, on the active jobs ``act``), slacks
    of jobs with ``u_j = 0`` (``free``) and of types with ``p_k = 0``; ``None`` where the positive
    part has a cycle; the types of each component not joined to the ground where no such tree exists
    (each holds full types of positive prices and jobs routed whole into them: lowering its prices
    together keeps ``φ``, so :func:`solve` lowers them until an edge to the rest appears)."""
    n, K = x.shape
    ground = K
    col = np.cumsum(use.ravel()).reshape(n, K) - 1  # column t of (j, k), job-major
    tslack = np.array(room) > ftol
    pj, pk = np.nonzero(x > 0)
    deg = np.bincount(pj, minlength=n) + idle
    # a job of one basic edge is a leaf on its type (or on the ground): its node is that end
    node = np.full(n, -1, np.int64)
    one = deg == 1
    lone = np.full(n, ground, np.int64)
    lone[pj] = pk  # (for jobs of one column; idle ones stay on the ground)
    node[one & ~idle] = lone[one & ~idle]
    node[one & idle] = ground
    inner = (deg > 1).nonzero()[0]
    node[inner] = K + 1 + np.arange(inner.size)
    parent = list(range(K + 1 + inner.size))

    def find(a: int) -> int:
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        return a

    def join(a: int, b: int) -> bool:
        ra, rb = find(a), find(b)
        if ra == rb:
            return False
        parent[ra] = rb
        return True

    sel = deg[pj] > 1
    for a, b in zip(node[pj[sel]].tolist(), pk[sel].tolist()):
        if not join(a, b):
            return None
    for j in inner[idle[inner]].tolist():
        if not join(int(node[j]), ground):
            return None
    for k in tslack.nonzero()[0].tolist():
        if not join(k, ground):
            return None
    basic: list[int] = col[pj, pk].tolist()
    basic += (-1 - idle.nonzero()[0]).tolist()
    basic += (-1 - n - tslack.nonzero()[0]).tolist()
    # zero-valued edges: admissible columns, free jobs' slacks, unpriced types' slacks
    aj, ak = np.nonzero(adm & (x[act] == 0))
    cand_a = node[act[aj]]
    cand_b = ak
    cand_v = col[act[aj], ak]
    fj = act[free & ~idle[act]]
    cand_a = np.concatenate([cand_a, node[fj]])
    cand_b = np.concatenate([cand_b, np.full(fj.size, ground)])
    cand_v = np.concatenate([cand_v, -1 - fj])
    zk = ((p == 0) & ~tslack).nonzero()[0]
    cand_a = np.concatenate([cand_a, zk])
    cand_b = np.concatenate([cand_b, np.full(zk.size, ground)])
    cand_v = np.concatenate([cand_v, -1 - n - zk])
    for a, b, v in zip(cand_a.tolist(), cand_b.tolist(), cand_v.tolist()):  # (few: tied jobs' edges)
        if find(a) != find(b):
            join(a, b)
            basic.append(v)
    if len(basic) != n + K:
        top = find(ground)
        comps: dict[int, list[int]] = {}
        for k in range(K):
            if find(k) != top:
                comps.setdefault(find(k), []).append(k)
        return list(comps.values()) or None
    return np.array(basic, np.int64)
