"""The aggregated re-solve of a reduced LP whose one linking column has entries in the classes' rows, in class totals.

:mod:`policyopt.aggregate_totals` answers a count change without HiGHS where the multiplicities
enter only bounds. Max-min fairness's reduced LP is one column away from that: its epigraph
variable ``t`` (a linking column) has an entry in each class's epigraph row,
``a_g·x_g − t ≥ 0``. In the class totals ``y_g = m_g x_g`` that row reads
``a_g·y_g − m_g t ≥ 0``: the count is ``t``'s coefficient. So in the totals' LP

.. math::  \\max\\ c\\cdot y \\quad\\text{s.t.}\\quad A(m)\\, y - r = 0,\\quad
           lo \\odot s(m) \\le (y, r) \\le hi \\odot s(m)

(``s`` each variable's multiplicity, 1 for a linking one; ``r`` the rows' activities) the bounds are
linear in ``m̄ = (m, 1)`` as there, and the matrix changes in ``t``'s column only:
``A(m) = A(m₀) + (C (m − m₀)) e_tᵀ`` (``C`` each class row's unit entry of ``t``, in the column of
its class). A basis (columns of ``[A, −I]``) whose nonbasic variables sit at bounds solves its
basic columns on the rows ``K`` whose activities are nonbasic (a basic activity takes its row
alone), ``M(m) y_B = P m̄`` (``P``: the nonbasic bounds' right-hand side per unit multiplicity,
``t`` aside). Two cases:

* ``t`` basic, at position ``p`` of ``y_B`` (the max-min stage): ``M(m) = M₀ + u e_pᵀ`` with
  ``u = C_K (m − m₀)``, a rank-one change, so by Sherman–Morrison, with ``z = M₀⁻¹ P m̄`` and
  ``w = M₀⁻¹ C_K (m − m₀)``,

  .. math::  y_B = z - w\\, \\frac{z_p}{1 + w_p}, \\qquad
             \\pi_K = \\pi_0 - q\\, \\frac{(C_K^T \\pi_0)\\cdot(m - m_0)}{1 + w_p}

  (``π₀ = M₀⁻ᵀ c_B``, ``q = M₀⁻ᵀ e_p``); for the max-min stage ``c_B = e_p``, so ``π = π₀/(1 + w_p)``:
  the multipliers only scale, and the basis stays optimal while its point stays feasible;
* ``t`` nonbasic at its lower bound ``τ`` (the ``fill`` stage: ``t ≥ t*(1 − 10⁻⁹)``): ``M`` does
  not depend on ``m`` and ``t``'s column moves to the right-hand side,
  ``y_B = M₀⁻¹ (P m̄ − τ (C m + a_t^L))`` (``a_t^L`` its entries in other rows), ``π_K = M₀⁻ᵀ c_B``.

:class:`EpigraphTotals` keeps ``P``, ``C_K``, the sparse LU factors of ``M₀`` (SuperLU: ``M₀``
holds a few entries per column) and the multipliers' pieces of one basis, and answers new
multiplicities with two products of ``(|K| × G)`` matrices and one solve with the factors, no
HiGHS run, back in the reduced LP's own terms as :class:`~policyopt.aggregate_totals.ClassTotals` does
(``x_j = y_j / m_g``, a class row's activity divided by ``m_g``, its multiplier times ``m_g``). The
answer is refused unless it is certified on the reduced LP: every column and row activity
(recomputed, ``A(m) y``) within its bound to 1e-9, and the Lagrangian bound of its multipliers,
``Σ_j pick(D_j lo_j, D_j hi_j)`` over every column and row (``D`` the reduced LP's reduced costs
``m_g d_j``, ``d = c − A(m)ᵀπ``, and row multipliers), equal to the objective to 1e-9 relative —
computed from the answer itself, not assumed from the basis, so round-off or a basis no longer
optimal (a reduced cost's sign flipped) can only refuse it.

The ``fill`` stage's basis is usually the max-min stage's with ``t`` replaced by one column ``q``
(one simplex step): ``M = M₀(m₀) + (a_q − a_t(m₀))_K e_pᵀ`` does not depend on ``m``, and its
solves are ``M₀``'s factors with one more Sherman–Morrison correction
(:meth:`EpigraphTotals.swapped`), so the second stage's totals need no factorization of their own.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import scipy.sparse as sp

from . import standard_form

__all__ = ["Cross", "EpigraphLP", "EpigraphStages", "EpigraphTotals", "cross_column"]

#: multipliers or reduced costs below this on an infinite bound count as zero (as in the certificate)
_ZERO_TOL = 1e-12

#: in an answer's place of the row multipliers where they are not asked for
_NO_DUALS = np.zeros(0)
_NO_DUALS.flags.writeable = False

#: the one linking column's entries in the classes' rows: the column, the entries' positions in
#: the CSC data, their rows, their rows' classes, their values (the reduced LP's: per unit count)
Cross = tuple[int, np.ndarray, np.ndarray, np.ndarray, np.ndarray]


def cross_column(row_group: np.ndarray, col_group: np.ndarray, A: Any, ent_col: np.ndarray) -> Cross | None:
    """The one linking column (class ``-1``) with entries in classes' rows, and those entries
    (:data:`Cross`), or ``None`` where no linking column or more than one has such entries."""
    pos = ((row_group.take(A.indices) >= 0) & (col_group.take(ent_col) < 0)).nonzero()[0]
    if pos.size == 0:
        return None
    col = int(ent_col[pos[0]])
    if np.count_nonzero(ent_col.take(pos) != col):
        return None
    rows = A.indices.take(pos).astype(np.int64)
    return col, pos, rows, row_group.take(rows), A.data.take(pos).copy()


try:
    from scipy.sparse.linalg._dsolve._superlu import gstrf as _gstrf
except ImportError:  # another scipy layout: the public splu
    _gstrf = None

#: SuperLU's options as ``splu`` passes them by default (``None``: SuperLU's own default)
_LU_OPTIONS = {"DiagPivotThresh": None, "ColPerm": None, "PanelSize": None, "Relax": None}


def _factor(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, k: int) -> Any:
    """SuperLU's factors of the ``k × k`` matrix given by CSC arrays in canonical form (rows sorted
    within each column, no duplicates; ``indices``, ``indptr`` of C ``int``), or ``None`` if it is
    singular. SuperLU's kernel is called on the arrays themselves where scipy exposes it (the same
    call and options as ``splu``, without building a sparse matrix or checking its format again:
    on a fresh re-solve those checks cost about as much as the factorization of ~90 × 90); else
    (or where that private call takes other arguments, as in older scipy) ``splu``."""
    global _gstrf
    try:
        if _gstrf is not None:
            try:
                return _gstrf(k, data.size, data, indices, indptr, csc_construct_func=sp.csc_matrix,
                              ilu=False, options=dict(_LU_OPTIONS))
            except TypeError:  # (a scipy whose private call takes other arguments: the public one from now on)
                _gstrf = None
        from scipy.sparse.linalg import splu

        M = standard_form.csc_of_arrays(data, indices, indptr, (k, k))
        M.has_canonical_format = True  # (rows sorted within each column, no duplicates: splu checks it)
        return splu(M)
    except RuntimeError:  # (singular)
        return None


def _entries(indptr: np.ndarray, cols: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions in a CSC matrix's arrays of the entries of the columns ``cols`` (in order), and
    each one's index in ``cols``."""
    cnt = indptr.take(cols + 1) - indptr.take(cols)
    col = np.repeat(np.arange(cols.size), cnt)
    first = np.cumsum(cnt) - cnt  # (each column's first entry among the selected)
    return np.arange(col.size) - first.take(col) + indptr.take(cols).take(col), col


