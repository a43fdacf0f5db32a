r"""The iteration-time formula (Rubick), vectorized over a table of configurations.

Notation per row: P params, l layers, h hidden, s seq_len, b global_batch, F fwd_time_1gpu,
β bytes_per_param, d/t/p dp/tp/pp, m micro_batches, a ga_steps, gc ∈ {0,1}, c cpus,
B_pcie = bw_pcie. Links: ranks are laid out TP-innermost, then DP, then PP (Megatron order) on
``nodes`` nodes of n_g = gpus/nodes GPUs each, so each group uses bw_intra while it fits in one
node and bw_inter otherwise::

    B_tp = bw_intra if t ≤ n_g,    B_dp = bw_intra if t·d ≤ n_g,    B_pp = bw_intra if nodes = 1

Forward time of one GA step (batch b/a) on one GPU::

    T_fwd = F / (a·d·t) · (m + p − 1) / (m·p)

i.e. the issue's ``T_fwd = t_p·g_p/p·(m+p−1)`` with ``t_p·g_p = F/(a·d·t·m)`` the time of one
micro-batch through the whole (TP-sharded) model, ``/p`` its time on one stage, and ``m+p−1``
the stage-slots of a GPipe/1F1B forward sweep. For p = m = 1 this is the DP/TP scaling F/(a·d·t);
the a steps together take a·T_fwd. An optional column ``fwd_time_plan`` (s, the measured forward
time of one GA step of that very plan) replaces T_fwd on the rows where it holds a number; blank /
NaN cells keep the formula, anything else that is not a finite number > 0 is an InputError. A
measured forward already contains the forward's TP all-reduces (2 of the 4 per layer) and its
stage-boundary sends (half of T_pp's volume), so on those rows T_tp and T_pp keep only their
backward half: T_tp/2, T_pp/2.

An optional column ``fwd_scale`` η (a factor > 0; blank or absent: 1) multiplies the forward's
compute, ``T_fwd = η·F/(a·d·t)·(m+p−1)/(m·p)``: the forward efficiency of the row's code path
relative to the one the samples (and F) were measured with — e.g. a model-parallel engine
whose sharded kernels run slower or faster per FLOP than the data-parallel engine of the
samples. No data-parallel sample can inform it; :func:`solve_fwd_scale` turns one profiled run
of a plan into η (the η whose predicted T_iter equals the measured one).

Two optional machine columns (blank or absent: no effect) for devices that are not a GPU each::

    T_fwd = η·F / (a·min(d·t, κ)) · (m + p − 1)/(m·p) + σ·max(1, d·t/κ)

``parallel_capacity`` κ: how many ranks' worth of compute the job really gets (CPU ranks on a
shared machine: κ = 1 when the ranks share one free core); ``step_overhead`` σ (s): a fixed
cost of every micro-step's forward (Python, dispatch), paid again in its backward through
``k_bwd·T_fwd`` — both matter only for millisecond iterations. σ is work of every rank, so
when d·t ranks share κ cores each rank's σ stretches by d·t/κ like its compute (κ blank: 1).

Backward and communication (V in elements, times β bytes, over B)::

    T_bwd = k_bwd·T_fwd + gc·T_fwd                 (GC recomputes one forward)
    T_dp  = 2P(d−1)/(d·t·p)·β / B_dp + 2(d−1)·⌈P·β/(t·p·S)⌉·α     (d > 1; α, S below)
    T_tp  = 8(t−1)·b·s·h·l/(d·t)·β / B_tp
    T_pp  = 2p·b·s·h/(d·t)·β / B_pp   if p > 1, else 0 (no pipeline, no stage boundary traffic)
    T_cc  = a·T_fwd + (a−1)·T_bwd + f_{k_sync}(T_bwd, T_dp) + T_tp + T_pp
            (T_bwd + T_dp in place of f_{k_sync} on rows with dp_overlap = 0, below)

The second part of T_dp is the latency of the ring all-reduces: gradients are synced in buckets of
``S`` = :data:`BUCKET_BYTES` (25 MiB, PyTorch DDP's default), and a ring all-reduce of each bucket
takes 2(d−1) steps of latency α (the optional column ``allreduce_latency``, s per step; blank or
absent: 0, the bandwidth-only term). Small models' syncs are dominated by it: their measured
sync time grows with d faster than (d−1)/d (see docs/perf-model.md).

The optional column ``dp_overlap`` (0 / 1, blank or absent: 1) says whether the gradient
all-reduce runs during the backward pass (1: PyTorch DDP's bucket hooks, DeepSpeed's
``overlap_comm``) or after it (0: Megatron-LM's ``local`` DDP, which all-reduces the gradients
once ``forward_backward_func`` has returned, and pipeline engines, which reduce after the
pipeline flush); with 0 the sync adds to the backward whatever ``k_sync``.

(with a = 1 this is the issue's ``T_fwd + f(T_bwd, T_dp) + T_tp + T_pp``; only the last GA step's
backward overlaps the gradient sync). Optimizer::

    zero = none:    T_oo = T_opt = k_opt·P/(t·p)          (x = t·p; plain DP: x = 1)
    zero = dp:      T_oo = T_opt = k_opt·P/(d·t·p)        (x = d for ZeRO-2 with t = p = 1)
    zero = offload: T_opt = k_opt_off·P/(d·t·p·c),  T_off = P·β/(d·t·p·B_pcie),
                    T_oo  = f_{k_off}(T_dp, T_off) + f_{k_swap}(T_opt, T_off)
    T_iter = T_cc + T_oo + k_const,   f_k(x, y) = (x^k + y^k)^(1/k)

With t = p = 1 (the plan space in which ZeRO is enumerated) the offload terms are exactly the
issue's ``k_opt_off·P/(d·c)`` and ``P/(d·B_pcie)``; c is the ``cpus`` column.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np
import pandas as pd

from policyopt.errors import InputError, UnknownNameError

from .params import PARAM_NAMES, PerfParams
from .table import validate_table

__all__ = ["BUCKET_BYTES", "Terms", "compute_terms", "optional_seconds", "optional_flag",
           "phase_times", "overlap", "solve_fwd_scale", "profiled_fwd_scale",
           "iter_time_from_terms", "param_matrix", "predict_iter_time", "breakdown"]


#: Gradient bucket size of the data-parallel sync, bytes (PyTorch DDP's ``bucket_cap_mb`` = 25).
BUCKET_BYTES = 25 * 2**20


@dataclass(frozen=True)
class Terms:
    """Parameter-independent quantities of each row (all float arrays of length n)."""

    t_fwd: np.ndarray      # forward time of one GA step, s
    ga: np.ndarray         # a
    gc: np.ndarray         # 0/1
    t_dp: np.ndarray       # data-parallel gradient sync, s
    t_tp: np.ndarray       # tensor-parallel activation all-reduces, s
    t_pp: np.ndarray       # pipeline stage-boundary traffic, s
    opt_units: np.ndarray  # P/x on GPU (0 for offload rows)
    off_units: np.ndarray  # P/(d·t·p·c) on CPU (0 for non-offload rows)
    t_off: np.ndarray      # GPU<->CPU swap time, s (0 for non-offload rows)
    offload: np.ndarray    # bool
    sync_overlap: np.ndarray  # bool: the DP sync overlaps the backward (dp_overlap column)

    def __len__(self) -> int:
        return int(self.t_fwd.size)

    def take(self, index: np.ndarray) -> "Terms":
        """The rows ``index`` only."""
        return Terms(**{k: v[index] for k, v in self.__dict__.items()})


def compute_terms(table: pd.DataFrame) -> Terms:
    """Per-row terms of the formula for a *validated* table (see :func:`validate_table`)."""
    col = {c: table[c].to_numpy(dtype=float) for c in (
        "params", "layers", "hidden", "seq_len", "global_batch", "fwd_time_1gpu",
        "bytes_per_param", "dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "gpus", "cpus",
        "nodes", "bw_intra", "bw_inter", "bw_pcie")}
    P, beta = col["params"], col["bytes_per_param"]
    d, t, p, m, a = col["dp"], col["tp"], col["pp"], col["micro_batches"], col["ga_steps"]
    b, s, h, l = col["global_batch"], col["seq_len"], col["hidden"], col["layers"]
    # Ranks are laid out TP-innermost, then DP, then PP (Megatron order) over ``nodes`` nodes of
    # n_g = gpus/nodes GPUs each: a TP group stays on one node when t <= n_g, a DP group (stride
    # t) when t·d <= n_g, and pipeline neighbours only when the job has one node.
    per_node = col["gpus"] / col["nodes"]
    bw_tp = np.where(t <= per_node, col["bw_intra"], col["bw_inter"])
    bw_dp = np.where(t * d <= per_node, col["bw_intra"], col["bw_inter"])
    bw_pp = np.where(col["nodes"] == 1, col["bw_intra"], col["bw_inter"])
    zero = table["zero"].to_numpy()
    offload = zero == "offload"
    shard = d * t * p

    cap = optional_seconds(table, "parallel_capacity")
    ranks = np.where(np.isnan(cap), d * t, np.minimum(d * t, np.nan_to_num(cap, nan=1.0)))
    scale = np.nan_to_num(optional_seconds(table, "fwd_scale", unit="factor"), nan=1.0)
    t_fwd = scale * col["fwd_time_1gpu"] / (a * ranks) * (m + p - 1) / (m * p)
    given = optional_seconds(table, "fwd_time_plan")
    t_fwd = np.where(np.isnan(given), t_fwd, given)
    # The per-step overhead σ is work of every rank too: d·t ranks sharing κ cores each get
    # κ/(d·t) of a core, so it stretches by max(1, d·t/κ) (κ blank: every rank has its core).
    share = np.where(np.isnan(cap), 1.0, np.maximum(1.0, d * t / np.nan_to_num(cap, nan=1.0)))
    t_fwd = t_fwd + np.nan_to_num(optional_seconds(table, "step_overhead"), nan=0.0) * share
    t_dp = 2.0 * P * (d - 1) / shard * beta / bw_dp
    lat = np.nan_to_num(optional_seconds(table, "allreduce_latency"), nan=0.0)
    t_dp = t_dp + 2.0 * (d - 1) * np.ceil(P * beta / (t * p * BUCKET_BYTES)) * lat
    t_tp = 8.0 * (t - 1) * b * s * h * l / (d * t) * beta / bw_tp
    t_tp = t_tp + 2.0 * (t - 1) * 4.0 * l * a * (m + p - 1) / p * lat
    t_pp = np.where(p > 1, 2.0 * p * b * s * h / (d * t) * beta / bw_pp, 0.0)
    # A measured forward (fwd_time_plan) already holds the forward's own TP all-reduces and
    # stage-boundary sends: only the backward's half of T_tp and T_pp is added to it.
    measured = ~np.isnan(given)
    t_tp = np.where(measured, 0.5 * t_tp, t_tp)
    t_pp = np.where(measured, 0.5 * t_pp, t_pp)
    x = np.where(zero == "dp", shard, t * p)
    opt_units = np.where(offload, 0.0, P / x)
    off_units = np.where(offload, P / (shard * col["cpus"]), 0.0)
    t_off = np.where(offload, P * beta / (shard * col["bw_pcie"]), 0.0)
    return Terms(t_fwd=t_fwd, ga=a, gc=col["gc"], t_dp=t_dp, t_tp=t_tp, t_pp=t_pp,
                 opt_units=opt_units, off_units=off_units, t_off=t_off, offload=offload,
                 sync_overlap=optional_flag(table, "dp_overlap", default=True))


def optional_seconds(table: pd.DataFrame, column: str, name: str = "configs",
                     unit: str = "seconds") -> np.ndarray:
    """The optional positive column ``column`` (s, or another ``unit``) as floats, NaN where
    blank or absent.

    A cell that is neither blank nor a finite number > 0 is an InputError naming the cell.
    """
    if column not in table.columns:
        return np.full(len(table), np.nan)
    raw = table[column]
    given = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip().isin(["", "nan"])).to_numpy()
    bad = ~blank & ~(np.isfinite(given) & (given > 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}[{i}].{column}", raw.iloc[i],
                         f"must be a finite number > 0 ({unit}) or blank")
    return np.where(blank, np.nan, given)


def optional_flag(table: pd.DataFrame, column: str, *, default: bool, name: str = "configs"
                  ) -> np.ndarray:
    """The optional 0/1 column ``column`` as bools, ``default`` where blank or absent.

    A cell that is neither blank nor 0 / 1 is an InputError naming the cell.
    """
    if column not in table.columns:
        return np.full(len(table), default)
    raw = table[column]
    given = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=float)
    blank = raw.isna().to_numpy() | (raw.astype(str).str.strip().isin(["", "nan"])).to_numpy()
    bad = ~blank & ~np.isin(given, (0.0, 1.0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"{name}[{i}].{column}", raw.iloc[i], "must be 0, 1 or blank")
    return np.where(blank, default, given == 1.0)


def sync_with_backward(terms: Terms, t_bwd: np.ndarray, k_sync: np.ndarray | float
                       ) -> np.ndarray:
    """The last backward with the DP gradient sync: f_{k_sync}(T_bwd, T_dp) where the sync
    overlaps the backward, T_bwd + T_dp where it runs after it (``dp_overlap`` = 0)."""
    return np.where(terms.sync_overlap, overlap(t_bwd, terms.t_dp, k_sync), t_bwd + terms.t_dp)


def phase_times(terms: Terms, k: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(T_cc − a·T_fwd, T_oo) of every row: the phases a profiler can time besides the forward.

    ``T_cc − a·T_fwd`` is the backward passes with the communication they do not hide
    (``cc_time`` of a sample), ``T_oo`` the optimizer step with its swap traffic (``opt_time``);
    T_iter = a·T_fwd + (T_cc − a·T_fwd) + T_oo + k_const.
    """
    k = np.asarray(k, dtype=float)
    k_bwd, k_sync, k_opt, k_opt_off, k_off, k_swap, _ = np.moveaxis(k, -1, 0)
    t_bwd = (k_bwd + terms.gc) * terms.t_fwd
    cc = ((terms.ga - 1.0) * t_bwd + sync_with_backward(terms, t_bwd, k_sync) + terms.t_tp
          + terms.t_pp)
    t_opt = k_opt * terms.opt_units + k_opt_off * terms.off_units
    oo = np.where(terms.offload,
                  overlap(terms.t_dp, terms.t_off, k_off) + overlap(t_opt, terms.t_off, k_swap),
                  t_opt)
    return cc, oo


