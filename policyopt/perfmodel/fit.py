r"""Fitting the seven parameters per model: bounded RMSLE least squares from several starts.

For the n samples of one model (observed iteration times y_i) the fit solves::

    min_k  RMSLE(k) = sqrt( (1/n) Σ_i (log T_iter(row_i; k) − log y_i)² )    s.t.  lo <= k <= hi

Where a sample also has measured phase times (optional columns :data:`PHASE_COLUMNS`:
``cc_time`` = T_cc − a·T_fwd, ``opt_time`` = T_oo), their log ratios join the sum as further
residuals (each measured time counts once, as in Rubick's fit to its Tcc / Topt / T_iter), so the
backward, communication and optimizer terms are pinned separately, not only through their sum.
The reported ``rmsle`` is always that of the iteration times. The problem is solved
with :func:`scipy.optimize.least_squares` (``trf``, bounded) on the unit box
z = (k − lo)/(hi − lo), from several starts (the best final cost wins). The log ratio (not
``log1p``) is used so that the loss is a relative error at every time scale (ms CPU runs and
minute-long 30B iterations alike).

Bounds (``lo``, ``hi``): k_bwd ∈ [0.5, 10]; k_sync, k_off, k_swap ∈ [1, 50] (1 = no overlap,
sum; large = full overlap, max); k_opt, k_opt_off, k_const ∈ [0, U] where U is twice the largest
value that would let that term alone explain an observed iteration time
(e.g. U_opt = 2·max_i y_i / (P/x)_i over non-offload samples); a parameter no sample depends on
gets U = 1 and is reported as fitted but has no effect on those rows.

At least 7 samples (one per parameter), 3 of them with ``zero = offload``, are required per
model, and every fitted parameter must enter the predicted time of at least one sample
(:func:`depends`: ``k_sync`` needs a sample with dp > 1, ``k_opt`` one without offload,
``k_off`` an offload sample with dp > 1, ...); otherwise the fit refuses with an
:class:`InputError` naming the model and the parameter instead of returning a value the samples
do not determine. ``fixed={name: value}`` holds parameters at given values instead of fitting
them; then one sample per *free* parameter suffices, and the offload requirement is dropped when
all of :data:`OFFLOAD_PARAMS` are fixed (e.g. ``fixed=NO_OFFLOAD_FIXED`` for samples without
offload runs, such as CPU-only measurements, where ZeRO-Offload does not exist).
:class:`OnlineRefitter` refits a model when the relative error of new observations exceeds a
threshold.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from policyopt.errors import InputError, UnknownNameError

from .model import Terms, compute_terms, iter_time_from_terms, optional_seconds, phase_times
from .params import PARAM_NAMES, PerfParams
from .table import validate_table

__all__ = ["MIN_SAMPLES", "MIN_OFFLOAD", "OFFLOAD_PARAMS", "NO_OFFLOAD_FIXED", "PHASE_COLUMNS",
           "FitResult", "depends", "log_targets", "log_residuals", "parameter_bounds",
           "fit_model", "fit_all", "RefitEvent", "OnlineRefitter"]

MIN_SAMPLES = len(PARAM_NAMES)
MIN_OFFLOAD = 3
#: The parameters that only rows with ``zero = offload`` depend on.
OFFLOAD_PARAMS: tuple[str, ...] = ("k_opt_off", "k_off", "k_swap")
#: Documented defaults for fitting samples without offload runs: no CPU optimizer cost, and the
#: swap overlaps additively (k = 1). They do not affect any non-offload row; a fit made with them
#: must not be used to predict offload plans.
NO_OFFLOAD_FIXED: dict[str, float] = {"k_opt_off": 0.0, "k_off": 1.0, "k_swap": 1.0}
_FIXED_LO = {"k_bwd": 0.5, "k_sync": 1.0, "k_off": 1.0, "k_swap": 1.0}
_FIXED_HI = {"k_bwd": 10.0, "k_sync": 50.0, "k_off": 50.0, "k_swap": 50.0}
#: A central start in natural units for the dimensionless parameters; scale parameters start
#: at 5% of their upper bound.
_CENTRAL = {"k_bwd": 2.0, "k_sync": 2.0, "k_off": 2.0, "k_swap": 2.0}
_SCALE_PARAMS = ("k_opt", "k_opt_off", "k_const")


#: What a sample must have for a parameter to enter its predicted time.
_NEEDS = {"k_bwd": "any sample", "k_sync": "a sample with dp > 1 (and dp_overlap not 0)",
          "k_opt": "a sample with zero = none or dp", "k_opt_off": "a sample with zero = offload",
          "k_off": "a sample with zero = offload and dp > 1", "k_swap": "a sample with zero = offload",
          "k_const": "any sample"}


def depends(terms: Terms) -> np.ndarray:
    """(n, 7) bool: does row i's predicted time depend on parameter j."""
    n = len(terms)
    every = np.ones(n, dtype=bool)
    cols = {"k_bwd": every, "k_sync": (terms.t_dp > 0) & terms.sync_overlap,
            "k_opt": terms.opt_units > 0,
            "k_opt_off": terms.off_units > 0, "k_off": terms.offload & (terms.t_dp > 0),
            "k_swap": terms.offload, "k_const": every}
    # k_off enters through f(T_dp, T_off), which is T_off whatever k_off when T_dp = 0.
    return np.stack([cols[n] for n in PARAM_NAMES], axis=1)


