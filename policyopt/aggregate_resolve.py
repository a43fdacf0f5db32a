"""Re-solves of a job-set change on the aggregated LP: jobs in classes, multiplicities updated.

When a job-separable policy's LP (:attr:`~policyopt.policy.Policy.incremental_lp`) has many jobs of
the same kind, the backend answers it by the block-aggregation fast path
(:mod:`policyopt.solvers.blocks`): identical per-job blocks form groups, and the *reduced* LP holds
one representative block per group ``g``, its costs and its entries in the linking rows multiplied
by the group's multiplicity ``m_g``:

.. math::  \\max\\ c_L z + \\sum_g m_g c_g x_g \\quad\\text{s.t.}\\quad
           R_g x_g + D_g z \\in [l_g, u_g],\\quad \\sum_g m_g B_g x_g + E z \\in [L, U]

A job's block depends only on its data (throughputs ``T``, scale factor, weight) and the cluster;
the groups (found by a 64-bit hash of the blocks) are taken only where every job of a group has the
same data, checked exactly once, so each group is a *class*: a job of its data has its block. After
an arrival or a completion the new LP's reduced LP is the kept one with other multiplicities, so
instead of building, compiling, detecting and aggregating the whole LP again
(:class:`AggregateModel`):

* each job of the new problem is matched to the previous one by id (kept jobs with equal data keep
  their class) or, when new, to the class of equal data (compared with each class's data); where
  both problems were made by :meth:`~policyopt.problem.Problem.with_jobs` (the new one from the
  previous one, or both from the same problem), the kept jobs at either end are read from their
  records (:attr:`~policyopt.problem.Problem.job_changes`: equal jobs, so equal data on the same
  cluster and configurations) instead of comparing ids and data;
* ``m_g`` is recounted; the columns' costs, the linking-row entries ``m_g B_g`` (HiGHS
  ``changeCoeff``) and bounds of classes whose count changed are updated in the loaded reduced LP;
  a class left without jobs keeps its columns at 0 and its own rows free (an inert block: the
  same optimum), and takes jobs again later by the same updates;
* the reduced LP is re-solved from the basis its last solve ended with, and certified on itself:
  its expanded point is feasible for the whole LP exactly when it is for the reduced one (block
  rows are the representative's; a linking row's activity is ``Σ_g m_g B_g x_g``), and the
  Lagrangian bound of its duals equals that of the expanded duals ``y_b = ŷ_g / m_g`` (each block
  row contributes ``max(ŷ l, ŷ u)`` once over its ``m_g`` copies; each column's reduced cost is
  ``m_g`` times its copies'), so the reduced certificate is the whole LP's;
* the allocation is the class's row for each job (one gather).

The policy's own code runs unchanged on the reduced LP through variables over the new problem whose
columns are their class's columns (:meth:`AggregateModel.update`): ``X.value(x)`` expands the
answer, and costs set on such columns (max-min fairness's ``fill`` stage) are summed over the jobs
of a column, which is ``m_g c_g`` (they must be equal within a column). A job of data no class has
(a new job, or a kept one whose data changed), unequal costs or bounds within a class column (or
given to some of its jobs only), row bounds or rows set by the policy, or a failed certificate end
the aggregated model: the policy builds the whole LP cold (:exc:`Declined` for all
but the first).
"""
from __future__ import annotations

import operator
import threading
import time
from typing import Any

import numpy as np

from ._aggregate_counts import _ClassCounts
from ._aggregate_parts import ClassVariable, Declined, _PerClass, _uniform, certify, common_ends, match_slots
from ._aggregate_convert import _first_basis, from_kept
from .aggregate_basis import Basis, FactorLost, KeptFactor
from .aggregate_epigraph import EpigraphLP, EpigraphStages, EpigraphTotals, cross_column
from .aggregate_totals import ClassTotals, Unit, bounds_only, unit_matrix
from .allocation import AllocationSpace
from .modeling import Model, Variable
from .solver_api import LoadedModel, SolveResult, Status
from .problem import JobChanges
from .standard_form import matvec
from .problem_records import recorded_ends

__all__ = ["AggregateModel", "ClassVariable", "Declined", "certify", "from_kept", "match_slots"]

_NONE = np.zeros(0, np.int64)

