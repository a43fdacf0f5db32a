"""Array kernels of the block detection (:mod:`policyopt.solvers.blocks`): wrapping 64-bit hash
sums over segments and blocks, the keys of rows, columns and entries, the value hash, grouping of
equal signatures by a hash table, and each item's rank inside its block. All vectorized.
"""
from __future__ import annotations

import numpy as np

_M32 = np.uint64(0xFFFFFFFF)


def _segment_sum(v: np.ndarray, start: np.ndarray) -> np.ndarray:
    """Wrapping uint64 sums of ``v`` over the segments ``[start[b], start[b+1])`` (``start``
    non-decreasing, ``B + 1`` entries, ``start[B] ≤ v.size``; empty segments sum to 0): one
    ``add.reduceat`` where items lie block by block, in place of two float bincounts."""
    B = start.size - 1
    out = np.zeros(max(B, 0), np.uint64)
    end = int(start[-1]) if B > 0 else 0
    if end == 0:
        return out
    lo = start[:-1]
    live = lo < end  # segments that start at the end are empty (reduceat needs indices below the size)
    idx = lo[live]
    sums = np.add.reduceat(v[:end], idx)  # each live segment runs to the next live start (or the end)
    sums[idx >= np.append(idx[1:], end)] = 0  # empty ones read one item instead
    out[live] = sums
    return out


def _block_sum(blk: np.ndarray, v: np.ndarray, B: int) -> np.ndarray:
    """Per-block wrapping uint64 sums of ``v`` (``blk``: each item's block): two float bincounts of
    the 32-bit halves, exact while a block holds fewer than 2²¹ items (else ``np.add.at``)."""
    if blk.size == 0:
        return np.zeros(B, np.uint64)
    if blk.size >= 1 << 21:
        out = np.zeros(B, np.uint64)
        np.add.at(out, blk, v)
        return out
    lo = np.bincount(blk, (v & _M32).astype(np.float64), minlength=B).astype(np.uint64)
    hi = np.bincount(blk, (v >> np.uint64(32)).astype(np.float64), minlength=B).astype(np.uint64)
    return lo + (hi << np.uint64(32))


#: a linking row's or column's code offset in the entry keys (local indices stay below it)
_LINK = np.uint64(1 << 30)
#: key offsets of a block column's and a block row's own data (cost and bounds; bounds) in the
#: block hash: entry keys are ``row code·2³² + column code`` with both codes below 2³¹ (below
#: 2⁶³), so these (2⁶³ + 2⁶² and 2⁶³ + local index) meet no entry key and not each other
_COL_KEY = np.uint64(3 << 62)
_ROW_KEY = np.uint64(1 << 63)


def _codes(owner: np.ndarray, local: np.ndarray) -> np.ndarray:
    """Per row (column): its local index in its block, or ``_LINK`` + its rank among the linking
    ones (``owner < 0``), as uint64."""
    link = owner < 0
    code = local.astype(np.uint64)
    code[link] = _LINK + np.arange(np.count_nonzero(link), dtype=np.uint64)
    return code


_KEY_MUL = np.uint64(0xD6E8FEB86659FD93)


def _value_hash(key: np.ndarray, *values: np.ndarray, premultiplied: bool = False) -> np.ndarray:
    """``mix((…(key·C ⊕ bits(v₁))·P + bits(v₂))·P + …)`` per item: ``key`` (uint64) its kind and
    local indices, ``values`` its values (``-0.0`` hashed as ``0.0``); one finalizer per item.
    ``premultiplied``: ``key`` is ``key·C`` already (a scratch array, changed in place)."""
    h = key if premultiplied else key * _KEY_MUL
    for i, v in enumerate(values):
        bits = np.add(v, 0.0, dtype=np.float64).view(np.uint64)  # a new array: -0.0 + 0.0 is 0.0
        if i:
            h *= np.uint64(0x9E3779B97F4A7C15)
            h += bits
        else:
            h ^= bits
    return _mix(h, inplace=True)


_S30, _S27, _S31 = np.uint64(30), np.uint64(27), np.uint64(31)
_C1, _C2 = np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB)


