"""Max-sum throughput's LP as a transportation LP, built from arrays and solved by HiGHS directly.

Max-sum throughput on the plain allocation space (no pair rows) is

.. math::  \\max_X \\sum_{j,c} v_{jc} X_{jc}  \\quad\\text{s.t.}\\quad
           \\sum_c X_{jc} \\le 1 \\;(\\text{each job } j), \\quad
           \\sum_j s_j \\sum_{c \\in k} X_{jc} \\le C_k \\;(\\text{each worker type } k), \\quad X \\ge 0

over the viable slots ``(j, c)`` (``v`` the throughputs, or the throughputs over the equal-share
throughput with ``normalize``; ``s_j`` the scale factor; ``C_k`` the worker count; a configuration
``c`` on type ``k`` = the type itself or its unconsolidated variant). Two configurations of one
type take the same time and the same workers, so only the better one matters: the LP equals the
**transportation LP** over ``x_{jk}`` with value ``V_{jk} = max_{c∈k} v_{jc}`` (columns with
``V_{jk} ≤ 0`` dropped: zero is as good), ``n`` job rows and ``K`` capacity rows — built here as
CSC arrays in a few numpy calls (two entries per column) and handed to HiGHS's primal simplex
without presolve, without the modeling layer, compile, the backend's load or the kept model.

*Certificate* (on the whole LP, in its original configurations): the point ``X`` (each ``x_{jk}``
on its best configuration) meets every job row and capacity row to 1e-9 (relative to the row's
bound, at least 1) and every bound; with the capacity prices ``p ≥ 0`` (HiGHS's row duals) and
``y_j = max(0, max_k V_{jk} − s_j p_k)`` — a dual-feasible point of the original LP, since every
original column's reduced cost ``v_{jc} − s_j p_k − y_j ≤ V_{jk} − s_j p_k − y_j ≤ 0`` — the
Lagrangian bound ``Σ_j y_j + Σ_k C_k p_k`` equals the objective ``Σ V·x`` to 1e-9 relative, so the
point is optimal. Otherwise :func:`solve` returns ``None`` (the caller solves the LP as before).

:func:`solve_max_min` solves max-min fairness's epigraph LP on the same per-type columns (the
better configuration of a type raises a job's level and the fill objective alike) and then its
``fill`` stage in place on the same HiGHS object, optionally with one row per class of identical
jobs; its points are checked against every row to 1e-9 (HiGHS's optimal status stands for
optimality, as on the policy's own path).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from . import transport_exact, transport_small
from .highs_support import _acquire_highs, _release_highs, objective_scale, run_threads, silence_banner

__all__ = ["TransportAnswer", "EpigraphAnswer", "per_type", "solve", "certify", "solve_max_min"]

#: feasibility and optimality tolerance of the certificate (relative)
TOL = 1e-9
#: HiGHS's options for the run (primal simplex from the zero point, which is feasible; no presolve;
#: tight tolerances so that the certificate holds)
_OPTIONS: tuple[tuple[str, Any], ...] = (
    ("output_flag", False), ("solver", "simplex"), ("simplex_strategy", 4), ("presolve", "off"),
    ("primal_feasibility_tolerance", 1e-10), ("dual_feasibility_tolerance", 1e-10))


@dataclass
class TransportAnswer:
    """An optimal point of the transportation LP, certified: ``x`` (jobs × types), its objective,
    the capacity prices ``p`` and job multipliers ``y`` of the certificate, and its dual bound;
    ``basic``: HiGHS's optimal basis (``getBasicVariables``: ``t ≥ 0`` the ``t``-th column with
    ``V > 0`` in job-major order, ``−1 − i`` row ``i``'s logical; job rows, then capacity rows),
    where HiGHS gave one; ``cols``: the columns ``(jj, kk)`` of the LP HiGHS ran (job and type of
    each column with ``V > 0``, job-major: the ``t`` of ``basic``)."""

    x: np.ndarray
    objective: float
    p: np.ndarray
    y: np.ndarray
    bound: float
    iterations: int
    basic: np.ndarray | None = None
    cols: tuple[np.ndarray, np.ndarray] | None = None


def per_type(values: np.ndarray, mask: np.ndarray, config_type: np.ndarray, num_types: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """``(V, best)``: ``V[j, k] = max_{c on type k, mask[j, c]} values[j, c]`` (``-inf`` where job
    ``j`` has no viable configuration on type ``k``) and the configuration ``best[j, k]`` giving it
    (the first of equal ones). One ``(jobs × types × configurations)`` broadcast."""
    on_type = config_type[None, :] == np.arange(num_types)[:, None]  # types × configurations
    v = np.where(mask, values, -np.inf)
    per = np.where(on_type[None, :, :], v[:, None, :], -np.inf)  # jobs × types × configurations
    return per.max(axis=2), per.argmax(axis=2)


def certify(V: np.ndarray, s: np.ndarray, C: np.ndarray, x: np.ndarray, p: np.ndarray
            ) -> tuple[bool, float, float, np.ndarray]:
    """``(ok, objective, bound, y)`` of the point ``x`` (jobs × types) with capacity prices ``p``
    (see the module docstring): every row and bound within 1e-9 and the Lagrangian bound equal to
    the objective to 1e-9 relative."""
    use = V > 0
    obj = float((np.where(use, V, 0.0) * x).sum())  # (sums, not BLAS products: a process's first
    p = np.maximum(p, 0.0)                          # BLAS call costs ~0.1-0.2 ms)
    y = (V - np.multiply.outer(s, p)).max(axis=1)  # (-inf where a job has no column: no term)
    np.maximum(y, 0.0, out=y)
    bound = float(y.sum() + (C * p).sum())
    feasible = (x.min() >= 0.0 and x.sum(axis=1).max() <= 1.0 + TOL
                and ((s[:, None] * x).sum(axis=0) <= C + TOL * np.maximum(C, 1.0)).all() and not x[~use].any())
    # relative to the objective, not to max(1, |obj|) (with throughputs of ~1e-9 an absolute 1e-9
    # accepted a point 2.6e-4 below the optimum); at least the rounding of y's differences, ~eps·V
    # per job (an objective of 0: no capacity)
    floor = 1e-15 * V.shape[0] * max(float(V.max(initial=0.0)), 0.0)
    ok = bool(feasible) and abs(bound - obj) <= max(TOL * max(abs(obj), abs(bound)), floor)
    return ok, obj, bound, y


def solve(V: np.ndarray, s: np.ndarray, C: np.ndarray, threads: int | None = None, exact: bool = True,
          start: np.ndarray | None = None, basis: bool = True) -> TransportAnswer | None:
    """The certified optimum of ``max Σ V·x`` s.t. ``Σ_k x_jk ≤ 1``, ``Σ_j s_j x_jk ≤ C_k``,
    ``x ≥ 0`` (columns where ``V ≤ 0`` or ``-inf`` held at 0), or ``None`` when HiGHS gives no
    optimum or the certificate fails. With ``exact`` the primal–dual method of
    :mod:`~policyopt.solvers.transport_exact` is tried first (no HiGHS; its answer certified the
    same way, with a basis of the LP), from the capacity prices ``start`` where given (a previous
    problem's ``p``); where it declines, HiGHS's primal simplex answers. Without ``basis`` (the
    caller keeps no basis: the answer's ``basic`` and ``cols`` may be ``None``) an LP of at most
    :data:`~policyopt.solvers.transport_small.MAX_CELLS` jobs × types goes to the same method on
    Python lists first (:mod:`~policyopt.solvers.transport_small`: the same point and prices, few
    numpy routines in a process's first call)."""
    if exact:
        if not basis and V.size <= transport_small.MAX_CELLS:
            got = transport_small.solve(V, s, C, start)
            if got is not None:
                return got
        got = transport_exact.solve(V, s, C, start, basis)
        if got is not None:
            return got
    import highspy

    n, K = V.shape
    use = V > 0  # (-inf and nan compare false)
    jj, kk = np.nonzero(use)  # job-major: columns of one job side by side
    m = jj.size
    x = np.zeros((n, K))
    if m == 0:  # nothing has a positive value: zero is optimal (y = 0, p = 0)
        ok, obj, bound, y = certify(V, s, C, x, np.zeros(K))
        return TransportAnswer(x, obj, np.zeros(K), y, bound, 0) if ok else None
    index = np.empty(2 * m, np.int32)  # column t: its job row jj[t], then its capacity row n + kk[t]
    index[0::2] = jj
    index[1::2] = kk + n
    value = np.empty(2 * m)
    value[0::2] = 1.0
    value[1::2] = s[jj]
    inf = highspy.kHighsInf
    row_lower = np.full(n + K, -inf)
    row_upper = np.concatenate([np.ones(n), C])
    silence_banner()
    h = _acquire_highs(highspy)
    try:
        for name, val in _OPTIONS:
            h.setOptionValue(name, val)
        h.setOptionValue("threads", run_threads(highspy, threads, True))
        scale = objective_scale(V[jj, kk])  # (tiny values: HiGHS's dual tolerance is absolute)
        if scale:
            h.setOptionValue("user_objective_scale", scale)
        h.passModel(m, n + K, 2 * m, int(highspy.MatrixFormat.kColwise), int(highspy.ObjSense.kMaximize), 0.0,
                    V[jj, kk], np.zeros(m), np.full(m, inf), row_lower, row_upper,
                    np.arange(0, 2 * m, 2, dtype=np.int32), index, value, np.zeros(m, np.int32))
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        sol = h.getSolution()
        iterations = int(h.getInfoValue("simplex_iteration_count")[1])
        x[jj, kk] = np.maximum(np.asarray(sol.col_value), 0.0)
        p = np.asarray(sol.row_dual)[n:]  # (the capacity rows' prices: ≥ 0 at an optimum of this maximization)
        got, bv = h.getBasicVariables()  # (~5 µs: kept for re-solves, policyopt.transport_resolve)
        basic = np.array(bv, np.int64) if got == highspy.HighsStatus.kOk else None
    finally:
        _release_highs(h, m)
    ok, obj, bound, y = certify(V, s, C, x, p)
    return TransportAnswer(x, obj, np.maximum(p, 0.0), y, bound, iterations, basic, (jj, kk)) if ok else None


@dataclass
class EpigraphAnswer:
    """Max-min fairness's two LPs on the per-type columns (:func:`solve_max_min`): ``t`` the
    max-min optimum, ``x`` (jobs × types) the fill stage's point (the max-min LP's when ``filled``
    is false), ``level`` each row's level ``a_j Σ_k V_{jk} min(x_{jk}, 1)`` there, ``before`` /
    ``after`` the fill objective at the max-min point and at ``x``, ``iterations`` the first LP's
    simplex iterations."""

    x: np.ndarray
    level: np.ndarray
    t: float
    before: float
    after: float
    filled: bool
    seconds: float
    iterations: int = 0


def _checked(col: np.ndarray, jj: np.ndarray, kk: np.ndarray, shape: tuple[int, int], Vz: np.ndarray,
             a: np.ndarray, ws: np.ndarray, cap: np.ndarray, t: float, tol: float
             ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(x, level)`` of HiGHS's column values ``col`` (``x`` on the columns ``(jj, kk)``, clipped at
    0), or ``None`` when a job row exceeds 1, a capacity row (entries ``ws``) its bound ``cap`` or a
    level falls below ``t`` by more than ``tol``."""
    x = np.zeros(shape)
    x[jj, kk] = np.maximum(col[:jj.size], 0.0)
    level = a * (Vz * np.minimum(x, 1.0)).sum(axis=1)
    if x.sum(axis=1).max() > 1.0 + TOL or not (ws @ x <= cap).all() or level.min() < t - tol:
        return None
    return x, level


def crash_basis(Vz: np.ndarray, a: np.ndarray, ws: np.ndarray, C: np.ndarray, jj: np.ndarray, kk: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """A starting basis for max-min's epigraph LP (:func:`solve_max_min`'s columns ``(jj, kk)`` and
    ``t``; rows: job rows, capacity rows, epigraph rows) as ``(column status, row status)`` (0 at
    the lower bound, 1 basic, 2 at the upper bound), or ``None`` when a row has no column.

    At an optimum the epigraph rows are typically tight and each row's level is bought on the type
    cheapest at the capacity prices ``p``: ``k_j = argmax_k V_{jk} / p_k``. The guess takes each
    type's mean value as its price, ``p_k = mean_j V_{jk}`` (each row on the type where it is
    relatively fastest). Placed so at level ``t``, the rows take ``t D_k`` of type ``k``,
    ``D_k = Σ_{j: k_j = k} ws_j / (a_j V_{jk_j})``; the bottleneck is ``k_0 = argmin_k C_k / D_k``.
    The basis: each row's column on ``k_j`` and ``t`` basic, the epigraph rows and the capacity row
    of ``k_0`` at their bounds, the other rows' slacks basic. It is nonsingular (each placed column
    with its epigraph row, ``t`` with the capacity row of ``k_0``, which holds a placed row) but
    need not be feasible: a start that only saves or costs simplex iterations (Gavel's workload at
    64 jobs: 11–28 primal simplex iterations to the optimum against 66–102 from the slack basis)."""
    n, K = Vz.shape
    if n == 0:
        return None
    place = (Vz / np.maximum(Vz.sum(axis=0), 1e-300)).argmax(axis=1)  # (prices up to a factor: sums)
    on = Vz[np.arange(n), place]
    if on.min() <= 0.0:  # (a row without a column)
        return None
    D = np.bincount(place, weights=ws / (a * on), minlength=K)
    k0 = int((D / np.maximum(C, 1e-300)).argmax())  # C_k / D_k smallest (a type with D_k > 0)
    cols = np.zeros(jj.size + 1, np.int8)
    cols[:-1] = kk == place[jj]
    cols[-1] = 1
    rows = np.zeros(2 * n + K, np.int8)
    rows[:n + K] = 1
    rows[n + k0] = 2  # (at its upper bound C_k)
    return cols, rows


def _set_crash(h: Any, highspy: Any, Vz: np.ndarray, a: np.ndarray, ws: np.ndarray, C: np.ndarray,
               jj: np.ndarray, kk: np.ndarray) -> None:
    """Hand :func:`crash_basis`'s basis to ``h`` (nothing when there is none; HiGHS refuses an
    invalid one and starts as before)."""
    got = crash_basis(Vz, a, ws, C, jj, kk)
    if got is None:
        return
    status = (highspy.HighsBasisStatus.kLower, highspy.HighsBasisStatus.kBasic, highspy.HighsBasisStatus.kUpper)
    basis = highspy.HighsBasis()
    basis.col_status = [status[v] for v in got[0].tolist()]
    basis.row_status = [status[v] for v in got[1].tolist()]
    basis.valid = True
    h.setBasis(basis)


def solve_max_min(V: np.ndarray, s: np.ndarray, C: np.ndarray, a: np.ndarray, unit: np.ndarray, fill: bool,
                  fill_tolerance: float, threads: int | None = None, mult: np.ndarray | None = None,
                  crash: bool = True) -> EpigraphAnswer | None:
    """Max-min fairness on the per-type columns ``x_{jk}`` (``V > 0``; ``a_j`` the normalizer):
    ``max t`` s.t. ``a_j Σ_k V_{jk} x_{jk} ≥ t``, ``Σ_k x_{jk} ≤ 1``, ``Σ_j s_j x_{jk} ≤ C_k``,
    ``x ≥ 0``; then, with ``fill``, in place: ``t ≥ t*(1 − fill_tolerance)`` and ``max Σ unit·x``
    (the total normalized throughput), HiGHS's primal simplex from the first optimum. ``None``
    when the first LP ends other than optimal or its point leaves a row by more than 1e-9. With
    ``mult``, row ``j`` stands for ``mult[j]`` identical jobs (each given its row's ``x``): its
    capacity entries and fill costs are multiplied by it, its epigraph row is each such job's — by
    symmetry, averaging an optimum over identical jobs keeps it feasible and optimal, so both optima
    are the jobs' LPs'. With ``crash``, the first LP's simplex starts from :func:`crash_basis`'s basis
    (a start only: HiGHS's optimum and the checks decide the answer)."""
    import time

    import highspy

    n, K = V.shape
    w = np.ones(n) if mult is None else mult.astype(np.float64)
    ws = w * s
    use = V > 0
    Vz = np.where(use, V, 0.0)
    jj, kk = np.nonzero(use)
    m = jj.size
    inf = highspy.kHighsInf
    index = np.empty(3 * m + n, np.int32)  # column t: its job row, capacity row and epigraph row
    index[0:3 * m:3] = jj
    index[1:3 * m:3] = kk + n
    index[2:3 * m:3] = jj + (n + K)
    index[3 * m:] = np.arange(n + K, 2 * n + K)  # the column t: −1 in every epigraph row
    value = np.empty(3 * m + n)
    value[0:3 * m:3] = 1.0
    value[1:3 * m:3] = ws[jj]
    vals = V[jj, kk]
    value[2:3 * m:3] = a[jj] * vals
    value[3 * m:] = -1.0
    cost = np.zeros(m + 1)
    cost[m] = 1.0
    lower = np.zeros(m + 1)
    lower[m] = -inf
    row_lower = np.concatenate([np.full(n + K, -inf), np.zeros(n)])
    row_upper = np.concatenate([np.ones(n), C, np.full(n, inf)])
    silence_banner()
    h = _acquire_highs(highspy)
    try:
        for name, val in _OPTIONS:
            h.setOptionValue(name, val)
        h.setOptionValue("threads", run_threads(highspy, threads, True))
        h.passModel(m + 1, 2 * n + K, 3 * m + n, int(highspy.MatrixFormat.kColwise),
                    int(highspy.ObjSense.kMaximize), 0.0, cost, lower, np.full(m + 1, inf), row_lower, row_upper,
                    np.arange(0, 3 * m + 1, 3, dtype=np.int32), index, value, np.zeros(m + 1, np.int32))
        if crash:
            _set_crash(h, highspy, Vz, a, ws, C, jj, kk)
        h.run()
        if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
            return None
        col = np.asarray(h.getSolution().col_value)
        t_star = float(col[m])
        tol = TOL * max(1.0, abs(t_star))
        cap = C + TOL * np.maximum(C, 1.0)
        got = _checked(col, jj, kk, (n, K), Vz, a, ws, cap, t_star, tol)
        if got is None:
            return None
        costs = (unit * w[:, None])[jj, kk]
        before = float(np.dot(costs, col[:m]))
        iterations = int(h.getInfoValue("simplex_iteration_count")[1])
        ans = EpigraphAnswer(got[0], got[1], t_star, before, before, False, 0.0, iterations)
        if not fill:
            return ans
        t1 = time.perf_counter()
        h.changeColBounds(m, t_star - fill_tolerance * abs(t_star), inf)
        h.changeColsCost(m + 1, np.arange(m + 1, dtype=np.int32), np.append(costs, 0.0))
        h.run()
        if h.getModelStatus() == highspy.HighsModelStatus.kOptimal:
            col2 = np.asarray(h.getSolution().col_value)
            got = _checked(col2, jj, kk, (n, K), Vz, a, ws, cap, float(col2[m]), tol)
            if got is not None:
                ans = EpigraphAnswer(got[0], got[1], t_star, before, float(np.dot(costs, col2[:m])), True, 0.0,
                                     iterations)
        ans.seconds = time.perf_counter() - t1
        return ans
    finally:
        _release_highs(h, m + 1)
