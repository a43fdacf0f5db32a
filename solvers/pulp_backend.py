"""PuLP backend: CBC (default) or PuLP's HiGHS interface (``pulp:HiGHS``).

PuLP is scalar by design: one ``LpVariable`` per column and one ``LpAffineExpression`` per row,
so building is O(nnz) Python work (the slow reference backend). Ranged rows become two
constraints. No in-place updates: a re-solve rebuilds.
"""
from __future__ import annotations

import time

import numpy as np

from policyopt.result import SolveResult, Status, Timings
from policyopt.solver_api import Feature, LoadedModel, RebuildingModel, Solver, SolverOptions, register_solver
from policyopt.standard_form import StandardForm


def _solve_pulp(sf: StandardForm, options: SolverOptions, sub: str | None) -> SolveResult:
    import pulp

    if sub is not None and sub.lower() == "highs":
        from .highs import silence_banner

        silence_banner()
    t0 = time.perf_counter()
    sense = pulp.LpMaximize if sf.sense == "max" else pulp.LpMinimize
    prob = pulp.LpProblem("policyopt", sense)
    lo = [None if not np.isfinite(v) else float(v) for v in sf.col_lower]
    hi = [None if not np.isfinite(v) else float(v) for v in sf.col_upper]
    cat = [pulp.LpInteger if sf.integrality[j] else pulp.LpContinuous for j in range(sf.num_cols)]
    if hasattr(prob, "add_variable"):
        xs = [prob.add_variable(f"x{j}", lo[j], hi[j], cat=cat[j]) for j in range(sf.num_cols)]
    else:  # PuLP < 3.3
        xs = [pulp.LpVariable(f"x{j}", lo[j], hi[j], cat[j]) for j in range(sf.num_cols)]
    prob += pulp.LpAffineExpression([(xs[j], float(sf.c[j])) for j in np.flatnonzero(sf.c)]) + float(sf.offset)
    A = sf.A.tocsr()
    ge_names: dict[int, str] = {}
    le_names: dict[int, str] = {}
    for i in range(sf.num_rows):
        s, e = A.indptr[i], A.indptr[i + 1]
        expr = pulp.LpAffineExpression([(xs[j], float(v)) for j, v in zip(A.indices[s:e], A.data[s:e])])
        rl, ru = sf.row_lower[i], sf.row_upper[i]
        if np.isfinite(rl) and np.isfinite(ru) and rl == ru:
            prob += (expr == float(rl)), f"e{i}"
            ge_names[i] = f"e{i}"
            continue
        if np.isfinite(rl):
            prob += (expr >= float(rl)), f"g{i}"
            ge_names[i] = f"g{i}"
        if np.isfinite(ru):
            prob += (expr <= float(ru)), f"l{i}"
            le_names[i] = f"l{i}"
    name = sub or ("COIN_CMD" if _coin_cmd_available() else "PULP_CBC_CMD")
    kw = dict(options.extra)
    kw.setdefault("msg", bool(options.verbose))
    if options.time_limit is not None:
        kw.setdefault("timeLimit", options.time_limit)
    if sf.is_mip:
        kw.setdefault("gapRel", options.mip_rel_gap)
    solver = pulp.getSolver(name, **kw)
    t1 = time.perf_counter()
    prob.solve(solver)
    t2 = time.perf_counter()
    st = prob.status
    sol_status = getattr(prob, "sol_status", None)
    status = {1: Status.OPTIMAL, -1: Status.INFEASIBLE, -2: Status.UNBOUNDED}.get(st, Status.ERROR)
    if status is Status.OPTIMAL and sol_status == 2:  # feasible, stopped by the time limit
        status = Status.TIME_LIMIT
    if st == 0 and options.time_limit is not None:
        status = Status.TIME_LIMIT
    res = SolveResult(status, None, None, solver=f"pulp:{name}", options={"solver": name, **kw},
                      message=pulp.LpStatus.get(st, str(st)))
    if status is Status.OPTIMAL or (status is Status.TIME_LIMIT and all(v.varValue is not None for v in xs)):
        res.x = np.array([v.varValue if v.varValue is not None else 0.0 for v in xs], dtype=np.float64)
        res.objective = float(sf.c @ res.x + sf.offset)
        if not sf.is_mip:
            get = getattr(prob, "get_constraint_by_name", None) or prob.constraints.__getitem__
            y = np.zeros(sf.num_rows)
            for names in (ge_names, le_names):
                for i, nm in names.items():
                    pi = get(nm).pi
                    y[i] += pi if pi is not None else 0.0
            # PuLP's HiGHS interface solves max problems as min(-c) and reports those duals; CBC
            # reports them for the max problem itself. Map both to HiGHS's convention.
            if name.lower() == "highs" and sf.sense == "max":
                y = -y
            res.row_duals = sf.unscale_duals(y)
    res.timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return res


def _coin_cmd_available() -> bool:
    import pulp

    try:
        return bool(pulp.getSolver("COIN_CMD", msg=False).available())
    except Exception:  # noqa: BLE001 - probing only
        return False


@register_solver
class PulpSolver(Solver):
    """PuLP with CBC (default) or ``pulp:HiGHS``."""

    name = "pulp"
    features = Feature.LP | Feature.MILP | Feature.DUALS | Feature.TIME_LIMIT
    required_modules = ("pulp",)
    doc = "PuLP (CBC by default; pulp:HiGHS for PuLP's HiGHS interface); scalar, slow to build"

    def __init__(self, sub: str | None = None) -> None:
        if sub:
            import pulp

            from policyopt.errors import UnknownNameError

            known = pulp.listSolvers(onlyAvailable=True)
            if sub not in known:
                raise UnknownNameError("solver", f"pulp:{sub}", [f"pulp:{k}" for k in known])
        self.sub = sub

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        return RebuildingModel(sf, options, lambda f, o: _solve_pulp(f, o, self.sub))
