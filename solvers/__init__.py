"""Solver backends, registered in preference order: HiGHS (default), cvxpy, PuLP.

Each backend imports its third-party library lazily (inside ``load``), so importing this package
is cheap and works with only the backends that are installed.
"""
from . import highs, cvxpy_backend, pulp_backend  # noqa: F401  (registration order = preference)

__all__ = ["highs", "cvxpy_backend", "pulp_backend"]
