"""Gavel/Quasar-style colocation estimator: low-rank completion of normalized pair throughputs.

Data, per worker type ``w``: a square matrix over job types (labels) ::

    N[j, w, k] = throughput of j while sharing w with k  /  throughput of j alone on w

(one pair measurement (j, k) on w gives two entries, ``N[j,w,k]`` and ``N[k,w,j]``). A pair measured
at zero (cannot run together, e.g. out of memory) is recorded as *infeasible*, not as a value.

Predictions for unmeasured cells (:meth:`ColocationEstimator.predict_matrix`):

* ``"completed"`` — the low-rank completion ``μ + b_j + c_k + U_j·V_k`` (:mod:`.completion`, ALS or
  soft-impute, hyper-parameters by pair-grouped K-fold validation), per worker type or jointly
  over all worker types (``joint=True``: one ``K × W·K`` matrix whose rows share factors), clipped
  to ``bounds`` (default ``[0, 1]``: sharing never speeds a job up).
* ``"nearest"`` — Quasar's rule: every job has a *completed profile* (its completed row and
  column: how others slow it down and how it slows others); a missing ``(j, k)`` takes the measured
  ``N[r, w, k]`` of the job ``r`` nearest to ``j`` (RMS distance of completed profiles) that was
  measured with ``k`` — or, symmetrically, ``N[j, w, k']`` of the measured co-runner ``k'`` nearest
  to ``k``, whichever substitute is nearer; the completed value where neither exists.
* baselines ``"row_mean"`` / ``"col_mean"`` (mean measured value of the job's row / the
  co-runner's column on ``w``) and ``"bias"`` (the rank-0 fit ``μ + b_j + c_k``).

Feasibility of unmeasured pairs (:meth:`ColocationEstimator.predict_feasible`): ``"threshold"``
(default) — the logistic memory-threshold model of :mod:`.feasibility`, ``P = σ(s_a + s_b + θ_w)``;
``"nearest"`` — the nearest-substitute rule above over all measured cells (feasible or not);
``"all"`` — every unmeasured pair feasible. A pair is predicted feasible only if both orientations are.

A new job is added with :meth:`~ColocationEstimator.add_job`, profiled with a few
:meth:`~ColocationEstimator.observe` calls (its *fingerprint*), and predicted like any other row.
Observations made while jobs run are folded in the same way: the next prediction runs a few
warm-started sweeps (``online_sweeps``) instead of a full re-fit with validation.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import InputError, UnknownNameError
from .completion import CompletionFit, default_grid, fit_completion, select
from .feasibility import fit_threshold_model

__all__ = ["ColocationEstimator", "METHODS", "FEASIBILITY", "pair_groups", "gavel_arrays"]

METHODS = ("completed", "nearest", "row_mean", "col_mean", "bias")
FEASIBILITY = ("threshold", "nearest", "all")


def pair_groups(K: int, W: int) -> np.ndarray:
    """``(K, W, K)`` group ids: cells ``(j, w, k)`` and ``(k, w, j)`` (one pair measurement) share one."""
    j, w, k = np.meshgrid(np.arange(K), np.arange(W), np.arange(K), indexing="ij")
    return (w * K + np.minimum(j, k)) * K + np.maximum(j, k)


def _finite_number(field_: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InputError(field_, value, "must be a number")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(field_, value, "must be finite (NaN and infinity are not allowed)")
    return v


class ColocationEstimator:
    """Normalized colocated throughputs of job types on worker types, completed at low rank.

    Parameters: ``method`` ``"als"`` or ``"soft_impute"``; ``rank``/``reg`` (ALS) or ``shrink``
    (soft-impute) fix the hyper-parameters (default ``None``: chosen by ``folds``-fold validation
    over pair measurements at :meth:`fit`); ``joint`` completes all worker types as one matrix;
    ``bounds`` clips predictions; ``online_sweeps`` warm-started sweeps per online refresh;
    ``feasibility`` the rule for unmeasured pairs and ``infeasible_above`` the threshold model's
    probability cut-off (lower = more cautious: fewer infeasible pairs offered to a policy, more
    feasible ones withheld).
    """

    def __init__(self, labels: Sequence[str], worker_types: Sequence[str], *, method: str = "als",
                 rank: int | None = None, reg: float | None = None, shrink: float | None = None,
                 joint: bool = False, bounds: tuple[float, float] = (0.0, 1.0), seed: int = 0,
                 folds: int = 3, online_sweeps: int = 10, feasibility: str = "threshold",
                 infeasible_above: float = 0.5) -> None:
        if method not in ("als", "soft_impute"):
            raise InputError("method", method, "must be 'als' or 'soft_impute'")
        self.labels: list[str] = []
        self._pos: dict[str, int] = {}
        wts = list(worker_types)
        if not wts or len(set(wts)) != len(wts) or not all(isinstance(w, str) and w for w in wts):
            raise InputError("worker_types", wts, "must be distinct non-empty strings (at least one)")
        self.worker_types = wts
        self._wpos = {w: i for i, w in enumerate(wts)}
        if len(bounds) != 2 or not (math.isfinite(bounds[0]) and math.isfinite(bounds[1])) or bounds[0] >= bounds[1]:
            raise InputError("bounds", bounds, "must be (low, high) with low < high, finite")
        if rank is not None and (not isinstance(rank, (int, np.integer)) or rank < 0):
            raise InputError("rank", rank, "must be an integer >= 0 or None")
        if feasibility not in FEASIBILITY:
            raise UnknownNameError("feasibility", feasibility, FEASIBILITY)
        self.feasibility = feasibility
        self.infeasible_above = self._check_cutoff(infeasible_above)
        if online_sweeps < 1:
            raise InputError("online_sweeps", online_sweeps, "must be >= 1")
        self.method = method
        self.rank, self.reg, self.shrink = rank, reg, shrink
        self.joint = bool(joint)
        self.bounds = (float(bounds[0]), float(bounds[1]))
        self.seed = int(seed)
        self.folds = int(folds)
        self.online_sweeps = int(online_sweeps)
        W = len(wts)
        self.values = np.zeros((0, W, 0))
        self.measured = np.zeros((0, W, 0), bool)
        self.infeasible = np.zeros((0, W, 0), bool)
        self.alone = np.zeros((0, W))
        self.params: list[dict[str, Any]] = []        # chosen hyper-parameters per block
        self.validation: list[list[dict[str, Any]]] = []  # validation table per block
        self._fits: list[CompletionFit] = []
        self._dirty = True
        self._cache: dict[str, np.ndarray] = {}
        for lab in labels:
            self.add_job(lab)

    @staticmethod
    def _check_cutoff(value: Any) -> float:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
            raise InputError("infeasible_above", value, "must be a probability in (0, 1)")
        return float(value)

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_arrays(cls, labels: Sequence[str], worker_types: Sequence[str], values: np.ndarray,
                    measured: np.ndarray, infeasible: np.ndarray | None = None,
                    alone: np.ndarray | None = None, **options: Any) -> "ColocationEstimator":
        """Build from dense ``(K, W, K)`` arrays (``values`` normalized, read where ``measured``) and
        optional ``alone[K, W]`` raw single throughputs (NaN or 0 = unknown)."""
        est = cls(labels, worker_types, **options)
        K, W = len(est.labels), len(est.worker_types)
        v = np.asarray(values, dtype=np.float64)
        m = np.asarray(measured)
        for name, arr in (("values", v), ("measured", m)):
            if arr.shape != (K, W, K):
                raise InputError(name, arr.shape, f"must have shape (jobs, worker_types, jobs) = {(K, W, K)}")
        if m.dtype != bool:
            raise InputError("measured", str(m.dtype), "must be a boolean array")
        inf = np.zeros((K, W, K), bool) if infeasible is None else np.asarray(infeasible)
        if inf.shape != (K, W, K) or inf.dtype != bool:
            raise InputError("infeasible", inf.shape, f"must be a boolean array of shape {(K, W, K)}")
        bad = m & ~np.isfinite(v)
        if bad.any():
            j, w, k = np.argwhere(bad)[0]
            raise InputError(f"values[{est.labels[j]}][{est.worker_types[w]}][{est.labels[k]}]", float(v[j, w, k]),
                             "measured entries must be finite")
        if (m & inf).any():
            j, w, k = np.argwhere(m & inf)[0]
            raise InputError(f"infeasible[{est.labels[j]}][{est.worker_types[w]}][{est.labels[k]}]", True,
                             "a cell cannot be both measured and infeasible")
        est.values = np.where(m, v, 0.0)
        est.measured = m.copy()
        est.infeasible = inf.copy()
        if alone is not None:
            a = np.asarray(alone, dtype=np.float64)
            if a.shape != (K, W):
                raise InputError("alone", a.shape, f"must have shape (jobs, worker_types) = {(K, W)}")
            if np.any(a[np.isfinite(a)] < 0) or np.any(np.isinf(a)):
                raise InputError("alone", a, "must be >= 0, finite, or NaN for unknown")
            est.alone = np.where(np.isfinite(a) & (a > 0), a, np.nan)
        return est

    @classmethod
    def from_gavel(cls, gavel: Any, scale_factor: int = 1, worker_types: Sequence[str] = ("k80", "p100", "v100"),
                   **options: Any) -> "ColocationEstimator":
        """From a :class:`~policyopt.data.gavel.GavelThroughputs`: the job types of ``scale_factor``
        (labels ``"<model>#<sf>"``), normalized by each type's alone throughput."""
        labels, wts, values, measured, infeasible, alone = gavel_arrays(gavel, scale_factor, worker_types)
        return cls.from_arrays(labels, wts, values, measured, infeasible, alone, **options)

    @classmethod
    def from_problem(cls, problem: Any, **options: Any) -> "ColocationEstimator":
        """From a :class:`~policyopt.problem.Problem`'s ``colocated_types`` table: job types = the
        ``job_type`` labels of its jobs; alone throughput of a type = mean over its jobs; worker types
        = the configurations the table names on which some type's jobs run alone (entries on other
        configurations cannot be normalized and are not used)."""
        if not problem.colocated_types:
            raise InputError("colocated_types", [], "the problem has no type colocation table to learn from")
        labels, wts, alone = _problem_alone(problem)
        # learn only on configurations where some job type runs alone (entries elsewhere cannot be normalized)
        usable = (alone > 0).sum(axis=0) >= 1
        if not usable.any():
            raise InputError("colocated_types", len(problem.colocated_types),
                             "no entry is on a configuration the jobs of its types can run on alone")
        wts = [w for w, u in zip(wts, usable) if u]
        alone = alone[:, usable]
        est = cls(labels, wts, **options)
        est.alone = np.where(alone > 0, alone, np.nan)
        for _i, tc in enumerate(problem.colocated_types):
            f = f"colocated_types[{'|'.join(tc.job_types)}@{tc.worker_type}]"
            for k, t in enumerate(tc.job_types):
                if t not in est._pos:
                    raise UnknownNameError(f"{f}.job_types[{k}]", t, est.labels)
        rows = [(est._pos[tc.job_types[0]], est._wpos[tc.worker_type], est._pos[tc.job_types[1]],
                 tc.throughputs[0], tc.throughputs[1]) for tc in problem.colocated_types if tc.worker_type in est._wpos]
        e = np.array(rows, dtype=np.float64).reshape(-1, 5)
        a, w, b = e[:, 0].astype(np.int64), e[:, 1].astype(np.int64), e[:, 2].astype(np.int64)
        ta, tb = e[:, 3], e[:, 4]
        al_a, al_b = est.alone[a, w], est.alone[b, w]
        ok = (ta > 0) & (tb > 0) & np.isfinite(al_a) & np.isfinite(al_b)
        zero = (ta == 0) | (tb == 0)
        est.values[a[ok], w[ok], b[ok]] = ta[ok] / al_a[ok]
        est.values[b[ok], w[ok], a[ok]] = tb[ok] / al_b[ok]
        est.measured[a[ok], w[ok], b[ok]] = est.measured[b[ok], w[ok], a[ok]] = True
        est.infeasible[a[zero], w[zero], b[zero]] = est.infeasible[b[zero], w[zero], a[zero]] = True
        return est

    # ------------------------------------------------------------------ jobs and observations
    def index(self, label: str, field_: str = "job") -> int:
        try:
            return self._pos[label]
        except (KeyError, TypeError):
            raise UnknownNameError(field_, label, self.labels) from None

    def worker_index(self, worker_type: str, field_: str = "worker_type") -> int:
        try:
            return self._wpos[worker_type]
        except (KeyError, TypeError):
            raise UnknownNameError(field_, worker_type, self.worker_types) from None

    def add_job(self, label: str, alone: Mapping[str, float] | None = None) -> int:
        """Register a job type (a new row and column, nothing measured yet); returns its index.
        ``alone``: its raw single throughput per worker type (needed only for raw predictions)."""
        if not isinstance(label, str) or not label:
            raise InputError("label", label, "job labels must be non-empty strings")
        if label in self._pos:
            raise InputError("label", label, "job label already known")
        K, W = len(self.labels), len(self.worker_types)
        grow = lambda a, fill: np.pad(a, ((0, 1), (0, 0), (0, 1)), constant_values=fill)  # noqa: E731
        self.values = grow(self.values, 0.0)
        self.measured = grow(self.measured, False)
        self.infeasible = grow(self.infeasible, False)
        row = np.full((1, W), np.nan)
        for wt, v in (alone or {}).items():
            x = _finite_number(f"alone.{wt}", v)
            if x < 0:
                raise InputError(f"alone.{wt}", v, "must be >= 0")
            row[0, self.worker_index(wt, "alone")] = x if x > 0 else np.nan
        self.alone = np.vstack([self.alone, row])
        self.labels.append(label)
        self._pos[label] = K
        self._dirty = True
        self._cache.clear()
        return K

    def observe(self, job: str, co_runner: str, worker_type: str, normalized_throughput: float,
                co_runner_normalized: float | None = None) -> None:
        """Record that ``job`` ran at ``normalized_throughput`` (× its alone throughput) while sharing
        ``worker_type`` with ``co_runner`` (and, if given, the co-runner at ``co_runner_normalized``).
        0 means the pair cannot run together. Later predictions fold it in (warm-started sweeps)."""
        j = self.index(job, "job")
        k = self.index(co_runner, "co_runner")
        w = self.worker_index(worker_type)
        x = _finite_number("normalized_throughput", normalized_throughput)
        if x < 0:
            raise InputError("normalized_throughput", normalized_throughput, "must be >= 0")
        cells = [(j, k, x)]
        if co_runner_normalized is not None:
            y = _finite_number("co_runner_normalized", co_runner_normalized)
            if y < 0:
                raise InputError("co_runner_normalized", co_runner_normalized, "must be >= 0")
            cells.append((k, j, y))
        for a, b, v in cells:
            if v == 0:
                self.infeasible[a, w, b] = self.infeasible[b, w, a] = True
                self.measured[a, w, b] = self.measured[b, w, a] = False
            else:
                self.values[a, w, b] = v
                self.measured[a, w, b] = True
                self.infeasible[a, w, b] = False
        self._dirty = True
        self._cache.clear()

    def observe_pair(self, job: str, co_runner: str, worker_type: str, throughputs: Sequence[float]) -> None:
        """:meth:`observe` from raw steps/s of both jobs (normalized by their known alone throughputs)."""
        if not isinstance(throughputs, Sequence) or isinstance(throughputs, str) or len(throughputs) != 2:
            raise InputError("throughputs", throughputs, "must hold two throughputs (job, co_runner)")
        j, k = self.index(job, "job"), self.index(co_runner, "co_runner")
        w = self.worker_index(worker_type)
        t = [_finite_number(f"throughputs[{i}]", v) for i, v in enumerate(throughputs)]
        for i, (idx, lab) in enumerate(((j, job), (k, co_runner))):
            if not np.isfinite(self.alone[idx, w]):
                raise InputError(f"alone[{lab}].{worker_type}", None, "unknown: cannot normalize a raw throughput")
            if t[i] < 0:
                raise InputError(f"throughputs[{i}]", t[i], "must be >= 0")
        self.observe(job, co_runner, worker_type, t[0] / self.alone[j, w], t[1] / self.alone[k, w])

    def forget(self, cells: np.ndarray) -> None:
        """Drop the measurements (values and infeasibility) at a boolean ``(K, W, K)`` mask."""
        c = np.asarray(cells)
        if c.shape != self.measured.shape or c.dtype != bool:
            raise InputError("cells", c.shape, f"must be a boolean array of shape {self.measured.shape}")
        self.measured &= ~c
        self.infeasible &= ~c
        self.values = np.where(self.measured, self.values, 0.0)
        self._dirty = True
        self._cache.clear()

    # ------------------------------------------------------------------ fitting
    def _blocks(self) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
        """(values, mask, groups) per completion block: one per worker type, or one joint K × W·K."""
        K, W = len(self.labels), len(self.worker_types)
        groups = pair_groups(K, W)
        if self.joint:
            return [(self.values.reshape(K, W * K), self.measured.reshape(K, W * K), groups.reshape(K, W * K))]
        return [(self.values[:, w, :], self.measured[:, w, :], groups[:, w, :]) for w in range(W)]

    def _grid(self, Z: np.ndarray, M: np.ndarray) -> list[dict[str, Any]]:
        if self.method == "als":
            if self.rank is not None and self.reg is not None:
                return [{"rank": self.rank, "reg": self.reg}]
            ranks = (self.rank,) if self.rank is not None else (0, 1, 2, 3, 5)
            regs = (self.reg,) if self.reg is not None else (0.3, 1.0, 3.0)
            return default_grid("als", ranks=ranks, regs=regs)
        if self.shrink is not None:
            return [{"shrink": self.shrink, "max_rank": self.rank}]
        return [{**p, "max_rank": self.rank} for p in default_grid("soft_impute", Z, M)]

    def fit(self) -> "ColocationEstimator":
        """Full fit: hyper-parameters by validation (unless fixed), then the completion of each block."""
        if len(self.labels) < 2:
            raise InputError("labels", self.labels, "need at least two job types")
        self.params, self.validation, self._fits = [], [], []
        for b, (Z, M, G) in enumerate(self._blocks()):
            if not M.any():
                raise InputError(f"measured[{self.worker_types[b] if not self.joint else '*'}]", 0,
                                 "no measured pair on this worker type")
            grid = self._grid(Z, M)
            if len(grid) > 1:
                best, table = select(Z, M, self.method, grid, groups=G, folds=self.folds, seed=self.seed,
                                     bounds=self.bounds)
            else:
                best, table = grid[0], []
            self.params.append(best)
            self.validation.append(table)
            self._fits.append(fit_completion(Z, M, self.method, best, seed=self.seed))
        self._dirty = False
        self._cache.clear()
        return self

    def refresh(self) -> None:
        """Fold in observations since the last fit: ``online_sweeps`` warm-started sweeps per block."""
        if not self._fits:
            self.fit()
            return
        for b, (Z, M, _) in enumerate(self._blocks()):
            init = self._fits[b].resized(Z.shape[0], Z.shape[1], seed=self.seed)
            self._fits[b] = fit_completion(Z, M, self.method, self.params[b], seed=self.seed, init=init,
                                           sweeps=self.online_sweeps)
        self._dirty = False
        self._cache.clear()

    def _ensure(self) -> None:
        if self._dirty or not self._fits:
            self.refresh()

    # ------------------------------------------------------------------ predictions
    def completed(self) -> np.ndarray:
        """The clipped low-rank completion for every cell, ``(K, W, K)`` (measured cells included)."""
        self._ensure()
        if "completed" not in self._cache:
            K, W = len(self.labels), len(self.worker_types)
            if self.joint:
                P = self._fits[0].predict().reshape(K, W, K)
            else:
                P = np.stack([f.predict() for f in self._fits], axis=1)
            self._cache["completed"] = np.clip(P, *self.bounds)
        return self._cache["completed"]

    def profile_distances(self) -> np.ndarray:
        """``D[w, j, r]``: RMS distance of the completed profiles (row and column) of jobs j and r on
        worker type w (joint: over all worker types, the same for every w)."""
        P = self.completed()
        K, W = len(self.labels), len(self.worker_types)
        prof = np.concatenate([P, P.transpose(2, 1, 0)], axis=2)  # (K, W, 2K): row j, column j
        A = prof.reshape(1, K, W * 2 * K) if self.joint else prof.transpose(1, 0, 2)  # (blocks, K, d)
        # D[w, j, r] via |a|²+|b|²−2ab per block
        sq = (A ** 2).sum(axis=2)
        D2 = sq[:, :, None] + sq[:, None, :] - 2 * np.einsum("bjd,brd->bjr", A, A)
        D = np.sqrt(np.maximum(D2, 0.0) / A.shape[2])
        return np.broadcast_to(D, (W, K, K)) if self.joint else D

    def _nearest_substitute(self, available: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For every cell (j, w, k): the nearest substitute among ``available`` cells — row route
        (r, w, k) with cost D[w, j, r], column route (j, w, k') with cost D[w, k, k'] — as
        ``(cost, src_row, src_col)`` arrays of shape (K, W, K) (cost inf where none exists)."""
        D = self.profile_distances()  # (W, K, K)
        K = len(self.labels)
        eye = np.eye(K, dtype=bool)
        Dn = np.where(eye[None], np.inf, D)  # never substitute a job by itself
        avail = available.transpose(1, 0, 2)  # (W, r, k)
        # row route: cost[w, j, r, k] = D[w, j, r] if avail[w, r, k]
        row_cost = np.where(avail[:, None, :, :], Dn[:, :, :, None], np.inf)
        r_best = row_cost.argmin(axis=2)  # (W, j, k)
        r_cost = np.take_along_axis(row_cost, r_best[:, :, None, :], axis=2)[:, :, 0, :]
        # column route: cost[w, j, k, k'] = D[w, k, k'] if avail[w, j, k']
        col_cost = np.where(avail[:, :, None, :], Dn[:, None, :, :], np.inf)
        c_best = col_cost.argmin(axis=3)  # (W, j, k)
        c_cost = np.take_along_axis(col_cost, c_best[..., None], axis=3)[..., 0]
        use_col = c_cost < r_cost
        j_idx = np.broadcast_to(np.arange(K)[None, :, None], use_col.shape)
        k_idx = np.broadcast_to(np.arange(K)[None, None, :], use_col.shape)
        src_row = np.where(use_col, j_idx, r_best)
        src_col = np.where(use_col, c_best, k_idx)
        cost = np.minimum(r_cost, c_cost)
        tr = (1, 0, 2)
        return cost.transpose(tr), src_row.transpose(tr), src_col.transpose(tr)

    def predict_matrix(self, method: str = "completed") -> np.ndarray:
        """``(K, W, K)`` normalized throughputs: measured cells as measured, the others predicted
        by ``method`` (see :data:`METHODS` and the module docstring)."""
        if method not in METHODS:
            raise UnknownNameError("method", method, METHODS)
        if method in self._cache:
            return self._cache[method]
        M = self.measured
        if method == "completed":
            pred = self.completed()
        elif method == "nearest":
            cost, sr, sc = self._nearest_substitute(M)
            w_idx = np.broadcast_to(np.arange(len(self.worker_types))[None, :, None], sr.shape)
            pred = np.where(np.isfinite(cost), self.values[sr, w_idx, sc], self.completed())
        elif method == "bias":
            blocks = self._blocks()
            fits = [fit_completion(Z, Mb, "als", {"rank": 0, "reg": 0.1}) for Z, Mb, _ in blocks]
            K, W = len(self.labels), len(self.worker_types)
            pred = fits[0].predict().reshape(K, W, K) if self.joint else np.stack([f.predict() for f in fits], axis=1)
            pred = np.clip(pred, *self.bounds)
        else:
            axis = 2 if method == "row_mean" else 0
            s = np.where(M, self.values, 0.0).sum(axis=axis, keepdims=True)
            n = M.sum(axis=axis, keepdims=True)
            wmean = np.where(M, self.values, 0.0).sum(axis=(0, 2)) / np.maximum(M.sum(axis=(0, 2)), 1)
            pred = np.where(n > 0, s / np.maximum(n, 1), wmean[None, :, None])
            pred = np.broadcast_to(pred, M.shape)
        out = np.where(M, self.values, pred)
        self._cache[method] = out
        return out

    def predict_feasible(self, rule: str | None = None, infeasible_above: float | None = None) -> np.ndarray:
        """``(K, W, K)`` bool: measured feasibility where measured, else predicted by ``rule``
        (default: the estimator's ``feasibility``; see the module docstring; ``infeasible_above``
        overrides the threshold model's cut-off); symmetric in (j, k)."""
        rule = self.feasibility if rule is None else rule
        if rule not in FEASIBILITY:
            raise UnknownNameError("rule", rule, FEASIBILITY)
        cut = self.infeasible_above if infeasible_above is None else self._check_cutoff(infeasible_above)
        key = f"feasible:{rule}:{cut}"
        if key not in self._cache:
            known = self.measured | self.infeasible
            if rule == "threshold":
                pred_inf = fit_threshold_model(self.infeasible, known).probability() > cut
            elif rule == "nearest":
                self._ensure()
                cost, sr, sc = self._nearest_substitute(known)
                w_idx = np.broadcast_to(np.arange(len(self.worker_types))[None, :, None], sr.shape)
                pred_inf = np.isfinite(cost) & self.infeasible[sr, w_idx, sc]
            else:
                pred_inf = np.zeros(known.shape, bool)
            infeas = np.where(known, self.infeasible, pred_inf)
            self._cache[key] = ~(infeas | infeas.transpose(2, 1, 0))
        return self._cache[key]

    def predict(self, job: str, co_runner: str, worker_type: str, method: str = "completed") -> float:
        """Normalized throughput of ``job`` while sharing ``worker_type`` with ``co_runner``."""
        j, k = self.index(job, "job"), self.index(co_runner, "co_runner")
        w = self.worker_index(worker_type)
        return float(self.predict_matrix(method)[j, w, k])

    def predict_pair(self, job: str, co_runner: str, worker_type: str, method: str = "completed"
                     ) -> tuple[float, float]:
        """Raw steps/s ``(job, co_runner)`` when sharing ``worker_type``; ``(0, 0)`` if predicted infeasible."""
        j, k = self.index(job, "job"), self.index(co_runner, "co_runner")
        w = self.worker_index(worker_type)
        for idx, lab in ((j, job), (k, co_runner)):
            if not np.isfinite(self.alone[idx, w]):
                raise InputError(f"alone[{lab}].{worker_type}", None, "unknown: cannot give a raw throughput")
        if not self.predict_feasible()[j, w, k]:
            return 0.0, 0.0
        P = self.predict_matrix(method)
        return float(P[j, w, k] * self.alone[j, w]), float(P[k, w, j] * self.alone[k, w])


# ---------------------------------------------------------------------- data adapters
def gavel_arrays(gavel: Any, scale_factor: int = 1, worker_types: Sequence[str] = ("k80", "p100", "v100")
                 ) -> tuple[list[str], list[str], np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(labels, worker_types, values, measured, infeasible, alone)`` from Gavel data: ``values`` =
    paired/alone, ``measured`` where both jobs of the pair have non-zero throughput, ``infeasible``
    where the pair was recorded at zero (both jobs able to run alone)."""
    idx = gavel.types_with_scale(scale_factor)
    if idx.size < 2:
        raise InputError("scale_factor", scale_factor, "fewer than two job types with this scale factor")
    wts = list(worker_types)
    cfg = []
    for i, w in enumerate(wts):
        if w not in gavel.configs:
            raise UnknownNameError(f"worker_types[{i}]", w, gavel.configs)
        cfg.append(gavel.configs.index(w))
    P = gavel.paired[np.ix_(idx, idx, cfg)]  # (K, K, W, 2)
    A = gavel.alone[np.ix_(idx, cfg)]        # (K, W)
    both = (P[..., 0] > 0) & (P[..., 1] > 0)
    runs = (A[:, None, :] > 0) & (A[None, :, :] > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        norm = np.where(both, P[..., 0] / A[:, None, :], 0.0)
    tr = (0, 2, 1)
    labels = [gavel.type_label(int(t)) for t in idx]
    return (labels, wts, norm.transpose(tr), both.transpose(tr), (runs & ~both).transpose(tr),
            np.where(A > 0, A, np.nan))


def _problem_alone(problem: Any) -> tuple[list[str], list[str], np.ndarray]:
    """Job-type labels, table worker types and mean alone throughput ``[type, worker type]`` of a problem."""
    jt = [j.job_type for j in problem.jobs]
    labels = sorted({t for t in jt if t is not None})
    if not labels:
        raise InputError("jobs[].job_type", None, "no job carries a job_type: nothing to estimate per type")
    wts = list(dict.fromkeys(tc.worker_type for tc in problem.colocated_types)) or list(problem.cluster.names)
    arr = problem.arrays
    cfg_pos = {c: i for i, c in enumerate(arr.configs)}
    code = np.array([labels.index(t) if t is not None else -1 for t in jt], np.int64)
    has = code >= 0
    cols = np.array([cfg_pos.get(w, -1) for w in wts], np.int64)
    T = np.where(cols[None, :] >= 0, arr.T[:, np.maximum(cols, 0)], 0.0)  # (n, W)
    total = np.zeros((len(labels), len(wts)))
    cnt = np.zeros((len(labels), len(wts)))
    np.add.at(total, code[has], T[has])
    np.add.at(cnt, code[has], (T[has] > 0).astype(float))
    return labels, wts, np.where(cnt > 0, total / np.maximum(cnt, 1), 0.0)
