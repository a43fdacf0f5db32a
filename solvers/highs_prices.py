"""HiGHS models' side of the linking-price path (module ``prices``): the multipliers of the last
optimal answer kept over the current rows, the shape detected once per matrix, and the path itself
(its small LPs on one HiGHS object per thread)."""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from policyopt.result import SolveResult, Status, Timings
from policyopt.solver_api import SolverOptions
from policyopt.standard_form import StandardForm

from . import prices
from .highs_support import solve_small_lp


class PricePath:
    """Mixed into :class:`~policyopt.solvers.highs.HighsModel`."""

    sf: StandardForm
    options: SolverOptions
    return_duals: bool
    _passed: bool
    _h: Any
    _hs: Any
    _last: Any

    def _init_prices(self) -> None:
        # the row multipliers of the last optimal answer over the current rows (``None``: unknown;
        # ``_y_highs``: HiGHS's solution is that answer, read only when needed), and the price
        # structure of ``sf.A``
        self._y: np.ndarray | None = None
        self._y_highs = False
        self._gub: prices.GubStructure | None = None
        self._gub_of: Any = None
        # the path failed twice on this model, or the LP is hinted degenerate (a max-min epigraph
        # LP: its column t links every block): not tried (a shape that does not fit is known per
        # matrix only: a small LP's linking rows may not stand out until more jobs arrive)
        self._gub_never = bool(self.options.degenerate)
        self._gub_fails = 0
        self._y_seeded = False  # set_dual_start gave the prices (tried at any size)

    def _answer_duals(self) -> np.ndarray | None:
        """The row multipliers (scaled rows) of the last optimal answer on the current rows, or
        ``None``."""
        if self._gub_never:
            return None
        if self._y is not None or not self._y_highs or not self._passed:
            return self._y
        sol = self._h.getSolution()
        if not sol.dual_valid:
            return None
        y = np.asarray(sol.row_dual, dtype=np.float64)
        if y.size != self.sf.num_rows:
            return None
        self._y, self._y_highs = y, False  # (read once)
        return y

    def answer_duals(self) -> np.ndarray | None:
        y = self._answer_duals()
        return None if y is None else self.sf.unscale_duals(y)

    def set_dual_start(self, row_duals: np.ndarray) -> bool:
        """Start the price path from ``row_duals``; whether it applies (then a failed price path
        solves the whole LP cold)."""
        y = np.asarray(row_duals, np.float64)
        if y.shape != (self.sf.num_rows,):
            raise ValueError(f"row_duals has shape {y.shape}, the model has {self.sf.num_rows} rows")
        if self.options.algorithm != "auto" or self._gub_structure() is None:
            return False
        self._y, self._y_highs = y / self.sf.row_scale, False
        self._y_seeded = True
        return True

    def _gub_structure(self) -> prices.GubStructure | None:
        """The price structure of the current matrix (detected once per matrix), or ``None``."""
        if self._gub_never:
            return None
        if self._gub_of is not self.sf.A:
            self._gub, self._gub_of = prices.detect(self.sf), self.sf.A
        return self._gub

    def prefers_rebuild(self) -> bool:
        """True when the last answer's multipliers are known and the linking-price path is not
        known to fail on this LP's shape (module ``prices``): a fresh build started from them
        (:meth:`set_dual_start`, where the shape is checked in full) costs less than a splice
        (max-sum throughput at 2,048 jobs: build and compile about 1.2 ms; an update in place about
        2 ms). The caller guesses the shape from its model; a wrong guess costs one cold solve."""
        if (self.options.algorithm != "auto" or self._gub_never or self.sf.num_cols < prices.PRICE_MIN_COLS
                or not (self._y is not None or self._y_highs)):
            return False
        if self._gub_of is self.sf.A:
            fits = self._gub is not None
        elif self.sf.nnz <= prices.PLAUSIBLE_MAX_NNZ:
            fits = prices.plausible(self.sf)  # (small LPs: where the linking-row rule may not split)
        else:
            fits = True  # the caller's guess from its model's layout stands
        return fits and self._answer_duals() is not None

    def _wants_prices(self) -> bool:
        """Whether the next solve tries the price path: from an explicit dual start, or from the
        last answer on a model of at least :data:`prices.PRICE_MIN_COLS` columns."""
        return self._y_seeded or (self.sf.num_cols >= prices.PRICE_MIN_COLS
                                  and (self._y is not None or self._y_highs))

    def _solve_prices(self) -> tuple[SolveResult | None, str]:
        """The linking-price path (module ``prices``) from the last answer's multipliers: the
        certified result, or ``None`` and why not (then HiGHS solves the whole LP)."""
        t0 = time.perf_counter()
        self._y_seeded = False
        y = self._answer_duals()
        if y is None or y.size != self.sf.num_rows:
            return None, ""
        st = self._gub_structure()
        if st is None:
            self._y, self._y_highs = None, False
            return None, ""
        hs = self._hs
        ans, why = prices.solve(self.sf, st, y[st.link], lambda lp: solve_small_lp(hs, lp))
        if ans is None:
            self._y, self._y_highs = None, False
            self._gub_fails += 1
            self._gub_never = self._gub_fails >= 2
            return None, f"linking prices: {why}; whole LP solved by HiGHS"
        self._gub_fails = 0
        self._y, self._y_highs = ans.y, False
        self._last = None
        at = "the same prices" if ans.pivots == 0 else f"prices after {ans.pivots} dual simplex step(s)"
        how = (f"{at}, {ans.free} tied blocks sharing their rows" if ans.rounds == 0 else
               f"{ans.free} of {st.B} blocks free, {ans.rounds} round(s)")
        res = SolveResult(status=Status.OPTIMAL, objective=ans.objective, x=ans.x, solver="highs",
                          options={"algorithm": "auto", "fast_path": f"linking prices: {how}; dual bound "
                                   f"{ans.bound:.15g}, violation {ans.violation:.3g}",
                                   "time_limit": self.options.time_limit, **self.options.extra},
                          message="Optimal", iterations=0)
        if self.return_duals:
            res.row_duals, res.col_duals = self.sf.unscale_duals(ans.y), ans.d
        res.timings = Timings(solve=time.perf_counter() - t0)
        return res, ""
