"""Helpers shared by the policy modules (not a policy; the package skips ``_``-prefixed modules).

* :func:`policy_data` — the throughput data a policy sees (real, or all ones for the
  heterogeneity-agnostic baselines);
* :func:`max_throughput` / :func:`fastest_throughput` — per-job upper bounds on ``thr(m)``;
* :func:`slot_workers_matrix`, :func:`best_config_per_type`, :func:`base_rows_only` — what a slot
  occupies (the space's :meth:`~policyopt.allocation.AllocationSpace.slot_workers` hook), the best
  configuration per type under any score, and whether the space adds rows beyond job time and
  capacity (e.g. the multi-resource execution-plan space);
* :func:`nearest_feasible` — the allocation closest (in worker-time moved) to a heuristic's
  allocation within every row of the space, for heuristics whose construction only knows time
  and capacity;
* :func:`add_homogenized_allocation` — the space's rows with their right-hand sides multiplied by
  a new variable ``τ`` (Charnes–Cooper), whatever rows the space adds;
* :class:`LoadedLP` — compile a :class:`~policyopt.modeling.Model` once, load it into the backend
  once, then re-solve after in-place updates (row bounds, column bounds, costs) for iterative
  policies (bisection, Newton, lexicographic sequences), with the phase timings accumulated.
  ``algorithm="auto"`` is decided per solve by the backend (one rule:
  :func:`policyopt.solver_api.auto_algorithm`); :meth:`LoadedLP.use_warm_primal` switches the
  re-solves to primal simplex without bound perturbation
  (:meth:`policyopt.solver_api.LoadedModel.use_warm_primal`) when every update keeps the last
  solution feasible.

Only the public modeling API is used here.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.modeling import IndexSet, LinExpr, Model, Triplets, Variable
from policyopt.policy import Policy
from policyopt.result import SolveResult, Status, Timings
from policyopt.solver_api import Feature, LoadedModel

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


def slot_workers_matrix(space: AllocationSpace) -> np.ndarray:
    """``W[m, c]`` (jobs × configs): workers of type(c) job ``m`` occupies alone on configuration
    ``c`` (:meth:`AllocationSpace.slot_workers`; the scale factor in the base space, the
    configuration's GPUs ``g_c`` in the execution-plan space); 0 where the slot does not exist."""
    W = np.zeros(space.single_mask.shape)
    jj, cc = np.nonzero(space.single_mask)
    W[jj, cc] = space.slot_workers(jj, cc)
    return W


def best_config_per_type(space: AllocationSpace, score: np.ndarray) -> np.ndarray:
    """``(rows of score × types)``: per physical type, the configuration with the largest positive
    ``score`` (the first in configuration order on ties), ``-1`` where none is positive. With
    ``score = T`` on allowed slots this is :meth:`AllocationSpace.best_config_per_type`."""
    best = np.full((score.shape[0], len(space.worker_types)), -1, np.int64)
    for t in range(len(space.worker_types)):  # one vectorized argmax per type
        cols = np.flatnonzero(space.config_type == t)
        if cols.size == 0:
            continue
        sub = score[:, cols]
        k = np.argmax(sub, axis=1)
        ok = sub[np.arange(sub.shape[0]), k] > 0
        best[ok, t] = cols[k[ok]]
    return best


def base_rows_only(space: AllocationSpace) -> bool:
    """True when the space's rows are exactly the base ones (job time, capacity per type): its
    :meth:`~AllocationSpace.add_allocation` is not overridden. Spaces that add rows (cores, memory,
    quotas, guarantees) need methods that see every row (an LP over ``space.add_allocation``)."""
    return type(space).add_allocation is AllocationSpace.add_allocation


def nearest_feasible(policy: Policy, space: AllocationSpace, X_target: np.ndarray, timings: Timings
                     ) -> tuple[np.ndarray, float | None, Status, str]:
    """The allocation within every row of the space (``space.add_allocation``) closest to
    ``X_target`` in worker-time moved:

    .. math::  \\min_X \\sum_{r,c} W[r,c]\\,|X[r,c] - X^*[r,c]|

    (``W`` = :meth:`AllocationSpace.slot_workers`; one LP with ``d ≥ ±(X − X*)``). Returns
    ``(X, distance, status, message)``; if the LP fails, the policy's documented fallback
    (:meth:`Policy.fallback`), ``None``, the LP's status and the fallback's message. ``X_target``
    must be zero outside ``space.mask``."""
    model = Model(f"{policy.name}_nearest_feasible")
    X = space.add_allocation(model)
    rr, cc = np.nonzero(space.mask)
    C = len(space.configs)
    slots = IndexSet("slots", np.arange(rr.size))
    pick = Triplets(np.arange(rr.size), rr * C + cc, np.ones(rr.size), (rr.size, len(space.rows) * C))
    x = LinExpr.from_matrix(pick, X, (slots,))
    target = X_target[rr, cc]
    d = model.add_variables("d", (slots,), 0.0, np.inf)
    model.add_constraints(d.expr() - x >= -target, "d_above")
    model.add_constraints(d.expr() + x >= target, "d_below")
    model.minimize((d.expr() * space.slot_workers(rr, cc)).sum())
    lp = LoadedLP(policy, model, timings)
    raw = lp.solve()
    if raw.ok and raw.x is not None:
        return X.value(raw.x), raw.objective, Status.OPTIMAL, ""
    Xf, msg = policy.fallback(space, raw, X)
    return Xf, None, raw.status, msg


def add_homogenized_allocation(space: AllocationSpace, model: Model, name: str = "Y",
                               tau_name: str = "tau") -> tuple[Variable, Variable]:
    """The Charnes–Cooper image of the space's allocation rows: every row ``lo ≤ a·X ≤ hi`` the
    space adds (:meth:`AllocationSpace.add_allocation`, built on a scratch model and read back)
    becomes ``a·Y − hi·τ ≤ 0`` and ``a·Y − lo·τ ≥ 0`` for its finite sides, with a new ``τ ≥ 0``
    (added after the space's variables). Variable bounds ``l ≤ Y ≤ u`` become ``Y ≥ l·τ`` (a column
    bound when ``l = 0``) and ``Y ≤ u·τ`` — omitted when a row with non-negative coefficients
    over non-negative columns already implies it (e.g. ``Y ≤ τ`` from ``Σ_c Y[m,c] ≤ τ``). So
    ``(Y, τ)`` satisfies the result iff ``X = Y/τ`` satisfies every row of the space (``τ > 0``).
    Returns ``(Y, τ)`` (``Y`` the space's allocation variable)."""
    scratch = Model(f"{model.name}_rows")
    space.add_allocation(scratch, name)
    n_cols = scratch.num_cols
    col_map = np.full(n_cols, -1, np.int64)
    lower, upper = np.zeros(n_cols), np.zeros(n_cols)
    new_vars: list[Variable] = []
    for v in scratch.variables.values():
        if v.integer:
            raise InputError("options.exact_ratio", True,
                             "the allocation space has integer variables: the ratio form needs an LP")
        m = v.mask
        lo = np.where(v.lower == 0.0, 0.0, -np.inf)  # non-zero lower bounds become rows below
        nv = model.add_variables(v.name, v.dims, lo, np.inf, mask=m)
        col_map[v.cols[m]] = nv.cols[m]
        lower[v.cols[m]], upper[v.cols[m]] = v.lower[m], v.upper[m]
        new_vars.append(nv)
    tau = model.add_variable(tau_name, lower=0.0)
    tcol = int(tau.cols.ravel()[0])
    blocks = list(scratch.blocks.values())
    # upper bounds implied by one row with non-negative coefficients over non-negative columns
    implied = np.full(n_cols, np.inf)
    if blocks:
        offs = np.cumsum([0] + [b.stop - b.start for b in blocks])
        r = np.concatenate([b.rows + o for b, o in zip(blocks, offs)])
        c = np.concatenate([b.cols for b in blocks])
        a = np.concatenate([b.coefs for b in blocks])
        hi = np.concatenate([b.upper for b in blocks])
        row_ok = np.isfinite(hi)
        bad = (a < 0) | (lower[c] < 0)
        row_ok[r[bad]] = False
        use = row_ok[r] & (a > 0)
        np.minimum.at(implied, c[use], hi[r[use]] / a[use])
    for b in blocks:
        size = b.stop - b.start
        body = LinExpr(b.dims, b.rows, col_map[b.cols], b.coefs)
        for side, bound in (("upper", b.upper), ("lower", b.lower)):
            fin = np.isfinite(bound)
            if not fin.any():
                continue
            rows = np.arange(size)[fin]
            tau_term = LinExpr(b.dims, rows, np.full(rows.size, tcol), -bound[fin])
            expr = body + tau_term
            # rows whose other side is the finite one stay free here (bound ±∞)
            rhs = np.where(fin, 0.0, np.inf if side == "upper" else -np.inf).reshape(b.shape)
            tag = b.name if (side == "upper" or not np.isfinite(b.upper).any()) else f"{b.name}_lower"
            model.add_constraints(expr <= rhs if side == "upper" else expr >= rhs, tag)
    # variable bounds not implied by a row
    col_up = np.flatnonzero(np.isfinite(upper) & (implied > upper * (1 + 1e-12)))
    col_lo = np.flatnonzero(np.isfinite(lower) & (lower != 0.0))
    for side, cols, bound in (("ub", col_up, upper), ("lb", col_lo, lower)):
        if cols.size:
            dim = IndexSet(f"{name}_{side}", cols)
            expr = LinExpr((dim,), np.r_[np.arange(cols.size), np.arange(cols.size)],
                           np.r_[col_map[cols], np.full(cols.size, tcol)],
                           np.r_[np.ones(cols.size), -bound[cols]])
            model.add_constraints(expr <= 0.0 if side == "ub" else expr >= 0.0, f"{name}_bound_{side}")
    return new_vars[0], tau


class LoadedLP:
    """A model compiled and loaded once, re-solved after in-place updates.

    ``rows(block)`` gives the original row indices of a constraint block and ``cols(var)`` the
    column indices of a variable's existing slots (C order), for ``set_row_bounds`` /
    ``set_col_bounds`` / ``set_costs``. Timings: ``compile`` once, every backend load and solve
    into ``solve``.
    """

    def __init__(self, policy: Policy, model: Model, timings: Timings) -> None:
        self.model = model
        self.timings = timings
        t0 = time.perf_counter()
        self.sf = model.compile()
        t1 = time.perf_counter()
        self.solver = policy.get_solver(Feature.MILP if model.is_mip else Feature.LP)
        # algorithm "auto" is decided per solve by the backend (solver_api.auto_algorithm): the
        # structured fast path, else interior point cold on large LPs and warm simplex re-solves
        self.loaded: LoadedModel = self.solver.load(self.sf, policy.solver_options())
        t2 = time.perf_counter()
        timings.compile += t1 - t0
        timings.solve += t2 - t1
        self.solves = 0
        self.has_duals = self.solver.supports(Feature.DUALS)
        self.warm_primal = False
        self._warm_start = False  # a basis was set before the first solve (set_basis)
        self.stall_retries = 0  # the loaded model's unperturbed runs that hit their cap, re-run perturbed

    @classmethod
    def of(cls, policy: Policy, loaded: LoadedModel, timings: Timings, warm: bool = False) -> "LoadedLP":
        """A wrapper of a model already loaded (e.g. kept across problems, :mod:`policyopt.incremental`);
        ``warm``: its first solve is a re-solve (a failed one is checked cold). ``rows`` is unavailable."""
        self = cls.__new__(cls)
        self.model = None  # type: ignore[assignment]
        self.timings = timings
        self.sf = loaded.sf
        self.solver = policy.get_solver(Feature.LP)
        self.loaded = loaded
        self.solves = 0
        self.has_duals = self.solver.supports(Feature.DUALS)
        self.warm_primal = False
        self._warm_start = warm
        self.stall_retries = 0
        return self

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

    def use_warm_primal(self) -> None:
        """Re-solve by primal simplex without bound perturbation from now on (HiGHS; other backends
        unchanged), for sequences whose every update keeps the last solution feasible (costs changed,
        bounds relaxed or set at what it delivers): the warm basis then needs a few primal pivots,
        where the dual simplex or a perturbed primal one takes many (shortest-job-first with space
        sharing, 256 jobs: 50,252 against 4,997 simplex iterations over its 200 LPs). A re-solve
        that reaches the backend's iteration cap is re-solved perturbed (counted in
        :attr:`stall_retries`); see :meth:`policyopt.solver_api.LoadedModel.use_warm_primal`."""
        self.warm_primal = self.loaded.use_warm_primal()

    def set_basis(self, col_status: np.ndarray, row_status: np.ndarray) -> None:
        """Start the next solve from this basis (e.g. carried from the previous problem,
        :func:`policyopt.warm_start.carry_basis`); a failed warm solve is re-solved cold."""
        self.loaded.set_basis(col_status, row_status)
        self._warm_start = True

    def solve(self) -> SolveResult:
        t0 = time.perf_counter()
        # re-solves after in-place updates or from a set basis: an infeasible/unknown answer is
        # checked cold (resolve)
        before = self.loaded.stall_retries
        res = self.loaded.resolve() if self.solves or self._warm_start else self.loaded.solve()
        self.stall_retries += self.loaded.stall_retries - before
        self.timings.solve += time.perf_counter() - t0
        self.solves += 1
        return res

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray | float, upper: np.ndarray | float) -> None:
        rows = np.asarray(rows, np.int64)
        self.loaded.set_row_bounds(rows, np.broadcast_to(np.asarray(lower, float), rows.shape),
                                   np.broadcast_to(np.asarray(upper, float), rows.shape))

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray | float, upper: np.ndarray | float) -> None:
        cols = np.asarray(cols, np.int64)
        self.loaded.set_col_bounds(cols, _filled(lower, cols.shape), _filled(upper, cols.shape))

    def set_costs(self, cols: np.ndarray, costs: np.ndarray | float) -> None:
        cols = np.asarray(cols, np.int64)
        self.loaded.set_costs(cols, _filled(costs, cols.shape))

    def set_sense(self, sense: str) -> None:
        self.loaded.set_sense(sense)

    def add_rows(self, A_rows: "sp.spmatrix", lower: np.ndarray | float, upper: np.ndarray | float) -> np.ndarray:
        """Append rows ``lower ≤ A_rows x ≤ upper`` (over the model's columns) to the loaded model,
        e.g. cutting planes; returns their row indices."""
        k = A_rows.shape[0]
        return self.loaded.add_rows(A_rows, np.broadcast_to(np.asarray(lower, float), (k,)),
                                    np.broadcast_to(np.asarray(upper, float), (k,)))


def _filled(value: np.ndarray | float, shape: tuple[int, ...]) -> np.ndarray:
    """A new float array of ``shape`` holding ``value`` (broadcast)."""
    a = np.asarray(value, float)
    if a.shape == shape:
        return a.copy()
    return np.full(shape, a, float) if a.ndim == 0 else np.broadcast_to(a, shape).copy()