def overlap(x: np.ndarray, y: np.ndarray, k: np.ndarray | float) -> np.ndarray:
    """f_k(x, y) = (x^k + y^k)^(1/k), computed as M·((x/M)^k + (y/M)^k)^(1/k), M = max(x, y).

    The scaled form cannot overflow for large k; f_k(0, 0) = 0.
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    big = np.maximum(x, y)
    safe = np.where(big > 0, big, 1.0)
    inner = (x / safe) ** k + (y / safe) ** k
    return np.where(big > 0, safe * inner ** (1.0 / np.asarray(k, dtype=float)), 0.0)


def iter_time_from_terms(terms: Terms, k: np.ndarray) -> np.ndarray:
    """T_iter for every row; ``k`` has shape (7,) (one set) or (n, 7) (one set per row)."""
    k = np.asarray(k, dtype=float)
    cc, oo = phase_times(terms, k)
    return terms.ga * terms.t_fwd + cc + oo + k[..., -1]


def param_matrix(models: pd.Series, params: PerfParams | Mapping[str, PerfParams],
                 table: str = "configs") -> np.ndarray:
    """(n, 7) array: the parameter set of each row's ``model`` (or one set for all rows)."""
    if isinstance(params, PerfParams):
        return np.broadcast_to(params.as_array(), (len(models), len(PARAM_NAMES)))
    names = models.astype(str).to_numpy()
    known = np.array(list(params), dtype=object)
    missing = np.flatnonzero(~np.isin(names, known))
    if missing.size:
        i = int(missing[0])
        raise UnknownNameError(f"{table}[{i}].model", names[i], params.keys())
    lookup = np.stack([params[n].as_array() for n in known])  # one row per model
    return lookup[pd.Index(known).get_indexer(names)]


