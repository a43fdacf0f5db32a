"""Max-sum throughput's transportation LP solved on Python lists: the exact method for small LPs.

The LP, its dual in the capacity prices ``p`` and the method are those of
:mod:`~policyopt.solvers.transport_exact` (primal–dual in the ``K`` prices: jobs grouped by their
admissible types at ``p``, the groups' flow by augmenting paths, an exact line search along
``±1_S`` where it fails, the optimal flow split over the jobs by the north-west corner rule), with
the same steps, tolerances and order of operations, so the same point and prices. Only the per-job
work differs: each step's reduced values ``w_jk − p_k``, ``u_j = max(0, max_k w_jk − p_k)``, the
admissible sets, the groups' supplies, the line search's weighted median and the split run over
Python lists instead of arrays. For a few hundred jobs and a few types that is as fast as the array
steps once they run warm, and a process's first call runs none of the ~60 numpy routines the array
method needs, each of which costs ~10–50 µs the first time a process runs it.

No basis is formed (:mod:`policyopt.transport_route` keeps only the prices; the class route, which
keeps a basis, uses :mod:`~policyopt.solvers.transport_exact`), so neither is the method's lowering
of a dual-degenerate component's prices, which only serves the basis. :func:`solve` returns
``None`` where the array method would (step cap, a line search without progress, more than
:data:`~policyopt.solvers.transport_exact.MAX_TYPES` types, non-finite data, a non-positive scale
factor of a job with a column), and every answer is certified by
:func:`policyopt.solvers.transport.certify` (rows to 1e-9, the Lagrangian bound equal to the
objective to 1e-9 relative).
"""
from __future__ import annotations

from bisect import bisect_left
from itertools import repeat
from operator import add, ge, gt, itemgetter, lshift, sub
from typing import Any

import numpy as np

from . import transport
from .transport_exact import MAX_STEPS, MAX_TYPES, STEPS_PER_TYPE, _route, _uncycle

__all__ = ["MAX_CELLS", "solve"]

#: LPs of at most this many jobs × types are solved here by :func:`policyopt.solvers.transport.solve`
#: when no basis is asked for. Gavel's workload, CPU medians of 7 fresh processes (load ~20): a
#: process's first solve at 64 jobs × 3 types 0.88 ms here against 1.07 by the array steps without
#: the basis, at 128 jobs 1.34 against 1.25, at 256 jobs 2.67 against 1.51; later solves at 128
#: jobs ~1.0 against ~0.5 (each job costs ~9 µs a solve here, ~3 there)
MAX_CELLS = 256

_INF = float("inf")
_FIRST = itemgetter(0)


def solve(V: np.ndarray, s: np.ndarray, C: np.ndarray, start: np.ndarray | None = None
          ) -> transport.TransportAnswer | None:
    """The certified optimum of the transportation LP as a
    :class:`~policyopt.solvers.transport.TransportAnswer` without a basis, or ``None`` (module
    docstring). ``start``: prices to start from instead of 0 (clipped at 0; ignored unless ``K``
    finite numbers)."""
    n, K = V.shape
    if n == 0 or K == 0 or K > MAX_TYPES:
        return None
    Cl: list[float] = C.tolist()
    if not all(0.0 <= c < _INF for c in Cl):  # (NaN fails both)
        return None
    rows: list[list[float]] = V.tolist()
    sl: list[float] = s.tolist()
    act: list[int] = []
    sa: list[float] = []
    arows: list[list[float]] = []
    for j, row in enumerate(rows):
        total = sum(row)  # (NaN where a value is NaN, +inf where one is +inf, or both: then looked at)
        if (total != total or total == _INF) and any(v != v or v == _INF for v in row):
            return None
        if max(row) > 0.0:
            sj = sl[j]
            if not 0.0 < sj < _INF:
                return None
            act.append(j)
            sa.append(sj)
            arows.append(row)
    na = len(act)
    # per type, the active jobs' unit values w_jk = V_jk / s_j (-inf where no column)
    wcols = ([[v / sj if v > 0.0 else -_INF for v, sj in zip(col, sa)] for col in zip(*arows)] if na
             else [[] for _ in range(K)])
    scale = max(max(col) for col in wcols) if na else 1.0
    tol = 1e-12 * scale  # (relative to the values, as transport_exact)
    ftol = 1e-12 * max(1.0, sum(sa), sum(Cl))
    p = [0.0] * K
    if start is not None and start.shape == (K,):
        got = start.tolist()
        if all(-_INF < v < _INF for v in got):
            p = [v if v > 0.0 else 0.0 for v in got]
    zeros = [0.0] * na
    decoded: dict[int, list[int]] = {}
    for step in range(MAX_STEPS + STEPS_PER_TYPE * K):
        # (C-level maps over the lists: a Python expression per job costs ~2-3x as much)
        R = [list(map(sub, col, repeat(pk, na))) for col, pk in zip(wcols, p)]
        U = list(map(max, zeros, *R))  # u_j = max(0, max_k w_jk − p_k)
        L = list(map(sub, U, repeat(tol, na)))
        keys = list(map(gt, U, repeat(tol, na)))  # bit 0: mandatory; bit k + 1: type k admissible
        for k, Rk in enumerate(R):
            keys = list(map(add, keys, map(lshift, map(ge, Rk, L), repeat(k + 1, na))))
        ukey = sorted(set(keys))
        index = {g: i for i, g in enumerate(ukey)}
        inv = list(map(index.__getitem__, keys))
        sup = [0.0] * len(ukey)
        for g, sj in zip(inv, sa):
            sup[g] += sj
        gmand = [bool(g & 1) for g in ukey]
        types = [decoded.get(g) or decoded.setdefault(g, [k for k in range(K) if g >> (k + 1) & 1]) for g in ukey]
        routed = _route(types, sup, gmand, Cl, [pk > 0 for pk in p], ftol)
        if isinstance(routed[0], bool):
            raise_, S = routed
            if not S:
                return None
            t = _line(R, sa, Cl, S, raise_, p, tol, ftol, zeros)
            if t is None:
                return None
            for k in S:
                if raise_:
                    p[k] += t
                else:
                    v = p[k] - t
                    p[k] = v if v > tol else 0.0
            continue
        flow, room = routed
        x = _point(n, K, act, sa, inv, sup, types, flow, room, ftol)
        if x is None:
            return None
        xa = np.array(x)
        pa = np.array(p)
        ok, obj, bound, y = transport.certify(V, s, C, xa, pa)
        if not ok:
            return None
        return transport.TransportAnswer(xa, obj, pa, y, bound, step)
    return None


