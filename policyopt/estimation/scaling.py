"""Throughput of data-parallel jobs on ``g`` GPUs from single-GPU throughput.

Linear scaling (the default assumption)::

    thr(g, c) ≈ g · thr(1, type(c))

for a configuration ``c`` (a worker type, or ``<type>_unconsolidated`` when the ``g`` workers are
spread over servers); packed pairs scale the same way, i.e. a pair's *normalized* throughputs (pair
throughput / alone throughput) do not depend on ``g``. :class:`ScalingModel` multiplies by an
efficiency ``e[c, g]`` fitted from measured multi-GPU throughputs (geometric mean over job models
of ``thr(g, c) / (g · thr(1, type(c)))``), which captures the communication cost, in particular of
spread (unconsolidated) placements. :func:`scaling_dataset` extracts the measurements from Gavel's
file; ``benchmarks/estimation_bench.py`` reports how far linear scaling is from them.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import InputError
from ..problem import physical_type

__all__ = ["linear_scaling", "ScalingModel", "ScalingData", "scaling_dataset", "power_law_predictions"]


def linear_scaling(single_gpu_throughput: Any, gpus: Any, efficiency: Any = 1.0) -> np.ndarray:
    """``g · e · thr(1)`` (broadcast over arrays). Raises ``InputError`` on NaN, negatives or ``g < 1``."""
    t = np.asarray(single_gpu_throughput, dtype=np.float64)
    g = np.asarray(gpus, dtype=np.float64)
    e = np.asarray(efficiency, dtype=np.float64)
    for name, a in (("single_gpu_throughput", t), ("gpus", g), ("efficiency", e)):
        if not np.all(np.isfinite(a)):
            raise InputError(name, a.tolist(), "must be finite (NaN and infinity are not allowed)")
    if np.any(t < 0):
        raise InputError("single_gpu_throughput", t.tolist(), "must be >= 0")
    if np.any(g < 1) or np.any(g != np.round(g)):
        raise InputError("gpus", g.tolist(), "must be integers >= 1")
    if np.any(e <= 0):
        raise InputError("efficiency", e.tolist(), "must be > 0")
    try:
        return g * e * t
    except ValueError:
        raise InputError("gpus", g.shape, f"cannot broadcast with single_gpu_throughput {t.shape}") from None


@dataclass(frozen=True)
class ScalingData:
    """Measured scaling: one row per (model, configuration, g) with ``single`` = thr(1, type(c)) and
    ``measured`` = thr(g, c), both > 0."""

    models: np.ndarray      # str
    configs: np.ndarray     # str
    gpus: np.ndarray        # int
    single: np.ndarray
    measured: np.ndarray

    @property
    def ratio(self) -> np.ndarray:
        """``thr(g, c) / (g · thr(1))``: 1 means perfectly linear."""
        return self.measured / (self.gpus * self.single)


def scaling_dataset(gavel: Any) -> ScalingData:
    """Every (model, configuration, g > 1) of a Gavel file whose model also has a single-GPU type
    with non-zero throughput on the same physical worker type."""
    pos = {t: i for i, t in enumerate(gavel.job_types)}
    cfg_phys = [gavel.configs.index(physical_type(c)) if physical_type(c) in gavel.configs else -1
                for c in gavel.configs]
    rows_m, rows_c, rows_g, rows_i1, rows_ig, rows_cc, rows_cp = [], [], [], [], [], [], []
    for (model, sf), i in pos.items():
        if sf == 1 or (model, 1) not in pos:
            continue
        for c, name in enumerate(gavel.configs):
            if cfg_phys[c] < 0:
                continue
            rows_m.append(model)
            rows_c.append(name)
            rows_g.append(sf)
            rows_i1.append(pos[(model, 1)])
            rows_ig.append(i)
            rows_cc.append(c)
            rows_cp.append(cfg_phys[c])
    i1, ig = np.array(rows_i1, np.int64), np.array(rows_ig, np.int64)
    cc, cp = np.array(rows_cc, np.int64), np.array(rows_cp, np.int64)
    single = gavel.alone[i1, cp]
    meas = gavel.alone[ig, cc]
    ok = (single > 0) & (meas > 0)
    return ScalingData(np.array(rows_m, dtype=object)[ok].astype(str), np.array(rows_c, dtype=object)[ok].astype(str),
                       np.array(rows_g, np.int64)[ok], single[ok], meas[ok])


@dataclass
class ScalingModel:
    """``thr(g, c) = g · e[c, g] · thr(1, type(c))``; ``e`` missing for a (c, g) means 1 (linear)."""

    efficiency: dict[tuple[str, int], float] = field(default_factory=dict)

    @classmethod
    def linear(cls) -> "ScalingModel":
        """Pure linear scaling (every efficiency 1)."""
        return cls({})

    @classmethod
    def fit(cls, data: ScalingData, exclude_models: Sequence[str] = ()) -> "ScalingModel":
        """``e[c, g]`` = geometric mean of the measured ratios over models (``exclude_models`` left out,
        e.g. for leave-one-model-out validation)."""
        keep = ~np.isin(data.models, np.asarray(list(exclude_models), dtype=str)) if exclude_models else \
            np.ones(data.models.size, bool)
        if not keep.any():
            raise InputError("exclude_models", list(exclude_models), "leaves no measurement to fit")
        keys = np.char.add(np.char.add(data.configs[keep], "@"), data.gpus[keep].astype(str))
        uniq, inv = np.unique(keys, return_inverse=True)
        logr = np.log(data.ratio[keep])
        mean = np.bincount(inv, weights=logr) / np.bincount(inv)
        eff = {}
        for k, m in zip(uniq.tolist(), mean.tolist()):
            c, g = k.rsplit("@", 1)
            eff[(c, int(g))] = float(math.exp(m))
        return cls(eff)

    def factor(self, config: str, gpus: int) -> float:
        """The efficiency ``e[config, gpus]`` (1 where not fitted, always 1 for one GPU)."""
        if not isinstance(gpus, (int, np.integer)) or gpus < 1:
            raise InputError("gpus", gpus, "must be an integer >= 1")
        return 1.0 if gpus == 1 else self.efficiency.get((config, int(gpus)), 1.0)

    def predict(self, single_gpu_throughput: Any, gpus: Any, configs: Any) -> np.ndarray:
        """``g · e[c, g] · thr(1)`` for arrays of single throughputs, GPU counts and configuration names."""
        g = np.asarray(gpus)
        if not np.all(np.isfinite(np.asarray(g, dtype=np.float64))):
            raise InputError("gpus", g.tolist(), "must be finite integers >= 1")
        c = np.asarray(configs, dtype=str)
        gb, cb = np.broadcast_arrays(g, c)
        q = np.char.add(np.char.add(cb, "@"), np.asarray(gb, dtype=np.int64).astype(str))
        if self.efficiency:
            keys = np.array([f"{k[0]}@{k[1]}" for k in self.efficiency], dtype=str)
            vals = np.array(list(self.efficiency.values()))
            order = np.argsort(keys)
            keys, vals = keys[order], vals[order]
            idx = np.clip(np.searchsorted(keys, q), 0, keys.size - 1)
            e = np.where(keys[idx] == q, vals[idx], 1.0)
        else:
            e = np.ones(q.shape)
        e = np.where(np.asarray(gb) == 1, 1.0, e)
        return linear_scaling(single_gpu_throughput, g, e)

    def to_dict(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for (c, g), e in sorted(self.efficiency.items()):
            out.setdefault(c, {})[str(g)] = e
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Mapping[str, float]]) -> "ScalingModel":
        eff = {}
        for c, row in data.items():
            for g, e in row.items():
                v = float(e)
                if not math.isfinite(v) or v <= 0:
                    raise InputError(f"efficiency.{c}.{g}", e, "must be a finite number > 0")
                eff[(str(c), int(g))] = v
        return cls(eff)


def power_law_predictions(data: ScalingData) -> np.ndarray:
    """Per (model, configuration): ``thr(g) = thr(1)·g^β`` with ``β`` fitted (mean of
    ``log(thr(s)/thr(1))/log s``) on the model's *other* measured GPU counts — leave-one-scale-out.
    NaN where the model has no other count on that configuration."""
    key = np.char.add(np.char.add(data.models, "@"), data.configs)
    _, inv = np.unique(key, return_inverse=True)
    b = np.log(data.measured / data.single) / np.log(data.gpus)
    tot = np.bincount(inv, weights=b)
    cnt = np.bincount(inv).astype(float)
    others = cnt[inv] - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(others > 0, (tot[inv] - b) / others, np.nan)
    return data.single * data.gpus.astype(float) ** beta
