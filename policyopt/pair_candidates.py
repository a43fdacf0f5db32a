"""Candidate pairs of jobs sharing workers: the pair rows of an
:class:`~policyopt.allocation.AllocationSpace` (space sharing).

Pair pruning (exact by default): a pair whose normalized throughputs on configuration ``c`` satisfy
``T[k,c,a]/T[a,c] + T[k,c,b]/T[b,c] ≤ 1`` is dominated there by time-slicing the two jobs alone on the
same workers (same throughput for both, no more GPU time, no more of either job's time), so dropping
such slots never changes the optimum of a policy whose objective depends on ``X`` only through
``thr`` (or, like the cost policies, through per-slot throughput and the price of the slot's
workers). ``PairPruning(threshold>1)`` or ``top_k`` prune further (lossy; measured in
``benchmarks/policies_bench.py``).

Pairs at scale: besides explicit ``colocated`` entries (one per pair of jobs), a problem may give
``colocated_types`` (one entry per pair of job *types*) for jobs that carry a ``job_type``; the
table is expanded here with numpy per pair of types, never per pair of jobs. Without ``top_k`` it
yields every pair of jobs of the two types (exact); with ``top_k = k`` each job proposes ``k``
partners — its best partner *types* first, one partner per type per round (diversity matters: a
second partner of the same type adds little), spread evenly over the jobs of each partner type —
and a pair is kept if either job proposed it: O(n·k) pairs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Mapping

import numpy as np

if TYPE_CHECKING:
    from .allocation import AllocationSpace

__all__ = ["PairPruning", "build_pairs", "type_pair_candidates", "propose_type_partners", "round_robin",
           "top_k_per_job"]


@dataclass(frozen=True)
class PairPruning:
    """Which colocated pairs become rows of ``X``.

    ``threshold``: keep a pair slot only if its normalized combined throughput exceeds this
    (1.0 is exact, see the module docstring). ``top_k``: then keep at most ``k`` best pairs per
    job (by best normalized combined throughput; lossy) — for the type-level table, ``k``
    partners proposed per job, distinct partner types first (see the module docstring).
    ``max_pairs``: a global cap (lossy).
    """

    threshold: float = 1.0
    top_k: int | None = None
    max_pairs: int | None = None


def build_pairs(space: AllocationSpace) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """The pair rows of ``space`` as ``(pair_jobs, Tp, pair_mask)`` (``None``: no candidate), from
    explicit ``colocated`` entries and the type-level ``colocated_types`` table.

    Candidates are ``(a, b, config, T_a, T_b)`` arrays; explicit entries win over the table for
    the same (pair, config). Filters: both throughputs > 0, equal scale factors that fit the type,
    both jobs able to run alone there, normalized combined throughput > ``threshold``; then the
    per-job ``top_k`` rule (explicit entries: the k best-scoring pairs of either job; table
    entries: generated degree-limited, see :func:`type_pair_candidates`) and ``max_pairs``.
    """
    C = len(space.configs)
    n = len(space.jobs)
    cfg_pos = {c: i for i, c in enumerate(space.configs.labels.tolist())}
    raw = [(space.jobs.position(c.jobs[0]), space.jobs.position(c.jobs[1]), cfg_pos[c.worker_type],
            c.throughputs[0], c.throughputs[1]) for c in space.problem.colocated if c.worker_type in cfg_pos]
    explicit = np.array(raw, dtype=np.float64).reshape(-1, 5)
    ex = (explicit[:, 0].astype(np.int64), explicit[:, 1].astype(np.int64), explicit[:, 2].astype(np.int64),
          explicit[:, 3], explicit[:, 4])
    typed = type_pair_candidates(space, cfg_pos)
    if ex[0].size == 0 and typed[0].size == 0:
        return None
    a, b, c, ta, tb = (np.concatenate([x, y]) for x, y in zip(ex, typed))
    is_explicit = np.arange(a.size) < ex[0].size
    swap = a > b  # canonical order a < b
    a, b = np.where(swap, b, a), np.where(swap, a, b)
    ta, tb = np.where(swap, tb, ta), np.where(swap, ta, tb)
    # one candidate per (pair, config): the first occurrence, i.e. explicit before table
    _, first = np.unique((a * n + b) * C + c, return_index=True)
    keep = np.zeros(a.size, bool)
    keep[first] = True
    ok = keep & (a != b) & (ta > 0) & (tb > 0) & (space.scale[a] == space.scale[b])
    ok &= space.scale[a] <= space.counts[space.config_type[c]]
    ok &= space.single_mask[a, c] & space.single_mask[b, c]
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.where(ok, ta / space.T[a, c] + tb / space.T[b, c], 0.0)
    ok &= norm > space.pruning.threshold
    a, b, c, ta, tb, norm, is_explicit = a[ok], b[ok], c[ok], ta[ok], tb[ok], norm[ok], is_explicit[ok]
    key = a * n + b
    uniq, inv = np.unique(key, return_inverse=True)
    best = np.zeros(uniq.size)
    np.maximum.at(best, inv, norm)
    pair_explicit = np.zeros(uniq.size, bool)
    pair_explicit[inv[is_explicit]] = True
    keep_pairs = np.ones(uniq.size, bool)
    pa, pb = uniq // n, uniq % n
    if space.pruning.top_k is not None and pair_explicit.any():
        # the table's candidates are already degree-limited; rank only explicit pairs here
        sel = np.flatnonzero(pair_explicit)
        keep_pairs[sel] = top_k_per_job(pa[sel], pb[sel], best[sel], space.pruning.top_k, n)
    if space.pruning.max_pairs is not None and keep_pairs.sum() > space.pruning.max_pairs:
        order = np.argsort(-np.where(keep_pairs, best, -np.inf), kind="stable")
        keep_pairs[:] = False
        keep_pairs[order[: space.pruning.max_pairs]] = True
    new_index = np.full(uniq.size, -1, np.int64)
    new_index[keep_pairs] = np.arange(int(keep_pairs.sum()))
    row = new_index[inv]
    kept = row >= 0
    p = int(keep_pairs.sum())
    pair_jobs = np.stack([pa[keep_pairs], pb[keep_pairs]], axis=1)
    Tp = np.zeros((p, C, 2))
    Tp[row[kept], c[kept], 0] = ta[kept]
    Tp[row[kept], c[kept], 1] = tb[kept]
    return pair_jobs, Tp, (Tp[:, :, 0] > 0) & (Tp[:, :, 1] > 0)

def type_pair_candidates(space: AllocationSpace, cfg_pos: dict[str, int]
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Expand the problem's ``colocated_types`` table into ``(a, b, config, T_a, T_b)`` arrays.

    Jobs are grouped by ``job_type`` (jobs without one take no part). Without ``top_k`` every pair
    of jobs of the two types is a candidate (exact; ``|A|·|B|`` rows per table entry). With
    ``top_k = k`` each job *proposes* k partners: partner types in decreasing order of their
    type-level normalized combined throughput (max over configurations, computed from the mean
    alone throughputs of each type's jobs; types at or below ``threshold`` skipped), one partner
    per type per round (:func:`_round_robin`), and within a partner type the jobs at evenly
    spread positions (a circulant pattern, so no job is everyone's partner); a pair is a
    candidate if either job proposed it. That is O(n·k) rows, built with numpy per pair of
    types, never per pair of jobs.
    """
    z = np.zeros(0, np.int64)
    empty = (z, z, z, np.zeros(0), np.zeros(0))
    table = space.problem.colocated_types
    if not table:
        return empty
    jt = [j.job_type for j in space.problem.jobs]
    has = np.array([t is not None for t in jt], bool)
    if not has.any():
        return empty
    type_names, codes = np.unique(np.array([t if t is not None else "" for t in jt], dtype=object)[has].astype(str),
                                  return_inverse=True)
    job_code = np.full(len(jt), -1, np.int64)
    job_code[has] = codes
    K = type_names.size
    tpos = {t: i for i, t in enumerate(type_names.tolist())}
    ent = [(tpos[tc.job_types[0]], tpos[tc.job_types[1]], cfg_pos[tc.worker_type],
            tc.throughputs[0], tc.throughputs[1]) for tc in table
           if tc.job_types[0] in tpos and tc.job_types[1] in tpos and tc.worker_type in cfg_pos]
    if not ent:
        return empty
    e = np.array(ent, dtype=np.float64)
    A, B, c = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64), e[:, 2].astype(np.int64)
    ta, tb = e[:, 3], e[:, 4]
    swap = A > B
    A, B = np.where(swap, B, A), np.where(swap, A, B)
    ta, tb = np.where(swap, tb, ta), np.where(swap, ta, tb)
    ok = (ta > 0) & (tb > 0)
    A, B, c, ta, tb = A[ok], B[ok], c[ok], ta[ok], tb[ok]
    members = [np.flatnonzero(job_code == k) for k in range(K)]
    sizes = np.array([m.size for m in members])
    chosen: Mapping[tuple[int, int], tuple[np.ndarray, np.ndarray] | None]
    if space.pruning.top_k is None:
        chosen = {(int(x), int(y)): None for x, y in zip(A, B)}
    else:
        chosen = propose_type_partners(space, A, B, c, ta, tb, job_code, members, sizes, space.pruning.top_k)
    blocks = []
    order = np.lexsort((c, B, A))
    A, B, c, ta, tb = A[order], B[order], c[order], ta[order], tb[order]
    starts = np.flatnonzero(np.r_[True, (A[1:] != A[:-1]) | (B[1:] != B[:-1])])
    stops = np.r_[starts[1:], A.size]
    for s0, s1 in zip(starts, stops):
        key = (int(A[s0]), int(B[s0]))
        if key not in chosen:
            continue
        pairs = chosen[key]
        if pairs is None:  # exact: every pair of jobs of the two types
            ma, mb = members[key[0]], members[key[1]]
            if key[0] == key[1]:
                i, j = np.triu_indices(ma.size, k=1)
                ja, jb = ma[i], ma[j]
            else:
                ja, jb = np.repeat(ma, mb.size), np.tile(mb, ma.size)
        else:
            ja, jb = pairs
        if ja.size == 0:
            continue
        k = s1 - s0  # one candidate per job pair and table entry (configuration) of this pair of types
        blocks.append((np.tile(ja, k), np.tile(jb, k), np.repeat(c[s0:s1], ja.size),
                       np.repeat(ta[s0:s1], ja.size), np.repeat(tb[s0:s1], ja.size)))
    if not blocks:
        return empty
    return tuple(np.concatenate(col) for col in zip(*blocks))  # type: ignore[return-value]

