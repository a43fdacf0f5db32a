"""OR-Tools backend: GLOP (primal/dual simplex, the default) or PDLP (primal-dual hybrid gradient, a
first-order method for large LPs) through OR-Tools' model builder.

The whole model is handed over in one call (``ModelBuilderHelper.fill_model_from_sparse_data``:
bounds, costs and the CSR matrix as arrays). LPs only. PDLP stops when its relative duality gap
and residuals are below ``pdlp_eps`` (default 1e-8; OR-Tools' own default is 1e-6), so its optimum
agrees with a simplex optimum to about that relative accuracy — not to simplex's 1e-9. Duals are
returned in HiGHS's convention (sensitivity of the optimal objective to the row's active bound).
GLOP reports an unbounded LP as infeasible, so an infeasible answer is checked by a solve with a
zero objective (feasible → ``UNBOUNDED``); PDLP leaves an unbounded LP ``NOT_SOLVED`` (→ ``ERROR``).
No in-place updates: a re-solve rebuilds. ``ortools:glop`` / ``ortools:pdlp`` choose; with
``ortools`` alone, ``algorithm="pdlp"`` picks PDLP.
"""
from __future__ import annotations

import time
from typing import Any

import numpy as np

from policyopt.errors import SolverError, UnknownNameError
from policyopt.result import SolveResult, Status, Timings
from policyopt.solver_api import (
    Feature,
    LoadedModel,
    RebuildingModel,
    Solver,
    SolverOptions,
    register_solver,
)
from policyopt.standard_form import StandardForm

_SUBS = ("glop", "pdlp")
#: PDLP's relative and absolute optimality tolerance unless ``extra["pdlp_eps"]`` says otherwise
PDLP_EPS = 1e-8


def _solve_ortools(sf: StandardForm, options: SolverOptions, sub: str) -> SolveResult:
    from ortools.linear_solver.python import model_builder_helper as mbh

    t0 = time.perf_counter()
    if sf.is_mip:
        raise SolverError(f"ortools:{sub} solves LPs only; this model has integer columns")
    model = mbh.ModelBuilderHelper()
    lo, hi, c, rlo, rhi = (np.ascontiguousarray(a, np.float64)
                           for a in (sf.col_lower, sf.col_upper, sf.c, sf.row_lower, sf.row_upper))
    fill: Any = model.fill_model_from_sparse_data  # (OR-Tools' stubs mistype the arrays)
    fill(lo, hi, c, rlo, rhi, sf.A.tocsr())
    model.set_maximize(sf.sense == "max")
    model.set_objective_offset(float(sf.offset))
    solver = mbh.ModelSolverHelper(sub)
    if not solver.solver_is_supported():
        raise SolverError(f"this OR-Tools build has no {sub!r} solver")
    solver.enable_output(bool(options.verbose))
    if options.time_limit is not None:
        solver.set_time_limit_in_seconds(float(options.time_limit))
    extra = dict(options.extra)
    params = str(extra.pop("parameters", ""))
    if sub == "pdlp":
        eps = float(extra.pop("pdlp_eps", PDLP_EPS))
        params = (f"termination_criteria {{ simple_optimality_criteria {{ eps_optimal_relative: {eps!r} "
                  f"eps_optimal_absolute: {eps!r} }} }} " + params)
    if extra:
        raise SolverError(f"ortools:{sub}: unknown options {sorted(extra)} (use 'parameters' for the solver's "
                          "own parameter text, and 'pdlp_eps' for PDLP's tolerance)")
    if params:
        solver.set_solver_specific_parameters(params)
    t1 = time.perf_counter()
    solver.solve(model)
    t2 = time.perf_counter()
    S = mbh.SolveStatus
    st = solver.status()
    status = {S.OPTIMAL: Status.OPTIMAL, S.INFEASIBLE: Status.INFEASIBLE, S.UNBOUNDED: Status.UNBOUNDED,
              S.FEASIBLE: Status.TIME_LIMIT}.get(st, Status.ERROR)
    if st == S.INFEASIBLE:
        # GLOP reports an unbounded LP as infeasible: with a zero objective a feasible LP solves
        model.clear_objective()
        solver.solve(model)
        if solver.status() == S.OPTIMAL:
            status = Status.UNBOUNDED
    if status is Status.ERROR and options.time_limit is not None and t2 - t1 >= 0.99 * options.time_limit:
        status = Status.TIME_LIMIT
    res = SolveResult(status, None, None, solver=f"ortools:{sub}", message=str(st).split(".")[-1],
                      options={"solver": sub, "time_limit": options.time_limit, "parameters": params})
    if solver.has_solution() and status in (Status.OPTIMAL, Status.TIME_LIMIT):
        res.x = np.asarray(solver.variable_values(), np.float64).reshape(sf.num_cols)
        res.objective = sf.objective_value(res.x)
        if status is Status.OPTIMAL and sf.num_rows:
            # OR-Tools' duals are d(objective)/d(rhs) for both senses: HiGHS's convention already
            y = np.asarray(solver.dual_values(), np.float64).reshape(sf.num_rows)
            res.row_duals = sf.unscale_duals(y)
    res.timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return res


@register_solver
class OrToolsSolver(Solver):
    """OR-Tools GLOP (simplex) or PDLP (first-order; ``ortools:pdlp``)."""

    name = "ortools"
    features = Feature.LP | Feature.DUALS | Feature.TIME_LIMIT
    required_modules = ("ortools",)
    doc = "OR-Tools: GLOP simplex (ortools:glop, default) or PDLP first-order (ortools:pdlp, rel. tol 1e-8); LP only"

    def __init__(self, sub: str | None = None) -> None:
        if sub is not None and sub.lower() not in _SUBS:
            raise UnknownNameError("solver", f"ortools:{sub}", [f"ortools:{s}" for s in _SUBS])
        self.sub = sub.lower() if sub else None

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        sub = self.sub or ("pdlp" if options.algorithm == "pdlp" else "glop")
        return RebuildingModel(sf, options, lambda f, o: _solve_ortools(f, o, sub))