class EpigraphLP:
    """What every basis's totals share, built once per reduced LP: its CSC arrays with each class
    column's linking entries per unit count (``B_g``, not ``m_g B_g``) and ``t``'s class-row entries
    per unit count (as the reduced LP's), each column's then row's class (``G``: linking), the
    compiled unit bounds (``t``'s lower: ``-inf``, each answer gives its own), and ``t``'s entries in
    the other rows."""

    def __init__(self, A: Any, lin_pos: np.ndarray, lin_unit: np.ndarray, cross: Cross, grp: np.ndarray, G: int,
                 bounds: tuple[np.ndarray, ...]) -> None:
        self.m, self.n = A.shape
        self.indptr, self.indices = A.indptr, A.indices
        self.data = A.data.copy()
        self.data[lin_pos] = lin_unit
        self.cross = cross
        self.t = cross[0]
        self.grp = grp
        self.G = G
        self.lo = np.concatenate([bounds[0], bounds[2]])
        self.hi = np.concatenate([bounds[1], bounds[3]])
        self.lo[self.t] = -np.inf
        a, b = self.indptr[self.t], self.indptr[self.t + 1]
        self.aL = np.zeros(self.m)  # t's entries outside the classes' rows
        self.aL[self.indices[a:b]] = self.data[a:b]
        self.aL[cross[2]] = 0.0
        self.fits = standard_form._csc_matvec is not None and self.indptr.dtype == self.indices.dtype


