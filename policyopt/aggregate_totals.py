"""The aggregated re-solve of a reduced LP whose multiplicities enter only its bounds, in class totals.

In the reduced LP of :mod:`policyopt.aggregate_resolve` a class ``g``'s columns ``x_g`` carry the
costs ``m_g c_g`` and the linking rows' entries ``m_g B_g``; its own rows ``R_g x_g ∈ [l_g, u_g]``
are its representative's. Where no linking column has an entry in a class's rows (max-sum
throughput: a job's rows hold its own columns only), the class totals ``y_g = m_g x_g`` give

.. math::  \\max\\ c_L z + \\sum_g c_g y_g \\quad\\text{s.t.}\\quad R_g y_g \\in m_g [l_g, u_g],\\quad
           m_g\\, lo_g \\le y_g \\le m_g\\, hi_g,\\quad \\sum_g B_g y_g + E z \\in [L, U]

whose matrix ``A`` and costs ``c`` do not depend on the multiplicities: a count change moves only
bounds, each linearly in ``m̄ = (m, 1)`` (a class's bounds ``m_g`` times its unit bounds, a linking
column's or row's its own). With the rows' activities ``r = A y`` as variables (``A y − r = 0``), a
basis ``B`` (columns of ``[A, −I]``) whose nonbasic variables sit at bounds, ``v_N = F m̄``, has
basic values ``v_B = −B⁻¹ N F m̄``: every variable is linear in ``m̄``, ``v = V m̄``. Its
multipliers ``π = B⁻ᵀ c_B`` and reduced costs ``d = c − [A, −I]ᵀ π`` do not depend on ``m`` at all,
and for ``m > 0`` neither do their signs, so the Lagrangian bound
``Σ_j pick(d_j lo_j, d_j hi_j)`` (``pick`` = max for a maximization; ``lo``, ``hi`` the bounds of
every variable, rows' activities included) is linear too, ``β·m̄`` with
``β_g = Σ_{j of class g} pick(d_j lo⁰_j, d_j hi⁰_j)`` over the unit bounds.

:class:`ClassTotals` keeps ``V``, ``β`` and ``π`` of one basis (dense: on Gavel's 2,048-job
workload 86 rows, 356 columns, 84 = classes + 1) and answers new multiplicities with a dozen numpy
calls and no HiGHS run, back in the reduced LP's own terms: ``x_j = v_j / m_g`` (a class's
column), each row's activity ``r_i / m_g`` (a class's row: the reduced LP's row is the total's
divided by ``m_g``), the row multipliers ``π_i m_g`` (a row divided by ``m_g`` has its multiplier
times ``m_g``; a linking row's stays), so that the reduced LP's reduced costs are ``m_g d_j`` and its
Lagrangian bound is ``β·m̄``, its objective ``c·y``. The answer is refused unless it is certified:
every column and every row activity (recomputed, ``A y``) within its bound to 1e-9 and the bound
equal to the objective to 1e-9 relative. The basis stays optimal as long as its point stays
feasible (dual feasibility does not depend on ``m``): after a count change of a few jobs it
usually does; otherwise the caller runs HiGHS from that basis and takes the new one.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from . import standard_form

__all__ = ["ClassTotals", "bounds_only", "unit_matrix"]

#: reduced costs below this on an infinite bound count as zero (as in the certificate)
_ZERO_TOL = 1e-12
#: a nonbasic variable further than this from both its bounds (relative) is not at a bound
_AT_BOUND = 1e-9


def bounds_only(row_group: np.ndarray, col_group: np.ndarray, rows: np.ndarray, ent_col: np.ndarray) -> bool:
    """Whether the multiplicities enter only the class totals' bounds: no linking column (class
    ``-1``) has an entry in a class's row (``rows``, ``ent_col``: each entry's row and column)."""
    return not np.count_nonzero((row_group.take(rows) >= 0) & (col_group.take(ent_col) < 0))


#: the class totals' matrix, dense and as CSC arrays (indptr, indices, data): :func:`unit_matrix`
Unit = tuple[np.ndarray, tuple[np.ndarray, np.ndarray, np.ndarray]]


def unit_matrix(A: Any, ent_col: np.ndarray, lin_pos: np.ndarray, lin_unit: np.ndarray) -> Unit:
    """The class totals' matrix: ``A`` (CSC) with each linking entry of a class column (positions
    ``lin_pos`` of ``A.data``) its unit value ``lin_unit`` (``B_g``, not ``m_g B_g``), dense and as
    ``A``'s CSC arrays ``(indptr, indices, data)`` (no sparse matrix object: scipy's copy of one
    costs ~20 µs)."""
    data = A.data.copy()
    data[lin_pos] = lin_unit
    dense = np.zeros(A.shape)
    dense[A.indices, ent_col] = data
    return dense, (A.indptr, A.indices, data)


class ClassTotals:
    """One basis of the class totals' LP, its point and bound linear in the multiplicities (module
    docstring). Built by :meth:`take` from a basis and an optimal point of the reduced LP."""

    def __init__(self, unit: Unit, c: np.ndarray, lo: np.ndarray, hi: np.ndarray, grp: np.ndarray,
                 bcols: np.ndarray, vnb: np.ndarray, V: np.ndarray, pi: np.ndarray, beta: np.ndarray,
                 offset: float) -> None:
        self.A, (indptr, indices, data) = unit  # (the totals' matrix, dense and CSC)
        self.c = c
        # the rows' activities by scipy's CSC kernel on the matrix's own arrays where it takes them
        kernel = standard_form._csc_matvec
        self._csc = (kernel, indptr, indices, data) if (kernel is not None and indptr.dtype == indices.dtype
                                                        and indptr.dtype in (np.int32, np.int64)) else None
        self.n = c.size
        self.lo, self.hi = lo, hi  # unit bounds of the columns, then the rows (the reduced LP's own)
        self.grp = grp  # each variable's class (G: a linking one)
        self.bcols, self.vnb, self.V = bcols, vnb, V  # basic columns; nonbasic unit values; V's basic rows
        self.pi, self.beta = pi, beta
        self.offset = offset
        self._mbar = np.ones(beta.size)
        self.answers = 0

    @classmethod
    def take(cls, unit: Unit, c: np.ndarray, bounds: tuple[np.ndarray, ...], grp: np.ndarray,
             G: int, basic: np.ndarray, x: np.ndarray, act: np.ndarray, sense: str, offset: float
             ) -> "ClassTotals | None":
        """The class totals of the basis ``basic`` (HiGHS's encoding: ``j ≥ 0`` column ``j``,
        ``−1 − i`` row ``i``'s logical) whose point in the reduced LP is ``x`` (columns), ``act``
        its rows' activities: ``unit`` the totals' matrix (:func:`unit_matrix`: dense, CSC), ``c`` the unit
        costs, ``bounds`` the unit bounds (columns' lower, upper, rows' lower, upper: the reduced
        LP's), ``grp`` each column's then each row's class (``G``, the number of classes: linking).
        ``None`` where the basis is not one (size, repeats), a nonbasic variable is not at one of
        its bounds, ``B`` is singular or the bound is not finite.

        Only the kernel of ``B`` is inverted: a basic row activity ``r_i`` takes row ``i`` alone
        (its column is ``−e_i``; its multiplier is 0), so the basic columns ``y_B`` solve the rows
        ``K`` whose activities are nonbasic, ``A_KB y_B = r_K − A_KN y_N`` (``|K|`` = the number of
        basic columns: 28 × 28 on Gavel's 2,048-job workload against 86 × 86), and
        ``π_K = A_KB⁻ᵀ c_B``."""
        A_unit = unit[0]
        m, n = A_unit.shape
        G1 = G + 1
        basic = np.asarray(basic, np.int64)
        var = np.where(basic >= 0, basic, n - 1 - basic)
        if var.size != m or np.count_nonzero(np.bincount(var, minlength=n + m) > 1):
            return None
        lo = np.concatenate([bounds[0], bounds[2]])
        hi = np.concatenate([bounds[1], bounds[3]])
        val = np.concatenate([x, act])
        # each nonbasic variable at its lower or upper unit bound (or free at 0); basic: 0
        dl, du = np.abs(val - lo), np.abs(hi - val)
        vnb = np.where(du < dl, hi, lo)
        free = np.isinf(vnb)
        vnb[free] = 0.0
        off = np.minimum(dl, du) > _AT_BOUND * (1.0 + np.abs(val))
        off[free] = val[free] != 0.0
        off[var] = False
        if np.count_nonzero(off):
            return None
        vnb[var] = 0.0
        bcols = np.sort(var[var < n])
        row_basic = np.zeros(m, bool)
        row_basic[var[var >= n] - n] = True
        K = (~row_basic).nonzero()[0]
        if K.size != bcols.size:
            return None
        AK = A_unit.take(K, axis=0)
        try:
            inv = np.linalg.inv(AK.take(bcols, axis=1)) if K.size else np.zeros((0, 0))
        except np.linalg.LinAlgError:
            return None
        # r_K − A_KN y_N per unit multiplicity of each class: the nonbasic columns at a nonzero bound
        # (a column basic has vnb 0), and the nonbasic activities of the rows K
        nz = vnb[:n].nonzero()[0]
        F = np.zeros((nz.size, G1))
        F[np.arange(nz.size), grp.take(nz)] = vnb.take(nz)
        P = -(AK.take(nz, axis=1) @ F)
        P[np.arange(K.size), grp.take(n + K)] += vnb.take(n + K)
        V = inv @ P
        pi = np.zeros(m)
        pi[K] = inv.T @ c.take(bcols)
        d = np.concatenate([c - A_unit.T @ pi, pi])  # (a row's activity: cost 0, column −e_i)
        pick = np.maximum if sense == "max" else np.minimum
        with np.errstate(invalid="ignore"):
            term = pick(d * lo, d * hi)
        bad = ~np.isfinite(term)
        if np.count_nonzero(bad & (np.abs(d) > _ZERO_TOL)):
            return None  # (a multiplier on an infinite side: no finite bound from this basis)
        term[bad] = 0.0
        beta = np.bincount(grp, weights=term, minlength=G1)
        if not (np.isfinite(V).all() and np.isfinite(beta).all()):
            return None
        return cls(unit, c, lo, hi, grp, bcols, vnb, V, pi, beta, offset)

    def answer(self, mult: np.ndarray, tol: float = 1e-9
               ) -> tuple[np.ndarray, np.ndarray, float, float, float] | None:
        """The reduced LP's point and row multipliers for the class multiplicities ``mult`` (all
        ``> 0``), with its objective, bound and violation, or ``None`` unless certified (module
        docstring: feasible to ``tol``, bound equal to the objective to ``tol`` relative)."""
        mb = self._mbar
        mb[:-1] = mult
        s = mb.take(self.grp)  # each variable's multiplicity (1: linking)
        n = self.n
        v = self.vnb * s
        v[self.bcols] = self.V @ mb
        y = v[:n]
        act = v[n:]  # (the rows' activities, from the columns)
        if self._csc is not None:
            act.fill(0.0)
            kernel, indptr, indices, data = self._csc
            kernel(act.size, n, indptr, indices, data, y, act)
        else:
            np.dot(self.A, y, out=act)
        primal = float(np.dot(self.c, y)) + self.offset
        v /= s  # the reduced LP's columns and row activities
        viol = max(float(np.max(self.lo - v)), float(np.max(v - self.hi)), 0.0)
        bound = float(np.dot(self.beta, mb)) + self.offset
        if not (viol <= tol and abs(bound - primal) <= tol * max(1.0, abs(primal))):
            return None
        self.answers += 1
        return v[:n], self.pi * s[n:], primal, bound, viol
