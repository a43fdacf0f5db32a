"""The aggregated re-solve's reduced LP answered from HiGHS's factorization of one of its bases.

After an arrival or a completion the aggregated reduced LP (:mod:`policyopt.aggregate_resolve`)
differs from the one HiGHS last solved only in the multiplicities ``m_g`` of a few classes: the
costs ``m_g c_g``, the linking rows' entries ``m_g B_g`` and, for a class emptied or refilled, its
bounds. The optimal basis of the last solve usually stays optimal (a class's share moves, its
basis does not), and checking that needs no HiGHS run (a run costs its fixed work, ~0.1 ms on
~170 rows even with nothing to do, plus pushing the changes in). :class:`KeptFactor` keeps what
HiGHS's last simplex run left — its basis ``B₀`` and the factorization of it, over the entries the
run saw — and :class:`Basis` solves with another basis matrix ``B``: the same or a few other basic
variables (max-min fairness's ``fill`` stage ends a few simplex steps from the first stage's
basis), over the *current* entries. Only the ``K`` linking rows' entries change with ``m_g``, so
``B − B₀ = P Δ + U_S E_Sᵀ``: ``P`` the linking rows of the identity and ``Δ`` (``K × m``) every
basic variable's change in them; ``U_S`` the other rows' change at the positions ``S`` whose basic
variable is another, ``E_S`` those positions. With ``U = [P, U_S]``, ``Vᵀ = [Δ; E_Sᵀ]`` (rank
``r = K + |S|``) and ``C = I_r + Vᵀ B₀⁻¹ U``, by the Sherman–Morrison–Woodbury identity

.. math::  B^{-1} z = z_0 - B_0^{-1} U\\, C^{-1} V^T z_0, \\quad z_0 = B_0^{-1} z; \\qquad
           B^{-T} c = B_0^{-T} \\big(c - V C^{-T} (B_0^{-1} U)^T c\\big)

with ``B₀⁻¹ P`` (``K`` solves) kept with the factor and ``B₀⁻¹ U_S`` with the basis (the other
rows' entries do not change): one solve with ``B₀`` each way (HiGHS's ``getBasisSolve`` /
``getBasisTransposeSolve``, ~4–7 µs each; the transpose's correction is applied to its right-hand
side through the kept ``B₀⁻¹ U``, so it needs no second solve). In HiGHS's convention the variables
are the columns and the rows' logicals ``s = −A x`` (bounds ``[−u, −l]``, basis column ``e_i``);
the nonbasic ones stay at the bound they were at in the basis's last point, the basic ones follow,
``B v_B = −N v_N``, and the multipliers solve ``Bᵀ y = c_B`` (:meth:`Basis.point`). The caller
certifies that pair on the reduced LP (:func:`policyopt.aggregate_resolve.certify`: feasible to
1e-9, Lagrangian bound equal to the objective), so round-off or a basis that is no longer optimal
can only make it refused (then HiGHS runs). A :class:`Basis` also serves
:func:`policyopt.solvers.highs_steps.reoptimize` (primal simplex steps from it).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from .standard_form import StandardForm, any_nonzero, matvec

__all__ = ["Basis", "FactorLost", "KeptFactor", "bounds_of"]

#: a nonbasic variable further than this from both its bounds (relative to the bound's magnitude)
#: is not at a bound: such a point's basis is not kept
_AT_BOUND = 1e-9


class FactorLost(RuntimeError):
    """HiGHS no longer holds the factorization (a basis was set, or the model changed there)."""


def bounds_of(sf: StandardForm, col_lower: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Bounds of the columns (``col_lower`` instead of ``sf``'s where given) and of the rows'
    logicals ``s = −A x`` (HiGHS's convention)."""
    lo = sf.col_lower if col_lower is None else col_lower
    return np.concatenate([lo, -sf.row_upper]), np.concatenate([sf.col_upper, -sf.row_lower])


