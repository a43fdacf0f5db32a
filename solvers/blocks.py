"""Block-angular LPs: identical blocks aggregated, solved small, expanded and certified.

Scheduling LPs have ``n`` per-job blocks (a job's columns and its own rows: time row, epigraph row)
linked only through a few *linking rows* (one capacity row per worker type) and *linking columns*
(the epigraph variable ``t``). Jobs of the same kind (same throughputs, scale factor, weight,
bounds) give *identical* blocks: the LP is invariant under swapping them.

**Exactness.** If blocks ``b ∈ g`` are identical, averaging any optimal ``x`` over the group keeps
it feasible (the feasible set is convex and permutation invariant) and optimal (the objective is
linear and invariant). So the LP equals the *reduced* LP with one representative block per group,
its objective coefficients and its linking-row coefficients multiplied by the multiplicity
``m_g``:

.. math::  \\max\\ c_L z + \\sum_g m_g c_g x_g \\quad\\text{s.t.}\\quad
           R_g x_g + D_g z \\in [l_g, u_g],\\quad \\sum_g m_g B_g x_g + E z \\in [L, U]

Its solution expands to ``x_b = x_g`` for every ``b ∈ g``; its duals expand to ``y_b = ŷ_g/m_g``
(block rows) and ``y = ŷ`` (linking rows), which satisfy the full LP's stationarity.

**Certificate.** The expanded point is checked on the full LP: row and column bounds to
``feas_tol`` (scaled rows), and the Lagrangian bound of the expanded duals (for a maximization,
``c·x ≤ Σ_i max(y_i l_i, y_i u_i) + Σ_j max(d_j lo_j, d_j hi_j)``, ``d = c − Aᵀy``, valid for *any*
``y``; reduced costs below ``1e-12`` on an infinite side count as zero) must equal the primal
objective to ``gap_tol`` relative. Otherwise the caller solves the full LP.

Detection (all vectorized, ``O(nnz log nnz)``): rows and columns with more than ``τ`` non-zeros
are linking (``τ = max(2, 2·p90(row nnz))``); the connected components of the rest are the blocks
(when every block column meets exactly one non-linking row — max-sum throughput's shape — the
blocks are those rows with their columns, found without a graph search);
each block gets a 64-bit hash of its items (its columns' costs and bounds, its rows' bounds, its
inner entries, its entries in linking rows and columns, each keyed by its local indices) and
blocks with equal hashes form a group. A hash collision cannot give a wrong answer: the
certificate on the full LP would fail. Only the standard form is used.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from policyopt.standard_form import StandardForm

__all__ = ["BlockAggregation", "BlockStructure", "aggregate", "certify", "detect", "expand", "lagrangian_bound"]

#: most linking rows / columns the fast path accepts (K capacity rows; t)
MAX_LINKING_ROWS = 256
MAX_LINKING_COLS = 16
#: the reduced LP must have at most this fraction of the blocks to be worth it
MAX_GROUP_FRACTION = 0.5
#: skip the detection when more than this fraction of the matrix values are distinct (Gavel's
#: max-min LP at 2,048 jobs: ~4 %; makespan, with per-job remaining steps: ~33 %)
DISTINCT_VALUES_GATE = 0.2


@dataclass
class BlockStructure:
    """The block shape of a matrix (found by :func:`detect`; depends on ``A`` only): which columns and
    rows belong to which block (``-1``: linking), each one's local index inside its block, and the
    hash of each block's matrix entries. Costs and bounds are hashed at every :func:`aggregate`, so
    one structure serves the re-solves of a loaded model after cost/bound updates."""

    A: sp.csc_matrix              # the matrix it describes (reused only while it is this object)
    cb: np.ndarray                # per column: its block, -1 linking
    rb: np.ndarray                # per row: its block, -1 linking
    B: int
    col_order: np.ndarray         # block columns sorted by (block, index)
    col_start: np.ndarray         # each block's start in col_order (B + 1)
    lc: np.ndarray                # per column: local index in its block (-1 linking)
    row_order: np.ndarray
    row_start: np.ndarray
    lr: np.ndarray
    bc: np.ndarray                # the block columns
    br: np.ndarray                # the block rows
    h_mat: np.ndarray             # per block: hash of its matrix entries (uint64)
    n_mat: np.ndarray             # per block: number of those entries


@dataclass
class BlockAggregation:
    """The reduced LP and the maps back to the full one."""

    reduced: StandardForm
    keep_cols: np.ndarray        # full column of each reduced column
    keep_rows: np.ndarray        # full row of each reduced row
    col_src: np.ndarray          # per full column: the reduced column that gives its value
    row_src: np.ndarray          # per full row: the reduced row whose dual it takes
    row_div: np.ndarray          # per full row: divide that dual by this (the multiplicity)
    blocks: int
    groups: int
    group: np.ndarray | None = None   # per block: its group (numbered by first block)
    structure: BlockStructure | None = None

    def describe(self) -> str:
        return (f"{self.blocks} blocks in {self.groups} groups of identical blocks; reduced LP "
                f"{self.reduced.num_cols} columns × {self.reduced.num_rows} rows")

    def same_reduction(self, other: "BlockAggregation") -> bool:
        """Whether ``other`` (of the same structure) has the same groups, hence the same reduced matrix:
        only the reduced costs and bounds can differ."""
        return (self.structure is not None and other.structure is self.structure and self.group is not None
                and other.group is not None and np.array_equal(self.group, other.group))


_M32 = np.uint64(0xFFFFFFFF)


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


def _value_hash(key: np.ndarray, *values: np.ndarray) -> np.ndarray:
    """``mix((…(key·C ⊕ bits(v₁))·P + bits(v₂))·P + …)`` per item: ``key`` (uint64) its kind and
    local indices, ``values`` its values (``-0.0`` hashed as ``0.0``); one finalizer per item."""
    h = key * np.uint64(0xD6E8FEB86659FD93)
    for i, v in enumerate(values):
        bits = np.ascontiguousarray(np.asarray(v, np.float64) + 0.0).view(np.uint64)
        if i:
            h *= np.uint64(0x9E3779B97F4A7C15)
            h += bits
        else:
            h ^= bits
    return _mix(h)


def detect(sf: StandardForm) -> BlockStructure | None:
    """The block structure of ``sf``'s matrix, or ``None`` when ``sf`` is not block-angular with few
    linking rows/columns (or its values are mostly distinct: no identical blocks to expect)."""
    if sf.is_mip or sf.num_cols < 8 or sf.num_rows < 4:
        return None
    A = sf.A if sf.A.format == "csc" else sf.A.tocsc()
    N, R = sf.num_cols, sf.num_rows
    # a cheap gate first: repeated blocks repeat their coefficients, so an LP with many distinct
    # matrix values and costs (per-job data: remaining steps, measured throughputs) is not worth the
    # detection (at most half the blocks distinct allows up to nnz/2 distinct values; the gate is
    # tighter, a heuristic: such an LP goes to HiGHS whole; exactness is unaffected)
    values = np.concatenate([A.data, sf.c])
    values.sort()
    if np.count_nonzero(values[1:] != values[:-1]) + 1 > DISTINCT_VALUES_GATE * values.size:
        return None
    indptr, rows, vals = A.indptr, A.indices, A.data
    col_nnz = np.diff(indptr)
    cols = np.repeat(np.arange(N), col_nnz)
    row_nnz = np.bincount(rows, minlength=R)
    k90 = int(0.9 * (R - 1))  # the 90th percentile of the row counts by counting (no sort)
    tau = max(2, 2 * int(np.searchsorted(np.cumsum(np.bincount(row_nnz)), k90, side="right")))
    link_row = row_nnz > tau
    link_col = col_nnz > tau
    if np.count_nonzero(link_row) > MAX_LINKING_ROWS or np.count_nonzero(link_col) > MAX_LINKING_COLS:
        return None
    inner = ~link_row[rows]
    inner &= ~link_col[cols]
    in_cols, in_rows = cols[inner], rows[inner]
    in_cnt = np.bincount(in_cols, minlength=N)
    star = bool(np.all(in_cnt[~link_col] == 1))
    labelled = None
    if star:
        # star blocks (max-sum throughput's shape): every block column meets exactly one inner row,
        # so the components are those rows with their columns — no graph search; one row per block
        col_row = np.zeros(N, np.int64)
        col_row[in_cols] = in_rows
        row_has = np.zeros(R, bool)
        row_has[in_rows] = True
        block_id = np.cumsum(row_has) - 1
        B = int(block_id[-1] + 1)
        if B < 4:
            return None
        cb = np.where(link_col, -1, block_id[col_row])
        rb = np.where(row_has, block_id, -1)
        row_order = np.flatnonzero(row_has)
        row_start = np.arange(B + 1)
        lr = rb.copy()
        lr[row_order] = 0
    else:
        labelled = _row_labels(N, R, link_col, link_row, in_cols, in_rows, in_cnt)
    if not star and labelled is not None:
        cb, rb, B = labelled
        if B < 4:
            return None
        row_order, row_start, lr = _local_ranks(rb, B)
    elif not star:
        # the bipartite column–row graph of the inner entries, as CSR straight from the CSC arrays
        # (column j's neighbours are rows N + i; rows have no out-edges; undirected components)
        ptr = np.zeros(N + R + 1, np.int64)
        np.cumsum(in_cnt, out=ptr[1:N + 1])
        ptr[N + 1:] = ptr[N]
        nbr = (in_rows + N).astype(np.int32)
        g = sp.csr_matrix((np.ones(nbr.size), nbr, ptr), shape=(N + R, N + R))
        _, label = connected_components(g, directed=False)
        col_label, row_label = label[:N], label[N:]
        # blocks: components holding a non-linking column; rows of other components stay as they are
        has_col = np.zeros(label.max() + 1, bool)
        has_col[col_label[~link_col]] = True
        block_id = np.cumsum(has_col) - 1
        cb = np.where(link_col, -1, block_id[col_label])
        rb = np.where(link_row | ~has_col[row_label], -1, block_id[row_label])
        B = int(block_id[-1] + 1)
        if B < 4:
            return None
        row_order, row_start, lr = _local_ranks(rb, B)
    # local index of every block column / row (rank by index inside its block)
    col_order, col_start, lc = _local_ranks(cb, B)
    # the matrix part of each block's hash: each entry keyed by the codes of its row and column (a
    # block row or column: its local index; a linking one: _LINK + its rank among the linking ones),
    # so an inner entry, a block column in a linking row and a block row on a linking column all
    # have distinct keys; each entry belongs to the block of its row or column (both: the same)
    row_code = _codes(rb, lr)
    col_code = _codes(cb, lc)
    key = (row_code[rows] << np.uint64(32)) | col_code[cols]
    ent_blk = np.maximum(cb[cols], rb[rows])
    ent_blk[ent_blk < 0] = B  # linking row × linking column: in no block (bin B, dropped)
    h_mat = _block_sum(ent_blk, _value_hash(key, vals), B + 1)[:B]
    n_mat = np.bincount(ent_blk, minlength=B + 1)[:B]
    return BlockStructure(A, cb, rb, B, col_order, col_start, lc, row_order, row_start, lr,
                          np.flatnonzero(cb >= 0), np.flatnonzero(rb >= 0), h_mat, n_mat)


def _row_labels(N: int, R: int, link_col: np.ndarray, link_row: np.ndarray, in_cols: np.ndarray,
                in_rows: np.ndarray, in_cnt: np.ndarray) -> tuple[np.ndarray, np.ndarray, int] | None:
    """The connected components of the inner entries without a graph search, or ``None`` (then the
    graph is searched): each column takes one of its inner rows as label (a column without inner
    entries a label of its own), each row the label of one of its columns. When every inner entry
    joins a column and a row of the same label, the labels are constant on each component, and a
    label's columns and rows all meet its row (or are its column), so label classes *are* the
    components. Blocks are numbered by their first column, as the graph search numbers them; this
    needs the labels non-decreasing along the non-linking columns (a job's columns side by side,
    its first row before the next job's: max-min fairness's time and epigraph rows), else ``None``.
    Returns ``(cb, rb, B)`` as :func:`detect` uses them."""
    col_lab = np.arange(R, R + N, dtype=np.int64)  # no inner entry: a label of its own
    first = np.cumsum(in_cnt) - in_cnt  # each column's first inner entry (entries in column order)
    has_in = in_cnt > 0
    col_lab[has_in] = in_rows[first[has_in]]
    row_lab = np.full(R, -1, np.int64)
    row_lab[in_rows] = col_lab[in_cols]
    if not np.array_equal(row_lab[in_rows], col_lab[in_cols]):
        return None
    bcols = np.flatnonzero(~link_col)
    lab = col_lab[bcols]
    if lab.size == 0 or np.any(lab[1:] < lab[:-1]):
        return None
    new = np.empty(lab.size, bool)
    new[0] = True
    np.not_equal(lab[1:], lab[:-1], out=new[1:])
    bid = np.cumsum(new) - 1
    B = int(bid[-1] + 1)
    cb = np.full(N, -1, np.int64)
    cb[bcols] = bid
    of_label = np.full(R, -1, np.int64)  # a row label's block
    row_label = new & (lab < R)
    of_label[lab[row_label]] = bid[row_label]
    rb = np.where((row_lab >= 0) & ~link_row, of_label[np.maximum(row_lab, 0)], -1)
    return cb, rb, B


def aggregate(sf: StandardForm, structure: BlockStructure | None = None) -> BlockAggregation | None:
    """The reduced LP of ``sf`` over groups of identical blocks, or ``None`` when ``sf`` is not
    block-angular with few linking rows/columns or aggregating would not halve it. ``structure``:
    :func:`detect`'s answer for ``sf.A`` (found here when not given)."""
    if structure is None:
        structure = detect(sf)
    if structure is None:
        return None
    st = structure
    A, N, R, B = st.A, sf.num_cols, sf.num_rows, st.B
    cb, rb, bc, br, lc, lr = st.cb, st.rb, st.bc, st.br, st.lc, st.lr
    # ---- one 64-bit hash per block: the sum over its items of mix(key(item) ^ bits(value)), where
    # the key holds the item's kind and local indices (order-free, so no sort); blocks with equal
    # (item count, hash) are grouped. A collision could only make the certificate below fail.
    # (a block column: its cost and bounds under key _COL_KEY + local index; a block row: its
    # bounds under _ROW_KEY + local index)
    bcb, brb = cb[bc], rb[br]
    hc = _value_hash(lc[bc].astype(np.uint64) + _COL_KEY, sf.c[bc], sf.col_lower[bc], sf.col_upper[bc])
    hr = _value_hash(lr[br].astype(np.uint64) + _ROW_KEY, sf.row_lower[br], sf.row_upper[br])
    h = st.h_mat + _block_sum(bcb, hc, B) + _block_sum(brb, hr, B)
    col_len, row_len = np.diff(st.col_start), np.diff(st.row_start)
    n_items = st.n_mat + col_len + row_len
    sig = _mix(h ^ _mix(n_items.astype(np.uint64)))
    _, first, group = np.unique(sig, return_index=True, return_inverse=True)
    # groups numbered in the order of their first block: equal arrays ⇔ equal partitions
    order = np.argsort(first)
    relabel = np.empty_like(order)
    relabel[order] = np.arange(order.size)
    group, first = relabel[group.ravel()], first[order]
    n_groups = int(first.size)
    if n_groups >= B or n_groups > MAX_GROUP_FRACTION * B:
        return None
    mult = np.bincount(group, minlength=n_groups).astype(float)
    rep = first.astype(np.int64)  # the first block of each group
    if np.any(col_len[rep[group]] != col_len) or np.any(row_len[rep[group]] != row_len):
        return None

    # ---- reduced LP: linking columns/rows + the representatives' columns/rows, original order
    is_rep = np.zeros(B, bool)
    is_rep[rep] = True
    keep_col = cb < 0
    keep_col[bc] = is_rep[bcb]
    keep_row = rb < 0
    keep_row[br] = is_rep[brb]
    keep_cols, keep_rows = np.flatnonzero(keep_col), np.flatnonzero(keep_row)
    red_col = np.full(N, -1, np.int64)
    red_col[keep_cols] = np.arange(keep_cols.size)
    red_row = np.full(R, -1, np.int64)
    red_row[keep_rows] = np.arange(keep_rows.size)
    m_col = np.ones(N)
    m_col[bc] = mult[group[bcb]]
    # the kept entries straight from the CSC arrays, read in the kept columns only (column order and
    # row order within a column kept): each kept column's slice of indices/data, then its kept rows
    starts = A.indptr[keep_cols]
    lens = A.indptr[keep_cols + 1] - starts
    ent = np.repeat(starts - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
    ent_red = np.repeat(np.arange(keep_cols.size), lens)  # each entry's reduced column
    sel = keep_row[A.indices[ent]]
    ent, ent_red = ent[sel], ent_red[sel]
    ent_row = A.indices[ent]
    data = A.data[ent]
    data = np.where(rb[ent_row] < 0, data * m_col[keep_cols][ent_red], data)
    ptr = np.zeros(keep_cols.size + 1, np.int64)
    np.cumsum(np.bincount(ent_red, minlength=keep_cols.size), out=ptr[1:])
    A_red = sp.csc_matrix((data, red_row[ent_row].astype(np.int32), ptr), shape=(keep_rows.size, keep_cols.size))
    reduced = StandardForm(
        sense=sf.sense, c=sf.c[keep_cols] * m_col[keep_cols], offset=float(sf.offset),
        col_lower=sf.col_lower[keep_cols].copy(), col_upper=sf.col_upper[keep_cols].copy(),
        integrality=np.zeros(keep_cols.size, np.int32), A=A_red,
        row_lower=sf.row_lower[keep_rows].copy(), row_upper=sf.row_upper[keep_rows].copy(),
        row_scale=np.ones(keep_rows.size), row_scale_applied=True)
    # ---- maps back: every block column/row takes its representative's (same local index)
    col_src = red_col.copy()
    rep_b = rep[group[bcb]]
    col_src[bc] = red_col[st.col_order[st.col_start[rep_b] + lc[bc]]]
    row_src = red_row.copy()
    rep_r = rep[group[brb]]
    row_src[br] = red_row[st.row_order[st.row_start[rep_r] + lr[br]]]
    row_div = np.ones(R)
    row_div[br] = mult[group[brb]]
    if np.any(col_src < 0) or np.any(row_src < 0):
        return None  # blocks of one group differ in shape: cannot happen with equal token tables
    return BlockAggregation(reduced, keep_cols, keep_rows, col_src, row_src, row_div, B, n_groups, group, st)


def _mix(z: np.ndarray) -> np.ndarray:
    """splitmix64's finalizer on uint64 arrays (wrapping arithmetic)."""
    z = z ^ (z >> np.uint64(30))
    z = z * np.uint64(0xBF58476D1CE4E5B9)
    z = z ^ (z >> np.uint64(27))
    z = z * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _local_ranks(owner: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For items with ``owner ≥ 0``: items sorted by (owner, index), each owner's start in that
    order, and each item's rank inside its owner (``-1`` for unowned items)."""
    idx = np.flatnonzero(owner >= 0)
    own = owner[idx]
    # laid out block by block (a job's columns side by side): already in order, no sort
    order = idx if np.all(own[1:] >= own[:-1]) else idx[np.argsort(own, kind="stable")]
    cnt = np.bincount(own, minlength=B)
    start = np.concatenate([[0], np.cumsum(cnt)])
    rank = np.full(owner.size, -1, np.int64)
    rank[order] = np.arange(order.size) - start[owner[order]]
    return order, start, rank


def expand(agg: BlockAggregation, x_red: np.ndarray, y_red: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """Full primal point and (scaled-row) duals from the reduced LP's."""
    x = x_red[agg.col_src]
    y = None if y_red is None else y_red[agg.row_src] / agg.row_div
    return x, y


def lagrangian_bound(sf: StandardForm, y: np.ndarray, zero_tol: float = 1e-12) -> tuple[float, np.ndarray]:
    """The bound on the optimal objective given by row multipliers ``y`` of the scaled rows (an
    upper bound for ``max``, a lower bound for ``min``), and the reduced costs ``d = c − Aᵀy``."""
    d = sf.c - sf.A.T @ y
    pick = np.maximum if sf.sense == "max" else np.minimum

    def side(mult: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
        with np.errstate(invalid="ignore"):
            v = pick(mult * lo, mult * hi)
        v = np.where((np.abs(mult) <= zero_tol) & ~np.isfinite(v), 0.0, v)  # 0·∞ and round-off on a free side
        return float(v.sum())

    return side(y, sf.row_lower, sf.row_upper) + side(d, sf.col_lower, sf.col_upper) + float(sf.offset), d


def certify(sf: StandardForm, x: np.ndarray, y: np.ndarray, feas_tol: float = 1e-9,
            gap_tol: float = 1e-9) -> tuple[bool, float, float, float, np.ndarray]:
    """``(ok, primal objective, dual bound, violation, reduced costs)`` of ``(x, y)`` on ``sf``."""
    primal = float(np.sum(sf.c * x)) + float(sf.offset)
    bound, d = lagrangian_bound(sf, y)
    viol = sf.violation(x)
    gap = abs(bound - primal)
    ok = bool(np.isfinite(bound) and viol <= feas_tol and gap <= gap_tol * max(1.0, abs(primal)))
    return ok, primal, bound, viol, d
