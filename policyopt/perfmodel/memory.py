r"""GPU and host memory estimator per execution plan (vectorized over a configuration table).

Per GPU, with β = bytes_per_param, o = optimizer-state bytes per parameter (Adam: fp32 m and v,
8 bytes, plus a 4-byte fp32 master copy when β < 4, i.e. mixed precision), d/t/p the plan::

    weights    = P·β / (t·p)                                    (every plan)
    grads      = P·β / (t·p)          zero = none
               = P·β / (d·t·p)        zero = dp (ZeRO-2) or offload (reduce-scatter buffer)
    optimizer  = P·o / (t·p)          zero = none
               = P·o / (d·t·p)        zero = dp
               = 0                    zero = offload (moved to the host)
    host (job) = P·(o + β)            zero = offload: every rank's shard of fp32 master, m, v and
                                      the offloaded gradient; the shards of all d·t·p ranks sum to P
               = 0                    otherwise

Activations: micro-batch size u = b/(d·a·m) samples, L = ceil(l/p) layers per stage, up to
``min(m, p)`` micro-batches in flight on the first stage (1F1B), A = 17 elements per token per
hidden unit per layer (34 bytes at 2-byte precision: Korthikanti et al., 2022, without the
attention-score term, i.e. flash attention), sharded by t::

    no GC:  act = min(m,p)·u·L·A·β·s·h / t
    GC:     act = min(m,p)·u·L·β·s·h  +  u·A·β·s·h / t
            (one checkpointed layer input per layer, replicated across TP ranks, plus one
            layer's full activations while it is recomputed)

Attention scores, when stored (``heads`` a > 0; Korthikanti et al.: softmax output, dropout
mask and dropout output, 5·a·s² bytes per sample and layer at 2-byte precision), add
S = (2β + 1)·a·s² / t bytes per sample and layer, sharded by t with the heads::

    no GC:  act += min(m,p)·u·L·S
    GC:     act += u·S                       (only the recomputed layer holds its scores)

``gpu_bytes = weights + grads + optimizer + activations``. A plan fits when ``gpu_bytes`` and
``host_bytes`` are at most ``usable_fraction`` (default 0.9, headroom for workspaces and
fragmentation) of the GPU's and the job's host memory.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from policyopt.errors import InputError

from .plans import ModelSpec, Plan

__all__ = ["ACT_ELEMENTS_PER_TOKEN_HIDDEN", "MemoryEstimate", "adam_state_bytes",
           "memory_table", "estimate_memory", "fits_memory"]

#: A: activation elements stored per token, per hidden unit, per transformer layer.
ACT_ELEMENTS_PER_TOKEN_HIDDEN = 17.0
MEMORY_COLUMNS = ("mem_weights", "mem_grads", "mem_optimizer", "mem_activations", "gpu_bytes",
                  "host_bytes")


def adam_state_bytes(bytes_per_param: np.ndarray | float) -> np.ndarray:
    """Adam bytes per parameter: fp32 m and v (8) plus an fp32 master copy if β < 4."""
    beta = np.asarray(bytes_per_param, dtype=float)
    return 8.0 + np.where(beta < 4.0, 4.0, 0.0)


def memory_table(table: pd.DataFrame, *, optimizer_bytes_per_param: float | None = None
                 ) -> pd.DataFrame:
    """Memory terms (bytes) of every row of a table with the model and plan columns.

    Returns columns ``mem_weights, mem_grads, mem_optimizer, mem_activations`` (per GPU),
    ``gpu_bytes`` (their sum, per GPU) and ``host_bytes`` (whole job), indexed like ``table``.
    ``optimizer_bytes_per_param`` overrides o (default :func:`adam_state_bytes`).
    """
    col = {c: table[c].to_numpy(dtype=float) for c in (
        "params", "layers", "hidden", "seq_len", "global_batch", "bytes_per_param", "dp", "tp",
        "pp", "micro_batches", "ga_steps", "gc")}
    P, beta = col["params"], col["bytes_per_param"]
    d, t, p, m, a = col["dp"], col["tp"], col["pp"], col["micro_batches"], col["ga_steps"]
    zero = table["zero"].to_numpy()
    if optimizer_bytes_per_param is None:
        o = adam_state_bytes(beta)
    elif optimizer_bytes_per_param > 0:
        o = np.full_like(P, float(optimizer_bytes_per_param))
    else:
        raise InputError("optimizer_bytes_per_param", optimizer_bytes_per_param, "must be > 0")

    mp = t * p
    sharded = zero != "none"
    weights = P * beta / mp
    grads = np.where(sharded, P * beta / (d * mp), P * beta / mp)
    optimizer = np.select([zero == "none", zero == "dp"], [P * o / mp, P * o / (d * mp)], 0.0)
    host = np.where(zero == "offload", P * (o + beta), 0.0)

    u = col["global_batch"] / (d * a * m)
    stage_layers = np.ceil(col["layers"] / p)
    in_flight = np.minimum(m, p)
    token_hidden = beta * col["seq_len"] * col["hidden"]  # bytes of one (s × h) tensor
    full_layer = ACT_ELEMENTS_PER_TOKEN_HIDDEN * token_hidden / t
    scores = (2.0 * beta + 1.0) * _heads(table) * col["seq_len"] ** 2 / t  # bytes / sample-layer
    act = np.where(col["gc"] > 0,
                   in_flight * u * stage_layers * token_hidden + u * (full_layer + scores),
                   in_flight * u * stage_layers * (full_layer + scores))
    return pd.DataFrame({
        "mem_weights": weights, "mem_grads": grads, "mem_optimizer": optimizer,
        "mem_activations": act, "gpu_bytes": weights + grads + optimizer + act,
        "host_bytes": host,
    }, index=table.index)


def _heads(table: pd.DataFrame) -> np.ndarray:
    """The optional ``heads`` column (0 where absent or blank); InputError on a bad cell."""
    if "heads" not in table.columns:
        return np.zeros(len(table))
    raw = table["heads"]
    heads = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy()
    bad = ~blank & ~(np.isfinite(heads) & (heads >= 0) & (heads == np.round(heads)))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"configs[{i}].heads", raw.iloc[i], "must be an integer >= 0 or blank")
    return np.where(blank, 0.0, heads)


@dataclass(frozen=True)
class MemoryEstimate:
    """Memory of one plan: per-GPU terms and totals (bytes)."""

    weights: float
    grads: float
    optimizer: float
    activations: float
    gpu_bytes: float
    host_bytes: float


def estimate_memory(spec: ModelSpec, plan: Plan, *,
                    optimizer_bytes_per_param: float | None = None) -> MemoryEstimate:
    """Memory of ``spec`` trained with ``plan`` (see the module docstring for the formulas)."""
    per_step = plan.dp * plan.ga_steps * plan.micro_batches
    if per_step > spec.global_batch:
        raise InputError("plan.ga_steps", plan.ga_steps,
                         f"dp·ga_steps·micro_batches = {per_step} exceeds the global batch")
    if plan.pp > spec.layers:
        raise InputError("plan.pp", plan.pp, f"more pipeline stages than layers ({spec.layers})")
    row = {**spec.to_row(), **plan.to_row()}
    mem = memory_table(pd.DataFrame([row]), optimizer_bytes_per_param=optimizer_bytes_per_param)
    r = mem.iloc[0]
    return MemoryEstimate(weights=float(r["mem_weights"]), grads=float(r["mem_grads"]),
                          optimizer=float(r["mem_optimizer"]),
                          activations=float(r["mem_activations"]),
                          gpu_bytes=float(r["gpu_bytes"]), host_bytes=float(r["host_bytes"]))


def fits_memory(memory: pd.DataFrame, gpu_mem_bytes: np.ndarray | float,
                host_mem_bytes: np.ndarray | float, usable_fraction: float = 0.9) -> np.ndarray:
    """Boolean mask: rows whose GPU and host bytes fit in ``usable_fraction`` of the capacities."""
    if not 0 < usable_fraction <= 1:
        raise InputError("usable_fraction", usable_fraction, "must be in (0, 1]")
    return ((memory["gpu_bytes"].to_numpy() <= usable_fraction * np.asarray(gpu_mem_bytes))
            & (memory["host_bytes"].to_numpy() <= usable_fraction * np.asarray(host_mem_bytes)))
