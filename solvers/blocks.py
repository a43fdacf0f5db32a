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
certificate on the full LP would fail. Only the standard form is used. The array kernels (hashes,
grouping, local ranks) are in :mod:`.block_arrays`, the certificate in :mod:`.block_certificate`.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.sparse.csgraph import connected_components

from policyopt.standard_form import StandardForm, csc_of_arrays

from .block_arrays import (  # noqa: F401  (the kernels stay importable from here)
    _COL_KEY,
    _KEY_MUL,
    _ROW_KEY,
    _block_sum,
    _codes,
    _groups,
    _local_ranks,
    _mix,
    _segment_sum,
    _value_hash,
)
from .block_certificate import certify, lagrangian_bound

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
    bc: np.ndarray | slice        # the block columns (a slice where they are consecutive: views, no gathers)
    br: np.ndarray | slice        # the block rows (likewise)
    h_mat: np.ndarray             # per block: hash of its matrix entries (uint64)
    n_mat: np.ndarray             # per block: number of those entries
    cols_in_order: bool = False   # block columns laid out block by block (col_order is bc)
    rows_in_order: bool = False   # block rows laid out block by block (row_order is br)


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
    keep_mult: np.ndarray | None = None  # per reduced column: its group's multiplicity (1: linking)

    def describe(self) -> str:
        return (f"{self.blocks} blocks in {self.groups} groups of identical blocks; reduced LP "
                f"{self.reduced.num_cols} columns × {self.reduced.num_rows} rows")

    def same_reduction(self, other: "BlockAggregation") -> bool:
        """Whether ``other`` (of the same structure) has the same groups, hence the same reduced matrix:
        only the reduced costs and bounds can differ."""
        return (self.structure is not None and other.structure is self.structure and self.group is not None
                and other.group is not None and np.array_equal(self.group, other.group))


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
    inner = np.logical_not(link_row)[rows]  # (negated on the rows, gathered once on the entries)
    link_cols = np.flatnonzero(link_col)
    for j in link_cols.tolist():  # at most MAX_LINKING_COLS column slices (no per-entry gather)
        inner[indptr[j]:indptr[j + 1]] = False
    sel = np.flatnonzero(inner)  # (one scan; gathers by index cost less than two boolean masks)
    in_cols, in_rows = cols[sel], rows[sel]
    in_cnt = np.bincount(in_cols, minlength=N)
    star = np.count_nonzero((in_cnt[~link_col] if link_cols.size else in_cnt) != 1) == 0
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
        rows_in_order = True
    else:
        labelled = _row_labels(N, R, link_col, link_row, in_cols, in_rows, in_cnt)
    if not star and labelled is not None:
        cb, rb, B = labelled
        if B < 4:
            return None
        row_order, row_start, lr, rows_in_order = _local_ranks(rb, B)
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
        row_order, row_start, lr, rows_in_order = _local_ranks(rb, B)
    # local index of every block column / row (rank by index inside its block)
    col_order, col_start, lc, cols_in_order = _local_ranks(cb, B)
    # the matrix part of each block's hash: each entry keyed by the codes of its row and column (a
    # block row or column: its local index; a linking one: _LINK + its rank among the linking ones),
    # so an inner entry, a block column in a linking row and a block row on a linking column all
    # have distinct keys; each entry belongs to the block of its row or column (both: the same)
    row_code = _codes(rb, lr)
    col_code = _codes(cb, lc)
    # the key ``row code·2³² + column code`` times _value_hash's multiplier, as the sum of the
    # row's and the column's parts (wrapping: the same product), each multiplied once per row/column
    row_code <<= np.uint64(32)
    row_code *= _KEY_MUL
    col_code *= _KEY_MUL
    key = row_code[rows]
    key += col_code[cols]
    ent_hash = _value_hash(key, vals, premultiplied=True)
    bc, br = _span(np.flatnonzero(cb >= 0)), _span(np.flatnonzero(rb >= 0))
    if cols_in_order:
        # block columns lie block by block: a block column's entries are the block's, in one range
        # of the CSC arrays per block (a linking column's entries inside it are cut out and go to
        # their row's block), summed by one reduceat
        lk = (np.concatenate([np.arange(indptr[j], indptr[j + 1]) for j in link_cols.tolist()])
              if link_cols.size else np.zeros(0, np.int64))
        lk_blk, lk_hash = rb[rows[lk]], ent_hash[lk]
        ent_hash[lk] = 0
        if isinstance(bc, slice):  # block columns consecutive: block b's are bc.start + [col_start[b], col_start[b+1])
            first = indptr[bc.start + col_start]
            n_mat = np.diff(first)
            start = first.copy()
            start[-1] = rows.size
        else:
            start = np.append(indptr[col_order[col_start[:-1]]], rows.size)
            n_cum = np.zeros(col_order.size + 1, np.int64)
            np.cumsum(col_nnz[col_order], out=n_cum[1:])
            n_mat = np.diff(n_cum[col_start])
        h_mat = _segment_sum(ent_hash, start)
        own = lk_blk >= 0  # a linking column's entry in a block row (the epigraph t); else in no block
        if own.any():
            h_mat += _block_sum(lk_blk[own], lk_hash[own], B)
            n_mat += np.bincount(lk_blk[own], minlength=B)
    else:
        ent_blk = np.maximum(cb[cols], rb[rows])
        ent_blk[ent_blk < 0] = B  # linking row × linking column: in no block (bin B, dropped)
        h_mat = _block_sum(ent_blk, ent_hash, B + 1)[:B]
        n_mat = np.bincount(ent_blk, minlength=B + 1)[:B]
    return BlockStructure(A, cb, rb, B, col_order, col_start, lc, row_order, row_start, lr,
                          bc, br, h_mat, n_mat,
                          cols_in_order, rows_in_order)


