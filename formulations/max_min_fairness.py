"""Heterogeneity-aware max-min fairness (Gavel's LAS).

.. math::  \\max_X \\min_m \\frac{sf_m \\cdot thr(m)}{w_m \\cdot thr(m, X_{equal})}

with ``thr(m) = Σ_c T[m,c]·X[m,c] (+ pair rows)`` and ``X_equal[m,c] = count_c/Σ count``. Written as
an epigraph LP: new free ``t``, rows ``sf_m·thr(m)/(w_m·thr(m,X_equal)) − t ≥ 0``, maximize ``t``.
The objective reported is ``t*``, the optimal smallest weighted normalized throughput.

**Second stage (``fill``, on by default).** The max-min LP has many optimal allocations: only the
bottleneck jobs are pinned, and a vertex solution (simplex) may leave whole worker types idle that
other jobs could use at no cost to ``t*``. So the loaded model is re-solved in place (through the
backend-neutral :class:`~policyopt.solver_api.LoadedModel` updates): ``t`` is held at
``t ≥ t*·(1 − 10⁻⁹)`` and the objective becomes the total normalized throughput

.. math::  \\max_X \\sum_m \\frac{thr(m)}{thr(m, X_{equal})} \\quad\\text{s.t.}\\quad
           \\frac{sf_m\\,thr(m)}{w_m\\,thr(m, X_{equal})} \\ge t^*(1 - 10^{-9})\\;\\forall m

(the same rule as ``makespan -o fill=true``). Among max-min optimal allocations it returns one
where no job could get more throughput from capacity that would otherwise stay idle. This is
one step of water-filling, not all of them: jobs above the minimum are not made max-min fair
among themselves (``max_min_fairness_water_filling`` does that, with more LPs). ``-o fill=false``
returns the first LP's allocation. If the second LP does not solve to optimality, the first
optimum is returned with a ``message``. ``extra["fill"]`` reports its seconds, the smallest level
of the returned allocation (``min_level``, ``t*`` to 10⁻⁹ relative and the solver's feasibility
tolerance) and the total normalized throughput before and after. With ``algorithm=auto`` a policy
object keeps the first LP's basis and starts its next problem's first LP from it, carried by labels
(:mod:`policyopt.warm_start`): after an arrival or a completion, as the simulator re-solves.

``max_min_fairness_agnostic`` is the heterogeneity-agnostic baseline: the policy sees every
throughput as 1 (pairs as their packed/alone ratios), so it shares time, not speed; the reported
effective throughputs use the real data.

**The agnostic optimum, defined (``-o optimum=proportional``).** Seeing every throughput as 1, a
job's level is ``a_m·s_m`` with its time share ``s_m = Σ_c X[m,c]`` and ``a_m = sf_m/(w_m·thr(m,
X_equal))``, so the LP only constrains how much time each job gets, not where: every split of the
shares over the types that fits the capacities is optimal, and which one a solver returns (a vertex
of HiGHS's simplex, another after its IPM's crossover, near the centre with an interior-point
method) changes the schedule. With ``optimum=proportional`` the policy returns one allocation,
computed in closed form without a solver (:func:`proportional_optimum`):

.. math::  s_m = \\min(1, \\tau/a_m), \\qquad X[m,c] = s_m \\cdot \\frac{count_c}{\\sum_{c'} count_{c'}}

with ``τ = ∞`` (every ``s_m = 1``) if ``Σ_m sf_m ≤ C = Σ_c count_c``, else the level at which
``Σ_m sf_m·min(1, τ/a_m) = C`` (water-filling: the shares are the lexicographically max-min fair
ones, so the levels are unique). It is an optimum of the max-min LP: summing the capacity rows
gives ``Σ_m sf_m s_m ≤ C``, which the proportional split meets type by type, so the LP's value is
``t* = min(min_m a_m, C / Σ_m sf_m/a_m)`` and ``min_m a_m s_m = t*`` here. Single-GPU jobs of equal
weight all have ``s_m = min(1, C/n)``, unique; on types of equal counts the split is then the
centre of the face of optima (by symmetry over jobs and types), the point an interior-point solve
such as Gavel's approaches. The ``fill`` option is not read (with equal ``a_m`` no share can grow).
It applies where every job may run on every type with workers (one configuration per type, no
pair rows); elsewhere the LP is solved as with ``optimum=solver`` and ``extra["optimum"]`` says so.
"""
from __future__ import annotations