class _Loaded(LoadedModel):
    """The reduced LP as the policy's loaded model (what :class:`LoadedLP` and the policies call):
    costs given per job column are summed per class column; every answer is certified."""

    def __init__(self, small: Any, owner: "AggregateModel") -> None:
        super().__init__(small.sf, small.options)
        self.small = small
        self.owner = owner  # (its classes' multiplicities, read when costs or bounds are set)
        self.return_duals = False  # (read by callers; the reduced LP keeps its duals for the certificate)
        #: costs or bounds set by the policy since the last update (the next one compares them all);
        #: true at first: the kept reduced LP holds whatever the fast path's last solve left
        self.touched = True
        self._totals_tried = -1  # (the update whose totals were tried: totals_answer)

    def set_costs(self, cols: np.ndarray, costs: np.ndarray) -> None:
        """Costs per job column: a class column's cost is the sum over its jobs, ``m_g c_g`` — the
        jobs of a column must be given equal costs (else the reduced LP is not the whole LP's:
        :exc:`Declined`)."""
        cols, costs = np.asarray(cols, np.int64), np.asarray(costs, np.float64)
        n = self.small.sf.num_cols
        first = _uniform(cols, costs, n, "costs")
        hit, cnt = self._whole(cols, n, "costs", once=True)
        self.touched = True
        self.small.sf.c[hit] = first[hit] * cnt[hit]  # (pushed to HiGHS before its next run: sync)

    def _whole(self, cols: np.ndarray, n: int, what: str, once: bool) -> tuple[np.ndarray, np.ndarray]:
        """The reduced columns given in ``cols`` and each column's count in it; :exc:`Declined`
        unless each class column among them is given once per job of its class (``m_g`` times:
        given to part of a class, the change is not one of the reduced LP) and, with ``once``, each
        linking column once (a sum of costs would double it)."""
        cnt = np.bincount(cols, minlength=n)
        hit = cnt.nonzero()[0]
        g = self.owner.col_group[hit]
        want = np.where(g >= 0, np.append(self.owner.mult, 1)[g], 1)
        bad = cnt[hit] != want if once else (g >= 0) & (cnt[hit] != want)
        if np.count_nonzero(bad):
            raise Declined(f"{what} given to a class column other than once per job of its class")
        return hit, cnt

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Bounds per job column: the jobs of a class column must be given equal bounds."""
        cols = np.asarray(cols, np.int64)
        lower, upper = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
        n = self.small.sf.num_cols
        if cols.size > 1:
            _uniform(cols, lower, n, "lower bounds")
            _uniform(cols, upper, n, "upper bounds")
        self._whole(cols, n, "bounds", once=False)
        self.touched = True
        sf = self.small.sf
        sf.col_lower[cols], sf.col_upper[cols] = lower, upper  # (pushed before HiGHS's next run)

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Rows of the whole LP have no counterpart in the reduced one (:exc:`Declined`)."""
        raise Declined("row bounds are not set on the aggregated re-solve")

    def add_rows(self, A_rows: Any, lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Rows over the whole LP's columns have no counterpart in the reduced one (:exc:`Declined`)."""
        raise Declined("rows are not added to the aggregated re-solve")

    def set_sense(self, sense: str) -> None:
        """Only the compiled sense (the reduced LP's bound and certificate are of that sense)."""
        if sense != self.small.sf.sense:
            raise Declined("the aggregated re-solve keeps the compiled objective sense")
        self.small.set_sense(sense)

    def set_algorithm(self, algorithm: str) -> None:
        """Passed to the reduced LP's HiGHS model."""
        self.small.set_algorithm(algorithm)

    def has_basis(self) -> bool:
        return False  # (no label snapshot of the reduced LP is taken for a later cold build)

    def solve(self) -> SolveResult:
        """As :meth:`resolve` (the reduced LP is always re-solved from its kept basis)."""
        return self.resolve()

    def resolve(self) -> SolveResult:
        """The reduced LP re-solved and certified: from the kept factorization of its last basis
        when that basis is still optimal (:class:`~policyopt.aggregate_basis.KeptFactor`, no HiGHS
        run), else by HiGHS from that basis (the changes pushed first), once more cold if the
        certificate fails."""
        owner, small = self.owner, self.small
        t0 = time.perf_counter()
        if self._totals_tried != owner.updates:
            got = self.totals_answer()
            if got is not None:
                return self._result(*got, "class totals", t0)
        fac = owner.kept_factor()
        if fac is not None and fac.base is not None:
            try:
                pt = fac.base.point()
            except FactorLost:  # (HiGHS dropped it: not expected, as the owner tracks its runs)
                pt = owner.factor = None
            if pt is not None:
                ok, primal, bound, viol = certify(small.sf, *pt)
                if ok:
                    owner.factor_answers += 1
                    return self._result(pt[0], pt[1], primal, bound, viol, "kept factorization", t0)
        owner.sync()
        for attempt in range(2):
            if attempt:
                small.clear_warm_start()
            t0 = time.perf_counter()
            x, y = small.run_point()
            owner.factor = None
            if x is not None and y is not None:
                ok, primal, bound, viol = certify(small.sf, x, y)
                if ok:
                    owner.keep_basis(x, self.touched)
                    return self._result(x, y, primal, bound, viol, "HiGHS", t0)
        raise Declined("the aggregated re-solve ended without a certified optimum")

    def totals_answer(self, duals: bool = True) -> tuple[np.ndarray, np.ndarray, float, float, float] | None:
        """The reduced LP as compiled at the current multiplicities answered in class totals, without
        HiGHS: by :class:`~policyopt.aggregate_totals.ClassTotals` (multiplicities in bounds only) or
        :class:`~policyopt.aggregate_epigraph.EpigraphTotals` (max-min's ``t``; taken from the kept
        factorization's basis when first needed): its point, row multipliers, objective, bound and
        violation (``duals=False``: max-min's totals leave the multipliers out, an empty array in
        their place), certified, or ``None`` (costs or bounds changed since the update, a class without
        jobs, no such totals, or a refused answer: the totals of a basis no longer optimal dropped).
        Tried once per update: after ``None`` the next :meth:`resolve` of this update goes to the
        kept factorization, then HiGHS."""
        owner = self.owner
        got = None
        if not (self.touched or owner.n_dead):
            tot = owner.totals
            if tot is not None:
                got = tot.answer(owner.mult)
            if got is None and owner.cross is not None:
                epi = owner.epi
                if epi is None:
                    fac = owner.kept_factor()
                    if fac is not None and fac.base is not None:  # (the kept basis's, taken when first needed)
                        epi = owner.epi = owner.epigraph_totals(fac.base)
                if epi is not None:
                    got = epi.answer(owner.mult, float(owner.base[1][epi.t]), duals=duals)
                    if got is None:
                        owner.epi = None  # (its basis no longer optimal: the kept factorization, then HiGHS)
        if got is None:
            self._totals_tried = owner.updates
            return None
        owner.factor_answers += 1
        return got

    def _result(self, x: np.ndarray, y: np.ndarray, primal: float, bound: float, viol: float, how: str,
                t0: float) -> SolveResult:
        duals = self.small.sf.unscale_duals(y) if y.size else None  # (none asked for: totals_answer)
        res = SolveResult(Status.OPTIMAL, primal, x, row_duals=duals, solver="highs",
                          message="Optimal", options={"algorithm": "auto", "fast_path": (
                              f"aggregated re-solve ({how}): dual bound {bound:.15g}, violation {viol:.3g}")})
        res.timings.solve = time.perf_counter() - t0
        return res

    def reoptimize(self, x: np.ndarray, cols: np.ndarray, costs: np.ndarray, t_col: np.ndarray,
                   t_low: float) -> Any:
        """A second stage that maximizes the costs ``costs`` given per job column ``cols`` (summed
        per class column, as :meth:`set_costs`) with the column ``t_col`` held at ``≥ t_low``, from
        the basis of the last answer ``x``, as primal simplex steps on the kept factorization
        (:func:`policyopt.solvers.highs_steps.reoptimize`, certified on the reduced LP; the loaded
        model is not changed): its :class:`~policyopt.solvers.highs_steps.Steps`, or ``None``
        (then the caller runs the stage by :meth:`set_costs` and :meth:`solve`)."""
        fac = self.owner.kept_factor()
        if fac is None or fac.base is None:
            return None
        cols, costs = np.asarray(cols, np.int64), np.asarray(costs, np.float64)
        n = self.small.sf.num_cols
        first = _uniform(cols, costs, n, "costs")
        cnt = self._whole(cols, n, "costs", once=True)[1]
        hit = cnt.nonzero()[0]
        return self.reoptimize_costs(x, hit, first[hit] * cnt[hit], t_col, t_low)  # (m_g c_g: as set_costs)

    def reoptimize_costs(self, x: np.ndarray, cols: np.ndarray, costs: np.ndarray, t_col: np.ndarray,
                         t_low: float, unit: np.ndarray | None = None) -> Any:
        """:meth:`reoptimize` with the reduced LP's own costs: ``costs`` of its columns ``cols``
        (each once; a class column's is ``m_g c_g``), 0 elsewhere. ``unit``: the costs per unit count
        ``c_g`` where the caller keeps them (read-only arrays, ``cols`` too, given again at later
        calls: the class totals of the ``fill`` basis then compare them by identity)."""
        from policyopt.solvers import highs_steps

        owner = self.owner
        sf = self.small.sf
        cross = owner.cross
        compiled = (not self.touched and not owner.n_dead and cross is not None and t_col.size == 1
                    and int(t_col[0]) == cross[0])
        if compiled:  # the class totals of the basis the last such stage ended with, for these costs
            if owner.epi_fill is None and owner.second_basis is not None:  # (taken when first needed)
                owner.take_fill_totals(owner.second_basis, cols, costs, unit)
            got = owner.fill_totals_answer(cols, costs, float(t_low), unit)
            if got is not None:
                return got
        fac = owner.kept_factor()
        if fac is None or fac.base is None:
            return None
        c = np.zeros(sf.num_cols)
        c[cols] = costs
        lower = sf.col_lower.copy()
        lower[t_col] = t_low
        try:
            # first the basis the last such stage ended with (usually still optimal), certified here
            last = owner.second_basis
            got = None
            if last is not None and last.factor is fac:
                pt = last.point(c, lower)
                if pt is not None:
                    ok, primal, _, _ = certify(sf, pt[0], pt[1], c=c, col_lower=lower)
                    if ok:
                        got = highs_steps.Steps(pt[0], 0, primal - float(sf.offset), last.var)
            if got is None:
                if not fac.base.form():
                    return None
                got = highs_steps.reoptimize(self.small, x, c, lower, sf.col_upper, factor=fac.base)
                owner.second_basis = None if got is None or got.basic is None else fac.basis(got.basic, got.x,
                                                                                              lower)
        except FactorLost:
            owner.factor = owner.second_basis = None
            return None
        return got


def _signature(policy: Any, space: AllocationSpace) -> tuple[Any, ...]:
    """:func:`policyopt.incremental._signature` (imported at the first call: that module imports this one)."""
    global _signature
    from .incremental import _signature as sig

    _signature = sig
    return sig(policy, space)


class AggregateModel(_ClassCounts, EpigraphStages):
    """A policy's kept reduced LP and the class of each job of its last problem (see the module
    docstring); in :mod:`policyopt.incremental`'s place of a :class:`~policyopt.incremental.JobSetModel`
    (same calls: ``lock``, ``update``, ``keep_start``, ``prefers_rebuild``, ``loaded``)."""

    def __init__(self, signature: tuple[Any, ...], small: Any, obj_name: str | None, ids: np.ndarray,
                 data: tuple[np.ndarray, np.ndarray, np.ndarray], group: np.ndarray, rep: np.ndarray,
                 col_group: np.ndarray, row_group: np.ndarray, base: tuple[np.ndarray, ...],
                 lin: tuple[np.ndarray, np.ndarray, np.ndarray],
                 variables: dict[str, tuple[bool, tuple[Any, ...], np.ndarray]],
                 ent_col: np.ndarray | None = None) -> None:
        self.lock = threading.Lock()
        self.signature = signature
        self.loaded = _Loaded(small, self)
        self.small = small
        small.return_duals = True  # (the certificate reads them)
        self.obj_name = obj_name
        self.ids, self.group = ids, group
        self.T, self.scale, self.weights = data
        self.mult = np.bincount(group, minlength=rep.size)
        # each class's data (from one of its jobs; a class keeps it while it has no job)
        self.rep_T, self.rep_scale, self.rep_weights = self.T[rep], self.scale[rep], self.weights[rep]
        self.col_group, self.row_group = col_group, row_group  # per reduced column / row: its class, -1 linking
        self.base = base  # unit costs, column bounds, row bounds (scaled) of the reduced columns/rows
        self.lin_pos, self.lin_group, self.lin_unit = lin  # linking-row entries of class columns
        self._all = (np.arange(col_group.size), np.arange(row_group.size), np.arange(self.lin_pos.size))
        # per class: its reduced columns and its linking-row entries (positions in lin_pos)
        self._cls_cols = _PerClass(col_group, rep.size)
        self._cls_lin = _PerClass(self.lin_group, rep.size)
        self._cls_parts: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] = {}  # (_cls_at)
        self.variables = variables  # per variable: (per job, dims, class columns (G × width) or columns)
        # the reduced columns' bounds and a 0 for column -1 (a masked slot), refilled at each update
        self._ext = (np.zeros(col_group.size + 1), np.zeros(col_group.size + 1))
        self.start: Any = None
        self.start_runs = 0
        self.updates = 0  # problems answered by the aggregated re-solve (tests and benchmarks read it)
        self.factor_answers = 0  # LP answers read from the kept factorization, without a HiGHS run
        self.classes_emptied = 0  # times a class lost its last job (tests read it)
        self._slot_of: dict[Any, int] | None = None
        #: the jobs of the last update's problem and the record of how they were made
        #: (:attr:`~policyopt.problem.Problem.job_changes`): the next update reads its common ends there
        self.jobs: tuple[Any, ...] | None = None
        self.changes: JobChanges | None = None
        self._sig_hit: tuple[Any, ...] | None = None  # (the last signature match: _same_signature)
        self._cls_rows: tuple[np.ndarray, np.ndarray] | None = None  # each class's mask and equal share
        self._keys: dict[bytes, int] | None = None  # each class's data as bytes → the class (_classes_of)
        self.link_rows = (row_group < 0).nonzero()[0]
        A = small.sf.A
        # each entry's column
        self.ent_col = np.repeat(np.arange(A.shape[1]), np.diff(A.indptr)) if ent_col is None else ent_col
        sf = small.sf
        # what HiGHS holds (changes are made in the standard form and pushed before HiGHS's next run)
        self._held = (sf.A.data[self.lin_pos].copy(), sf.c.copy(), sf.col_lower.copy(), sf.col_upper.copy(),
                      sf.row_lower.copy(), sf.row_upper.copy())
        #: HiGHS's factorization of the basis of its last run, over the entries it saw then
        self.factor: KeptFactor | None = None
        #: the basis a second stage (max-min's ``fill``) ended with on that factor
        self.second_basis: Basis | None = None
        #: whether the multiplicities enter only the class totals' bounds (:mod:`policyopt.aggregate_totals`):
        #: then the last basis is kept as :class:`ClassTotals` (:attr:`totals`) instead of :attr:`factor`
        self.bounds_only = bounds_only(row_group, col_group, A.indices, self.ent_col)
        self.totals: ClassTotals | None = None
        self._unit: Unit | None = None  # (the totals' matrix: built with the first totals)
        self._grp: np.ndarray | None = None  # (each reduced column's then row's class, G linking: with it)
        #: max-min's epigraph column ``t`` and its entries in the classes' rows, where it is the one
        #: linking column with such entries (:mod:`policyopt.aggregate_epigraph`); then the class totals
        #: of the first stage's kept basis (:attr:`epi`) and of a second stage's (``fill``: with its
        #: columns and costs per unit count, :attr:`epi_fill`), taken at the first re-solve that needs
        #: them (not in a first call: a process that solves once never reads them)
        self.cross = None if self.bounds_only else cross_column(row_group, col_group, A, self.ent_col)
        self.epi: EpigraphTotals | None = None
        self.epi_fill: tuple[EpigraphTotals, np.ndarray, np.ndarray] | None = None
        self._epi_lp: EpigraphLP | None = None
        self.n_dead = int(np.count_nonzero(self.mult == 0))  # classes without jobs
        #: what a policy computes once per kept model from its classes (max-min fairness's ``fill``
        #: costs per class column and normalizers), with what it was computed from
        self.policy_data: Any = None

    def adopt_factor(self, first: tuple[Any, np.ndarray] | None = None) -> None:
        """Keep HiGHS's factorization after the fast path's last run of the reduced LP. If that run
        solved the reduced LP as compiled, its basis is the next re-solve's start and the next
        update changes only the classes whose count changes (:attr:`_Loaded.touched` cleared). If
        it was a later stage's (other costs or lower bounds: max-min's ``fill``) and ``first`` —
        the basic variables and point of the first stage's run
        (:meth:`~policyopt.solvers.highs.HighsModel.first_stage`) — is given, the start is that
        first basis, solved on the later one's factorization (the positions whose basic variable
        differs as more Woodbury columns), and the later stage's basis is the one its next run
        tries first (:attr:`second_basis`)."""
        sf, small = self.small.sf, self.small
        c, lo, hi, rlo, rhi = self.base
        if (np.count_nonzero(sf.col_upper != hi) or np.count_nonzero(sf.row_lower != rlo)
                or np.count_nonzero(sf.row_upper != rhi) or not getattr(small, "_passed", False)):
            return
        want_c = c * np.append(self.mult, 1).astype(np.float64)[self.col_group]
        compiled = not (np.count_nonzero(sf.c != want_c) or np.count_nonzero(sf.col_lower != lo))
        if not compiled and first is None:
            return
        sol = small._h.getSolution()
        if not sol.value_valid:
            return
        if self.bounds_only:  # (the fast path's last run solved the compiled LP: its basis as class totals)
            if compiled:
                self.keep_basis(np.asarray(sol.col_value, np.float64), False)
                self.loaded.touched = False
            return
        fac = KeptFactor.take(small, np.asarray(sol.col_value, np.float64), self.lin_pos, self.link_rows,
                              self.ent_col)
        if fac is None:
            return
        if compiled:
            self.loaded.touched = False
        else:
            assert first is not None
            start = _first_basis(fac, first[0], first[1], lo)
            if start is None:
                return
            self.second_basis, fac.base = fac.base, start
        self.factor = fac

    def keep_basis(self, x: np.ndarray, touched: bool) -> None:
        """After a certified HiGHS run whose point is ``x``: its basis kept for the next re-solves,
        as :class:`ClassTotals` where the multiplicities enter only bounds (:attr:`bounds_only`; the
        costs and bounds the compiled ones, not ``touched``, every class with jobs), else as HiGHS's
        factorization (:class:`KeptFactor`)."""
        small = self.small
        self.factor = self.totals = None
        if not self.bounds_only:
            self.factor = KeptFactor.take(small, x, self.lin_pos, self.link_rows, self.ent_col)
            self.epi = None  # (max-min's class totals: of this basis, taken at the next re-solve)
            return
        from .solvers import highs_steps

        if touched or self.n_dead:
            return
        basic = highs_steps.basic_variables(small)  # (None after an interior point run)
        if basic is None:
            return
        sf = small.sf
        unit, grp = self._unit_grp()
        c, lo, hi, rlo, rhi = self.base
        self.totals = ClassTotals.take(unit, c, (lo, hi, rlo, rhi), grp, self.mult.size, basic, x,
                                       matvec(sf.A, x), sf.sense, float(sf.offset))
        self._class_keys()  # (with the basis, what the next re-solves read: an arrival's class by its data)

    def _unit_grp(self) -> tuple[Unit, np.ndarray]:
        """The class totals' matrix (:func:`~policyopt.aggregate_totals.unit_matrix`) and each reduced
        column's then row's class (the number of classes ``G``: linking), built once."""
        if self._unit is None or self._grp is None:
            self._unit = unit_matrix(self.small.sf.A, self.ent_col, self.lin_pos, self.lin_unit)
            G = self.mult.size
            self._grp = np.concatenate([np.where(self.col_group >= 0, self.col_group, G),
                                        np.where(self.row_group >= 0, self.row_group, G)])
        return self._unit, self._grp

    def kept_factor(self) -> KeptFactor | None:
        """The kept factorization while it is still HiGHS's (no run and no basis set since)."""
        fac = self.factor
        if fac is not None and fac.runs != self.small.runs:
            fac = self.factor = None
        return fac

    def sync(self) -> None:
        """Push the changes made in the reduced LP's standard form since HiGHS's last run to HiGHS."""
        small, sf = self.small, self.small.sf
        hA, hc, hlo, hhi, hrlo, hrhi = self._held
        vals = sf.A.data[self.lin_pos]
        d = (vals != hA).nonzero()[0]
        if d.size:
            small.set_entries(self.lin_pos[d], vals[d])
        d = (sf.c != hc).nonzero()[0]
        if d.size:
            small.set_costs(d, sf.c[d])
        d = ((sf.col_lower != hlo) | (sf.col_upper != hhi)).nonzero()[0]
        if d.size:
            small.set_col_bounds(d, sf.col_lower[d], sf.col_upper[d])
        d = ((sf.row_lower != hrlo) | (sf.row_upper != hrhi)).nonzero()[0]
        if d.size:  # set_row_bounds takes unscaled bounds
            r = d
            small.set_row_bounds(r, sf.row_lower[r] / sf.row_scale[r], sf.row_upper[r] / sf.row_scale[r])
        self._held = (vals, sf.c.copy(), sf.col_lower.copy(), sf.col_upper.copy(), sf.row_lower.copy(),
                      sf.row_upper.copy())

    # ---------------------------------------------------------------- JobSetModel's other calls

    def prefers_rebuild(self) -> bool:
        """Never: a change the classes cannot take builds the whole LP cold without prices."""
        return False

    def linking_duals(self) -> None:
        """None: the reduced LP's multipliers are not handed to a fresh build."""
        return None

    def snapshot(self, space: AllocationSpace, variables: dict[str, Variable]) -> None:
        """No label snapshot: the reduced LP's basis is not one of a whole LP (a later cold build
        starts without one)."""
        return None

    def keep_start(self, x: np.ndarray | None) -> None:
        """Keep the reduced LP's current basis as the next re-solve's start (see JobSetModel): HiGHS's,
        unchanged while no run followed the one it was read after (answers from the kept
        factorization leave it as it is)."""
        small = self.small
        if x is None:
            self.start = None
        elif self.start is None or small.runs != self.start_runs:
            self.start = small.basis_object()
        self.start_runs = small.runs

    # ---------------------------------------------------------------- the update

    def update(self, policy: Any, space: AllocationSpace) -> dict[str, Variable] | None:
        """Bring the reduced LP to ``space``'s job set (the caller holds :attr:`lock`): the policy's
        variables over ``space`` on the reduced LP's columns, or ``None`` (nothing changed) when the
        change is not one of the job set or a job has data no class has."""
        n = len(space.jobs)
        if space.num_pairs or n == 0 or not self._same_signature(policy, space):
            return None
        ids = space.jobs.labels
        S = len(self.ids)
        T, scale, weights = space.T, space.scale, space.weights
        jobs, changes = space.problem.jobs, space.problem.job_changes
        # kept jobs of unchanged data keep their class: the common prefix and suffix read from the
        # records of how the problems were made (equal jobs: equal data on the signature's cluster
        # and configurations), else by slices (one comparison each when nothing changed); jobs
        # found in the middle by their ids
        ends = None if self.jobs is None else recorded_ends(self.jobs, self.changes, jobs, changes)
        if ends is not None:
            p, q = ends
            same_pre = same_suf = None
        else:
            p, q = common_ends(self.ids, ids)
            same_pre = self._same(T[:p], scale[:p], weights[:p], slice(0, p)) if p else None
            same_suf = self._same(T[n - q:], scale[n - q:], weights[n - q:], slice(S - q, S)) if q else None
        if same_pre is None and same_suf is None and not (n - q > p and S - q > p):
            # the usual change: jobs arrived between the prefix and the suffix, or others left there
            got = self._classes_of(T[p:n - q], scale[p:n - q], weights[p:n - q]) if n - q > p else _NONE
            if got is None:
                return None  # a job of a new kind: the whole LP is built cold
            left = self.group[p:S - q]
            g = np.concatenate([self.group[:p], got, self.group[S - q:]])
            if left.size + got.size <= 16:
                mult = self.mult.copy()
                for k in left.tolist():
                    mult[k] -= 1
                for k in got.tolist():
                    mult[k] += 1
            else:
                mult = np.bincount(g, minlength=self.mult.size)
        else:
            found = self._general_classes(space, p, q, same_pre, same_suf)
            if found is None:
                return None  # a job of a new kind: the whole LP is built cold
            g = found
            mult = np.bincount(g, minlength=self.mult.size)
        self._restore(mult)
        # (the problem's own arrays, kept as they are, not copied: a problem's arrays, built once from
        # its jobs, are not changed in place — max-sum's class-basis re-solve keeps them alike)
        self.ids, self.group, self.mult = ids, g, mult
        self.jobs, self.changes = jobs, changes
        self.T, self.scale, self.weights = T, scale, weights
        self._slot_of = None  # (the table was of the old ids)
        self.updates += 1
        # each job has its class's data: what depends on it only is the class's (computed once per
        # class: the cluster and configurations are the signature's), gathered
        if "single_mask" not in space.__dict__ and "_eq_share" not in space.__dict__:
            if self._cls_rows is None:
                self._cls_rows = space.class_rows(self.rep_T, self.rep_scale)
            space.declare_classes(g, *self._cls_rows)
        return self._variables(space)

    def _same_signature(self, policy: Any, space: AllocationSpace) -> bool:
        """Whether ``policy`` on ``space`` has the kept model's signature (``incremental._signature``).
        The last match is remembered — the policy's class, its options when all are plain values
        (``None``, bool, int, float, str) as ``(name, repr)`` pairs (so ``1``, ``1.0`` and ``True``, or
        ``0.0`` and ``-0.0``, differ there as in the signature), the cluster object and the configuration
        labels — and the same again matches without building the signature (sorted reprs of the options);
        the same options dict holding the same (immutable, plain) objects under the same names matches
        without their reprs."""
        config = policy.config
        labels, cluster = space.configs.labels, space.problem.cluster
        hit = self._sig_hit
        if (hit is not None and hit[4] is config and hit[0] is type(policy) and hit[2] is cluster
                and hit[3] is labels and len(config) == len(hit[5])
                and all(map(operator.is_, config.values(), hit[5])) and all(map(operator.eq, config, hit[6]))):
            return True
        plain = all(v is None or type(v) in (bool, int, float, str) for v in config.values())
        items = tuple((k, repr(v)) for k, v in config.items()) if plain else ()
        if (plain and hit is not None and hit[0] is type(policy) and hit[2] is cluster and items == hit[1]
                and (hit[3] is labels or np.array_equal(hit[3], labels))):
            self._sig_hit = (*hit[:4], config, tuple(config.values()), tuple(config))
            return True
        if _signature(policy, space) != self.signature:
            return False
        self._sig_hit = (type(policy), items, cluster, labels, config, tuple(config.values()), tuple(config)
                         ) if plain else None
        return True

    def _restore(self, mult: np.ndarray) -> None:
        """The reduced LP of multiplicities ``mult`` with the compiled costs and bounds (undoing a
        later stage's changes), in its standard form (pushed to HiGHS before its next run:
        :meth:`sync`); then the kept basis set back. Only the columns, rows and entries of classes
        whose count changed are compared, unless the policy changed costs or bounds since
        (:attr:`_Loaded.touched`)."""
        small = self.small
        if self.loaded.touched:
            self.loaded.touched = False
            self._general_restore(mult, *self._all)
        elif not self._few_counts(mult):
            changed = np.append(mult != self.mult, False)  # (class -1, linking, reads the last: False)
            self._general_restore(mult, changed[self.col_group].nonzero()[0], changed[self.row_group].nonzero()[0],
                                  changed[self.lin_group].nonzero()[0])
        if self.start is not None and small.runs != self.start_runs:
            small.restore_basis(self.start)  # (HiGHS's factorization is of another basis now)
            self.factor = None

    def _variables(self, space: AllocationSpace) -> dict[str, Variable]:
        """The policy's variables over ``space``: a job's columns are its class's columns."""
        out: dict[str, Variable] = {}
        sf = self.small.sf
        lo_ext, hi_ext = self._ext  # (each variable's bounds are gathered from them: copies)
        lo_ext[:-1], hi_ext[:-1] = sf.col_lower, sf.col_upper
        for name, (per_job, dims, cols) in self.variables.items():
            lo, hi = lo_ext[cols], hi_ext[cols]  # (column -1, a masked slot, reads the last entry)
            if per_job:
                dims = (space.rows if dims[0].name == "rows" else space.jobs,) + dims[1:]
                out[name] = ClassVariable(name, dims, cols, lo, hi, self.group)
            else:
                out[name] = Variable(Model(name), name, dims, cols, lo, hi, False)
        return out
