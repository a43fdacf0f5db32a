"""Helpers shared by the policy modules (not a policy; the package skips ``_``-prefixed modules).

* :func:`policy_data` — the throughput data a policy sees (real, or all ones for the
  heterogeneity-agnostic baselines);
* :func:`max_throughput` / :func:`fastest_throughput` — per-job upper bounds on ``thr(m)``;
* :class:`LoadedLP` — compile a :class:`~policyopt.modeling.Model` once, load it into the backend
  once, then re-solve after in-place updates (row bounds, column bounds, costs) for iterative
  policies (bisection, Newton, lexicographic sequences), with the phase timings accumulated. With
  ``algorithm="auto"`` on large LPs: ``cold_ipm=True`` loads with interior point (several times
  faster than simplex cold on max-min-style LPs); ``iterative=True`` switches to warm simplex after
  the first solve when the loaded model offers ``set_algorithm(name)``.

Only the public modeling API is used here.
"""
from __future__ import annotations

import time

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.modeling import Model, Variable
from policyopt.policy import Policy
from policyopt.result import SolveResult, Timings
from policyopt.solver_api import Feature, LoadedModel


#: LPs with at least this many columns are solved cold by interior point when ``cold_ipm`` is asked
#: for (measured: on 2048-job max-min-style LPs IPM takes 0.25–0.45 s, cold dual simplex 0.6–1.9 s)
COLD_IPM_MIN_COLS = 4000


def policy_data(space: AllocationSpace, agnostic: bool) -> tuple[np.ndarray, np.ndarray]:
    """``(T, Tp)`` the policy optimizes over: the real data, or :meth:`AllocationSpace.agnostic_throughputs`."""
    return space.agnostic_throughputs() if agnostic else (space.T, space.Tp)


def max_throughput(space: AllocationSpace, T: np.ndarray, Tp: np.ndarray) -> np.ndarray:
    """Per job, the largest coefficient of its ``thr`` row: an upper bound on ``thr(m)`` for any
    feasible ``X`` (the job's total time over its rows is at most 1)."""
    M = space.throughput_matrix(T, Tp)
    out = np.zeros(M.shape[0])
    np.maximum.at(out, M.rows, M.vals)
    return out


def fastest_throughput(space: AllocationSpace, T: np.ndarray) -> np.ndarray:
    """``thr(m, X_fastest)``: the job alone on its fastest allowed configuration all the time."""
    return np.max(np.where(space.single_mask, T, 0.0), axis=1)


def isolated_throughput(space: AllocationSpace, T: np.ndarray, Tp: np.ndarray) -> np.ndarray:
    """``thr(m, X_iso)`` under the data ``(T, Tp)`` (``X_iso`` has no pair rows)."""
    return space.throughput_values(space.full_from_single(space.isolated_allocation()), T, Tp)


def job_prices(space: AllocationSpace) -> np.ndarray:
    """Worker-type prices ($/h per worker), validated: every type needs a positive price."""
    for i, p in enumerate(space.prices):
        name = space.worker_types.labels[i]
        if np.isnan(p):
            raise InputError(f"cluster.worker_types.{name}.price_per_hour", None,
                             "cost-aware policies need a price for every worker type")
        if p <= 0:
            raise InputError(f"cluster.worker_types.{name}.price_per_hour", float(p),
                             "cost-aware policies need a positive price")
    return space.prices


def order_by_arrival(space: AllocationSpace) -> np.ndarray:
    """Job positions in arrival order: by ``Job.arrival`` where given, else by position in the
    problem (a missing arrival counts as the job's position); ties keep problem order."""
    arr = np.array([np.nan if j.arrival is None else j.arrival for j in space.problem.jobs], float)
    pos = np.arange(arr.size, dtype=float)
    key = np.where(np.isnan(arr), pos, arr)
    return np.lexsort((pos, key))


class LoadedLP:
    """A model compiled and loaded once, re-solved after in-place updates.

    ``rows(block)`` gives the original row indices of a constraint block and ``cols(var)`` the
    column indices of a variable's existing slots (C order), for ``set_row_bounds`` /
    ``set_col_bounds`` / ``set_costs``. Timings: ``compile`` once, every backend load and solve
    into ``solve``.
    """

    def __init__(self, policy: Policy, model: Model, timings: Timings, iterative: bool = False,
                 cold_ipm: bool = False) -> None:
        self.model = model
        self.timings = timings
        t0 = time.perf_counter()
        self.sf = model.compile()
        t1 = time.perf_counter()
        self.solver = policy.get_solver(Feature.MILP if model.is_mip else Feature.LP)
        opts = policy.solver_options()
        auto = opts.algorithm == "auto"
        large = self.sf.num_cols >= COLD_IPM_MIN_COLS
        if auto and cold_ipm and large:
            opts = opts.with_(algorithm="ipm")  # even without a later switch, IPM beats cold simplex here
        self.loaded: LoadedModel = self.solver.load(self.sf, opts)
        t2 = time.perf_counter()
        timings.compile += t1 - t0
        timings.solve += t2 - t1
        self.solves = 0
        self.has_duals = self.solver.supports(Feature.DUALS)
        # iterative policies with algorithm "auto" on large LPs: a cold interior-point solve, then warm
        # simplex re-solves — when the loaded model can switch algorithms (``set_algorithm``)
        self._switch = None
        setter = getattr(self.loaded, "set_algorithm", None)
        if auto and iterative and large and callable(setter):
            if not cold_ipm:
                setter("ipm")
            self._switch = setter

    @property
    def solver_name(self) -> str:
        return self.solver.name

    def rows(self, block: str) -> np.ndarray:
        b = self.model.blocks[block]
        return np.arange(b.start, b.stop, dtype=np.int64)

    @staticmethod
    def cols(var: Variable) -> np.ndarray:
        c = var.cols.ravel()
        return c[c >= 0]

    def solve(self) -> SolveResult:
        t0 = time.perf_counter()
        res = self.loaded.solve()
        if self._switch is not None:  # later solves start from this basis
            self._switch("simplex")
            self._switch = None
        self.timings.solve += time.perf_counter() - t0
        self.solves += 1
        return res

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray | float, upper: np.ndarray | float) -> None:
        rows = np.asarray(rows, np.int64)
        self.loaded.set_row_bounds(rows, np.broadcast_to(np.asarray(lower, float), rows.shape),
                                   np.broadcast_to(np.asarray(upper, float), rows.shape))

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray | float, upper: np.ndarray | float) -> None:
        cols = np.asarray(cols, np.int64)
        self.loaded.set_col_bounds(cols, np.broadcast_to(np.asarray(lower, float), cols.shape).copy(),
                                   np.broadcast_to(np.asarray(upper, float), cols.shape).copy())

    def set_costs(self, cols: np.ndarray, costs: np.ndarray | float) -> None:
        cols = np.asarray(cols, np.int64)
        self.loaded.set_costs(cols, np.broadcast_to(np.asarray(costs, float), cols.shape).copy())

    def set_sense(self, sense: str) -> None:
        self.loaded.set_sense(sense)