def _groups(sig: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Blocks with equal signatures grouped: each block's group, groups numbered in the order of
    their first block (so equal arrays mean equal partitions), and each group's first block — what
    ``np.unique(sig, return_index=True, return_inverse=True)`` gives, renumbered.

    By a hash table instead of a sort (sorting or binary-searching 64-bit hashes costs 0.1–0.4 ms
    at 2,048 blocks and 3 ms at 16,384 here): each block goes to bucket ``bits(sig) mod P``
    (``P ≥ blocks``, a power of two), the smallest block index per bucket is its candidate first
    block, and a block whose candidate has another signature (two signatures in one bucket) is
    tried again with other bits of ``sig``; what is left after three rounds is grouped by a sort."""
    n = sig.size
    rep = np.empty(n, np.int64)  # each block's first block of equal signature
    todo = np.arange(n)
    P = 1 << max(4, (n - 1).bit_length())  # int32 buckets: the table is no larger than ``sig``
    for shift in (0, 21, 42):
        s = sig[todo]
        bucket = ((s >> np.uint64(shift)) & np.uint64(P - 1)).astype(np.intp)
        first = np.full(P, n, np.int32)
        np.minimum.at(first, bucket, todo.astype(np.int32))
        cand = first[bucket]
        ok = sig[cand] == s
        rep[todo[ok]] = cand[ok]
        todo = todo[~ok]
        if todo.size == 0:
            break
    if todo.size:
        _, idx, inv = np.unique(sig[todo], return_index=True, return_inverse=True)
        rep[todo] = todo[idx][inv.ravel()]
    is_first = np.zeros(n, bool)
    is_first[rep] = True
    rank = np.cumsum(is_first) - 1
    return rank[rep], np.flatnonzero(is_first)


def _mix(z: np.ndarray, inplace: bool = False) -> np.ndarray:
    """splitmix64's finalizer on uint64 arrays (wrapping arithmetic); ``inplace``: ``z`` is a
    scratch array the caller gives up (no temporaries beyond one shift buffer)."""
    if not inplace:
        z = z.copy()
    t = np.right_shift(z, _S30)
    np.bitwise_xor(z, t, out=z)
    np.multiply(z, _C1, out=z)
    np.right_shift(z, _S27, out=t)
    np.bitwise_xor(z, t, out=z)
    np.multiply(z, _C2, out=z)
    np.right_shift(z, _S31, out=t)
    np.bitwise_xor(z, t, out=z)
    return z


#: most runs of increasing owners :func:`_local_ranks` orders by counting (else by a sort)
_MAX_RUNS = 16


def _local_ranks(owner: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, bool]:
    """For items with ``owner ≥ 0``: items sorted by (owner, index), each owner's start in that
    order, each item's rank inside its owner (``-1`` for unowned items), and whether the items
    already were in that order (laid out owner by owner)."""
    all_owned = np.count_nonzero(owner < 0) == 0
    if all_owned:  # every item owned (no linking column): no selection
        idx, own = np.arange(owner.size), owner
    else:
        idx = np.flatnonzero(owner >= 0)
        own = owner[idx]
    # laid out block by block (a job's columns side by side): already in order, no sort
    in_order = np.count_nonzero(own[1:] < own[:-1]) == 0
    start = np.zeros(B + 1, np.int64)
    np.bincount(own, minlength=B).cumsum(out=start[1:])
    if not in_order:
        # a few runs of increasing owners (max-min fairness: the time rows of every job, then the
        # epigraph rows of every job): an item's rank is how often its owner came in earlier runs,
        # its place ``start[owner] + rank`` — the stable sort by owner, by counting
        brk = np.flatnonzero(own[1:] <= own[:-1])
        if brk.size < _MAX_RUNS:
            bounds = [0, *(brk + 1).tolist(), own.size]
            seen = np.zeros(B, np.int64)
            local = np.empty(own.size, np.int64)
            for a, b in zip(bounds[:-1], bounds[1:]):
                o = own[a:b]  # distinct owners within a run
                local[a:b] = seen[o]
                seen[o] += 1
            order = np.empty(idx.size, np.int64)
            order[start[own] + local] = idx
            rank = np.full(owner.size, -1, np.int64)
            rank[idx] = local
            return order, start, rank, False
        idx = idx[np.argsort(own, kind="stable")]
        own = owner[idx]
    if all_owned and in_order:  # idx is arange: the ranks without a scatter
        return idx, start, idx - start[own], True
    rank = np.full(owner.size, -1, np.int64)
    rank[idx] = np.arange(idx.size) - start[own]
    return idx, start, rank, in_order