def predict_iter_time(configs: pd.DataFrame, params: PerfParams | Mapping[str, PerfParams],
                      *, table: str = "configs") -> np.ndarray:
    """Predicted T_iter (s) of every row of ``configs`` (validated first).

    ``params`` is one :class:`PerfParams` for all rows or a mapping model name -> params.
    """
    clean = validate_table(configs, table)
    return iter_time_from_terms(compute_terms(clean), param_matrix(clean["model"], params, table))


def breakdown(configs: pd.DataFrame, params: PerfParams | Mapping[str, PerfParams]
              ) -> pd.DataFrame:
    """Every intermediate term of the formula per row (seconds), for inspection and docs."""
    clean = validate_table(configs)
    terms = compute_terms(clean)
    k = param_matrix(clean["model"], params)
    k_bwd, k_sync, k_opt, k_opt_off, _, _, k_const = k.T
    t_bwd = (k_bwd + terms.gc) * terms.t_fwd
    t_opt = k_opt * terms.opt_units + k_opt_off * terms.off_units
    t_iter = iter_time_from_terms(terms, k)
    t_cc = (terms.ga * terms.t_fwd + (terms.ga - 1.0) * t_bwd
            + sync_with_backward(terms, t_bwd, k_sync) + terms.t_tp + terms.t_pp)
    return pd.DataFrame({
        "t_fwd": terms.t_fwd, "t_bwd": t_bwd, "t_dp": terms.t_dp, "t_tp": terms.t_tp,
        "t_pp": terms.t_pp, "t_cc": t_cc, "t_opt": t_opt, "t_off": terms.t_off,
        "t_oo": t_iter - t_cc - k_const, "k_const": k_const, "iter_time": t_iter,
    })