import time
from typing import ClassVar

import numpy as np

from policyopt import incremental, transport_route
from policyopt._aggregate_parts import ClassVariable, class_values
from policyopt.aggregate_resolve import AggregateModel, Declined
from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model, Variable
from policyopt.policy import LPPolicy, Option, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, SolveResult, Status, Timings
from policyopt.solvers import highs_steps
from policyopt.warm_start import BasisSnapshot, carry_basis, recall, remember

from ._common import LoadedLP
from .makespan import normalized_throughput_costs

#: relative slack on ``t*`` in the second stage (the first optimum satisfies it exactly)
FILL_TOLERANCE = 1e-9


def _dot(a: np.ndarray, b: np.ndarray) -> float:
    """``Σ a·b`` without BLAS: from ~10,000 entries OpenBLAS runs ``a @ b`` on worker threads that
    then spin-wait, costing ~10 ms of CPU per call on another core (more than a 4,096-job solve)."""
    return float(np.add.reduce(a * b))


@register_policy("max_min_fairness")
class MaxMinFairness(LPPolicy):
    """Max-min fairness (LAS): max min_m sf_m·thr(m)/(w_m·thr(m, X_equal)), heterogeneity-aware."""

    pop_combine = "min"  # how POP recombines sub-problem objectives
    degenerate_lp = True  # all jobs tied at the optimum: a hint for algorithm=auto
    incremental_lp = True  # a job's rows use its own data and the cluster only (X_equal is per cluster)
    options: ClassVar[tuple[Option, ...]] = (Option("fill", bool, True,
                      "second in-place LP: among max-min optimal allocations maximize the total normalized "
                      "throughput (no capacity left idle that a job could use at no cost to the minimum)"),)

    agnostic = False

    def data(self, space: AllocationSpace) -> tuple[np.ndarray, np.ndarray]:
        return space.agnostic_throughputs() if self.agnostic else (space.T, space.Tp)

    def normalizer(self, space: AllocationSpace) -> np.ndarray:
        """``sf_m / (w_m·thr(m, X_equal))`` under the data this policy sees (read-only; under the
        space's own data kept on the space while its ``T``, ``scale`` and ``weights`` are the same
        arrays: a solve reads it twice)."""
        T, _ = self.data(space)
        own = T is space.T
        hit = space.__dict__.get("_mmf_normalizer") if own else None
        if hit is not None and hit[0] is space.T and hit[1] is space.scale and hit[2] is space.weights:
            return hit[3]
        out = space.scale / (space.weights * space.equal_share_throughput(T))
        out.flags.writeable = False
        if own:
            space.__dict__["_mmf_normalizer"] = (space.T, space.scale, space.weights, out)
        return out

    def build(self, model: Model, space: AllocationSpace, X: Variable) -> Variable:
        T, Tp = self.data(space)
        return model.maximize_min(space.throughput(X, T, Tp) * self.normalizer(space), "t")

    def solve(self, problem: Problem) -> PolicyResult:
        # small problems: both LPs from the space's arrays (policyopt.transport_route), when it answers
        direct = transport_route.solve_max_min(self, problem, FILL_TOLERANCE)
        if direct is not None:
            return direct
        if not self.config["fill"]:
            return super().solve(problem)
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        kept = incremental.update(self, space)
        if kept is not None:  # the previous problem's model, updated in place to this job set
            st, variables = kept
            try:
                timings.build = time.perf_counter() - t0
                if isinstance(st, AggregateModel):  # both stages in class totals, where they answer
                    totals = self._class_totals_resolve(space, st, variables, timings)
                    if totals is not None:
                        return totals
                lp = LoadedLP.of(self, st.loaded, timings, warm=True)
                return self._solve_loaded(space, lp, variables["X"], variables["t"], timings, st, None, variables)
            except Declined:  # the aggregated re-solve gave no certified answer: the whole LP, cold
                incremental.forget(self)
            finally:
                st.lock.release()
        model = Model(self.name)
        X = space.add_allocation(model)
        t = self.build(model, space, X)
        timings.build = time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        warm = self.config["algorithm"] == "auto"
        prev = recall(self) if warm else None
        if prev is not None and prev.statuses() is not None:
            # the previous problem's max-min basis, carried by labels (an arrival or a completion):
            # optimal there, so dual feasible here — new jobs' columns enter at zero, their rows basic
            lp.set_basis(*carry_basis(prev, model))
        adopted = incremental.adopt(self, space, model, lp.loaded, t)
        try:
            return self._solve_loaded(space, lp, X, t, timings, adopted, model if warm else None)
        finally:
            if adopted is not None:
                adopted.lock.release()

    def _solve_loaded(self, space: AllocationSpace, lp: LoadedLP, X: Variable, t: Variable, timings: Timings,
                      st: incremental.JobSetModel | AggregateModel | None, model: Model | None = None,
                      variables: dict[str, Variable] | None = None) -> PolicyResult:
        """The max-min LP loaded in ``lp``, then its ``fill`` stage in place. The max-min LP's basis
        is kept for the next problem: in ``st`` (the kept model, updated in place) and as a label
        snapshot (:mod:`policyopt.warm_start`) of ``model`` (a cold build) or of ``st``'s
        ``variables`` (a kept model), for a cold build after a change other than of the job set."""
        runs = getattr(lp.loaded, "runs", None)
        raw = lp.solve()
        if st is not None:  # the max-min basis, kept now (the fill stage changes the loaded model)
            st.keep_start(raw.x if raw.status is Status.OPTIMAL else None)
        if variables is not None and st is not None and lp.loaded.has_basis():
            remember(self, st.snapshot(space, variables))  # labels of a kept model (used after a cold build)
        elif model is not None:  # this LP's basis, copied now (the fill stage changes it), converted when used
            remember(self, BasisSnapshot(model, source=lp.loaded.basis_reader()) if lp.loaded.has_basis() else None)
        return self._fill_stage(space, lp, X, t, timings, st, raw, runs)

    def _fill_stage(self, space: AllocationSpace, lp: LoadedLP, X: Variable, t: Variable, timings: Timings,
                    st: incremental.JobSetModel | AggregateModel | None, raw: SolveResult, runs: int | None,
                    steps_tried: bool = False) -> PolicyResult:
        """The ``fill`` stage from the max-min LP's answer ``raw`` in ``lp``, and the result: by
        class (:meth:`_fill_by_class`), else by steps on a kept factorization, else by HiGHS
        (``steps_tried``: the steps were tried already and gave none, so HiGHS)."""
        if raw.status is not Status.OPTIMAL or raw.x is None:
            Xf, msg = self.fallback(space, raw, X)
            return self.result(space, Xf, raw.status, None, raw.solver, timings, msg)
        T, Tp = self.data(space)
        t_col = LoadedLP.cols(t)  # t's one column
        if isinstance(st, AggregateModel) and T is space.T and not steps_tried:
            by_class = self._fill_by_class(space, X, st, raw.x, raw.solver, t_col, timings)
            if by_class is not None:
                return by_class
        cols, costs = normalized_throughput_costs(space, X, T, Tp)
        t_star = float(raw.x[t_col[0]])
        before = _dot(costs, raw.x[cols])
        t1 = time.perf_counter()
        t_low = t_star - FILL_TOLERANCE * abs(t_star)
        x, message = raw.x, ""
        steps = None if steps_tried else self._fill_steps(lp, runs, raw.x, cols, costs, t_col, t_low)
        if steps is not None:  # taken on HiGHS's factorization; the loaded model is unchanged
            x = steps.x
        else:
            lp.set_col_bounds(t_col, t_low, np.inf)
            lp.set_costs(np.concatenate([t_col, cols]), np.concatenate([[0.0], costs]))  # one call
            raw2 = lp.solve()
            if raw2.status is Status.OPTIMAL and raw2.x is not None:
                x = raw2.x
            else:
                message = f"second stage (fill) ended {raw2.status.value}: returning the max-min optimum without it"
        Xv = X.value(x)
        level = self.normalizer(space) * space.throughput_values(np.minimum(np.maximum(Xv, 0.0), 1.0), T, Tp)
        fill = {"seconds": time.perf_counter() - t1, "min_level": float(level.min()) if level.size else t_star,
                "normalized_throughput_before": before, "normalized_throughput_after": _dot(costs, x[cols]),
                "steps": None if steps is None else steps.steps}
        return self.result(space, Xv, Status.OPTIMAL, t_star, raw.solver, timings, message, fill=fill)

    def _class_totals_resolve(self, space: AllocationSpace, st: AggregateModel, variables: dict[str, Variable],
                              timings: Timings) -> PolicyResult | None:
        """A re-solve whose both stages the kept model's class totals answer
        (:mod:`policyopt.aggregate_epigraph`): the max-min LP's point
        (:meth:`~policyopt.aggregate_resolve._Loaded.totals_answer`, certified), then the ``fill``
        stage by class (:meth:`_fill_by_class`) — the same answer as the general path's, without
        its wrappers. ``None`` where the totals do not answer the max-min LP (then the general path,
        which goes to the kept factorization, then HiGHS)."""
        X, t = variables["X"], variables["t"]
        t0 = time.perf_counter()
        got = st.loaded.totals_answer(duals=False)
        if got is None:
            return None
        x = got[0]
        timings.solve += time.perf_counter() - t0
        st.keep_start(x)
        data = self._class_data(space, st, X, x)
        if data is not None:
            found = self._fill_by_class(space, X, st, x, "highs", LoadedLP.cols(t), timings, data)
            if found is not None:
                return found
            tried = True  # (the fill stage's steps gave none: HiGHS runs it, from this answer)
        else:  # (not per class: the general path's fill from this answer)
            tried = False
        lp = LoadedLP.of(self, st.loaded, timings, warm=True)
        lp.solves = 1  # (the loaded model's next solve is a re-solve)
        return self._fill_stage(space, lp, X, t, timings, st, st.loaded._result(*got, "class totals", t0), None,
                                steps_tried=tried)

    def _class_data(self, space: AllocationSpace, st: AggregateModel, X: Variable, x: np.ndarray
                    ) -> tuple[np.ndarray, ...] | None:
        """What the ``fill`` stage by class reads of the kept model's classes, computed once per kept
        model (the classes' data, mask rows and equal shares do not change while it is kept):
        the class columns of ``X`` (each once, read-only), their unit costs
        ``T[g,c]/thr(g, X_equal)`` (read-only), each one's class, each class's normalizer
        ``sf_g/(w_g·thr(g, X_equal))``, ``X``'s class columns (classes × configs, ``-1`` none), the
        classes' mask rows and their throughputs there (0 elsewhere); ``None`` where the answer is
        not per class (the policy sees other data, ``X`` is not read per class on the space's
        declared classes (``x``: an answer it is read from), or the space computes throughputs its
        own way)."""
        cls = space.declared_classes()
        if (cls is None or not isinstance(X, ClassVariable) or class_values(X, space, x) is None
                or type(space).throughput_matrix is not AllocationSpace.throughput_matrix
                or self.data(space)[0] is not space.T):
            return None
        cc = X.class_cols
        hit = st.policy_data
        if hit is not None and hit[0] is cc and hit[1] is cls[1] and hit[2] is cls[2]:
            return hit[3]
        _, mask_c, eq_c = cls
        unit = np.zeros(st.rep_T.shape)  # (classes × configs) T[g,c]/thr(g, X_equal) where the class can run
        np.divide(st.rep_T, eq_c[:, None], out=unit, where=mask_c)
        ok = cc >= 0
        cols, per_col = cc[ok], unit[ok]
        gcol = np.broadcast_to(np.arange(cc.shape[0])[:, None], cc.shape)[ok]
        norm_c = st.rep_scale / (st.rep_weights * eq_c)  # (the normalizer of each class's jobs)
        for a in (cols, per_col):
            a.flags.writeable = False
        data = (cols, per_col, gcol, norm_c, cc, mask_c, np.where(mask_c, st.rep_T, 0.0))
        st.policy_data = (cc, mask_c, eq_c, data)
        return data

    def _fill_by_class(self, space: AllocationSpace, X: Variable, st: AggregateModel, x0: np.ndarray, solver: str,
                       t_col: np.ndarray, timings: Timings, data: tuple[np.ndarray, ...] | None = None
                       ) -> PolicyResult | None:
        """The ``fill`` stage and the result of an aggregated re-solve (``x0``: the max-min LP's
        answer, by ``solver``; ``t_col``: ``t``'s column) computed per class of jobs of equal data
        (their costs, levels and allocation rows are equal) and gathered once: each class column's
        cost in the reduced LP is ``m_g`` times its jobs' ``T[g,c]/thr(g, X_equal)`` (what
        :meth:`_Loaded.set_costs` sums per job), the levels' minimum is over classes with jobs, and
        the normalized throughput totals are ``Σ_g m_g (…)``. ``None`` where the stage is not taken
        by steps on the kept factorization or the answer is not per class (then per job, as a cold
        solve). ``data``: :meth:`_class_data`'s, where the caller has it."""
        if data is None:
            data = self._class_data(space, st, X, x0)
        if data is None:
            return None
        cols, unit, gcol, norm_c, cc, mask_c, T_m = data
        costs = unit * st.mult.take(gcol)  # m_g c_g
        t_star = float(x0[t_col[0]])
        t1 = time.perf_counter()
        t_low = t_star - FILL_TOLERANCE * abs(t_star)
        steps = st.loaded.reoptimize_costs(x0, cols, costs, t_col, t_low, unit)
        if steps is None:
            return None
        x = steps.x
        # clipped to [0, 1], −0.0 read 0.0, 0 outside the mask rows (Policy.result's), once
        Xc = np.minimum(np.maximum(np.where(cc >= 0, x.take(cc), 0.0), 0.0), 1.0)
        Xc += 0.0
        Xc[~mask_c] = 0.0
        if st.n_dead:  # (the levels of classes with jobs)
            live = st.mult > 0
            level = norm_c[live] * _class_throughputs(Xc[live], T_m[live])
        else:
            level = norm_c * _class_throughputs(Xc, T_m)
        fill = {"seconds": time.perf_counter() - t1, "min_level": float(level.min()) if level.size else t_star,
                "normalized_throughput_before": _dot(costs, x0[cols]),
                "normalized_throughput_after": _dot(costs, x[cols]), "steps": steps.steps}
        return self.class_result(space, Xc, Status.OPTIMAL, t_star, solver, timings, "", clipped=True, fill=fill)

    @staticmethod
    def _fill_steps(lp: LoadedLP, runs: int | None, x: np.ndarray, cols: np.ndarray, costs: np.ndarray,
                    t_col: np.ndarray, t_low: float) -> highs_steps.Steps | None:
        """The fill stage as a few primal simplex steps on the factorization HiGHS kept from the
        max-min LP's simplex run (:func:`policyopt.solvers.highs_steps.reoptimize`: certified on the
        whole LP, the loaded model unchanged), or ``None`` (then HiGHS runs it). A loaded model
        with its own ``reoptimize`` (the aggregated re-solve's reduced LP) takes the steps itself."""
        own = getattr(lp.loaded, "reoptimize", None)
        if own is not None:
            return own(x, cols, costs, t_col, t_low)
        if runs is None or not highs_steps.ready(lp.loaded, runs):
            return None
        sf = lp.sf
        c = np.zeros(sf.num_cols)
        c[cols] = costs
        lower = sf.col_lower.copy()
        lower[t_col] = t_low
        return highs_steps.reoptimize(lp.loaded, x, c, lower, sf.col_upper)


