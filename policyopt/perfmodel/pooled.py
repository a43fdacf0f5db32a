r"""Pooled fit across the models of one samples file: shared, per-model and held parameters.

With models ``M`` (samples ``S_m``), a set ``pooled`` of parameters shared by all models (the
hardware-bound ones: optimizer cost per parameter, overlap exponents, ...) and ``fixed``
parameters held at given values, the fit solves one bounded least-squares problem::

    min  sqrt( (1/Σ|S_m|) Σ_m Σ_{i∈S_m} (log T_iter(row_i; k_pooled, k_m, k_fixed) − log y_i)² )

(plus the measured phase times of the samples that have them, as in
:func:`~policyopt.perfmodel.fit.fit_model`) over one value per pooled parameter and one value
per model for each remaining free parameter
(bounds as in :func:`~policyopt.perfmodel.fit.parameter_bounds`, taken over all samples for the
pooled ones and over the model's samples for its own). A model with 3 samples can then be fitted
when the parameters its samples do not determine are pooled or fixed.

Information check (before fitting), each failure an :class:`~policyopt.errors.InputError`
naming what is missing: every model-specific free parameter must have a sample of that model
that depends on it (``k_sync``: dp > 1; ``k_opt``: zero ≠ offload; ``k_opt_off``, ``k_swap``:
zero = offload; ``k_off``: zero = offload and dp > 1; ``k_bwd``, ``k_const``: any sample),
every pooled one a sample of some model; each model needs at least as many samples as it has
own free parameters, and all samples together at least as many as free values in total.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Iterable

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from policyopt.errors import InputError, UnknownNameError

from .fit import (_NEEDS, _check_fixed, _starts, depends, fit_model, log_residuals,
                  log_targets, parameter_bounds)
from .model import compute_terms
from .params import PARAM_NAMES, PerfParams
from .table import validate_table

__all__ = ["PooledFit", "fit_pooled", "StagedFit", "fit_staged", "OFFLOAD_ONLY_HELD", "GPU_SIDE",
           "parse_assignments", "parse_names", "depends"]


@dataclass(frozen=True)
class PooledFit:
    """Result of :func:`fit_pooled`: one parameter set per model plus what was shared."""

    params: dict[str, PerfParams]
    rmsle: dict[str, float]
    n_samples: dict[str, int]
    pooled: tuple[str, ...]
    fixed: dict[str, float]
    total_rmsle: float
    seconds: float

    def info(self, model: str) -> dict[str, Any]:
        """JSON-ready diagnostics of one model (stored under ``fit`` in PARAMS.json)."""
        return {"mode": "pooled", "rmsle": self.rmsle[model], "n_samples": self.n_samples[model],
                "pooled": list(self.pooled), "fixed": dict(self.fixed),
                "pooled_models": sorted(self.params), "pooled_rmsle": self.total_rmsle,
                "seconds": self.seconds}


def parse_names(text: str | Iterable[str] | None, field: str) -> tuple[str, ...]:
    """``"k_opt,k_sync"`` (or a list) -> validated parameter names."""
    if text is None:
        return ()
    items = [t.strip() for t in (text.split(",") if isinstance(text, str) else text)]
    out = tuple(t for t in items if t)
    for name in out:
        if name not in PARAM_NAMES:
            raise UnknownNameError(field, name, PARAM_NAMES)
    return out


def parse_assignments(text: str | None, field: str = "fix") -> dict[str, float]:
    """``"k_off=1,k_swap=1"`` -> {name: value} (names and numbers validated)."""
    if not text:
        return {}
    out: dict[str, Any] = {}
    for item in (t.strip() for t in text.split(",")):
        if not item:
            continue
        name, sep, value = item.partition("=")
        if not sep:
            raise InputError(field, item, "expected NAME=VALUE")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise InputError(f"{field}.{name.strip()}", value, "must be a number") from None
    return _check_fixed(out)


def fit_pooled(samples: pd.DataFrame, pooled: Iterable[str], *,
               fixed: dict[str, float] | None = None, n_starts: int = 8, seed: int = 0,
               table: str = "samples") -> PooledFit:
    """Fit all models of ``samples`` together, sharing ``pooled`` (see the module docstring)."""
    held = _check_fixed(fixed)
    shared = tuple(dict.fromkeys(parse_names(list(pooled), "pool")))
    both = sorted(set(shared) & set(held))
    if both:
        raise InputError("pool", both[0], "is also fixed: pool it or fix it, not both")
    if not isinstance(n_starts, int) or n_starts < 1:
        raise InputError("n_starts", n_starts, "must be an integer >= 1")
    clean = validate_table(samples, table, require_iter_time=True)
    models = [str(m) for m in pd.unique(clean["model"])]
    terms = compute_terms(clean)
    observed = clean["iter_time"].to_numpy(dtype=float)
    dep = depends(terms)
    codes = pd.Index(models).get_indexer(clean["model"].astype(str))
    own = [n for n in PARAM_NAMES if n not in shared and n not in held]

    # Information check.
    for name in shared:
        if not dep[:, PARAM_NAMES.index(name)].any():
            raise InputError(f"pool.{name}", 0, f"no sample of any model depends on it (needs "
                             f"{_NEEDS[name]}): fix it instead")
    for m, model in enumerate(models):
        rows = codes == m
        for name in own:
            if not dep[rows, PARAM_NAMES.index(name)].any():
                raise InputError(f"samples(model={model}).{name}", int(rows.sum()),
                                 f"no sample of this model depends on {name} (needs "
                                 f"{_NEEDS[name]}): pool it (--pool {name}) or fix it "
                                 f"(--fix {name}=VALUE)")
        if rows.sum() < len(own):
            raise InputError(f"samples(model={model})", int(rows.sum()),
                             f"need at least {len(own)} samples for its own parameters "
                             f"({', '.join(own)}); pool or fix more of them")
    n_free = len(shared) + len(own) * len(models)
    if len(clean) < n_free:
        raise InputError("samples", len(clean), f"need at least {n_free} samples for the "
                         f"{n_free} fitted values; pool or fix more parameters")

    # Bounds: pooled ones over all samples, own ones per model.
    lo_all, hi_all = parameter_bounds(terms, observed)
    per = [parameter_bounds(terms.take(np.flatnonzero(codes == m)), observed[codes == m])
           for m in range(len(models))]
    lo_m = np.stack([b[0] for b in per])  # (M, 7)
    hi_m = np.stack([b[1] for b in per])
    for name, value in held.items():
        j = PARAM_NAMES.index(name)
        if not lo_all[j] <= value <= max(hi_all[j], hi_m[:, j].max()):
            raise InputError(f"fix.{name}", value, f"outside the bounds [{lo_all[j]:.6g}, "
                             f"{hi_all[j]:.6g}]")
    s_idx = [PARAM_NAMES.index(n) for n in shared]
    o_idx = [PARAM_NAMES.index(n) for n in own]
    base = np.zeros(len(PARAM_NAMES))
    for name, value in held.items():
        base[PARAM_NAMES.index(name)] = value
    lo_vec = np.concatenate([lo_all[s_idx], lo_m[:, o_idx].ravel()])
    hi_vec = np.concatenate([hi_all[s_idx], hi_m[:, o_idx].ravel()])
    width = np.where(hi_vec > lo_vec, hi_vec - lo_vec, 1.0)

    def matrix(z: np.ndarray) -> np.ndarray:
        """(M, 7) parameter sets from the unit-box point z."""
        x = lo_vec + z * width
        k = np.tile(base, (len(models), 1))
        k[:, s_idx] = x[:len(s_idx)]
        k[:, o_idx] = x[len(s_idx):].reshape(len(models), len(o_idx))
        return k

    targets = log_targets(clean, table)
    mask = np.isfinite(targets)
    only_iter = np.zeros_like(mask)
    only_iter[:, 0] = True

    def residuals(z: np.ndarray) -> np.ndarray:
        return log_residuals(terms, matrix(z)[codes], targets, mask)

    rng = np.random.default_rng(seed)
    # Starts: per model the single-model start recipe, pooled values from the all-sample one.
    starts_all = _starts(lo_all, hi_all, n_starts, rng)
    starts_m = [_starts(lo_m[m], hi_m[m], n_starts, rng) for m in range(len(models))]
    began = time.perf_counter()
    best_z, best_cost = None, np.inf
    for s in range(n_starts):
        x0 = np.concatenate([starts_all[s, s_idx]] + [sm[s, o_idx] for sm in starts_m])
        z0 = np.clip((x0 - lo_vec) / width, 0.0, 1.0)
        sol = least_squares(residuals, z0, bounds=(0.0, 1.0), method="trf", max_nfev=3000)
        cost = float(np.sqrt(np.mean(sol.fun ** 2)))
        if cost < best_cost:
            best_z, best_cost = np.clip(sol.x, 0.0, 1.0), cost
    assert best_z is not None
    k = matrix(best_z)
    res = log_residuals(terms, k[codes], targets, only_iter)  # iteration times, row order
    return PooledFit(
        params={m: PerfParams.from_array(k[i]) for i, m in enumerate(models)},
        rmsle={m: float(np.sqrt(np.mean(res[codes == i] ** 2))) for i, m in enumerate(models)},
        n_samples={m: int((codes == i).sum()) for i, m in enumerate(models)},
        pooled=shared, fixed=held, total_rmsle=float(np.sqrt(np.mean(res ** 2))),
        seconds=time.perf_counter() - began)


#: Held for offload-only models in :func:`fit_staged`: backward ≈ two forward passes (its FLOPs:
#: gradients of the activations and of the weights), no constant beyond the modelled terms.
OFFLOAD_ONLY_HELD: dict[str, float] = {"k_bwd": 2.0, "k_const": 0.0}
#: Pooled parameters that an offload-only model takes over from the pooled stage (GPU side).
GPU_SIDE: tuple[str, ...] = ("k_opt", "k_sync", "k_off")


@dataclass(frozen=True)
class StagedFit:
    """Result of :func:`fit_staged`: the pooled stage plus the offload-only models."""

    params: dict[str, PerfParams]
    rmsle: dict[str, float]
    n_samples: dict[str, int]
    pooled: tuple[str, ...]
    fixed: dict[str, float]
    held: dict[str, dict[str, float]]  # offload-only model -> the values it was given
    stage1: PooledFit

    def info(self, model: str) -> dict[str, Any]:
        """JSON-ready diagnostics of one model (stored under ``fit`` in PARAMS.json)."""
        if model not in self.held:
            return dict(self.stage1.info(model), mode="staged-pooled")
        return {"mode": "staged-offload-only", "rmsle": self.rmsle[model],
                "n_samples": self.n_samples[model], "held": dict(self.held[model]),
                "pooled_models": sorted(self.stage1.params)}


def fit_staged(samples: pd.DataFrame, pooled: Iterable[str], *,
               fixed: dict[str, float] | None = None, n_starts: int = 8, seed: int = 0,
               table: str = "samples") -> StagedFit:
    r"""Pooled fit in two stages, for files where some models have only ZeRO-Offload samples.

    Offload-only samples cannot split a model's time between backward and offload: the CPU
    optimizer, the host copies and the compute all scale as 1/d, so a pooled fit is free to put
    the offload time into ``k_bwd`` and ``k_const``, which that model's plans without offload then
    pay. Stage 1 is :func:`fit_pooled` over the models with at least one sample without offload.
    Stage 2 fits each offload-only model alone (:func:`~policyopt.perfmodel.fit.fit_model`) with
    the stage-1 values of the pooled :data:`GPU_SIDE` parameters held and ``k_bwd``, ``k_const``
    held at :data:`OFFLOAD_ONLY_HELD` (unless ``fixed`` names them); its remaining parameters
    (the CPU side: ``k_opt_off``, ``k_swap``, and any not pooled) are fitted to its samples.
    ``held`` of the result says, per offload-only model, every value it was given.
    """
    held_all = _check_fixed(fixed)
    shared = tuple(dict.fromkeys(parse_names(list(pooled), "pool")))
    clean = validate_table(samples, table, require_iter_time=True)
    offload_only = clean.groupby("model", sort=False)["zero"].agg(
        lambda z: bool((z == "offload").all()))
    first = clean[~clean["model"].map(offload_only).to_numpy(dtype=bool)]
    if first.empty:
        raise InputError(f"{table}.zero", "offload", "every model has only ZeRO-Offload samples: "
                         "no model informs the GPU-side parameters of the pooled stage")
    stage1 = fit_pooled(first, shared, fixed=held_all, n_starts=n_starts, seed=seed, table=table)
    hardware = next(iter(stage1.params.values()))
    params, rmsle, counts = dict(stage1.params), dict(stage1.rmsle), dict(stage1.n_samples)
    held: dict[str, dict[str, float]] = {}
    for model in offload_only.index[offload_only.to_numpy(dtype=bool)]:
        name = str(model)
        given = {n: getattr(hardware, n) for n in GPU_SIDE if n in shared}
        given.update(OFFLOAD_ONLY_HELD)
        given.update(held_all)
        fit = fit_model(clean, model=name, n_starts=n_starts, seed=seed, table=table,
                        fixed=given)
        params[name], rmsle[name], counts[name] = fit.params, fit.rmsle, fit.n_samples
        held[name] = given
    return StagedFit(params=params, rmsle=rmsle, n_samples=counts, pooled=shared,
                     fixed=held_all, held=held, stage1=stage1)
