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
are linking (``τ = max(2, 2·p90(row nnz))``); the connected components of the rest are the blocks;
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

__all__ = ["BlockAggregation", "aggregate", "expand", "lagrangian_bound", "certify"]

#: most linking rows / columns the fast path accepts (K capacity rows; t)
MAX_LINKING_ROWS = 256
MAX_LINKING_COLS = 16
#: the reduced LP must have at most this fraction of the blocks to be worth it
MAX_GROUP_FRACTION = 0.5
#: skip the detection when more than this fraction of the matrix values are distinct (Gavel's
#: max-min LP at 2,048 jobs: ~4 %; makespan, with per-job remaining steps: ~33 %)
DISTINCT_VALUES_GATE = 0.2


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

    def describe(self) -> str:
        return (f"{self.blocks} blocks in {self.groups} groups of identical blocks; reduced LP "
                f"{self.reduced.num_cols} columns × {self.reduced.num_rows} rows")


def aggregate(sf: StandardForm) -> BlockAggregation | None:
    """The reduced LP of ``sf`` over groups of identical blocks, or ``None`` when ``sf`` is not
    block-angular with few linking rows/columns or aggregating would not halve it."""
    if sf.is_mip or sf.num_cols < 8 or sf.num_rows < 4:
        return None
    A = sf.A.tocsc()
    N, R = sf.num_cols, sf.num_rows
    # a cheap gate first: repeated blocks repeat their coefficients, so an LP with many distinct
    # matrix values and costs (per-job data: remaining steps, measured throughputs) is not worth the
    # detection (at most half the blocks distinct allows up to nnz/2 distinct values; the gate is
    # tighter, a heuristic: such an LP goes to HiGHS whole; exactness is unaffected)
    values = np.concatenate([A.data, sf.c])
    if np.unique(values).size > DISTINCT_VALUES_GATE * values.size:
        return None
    indptr, rows, vals = A.indptr, A.indices, A.data
    cols = np.repeat(np.arange(N), np.diff(indptr))
    col_nnz = np.diff(indptr)
    row_nnz = np.bincount(rows, minlength=R)
    k90 = int(0.9 * (R - 1))
    tau = max(2, 2 * int(np.partition(row_nnz, k90)[k90]))
    link_row = row_nnz > tau
    link_col = col_nnz > tau
    if link_row.sum() > MAX_LINKING_ROWS or link_col.sum() > MAX_LINKING_COLS:
        return None
    inner = ~link_row[rows] & ~link_col[cols]
    g = sp.coo_matrix((np.ones(int(inner.sum())), (cols[inner], N + rows[inner])), shape=(N + R, N + R))
    _, label = connected_components(g, directed=False)
    col_label, row_label = label[:N], label[N:]
    # blocks: components holding a non-linking column; rows of other components stay as they are
    has_col = np.zeros(label.max() + 1, bool)
    has_col[col_label[~link_col]] = True
    block_id = np.cumsum(has_col) - 1
    cb = np.where(link_col, -1, block_id[col_label])
    rb = np.where(link_row | ~has_col[row_label], -1, block_id[row_label])
    B = int(has_col.sum())
    if B < 4:
        return None
    # local index of every block column / row (rank by index inside its block)
    col_order, col_start, lc = _local_ranks(cb, B)
    row_order, row_start, lr = _local_ranks(rb, B)
    link_rows = np.flatnonzero(rb < 0)
    link_cols = np.flatnonzero(cb < 0)
    lrow_rank = np.full(R, -1, np.int64)
    lrow_rank[link_rows] = np.arange(link_rows.size)
    lcol_rank = np.full(N, -1, np.int64)
    lcol_rank[link_cols] = np.arange(link_cols.size)

    # ---- one 64-bit hash per block: the sum over its items of mix(key(item) ^ bits(value)), where
    # the key holds the item's kind and local indices (order-free, so no sort); blocks with equal
    # (item count, hash) are grouped. A collision could only make the certificate below fail.
    bc = np.flatnonzero(cb >= 0)
    br = np.flatnonzero(rb >= 0)
    ent_cb, ent_rb = cb[cols], rb[rows]
    e2 = (ent_cb >= 0) & (ent_rb >= 0)    # inner entries
    e3 = (ent_cb >= 0) & (ent_rb < 0)     # block column in a linking row
    e4 = (ent_cb < 0) & (ent_rb >= 0)     # block row on a linking column
    ent_blk = np.where(ent_cb >= 0, ent_cb, ent_rb)
    ent_type = np.where(e2, 2, np.where(e3, 3, 4))
    ent_a = np.where(ent_rb >= 0, lr[rows], lc[cols])
    ent_b = np.where(e2, lc[cols], np.where(e3, lrow_rank[rows], lcol_rank[cols]))
    use = e2 | e3 | e4
    items = [(ent_blk[use], ent_type[use], ent_a[use], ent_b[use], vals[use])]
    for k, v in enumerate((sf.c, sf.col_lower, sf.col_upper)):
        items.append((cb[bc], np.full(bc.size, 0), lc[bc], np.full(bc.size, k), v[bc]))
    for k, v in enumerate((sf.row_lower, sf.row_upper)):
        items.append((rb[br], np.full(br.size, 1), lr[br], np.full(br.size, k), v[br]))
    blk, typ, a, b, v = (np.concatenate(z) for z in zip(*items))
    key = (typ.astype(np.uint64) * np.uint64(0x100000001B3) + a.astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15) \
        + b.astype(np.uint64)
    bits = np.ascontiguousarray(v.astype(np.float64) + 0.0).view(np.uint64)  # -0.0 → 0.0
    h = np.zeros(B, np.uint64)
    np.add.at(h, blk, _mix(bits ^ (key * np.uint64(0xD6E8FEB86659FD93))))
    n_items = np.bincount(blk, minlength=B)
    sig = _mix(h ^ _mix(n_items.astype(np.uint64)))
    _, first, group = np.unique(sig, return_index=True, return_inverse=True)
    group = group.ravel()
    n_groups = int(first.size)
    if n_groups >= B or n_groups > MAX_GROUP_FRACTION * B:
        return None
    mult = np.bincount(group, minlength=n_groups).astype(float)
    rep = first.astype(np.int64)  # the first block of each group
    if np.any(np.diff(col_start)[rep[group]] != np.diff(col_start)) or \
            np.any(np.diff(row_start)[rep[group]] != np.diff(row_start)):
        return None

    # ---- reduced LP: linking columns/rows + the representatives' columns/rows, original order
    is_rep = np.zeros(B, bool)
    is_rep[rep] = True
    keep_col = (cb < 0) | is_rep[np.maximum(cb, 0)] & (cb >= 0)
    keep_row = (rb < 0) | is_rep[np.maximum(rb, 0)] & (rb >= 0)
    keep_cols, keep_rows = np.flatnonzero(keep_col), np.flatnonzero(keep_row)
    m_col = np.where(cb >= 0, mult[group[np.maximum(cb, 0)]], 1.0)
    sub = A[:, keep_cols][keep_rows, :].tocsc()
    sub_cols = np.repeat(keep_cols, np.diff(sub.indptr))
    sub_link = rb[keep_rows[sub.indices]] < 0
    data = np.where(sub_link, sub.data * m_col[sub_cols], sub.data)
    A_red = sp.csc_matrix((data, sub.indices, sub.indptr), shape=sub.shape)
    reduced = StandardForm(
        sense=sf.sense, c=sf.c[keep_cols] * m_col[keep_cols], offset=float(sf.offset),
        col_lower=sf.col_lower[keep_cols].copy(), col_upper=sf.col_upper[keep_cols].copy(),
        integrality=np.zeros(keep_cols.size, np.int32), A=A_red,
        row_lower=sf.row_lower[keep_rows].copy(), row_upper=sf.row_upper[keep_rows].copy(),
        row_scale=np.ones(keep_rows.size), row_scale_applied=True)
    # ---- maps back: every block column/row takes its representative's (same local index)
    red_col = np.full(N, -1, np.int64)
    red_col[keep_cols] = np.arange(keep_cols.size)
    red_row = np.full(R, -1, np.int64)
    red_row[keep_rows] = np.arange(keep_rows.size)
    col_src = red_col.copy()
    rep_b = rep[group[cb[bc]]]
    col_src[bc] = red_col[col_order[col_start[rep_b] + lc[bc]]]
    row_src = red_row.copy()
    rep_r = rep[group[rb[br]]]
    row_src[br] = red_row[row_order[row_start[rep_r] + lr[br]]]
    row_div = np.ones(R)
    row_div[br] = mult[group[rb[br]]]
    if np.any(col_src < 0) or np.any(row_src < 0):
        return None  # blocks of one group differ in shape: cannot happen with equal token tables
    return BlockAggregation(reduced, keep_cols, keep_rows, col_src, row_src, row_div, B, n_groups)


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
    order = idx[np.argsort(owner[idx], kind="stable")]
    cnt = np.bincount(owner[idx], minlength=B)
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