def _class_throughputs(X: np.ndarray, T: np.ndarray) -> np.ndarray:
    """``thr`` of rows ``X`` (classes × configs, 0 outside each class's mask row) of data ``T`` (0
    outside the mask rows), by the running sum over the configurations of
    :meth:`AllocationSpace.throughput_values` (the same numbers as a job's of that class)."""
    P = T * X
    out = P[:, 0].copy()
    for c in range(1, P.shape[1]):
        out += P[:, c]
    return out + 0.0


def proportional_optimum(space: AllocationSpace, a: np.ndarray) -> tuple[np.ndarray, float] | None:
    """The agnostic max-min LP's defined optimum (module docstring): ``(X, t*)`` with ``X`` of shape
    (jobs × configs), ``X[m,c] = s_m·count_c/C``, ``s_m = min(1, τ/a_m)`` (``a`` the jobs' levels per
    unit of time share, positive), or ``None`` where the closed form does not apply: pair rows,
    several configurations of one type, or a job that cannot run on a type with workers."""
    if space.num_pairs or np.unique(space.config_type).size != space.config_type.size:
        return None
    counts = space.counts[space.config_type].astype(float)
    live = counts > 0
    if not np.array_equal(space.single_mask, np.broadcast_to(live, space.single_mask.shape)):
        return None
    n = a.size
    total = float(counts.sum())
    sf = space.scale.astype(float)
    if n == 0 or total <= 0.0:
        return np.zeros((n, counts.size)), 0.0
    if float(sf.sum()) <= total:
        s = np.ones(n)
    else:  # k jobs of the smallest a saturated (s = 1), the rest at level τ_k = (C − Σ_sat sf)/Σ_rest sf/a
        order = np.argsort(a, kind="stable")
        a_s, sf_s = a[order], sf[order]
        sat = np.concatenate([[0.0], np.cumsum(sf_s)[:-1]])  # Σ sf of the k saturated jobs, k = 0..n-1
        rest = np.cumsum((sf_s / a_s)[::-1])[::-1]  # Σ sf/a of jobs k..n-1
        tau = (total - sat) / rest
        # the largest k whose saturated jobs have a ≤ τ_k: saturating one job too many leaves
        # τ_k < τ* < that job's a (then a_(k-1) > τ_k); k = 0 always qualifies
        below = np.concatenate([[True], a_s[:-1] <= tau[1:]])
        k = int(np.flatnonzero(below)[-1])
        s = np.minimum(1.0, tau[k] / a)
    X = s[:, None] * (counts / total)[None, :]
    return X, float(np.min(a * s))