def solve_fwd_scale(configs: pd.DataFrame, params: PerfParams | Mapping[str, PerfParams],
                    measured: np.ndarray, *, lo: float = 1e-2, hi: float = 1e2,
                    steps: int = 60) -> np.ndarray:
    """Per row, the ``fwd_scale`` η with predicted T_iter(η) = ``measured`` (s).

    T_iter grows with η (every term that uses T_fwd grows with it, the others do not depend on
    it), so η is found by bisection on log η in [lo, hi], all rows at once; a row whose
    measured time lies outside [T_iter(lo), T_iter(hi)] is an InputError naming it. This turns
    one profiled run of a configuration into the forward efficiency of its code path relative
    to the samples' (e.g. a model-parallel engine against the data-parallel one).
    """
    clean = validate_table(configs)
    y = np.asarray(measured, dtype=float)
    if y.shape != (len(clean),) or not np.all(np.isfinite(y) & (y > 0)):
        raise InputError("measured", measured, f"{len(clean)} finite times > 0 (s)")
    k = param_matrix(clean["model"], params)

    def predict(eta: np.ndarray) -> np.ndarray:
        return iter_time_from_terms(compute_terms(clean.assign(fwd_scale=eta)), k)

    a, b = np.full(len(y), np.log(lo)), np.full(len(y), np.log(hi))
    outside = (predict(np.exp(a)) > y) | (predict(np.exp(b)) < y)
    if outside.any():
        i = int(np.flatnonzero(outside)[0])
        raise InputError(f"measured[{i}]", float(y[i]),
                         f"not reachable with fwd_scale in [{lo:g}, {hi:g}]")
    for _ in range(steps):
        mid = 0.5 * (a + b)
        below = predict(np.exp(mid)) < y
        a, b = np.where(below, mid, a), np.where(below, b, mid)
    return np.exp(0.5 * (a + b))


