"""cvxpy backend: any installed cvxpy solver (``cvxpy`` = Clarabel for LPs, HiGHS for MILPs;
``cvxpy:SCS``, ``cvxpy:HIGHS``, ... to choose).

The standard form becomes ``A_lo x ≥ lo`` (rows with a finite lower bound) and ``A_hi x ≤ hi``
(finite upper bound) on one vector variable; duals are mapped to HiGHS's convention (sensitivity of
the optimal objective to the row's active bound). No in-place updates: a re-solve rebuilds.
"""
from __future__ import annotations

import time

import numpy as np

from policyopt.errors import SolverError
from policyopt.result import SolveResult, Status, Timings
from policyopt.solver_api import Feature, LoadedModel, RebuildingModel, Solver, SolverOptions, register_solver
from policyopt.standard_form import StandardForm


def _solve_cvxpy(sf: StandardForm, options: SolverOptions, sub: str | None) -> SolveResult:
    import cvxpy as cp

    t0 = time.perf_counter()
    n = sf.num_cols
    int_idx = np.flatnonzero(sf.integrality)
    x = cp.Variable(n)
    A = sf.A.tocsr()
    fin_lo = np.flatnonzero(np.isfinite(sf.row_lower))
    fin_hi = np.flatnonzero(np.isfinite(sf.row_upper))
    cons = []
    if fin_lo.size:
        cons.append(A[fin_lo] @ x >= sf.row_lower[fin_lo])
    if fin_hi.size:
        cons.append(A[fin_hi] @ x <= sf.row_upper[fin_hi])
    cl = np.flatnonzero(np.isfinite(sf.col_lower))
    cu = np.flatnonzero(np.isfinite(sf.col_upper))
    if cl.size:
        cons.append(x[cl] >= sf.col_lower[cl])
    if cu.size:
        cons.append(x[cu] <= sf.col_upper[cu])
    if int_idx.size:  # integer columns tied to an integer variable
        cons.append(x[int_idx] == cp.Variable(int_idx.size, integer=True))
    obj_expr = sf.c @ x + sf.offset
    prob = cp.Problem(cp.Maximize(obj_expr) if sf.sense == "max" else cp.Minimize(obj_expr), cons)
    solver = sub or ("HIGHS" if int_idx.size else "CLARABEL")
    kwargs = dict(options.extra)
    if options.time_limit is not None and solver == "HIGHS":
        kwargs.setdefault("time_limit", options.time_limit)
    if solver == "CLARABEL":
        kwargs.setdefault("tol_gap_abs", 1e-10)
        kwargs.setdefault("tol_gap_rel", 1e-10)
        kwargs.setdefault("tol_feas", 1e-10)
    if solver.upper() == "HIGHS":
        from .highs import silence_banner

        silence_banner()
    t1 = time.perf_counter()
    try:
        prob.solve(solver=solver, verbose=options.verbose, **kwargs)
    except cp.error.SolverError as exc:
        return SolveResult(Status.ERROR, None, None, solver=f"cvxpy:{solver}", message=str(exc),
                           timings=Timings(build=t1 - t0, solve=time.perf_counter() - t1))
    except Exception as exc:  # cvxpy raises assorted errors for bad solver kwargs
        raise SolverError(f"cvxpy solve with solver {solver!r} and options {kwargs} failed: {exc}") from exc
    t2 = time.perf_counter()
    st = prob.status
    status = {cp.OPTIMAL: Status.OPTIMAL, cp.OPTIMAL_INACCURATE: Status.OPTIMAL_INACCURATE,
              cp.INFEASIBLE: Status.INFEASIBLE, cp.INFEASIBLE_INACCURATE: Status.INFEASIBLE,
              cp.UNBOUNDED: Status.UNBOUNDED, cp.UNBOUNDED_INACCURATE: Status.UNBOUNDED,
              cp.USER_LIMIT: Status.TIME_LIMIT}.get(st, Status.ERROR)
    res = SolveResult(status, None, None, solver=f"cvxpy:{solver}", options={"solver": solver, **kwargs},
                      message=str(st))
    if status is Status.OPTIMAL or (status in (Status.OPTIMAL_INACCURATE, Status.TIME_LIMIT) and x.value is not None):
        res.x = np.asarray(x.value, dtype=np.float64).reshape(n) if n else np.zeros(0)
        res.objective = float(sf.c @ res.x + sf.offset)
        if not int_idx.size:
            y = np.zeros(sf.num_rows)
            k = 0
            sign = 1.0 if sf.sense == "min" else -1.0
            if fin_lo.size:
                y[fin_lo] += sign * np.asarray(cons[k].dual_value).reshape(-1)
                k += 1
            if fin_hi.size:
                y[fin_hi] -= sign * np.asarray(cons[k].dual_value).reshape(-1)
            res.row_duals = sf.unscale_duals(y)
    res.timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return res


@register_solver
class CvxpySolver(Solver):
    """cvxpy with any installed solver (``cvxpy:NAME``); Clarabel for LPs and HiGHS for MILPs by default."""

    name = "cvxpy"
    features = Feature.LP | Feature.MILP | Feature.DUALS | Feature.TIME_LIMIT
    required_modules = ("cvxpy",)
    doc = "cvxpy (Clarabel by default for LPs, HiGHS for MILPs; cvxpy:SOLVER to choose)"

    def __init__(self, sub: str | None = None) -> None:
        if sub:
            import cvxpy as cp

            from policyopt.errors import UnknownNameError

            if sub.upper() not in cp.installed_solvers():
                raise UnknownNameError("solver", f"cvxpy:{sub}", [f"cvxpy:{k}" for k in cp.installed_solvers()])
        self.sub = sub.upper() if sub else None

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        return RebuildingModel(sf, options, lambda f, o: _solve_cvxpy(f, o, self.sub))
