"""SCIP backend through PySCIPOpt, for MILPs (and LPs, through SoPlex).

The model reaches SCIP as a file: written as MPS by HiGHS's writer (C++, one pass) and read by
SCIP's reader, which avoids building SCIP's per-row expressions in Python; the solution comes back
the same way (SCIP's solution file, columns ``c<index>``). Both are counted in the build and
extract phases. ``mip_rel_gap`` becomes ``limits/gap``, ``time_limit`` ``limits/time``; ``extra``
holds SCIP parameters by name (``{"presolving/maxrounds": 0}``); ``numerics/feastol`` defaults to
:data:`FEASTOL`. No duals (SCIP's LP duals after
presolve are not those of the original rows), no in-place updates.
"""
from __future__ import annotations

import os
import tempfile
import time
from typing import Any

import numpy as np

from policyopt.errors import SolverError
from policyopt.result import SolveResult, Status, Timings
from policyopt.solver_api import (
    Feature,
    LoadedModel,
    RebuildingModel,
    Solver,
    SolverOptions,
    get_solver,
    register_solver,
)
from policyopt.standard_form import StandardForm

#: SCIP's feasibility tolerance here (its default is 1e-6): the water-filling bottleneck MILPs ask
#: whether a job can gain more than ~1e-7, which a 1e-6 row tolerance answers wrongly
FEASTOL = 1e-9


def _read_values(path: str, n: int) -> np.ndarray:
    """``c<index> value`` lines of a SCIP solution file (zeros are omitted there)."""
    x = np.zeros(n)
    with open(path) as fh:
        for line in fh:
            parts = line.split()
            if len(parts) >= 2 and parts[0].startswith("c") and parts[0][1:].isdigit():
                x[int(parts[0][1:])] = float(parts[1])
    return x


def _solve_scip(sf: StandardForm, options: SolverOptions) -> SolveResult:
    import highspy
    import pyscipopt

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="policyopt-scip-") as tmp:
        mps = os.path.join(tmp, "model.mps")
        writer: Any = get_solver("highs").load(sf, SolverOptions())
        if writer.h.writeModel(mps) == highspy.HighsStatus.kError:
            raise SolverError("HiGHS could not write the model as MPS for SCIP")
        del writer
        m = pyscipopt.Model()
        if not options.verbose:
            m.hideOutput()
        m.readProblem(mps)
        if options.time_limit is not None:
            m.setParam("limits/time", float(options.time_limit))
        if sf.is_mip:
            m.setParam("limits/gap", float(options.mip_rel_gap))
        if options.threads is not None:
            m.setParam("parallel/maxnthreads", int(options.threads))
        for k, v in {"numerics/feastol": FEASTOL, **options.extra}.items():
            try:
                m.setParam(k, v)
            except (KeyError, LookupError, TypeError, ValueError) as exc:
                raise SolverError(f"SCIP setParam({k!r}, {v!r}) failed: {exc}") from None
        t1 = time.perf_counter()
        m.optimize()
        t2 = time.perf_counter()
        st = m.getStatus()
        status = {"optimal": Status.OPTIMAL, "gaplimit": Status.OPTIMAL, "infeasible": Status.INFEASIBLE,
                  "unbounded": Status.UNBOUNDED, "inforunbd": Status.INFEASIBLE,
                  "timelimit": Status.TIME_LIMIT}.get(st, Status.ERROR)
        res = SolveResult(status, None, None, solver="scip", message=st,
                          options={"time_limit": options.time_limit, "mip_rel_gap": options.mip_rel_gap,
                                   **options.extra})
        if m.getNSols() > 0 and status in (Status.OPTIMAL, Status.TIME_LIMIT):
            sol_path = os.path.join(tmp, "best.sol")
            m.writeBestSol(sol_path)
            res.x = _read_values(sol_path, sf.num_cols)
            res.objective = sf.objective_value(res.x)
    res.timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return res


@register_solver
class ScipSolver(Solver):
    """SCIP (branch-and-cut; SoPlex for LPs) through PySCIPOpt."""

    name = "scip"
    features = Feature.LP | Feature.MILP | Feature.TIME_LIMIT
    required_modules = ("pyscipopt",)
    doc = "SCIP through PySCIPOpt (model passed as MPS); MILP and LP, no duals"

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        return RebuildingModel(sf, options, _solve_scip)