class EpigraphTotals:
    """One basis of the class totals' LP with the column ``t`` of :data:`Cross`, answered for other
    multiplicities (module docstring). Built by :meth:`take` from a basis of the reduced LP, or by
    :meth:`swapped` from another's with ``t`` swapped for one column."""

    def __init__(self, lp: EpigraphLP, c: np.ndarray, basis: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                 t_basic: bool, solver: tuple[Any, np.ndarray, np.ndarray, Any],
                 maps: tuple[np.ndarray, np.ndarray, np.ndarray],
                 duals: tuple[np.ndarray, np.ndarray, float, np.ndarray], sense: str, offset: float,
                 at0: np.ndarray, k_of: np.ndarray) -> None:
        self.lp, self.t = lp, lp.t
        self.c, self.c_t = c, float(c[lp.t])  # costs per unit count
        #: basic variables by position (as given); each variable's kind (the Basis's); the basic
        #: columns in the order of y_B; the nonbasic variables' unit values (t's and basic ones 0)
        self.var, self.kind, self.bcols, self.vnb = basis
        self.t_basic = t_basic
        #: SuperLU of M₀ (at the counts m₀), the rows K, m₀, and a column swap of M₀ or None:
        #: (position p, M₀⁻¹ u, 1 + (M₀⁻¹ u)_p) for M = M₀ + u e_pᵀ
        self.lu, self.K, self.m0, self.swap = solver
        self.p = int((self.bcols == lp.t).nonzero()[0][0]) if t_basic else -1  # t's position in y_B
        self.P, self.CK, self.aLK = maps  # right-hand side per unit count; C's rows K; t's other entries there
        #: multipliers at m₀ (all rows), the bound's terms per unit count, t's reduced cost's pieces
        self.pi, self.beta, self.t_pi, self.g0 = duals
        self.is_max = sense == "max"
        self.hi_t = float(lp.hi[lp.t])
        self.offset = offset
        #: the totals' entries (its own array, at the counts m₀ when taken; t's class-row entries
        #: rewritten per answer); each row's position in K (-1: not in K)
        self.data, self.k_of = at0, k_of
        self.mbar = np.ones(self.beta.size)
        self.rhs = np.empty((2, self.bcols.size))
        self.answers = 0

    @staticmethod
    def _kinds(lp: EpigraphLP, basis: Any) -> tuple[np.ndarray, np.ndarray, bool] | None:
        """``basis``'s kinds, its nonbasic variables' unit values (0: basic, ``t``) and whether ``t``
        is basic; ``None`` where a nonbasic variable is free or at an infinite bound, or ``t`` is
        nonbasic but not at its lower bound. A row's logical ``−a_i x`` (HiGHS's) at its lower bound
        ``−u_i`` (kind 0) has the activity ``u_i``, at ``−l_i`` (kind 1) ``l_i``."""
        kind, n = basis.kind, lp.n
        if kind.size != n + lp.m:
            return None
        at_hi = kind == 1
        at_hi[n:] = kind[n:] == 0
        vnb = np.where(at_hi, lp.hi, lp.lo)
        isb = kind < 0
        vnb[isb] = 0.0
        t_basic = bool(isb[lp.t])
        if not t_basic:
            if kind[lp.t] != 0:
                return None
            vnb[lp.t] = 0.0  # (t's value is the answer's: its lower bound then)
        if not np.isfinite(vnb).all():  # (a free nonbasic variable: its bounds are infinite)
            return None
        return kind, vnb, t_basic

    @classmethod
    def take(cls, lp: EpigraphLP, c: np.ndarray, mult: np.ndarray, basis: Any, sense: str, offset: float
             ) -> "EpigraphTotals | None":
        """The totals of ``basis`` (a :class:`~policyopt.aggregate_basis.Basis`: its basic variables
        by position, ``j < n`` column ``j``, ``n + i`` row ``i``'s logical, and the bound each
        nonbasic one is at) in the reduced LP of multiplicities ``mult`` (all ``> 0``: the caller
        sees to it), for the costs ``c`` per unit count (``t``'s its own). ``None`` where a nonbasic
        variable is free or at an infinite bound, ``t`` is nonbasic but not at its lower bound, ``t``
        is basic under other costs than its own, or ``M₀`` is singular."""
        got = cls._kinds(lp, basis)
        if got is None or not lp.fits:
            return None
        kind, vnb, t_basic = got
        if t_basic and (np.count_nonzero(c) != 1 or c[lp.t] == 0.0):
            return None  # (t basic: only the max-min stage's costs, t's alone, scale the multipliers)
        m, n = lp.m, lp.n
        _, pos, rows, rgrp, val = lp.cross
        isb = kind < 0
        bcols = isb[:n].nonzero()[0]
        K = (~isb[n:]).nonzero()[0]
        if K.size != bcols.size:
            return None
        k_of = np.full(m, -1, np.int64)
        k_of[K] = np.arange(K.size)
        m0 = mult.astype(np.float64)
        at0 = lp.data.copy()  # the totals' entries at the counts m₀ (t's: m_g times the unit one)
        at0[pos] = val * m0.take(rgrp)
        kr = k_of.take(rows)
        inK = (kr >= 0).nonzero()[0]
        CK = np.zeros((K.size, lp.G))  # C's rows K: t's entry in a class row per unit count of its class
        CK[kr.take(inK), rgrp.take(inK)] = val.take(inK)
        # M₀ = the rows K of the basic columns at m₀, sparse (a few entries per column), factored by SuperLU
        ent, col = _entries(lp.indptr, bcols)
        kk = k_of.take(lp.indices.take(ent))
        keep = (kk >= 0).nonzero()[0]
        Mptr = np.zeros(bcols.size + 1, np.intc)
        np.cumsum(np.bincount(col.take(keep), minlength=bcols.size), out=Mptr[1:])
        lu = _factor(at0.take(ent.take(keep)), kk.take(keep).astype(np.intc), Mptr, K.size)
        if lu is None:
            return None
        P = cls._rhs(lp, at0, vnb, K, k_of)
        pi = np.zeros(m)
        pi[K] = lu.solve(c.take(bcols), trans="T")
        return cls._finish(lp, c, (basis.var, kind, bcols, vnb), t_basic, (lu, K, m0, None), (P, CK), at0, k_of,
                           pi, sense, offset)

    @staticmethod
    def _rhs(lp: EpigraphLP, at0: np.ndarray, vnb: np.ndarray, K: np.ndarray, k_of: np.ndarray) -> np.ndarray:
        """``P``: the rows K's right-hand side per unit count of each class (nonbasic columns at a
        nonzero bound, ``t`` aside: its value is the answer's; nonbasic activities of the rows K)."""
        n, G1 = lp.n, lp.G + 1
        nz = vnb[:n].nonzero()[0]
        if nz.size:
            ent, col = _entries(lp.indptr, nz)
            kk = k_of.take(lp.indices.take(ent))
            keep = (kk >= 0).nonzero()[0]
            cn = nz.take(col.take(keep))
            P = np.bincount(kk.take(keep) * G1 + lp.grp.take(cn), weights=-at0.take(ent.take(keep)) * vnb.take(cn),
                            minlength=K.size * G1).astype(np.float64, copy=False).reshape(K.size, G1)
        else:
            P = np.zeros((K.size, G1))
        P[np.arange(K.size), lp.grp.take(n + K)] += vnb.take(n + K)
        return P

    @classmethod
    def _finish(cls, lp: EpigraphLP, c: np.ndarray, basis: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
                t_basic: bool, solver: tuple[Any, np.ndarray, np.ndarray, Any], maps: tuple[np.ndarray, np.ndarray],
                at0: np.ndarray, k_of: np.ndarray, pi: np.ndarray, sense: str, offset: float
                ) -> "EpigraphTotals | None":
        """The totals from their pieces: the reduced costs at the counts m₀ (``at0`` the totals'
        entries there) and the Lagrangian bound's terms per unit count, ``β`` (the bound at ``m`` is
        ``β·m̄``, times ``1/(1 + w_p)`` with ``t`` basic, ``t``'s own term aside: it moves with ``m``).
        ``at0`` becomes the totals' own array; ``k_of``: each row's position in K (-1: none)."""
        m, n = lp.m, lp.n
        K = solver[1]
        d = np.zeros(n)
        standard_form._csr_matvec(n, m, lp.indptr, lp.indices, at0, pi, d)
        D = np.concatenate([c - d, pi])
        # pick(D lo, D hi): D times the upper bound where D > 0 for a maximization (the lower where
        # D < 0), 0 where D = 0 (an infinite bound there gives no term)
        term = np.zeros(D.size)
        np.multiply(D, np.where((D > 0.0) == (sense == "max"), lp.hi, lp.lo), out=term, where=D != 0.0)
        term[lp.t] = 0.0
        bad = ~np.isfinite(term)
        if np.count_nonzero(bad & (np.abs(D) > _ZERO_TOL)):
            return None  # (a multiplier on an infinite side: no finite bound from this basis)
        term[bad] = 0.0
        beta = np.bincount(lp.grp, weights=term, minlength=lp.G + 1)
        if not (np.isfinite(pi).all() and np.isfinite(beta).all()):
            return None
        piK = pi.take(K)
        aLK = lp.aL.take(K)
        P, CK = maps
        return cls(lp, c, basis, t_basic, solver, (P, CK, aLK), (pi, beta, float(aLK @ piK), CK.T @ piK),
                   sense, offset, at0, k_of)

    def swapped(self, basis: Any, c: np.ndarray, sense: str, offset: float) -> "EpigraphTotals | None":
        """The totals of ``basis``, which is this one's (``t`` basic) with ``t`` nonbasic at its lower
        bound and one variable ``q`` basic in its place — a column, or a row's activity (its column
        of ``[A, −I]`` is ``−e_i``: the row leaves the nonbasic rows' right-hand side and its activity
        is solved for at ``t``'s position) — every other variable as here, for the costs ``c`` per
        unit count: ``M = M₀ + u e_pᵀ``, ``u = (a_q − a_t(m₀))_K``, solved on ``M₀``'s factors by
        Sherman–Morrison (module docstring); ``None`` where ``basis`` is not such a basis or
        ``1 + (M₀⁻¹u)_p`` is about 0."""
        lp = self.lp
        if not self.t_basic or self.swap is not None or basis.kind.size != self.kind.size:
            return None
        diff = (basis.kind != self.kind).nonzero()[0]
        if diff.size != 2:
            return None
        q = int(diff[0] if diff[1] == lp.t else diff[1])
        if q == lp.t or basis.kind[q] >= 0 or basis.kind[lp.t] != 0:
            return None
        p, n = self.p, lp.n
        K, m0, k_of = self.K, self.m0, self.k_of
        aq = np.zeros(K.size)  # q's column of [A, −I] in the rows K (a class column's: no count in it)
        if q < n:
            a, b = lp.indptr[q], lp.indptr[q + 1]
            kq = k_of.take(lp.indices[a:b])
            keep = (kq >= 0).nonzero()[0]
            aq[kq.take(keep)] = lp.data[a:b].take(keep)
        else:  # (a row's activity r_i, now basic: its column −e_i; its row was one of K)
            aq[k_of[q - n]] = -1.0
        u = aq - (self.CK @ m0 + self.aLK)  # (a_q − a_t(m₀))_K
        w = self.lu.solve(u)
        den = 1.0 + float(w[p])
        if not (abs(den) > 1e-9 and math.isfinite(den)):
            return None
        bcols = self.bcols.copy()  # (y_B's variables; a row's activity among them is recomputed as A y)
        bcols[p] = q
        vnb, P = self.vnb, self.P
        if vnb[q] != 0.0:  # (q left the right-hand side: its term there removed, in copies)
            vnb, P = vnb.copy(), P.copy()
            if q < n:
                P[:, lp.grp[q]] += aq * vnb[q]
            else:
                P[k_of[q - n], lp.grp[q]] -= vnb[q]
            vnb[q] = 0.0
        at0 = self.data.copy()
        _, pos, rows, rgrp, val = lp.cross
        at0[pos] = val * m0.take(rgrp)
        # Mᵀ π_K = c_B: M₀⁻ᵀ c_B corrected by the swap (Sherman–Morrison on the transpose)
        rhs = np.zeros((K.size, 2), order="F")  # (c_B and e_p: one solve with two right-hand sides)
        isc = (bcols < n).nonzero()[0]  # (a row's activity among y_B: cost 0)
        rhs[isc, 0] = c.take(bcols.take(isc))
        rhs[p, 1] = 1.0
        both = self.lu.solve(rhs, trans="T")
        pi0, qv = both[:, 0], both[:, 1]
        pi = np.zeros(lp.m)
        pi[K] = pi0 - qv * (float(u @ pi0) / den)
        if q >= n:
            pi[q - n] = 0.0  # (a basic row's multiplier: 0 by the basis, not its round-off)
        return self._finish(lp, c, (basis.var, basis.kind, bcols, vnb), False, (self.lu, K, m0, (p, w, den)),
                            (P, self.CK), at0, k_of, pi, sense, offset)

    def answer(self, mult: np.ndarray, t_lower: float, tol: float = 1e-9, duals: bool = True
               ) -> tuple[np.ndarray, np.ndarray, float, float, float] | None:
        """The reduced LP's point and row multipliers for the class multiplicities ``mult`` (all
        ``> 0``) with ``t``'s lower bound ``t_lower`` (``-inf``: free), with its objective, bound and
        violation (``duals=False``: the multipliers not formed, an empty array in their place; the
        bound is the same), or ``None`` unless certified: the point (every column, and every row's activity
        recomputed as ``A(m) y``) within its bounds to ``tol``, and the Lagrangian bound of the
        multipliers equal to the objective to ``tol`` relative. The multipliers are ``π₀`` (``t``
        nonbasic) or ``π₀/(1 + w_p)`` (``t`` basic, ``1 + w_p > 0``): every reduced cost but ``t``'s
        is the one at ``m₀`` scaled alike, so the bound is ``β·m̄`` scaled alike plus ``t``'s term,
        ``pick(d_t lo_t, d_t hi_t)`` with ``d_t = c_t − a_t(m)·π`` (0 for ``t`` basic, up to
        round-off: refused beyond 1e-12)."""
        lp = self.lp
        mb = self.mbar
        mb[:-1] = mult
        s = mb.take(lp.grp)
        n, t = lp.n, lp.t
        v = self.vnb * s
        if self.t_basic:
            rhs = self.rhs  # (2 × |K|: its transpose is the solve's Fortran-ordered right-hand sides)
            np.dot(self.P, mb, out=rhs[0])
            np.dot(self.CK, mb[:-1] - self.m0, out=rhs[1])
            zw = self.lu.solve(rhs.T)
            z, w = zw[:, 0], zw[:, 1]
            den = 1.0 + float(w[self.p])
            if not (den > 0.0 and math.isfinite(den)):
                return None
            z -= w * (float(z[self.p]) / den)
            v[self.bcols] = z
            scale = 1.0 / den
            tau = float(z[self.p])
        else:
            if not math.isfinite(t_lower):
                return None
            z = self.lu.solve(self.P @ mb - t_lower * (self.CK @ mb[:-1] + self.aLK))
            if self.swap is not None:  # (M = M₀ + u e_pᵀ)
                p, w, den = self.swap
                z -= w * (float(z[p]) / den)
            v[self.bcols] = z
            v[t] = tau = t_lower
            scale = 1.0
        # t's reduced cost and its term of the bound
        d_t = self.c_t - (self.t_pi + float(np.dot(self.g0, mb[:-1]))) * scale
        t_term = d_t * (self.hi_t if (d_t > 0.0) == self.is_max else t_lower)  # (pick(d_t lo_t, d_t hi_t))
        if not math.isfinite(t_term):
            if abs(d_t) > _ZERO_TOL:
                return None
            t_term = 0.0
        y = v[:n]
        data = self.data
        _, pos, _, rgrp, val = lp.cross
        data[pos] = val * mb.take(rgrp)  # t's entries: m_g times the unit one
        act = v[n:]
        act.fill(0.0)
        standard_form._csc_matvec(lp.m, n, lp.indptr, lp.indices, data, y, act)
        primal = (tau * self.c_t if self.t_basic else float(np.dot(self.c, y))) + self.offset
        v /= s  # the reduced LP's columns and row activities
        viol = max(float((lp.lo - v).max()), float((v - lp.hi).max()),
                   float(t_lower - v[t]) if t_lower > -np.inf else 0.0, 0.0)
        bound = float(np.dot(self.beta, mb)) * scale + t_term + self.offset
        if not (viol <= tol and abs(bound - primal) <= tol * max(1.0, abs(primal))):
            return None
        self.answers += 1
        return v[:n], (self.pi * (s[n:] * scale) if duals else _NO_DUALS), primal, bound, viol