def profiled_fwd_scale(configs: pd.DataFrame, params: PerfParams | Mapping[str, PerfParams],
                       runs: pd.DataFrame) -> tuple[pd.DataFrame, dict[str, float]]:
    """``configs`` with the ``fwd_scale`` η of each model read off its profiled model-parallel
    ``runs`` (sample rows: configuration + ``iter_time``), and η per model.

    Per model, η = exp(mean log η_i) over its runs, η_i from :func:`solve_fwd_scale`; it is set on
    that model's model-parallel rows (tp·pp > 1) whose ``fwd_scale`` is blank — the plans that run
    on the model-parallel engine the runs measured, not on the data-parallel one of the samples.
    A run with tp·pp = 1 is an InputError (it measures the samples' engine).
    """
    clean_runs = validate_table(runs, "profiled", require_iter_time=True)
    serial = np.flatnonzero((clean_runs["tp"] * clean_runs["pp"]).to_numpy() == 1)
    if serial.size:
        i = int(serial[0])
        raise InputError(f"profiled[{i}].tp", int(clean_runs["tp"].iloc[i]),
                         "a profiled run must be model-parallel (tp·pp > 1)")
    eta = solve_fwd_scale(clean_runs, params, clean_runs["iter_time"].to_numpy(dtype=float))
    by_model = pd.Series(np.log(eta)).groupby(clean_runs["model"].to_numpy()).mean()
    scale = {str(m): float(np.exp(v)) for m, v in by_model.items()}
    clean = validate_table(configs)
    current = optional_seconds(clean, "fwd_scale", unit="factor")
    mp = (clean["tp"] * clean["pp"]).to_numpy() > 1
    found = clean["model"].map(scale).to_numpy(dtype=float)
    out = configs.reset_index(drop=True).assign(
        fwd_scale=np.where(np.isnan(current) & mp & ~np.isnan(found), found, current))
    return out, scale
