"""HiGHS through highspy: the whole model in one array ``passModel`` call; in-place updates.

With ``algorithm="auto"`` an LP started from row multipliers (a dual start, or a re-solved model's
last answer from ``prices.PRICE_MIN_COLS`` columns) whose shape has one own row per block and a few
linking rows goes first to the linking-price path (``prices``, via ``highs_prices``); then an LP
goes to the structured fast path (``blocks``: identical
per-job blocks aggregated, the small LP solved, the answer expanded and certified on the whole LP);
when it does not apply or its certificate fails, the whole LP is solved by the algorithm of
:func:`~policyopt.solver_api.auto_algorithm` (interior point cold on large LPs, simplex warm) and
the result's ``options["fast_path"]`` says why.

Every ``HighsStatus`` returned is checked: ``kError`` becomes :class:`SolverError` naming the call
(and the option, for ``setOptionValue``). Duals follow HiGHS: ``row_duals[i]`` is the sensitivity
of the optimal objective to row ``i``'s active bound (original row scale).

Bases (read, kept, set back, repaired) and in-place job-set updates (``splice``) are in
``highs_basis``; the linking-price path's side in ``highs_prices``.
"""
from __future__ import annotations

import math
import sys
import time
from typing import Any

import numpy as np

from policyopt.errors import SolverError
from policyopt.standard_form import all_nonzero
from policyopt.result import SolveResult, Status, Timings
from policyopt.solver_api import (
    PRIMAL_MAX_COLS,
    Feature,
    LoadedModel,
    Solver,
    SolverOptions,
    auto_algorithm,
    register_solver,
)
from policyopt.standard_form import StandardForm

from . import blocks, highs_steps
from .highs_basis import _TIGHT_PRIMAL, BasisMixin
from .highs_prices import PricePath
from .highs_support import (
    _acquire_highs,
    _check,
    _info_values,
    _k_error,
    _of_shape,
    objective_scale,
    _release_highs,
    _splice_csc,  # noqa: F401  (importable from here, as before the split)
    _status_map,
    run_threads,
    silence_banner,
)

_ALGORITHMS = {"auto": "choose", "simplex": "simplex", "ipm": "ipm", "pdlp": "pdlp", "primal": "simplex"}
#: HiGHS's simplex variants (``simplex_strategy``) for auto_algorithm's answers
_STRATEGY = {"simplex": 1, "primal": 4}
#: auto_algorithm's answers that run without presolve
_NO_PRESOLVE = ("primal",)
#: the iteration cap of an unperturbed warm primal simplex (see HighsModel._cap; use_warm_primal)
_UNPERTURBED_MIN_ITERATIONS = 1000
_UNPERTURBED_ITERATIONS_PER_DIM = 10
_UNPERTURBED_DUAL_ITERATIONS_PER_ROW = 1
#: the perturbation HiGHS's simplex variants apply (turned off by HighsModel._cap)
_PERTURBATION = {"primal": "primal_simplex_bound_perturbation_multiplier",
                 "simplex": "dual_simplex_cost_perturbation_multiplier"}
_FEAS_TOL = 1e-9


