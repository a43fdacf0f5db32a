"""NVIDIA cuOpt backend (GPU PDLP for LPs, GPU MILP), through cuOpt's ``DataModel`` + ``Solve`` API.

Available only where the ``cuopt`` package is installed **and** an NVIDIA GPU is visible
(:func:`unavailable_reason` says which is missing; the suite and tests skip with that message).
The model is handed over as arrays: the CSR matrix (``set_csr_constraint_matrix``), row and
column bounds, costs and variable types; maximization is passed as minimization of ``−c`` (the
objective offset is added back here). cuOpt's LP default is PDLP, a first-order method: with the
optimality tolerance set to 1e-8 (``set_optimality_tolerance``) its optimum agrees with a simplex
optimum to about that relative accuracy. ``time_limit`` → the ``time_limit`` parameter,
``mip_rel_gap`` → ``mip_relative_gap``; ``extra`` holds further cuOpt parameters by name. Duals
(``get_dual_solution``) are mapped to HiGHS's convention for LPs.
"""
from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import time

import numpy as np

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

#: cuOpt's LP optimality tolerance here (its default is 1e-4 relative)
EPS = 1e-8


def _gpu_visible() -> bool:
    """An NVIDIA GPU is visible to this process (device node, or ``nvidia-smi -L`` lists one)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    if os.path.exists("/dev/nvidiactl") and any(os.path.exists(f"/dev/nvidia{i}") for i in range(16)):
        return True
    smi = shutil.which("nvidia-smi")
    if smi is None:
        return False
    try:
        out = subprocess.run([smi, "-L"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return False
    return out.returncode == 0 and "GPU" in out.stdout


def unavailable_reason() -> str | None:
    """Why cuOpt cannot run here (``None`` when it can)."""
    if importlib.util.find_spec("cuopt") is None:
        return "the cuopt package is not installed (pip install cuopt-cu12 on a machine with an NVIDIA GPU)"
    if not _gpu_visible():
        return "no NVIDIA GPU is visible (cuOpt runs on the GPU only)"
    return None


def _solve_cuopt(sf: StandardForm, options: SolverOptions) -> SolveResult:
    from cuopt import linear_programming as lp

    t0 = time.perf_counter()
    A = sf.A.tocsr()
    sign = -1.0 if sf.sense == "max" else 1.0
    dm = lp.DataModel()
    dm.set_csr_constraint_matrix(np.ascontiguousarray(A.data, np.float64), A.indices.astype(np.int32),
                                 A.indptr.astype(np.int32))
    dm.set_constraint_lower_bounds(np.ascontiguousarray(sf.row_lower, np.float64))
    dm.set_constraint_upper_bounds(np.ascontiguousarray(sf.row_upper, np.float64))
    dm.set_variable_lower_bounds(np.ascontiguousarray(sf.col_lower, np.float64))
    dm.set_variable_upper_bounds(np.ascontiguousarray(sf.col_upper, np.float64))
    dm.set_objective_coefficients(sign * np.asarray(sf.c, np.float64))
    if sf.is_mip:
        dm.set_variable_types(np.where(sf.integrality > 0, "I", "C"))
    settings = lp.SolverSettings()
    settings.set_parameter("log_to_console", bool(options.verbose))
    if options.time_limit is not None:
        settings.set_parameter("time_limit", float(options.time_limit))
    if sf.is_mip:
        settings.set_parameter("mip_relative_gap", float(options.mip_rel_gap))
    else:
        settings.set_optimality_tolerance(EPS)
    for k, v in options.extra.items():
        settings.set_parameter(k, v)
    t1 = time.perf_counter()
    sol = lp.Solve(dm, settings)
    t2 = time.perf_counter()
    name = getattr(sol.get_termination_status(), "name", str(sol.get_termination_status()))
    status = {"Optimal": Status.OPTIMAL, "PrimalInfeasible": Status.INFEASIBLE, "Infeasible": Status.INFEASIBLE,
              "DualInfeasible": Status.UNBOUNDED, "Unbounded": Status.UNBOUNDED, "TimeLimit": Status.TIME_LIMIT,
              "IterationLimit": Status.TIME_LIMIT, "FeasibleFound": Status.TIME_LIMIT}.get(name, Status.ERROR)
    res = SolveResult(status, None, None, solver="cuopt", message=str(sol.get_termination_reason()),
                      options={"eps": EPS, "time_limit": options.time_limit, **options.extra})
    if status in (Status.OPTIMAL, Status.TIME_LIMIT):
        x = np.asarray(sol.get_primal_solution(), np.float64)
        if x.size == sf.num_cols:
            res.x = x
            res.objective = sf.objective_value(x)
        if status is Status.OPTIMAL and not sf.is_mip and sf.num_rows:
            y = np.asarray(sol.get_dual_solution(), np.float64)
            if y.size == sf.num_rows:  # d(min −c·x)/d(bound) → d(c·x)/d(bound) for maximization
                res.row_duals = sf.unscale_duals(sign * y)
    res.timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return res


@register_solver
class CuoptSolver(Solver):
    """NVIDIA cuOpt on the GPU (PDLP for LPs); available only with the package and a GPU."""

    name = "cuopt"
    features = Feature.LP | Feature.MILP | Feature.DUALS | Feature.TIME_LIMIT
    required_modules = ("cuopt",)
    doc = "NVIDIA cuOpt on the GPU: PDLP for LPs (tol 1e-8), MILP; needs cuopt-cu12 and an NVIDIA GPU"

    @classmethod
    def is_available(cls) -> bool:
        return unavailable_reason() is None

    @classmethod
    def unavailable_reason(cls) -> str | None:
        return unavailable_reason()

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        reason = unavailable_reason()
        if reason is not None:
            from policyopt.errors import SolverNotAvailableError

            raise SolverNotAvailableError(f"cuopt: {reason}")
        return RebuildingModel(sf, options, _solve_cuopt)
