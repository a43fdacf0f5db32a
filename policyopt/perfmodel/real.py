r"""Real measurements: fit the performance model to profiled PyTorch runs and score held-out runs.

Input is the profiler's ``plan_samples.csv`` (:func:`policyopt.jobs.profiler.profile`): one row
per (job type, device, plan) with the mean iteration time of real training steps. Two things
differ from a GPU sample table and are mapped here:

* **A CPU rank is the device.** CPU rows run one torch thread per data-parallel rank on its own
  core and carry ``gpus = 0``; the formula's device count is the number of ranks, so
  ``gpus := dp``. The data-parallel sync then is ``T_dp = 2P(d−1)/d · β / B`` with ``B`` the
  measured all-reduce bandwidth (``bw_intra``; one node, so ``bw_inter := bw_intra``, unused).
* **No ZeRO-Offload on CPU.** No row has ``zero = offload``; ``bw_pcie`` (0 on CPU) enters only
  offload rows and is set to ``bw_intra`` to pass validation. The fit holds ``k_opt_off``,
  ``k_off``, ``k_swap`` at :data:`~policyopt.perfmodel.fit.NO_OFFLOAD_FIXED` and fits the other
  four parameters.

Each device's runs get their own model name ``<job type>@<device>`` (``resnet-bs64@cpu``,
``resnet-bs64@h100``): ``fwd_time_1gpu`` and the parameters differ per device.

Held-out evaluation (:func:`evaluate_holdout`): per model and split, the training set is the base
run (dp1-ga1-gc0, which the profiler always measures and which supplies ``fwd_time_1gpu``) plus
``n_train − 1`` runs drawn at random from the others; the rest are held out. The error of a
prediction ``T̂`` of a run with measured ``y`` is ``|T̂/y − 1|``. The baseline predicts by linear
scaling of the base run: ``T̂ = T_base / dp`` (GA and GC ignored).
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from policyopt.errors import InputError

from .fit import NO_OFFLOAD_FIXED, fit_model
from .io import read_table_csv
from .model import compute_terms, iter_time_from_terms
from .table import validate_table

__all__ = ["CPU_COLUMN_GRID", "GPU_COLUMN_GRID", "profiler_rows_to_samples", "read_real_samples", "pool_sessions",
           "base_rows", "linear_scaling_baseline", "evaluate_holdout", "summarize_holdout", "noise_summary"]

#: A profiler row's identity: the same job type, device and plan in two sessions is one run.
RUN_KEYS = ("model", "worker_type", "dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "zero")


def profiler_rows_to_samples(raw: pd.DataFrame, table: str = "plan_samples") -> pd.DataFrame:
    """Validated sample table from profiler rows (see the module docstring for the mapping).

    Keeps the profiler's extra columns (``iter_time_std``, ``repeats``, ``worker_type``, ...).
    """
    if not isinstance(raw, pd.DataFrame):
        raise InputError(table, type(raw).__name__, "must be a pandas DataFrame")
    for col in ("worker_type", "bw_intra", "gpus", "dp", "model"):
        if col not in raw.columns:
            raise InputError(f"{table}.{col}", None, "missing column")
    out = raw.reset_index(drop=True).copy()
    worker = out["worker_type"].astype(str)
    on_cpu = worker.str.startswith("cpu").to_numpy()
    bw = pd.to_numeric(out["bw_intra"], errors="coerce").to_numpy(dtype=float)
    bad_bw = ~(np.isfinite(bw) & (bw > 0))
    if bad_bw.any():
        i = int(np.flatnonzero(bad_bw)[0])
        raise InputError(f"{table}[{i}].bw_intra", out["bw_intra"].iloc[i],
                         "needs the measured all-reduce bandwidth: profile a dp >= 2 plan")
    device = np.where(on_cpu, "cpu", worker.to_numpy())
    out["model"] = out["model"].astype(str) + "@" + device
    out["gpus"] = np.where(on_cpu, out["dp"], out["gpus"])
    out["bw_inter"] = bw
    pcie = pd.to_numeric(out.get("bw_pcie", pd.Series(0.0, index=out.index)), errors="coerce")
    out["bw_pcie"] = np.where(on_cpu, bw, pcie.to_numpy(dtype=float))
    clean = validate_table(out, table, require_iter_time=True)
    if (clean["zero"] == "offload").any():
        raise InputError(f"{table}.zero", "offload", "real profiler rows never use ZeRO-Offload")
    return clean


def pool_sessions(tables: Sequence[pd.DataFrame]) -> pd.DataFrame:
    """Profiler rows of several sessions on one kind of machine as one table of pooled repeats.

    Rows with the same :data:`RUN_KEYS` become one row. With ``n_i`` repeats of mean ``T_i`` and
    std ``s_i`` per session: ``repeats = Σn_i``, ``iter_time T = Σ n_i·T_i / Σn_i`` and
    ``iter_time_std = sqrt(Σ n_i·(s_i² + T_i²) / Σn_i − T²)`` (within and between sessions);
    ``fwd_time_1gpu``, ``bw_intra`` and ``bw_pcie`` are the repeat-weighted means too, and
    ``peak_memory_bytes`` the largest. Other columns keep the first session's value.
    """
    if not tables:
        raise InputError("plan_samples_files", [], "give at least one table")
    raw = pd.concat([t.reset_index(drop=True) for t in tables], ignore_index=True)
    for col in (*RUN_KEYS, "iter_time", "repeats"):
        if col not in raw.columns:
            raise InputError(f"plan_samples.{col}", None, "missing column")
    n = pd.to_numeric(raw["repeats"], errors="coerce").fillna(1.0).clip(lower=1.0)
    t = pd.to_numeric(raw["iter_time"], errors="coerce")
    sd = pd.to_numeric(raw.get("iter_time_std", pd.Series(0.0, index=raw.index)), errors="coerce").fillna(0.0)
    work = raw.assign(_n=n, _nt=n * t, _nsq=n * (sd ** 2 + t ** 2))
    weighted = [c for c in ("fwd_time_1gpu", "bw_intra", "bw_pcie") if c in raw.columns]
    for c in weighted:
        work[f"_w_{c}"] = n * pd.to_numeric(raw[c], errors="coerce")
    groups = work.groupby(list(RUN_KEYS), sort=False, dropna=False)
    out = groups.first().reset_index()
    sums = groups[["_n", "_nt", "_nsq", *(f"_w_{c}" for c in weighted)]].sum(min_count=1).reset_index(drop=True)
    total = sums["_n"].to_numpy()
    mean = sums["_nt"].to_numpy() / total
    out["iter_time"] = mean
    out["iter_time_std"] = np.sqrt(np.maximum(sums["_nsq"].to_numpy() / total - mean ** 2, 0.0))
    out["repeats"] = total.astype(int)
    for c in weighted:
        out[c] = sums[f"_w_{c}"].to_numpy() / total
    if "peak_memory_bytes" in raw.columns:
        out["peak_memory_bytes"] = groups["peak_memory_bytes"].max().to_numpy()
    return out[[c for c in raw.columns if not c.startswith("_")]]


def read_real_samples(path: str | Path | Sequence[str | Path]) -> pd.DataFrame:
    """Read profiler ``plan_samples.csv`` file(s) and map them with :func:`profiler_rows_to_samples`;
    several files are sessions pooled with :func:`pool_sessions`."""
    if isinstance(path, (str, Path)):
        return profiler_rows_to_samples(read_table_csv(path, "plan_samples_file"))
    return profiler_rows_to_samples(pool_sessions([read_table_csv(p, "plan_samples_file") for p in path]))


def base_rows(samples: pd.DataFrame) -> pd.Series:
    """Row index of each model's base run (dp = ga = 1, gc = 0); raises if a model lacks one."""
    base = (samples["dp"] == 1) & (samples["ga_steps"] == 1) & (samples["gc"] == 0)
    first = samples.index[base].to_series().groupby(samples.loc[base, "model"]).first()
    missing = sorted(set(samples["model"]) - set(first.index))
    if missing:
        raise InputError("samples.model", missing[0], "has no base run dp1-ga1-gc0")
    return first