def _kinds(v: np.ndarray, lo: np.ndarray, hi: np.ndarray, var: np.ndarray) -> np.ndarray | None:
    """Per variable: ``-1`` basic (in ``var``), else ``0`` at its lower bound, ``1`` at its upper,
    ``2`` free at 0; ``None`` if a nonbasic value of ``v`` (finite) is at none of these (to
    :data:`_AT_BOUND` relative)."""
    dl, du = np.abs(v - lo), np.abs(hi - v)  # (inf at an infinite bound)
    kind = (du < dl).view(np.int8)
    free = np.isinf(dl) & np.isinf(du)
    off = np.minimum(dl, du) > _AT_BOUND * (1.0 + np.abs(v))
    off[free] = v[free] != 0.0  # (a free nonbasic variable sits at 0)
    off[var] = False
    if any_nonzero(off):
        return None
    kind[free] = 2
    kind[var] = -1
    return kind


def _adjugate3(C: list[list[float]]) -> list[list[float]] | None:
    """The inverse of a 3 × 3 matrix (lists of Python floats) by its adjugate; ``None`` if singular."""
    (a, b, c), (d, e, f), (g, h, i) = C
    co = (e * i - f * h, f * g - d * i, d * h - e * g)
    det = a * co[0] + b * co[1] + c * co[2]
    if not (det != 0.0 and math.isfinite(det)):
        return None
    w = 1.0 / det
    return [[co[0] * w, (c * h - b * i) * w, (b * f - c * e) * w],
            [co[1] * w, (a * i - c * g) * w, (c * d - a * f) * w],
            [co[2] * w, (b * g - a * h) * w, (a * e - b * d) * w]]


def _bordered(C: list[list[float]]) -> list[list[float]] | None:
    """The inverse of an ``r × r`` matrix, ``3 < r``, from its leading 3 × 3 block's adjugate, one
    row and column at a time by the Schur complement ``s = d − cᵀA⁻¹b``
    (``[[A, b], [cᵀ, d]]⁻¹ = [[A⁻¹ + A⁻¹b cᵀA⁻¹/s, −A⁻¹b/s], [−cᵀA⁻¹/s, 1/s]]``); ``None`` where a
    leading block is singular or a complement small against its row's entries (then Gauss–Jordan
    with pivoting decides)."""
    inv = _adjugate3([row[:3] for row in C[:3]])
    if inv is None:
        return None
    for k in range(3, len(C)):
        b = [C[q][k] for q in range(k)]
        c = C[k][:k]
        if k == 3:  # (unrolled: the usual size, K = 3 linking rows and one more position)
            (i0, i1, i2) = inv
            b0, b1, b2 = b
            c0, c1, c2 = c
            Ab = [i0[0] * b0 + i0[1] * b1 + i0[2] * b2, i1[0] * b0 + i1[1] * b1 + i1[2] * b2,
                  i2[0] * b0 + i2[1] * b1 + i2[2] * b2]
            cA = [c0 * i0[0] + c1 * i1[0] + c2 * i2[0], c0 * i0[1] + c1 * i1[1] + c2 * i2[1],
                  c0 * i0[2] + c1 * i1[2] + c2 * i2[2]]
            s = C[3][3] - (c0 * Ab[0] + c1 * Ab[1] + c2 * Ab[2])
        else:
            Ab = [math.fsum(x * y for x, y in zip(row, b)) for row in inv]  # A⁻¹ b
            cA = [math.fsum(c[q] * inv[q][j] for q in range(k)) for j in range(k)]  # cᵀ A⁻¹
            s = C[k][k] - math.fsum(x * y for x, y in zip(c, Ab))
        if not (abs(s) > 1e-8 * max(1.0, max(map(abs, C[k]))) and math.isfinite(s)):
            return None
        w = 1.0 / s
        cw = [v * w for v in cA]
        inv = [[v + a * u for v, u in zip(row, cw)] + [-a * w] for row, a in zip(inv, Ab)]
        inv.append([-v for v in cw] + [w])
    return inv