def propose_type_partners(space: AllocationSpace, A: np.ndarray, B: np.ndarray, c: np.ndarray, ta: np.ndarray,
                      tb: np.ndarray, job_code: np.ndarray, members: list[np.ndarray],
                      sizes: np.ndarray, k: int) -> dict[tuple[int, int], tuple[np.ndarray, np.ndarray]]:
    """Degree-limited candidate pairs per pair of types (see :func:`type_pair_candidates`)."""
    K = len(members)
    C = len(space.configs)
    # mean alone throughput of each type's jobs per configuration (0 where none can run)
    alone = np.zeros((K, C))
    cnt = np.zeros((K, C))
    has = job_code >= 0
    np.add.at(alone, job_code[has], np.where(space.single_mask[has], space.T[has], 0.0))
    np.add.at(cnt, job_code[has], space.single_mask[has].astype(float))
    with np.errstate(divide="ignore", invalid="ignore"):
        alone = np.where(cnt > 0, alone / cnt, 0.0)
        score_e = np.where((alone[A, c] > 0) & (alone[B, c] > 0),
                           ta / alone[A, c] + tb / alone[B, c], 0.0)
    score = np.zeros((K, K))
    np.maximum.at(score, (A, B), score_e)
    score = np.maximum(score, score.T)
    score[score <= space.pruning.threshold] = 0.0
    out_a: dict[tuple[int, int], list[np.ndarray]] = {}
    out_b: dict[tuple[int, int], list[np.ndarray]] = {}
    for x in range(K):
        if sizes[x] == 0:
            continue
        partners = np.flatnonzero(score[x] > 0)
        partners = partners[np.lexsort((partners, -score[x, partners]))]
        avail = sizes[partners] - (partners == x)
        quota = round_robin(avail, k)
        for y, q in zip(partners.tolist(), quota.tolist()):
            if q <= 0:
                continue
            mx, my = members[x], members[y]
            p = np.arange(mx.size)[:, None]
            j = np.arange(q)[None, :]
            if y == x:
                idx = (p + 1 + j) % mx.size  # circulant: the next q jobs of the same type
            else:
                idx = (p * my.size // mx.size + j) % my.size  # evenly spread over the partner type
            ja = np.repeat(mx, q)
            jb = my[idx].ravel()
            key = (min(x, y), max(x, y))
            if x > y:
                ja, jb = jb, ja
            out_a.setdefault(key, []).append(ja)
            out_b.setdefault(key, []).append(jb)
    chosen: dict[tuple[int, int], tuple[np.ndarray, np.ndarray]] = {}
    n = len(space.jobs)
    for key in out_a:
        ja = np.concatenate(out_a[key])
        jb = np.concatenate(out_b[key])
        lo, hi = np.minimum(ja, jb), np.maximum(ja, jb)
        u = np.unique(lo * n + hi)
        # keep the table's orientation: first job of type key[0]
        u_lo, u_hi = u // n, u % n
        first_is_a = job_code[u_lo] == key[0]
        chosen[key] = (np.where(first_is_a, u_lo, u_hi), np.where(first_is_a, u_hi, u_lo))
    return chosen


def round_robin(avail: np.ndarray, k: int) -> np.ndarray:
    """Split ``k`` proposals over partner types in rank order, one per type per round (diversity
    first: the k best partner *types*, then second partners of the best types), capped by ``avail``."""
    quota = np.zeros(avail.size, np.int64)
    left = k
    rnd = 0
    while left > 0 and np.any(avail > rnd):
        take = np.flatnonzero(avail > rnd)[:left]
        quota[take] += 1
        left -= take.size
        rnd += 1
    return quota


def top_k_per_job(pa: np.ndarray, pb: np.ndarray, score: np.ndarray, k: int, n: int) -> np.ndarray:
    """Keep a pair if it is among the ``k`` best-scoring pairs of either of its jobs."""
    keep = np.zeros(pa.size, bool)
    for side in (pa, pb):
        order = np.lexsort((-score, side))
        s = side[order]
        first = np.searchsorted(s, s, side="left")
        rank = np.arange(s.size) - first
        keep[order[rank < k]] = True
    return keep