def linear_scaling_baseline(samples: pd.DataFrame, rows: np.ndarray) -> np.ndarray:
    """Naive prediction ``T_base / dp`` for ``rows`` of ``samples`` (GA, GC ignored)."""
    base = base_rows(samples)
    t_base = samples["iter_time"].to_numpy(dtype=float)[base.loc[samples["model"]].to_numpy()]
    return (t_base / samples["dp"].to_numpy(dtype=float))[rows]


#: Candidate machine columns for :func:`evaluate_holdout`'s ``column_grid`` (CPU runs): ranks get
#: one core's worth of compute or all they ask for; 0, 1 or 2 ms of fixed cost per micro-step.
CPU_COLUMN_GRID: dict[str, tuple[float | str, ...]] = {"parallel_capacity": ("", 1.0),
                                                       "step_overhead": ("", 1e-3, 2e-3)}

#: The same for GPU runs of small jobs, which are bound by kernel launches: 0.5-3 ms of fixed cost
#: per micro-step (the zoo's on an H200: about 2 ms; see docs/perf-model.md).
GPU_COLUMN_GRID: dict[str, tuple[float | str, ...]] = {"step_overhead": ("", 5e-4, 1e-3, 1.5e-3, 2e-3, 3e-3)}


def _grid(column_grid: Mapping[str, Sequence[float | str]] | None) -> list[dict[str, float | str]]:
    """Every combination of the grid's column values (one empty combination without a grid)."""
    if not column_grid:
        return [{}]
    names = list(column_grid)
    return [dict(zip(names, combo)) for combo in itertools.product(*(column_grid[n] for n in names))]