def _inverse(C: np.ndarray) -> np.ndarray | None:
    """``C⁻¹`` of a small square matrix, in Python floats (3 × 3 by its adjugate; up to 8 × 8 by
    bordering that adjugate (:func:`_bordered`), else — a leading block singular or a small pivot —
    by Gauss–Jordan elimination with partial pivoting; numpy's ``inv`` costs ~45 µs on its first
    call after other work, its wrapper and LAPACK out of the cache), else numpy's; ``None`` if ``C``
    is singular or the inverse not finite."""
    r = C.shape[0]
    if r == 3:
        inv = _adjugate3(C.tolist())
        if inv is None:
            return None
        out = np.array(inv)
    elif r <= 8:
        rows = C.tolist()
        got = _bordered(rows) if r > 3 else None
        if got is not None:
            out = np.array(got)
        else:
            M = [row + [1.0 if j == k else 0.0 for j in range(r)] for k, row in enumerate(rows)]
            for k in range(r):
                p = max(range(k, r), key=lambda q: abs(M[q][k]))
                piv = M[p][k]
                if piv == 0.0 or not math.isfinite(piv):
                    return None
                M[k], M[p] = M[p], M[k]
                rowk = M[k] = [v / piv for v in M[k]]
                for q in range(r):
                    f = M[q][k]
                    if q != k and f != 0.0:
                        M[q] = [u - f * v for u, v in zip(M[q], rowk)]
            out = np.array([row[r:] for row in M])
    else:
        try:
            out = np.linalg.inv(C)
        except np.linalg.LinAlgError:
            return None
    return out if np.isfinite(out).all() else None


