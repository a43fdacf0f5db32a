r"""Seeded synthetic ground truth for testing the fit (no hardware involved).

Model shapes span 86M to 30B parameters (GPT-style, P ≈ 12·l·h² + vocabulary·h); their profiled
forward time is the forward FLOPs over an effective device rate,
``fwd_time_1gpu = 2·P·b·s / EFFECTIVE_FLOPS``. A run's "measured" iteration time is the model's
T_iter under hidden *true* parameters times log-normal noise: ``y = T_iter · exp(σ·ε)``,
ε ~ N(0, 1), σ = 0.03 by default ("3% noise").

An experiment (:func:`run_experiment`) draws true parameters, builds every feasible
configuration of the shape on 1–64 GPUs of :data:`REFERENCE_CLUSTER`, profiles 7 of them
(3 with offload) chosen by :func:`~policyopt.perfmodel.design.design_samples` (I-optimal) at the
:data:`NOMINAL_PARAMS` prior (not the truth), fits, and predicts 20 other random configurations.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import pandas as pd

from policyopt.errors import InputError, UnknownNameError

from .design import design_samples
from .fit import FitResult, fit_model
from .model import compute_terms, iter_time_from_terms
from .params import PerfParams
from .plans import ClusterSpec, ModelSpec
from .sensitivity import PlanSpace, candidate_table, evaluate_candidates
from .table import CONFIG_COLUMNS, validate_table

__all__ = ["EFFECTIVE_FLOPS", "SHAPES", "REFERENCE_CLUSTER", "NOMINAL_PARAMS", "GPU_COUNTS",
           "CPU_COUNTS", "make_shape", "draw_true_params", "simulate_runs", "feasible_pool",
           "ExperimentResult", "run_experiment"]

#: Effective training FLOP/s of one reference GPU (about 40% of an A100's bf16 peak).
EFFECTIVE_FLOPS = 1.2e14
_VOCAB = 50_257
GiB = float(2 ** 30)


def make_shape(name: str, layers: int, hidden: int, seq_len: int, global_batch: int,
               bytes_per_param: float = 2.0) -> ModelSpec:
    """A GPT-style ModelSpec with P = 12·l·h² + vocabulary·h and a FLOP-derived forward time."""
    params = 12.0 * layers * hidden ** 2 + _VOCAB * hidden
    fwd = 2.0 * params * global_batch * seq_len / EFFECTIVE_FLOPS
    return ModelSpec(name=name, params=params, layers=layers, hidden=hidden, seq_len=seq_len,
                     global_batch=global_batch, fwd_time_1gpu=fwd,
                     bytes_per_param=bytes_per_param)


#: Six shapes from 86M to 30B parameters. ``gpt-86m`` is a 12-layer, 768-wide body (85M) with a
#: small embedding, P = 86M; the others use the GPT-2 vocabulary.
SHAPES: dict[str, ModelSpec] = {
    "gpt-86m": ModelSpec(name="gpt-86m", params=86e6, layers=12, hidden=768, seq_len=512,
                         global_batch=256, fwd_time_1gpu=2.0 * 86e6 * 256 * 512 / EFFECTIVE_FLOPS),
    "gpt-350m": make_shape("gpt-350m", 24, 1024, 1024, 256),
    "gpt-1.3b": make_shape("gpt-1.3b", 24, 2048, 2048, 256),
    "gpt-6.7b": make_shape("gpt-6.7b", 32, 4096, 2048, 256),
    "gpt-13b": make_shape("gpt-13b", 40, 5120, 2048, 256),
    "gpt-30b": make_shape("gpt-30b", 48, 7168, 2048, 256),
}

#: 8 × 80 GiB GPUs and 96 cores per node, NVLink-class intra-node, 100 Gb/s inter-node, PCIe 4.
REFERENCE_CLUSTER = ClusterSpec(gpus_per_node=8, cpus_per_node=96, bw_intra=150e9,
                                bw_inter=12.5e9, bw_pcie=12e9, gpu_mem_bytes=80 * GiB,
                                host_mem_per_node=1024 * GiB)

#: A plausible parameter set (also the design prior): backward ≈ 2× forward, GPU Adam
#: ≈ 20 ms per 1B parameters, CPU Adam ≈ 50 ns·core per parameter, 20 ms fixed overhead.
NOMINAL_PARAMS = PerfParams(k_bwd=2.0, k_sync=3.0, k_opt=2e-11, k_opt_off=5e-8, k_off=2.0,
                            k_swap=3.0, k_const=0.02)
GPU_COUNTS: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
CPU_COUNTS: tuple[int, ...] = (8, 16, 32, 64, 96)


def draw_true_params(rng: np.random.Generator) -> PerfParams:
    """Random "true" parameters around :data:`NOMINAL_PARAMS` (scale terms within ×/÷ 2)."""
    n = NOMINAL_PARAMS
    return PerfParams(
        k_bwd=float(rng.uniform(1.5, 2.8)), k_sync=float(rng.uniform(1.5, 8.0)),
        k_opt=n.k_opt * float(2.0 ** rng.uniform(-1, 1)),
        k_opt_off=n.k_opt_off * float(2.0 ** rng.uniform(-1, 1)),
        k_off=float(rng.uniform(1.2, 6.0)), k_swap=float(rng.uniform(1.2, 6.0)),
        k_const=float(rng.uniform(0.005, 0.05)))


def simulate_runs(configs: pd.DataFrame, true_params: PerfParams, rng: np.random.Generator,
                  noise: float = 0.03) -> pd.DataFrame:
    """``configs`` plus ``iter_time`` = T_iter(true) · exp(noise·N(0,1)) and ``true_iter_time``."""
    if not (isinstance(noise, (int, float)) and noise >= 0):
        raise InputError("noise", noise, "must be a number >= 0")
    clean = validate_table(configs)
    truth = iter_time_from_terms(compute_terms(clean), true_params.as_array())
    out = clean.copy()
    out["iter_time"] = truth * np.exp(noise * rng.standard_normal(len(clean)))
    out["true_iter_time"] = truth
    return out


def feasible_pool(spec: ModelSpec, cluster: ClusterSpec = REFERENCE_CLUSTER,
                  gpu_counts: tuple[int, ...] = GPU_COUNTS,
                  cpu_counts: tuple[int, ...] = CPU_COUNTS,
                  space: PlanSpace | None = None) -> pd.DataFrame:
    """Every configuration of ``spec`` that fits in memory and on the nodes (CONFIG_COLUMNS)."""
    table = evaluate_candidates(candidate_table(spec, cluster, gpu_counts, cpu_counts, space),
                                NOMINAL_PARAMS)  # feasibility does not depend on the params
    pool = table.loc[table["feasible"], list(CONFIG_COLUMNS)].reset_index(drop=True)
    if pool.empty:
        raise InputError("spec", spec.name, "no feasible configuration on the cluster")
    return pool


@dataclass(frozen=True)
class ExperimentResult:
    """One synthetic fit-and-predict experiment."""

    shape: str
    seed: int
    true_params: PerfParams
    fit: FitResult
    train: pd.DataFrame       # profiled rows (with iter_time, true_iter_time)
    test: pd.DataFrame        # held-out rows plus pred_iter_time
    error: np.ndarray         # |pred / observed − 1| on the test rows
    error_vs_truth: np.ndarray  # |pred / noise-free truth − 1|
    fit_seconds: float

    @property
    def mean_error(self) -> float:
        return float(self.error.mean())

    @property
    def max_error(self) -> float:
        return float(self.error.max())


def run_experiment(shape: str | ModelSpec, seed: int, *, n_train: int = 7, n_offload: int = 3,
                   n_test: int = 20, noise: float = 0.03, design: str = "i-optimal",
                   n_starts: int = 8) -> ExperimentResult:
    """Fit on ``n_train`` simulated runs and predict ``n_test`` unseen configurations.

    ``design`` is ``"i-optimal"`` or ``"d-optimal"`` (:func:`design_samples` at the nominal
    prior) or ``"random"`` (uniformly random profiled rows with the same offload quota).
    """
    spec = SHAPES[shape] if isinstance(shape, str) and shape in SHAPES else shape
    if not isinstance(spec, ModelSpec):
        raise UnknownNameError("shape", shape, SHAPES)
    if design not in ("i-optimal", "d-optimal", "random"):
        raise UnknownNameError("design", design, ("i-optimal", "d-optimal", "random"))
    rng = np.random.default_rng(seed)
    truth = draw_true_params(rng)
    pool = feasible_pool(spec)
    if design != "random":
        train_idx = design_samples(pool, NOMINAL_PARAMS, n=n_train, n_offload=n_offload,
                                   criterion=design, noise=max(noise, 1e-3))
    else:
        off = np.flatnonzero(pool["zero"].to_numpy() == "offload")
        rest = np.flatnonzero(pool["zero"].to_numpy() != "offload")
        train_idx = np.concatenate([rng.choice(off, n_offload, replace=False),
                                    rng.choice(rest, n_train - n_offload, replace=False)])
    unseen = np.setdiff1d(np.arange(len(pool)), train_idx)
    if unseen.size < n_test:
        raise InputError("n_test", n_test, f"only {unseen.size} unseen configurations")
    test_idx = rng.choice(unseen, n_test, replace=False)
    runs = simulate_runs(pool.iloc[np.concatenate([train_idx, test_idx])], truth, rng, noise)
    train, test = runs.iloc[:n_train].reset_index(drop=True), runs.iloc[n_train:].copy()
    began = time.perf_counter()
    fit = fit_model(train[list(CONFIG_COLUMNS) + ["iter_time"]], n_starts=n_starts, seed=seed)
    fit_seconds = time.perf_counter() - began
    pred = iter_time_from_terms(compute_terms(validate_table(test)), fit.params.as_array())
    test = test.reset_index(drop=True)
    test["pred_iter_time"] = pred
    return ExperimentResult(
        shape=spec.name, seed=seed, true_params=truth, fit=fit, train=train, test=test,
        error=np.abs(pred / test["iter_time"].to_numpy() - 1.0),
        error_vs_truth=np.abs(pred / test["true_iter_time"].to_numpy() - 1.0),
        fit_seconds=fit_seconds)