@register_policy("max_min_fairness_agnostic")
class MaxMinFairnessAgnostic(MaxMinFairness):
    """Heterogeneity-agnostic max-min fairness: every throughput seen as 1 (baseline)."""

    agnostic = True
    incremental_lp = True  # a job's agnostic throughputs come from its own allowed slots
    options = (*MaxMinFairness.options,
               Option("optimum", str, "solver",
                      "which of the LP's many optima: 'solver' (the one the solve returns: a vertex, or near the "
                      "centre with an interior-point solver), 'proportional' (defined, in closed form, without "
                      "a solver: water-filled time shares, each split over the types in proportion to their "
                      "counts; the same on every solver path)", ("solver", "proportional")),)

    def solve(self, problem: Problem) -> PolicyResult:
        if self.config["optimum"] != "proportional":
            return super().solve(problem)
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        found = proportional_optimum(space, self.normalizer(space))
        if found is None:
            res = super().solve(problem)
            res.extra["optimum"] = ("solver: optimum=proportional needs every job allowed on every type with "
                                    "workers, one configuration per type and no pair rows")
            return res
        X, t_star = found
        timings.solve = time.perf_counter() - t0
        return self.result(space, space.full_from_single(X), Status.OPTIMAL, t_star, "closed form", timings,
                           optimum="proportional")