class KeptFactor:
    """HiGHS's factorization of the reduced LP's basis ``B₀`` at its last run, with the linking
    rows' entries it saw (module docstring). Valid while the model has had no other run
    (:attr:`runs`) and no basis was set: the owner drops it then."""

    def __init__(self, model: Any, var0: np.ndarray, lin_pos: np.ndarray, link_rows: np.ndarray,
                 ent_col: np.ndarray) -> None:
        sf = model.sf
        self.model, self.h = model, model._h
        self._ok = model._hs.HighsStatus.kOk
        self.runs = model.runs
        n, m = sf.num_cols, sf.num_rows
        self.n, self.m = n, m
        self.var0 = var0  # B₀'s basic variable at each position (row i's logical: n + i)
        self.link_rows = link_rows
        K = link_rows.size
        self.k_of = np.full(m, -1, np.int64)
        self.k_of[link_rows] = np.arange(K)
        # the linking rows' entries of every variable (K × (n+m), dense): now, and as factored
        A = sf.A
        kr = self.k_of[A.indices]
        sel = (kr >= 0).nonzero()[0]
        L = np.zeros((K, n + m))
        L[kr[sel], ent_col[sel]] = A.data[sel]
        L[np.arange(K), n + link_rows] = 1.0
        self.L = L
        self.lin_pos = lin_pos
        self.lin_k, self.lin_col = self.k_of[A.indices[lin_pos]], ent_col[lin_pos]
        self.L0 = L.copy()
        self.L0v = self.L0.take(var0, axis=1)  # B₀'s linking rows
        self.stale = False  # linking entries changed in the standard form since L was read
        self.version = 0  # times L was read again
        W = np.empty((m, K))
        e = np.zeros(m)
        for k, r in enumerate(link_rows.tolist()):  # B₀⁻¹ P
            e[r] = 1.0
            W[:, k] = self.solve0(e)
            e[r] = 0.0
        self.W = W
        self.base: Basis | None = None  # B₀ itself with the kinds of its last point (:meth:`take`)

    @classmethod
    def take(cls, model: Any, x: np.ndarray, lin_pos: np.ndarray, link_rows: np.ndarray,
             ent_col: np.ndarray | None = None) -> "KeptFactor | None":
        """The factor HiGHS holds after ``model``'s last run, whose point is ``x`` (columns), with
        :attr:`base` its basis, or ``None`` when HiGHS holds none
        (:func:`policyopt.solvers.highs_steps.factored`) or a nonbasic variable of ``x`` is not at
        one of its bounds. ``lin_pos``: the positions in ``model.sf.A.data`` of every entry that
        may change later, all in ``link_rows``; ``ent_col``: each entry's column, if known."""
        from policyopt.solvers import highs_steps

        sf = model.sf
        n, m = sf.num_cols, sf.num_rows
        bv = highs_steps.basic_variables(model) if x.shape == (n,) else None
        if bv is None:
            return None
        var = np.where(bv >= 0, bv, n - 1 - bv)
        if bv.size != m or np.count_nonzero(np.bincount(var, minlength=n + m) > 1):
            return None
        lo, hi = bounds_of(sf)
        kind = _kinds(np.concatenate([x, -matvec(sf.A, x)]), lo, hi, var)
        k_of = np.full(m, -1, np.int64)
        k_of[link_rows] = 0
        if kind is None or any_nonzero(k_of[sf.A.indices[lin_pos]] < 0):
            return None
        if ent_col is None:
            ent_col = np.repeat(np.arange(n), np.diff(sf.A.indptr))
        try:
            fac = cls(model, var, lin_pos, link_rows, ent_col)
            fac.base = Basis(fac, var, kind)
        except FactorLost:
            return None
        return fac

    def solve0(self, rhs: np.ndarray) -> np.ndarray:
        """``B₀⁻¹ rhs`` (HiGHS; :exc:`FactorLost` if HiGHS holds no factorization)."""
        ok, z = self.h.getBasisSolve(rhs)
        if ok != self._ok:
            raise FactorLost("getBasisSolve")
        return np.array(z, np.float64)

    def tsolve0(self, rhs: np.ndarray) -> np.ndarray:
        """``B₀⁻ᵀ rhs`` (HiGHS; :exc:`FactorLost` if HiGHS holds no factorization)."""
        ok, y = self.h.getBasisTransposeSolve(rhs)
        if ok != self._ok:
            raise FactorLost("getBasisTransposeSolve")
        return np.array(y, np.float64)

    def read_entries(self) -> None:
        """The linking entries from the standard form, when they changed (:attr:`stale`)."""
        if self.stale:
            self.L[self.lin_k, self.lin_col] = self.model.sf.A.data[self.lin_pos]
            self.stale = False
            self.version += 1

    def basis(self, var: np.ndarray, x: np.ndarray, col_lower: np.ndarray | None = None) -> "Basis | None":
        """The basis of basic variables ``var`` (by position) whose point is ``x`` (columns; bounds:
        the model's, ``col_lower`` for the columns where given), or ``None`` where a nonbasic
        variable of ``x`` is not at a bound."""
        sf = self.model.sf
        lo, hi = bounds_of(sf, col_lower)
        kind = _kinds(np.concatenate([x, -matvec(sf.A, x)]), lo, hi, var)
        if kind is None:
            return None
        try:
            return Basis(self, var.copy(), kind)
        except FactorLost:
            return None