def evaluate_holdout(samples: pd.DataFrame, *, n_train: int = 7, n_splits: int = 20,
                     seed: int = 0, n_starts: int = 4,
                     column_grid: Mapping[str, Sequence[float | str]] | None = None,
                     fixed: Mapping[str, float] | None = None) -> pd.DataFrame:
    """Fit on random training subsets and score the held-out runs, per model and split.

    Returns one row per (model, split): ``train_rmsle``, ``mean_err``/``max_err`` (model) and
    ``base_mean_err``/``base_max_err`` (linear-scaling baseline) over the held-out runs, and
    ``n_test``. Fits hold ``fixed`` (default :data:`NO_OFFLOAD_FIXED`); a model with no dp > 1 run
    (a single GPU) also holds ``k_sync = 1``, which no run of it depends on. Seeded by
    ``default_rng(seed)``.

    ``column_grid`` (e.g. :data:`CPU_COLUMN_GRID`): optional machine columns of the formula
    (``parallel_capacity``, ``step_overhead``, ``allreduce_latency``; ``""`` = blank) tried in
    every combination; per split the combination with the lowest *training* RMSLE is kept (the
    held-out runs play no part) and reported in ``columns``.
    """
    clean = validate_table(samples, "samples", require_iter_time=True)
    held = dict(NO_OFFLOAD_FIXED if fixed is None else fixed)
    if isinstance(n_train, bool) or not isinstance(n_train, int) or n_train < 1:
        raise InputError("n_train", n_train, "must be an integer >= 1")
    if isinstance(n_splits, bool) or not isinstance(n_splits, int) or n_splits < 1:
        raise InputError("n_splits", n_splits, "must be an integer >= 1")
    base = base_rows(clean)
    rng = np.random.default_rng(seed)
    combos = _grid(column_grid)
    tables = [clean.assign(**c) if c else clean for c in combos]
    all_terms = [compute_terms(validate_table(t, "samples", require_iter_time=True)) for t in tables]
    observed = clean["iter_time"].to_numpy(dtype=float)
    naive = linear_scaling_baseline(clean, np.arange(len(clean)))
    records = []
    for model in pd.unique(clean["model"]):
        rows = np.flatnonzero(clean["model"].to_numpy() == model)
        others = rows[rows != base[model]]
        fx = held | ({"k_sync": 1.0} if (clean["dp"].to_numpy()[rows] == 1).all() and "k_sync" not in held else {})
        if n_train < 7 - len(fx):
            raise InputError("n_train", n_train, f"must be >= {7 - len(fx)} (free parameters of {model})")
        if others.size < n_train:  # need n_train − 1 others for training and >= 1 to hold out
            raise InputError(f"samples(model={model})", int(rows.size),
                             f"need more than {n_train} runs to hold any out")
        for split in range(n_splits):
            pick = rng.permutation(others)
            train = np.concatenate([[base[model]], pick[: n_train - 1]])
            test = pick[n_train - 1:]
            fits = [fit_model(t.iloc[train], n_starts=n_starts, seed=seed + split, fixed=fx)
                    for t in tables]
            best = int(np.argmin([f.rmsle for f in fits]))
            fit = fits[best]
            pred = iter_time_from_terms(all_terms[best].take(test), fit.params.as_array())
            err = np.abs(pred / observed[test] - 1.0)
            base_err = np.abs(naive[test] / observed[test] - 1.0)
            records.append({"model": model, "split": split, "n_train": int(train.size),
                            "n_test": int(test.size), "train_rmsle": fit.rmsle,
                            "mean_err": float(err.mean()), "max_err": float(err.max()),
                            "base_mean_err": float(base_err.mean()),
                            "base_max_err": float(base_err.max()),
                            "columns": ", ".join(f"{k}={v}" for k, v in combos[best].items() if v != "") or "-"})
    return pd.DataFrame.from_records(records)


def summarize_holdout(results: pd.DataFrame) -> pd.DataFrame:
    """Per model (and ``ALL``): mean over splits of the mean errors, max over splits of the max."""
    agg = {"splits": ("split", "size"), "n_test": ("n_test", "first"),
           "train_rmsle": ("train_rmsle", "mean"), "mean_err": ("mean_err", "mean"),
           "max_err": ("max_err", "max"), "base_mean_err": ("base_mean_err", "mean"),
           "base_max_err": ("base_max_err", "max")}
    per_model = results.groupby("model", sort=True).agg(**agg)
    overall = results.assign(model="ALL").groupby("model").agg(**agg)
    return pd.concat([per_model, overall]).reset_index()


def noise_summary(samples: pd.DataFrame) -> pd.DataFrame:
    """Per model: mean and max relative std ``iter_time_std / iter_time`` of the repeats."""
    if "iter_time_std" not in samples.columns:
        raise InputError("samples.iter_time_std", None, "missing column (profiler output)")
    rel = pd.to_numeric(samples["iter_time_std"], errors="coerce") / samples["iter_time"]
    frame = pd.DataFrame({"model": samples["model"], "rel_std": rel})
    return frame.groupby("model").agg(runs=("rel_std", "size"), mean_rel_std=("rel_std", "mean"),
                                      max_rel_std=("rel_std", "max")).reset_index()

