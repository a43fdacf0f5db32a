"""LPs with one own row per block and a few linking rows, re-solved from the linking rows' prices.

Shape (found on the standard form alone, :func:`detect`): every column ``k`` meets exactly one
*own* row ``m(k)`` (a generalized upper bound: a job's time row) with a coefficient ``g_k > 0``,
and otherwise only *linking rows* ``i = 1 … K`` (one capacity row per worker type), with

.. math::  \\max\\ c^T x \\quad\\text{s.t.}\\quad \\sum_{k \\in m} g_k x_k \\le u_m,\\qquad
           L \\le A_L x \\le U,\\qquad 0 \\le x_k \\le h_k,\\ h_k g_k \\ge u_m

(own rows' lower bounds ``≤ 0``; a ``min`` LP is taken as ``max −c``). This is max-sum
throughput's LP.

**Prices.** For linking prices ``p`` (scaled rows), block ``m``'s best answer puts its whole row
on a column of largest ratio ``ρ_k = (c_k − p·a_k) / g_k`` when that ratio is positive, else
nothing; its own row's multiplier is ``y_m = max(0, max_k ρ_k)``, which makes every reduced cost
``c_k − p·a_k − g_k y_m ≤ 0``.

**Re-solve** (:func:`solve`), from the prices of a previous optimum: the blocks whose best answer
is clear (its margin over the runner-up, or over zero, is not among the smallest) are fixed at it;
the others (the *free* blocks: ties and near-ties, at least :data:`MIN_FREE`) keep all their
columns in a small LP whose linking rows are what the fixed blocks leave. Its optimum and its
linking duals ``p'`` give a point ``x`` and multipliers ``y`` (``p'`` on the linking rows, the
``y_m`` above on the own rows) for the whole LP. **Certificate:** ``x`` meets every row and bound
to 1e-9 and the Lagrangian bound of ``y`` equals ``c·x`` to 1e-9 relative
(:func:`policyopt.solvers.blocks.certify`), so ``x`` is optimal. Otherwise the blocks that ``p'``
prices differently from their fixed answer are freed too, and the small LP is solved again (at
most :data:`ROUNDS` times); then the caller solves the whole LP.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import scipy.sparse as sp

from policyopt.standard_form import StandardForm, all_nonzero, any_nonzero, matvec, rmatvec

__all__ = ["GubStructure", "PriceAnswer", "detect", "plausible", "solve"]

#: most linking rows accepted (capacity rows: one per worker type)
MAX_LINKING_ROWS = 64
#: fewest blocks kept free in the small LP (the smallest margins), and per linking row
MIN_FREE = 24
FREE_PER_LINK = 8
#: a block whose best answer beats the runner-up by at most this (relative) is free
TIE = 1e-9
#: small LPs solved before giving up (each frees the blocks the last prices moved)
ROUNDS = 4
#: dual simplex steps tried from the given prices before a small LP (:func:`_pivot`)
PIVOTS = 4


@dataclass
class GubStructure:
    """The shape of :func:`detect` for one matrix (valid while ``A`` is that object)."""

    A: sp.csc_matrix
    link: np.ndarray        # the linking rows (K)
    own: np.ndarray         # per column: its own row
    g: np.ndarray           # per column: its coefficient there (> 0)
    order: np.ndarray | None  # columns sorted by own row (``None``: they already are)
    start: np.ndarray       # each block's first position in that order (B + 1 entries)
    rows: np.ndarray        # each block's own row (B)
    block: np.ndarray       # per column: its block
    lnum: np.ndarray        # per row: its number among the linking rows (−1: not one)

    @property
    def K(self) -> int:
        return int(self.link.size)

    @property
    def B(self) -> int:
        return int(self.rows.size)


@dataclass
class PriceAnswer:
    """A certified optimum: the point, the row multipliers (scaled rows), the objective, the dual
    bound, the largest violation, the reduced costs, and how many blocks were free and rounds run."""

    x: np.ndarray
    y: np.ndarray
    objective: float
    bound: float
    violation: float
    d: np.ndarray
    free: int
    rounds: int
    pivots: int = 0


def _linking_rows(sf: StandardForm, row_nnz: np.ndarray) -> np.ndarray:
    """Rows with more entries than an own row (one block's columns) has: above twice the 90th
    percentile of the row counts (the rule of ``blocks.detect``)."""
    k90 = int(0.9 * (sf.num_rows - 1))
    tau = max(2, 2 * int(np.searchsorted(np.cumsum(np.bincount(row_nnz)), k90, side="right")))
    return row_nnz > tau


#: a model re-solved after changes tries the path from its own last answer, and a kept model prefers
#: a fresh build started from its prices, only from this many columns: below, an update in place
#: and a warm HiGHS run cost less (max-sum, distinct jobs, medians of 40 re-solves, ms: 64 jobs
#: 1.66 against 1.61, 256 jobs 2.07 against 2.10, 512 jobs 2.99 against 2.52, 1,024 jobs 4.18
#: against 3.68; the simulator's replay at ~96 jobs 1.18 against 1.83). An explicit dual start
#: (``LoadedModel.set_dual_start``) is tried at any size.
PRICE_MIN_COLS = 1500
#: up to this many entries a kept model tests :func:`plausible` before preferring a fresh build;
#: above, the caller's guess from its layout stands (the test's two passes cost ~0.15 ms at 15,000
#: entries after a cold solve; a wrong guess costs one cold build)
PLAUSIBLE_MAX_NNZ = 8192


def plausible(sf: StandardForm) -> bool:
    """A cheap necessary test for :func:`detect`: no column has more entries than one own row and
    :data:`MAX_LINKING_ROWS` linking rows, there are linking rows (by :func:`detect`'s rule), and
    as many entries outside them as columns — two passes, no per-column work."""
    if sf.is_mip or sf.num_cols < 8 or sf.num_rows < 4:
        return False
    A = sf.A
    if int(np.diff(A.indptr).max()) > MAX_LINKING_ROWS + 1:
        return False
    row_nnz = np.bincount(A.indices, minlength=sf.num_rows)
    is_link = _linking_rows(sf, row_nnz)
    K = int(np.count_nonzero(is_link))
    return 0 < K <= MAX_LINKING_ROWS and int(row_nnz[~is_link].sum()) == sf.num_cols


def detect(sf: StandardForm) -> GubStructure | None:
    """The :class:`GubStructure` of ``sf`` (see the module docstring), or ``None``.

    The blocks come from the row counts: a non-linking row holds only own entries, so its count is
    its block's size, and the blocks in row order start at the running sums of those counts (no
    per-column pass beyond the own entries' gather and one map from row to block)."""
    if sf.is_mip or sf.num_cols < 8 or sf.num_rows < 4:
        return None
    A = sf.A if sf.A.format == "csc" else sf.A.tocsc()
    N, R = sf.num_cols, sf.num_rows
    indptr, rows = A.indptr, A.indices
    row_nnz = np.bincount(rows, minlength=R)
    is_link = _linking_rows(sf, row_nnz)
    K = int(np.count_nonzero(is_link))
    if K == 0 or K > MAX_LINKING_ROWS:
        return None
    not_link = ~is_link
    pos = np.flatnonzero(not_link[rows])
    # exactly one entry outside the linking rows per column: N of them, the k-th in column k
    if pos.size != N or not all_nonzero((pos >= indptr[:-1]) & (pos < indptr[1:])):
        return None
    own = rows[pos]
    g = A.data[pos]
    # own rows (those with entries outside the linking rows): upper bound finite and positive,
    # lower bound ≤ 0 (checked on every non-linking row: one without entries must then hold 0)
    ru, rl = sf.row_upper[not_link], sf.row_lower[not_link]
    if not (all_nonzero(g > 0) and not any_nonzero(sf.col_lower) and all_nonzero(rl <= 0)
            and all_nonzero((ru > 0) & (ru < np.inf)) and all_nonzero(sf.col_upper * g >= sf.row_upper[own])):
        return None
    order: np.ndarray | None = None
    if not all_nonzero(own[1:] >= own[:-1]):
        order = np.argsort(own, kind="stable")
    # the own rows in row order (each block's row), their blocks' sizes and starts in that order
    brows = np.flatnonzero(not_link & (row_nnz > 0))
    start = np.zeros(brows.size + 1, np.int64)
    np.cumsum(row_nnz[brows], out=start[1:])
    bmap = np.empty(R, np.int64)
    bmap[brows] = np.arange(brows.size)
    link = np.flatnonzero(is_link)
    lnum = np.full(R, -1, np.int64)
    lnum[link] = np.arange(K)
    return GubStructure(A=A, link=link, own=own, g=g, order=order, start=start, rows=brows,
                        block=bmap[own], lnum=lnum)


def _ratios(st: GubStructure, c: np.ndarray, p: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Under prices ``p``: every column's reduced cost before its own row ``r_k = c_k − p·a_k``, its
    ratio ``ρ_k = r_k / g_k``, and each block's best ratio ``max_k ρ_k``."""
    yl = np.zeros(st.A.shape[0])
    yl[st.link] = p
    red = c - rmatvec(st.A, yl)  # own rows carry no price here
    ratio = red / st.g
    srt = ratio if st.order is None else ratio[st.order]
    return red, ratio, np.maximum.reduceat(srt, st.start[:-1])


def _responses(st: GubStructure, ratio: np.ndarray, best: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per block: its first column of best ratio, and its margin (over the runner-up and zero when
    the best ratio is positive; else the distance to zero)."""
    srt = ratio.copy() if st.order is None else ratio[st.order]
    blk = st.block if st.order is None else st.block[st.order]
    pos = np.flatnonzero(srt == best[blk])
    first = pos[np.concatenate(([True], blk[pos][1:] != blk[pos][:-1]))]
    srt[first] = -np.inf
    second = np.maximum.reduceat(srt, st.start[:-1])
    margin = np.where(best > 0, best - np.maximum(second, 0.0), -best)
    return (first if st.order is None else st.order[first]), margin


def _block_cols(st: GubStructure, blocks: np.ndarray) -> np.ndarray:
    """The columns of ``blocks`` (block by block)."""
    s, e = st.start[blocks], st.start[blocks + 1]  # their positions in the block order
    n = e - s
    pos = np.repeat(s - np.cumsum(n) + n, n) + np.arange(int(n.sum()))
    return pos if st.order is None else st.order[pos]


def _entries(st: GubStructure, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The entries of columns ``cols`` of ``A`` (column by column): their positions in ``A.data``
    and each column's start among them (``cols.size + 1`` entries)."""
    ptr = st.A.indptr
    lo, n = ptr[cols], ptr[cols + 1] - ptr[cols]
    indptr = np.zeros(cols.size + 1, np.int64)
    np.cumsum(n, out=indptr[1:])
    return np.repeat(lo - indptr[:-1], n) + np.arange(indptr[-1]), indptr


def _small_lp(sf: StandardForm, st: GubStructure, c: np.ndarray, free: np.ndarray, act: np.ndarray
              ) -> tuple[StandardForm, np.ndarray]:
    """The LP of the blocks ``free`` (all their columns, their own rows, the linking rows less the
    fixed blocks' activity ``act``), rows as scaled in ``sf`` (``row_scale`` 1), and its columns."""
    cols = _block_cols(st, free)
    ent, indptr = _entries(st, cols)
    rmap = np.full(sf.num_rows, -1, np.int64)
    own_rows = st.rows[free]
    rmap[own_rows] = np.arange(own_rows.size)
    rmap[st.link] = own_rows.size + np.arange(st.K)
    A = sp.csc_matrix((st.A.data[ent], rmap[st.A.indices[ent]], indptr), shape=(own_rows.size + st.K, cols.size))
    rlo = np.concatenate([sf.row_lower[own_rows], sf.row_lower[st.link] - act])
    rhi = np.concatenate([sf.row_upper[own_rows], sf.row_upper[st.link] - act])
    lp = StandardForm(sense="max", c=c[cols], offset=0.0, col_lower=sf.col_lower[cols],
                      col_upper=sf.col_upper[cols], integrality=np.zeros(cols.size, np.int8), A=A,
                      row_lower=rlo, row_upper=rhi, row_scale=np.ones(rlo.size))
    return lp, cols


def _side(m: np.ndarray, lo: np.ndarray, hi: np.ndarray, zero_tol: float = 1e-12) -> float:
    """``Σ max(m·lo, m·hi)`` (``lo ≤ hi``): the Lagrangian bound's part of multipliers ``m`` on
    ranges ``[lo, hi]``, where ``0·∞`` and round-off on an infinite side (``|m| ≤ zero_tol``) count 0
    (as ``blocks.lagrangian_bound``). Multipliers ≤ 0 on ranges with ``lo = 0`` add nothing."""
    out = 0.0
    for sel, side in ((m > 0, hi), (m < 0, lo) if lo.any() else (None, lo)):
        if sel is None:
            continue
        mm = m[sel]
        with np.errstate(invalid="ignore"):
            v = mm * side[sel]
        bad = ~np.isfinite(v)
        if bad.any():
            v[bad & (np.abs(mm) <= zero_tol)] = 0.0
        out += float(v.sum())
    return out


def _certify(sf: StandardForm, st: GubStructure, sign: float, x: np.ndarray, p: np.ndarray,
             red: np.ndarray, best: np.ndarray, feas_tol: float, gap_tol: float
             ) -> tuple[bool, float, float, float, np.ndarray, np.ndarray]:
    """``(ok, objective, dual bound, violation, y, d)`` of the point ``x`` and the multipliers
    ``y`` (``p`` on the linking rows, ``max(0, best_m)`` on block ``m``'s own row, 0 elsewhere;
    ``sf``'s sense) — :func:`policyopt.solvers.blocks.certify` on the whole LP, with ``c − Aᵀy``
    taken by the structure: ``r_k − g_k y_m(k)`` with the ``r`` of :func:`_ratios` under ``p``
    (every entry of ``A`` is an own entry or a linking one)."""
    viol = sf.violation(x)
    yb = np.maximum(best, 0.0)
    d = red - st.g * yb[st.block]  # reduced costs, max-sense
    rl, ru = sf.row_lower, sf.row_upper
    # the bound of the max-sense LP (c·sign), then in sf's sense; other rows' multipliers are 0
    bound_max = (_side(yb, rl[st.rows], ru[st.rows]) + _side(p, rl[st.link], ru[st.link])
                 + _side(d, sf.col_lower, sf.col_upper))
    bound = sign * bound_max + float(sf.offset)
    primal = float(sf.c @ x) + float(sf.offset)
    ok = bool(np.isfinite(bound) and viol <= feas_tol and abs(bound - primal) <= gap_tol * max(1.0, abs(primal)))
    y = np.zeros(sf.num_rows)
    if sign > 0:
        y[st.link], y[st.rows] = p, yb
        return ok, primal, bound, viol, y, d
    y[st.link], y[st.rows] = -p, -yb
    return ok, primal, bound, viol, y, -d


#: at most this many tied columns share their rows in :func:`_split`
SPLIT_MAX = 64


def _link_act(st: GubStructure, cols: np.ndarray, vals: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``A_L x`` for ``x`` = ``vals`` on ``cols`` (0 elsewhere), and those columns' linking entries
    (linking row, position in ``cols``, value)."""
    ent, ptr = _entries(st, cols)
    r = st.lnum[st.A.indices[ent]]
    j = np.repeat(np.arange(cols.size), np.diff(ptr))
    k = r >= 0
    r, j, v = r[k], j[k], st.A.data[ent][k]
    return np.bincount(r, v * vals[j], minlength=st.K), r, j, v


@dataclass
class _System:
    """The linear system of :func:`_split`: the tied columns and each one's block (position in
    ``S``), the blocks with a slack, the tight linking rows (number → equation), the columns' rates
    ``a_k[tight] / g_k``, and its solution ``z`` (columns, then slacks)."""

    S: np.ndarray
    cols: list[int]
    col_block: list[int]
    slack: list[int]
    tight: dict[int, int]
    W: np.ndarray
    z: np.ndarray


#: square systems up to this size are solved in Python floats (:func:`_solve_square`)
SMALL_SOLVE = 8


def _solve_square(M: np.ndarray, rhs: np.ndarray) -> np.ndarray | None:
    """``M⁻¹ rhs`` by Gaussian elimination with partial pivoting (LAPACK's ``gesv``), or ``None``
    when a pivot is exactly 0 (singular). Up to :data:`SMALL_SOLVE` unknowns in Python floats: a
    first LAPACK call after other work costs ~55 µs for a 6 × 6 system, against ~18 µs here."""
    n = rhs.size
    if n > SMALL_SOLVE:
        try:
            return np.linalg.solve(M, rhs)
        except np.linalg.LinAlgError:
            return None
    a = [row + [b] for row, b in zip(M.tolist(), rhs.tolist())]
    for c in range(n):
        piv = max(range(c, n), key=lambda r: abs(a[r][c]))
        pr = a[piv]
        pv = pr[c]
        if pv == 0.0:
            return None
        a[piv], a[c] = a[c], pr
        for r in range(c + 1, n):
            row = a[r]
            f = row[c] / pv
            if f != 0.0:
                for j in range(c + 1, n + 1):
                    row[j] -= f * pr[j]
    z = [0.0] * n
    for c in range(n - 1, -1, -1):
        row = a[c]
        v = row[n]
        for j in range(c + 1, n):
            v -= row[j] * z[j]
        z[c] = v / row[c]
    return np.array(z)


def _split(sf: StandardForm, st: GubStructure, u: np.ndarray, p: np.ndarray, ratio: np.ndarray,
           best: np.ndarray, tol: np.ndarray, S: np.ndarray, xb: np.ndarray, act: np.ndarray
           ) -> tuple[np.ndarray | None, _System | None]:
    """The point of the same prices ``p``, if the basis they came from still holds: every block
    whose answer is unique at ``p`` takes it; the others (``S``: margins within ``tol``) share their
    tied columns (and their row's slack, when the best ratio is 0) so that each such block fills its
    own row and every linking row with a nonzero price is met with equality — a square (or least
    squares) linear system of a few unknowns. ``xb`` holds the answers of the blocks outside
    ``S`` (linking activities ``act``). Its point (the certificate decides the rest), or ``None``
    and the square system when its solution is negative somewhere (:func:`_pivot` moves the prices),
    or ``None, None``. (A few blocks: built entry by entry.)"""
    if S.size == 0 or S.size > SPLIT_MAX:
        return None, None
    pl = p.tolist()
    pmax = max(1.0, max(abs(v) for v in pl))
    tight = {i: n for n, i in enumerate(i for i, v in enumerate(pl) if abs(v) > TIE * pmax)}
    start, order, g, lnum = st.start, st.order, st.g, st.lnum
    indptr, indices, data = st.A.indptr, st.A.indices, st.A.data
    n_own = int(S.size)
    cols: list[int] = []
    col_block: list[int] = []
    entries: list[tuple[int, int, float]] = []  # (equation, unknown, coefficient)
    slack: list[int] = []
    for e, m in enumerate(S.tolist()):
        b, t = float(best[m]), float(tol[m])
        for pos in range(int(start[m]), int(start[m + 1])):
            k = pos if order is None else int(order[pos])
            if ratio[k] < b - t:
                continue
            j = len(cols)
            cols.append(k)
            col_block.append(e)
            entries.append((e, j, float(g[k])))
            for q in range(int(indptr[k]), int(indptr[k + 1])):
                n = tight.get(int(lnum[indices[q]]), -1)
                if n >= 0:
                    entries.append((n_own + n, j, float(data[q])))
        if b <= t:
            slack.append(e)
    if len(cols) > SPLIT_MAX:
        return None, None
    M = np.zeros((n_own + len(tight), len(cols) + len(slack)))
    for e, j, v in entries:
        M[e, j] = v
    for q, e in enumerate(slack):
        M[e, len(cols) + q] = 1.0
    rhs = np.empty(M.shape[0])
    rhs[:n_own] = u[S]
    for i, n in tight.items():
        r = int(st.link[i])
        rhs[n_own + n] = (sf.row_upper[r] if pl[i] > 0 else sf.row_lower[r]) - act[i]
    if not np.isfinite(rhs).all():
        return None, None
    z = _solve_square(M, rhs) if M.shape[0] == M.shape[1] else None
    if z is None:  # degenerate (e.g. identical blocks tied): the least-squares solution of least norm
        z = np.linalg.lstsq(M, rhs, rcond=None)[0]
    if not np.isfinite(z).all():
        return None, None
    if (z < -1e-12 * max(1.0, float(np.abs(z).max()))).any():
        if M.shape[0] != M.shape[1]:
            return None, None
        W = np.zeros((len(cols), len(tight)))
        for e, j, v in entries:
            if e >= n_own:
                W[j, e - n_own] = v / float(g[cols[j]])
        return None, _System(S, cols, col_block, slack, tight, W, z)
    x = xb.copy()
    x[cols] = np.maximum(z[:len(cols)], 0.0)
    return x, None


def _pivot(st: GubStructure, p: np.ndarray, ratio: np.ndarray, best: np.ndarray, best_col: np.ndarray,
           sy: _System) -> np.ndarray | None:
    """One dual simplex step from the prices ``p`` whose split (:func:`_split`) went negative: the
    most negative unknown leaves its tie (its ratio falls below its block's other options at rate
    1), every other tie is kept, and the prices move along that direction ``δ`` (tight rows only)
    until a new tie forms — a column reaching its block's best ratio, a best ratio reaching 0, or a
    price reaching 0. The new prices, or ``None`` (no such step)."""
    n_c, T = len(sy.cols), sorted(sy.tight, key=sy.tight.__getitem__)
    leave = int(np.argmin(sy.z))
    # each block's options: its tied columns (unknowns 0 … n_c−1) and its slack (n_c + q)
    options: dict[int, list[int]] = {}
    for j, e in enumerate(sy.col_block):
        options.setdefault(e, []).append(j)
    for q, e in enumerate(sy.slack):
        options.setdefault(e, []).append(n_c + q)

    def rate(o: int) -> np.ndarray:  # d ratio / dt = rate · δ
        return -sy.W[o] if o < n_c else np.zeros(len(T))

    rows, rhs = [], []
    ref: dict[int, int] = {}
    for e, opts in options.items():
        r0 = opts[0] if opts[0] != leave else opts[1]
        ref[e] = r0
        for o in opts:
            if o == r0:
                continue
            if o == leave:
                rows.append(rate(r0) - rate(o))
                rhs.append(1.0)
            else:
                rows.append(rate(o) - rate(r0))
                rhs.append(0.0)
    if len(rows) != len(T) or not T:
        return None
    delta = _solve_square(np.array(rows), np.array(rhs))
    if delta is None:
        return None
    dl = np.zeros(st.A.shape[0])
    dl[st.link[T]] = delta
    rk = -rmatvec(st.A, dl) / st.g  # every column's rate
    # each block's reference (the answer whose ratio the others are compared with) and its rate
    pos_b = best > 0
    b_ref = np.where(pos_b, best, 0.0)
    r_ref = np.where(pos_b, rk[best_col], 0.0)
    held = np.zeros(st.B, bool)
    S = sy.S
    held[S] = True
    for e, r0 in ref.items():
        m = int(S[e])
        b_ref[m] = 0.0 if r0 >= n_c else best[m]
        r_ref[m] = 0.0 if r0 >= n_c else float(rk[sy.cols[r0]])
    scale = max(1.0, float(np.abs(best).max(initial=0.0)))
    eps = 1e-12 * scale
    den = rk - r_ref[st.block]
    cand = den > eps
    cand[sy.cols] = False  # (tied columns keep their ties; the leaving one falls)
    t = np.inf
    if cand.any():
        t = float((np.maximum(b_ref[st.block][cand] - ratio[cand], 0.0) / den[cand]).min())
    # a best ratio falling to 0 (blocks answered by a column, not tied with nothing)
    zero = (r_ref < -eps) & (b_ref > 0)
    for e, r0 in ref.items():
        if r0 >= n_c:
            zero[int(S[e])] = False
    if zero.any():
        t = min(t, float((b_ref[zero] / -r_ref[zero]).min()))
    pT = p[T]
    shrink = pT * delta < 0
    if shrink.any():
        t = min(t, float((-pT[shrink] / delta[shrink]).min()))
    if not np.isfinite(t) or t <= eps:
        return None
    p_new = p.copy()
    p_new[T] += t * delta
    return p_new


#: solves a small LP to tight tolerances: its point and row duals (``d = c − Aᵀy``), or ``None``
SmallSolver = Callable[[StandardForm], "tuple[np.ndarray, np.ndarray] | None"]


def solve(sf: StandardForm, st: GubStructure, p: np.ndarray, small: SmallSolver,
          feas_tol: float = 1e-9, gap_tol: float = 1e-9) -> tuple[PriceAnswer | None, str]:
    """The certified optimum of ``sf`` from linking prices ``p`` (multipliers of the scaled linking
    rows, ``d = c − Aᵀy`` in ``sf``'s sense), or ``None`` and why not."""
    sign = 1.0 if sf.sense == "max" else -1.0
    c = sign * sf.c
    u = sf.row_upper[st.rows]
    p = sign * np.asarray(p, np.float64)
    if p.shape != (st.K,) or not np.isfinite(p).all():
        return None, "no prices for the linking rows"
    B = st.B
    pivots = 0
    while True:
        red, ratio, best = _ratios(st, c, p)
        best_col, margin = _responses(st, ratio, best)
        tol = TIE * np.maximum(1.0, np.abs(best))
        tied = margin <= tol  # (identical jobs at the margin, the blocks a vertex splits)
        # the blocks not tied at their answers
        on = ~tied & (best > 0)
        xb = np.zeros(sf.num_cols)
        bc = best_col[on]
        xb[bc] = u[on] / st.g[bc]
        act_b = matvec(st.A, xb)[st.link]
        # 0. these prices, the tied blocks sharing their rows (the basis they came from held: no LP);
        # where the shares go negative, a dual simplex step to the next prices (at most PIVOTS)
        S = tied.nonzero()[0]
        x_split, system = _split(sf, st, u, p, ratio, best, tol, S, xb, act_b)
        if x_split is not None:
            ok, primal, bound, viol, y, d = _certify(sf, st, sign, x_split, p, red, best, feas_tol, gap_tol)
            if ok:
                return PriceAnswer(x=x_split, y=y, objective=primal, bound=bound, violation=viol, d=d,
                                   free=int(S.size), rounds=0, pivots=pivots), ""
        p_next = None if system is None or pivots == PIVOTS else _pivot(st, p, ratio, best, best_col, system)
        if p_next is None:
            break
        p = p_next
        pivots += 1
    # 1. a small LP of the tied blocks and those of the smallest margins; the first round's fixed
    # blocks are the point above without the latter
    free = tied
    n_free = min(B, max(MIN_FREE, FREE_PER_LINK * st.K))
    free[np.argpartition(margin, n_free - 1)[:n_free] if n_free < B else slice(None)] = True
    extra = np.flatnonzero(free & on)
    x0 = xb
    act0 = act_b
    if extra.size:
        ec = best_col[extra]
        x0[ec] = 0.0
        act0 = act_b - _link_act(st, ec, u[extra] / st.g[ec])[0]
    on &= ~free
    bc = best_col[on]
    why = ""
    for rnd in range(1, ROUNDS + 1):
        fixed = ~free
        if rnd > 1:
            on = fixed & (best > 0)
            x0 = np.zeros(sf.num_cols)
            bc = best_col[on]
            x0[bc] = u[on] / st.g[bc]
            act0 = matvec(st.A, x0)[st.link]
        x, act = x0, act0
        idx = np.flatnonzero(free)
        lp, cols = _small_lp(sf, st, c, idx, act)
        got = small(lp)
        if got is None:
            why = f"the LP of {idx.size} free blocks was not solved optimally"
            if free.all():
                return None, why
            more = min(B, 2 * idx.size)
            free[np.argpartition(margin, more - 1)[:more] if more < B else slice(None)] = True
            continue
        x[cols] = got[0]
        p_new = got[1][idx.size:]
        red_new, ratio, best_new = _ratios(st, c, p_new)
        ok, primal, bound, viol, y, d = _certify(sf, st, sign, x, p_new, red_new, best_new, feas_tol, gap_tol)
        if ok:
            return PriceAnswer(x=x, y=y, objective=primal, bound=bound, violation=viol, d=d,
                               free=int(idx.size), rounds=rnd), ""
        why = (f"certificate failed after {rnd} rounds (objective {primal:.12g}, bound {bound:.12g}, "
               f"violation {viol:.3g}, {idx.size} free blocks)")
        # complementary slackness: a fixed block's answer must be a best one under the new prices
        val = np.zeros(B)
        val[on] = ratio[bc]
        opt = np.maximum(best_new, 0.0)
        moved = fixed & (opt - val > 1e-12 * np.maximum(1.0, np.abs(opt)))
        if not moved.any():
            return None, why
        free |= moved
    return None, why
