"""Solver backends, registered in preference order: HiGHS (default), cvxpy, PuLP, then the optional
OR-Tools (GLOP, PDLP), SCIP, Clarabel (direct) and NVIDIA cuOpt (GPU).

Each backend imports its third-party library lazily (inside ``load``), so importing this package
is cheap and works with only the backends that are installed.
"""
from . import highs, cvxpy_backend, pulp_backend  # noqa: F401  (registration order = preference)
from . import ortools_backend, scip_backend, clarabel_backend, cuopt_backend  # noqa: F401  (optional extras)

__all__ = ["highs", "cvxpy_backend", "pulp_backend", "ortools_backend", "scip_backend", "clarabel_backend",
           "cuopt_backend"]
