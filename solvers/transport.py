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
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .highs_support import _acquire_highs, _release_highs, run_threads, silence_banner

__all__ = ["TransportAnswer", "per_type", "solve", "certify"]

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
    the capacity prices ``p`` and job multipliers ``y`` of the certificate, and its dual bound."""

    x: np.ndarray
    objective: float
    p: np.ndarray
    y: np.ndarray
    bound: float
    iterations: int


def per_type(values: np.ndarray, mask: np.ndarray, config_type: np.ndarray, num_types: int
             ) -> tuple[np.ndarray, np.ndarray]:
    """``(V, best)``: ``V[j, k] = max_{c on type k, mask[j, c]} values[j, c]`` (``-inf`` where job
    ``j`` has no viable configuration on type ``k``) and the configuration ``best[j, k]`` giving it
    (the first of equal ones). One ``(jobs × types × configurations)`` broadcast."""
    on_type = config_type[None, :] == np.arange(num_types)[:, None]  # types × configurations
    v = np.where(mask, values, -np.inf)
    per = np.where(on_type[None, :, :], v[:, None, :], -np.inf)  # jobs × types × configurations
    best = per.argmax(axis=2)
    return np.take_along_axis(per, best[:, :, None], axis=2)[:, :, 0], best


def certify(V: np.ndarray, s: np.ndarray, C: np.ndarray, x: np.ndarray, p: np.ndarray
            ) -> tuple[bool, float, float, np.ndarray]:
    """``(ok, objective, bound, y)`` of the point ``x`` (jobs × types) with capacity prices ``p``
    (see the module docstring): every row and bound within 1e-9 and the Lagrangian bound equal to
    the objective to 1e-9 relative."""
    use = V > 0
    obj = float(np.dot(np.where(use, V, 0.0).ravel(), x.ravel()))
    p = np.maximum(p, 0.0)
    red = np.where(np.isfinite(V), V - s[:, None] * p[None, :], -np.inf)
    y = np.maximum(red.max(axis=1), 0.0)
    bound = float(y.sum() + C @ p)
    feasible = (x.min() >= 0.0 and not np.count_nonzero(x[~use])
                and x.sum(axis=1).max() <= 1.0 + TOL
                and np.all(s @ x <= C + TOL * np.maximum(C, 1.0)))
    ok = bool(feasible) and abs(bound - obj) <= TOL * max(1.0, abs(obj))
    return ok, obj, bound, y


def solve(V: np.ndarray, s: np.ndarray, C: np.ndarray, threads: int | None = None) -> TransportAnswer | None:
    """The certified optimum of ``max Σ V·x`` s.t. ``Σ_k x_jk ≤ 1``, ``Σ_j s_j x_jk ≤ C_k``,
    ``x ≥ 0`` (columns where ``V ≤ 0`` or ``-inf`` held at 0), or ``None`` when HiGHS gives no
    optimum or the certificate fails."""
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
    finally:
        _release_highs(h, m)
    ok, obj, bound, y = certify(V, s, C, x, p)
    return TransportAnswer(x, obj, np.maximum(p, 0.0), y, bound, iterations) if ok else None
