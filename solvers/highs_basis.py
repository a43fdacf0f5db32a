"""HiGHS models' bases and in-place job-set updates: a basis read, kept and set back (as HiGHS's own
object, without a per-status conversion), repaired after deletions, and :meth:`BasisMixin.splice`,
which deletes a few blocks of columns and rows and appends new ones in the standard form and in
HiGHS (``deleteCols``/``deleteRows``, ``addCols``, ``addRows``). Mixed into
:class:`~policyopt.solvers.highs.HighsModel`."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from policyopt.standard_form import StandardForm

from .highs_support import _check, _splice_csc

#: the primal feasibility tolerance of the fast path's small LPs and of spliced models
_TIGHT_PRIMAL = 1e-10


class BasisMixin:
    """Mixed into :class:`~policyopt.solvers.highs.HighsModel` (which provides the attributes below)."""

    sf: StandardForm
    options: Any
    _h: Any
    _hs: Any
    _passed: bool
    _warm: bool
    _last: Any
    _y: np.ndarray | None
    _y_highs: bool
    _spliced: bool
    _structure: Any
    _agg: Any
    _small: Any
    _stage0: Any
    _gub_of: Any

    runs: int

    if TYPE_CHECKING:
        @property
        def h(self) -> Any: ...  # (HighsModel's)

        def _run(self) -> Any: ...  # (HighsModel's)

        def _set(self, option: str, value: Any) -> None: ...  # (HighsModel's)

        def _answer_duals(self) -> np.ndarray | None: ...  # (PricePath's)

    def get_basis(self) -> tuple[np.ndarray, np.ndarray] | None:
        if not self._warm:
            return None
        b = self.h.getBasis()
        if not b.valid:
            return None
        return np.array(b.col_status, np.int8), np.array(b.row_status, np.int8)

    def has_basis(self) -> bool:
        return self._warm

    def basis_reader(self) -> Any:
        """A copy of HiGHS's current basis (a few µs), converted to arrays only when called."""
        if not self._warm:
            return lambda: None
        b = self.h.getBasis()
        if not b.valid:
            return lambda: None
        return lambda: (np.array(b.col_status, np.int8), np.array(b.row_status, np.int8))

    def set_basis(self, col_status: np.ndarray, row_status: np.ndarray) -> None:
        self._last = None  # another basis: its point is unknown here
        self._y, self._y_highs = self._answer_duals(), False  # (setting a basis drops HiGHS's solution)
        S = self._hs.HighsBasisStatus
        codes = [S.kLower, S.kBasic, S.kUpper, S.kZero, S.kNonbasic]
        b = self._hs.HighsBasis()
        b.col_status = [codes[v] for v in np.asarray(col_status, np.int64).tolist()]
        b.row_status = [codes[v] for v in np.asarray(row_status, np.int64).tolist()]
        b.alien = True  # HiGHS completes a basis with too many or too few basic variables
        _check(self.h.setBasis(b), "setBasis")
        self._warm = True

    def holds_model(self) -> bool:
        """Whether HiGHS holds the whole LP (it was solved whole at least once; while the structured
        fast path answers, only the standard form is kept)."""
        return self._passed

    def basis_object(self) -> Any:
        """HiGHS's current basis as its own object (a copy inside HiGHS, no per-status conversion),
        or ``None`` without one; :meth:`restore_basis` sets it back."""
        if not self._warm or not self._passed:
            return None
        b = self._h.getBasis()
        return b if b.valid else None

    def restore_basis(self, basis: Any) -> None:
        """Set a basis taken by :meth:`basis_object` on a model of the same size (see
        :meth:`_set_own_basis`)."""
        self._last = None
        self._y, self._y_highs = self._answer_duals(), False  # (setting a basis drops HiGHS's solution)
        self._set_own_basis(basis)
        self._warm = True

    def _set_own_basis(self, basis: Any) -> None:
        """Set a basis whose statuses HiGHS gave (``getBasis``) as a complete one: HiGHS factors it
        at the next run. Only a basis with the wrong number of basic variables is passed as
        *alien* (HiGHS completes it, factoring it at once: ~5 ms at 4,099 rows)."""
        basis.alien = False
        if self._h.setBasis(basis) == self._hs.HighsStatus.kError:  # not one basic variable per row
            basis.alien = True
            _check(self._h.setBasis(basis), "setBasis")

    def basis_valid(self) -> bool:
        """Whether HiGHS holds a valid basis (deleting basic columns or rows can invalidate it)."""
        return self._passed and self._warm and bool(self._h.getBasis().valid)

    def repair_basis(self) -> None:
        """After :meth:`splice` dropped HiGHS's basis as invalid (a deleted basic column or
        nonbasic row): the statuses HiGHS kept through the deletions and additions (kept entries
        as they were, new columns nonbasic, new rows basic) set back as a basis, without reading
        them into Python."""
        self._set_own_basis(self.h.getBasis())
        self._warm = True

    def aggregation(self, take: bool = False) -> tuple[Any, Any] | None:
        """The block aggregation of the current matrix and its loaded reduced LP, kept by the
        structured fast path (``(BlockAggregation, HighsModel)``), or ``None``; ``take``: this model
        lets go of them (a later structured solve aggregates afresh), for a caller that keeps using
        the reduced LP on its own."""
        agg, small = self._agg, self._small
        if agg is None or small is None or agg.structure is None or agg.structure.A is not self.sf.A:
            return None
        if take:
            self._agg = self._small = None
            self._stage0 = None
        return agg, small

    def first_stage(self) -> tuple[Any, np.ndarray] | None:
        """The basic variables (HiGHS's ``getBasicVariables``: by position, ``−1 − i`` row ``i``'s
        logical) and point the loaded reduced LP's first run ended with,
        when a later stage (other costs or bounds: max-min fairness's ``fill``) re-solved it since;
        else ``None``. Read before :meth:`aggregation` with ``take``."""
        return self._stage0 if self._small is not None else None

    def set_entries(self, pos: np.ndarray, vals: np.ndarray) -> None:
        """Set existing entries of the (scaled) matrix, at positions ``pos`` of ``sf.A.data`` (CSC),
        to ``vals``, in the standard form and in HiGHS (``changeCoeff``; a 0 drops HiGHS's entry and
        keeps an explicit 0 here). The sparsity pattern is unchanged; the kept point is dropped."""
        pos = np.asarray(pos, np.int64)
        vals = np.asarray(vals, np.float64)
        A = self.sf.A
        A.data[pos] = vals
        self._last = None
        self._y, self._y_highs = None, False
        self._structure = self._agg = self._small = None
        self._gub_of = None  # (the price path's shape is read again)
        if not self._passed:
            return
        rows = A.indices[pos].tolist()
        cols = (np.searchsorted(A.indptr, pos, side="right") - 1).tolist()
        change = self._h.changeCoeff
        for r, c, v in zip(rows, cols, vals.tolist()):
            _check(change(r, c, v), "changeCoeff")

    def run_point(self) -> tuple[np.ndarray | None, np.ndarray | None]:
        """One HiGHS run of the loaded model from its current basis, read lean for a caller that
        certifies the answer itself: the point and the multipliers of the rows as passed (scaled),
        or ``(None, None)`` unless HiGHS ends optimal with valid values (no result object, column
        duals or info values are read)."""
        self.runs += 1
        self._y, self._y_highs, self._last = None, False, None
        self._run()
        self._warm = True
        h = self._h
        if h.getModelStatus() != self._hs.HighsModelStatus.kOptimal:
            return None, None
        sol = h.getSolution()
        if not (sol.value_valid and sol.dual_valid):
            return None, None
        return np.asarray(sol.col_value, np.float64), np.asarray(sol.row_dual, np.float64)

    @staticmethod
    def statuses_of(basis: Any) -> tuple[np.ndarray, np.ndarray]:
        """``(col_status, row_status)`` arrays (HiGHS's codes) of a :meth:`basis_object`
        (~0.2 µs per column and row: pybind's per-status enums)."""
        return (np.array([v.value for v in basis.col_status], np.int8),
                np.array([v.value for v in basis.row_status], np.int8))

    def splice(self, s: Any) -> None:
        """Delete the columns and rows outside ``s.keep_cols`` / ``s.keep_rows`` and append new ones
        (a :class:`policyopt.incremental.Splice`), in the standard form and, once passed, in HiGHS
        (``deleteCols``/``deleteRows``, then ``addCols`` with the new columns' entries in kept rows,
        then ``addRows`` with the new rows' entries). The block structure of the fast path and the
        last solution are dropped; HiGHS's basis is set by the caller (``set_basis``)."""

        sf = self.sf
        kc, kr = np.asarray(s.keep_cols, bool), np.asarray(s.keep_rows, bool)
        nkc, nkr = np.count_nonzero(kc), np.count_nonzero(kr)
        y = self._answer_duals()
        # the last answer's multipliers on the kept rows (0 on new ones): the next solve's prices
        self._y = None if y is None else np.concatenate([y[kr], np.zeros(s.row_lower.size)])
        self._y_highs = False
        n_c, n_r = nkc + s.c.size, nkr + s.row_lower.size
        sf.A = _splice_csc(sf.A, kc, kr, s.rows, s.cols, s.vals, n_r, n_c)
        sf.c = np.concatenate([sf.c[kc], s.c])
        sf.col_lower = np.concatenate([sf.col_lower[kc], s.col_lower])
        sf.col_upper = np.concatenate([sf.col_upper[kc], s.col_upper])
        sf.integrality = np.concatenate([sf.integrality[kc], np.zeros(s.c.size, sf.integrality.dtype)])
        sf.integrality.flags.writeable = False  # (as compiled: StandardForm.is_mip is kept)
        sf.row_lower = np.concatenate([sf.row_lower[kr], s.row_lower])
        sf.row_upper = np.concatenate([sf.row_upper[kr], s.row_upper])
        sf.row_scale = np.concatenate([sf.row_scale[kr], s.row_scale])
        sf.col_blocks, sf.row_blocks = {}, {}  # named ranges no longer hold
        self._last = None
        self._structure = self._agg = self._small = None
        if not self._spliced and "primal_feasibility_tolerance" not in self.options.extra:
            # a warm dual simplex from a repaired basis leaves rows off by up to HiGHS's default 1e-7
            # (17.00000027 GPUs of 17 seen); spliced models are held to 1e-10, as the fast path's LPs
            self._set("primal_feasibility_tolerance", _TIGHT_PRIMAL)
        if not self._spliced and "simplex_dual_edge_weight_strategy" not in self.options.extra:
            # Devex pricing: a re-solve takes a handful of iterations, and dual steepest edge first
            # computes a weight per row of the new basis (one solve each: 4,099 rows at 2,048 max-min
            # jobs, 72 ms of the warm run's 73 ms for 6 iterations; Devex 12 ms)
            self._set("simplex_dual_edge_weight_strategy", 1)
        self._spliced = True
        if not self._passed:
            return
        h, inf = self._h, self._hs.kHighsInf
        dc, dr = (~kc).nonzero()[0].astype(np.int32), (~kr).nonzero()[0].astype(np.int32)
        if dc.size:
            _check(h.deleteCols(dc.size, dc), "deleteCols")
        if dr.size:
            _check(h.deleteRows(dr.size, dr), "deleteRows")
        if s.c.size:
            new_c = s.cols >= nkc
            old_r = new_c & (s.rows < nkr)  # the new columns' entries in kept rows
            o = np.lexsort((s.rows[old_r], s.cols[old_r]))
            cc, rr, vv = s.cols[old_r][o] - nkc, s.rows[old_r][o], s.vals[old_r][o]
            starts = np.searchsorted(cc, np.arange(s.c.size)).astype(np.int32)
            lo = np.where(np.isfinite(s.col_lower), s.col_lower, -inf)
            hi = np.where(np.isfinite(s.col_upper), s.col_upper, inf)
            _check(h.addCols(s.c.size, np.asarray(s.c, np.float64), lo, hi, int(rr.size), starts,
                             rr.astype(np.int32), np.ascontiguousarray(vv, np.float64)), "addCols")
        if s.row_lower.size:
            new_r = s.rows >= nkr
            o = np.lexsort((s.cols[new_r], s.rows[new_r]))
            rr, cc, vv = s.rows[new_r][o] - nkr, s.cols[new_r][o], s.vals[new_r][o]
            starts = np.searchsorted(rr, np.arange(s.row_lower.size)).astype(np.int32)
            lo = np.where(np.isfinite(s.row_lower), s.row_lower, -inf)
            hi = np.where(np.isfinite(s.row_upper), s.row_upper, inf)
            _check(h.addRows(s.row_lower.size, lo, hi, int(cc.size), starts, cc.astype(np.int32),
                             np.ascontiguousarray(vv, np.float64)), "addRows")