def _within(v: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """``lo ≤ v ≤ hi`` to :data:`_FEAS_TOL` (relative above 1). The tolerance is kept finite (an
    infinite one would meet an infinite bound as ``inf − inf``), so no floating-point state is
    switched per call."""
    tol = _FEAS_TOL * np.minimum(np.maximum(1.0, np.abs(v)), 1e300)
    return all_nonzero((v >= lo - tol) & (v <= hi + tol))




def _feasible_at_zero(sf: StandardForm) -> bool:
    """Whether ``x = 0`` meets every bound and row of ``sf`` (its slack basis is primal feasible)."""
    return bool(all_nonzero(sf.col_lower <= 0.0) and all_nonzero(sf.col_upper >= 0.0)
                and all_nonzero(sf.row_lower <= 0.0) and all_nonzero(sf.row_upper >= 0.0))


#: the aggregated LP is small: solve it to tight tolerances so the expanded point certifies to 1e-9,
#: without presolve (on the aggregated max-min LP at 2,048 jobs: 2.2 ms against 10–15 ms with it)
_TIGHT_TOLERANCES = {"primal_feasibility_tolerance": _TIGHT_PRIMAL, "dual_feasibility_tolerance": 1e-10}
_TIGHT = {**_TIGHT_TOLERANCES, "presolve": "off"}
#: most costs per ``changeColsCost`` call (:meth:`HighsModel.set_costs`)
_COST_CHUNK = 512


class HighsModel(PricePath, BasisMixin, LoadedModel):
    """A model held by a ``highspy.Highs`` object; updates go straight to HiGHS (warm re-solves)."""

    def __init__(self, sf: StandardForm, options: SolverOptions) -> None:
        import highspy

        super().__init__(sf, options)
        self._hs = highspy
        silence_banner()
        self._h = _acquire_highs(highspy)
        self._passed = False  # the model reaches HiGHS at its first use (not when the fast path answers)
        # a new or pooled object holds HiGHS's defaults: only other values are set (~5 µs a call)
        self._set("output_flag", bool(options.verbose))
        if _ALGORITHMS[options.algorithm] != "choose":
            self._set("solver", _ALGORITHMS[options.algorithm])
        # seconds per run: HiGHS compares its time_limit with the object's run time summed over all
        # its runs (clearModel and resetOptions keep it), so each run is given that sum + the limit
        limit = options.extra.get("time_limit", options.time_limit)
        self._time_limit = None if limit is None else float(limit)
        # the thread count is set at each run (run_threads: HiGHS's scheduler is per thread)
        asked = options.extra.get("threads", options.threads)
        self._asked_threads = None if asked is None else int(asked)
        self._threads = 0  # the object's ``threads`` option now (HiGHS's default; a pooled object reset)
        if self._asked_threads is not None:
            self._set("threads", self._asked_threads)
            self._threads = self._asked_threads
        if sf.is_mip:
            self._set("mip_rel_gap", float(options.mip_rel_gap))
        self._warm = False  # HiGHS holds a basis / solution from an earlier run
        self._try_structured = True  # until the fast path declines once
        self._presolve = True  # set_presolve(False) holds presolve off (resolve's cold check)
        # the last solution (x, scaled row activities) while every update since keeps it feasible:
        # then a warm re-solve goes by unperturbed primal simplex (auto_algorithm's ``feasible``)
        self._last: tuple[np.ndarray, Any] | None = None  # (x, row activities or HiGHS's solution: _last_rows)
        # the simplex variant ("primal", "simplex": dual) run without perturbation under an iteration
        # cap, or None (see _cap)
        self._capped: str | None = None
        self._cap_limit = 2**31 - 1  # the iteration limit set with it (sized by the model's rows and columns)
        self._warm_primal = False  # use_warm_primal's mode: every run capped unperturbed primal simplex
        self.runs = 0  # HiGHS runs so far (a kept basis is current while no run followed it)
        self._spliced = False  # updated in place (splice): re-solve options set
        self._max_infeasibility = 0.0  # of the last run's point (see _run_highs)
        #: whether results carry row and column duals (a model kept for in-place re-solves whose
        #: caller reads only the point turns it off: two vectors fewer to convert per run)
        self.return_duals = True
        # the fast path's state, kept across re-solves after cost/bound updates: the block structure
        # of the matrix (valid while ``sf.A`` is the same object; ``add_rows`` replaces it), the last
        # aggregation and the loaded reduced LP (re-solved warm when the groups are unchanged)
        self._structure: blocks.BlockStructure | None = None
        self._agg: blocks.BlockAggregation | None = None
        self._small: HighsModel | None = None
        #: the reduced LP's last point, and its first run's basic variables (HiGHS's encoding, by
        #: position) and point, taken when a later stage (new costs or bounds) re-solves it: an
        #: aggregated re-solve's start (:meth:`first_stage`)
        self._small_x: np.ndarray | None = None
        self._stage0: tuple[Any, np.ndarray] | None = None
        self._init_prices()
        for k, v in options.extra.items():
            if k != "threads":
                self._set(k, v)

    def __del__(self) -> None:
        h = self.__dict__.get("_h")
        if h is not None and sys is not None and not sys.is_finalizing():
            _release_highs(h, self.sf.num_cols)

    @property
    def h(self) -> Any:
        """The ``highspy.Highs`` object, holding the current model (passed on first access)."""
        if not self._passed:
            self._pass_model()
        return self._h

    def _pass_model(self) -> None:
        """The whole model in one array ``passModel`` call (the current standard form, in-place
        updates made so far included)."""
        highspy, sf = self._hs, self.sf
        inf = highspy.kHighsInf
        A = sf.A
        lo = np.where(np.isfinite(sf.col_lower), sf.col_lower, -inf)
        hi = np.where(np.isfinite(sf.col_upper), sf.col_upper, inf)
        rlo = np.where(np.isfinite(sf.row_lower), sf.row_lower, -inf)
        rhi = np.where(np.isfinite(sf.row_upper), sf.row_upper, inf)
        sense = highspy.ObjSense.kMaximize if sf.sense == "max" else highspy.ObjSense.kMinimize
        args = (sf.num_cols, sf.num_rows, int(A.nnz), int(highspy.MatrixFormat.kColwise), int(sense),
                float(sf.offset), np.ascontiguousarray(sf.c, np.float64), lo, hi, rlo, rhi,
                A.indptr[:-1].astype(np.int32, copy=False), A.indices.astype(np.int32, copy=False),
                np.ascontiguousarray(A.data, np.float64),
                sf.integrality.astype(np.int32))  # integrality must have num_col entries
        _check(self._h.passModel(*args), "passModel")
        self._passed = True
        scale = objective_scale(sf.c)
        if scale:
            self._set("user_objective_scale", scale)

    def _set(self, option: str, value: Any) -> None:
        status = self._h.setOptionValue(option, value)
        if status == _k_error():
            raise SolverError(f"HiGHS setOptionValue({option!r}, {value!r}) returned kError "
                              "(unknown option or invalid value)")

    # ------------------------------------------------------------------ in-place updates
    def set_costs(self, cols: np.ndarray, costs: np.ndarray) -> None:
        super().set_costs(cols, costs)
        if not self._passed:
            return
        cols = np.asarray(cols, np.int32)
        costs = np.asarray(costs, np.float64)
        # in pieces: HiGHS's time per entry grows with a call's size (7,626 costs, max-min at 2,048
        # jobs: ~0.33 ms in one call, ~0.14 ms in pieces of 512)
        for a in range(0, cols.size, _COST_CHUNK):
            b = min(a + _COST_CHUNK, cols.size)
            _check(self.h.changeColsCost(b - a, cols[a:b], costs[a:b]), "changeColsCost")

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        c, lo1, hi1 = np.asarray(cols), np.asarray(lower, np.float64), np.asarray(upper, np.float64)
        if c.size == 1 and lo1.size == 1 and hi1.size == 1:  # one column (an epigraph's t): no arrays
            self._set_one_col_bounds(int(c.reshape(-1)[0]), float(lo1.reshape(-1)[0]), float(hi1.reshape(-1)[0]))
            return
        super().set_col_bounds(cols, lower, upper)
        if self._last is not None:
            x = self._last[0][cols]
            if not (_within(x, self.sf.col_lower[cols], self.sf.col_upper[cols])):
                self._last = None
        if not self._passed:
            return
        inf = self._hs.kHighsInf
        cols = np.asarray(cols, np.int32)
        lo, hi = _of_shape(lower, cols.shape), _of_shape(upper, cols.shape)
        _check(self.h.changeColsBounds(cols.size, cols, np.where(np.isfinite(lo), lo, -inf),
                                       np.where(np.isfinite(hi), hi, inf)), "changeColsBounds")

    def _set_one_col_bounds(self, j: int, lo: float, hi: float) -> None:
        """:meth:`set_col_bounds` of one column, in Python floats (the same checks and mapping)."""
        self.sf.col_lower[j], self.sf.col_upper[j] = lo, hi
        if self._last is not None:
            x = float(self._last[0][j])
            tol = _FEAS_TOL * min(max(1.0, abs(x)), 1e300)
            if not (x >= lo - tol and x <= hi + tol):
                self._last = None
        if not self._passed:
            return
        inf = self._hs.kHighsInf
        _check(self._h.changeColBounds(j, lo if math.isfinite(lo) else -inf, hi if math.isfinite(hi) else inf),
               "changeColBounds")

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        rows = np.asarray(rows, np.int64)
        lo, hi = _of_shape(lower, rows.shape), _of_shape(upper, rows.shape)
        super().set_row_bounds(rows, lo, hi)
        if self._last is not None and not _within(self._last_rows()[rows], self.sf.row_lower[rows],
                                                  self.sf.row_upper[rows]):
            self._last = None
        if not self._passed:
            return
        inf = self._hs.kHighsInf
        slo, shi = self.sf.row_lower[rows], self.sf.row_upper[rows]
        _check(self.h.changeRowsBounds(
            rows.size, rows.astype(np.int32), np.where(np.isfinite(slo), slo, -inf),
            np.where(np.isfinite(shi), shi, inf)), "changeRowsBounds")

    def add_rows(self, A_rows: Any, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        rows = super().add_rows(A_rows, lower, upper)
        self._y, self._y_highs = None, False
        if self._last is not None and rows.size:
            act = np.asarray(A_rows @ self._last[0], dtype=np.float64).ravel()  # row_scale 1
            ok = _within(act, self.sf.row_lower[rows], self.sf.row_upper[rows])
            self._last = (self._last[0], np.concatenate([self._last_rows(), act])) if ok else None
        if rows.size == 0 or not self._passed:
            return rows
        inf = self._hs.kHighsInf
        R = A_rows.tocsr()
        lo, hi = self.sf.row_lower[rows], self.sf.row_upper[rows]
        _check(self.h.addRows(rows.size, np.where(np.isfinite(lo), lo, -inf), np.where(np.isfinite(hi), hi, inf),
                              int(R.nnz), R.indptr[:-1].astype(np.int32), R.indices.astype(np.int32),
                              np.ascontiguousarray(R.data, np.float64)), "addRows")
        return rows

    def _last_rows(self) -> np.ndarray:
        """The scaled row activities of the kept last solution (``_last``), read from HiGHS's
        solution (a copy taken at that run) the first time they are needed."""
        assert self._last is not None
        x, rows = self._last
        if not isinstance(rows, np.ndarray):
            rows = np.asarray(rows.row_value, dtype=np.float64)
            self._last = (x, rows)
        return rows

    def set_algorithm(self, algorithm: str) -> None:
        super().set_algorithm(algorithm)
        self._set("solver", _ALGORITHMS[self.options.algorithm])
        if self._warm_primal:  # use_warm_primal's mode ends: HiGHS's simplex variant (dual) again
            self._warm_primal = False
            if "simplex_strategy" not in self.options.extra:
                self._set("simplex_strategy", _STRATEGY["simplex"])
        if self.options.algorithm != "auto":
            # an algorithm the caller names runs with HiGHS's perturbation and no cap (or ``extra``'s),
            # not with those an earlier ``auto`` run left set (see _cap)
            self._cap(None)

    def use_warm_primal(self) -> bool:
        """Primal simplex (``simplex_strategy`` 4) for every later run, each capped without the bound
        perturbation (:meth:`_cap` ``"primal"``, sized at the run); a run that stalls at the cap is
        repeated with it (:attr:`stall_retries`). Options set in ``extra`` are left alone."""
        self.set_algorithm("simplex")
        if "simplex_strategy" not in self.options.extra:
            self._set("simplex_strategy", _STRATEGY["primal"])
        self._warm_primal = True
        return True

    def clear_warm_start(self) -> None:
        self._last = None
        self._y, self._y_highs = None, False
        if self._passed:
            _check(self._h.clearSolver(), "clearSolver")
        self._warm = False


    def set_presolve(self, enabled: bool) -> None:
        self._presolve = enabled
        self._set("presolve", "choose" if enabled else "off")

    def set_sense(self, sense: str) -> None:
        super().set_sense(sense)
        if not self._passed:
            return
        hs = self._hs
        _check(self.h.changeObjectiveSense(hs.ObjSense.kMaximize if sense == "max" else hs.ObjSense.kMinimize),
               "changeObjectiveSense")

    # ------------------------------------------------------------------ solve
    def solve(self) -> SolveResult:
        auto = self.options.algorithm == "auto" and not self.sf.is_mip
        note = ""
        small_primal = False
        if auto and self._wants_prices():
            fast, note = self._solve_prices()
            if fast is not None:
                return fast
        if auto:
            if self._try_structured and auto_algorithm(self.sf, warm=self._warm,
                                                       degenerate=self.options.degenerate) == "structured":
                fast, why = self._solve_structured()
                note = why or note
                if fast is not None:
                    return fast
                self._try_structured = False  # re-solves of this model go to HiGHS directly
                self._structure = self._agg = self._small = None
            alg = auto_algorithm(self.sf, warm=self._warm, structured=False, degenerate=self.options.degenerate,
                                 feasible=self._warm and self._last is not None, small_primal=True)
            small_primal = alg == "primal" and not self._warm and self.sf.num_cols < PRIMAL_MAX_COLS
            if small_primal:  # a small cold LP without presolve: its vertex meets the rows to 1e-10
                for k, v in _TIGHT_TOLERANCES.items():
                    if k not in self.options.extra:
                        self._set(k, v)
            self._use_auto(alg)
        elif self._warm_primal:
            self._cap("primal")  # (again after a stall below lifted it for one run)
        res = self._run_highs()
        if self._capped and (res.status is Status.ERROR
                             or self.h.getModelStatus() == self._hs.HighsModelStatus.kIterationLimit):
            # stalled without perturbation (a degenerate vertex), or ended without an answer
            # (HiGHS's 'Unknown'): once more with it
            self._cap(None)
            self.stall_retries += 1
            res = self._run_highs()
        if small_primal and res.status is Status.OPTIMAL and self._max_infeasibility > _FEAS_TOL:
            # a row or bound met only to the simplex's tolerance: solved again from scratch by dual
            # simplex with presolve (whose postsolved point is checked by no one else either; kept)
            self.clear_warm_start()
            self._use_auto("simplex")
            res = self._run_highs()
            res.options["small_lp_check"] = "primal simplex point outside a row by > 1e-9: re-solved with presolve"
        if note:
            res.options["fast_path"] = note
        return res

    def _use_auto(self, algorithm: str) -> None:
        """HiGHS options for an answer of :func:`auto_algorithm`: the solver, and for simplex its
        variant (primal: without presolve) — unless ``extra`` sets them."""
        self._set("solver", _ALGORITHMS[algorithm])
        if algorithm in _STRATEGY:
            if "simplex_strategy" not in self.options.extra:
                self._set("simplex_strategy", _STRATEGY[algorithm])
            if "presolve" not in self.options.extra:
                self._set("presolve", "off" if algorithm in _NO_PRESOLVE or not self._presolve else "choose")
        # unperturbed primal: a warm start whose last solution stays feasible, and a small cold LP
        # feasible at zero (auto_algorithm's answer; a cold degenerate epigraph LP keeps the perturbation)
        if algorithm == "primal" and (self._last is not None if self._warm else not self.options.degenerate):
            self._cap("primal")
        else:
            self._cap("simplex" if algorithm == "simplex" and self._warm and self._spliced else None)

    def _cap(self, variant: str | None) -> None:
        """A simplex run without HiGHS's perturbation, under an iteration cap (a stall on a
        degenerate vertex stops there; then the solve is repeated with the perturbation); ``None``:
        HiGHS's defaults. Options set in ``extra`` are left alone.

        * ``"primal"``: from a feasible basis (a warm one, or the slack basis of a small cold LP
          feasible at zero), without the bound perturbation (it would cost a clean-up solve: on
          max-sum throughput's 64-job LP the cold run takes ~0.83 of its time without it), capped
          at :data:`_UNPERTURBED_MIN_ITERATIONS` + :data:`_UNPERTURBED_ITERATIONS_PER_DIM`
          iterations per row and column;
        * ``"simplex"`` (dual): a model updated in place (``splice``) re-solved from its previous
          optimal basis, without the cost perturbation (removing it at the end costs a clean-up and
          a second rebuild: max-min at 2,048 jobs, ~2 ms of a ~10 ms run for a handful of
          iterations), capped at :data:`_UNPERTURBED_MIN_ITERATIONS` +
          :data:`_UNPERTURBED_DUAL_ITERATIONS_PER_ROW` iterations per row."""
        if variant is not None and {_PERTURBATION[variant], "simplex_iteration_limit"} & set(self.options.extra):
            variant = None
        limit = 2**31 - 1
        if variant is not None:  # (sized at each run: splice changes the rows and columns)
            m, n = self.sf.num_rows, self.sf.num_cols
            limit = _UNPERTURBED_MIN_ITERATIONS + (_UNPERTURBED_ITERATIONS_PER_DIM * (m + n) if variant == "primal"
                                                   else _UNPERTURBED_DUAL_ITERATIONS_PER_ROW * m)
        if variant == self._capped and limit == self._cap_limit:
            return
        if variant != self._capped:
            if self._capped is not None:
                self._set(_PERTURBATION[self._capped], 1.0)
            if variant is not None:
                self._set(_PERTURBATION[variant], 0.0)
        self._set("simplex_iteration_limit", limit)
        self._capped, self._cap_limit = variant, limit

    def _solve_structured(self) -> tuple[SolveResult | None, str]:
        """The block-aggregation fast path (module ``blocks``): the certified result, or ``None``
        and why not (the whole LP is then solved). A re-solve after cost/bound updates reuses the
        block structure, and when the groups of identical blocks are unchanged, re-solves the loaded
        reduced LP warm after the same updates (its matrix is unchanged)."""
        t0 = time.perf_counter()
        st = self._structure
        if st is None or st.A is not self.sf.A:
            st = self._structure = blocks.detect(self.sf)
            self._agg = self._small = None
        agg = None if st is None else blocks.aggregate(self.sf, st, self._agg)
        if agg is None:
            return None, ""
        red = agg.reduced
        small = self._small
        if small is not None and self._agg is not None and agg.same_reduction(self._agg):
            if self._stage0 is None and self._small_x is not None:
                basic = highs_steps.basic_variables(small)  # (None after an interior point run)
                if basic is not None:
                    self._stage0 = (basic, self._small_x)
            cols = np.arange(red.num_cols)
            small.set_sense(red.sense)
            small.set_costs(cols, red.c)
            small.set_col_bounds(cols, red.col_lower, red.col_upper)
            small.set_row_bounds(np.arange(red.num_rows), red.row_lower, red.row_upper)
            small.set_algorithm("simplex")
            raw = small.resolve()
        else:
            small = reduced_model(red, self.options)
            raw = small.solve()
            self._stage0 = None
        self._agg, self._small, self._small_x = agg, small, raw.x
        if raw.status is not Status.OPTIMAL or raw.x is None or raw.row_duals is None:
            return None, f"aggregated LP {raw.status.value} ({agg.describe()}); whole LP solved by HiGHS"
        x, y = blocks.expand(agg, raw.x, raw.row_duals)
        assert y is not None
        ok, primal, bound, viol, d = blocks.certify(self.sf, x, y)
        if not ok:
            return None, (f"aggregation certificate failed (objective {primal:.12g}, dual bound {bound:.12g}, "
                          f"violation {viol:.3g}; {agg.describe()}); whole LP solved by HiGHS")
        if not self._gub_never:
            self._y, self._y_highs = y, False  # (the price path's start for a next problem)
        res = SolveResult(status=Status.OPTIMAL, objective=primal, x=x, solver="highs",
                          options={"algorithm": "auto", "fast_path": f"aggregated: {agg.describe()}; dual bound "
                                   f"{bound:.15g}, violation {viol:.3g}", "time_limit": self.options.time_limit,
                                   **self.options.extra},
                          message="Optimal", iterations=raw.iterations,
                          row_duals=self.sf.unscale_duals(y), col_duals=d)
        res.timings = Timings(solve=time.perf_counter() - t0)
        return res, ""

    def _run(self) -> Any:
        """``h.run()`` under the per-run time limit (see ``__init__``)."""
        h = self.h
        if self._time_limit is not None:
            self._set("time_limit", h.getRunTime() + self._time_limit)
        extra = self.options.extra
        # an LP by simplex or IPX runs on one thread (HiGHS's parallel LP solvers: HiPO, the
        # parallel dual simplex)
        serial = not self.sf.is_mip and extra.get("solver") != "hipo" and extra.get("parallel") != "on"
        threads = run_threads(self._hs, self._asked_threads, serial)
        if threads != self._threads:
            self._set("threads", threads)
            self._threads = threads
        return h.run()

    def _run_highs(self) -> SolveResult:
        hs = self._hs
        t0 = time.perf_counter()
        self.runs += 1
        self._y = None
        run_status = self._run()
        self._warm = True
        ms = self.h.getModelStatus()
        if ms == hs.HighsModelStatus.kUnboundedOrInfeasible:
            # presolve could not tell which; one re-run without presolve decides
            self._set("presolve", "off")
            run_status = self._run()
            ms = self.h.getModelStatus()
            self._set("presolve", "choose")
        t1 = time.perf_counter()
        h = self._h
        max_infeasibility, simplex_its, ipm_its, primal_status, objective = _info_values(h, hs)
        # the largest violation of a row or column bound by the returned point (HiGHS's own check of
        # its solution, on the rows as passed: StandardForm.violation without another A·x)
        self._max_infeasibility = float(max_infeasibility)
        status = _status_map(hs).get(ms, Status.ERROR)
        if run_status == hs.HighsStatus.kError and status is Status.OPTIMAL:
            status = Status.ERROR
        opts = {"algorithm": self.options.algorithm, "highs_solver": _ALGORITHMS[self.options.algorithm],
                "time_limit": self.options.time_limit, **self.options.extra}
        res = SolveResult(status=status, objective=None, x=None, solver="highs", options=opts,
                          message=h.modelStatusToString(ms),
                          iterations=int(simplex_its or 0) + int(ipm_its or 0))
        sol = h.getSolution()
        has_primal = bool(sol.value_valid) and int(primal_status) == 2  # feasible
        if status is Status.OPTIMAL or (status in (Status.TIME_LIMIT, Status.STOPPED) and has_primal):
            if self.sf.num_cols:
                res.x = np.asarray(sol.col_value, dtype=np.float64)
                if status is Status.OPTIMAL and self.options.degenerate and self.options.algorithm == "auto" \
                        and not self.sf.is_mip:
                    self._last = (res.x, sol)  # (see _cap; its row activities read when needed)
            else:
                res.x = np.zeros(0)
            res.objective = float(objective) if self.sf.num_cols else float(self.sf.offset)
            if self.return_duals and sol.dual_valid and not self.sf.is_mip:
                y = np.asarray(sol.row_dual, dtype=np.float64)
                res.row_duals = self.sf.unscale_duals(y)
                res.col_duals = np.asarray(sol.col_dual, dtype=np.float64)
                if status is Status.OPTIMAL and not self._gub_never:
                    self._y = y
        # the price path's next start: this answer's multipliers (read from HiGHS when needed)
        self._y_highs = (status is Status.OPTIMAL and self._y is None and not self._gub_never
                         and self.options.algorithm == "auto" and not self.sf.is_mip)
        res.timings = Timings(solve=t1 - t0, extract=time.perf_counter() - t1)
        return res


def reduced_model(red: StandardForm, options: SolverOptions, cap: bool = True) -> HighsModel:
    """A reduced (aggregated) LP loaded cold as the structured fast path solves it: the algorithm of
    :func:`auto_algorithm` (simplex taken as primal simplex), tight tolerances, no presolve; with
    ``cap``, a feasible-at-zero LP of a policy that is not degenerate runs primal simplex from the
    slack basis without the bound perturbation, under an iteration cap (:meth:`HighsModel.solve`
    repeats a stalled run with it; a caller that runs the model otherwise passes ``cap=False``)."""
    alg = auto_algorithm(red, structured=False, degenerate=options.degenerate)
    if alg == "simplex":
        # a cold reduced LP by primal simplex: on Gavel's 1,024- and 2,048-job reduced LPs
        # (~355 columns) 0.41 ms against dual simplex's 0.53 (max-sum), 1.24 against 1.49
        # (max-min); the caller's certificate checks its answer either way
        alg = "primal"
    variant = {"simplex_strategy": _STRATEGY[alg]} if alg in _STRATEGY else {}
    small = HighsModel(red, options.with_(algorithm="simplex" if alg in _NO_PRESOLVE else alg,
                                          extra={**variant, **options.extra, **_TIGHT}))
    if cap and alg == "primal" and not options.degenerate and _feasible_at_zero(red):
        # from the slack basis, feasible, without the bound perturbation, under an iteration
        # cap (a stall is solved again with it), as auto_algorithm's small cold LPs: Gavel's
        # 2,048-job max-sum reduced LP (356 × 86) 0.31 ms against 0.36
        small._cap("primal")
    return small


@register_solver
class HighsSolver(Solver):
    """HiGHS (default). ``algorithm``: simplex, ipm (interior point + crossover), pdlp, or auto."""

    name = "highs"
    features = Feature.LP | Feature.MILP | Feature.DUALS | Feature.WARM_START | Feature.TIME_LIMIT
    required_modules = ("highspy",)
    doc = "HiGHS via highspy: one array passModel call, in-place updates, warm re-solves"

    def __init__(self, algorithm: str | None = None) -> None:
        self.algorithm = algorithm or None

    def load(self, sf: StandardForm, options: SolverOptions) -> HighsModel:
        if self.algorithm and options.algorithm == "auto":
            options = options.with_(algorithm=self.algorithm)
        return HighsModel(sf, options)