class Basis:
    """A basis of the reduced LP (basic variable by position, nonbasic variables' bounds) solved
    through a :class:`KeptFactor` with the current entries (module docstring)."""

    def __init__(self, factor: KeptFactor, var: np.ndarray, kind: np.ndarray) -> None:
        self.factor = factor
        self.var, self.kind = var, kind
        self._at_lo, self._at_hi = (kind == 0).nonzero()[0], (kind == 1).nonzero()[0]
        n = factor.n
        is_col = var < n
        self._cpos, self._ccol = is_col.nonzero()[0], var[is_col]  # positions of basic columns, and they
        f = factor
        S = (var != f.var0).nonzero()[0]
        self.S = S
        # the other rows' change at the positions S (their entries do not change), and B₀⁻¹ of it
        sf, n, m = f.model.sf, f.n, f.m
        A = sf.A
        U_S = np.zeros((m, S.size))
        for j, p in enumerate(S.tolist()):
            for v, sign in ((int(var[p]), 1.0), (int(f.var0[p]), -1.0)):
                if v < n:
                    a, b = A.indptr[v], A.indptr[v + 1]
                    U_S[A.indices[a:b], j] += sign * A.data[a:b]
                else:
                    U_S[v - n, j] += sign
        U_S[f.link_rows] = 0.0
        self.U_S = U_S
        self.BU = np.concatenate([f.W, np.column_stack([f.solve0(U_S[:, j]) for j in range(S.size)])], axis=1) \
            if S.size else f.W
        self._D: np.ndarray | None = None  # Δ, then C⁻¹ (None: B = B₀)
        self._Cinv: np.ndarray | None = None
        self._formed = (-1, False)  # the factor's entries' version C was formed for, and whether it is regular

    def form(self) -> bool:
        """``Δ`` and ``C⁻¹`` for the current entries (once per change of them); ``False`` if ``C`` is
        singular (so is ``B``: the basis is not taken)."""
        f = self.factor
        f.read_entries()
        if self._formed[0] == f.version:
            return self._formed[1]
        ok = self._form()
        self._formed = (f.version, ok)
        return ok

    def _form(self) -> bool:
        f = self.factor
        D = f.L.take(self.var, axis=1)
        D -= f.L0v
        S = self.S
        if S.size == 0 and not any_nonzero(D):
            self._D = self._Cinv = None
            return True
        C = D @ self.BU if S.size == 0 else np.concatenate([D @ self.BU, self.BU[S]], axis=0)
        C.ravel()[::C.shape[0] + 1] += 1.0  # (C + I: C is a new contiguous array)
        Cinv = _inverse(C)
        if Cinv is None:
            return False
        self._D, self._Cinv = D, Cinv
        return True

    def basic_variables(self) -> np.ndarray:
        """The basic variables by position, in HiGHS's encoding (``−1 − i``: row ``i``'s logical)."""
        n = self.factor.n
        return np.where(self.var < n, self.var, n - 1 - self.var)

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``B⁻¹ rhs`` with the current entries (after :meth:`form`)."""
        z = self.factor.solve0(rhs)
        if self._Cinv is not None and self._D is not None:
            Vz = self._D @ z if self.S.size == 0 else np.concatenate([self._D @ z, z[self.S]])
            z -= self.BU @ (self._Cinv @ Vz)
        return z

    def transpose_solve(self, rhs: np.ndarray) -> np.ndarray:
        """``B⁻ᵀ rhs`` with the current entries (after :meth:`form`)."""
        f = self.factor
        if self._Cinv is None or self._D is None:
            return f.tsolve0(rhs)
        # B⁻ᵀ = B₀⁻ᵀ − B₀⁻ᵀ V C⁻ᵀ (B₀⁻¹U)ᵀ: one solve with B₀ᵀ of rhs − V C⁻ᵀ (B₀⁻¹U)ᵀ rhs
        u = self._Cinv.T @ (self.BU.T @ rhs)
        K = self._D.shape[0]
        w = rhs - self._D.T @ u[:K]
        if self.S.size:
            w[self.S] -= u[K:]
        return f.tsolve0(w)

    def point(self, c: np.ndarray | None = None, col_lower: np.ndarray | None = None
              ) -> tuple[np.ndarray, np.ndarray] | None:
        """This basis's point (columns) and row multipliers on the model's current standard form
        (its costs ``c`` and column lower bounds ``col_lower`` where given instead): nonbasic
        variables at the bound they were at, ``B v_B = −N v_N``, ``Bᵀ y = c_B``; ``None`` where
        such a bound is infinite now or ``C`` is singular. Not certified."""
        f = self.factor
        sf = f.model.sf
        n = f.n
        lo, hi = bounds_of(sf, col_lower)
        v = np.zeros(lo.size)
        v[self._at_lo] = lo[self._at_lo]
        v[self._at_hi] = hi[self._at_hi]
        if np.count_nonzero(np.isinf(v)) or not self.form():
            return None
        rhs = -matvec(sf.A, v[:n])
        rhs -= v[n:]
        v[self.var] = self.solve(rhs)
        cB = np.zeros(self.var.size)
        cB[self._cpos] = (sf.c if c is None else c)[self._ccol]
        return v[:n], self.transpose_solve(cB)