#: Optional measured phase columns of a sample (s, blank where not measured): ``cc_time`` =
#: T_cc − a·T_fwd (backward with the communication it does not hide), ``opt_time`` = T_oo.
PHASE_COLUMNS: tuple[str, ...] = ("cc_time", "opt_time")


def log_targets(clean: pd.DataFrame, table: str = "samples") -> np.ndarray:
    """(n, 3) logs of the measured iter_time, cc_time, opt_time (NaN where not measured)."""
    cols = [clean["iter_time"].to_numpy(dtype=float)]
    cols += [optional_seconds(clean, c, table) for c in PHASE_COLUMNS]
    return np.log(np.stack(cols, axis=1))


def log_residuals(terms: Terms, k: np.ndarray, targets: np.ndarray, mask: np.ndarray
                  ) -> np.ndarray:
    """log(predicted / measured) of every measured time (``mask``: finite ``targets``)."""
    k = np.asarray(k, dtype=float)
    cc, oo = phase_times(terms, k)
    pred = np.stack([terms.ga * terms.t_fwd + cc + oo + k[..., -1], cc, oo], axis=1)
    # Guard only: in-bounds parameters give pred > 0 (a phase may be 0 at a bound); a
    # non-finite trial point must not poison the trust-region step.
    return np.nan_to_num(np.log(np.maximum(pred, 1e-300))[mask] - targets[mask],
                         nan=1e3, posinf=1e3, neginf=-1e3)


@dataclass(frozen=True)
class FitResult:
    """Outcome of fitting one model."""

    model: str
    params: PerfParams
    rmsle: float
    n_samples: int
    n_offload: int
    lower: np.ndarray
    upper: np.ndarray
    start_rmsle: tuple[float, ...]  # final objective (RMS log error) reached from each start
    seconds: float

    def info(self) -> dict[str, Any]:
        """JSON-ready diagnostics (stored under ``fit`` in PARAMS.json)."""
        return {
            "rmsle": self.rmsle, "n_samples": self.n_samples, "n_offload": self.n_offload,
            "n_starts": len(self.start_rmsle), "start_rmsle": list(self.start_rmsle),
            "lower": dict(zip(PARAM_NAMES, self.lower.tolist())),
            "upper": dict(zip(PARAM_NAMES, self.upper.tolist())), "seconds": self.seconds,
        }