def _span(idx: np.ndarray) -> np.ndarray | slice:
    """``idx`` (increasing indices) as a slice where they are consecutive, else as it is: indexing
    by either selects the same items."""
    if idx.size and int(idx[-1]) - int(idx[0]) + 1 == idx.size:
        return slice(int(idx[0]), int(idx[-1]) + 1)
    return idx


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
    has_in = _span(np.flatnonzero(in_cnt))
    col_lab[has_in] = in_rows[first[has_in]]
    row_lab = np.full(R, -1, np.int64)
    ent_lab = col_lab[in_cols]
    row_lab[in_rows] = ent_lab
    if not np.array_equal(row_lab[in_rows], ent_lab):
        return None
    bcols = _span(np.flatnonzero(~link_col))
    lab = col_lab[bcols]
    if lab.size == 0 or np.count_nonzero(lab[1:] < lab[:-1]):
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


def aggregate(sf: StandardForm, structure: BlockStructure | None = None,
              previous: BlockAggregation | None = None) -> BlockAggregation | None:
    """The reduced LP of ``sf`` over groups of identical blocks, or ``None`` when ``sf`` is not
    block-angular with few linking rows/columns or aggregating would not halve it. ``structure``:
    :func:`detect`'s answer for ``sf.A`` (found here when not given). ``previous``: an aggregation
    of the same structure (before in-place cost/bound updates); when the groups come out the same,
    its maps and reduced matrix are reused and only the reduced costs and bounds are taken anew."""
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
    # hashed in the structure's order (block by block: the block columns and rows themselves where
    # they lie that way, else col_order / row_order), so each block's items form one range: one
    # reduceat each (the sums are order-free: the same hashes in any order)
    co = bc if st.cols_in_order else st.col_order
    ro = br if st.rows_in_order else st.row_order
    hc = _value_hash(lc[co].astype(np.uint64) + _COL_KEY, sf.c[co], sf.col_lower[co], sf.col_upper[co])
    hr = _value_hash(lr[ro].astype(np.uint64) + _ROW_KEY, sf.row_lower[ro], sf.row_upper[ro])
    h = st.h_mat + _segment_sum(hc, st.col_start)
    h += _segment_sum(hr, st.row_start)
    col_len, row_len = np.diff(st.col_start), np.diff(st.row_start)
    n_items = st.n_mat + col_len + row_len
    h ^= _mix(n_items.astype(np.uint64), inplace=True)
    sig = _mix(h, inplace=True)
    group, first = _groups(sig)
    n_groups = int(first.size)
    if n_groups >= B or n_groups > MAX_GROUP_FRACTION * B:
        return None
    if (previous is not None and previous.structure is st and previous.group is not None
            and previous.keep_mult is not None and np.array_equal(previous.group, group)):
        # the same groups of the same matrix: the same representatives, maps and reduced matrix
        p, kc, kr = previous.reduced, previous.keep_cols, previous.keep_rows
        reduced = StandardForm(
            sense=sf.sense, c=sf.c[kc] * previous.keep_mult, offset=float(sf.offset),
            col_lower=sf.col_lower[kc], col_upper=sf.col_upper[kc], integrality=p.integrality, A=p.A,
            row_lower=sf.row_lower[kr], row_upper=sf.row_upper[kr], row_scale=p.row_scale, row_scale_applied=True)
        return BlockAggregation(reduced, kc, kr, previous.col_src, previous.row_src, previous.row_div, B, n_groups,
                                group, st, previous.keep_mult)
    mult = np.bincount(group, minlength=n_groups).astype(float)
    rep = first.astype(np.int64)  # the first block of each group
    if (col_len[rep[group]] != col_len).any() or (row_len[rep[group]] != row_len).any():
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
    ptr = np.zeros(keep_cols.size + 1, np.int32)
    np.cumsum(np.bincount(ent_red, minlength=keep_cols.size), out=ptr[1:])
    # canonical as it is (kept rows in the column's order, renumbered increasingly): no checks
    A_red = csc_of_arrays(data, red_row[ent_row].astype(np.int32), ptr, (keep_rows.size, keep_cols.size))
    reduced = StandardForm(
        sense=sf.sense, c=sf.c[keep_cols] * m_col[keep_cols], offset=float(sf.offset),
        col_lower=sf.col_lower[keep_cols].copy(), col_upper=sf.col_upper[keep_cols].copy(),
        integrality=np.zeros(keep_cols.size, np.int32), A=A_red,
        row_lower=sf.row_lower[keep_rows].copy(), row_upper=sf.row_upper[keep_rows].copy(),
        row_scale=np.ones(keep_rows.size), row_scale_applied=True)
    # ---- maps back: every block column/row takes its representative's (same local index)
    col_src = red_col.copy()
    rep_b = rep[group[bcb]]
    # (block columns consecutive and in order: col_order[k] is bc.start + k, no gather)
    col_pos = st.col_start[rep_b] + lc[bc]
    col_src[bc] = red_col[col_pos + bc.start if isinstance(bc, slice) and st.cols_in_order else st.col_order[col_pos]]
    row_src = red_row.copy()
    rep_r = rep[group[brb]]
    row_src[br] = red_row[st.row_order[st.row_start[rep_r] + lr[br]]]
    row_div = np.ones(R)
    row_div[br] = mult[group[brb]]
    if (col_src < 0).any() or (row_src < 0).any():
        return None  # blocks of one group differ in shape: cannot happen with equal token tables
    return BlockAggregation(reduced, keep_cols, keep_rows, col_src, row_src, row_div, B, n_groups, group, st,
                            m_col[keep_cols])


def expand(agg: BlockAggregation, x_red: np.ndarray, y_red: np.ndarray | None
           ) -> tuple[np.ndarray, np.ndarray | None]:
    """Full primal point and (scaled-row) duals from the reduced LP's."""
    x = x_red[agg.col_src]
    y = None if y_red is None else y_red[agg.row_src] / agg.row_div
    return x, y