def _line(R: list[list[float]], sa: list[float], C: list[float], S: list[int], raise_: bool, p: list[float],
          tol: float, ftol: float, zeros: list[float]) -> float | None:
    """The exact minimizer ``t > 0`` of ``φ(p ± t 1_S)`` (``+`` when ``raise_``; ``R`` the reduced
    values ``w − p`` per type), or ``None`` when the line gives no descent: per job the hinge
    ``s_j max(a_j ∓ t, b_j)`` (``a_j`` its best reduced value on ``S``, ``b_j`` off ``S`` or idle),
    the minimum where the supply of the jobs on ``S`` crosses ``C(S)`` (a weighted median;
    :func:`policyopt.solvers.transport_exact._line` on arrays)."""
    on = set(S)
    off = [k for k in range(len(R)) if k not in on]
    a = R[S[0]] if len(S) == 1 else list(map(max, *(R[k] for k in S)))
    if off:
        b = list(map(max, zeros, *(R[k] for k in off)))
    else:
        b = zeros
    cs = sum(C[k] for k in S)
    if raise_:
        items = [(d, sj) for d, sj in zip(map(sub, a, b), sa) if d > tol]
        items.sort(key=_FIRST, reverse=True)
        lim, acc = cs + ftol, 0.0
        for d, sj in items:
            acc += sj
            if acc > lim:
                return d if d > 0 else None
        return None
    cap = min(p[k] for k in S)
    items = [(e, sj) for e, sj in zip(map(sub, b, a), sa) if e < _INF]
    items.sort(key=_FIRST)
    lim, acc = cs - ftol, 0.0
    t = cap
    for e, sj in items:
        acc += sj
        if acc >= lim:
            t = min(e, cap)
            break
    return t if t > 0 else None


def _point(n: int, K: int, act: list[int], sa: list[float], inv: list[int], sup: list[float], gt: list[list[int]],
           flow: Any, room: list[float], ftol: float) -> list[list[float]] | None:
    """``x`` (jobs × types, nested lists): the groups' flow (its cycles cancelled) split over each
    group's jobs by the north-west corner rule (jobs in order, the group's types in order, its idle
    rest last); ``None`` if the cancelling does not end
    (:func:`policyopt.solvers.transport_exact._point` on arrays)."""
    G = len(gt)
    left = [max(sup[g] - sum(flow[g].values()), 0.0) for g in range(G)]
    if not _uncycle(flow, left, room, K, ftol):
        return None
    seg_k: list[int] = []
    seg_end: list[float] = []
    end = 0.0
    for g in range(G):
        items = [(k, a) for k, a in sorted(flow[g].items()) if a > ftol]
        if left[g] > ftol or not items:
            items.append((K, sup[g] - sum(a for _, a in items)))
        else:  # (a routed group: its flows sum to its supply up to rounding)
            items[-1] = (items[-1][0], max(sup[g] - sum(a for _, a in items[:-1]), 0.0))
        for k, a in items:
            end += a
            seg_k.append(k)
            seg_end.append(end)
    members: list[list[int]] = [[] for _ in range(G)]
    for i, g in enumerate(inv):
        members[g].append(i)
    order = [i for m in members for i in m]
    job_end: list[float] = []
    end = 0.0
    for i in order:
        end += sa[i]
        job_end.append(end)
    cuts = sorted([0.0, *job_end, *seg_end])
    last_j, last_s = len(order) - 1, len(seg_k) - 1
    x = [[0.0] * K for _ in range(n)]
    for lo, hi in zip(cuts, cuts[1:]):
        if hi - lo > ftol:  # (equal cuts, and rounding between the two sums, give no interval)
            mid = 0.5 * (lo + hi)
            i = order[min(bisect_left(job_end, mid), last_j)]
            k = seg_k[min(bisect_left(seg_end, mid), last_s)]
            if k < K:
                x[act[i]][k] = (hi - lo) / sa[i]
    return x
