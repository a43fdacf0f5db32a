"""Clarabel called directly (interior point; no cvxpy canonicalization).

The standard form becomes Clarabel's ``min q·x s.t. G x + s = h, s ∈ K`` with the CSC blocks

.. math::  \\begin{bmatrix} A_= \\\\ A_u \\\\ -A_l \\\\ I_u \\\\ -I_l \\end{bmatrix} x + s =
           \\begin{bmatrix} b_= \\\\ u \\\\ -l \\\\ x_u \\\\ -x_l \\end{bmatrix},\\quad
           s \\in \\{0\\}^{m_=} \\times \\mathbb{R}_+^{\\,\\cdot}

(equality rows in the zero cone; finite row and column bounds as non-negative slacks);
``q = ±c`` (maximization is negated). Clarabel's dual ``z`` gives HiGHS's convention directly:
``∂obj/∂u = −z`` on an upper side, ``+z`` on a lower side (sign flipped for maximization). LPs
only. Tolerances 1e-10 on gap and feasibility (Clarabel's defaults are 1e-8): the optimum agrees
with a simplex optimum to about 1e-8 relative.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from policyopt.errors import SolverError
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

TOL = 1e-10


def _solve_clarabel(sf: StandardForm, options: SolverOptions) -> SolveResult:
    import clarabel

    t0 = time.perf_counter()
    if sf.is_mip:
        raise SolverError("clarabel solves LPs only; this model has integer columns")
    n = sf.num_cols
    A = sf.A.tocsr()
    lo, hi = sf.row_lower, sf.row_upper
    eq = np.flatnonzero(np.isfinite(lo) & (lo == hi))
    up = np.flatnonzero(np.isfinite(hi) & ~(np.isfinite(lo) & (lo == hi)))
    dn = np.flatnonzero(np.isfinite(lo) & ~(np.isfinite(hi) & (lo == hi)))
    cu = np.flatnonzero(np.isfinite(sf.col_upper))
    cl = np.flatnonzero(np.isfinite(sf.col_lower))
    eye = sp.identity(n, format="csr")
    G = sp.vstack([A[eq], A[up], -A[dn], eye[cu], -eye[cl]], format="csc")
    h = np.concatenate([lo[eq], hi[up], -lo[dn], sf.col_upper[cu], -sf.col_lower[cl]])
    sign = -1.0 if sf.sense == "max" else 1.0
    q = sign * np.asarray(sf.c, np.float64)
    P = sp.csc_matrix((n, n))
    cones = ([clarabel.ZeroConeT(eq.size)] if eq.size else []) + (
        [clarabel.NonnegativeConeT(G.shape[0] - eq.size)] if G.shape[0] > eq.size else [])
    settings = clarabel.DefaultSettings()
    settings.verbose = bool(options.verbose)
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = TOL
    if options.time_limit is not None:
        settings.time_limit = float(options.time_limit)
    for k, v in options.extra.items():
        if not hasattr(settings, k):
            raise SolverError(f"clarabel: unknown setting {k!r}")
        setattr(settings, k, v)
    t1 = time.perf_counter()
    solver = clarabel.DefaultSolver(P, q, G, h, cones, settings)
    sol = solver.solve()
    t2 = time.perf_counter()
    S = clarabel.SolverStatus
    st = sol.status
    status = {S.Solved: Status.OPTIMAL, S.AlmostSolved: Status.OPTIMAL_INACCURATE,
              S.PrimalInfeasible: Status.INFEASIBLE, S.AlmostPrimalInfeasible: Status.INFEASIBLE,
              S.DualInfeasible: Status.UNBOUNDED, S.AlmostDualInfeasible: Status.UNBOUNDED,
              S.MaxTime: Status.TIME_LIMIT, S.MaxIterations: Status.TIME_LIMIT}.get(st, Status.ERROR)
    res = SolveResult(status, None, None, solver="clarabel", message=str(st),
                      options={"tol": TOL, "time_limit": options.time_limit, **options.extra})
    if status is Status.OPTIMAL or (status in (Status.OPTIMAL_INACCURATE, Status.TIME_LIMIT) and sol.x is not None):
        res.x = np.asarray(sol.x, np.float64).reshape(n)
        res.objective = sf.objective_value(res.x)
        if status is Status.OPTIMAL and sf.num_rows:
            z = np.asarray(sol.z, np.float64)
            kk = np.cumsum([0, eq.size, up.size, dn.size])
            y = np.zeros(sf.num_rows)
            y[eq] -= z[kk[0]:kk[1]]
            y[up] -= z[kk[1]:kk[2]]
            y[dn] += z[kk[2]:kk[3]]
            res.row_duals = sf.unscale_duals(sign * y)
    res.timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
    return res


@register_solver
class ClarabelSolver(Solver):
    """Clarabel's interior-point method on the standard form, without cvxpy."""

    name = "clarabel"
    features = Feature.LP | Feature.DUALS | Feature.TIME_LIMIT
    required_modules = ("clarabel",)
    doc = "Clarabel interior point called directly (no cvxpy); tolerances 1e-10; LP only"

    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        return RebuildingModel(sf, options, _solve_clarabel)