class EpigraphStages:
    """The class totals of :class:`~policyopt.aggregate_resolve.AggregateModel`'s two stages (a
    mixin; the state it reads is the model's, see its constructor)."""

    # (the model's state these methods use; set by AggregateModel.__init__)
    cross: Cross | None
    n_dead: int
    small: Any
    base: tuple[np.ndarray, ...]
    mult: np.ndarray
    col_group: np.ndarray
    row_group: np.ndarray
    lin_pos: np.ndarray
    lin_unit: np.ndarray
    epi: "EpigraphTotals | None"
    epi_fill: tuple[EpigraphTotals, np.ndarray, np.ndarray] | None
    _epi_lp: EpigraphLP | None

    def epigraph_lp(self) -> EpigraphLP | None:
        """The reduced LP's :class:`EpigraphLP` (built once), or ``None`` without a :data:`Cross`."""
        if self._epi_lp is None and self.cross is not None:
            G = self.mult.size
            grp = np.concatenate([np.where(self.col_group >= 0, self.col_group, G),
                                  np.where(self.row_group >= 0, self.row_group, G)])
            self._epi_lp = EpigraphLP(self.small.sf.A, self.lin_pos, self.lin_unit, self.cross, grp, G,
                                      self.base[1:])
        return self._epi_lp

    def epigraph_totals(self, basis: Any, c: np.ndarray | None = None) -> EpigraphTotals | None:
        """The class totals (:class:`EpigraphTotals`) of ``basis`` (a
        :class:`~policyopt.aggregate_basis.Basis` of the reduced LP) under the compiled bounds (``t``'s
        lower: each answer's) and the costs per unit count ``c`` (the compiled ones if not given);
        ``None`` where it is not taken."""
        lp = self.epigraph_lp()
        if lp is None or self.n_dead:
            return None
        sf = self.small.sf
        return EpigraphTotals.take(lp, self.base[0] if c is None else c, self.mult, basis, sf.sense, float(sf.offset))

    def take_fill_totals(self, basis: Any, cols: np.ndarray, costs: np.ndarray, unit: np.ndarray | None = None
                         ) -> None:
        """Keep the class totals of a second stage's ``basis``: the reduced LP's costs ``costs`` of
        columns ``cols`` (``m_g`` times the unit cost of a class column, ``unit`` where the caller
        keeps it: then ``cols`` and ``unit`` are kept as they are), ``t`` at its lower bound; from the
        first stage's totals with ``t`` swapped for one column where ``basis`` is such
        (:meth:`EpigraphTotals.swapped`), else taken afresh."""
        if self.n_dead:
            return
        if unit is None:
            s = np.append(self.mult, 1).astype(np.float64).take(self.col_group.take(cols))
            unit, cols = costs / s, cols.copy()
        c = np.zeros(self.small.sf.num_cols)
        c[cols] = unit
        first, sf = self.epi, self.small.sf
        epi = None if first is None else first.swapped(basis, c, sf.sense, float(sf.offset))
        if epi is None:
            epi = self.epigraph_totals(basis, c)
        self.epi_fill = None if epi is None else (epi, cols, unit)

    def fill_totals_answer(self, cols: np.ndarray, costs: np.ndarray, t_low: float,
                           unit: np.ndarray | None = None) -> Any:
        """A second stage (costs ``costs`` of the reduced LP's columns ``cols``, ``t ≥ t_low``)
        answered from the class totals of its last basis (:meth:`take_fill_totals`) when these are
        the same costs per unit count (to 1e-13 relative; the same kept arrays ``cols`` and ``unit``
        where the caller gives its unit costs): its :class:`~policyopt.solvers.highs_steps.Steps`,
        or ``None``."""
        from policyopt.solvers import highs_steps

        kept = self.epi_fill
        if kept is None:
            return None
        epi, kc, ku = kept
        if not (unit is ku and cols is kc):
            if kc.size != cols.size or not np.array_equal(kc, cols):
                return None
            s = np.append(self.mult, 1).astype(np.float64).take(self.col_group.take(cols))
            if np.count_nonzero(np.abs(ku * s - costs) > 1e-13 * np.abs(costs)):
                return None
        got = epi.answer(self.mult, t_low, duals=False)
        if got is None:
            self.epi_fill = None  # (its basis no longer optimal: steps on the kept factorization)
            return None
        return highs_steps.Steps(got[0], 0, got[2] - float(self.small.sf.offset), epi.var)