def parameter_bounds(terms: Terms, observed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(lo, hi) arrays in :data:`PARAM_NAMES` order for samples ``terms`` with times ``observed``."""

    def cap(units: np.ndarray) -> float:
        used = units > 0
        return float(2.0 * np.max(observed[used] / units[used])) if used.any() else 1.0

    hi_scale = {"k_opt": cap(terms.opt_units), "k_opt_off": cap(terms.off_units),
                "k_const": float(2.0 * np.max(observed))}
    lo = np.array([_FIXED_LO.get(n, 0.0) for n in PARAM_NAMES])
    hi = np.array([_FIXED_HI.get(n, hi_scale.get(n)) for n in PARAM_NAMES], dtype=float)
    return lo, hi


def _starts(lo: np.ndarray, hi: np.ndarray, n_starts: int, rng: np.random.Generator
            ) -> np.ndarray:
    """n_starts points in the box: one central, the rest random (log-uniform for scale params)."""
    central = np.array([_CENTRAL.get(n, 0.05 * h) for n, h in zip(PARAM_NAMES, hi)])
    rand = lo + rng.random((max(n_starts - 1, 0), lo.size)) * (hi - lo)
    scale_idx = [PARAM_NAMES.index(n) for n in _SCALE_PARAMS]
    rand[:, scale_idx] = hi[scale_idx] * 10.0 ** rng.uniform(-4.0, 0.0, (rand.shape[0], 3))
    return np.vstack([central, rand])[:n_starts]


def _check_fixed(fixed: Any) -> dict[str, float]:
    """Validate ``fixed`` (None or a mapping parameter name -> finite number) as a plain dict."""
    if fixed is None:
        return {}
    if not isinstance(fixed, dict):
        raise InputError("fixed", fixed, "must be a dict of parameter name -> value")
    out: dict[str, float] = {}
    for name, value in fixed.items():
        if name not in PARAM_NAMES:
            raise UnknownNameError("fixed", name, PARAM_NAMES)
        if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)) \
                or not np.isfinite(value):
            raise InputError(f"fixed.{name}", value, "must be a finite number")
        out[name] = float(value)
    if len(out) == len(PARAM_NAMES):
        raise InputError("fixed", sorted(out), "fixes every parameter: nothing left to fit")
    return out


def _check_samples(clean: pd.DataFrame, model: str, fixed: tuple[str, ...] = ()) -> int:
    """Raise unless ``clean`` has enough samples; returns the offload sample count.

    Needs one sample per free parameter, :data:`MIN_OFFLOAD` offload samples unless every
    parameter of :data:`OFFLOAD_PARAMS` is in ``fixed``, and for every free parameter a sample
    whose predicted time depends on it (:func:`depends`).
    """
    n = len(clean)
    n_off = int((clean["zero"] == "offload").sum())
    n_free = len(PARAM_NAMES) - len(set(fixed))
    if n < n_free:
        raise InputError(f"samples(model={model})", n,
                         f"need at least {n_free} samples (one per fitted parameter)")
    if n_off < MIN_OFFLOAD and not set(OFFLOAD_PARAMS) <= set(fixed):
        raise InputError(f"samples(model={model}).zero", n_off,
                         f"need at least {MIN_OFFLOAD} samples with zero = offload")
    informed = np.asarray(depends(compute_terms(clean)).any(axis=0))
    for j, name in enumerate(PARAM_NAMES):
        if name not in fixed and not informed[j]:
            raise InputError(f"samples(model={model}).{name}", n,
                             f"no sample of this model depends on {name} (needs "
                             f"{_NEEDS[name]}): fix it (--fix {name}=VALUE) or share it with "
                             f"other models (--pool {name})")
    return n_off


def fit_model(samples: pd.DataFrame, *, model: str | None = None, n_starts: int = 8,
              seed: int = 0, starts: np.ndarray | None = None, table: str = "samples",
              fixed: dict[str, float] | None = None) -> FitResult:
    """Fit the seven parameters of one model by bounded RMSLE least squares.

    ``samples`` is a sample table (all rows of one model, or pass ``model`` to select its rows).
    ``starts`` (shape (k, 7), natural units, inside the bounds) replaces the generated starts;
    otherwise ``n_starts`` starts are drawn with ``numpy.random.default_rng(seed)``.
    ``fixed`` holds the named parameters at the given values (inside their bounds); only the
    others are fitted, and ``lower``/``upper`` of the result equal the fixed value for them.
    """
    held = _check_fixed(fixed)
    clean = validate_table(samples, table, require_iter_time=True)
    names = clean["model"].unique()
    if model is None:
        if names.size != 1:
            raise InputError(f"{table}.model", sorted(names.tolist()),
                             "several models: pass model= or use fit_all")
        model = str(names[0])
    else:
        clean = clean[clean["model"] == model].reset_index(drop=True)
        if clean.empty:
            raise InputError(f"{table}.model", model, "no samples of this model")
    n_off = _check_samples(clean, model, tuple(held))
    if not isinstance(n_starts, int) or n_starts < 1:
        raise InputError("n_starts", n_starts, "must be an integer >= 1")

    terms = compute_terms(clean)
    observed = clean["iter_time"].to_numpy(dtype=float)
    targets = log_targets(clean, table)
    mask = np.isfinite(targets)
    only_iter = np.zeros_like(mask)
    only_iter[:, 0] = True
    lo, hi = parameter_bounds(terms, observed)
    fixed_idx = np.array([PARAM_NAMES.index(n) for n in held], dtype=int)
    fixed_val = np.array(list(held.values()), dtype=float)
    out_of_box = np.flatnonzero((fixed_val < lo[fixed_idx]) | (fixed_val > hi[fixed_idx]))
    if out_of_box.size:
        j = int(fixed_idx[out_of_box[0]])
        raise InputError(f"fixed.{PARAM_NAMES[j]}", float(fixed_val[out_of_box[0]]),
                         f"outside the bounds [{lo[j]:.6g}, {hi[j]:.6g}]")
    lo[fixed_idx] = hi[fixed_idx] = fixed_val
    free = np.ones(len(PARAM_NAMES), dtype=bool)
    free[fixed_idx] = False
    if starts is None:
        x0s = _starts(lo, hi, n_starts, np.random.default_rng(seed))
    else:
        x0s = np.atleast_2d(np.asarray(starts, dtype=float))
        if x0s.shape[1] != len(PARAM_NAMES):
            raise InputError("starts", x0s.shape, f"need shape (k, {len(PARAM_NAMES)})")
        bad = np.argwhere((~np.isfinite(x0s) | (x0s < lo) | (x0s > hi)) & free)
        if bad.size:
            i, j = (int(v) for v in bad[0])
            raise InputError(f"starts[{i}].{PARAM_NAMES[j]}", float(x0s[i, j]),
                             f"outside the bounds [{lo[j]:.6g}, {hi[j]:.6g}]")
    width = hi - lo

    def full(z: np.ndarray) -> np.ndarray:
        """Natural-unit parameters: free ones from the unit-box point z, fixed ones as held."""
        k = lo.copy()
        k[free] = lo[free] + z * width[free]
        return k

    def residuals(z: np.ndarray) -> np.ndarray:
        return log_residuals(terms, full(z), targets, mask)

    began = time.perf_counter()
    best_z, best_cost, finals = None, np.inf, []
    for x0 in x0s:
        sol = least_squares(residuals, (x0[free] - lo[free]) / width[free], bounds=(0.0, 1.0),
                            method="trf", x_scale=1.0, max_nfev=2000)
        cost = float(np.sqrt(np.mean(sol.fun ** 2)))
        finals.append(cost)
        if cost < best_cost:
            best_z, best_cost = np.clip(sol.x, 0.0, 1.0), cost
    assert best_z is not None
    k = np.clip(full(best_z), lo, hi)
    rmsle = float(np.sqrt(np.mean(log_residuals(terms, k, targets, only_iter) ** 2)))
    return FitResult(model=model, params=PerfParams.from_array(k), rmsle=rmsle,
                     n_samples=len(clean), n_offload=n_off, lower=lo, upper=hi,
                     start_rmsle=tuple(finals), seconds=time.perf_counter() - began)


def fit_all(samples: pd.DataFrame, *, n_starts: int = 8, seed: int = 0,
            table: str = "samples", fixed: dict[str, float] | None = None
            ) -> dict[str, FitResult]:
    """One :class:`FitResult` per distinct ``model`` of ``samples`` (``fixed`` as in fit_model)."""
    clean = validate_table(samples, table, require_iter_time=True)
    return {str(name): fit_model(clean, model=str(name), n_starts=n_starts, seed=seed,
                                 table=table, fixed=fixed)
            for name in pd.unique(clean["model"])}


@dataclass(frozen=True)
class RefitEvent:
    """What :meth:`OnlineRefitter.observe` did for one model."""

    model: str
    error: float        # max |pred/observed − 1| over the new rows (inf: no fit yet)
    refitted: bool
    rmsle: float | None  # training RMSLE after the refit (None: not refitted / not fittable)


@dataclass
class OnlineRefitter:
    """Keeps all samples and refits a model when new runs are mispredicted.

    ``observe(runs)`` appends ``runs`` to the samples; for each model in ``runs`` it computes the
    relative error max_i |T̂_i / y_i − 1| of the *current* parameters on the new rows and refits
    on all samples of that model (warm start from the current parameters plus ``n_starts − 1``
    random starts) if the error exceeds ``threshold``. Models not yet fitted are fitted as soon
    as they have enough samples. ``window`` = None refits on every sample of the model (the
    behaviour is stationary, new runs only add information); an integer refits on the
    ``window`` most recent samples only (the job's behaviour drifted, e.g. under contention).
    """

    samples: pd.DataFrame
    threshold: float = 0.10
    n_starts: int = 8
    seed: int = 0
    window: int | None = None
    fits: dict[str, FitResult] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not (isinstance(self.threshold, (int, float)) and self.threshold > 0):
            raise InputError("threshold", self.threshold, "must be > 0")
        if self.window is not None and (isinstance(self.window, bool)
                                        or not isinstance(self.window, int)
                                        or self.window < MIN_SAMPLES):
            raise InputError("window", self.window, f"must be None or an integer >= {MIN_SAMPLES}")
        self.samples = validate_table(self.samples, "samples", require_iter_time=True)
        if not self.fits:
            self.fits = fit_all(self.samples, n_starts=self.n_starts, seed=self.seed)

    @property
    def params(self) -> dict[str, PerfParams]:
        """Current parameters per model."""
        return {name: fit.params for name, fit in self.fits.items()}

    def observe(self, runs: pd.DataFrame) -> list[RefitEvent]:
        """Add observed runs; refit the models whose error on them exceeds the threshold."""
        new = validate_table(runs, "runs", require_iter_time=True)
        self.samples = pd.concat([self.samples, new], ignore_index=True)
        terms = compute_terms(new)
        events: list[RefitEvent] = []
        for name in pd.unique(new["model"]):
            rows = np.flatnonzero(new["model"].to_numpy() == name)
            fit = self.fits.get(str(name))
            if fit is None:
                error = float("inf")
            else:
                pred = iter_time_from_terms(terms.take(rows), fit.params.as_array())
                error = float(np.max(np.abs(pred / new["iter_time"].to_numpy()[rows] - 1.0)))
            if error <= self.threshold:
                events.append(RefitEvent(str(name), error, False, None))
                continue
            mine = self.samples[self.samples["model"] == name].reset_index(drop=True)
            if self.window is not None:
                mine = mine.iloc[-self.window:].reset_index(drop=True)
            try:
                _check_samples(mine, str(name))
            except InputError:
                events.append(RefitEvent(str(name), error, False, None))
                continue
            refit = self._refit(mine, fit)
            self.fits[str(name)] = refit
            events.append(RefitEvent(str(name), error, True, refit.rmsle))
        return events

    def _refit(self, mine: pd.DataFrame, previous: FitResult | None) -> FitResult:
        """Fit ``mine``; warm-start from ``previous`` (clipped to the new bounds) if given."""
        if previous is None:
            return fit_model(mine, n_starts=self.n_starts, seed=self.seed)
        lo, hi = parameter_bounds(compute_terms(mine), mine["iter_time"].to_numpy(dtype=float))
        rng = np.random.default_rng(self.seed)
        # The previous optimum is a start, not input: projecting it into the new box is intended.
        warm = np.clip(previous.params.as_array(), lo, hi)
        starts = np.vstack([warm, _starts(lo, hi, self.n_starts, rng)[: self.n_starts - 1]])
        return fit_model(mine, starts=starts)
