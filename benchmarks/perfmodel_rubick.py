"""The performance model against Rubick's measured A800 iteration times (99 validation points).

    python benchmarks/perfmodel_rubick.py [--plot rubick_pred_vs_measured.png]

Data: the converted copy of Rubick's artifact in ``benchmarks/data/rubick/`` (see its LICENSE
and :mod:`policyopt.perfmodel.rubick`). Each model is fitted on its profiling samples only
(never on a validation point); every validation point is then predicted. Per (model, plan) it
prints our mean / max relative error |T̂/y − 1|, Rubick's reported mean / max (the executed
``validation.md`` of the artifact; "-" where the artifact states none) and a naive baseline:
linear scaling of the model's sample with the fewest GPUs, T̂ = y_ref·g_ref/g.

Two fits are compared: ``per-model`` (each model alone, as ``perf-model fit`` without
``--pool``; models with fewer samples than free parameters get parameters held at the
documented defaults :data:`FEW_SAMPLE_DEFAULTS`, in that order and only as many as needed, the
offload parameters all together when fewer than 3 offload samples exist) and ``pooled``
(``perf-model fit --pool`` with ``--pool``, default :data:`HARDWARE_POOL`: the parameters
bound to the cluster rather than the model, shared by all seven models). The table of fits says
what was held or pooled.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from policyopt.errors import InputError
from policyopt.perfmodel.fit import MIN_OFFLOAD, NO_OFFLOAD_FIXED, fit_model
from policyopt.perfmodel.model import predict_iter_time
from policyopt.perfmodel.params import PARAM_NAMES
from policyopt.perfmodel.pooled import fit_pooled, parse_names
from policyopt.perfmodel.rubick import configs_table, load_rubick, samples_table

DATA = Path(__file__).resolve().parent / "data" / "rubick"
#: Held one by one (this order) while a model has fewer samples than free parameters.
FEW_SAMPLE_DEFAULTS: tuple[tuple[str, float], ...] = (
    ("k_swap", 1.0), ("k_off", 1.0), ("k_sync", 1.0), ("k_const", 0.0))
#: Shared across the models of one cluster in the pooled fit.
HARDWARE_POOL = "k_opt,k_opt_off,k_off,k_swap,k_sync"


def fixed_for(rows: pd.DataFrame) -> dict[str, float]:
    """The parameters a model's samples ``rows`` cannot determine, at documented defaults."""
    fixed: dict[str, float] = {}
    if int((rows["zero"] == "offload").sum()) < MIN_OFFLOAD:
        fixed.update(NO_OFFLOAD_FIXED)
    for name, value in FEW_SAMPLE_DEFAULTS:
        if len(rows) >= len(PARAM_NAMES) - len(fixed):
            break
        fixed.setdefault(name, value)
    return fixed


def linear_baseline(samples: pd.DataFrame, configs: pd.DataFrame) -> np.ndarray:
    """T̂ = y_ref·g_ref/g with ref the model's sample with the fewest GPUs."""
    ref = samples.sort_values("gpus").groupby("model").first()
    y = ref.loc[configs["model"], "iter_time"].to_numpy()
    g = ref.loc[configs["model"], "gpus"].to_numpy()
    return y * g / configs["gpus"].to_numpy()


def plot(table: pd.DataFrame, path: Path) -> None:
    """Log-log predicted vs measured, one colour per model (Figure API, no backend switch)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 5.5))
    ax = fig.add_subplot()
    for model, grp in table.groupby("model"):
        ax.scatter(grp["actual"], grp["pred"], s=18, label=str(model))
    lo, hi = table[["actual", "pred"]].min().min(), table[["actual", "pred"]].max().max()
    ax.plot([lo, hi], [lo, hi], "k--", lw=0.8)
    ax.fill_between([lo, hi], [lo * 0.8, hi * 0.8], [lo * 1.2, hi * 1.2], color="0.9", zorder=0)
    ax.set(xscale="log", yscale="log", xlabel="measured iteration time (s)",
           ylabel="predicted (s)", title="Rubick A800 validation points, pooled fit (band: ±20%)")
    ax.legend(fontsize=8)
    fig.savefig(path, dpi=120)
    print(f"plot -> {path}")


def main(argv: list[str] | None = None) -> int:
    """Fit per model on the samples, predict the validation points, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=DATA)
    ap.add_argument("--plot", type=Path, default=None, help="write the log-log plot here")
    ap.add_argument("--starts", type=int, default=8)
    ap.add_argument("--pool", default=HARDWARE_POOL, help="parameters shared in the pooled fit")
    args = ap.parse_args(argv)
    data = load_rubick(args.data)
    samples, configs = samples_table(data), configs_table(data)
    print(f"{len(samples)} samples, {len(configs)} validation points")

    fits, rows, refused = {}, [], {}
    for model, grp in samples.groupby("model", sort=False):
        fixed = fixed_for(grp)
        row = {"model": model, "samples": len(grp), "rmsle": np.nan,
               "fwd_source": data.fwd_time_1gpu(str(model))[1],
               "held": ", ".join(f"{k}={v:g}" for k, v in fixed.items()) or "-"}
        try:
            fit = fit_model(grp, n_starts=args.starts, fixed=fixed or None)
        except InputError as err:  # the samples do not determine a parameter: no prediction
            refused[str(model)] = str(err)
        else:
            fits[str(model)] = fit.params
            row["rmsle"] = fit.rmsle
        rows.append(row)
    pooled = fit_pooled(samples, parse_names(args.pool, "pool"), n_starts=args.starts)
    for row in rows:
        row["pooled_rmsle"] = pooled.rmsle[str(row["model"])]
    pd.set_option("display.width", 200)
    print(f"\nfits (samples only); pooled fit shares {', '.join(pooled.pooled)}:")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}",
                                       na_rep="refused"))
    for model, why in refused.items():
        print(f"per-model fit of {model} refused: {why}")

    table = configs.copy()
    own = configs["model"].isin(list(fits)).to_numpy()
    table["pred"] = np.nan
    table.loc[own, "pred"] = predict_iter_time(configs[own], fits)
    table["err"] = (table["pred"] / table["actual"] - 1).abs()
    table["pooled_pred"] = predict_iter_time(configs, pooled.params)
    table["pooled_err"] = (table["pooled_pred"] / table["actual"] - 1).abs()
    # Diagnostic: the pooled fit with the forward time Rubick's scripts fed their own model
    # (its measured forward of the plan) in place of our T_fwd.
    given = configs.assign(fwd_time_plan=configs["rubick_fwd"])
    table["given_fwd_err"] = (predict_iter_time(given, pooled.params) / table["actual"] - 1).abs()
    table["base_err"] = (linear_baseline(samples, configs) / table["actual"] - 1).abs()
    groups = table.groupby(["model", "plan"], sort=False).agg(
        n=("err", "size"), mean=("err", "mean"), max=("err", "max"),
        pooled_mean=("pooled_err", "mean"), pooled_max=("pooled_err", "max"),
        fwd_given_mean=("given_fwd_err", "mean"),
        base_mean=("base_err", "mean"), base_max=("base_err", "max")) * 1.0
    groups.iloc[:, 1:] *= 100
    rep = data.reported.set_index(["model", "plan"])
    groups = groups.join(rep).reset_index()
    groups["n"] = groups["n"].astype(int)
    print("\nrelative error per (model, plan), % (mean/max: per-model fit; pooled_*: pooled "
          "fit; fwd_given_mean: pooled fit with T_fwd = the forward time Rubick's script fed its "
          "own model; rubick_* = reported in the artifact's validation.md; base_*: linear scaling):")
    print(groups.rename(columns={"reported_mean_pct": "rubick_mean",
                                 "reported_max_pct": "rubick_max"})
          .to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-"))
    for label, col in (("per-model", "err"), ("pooled", "pooled_err"),
                       ("fwd given", "given_fwd_err"), ("baseline", "base_err")):
        mean_col = {"err": "mean", "pooled_err": "pooled_mean", "base_err": "base_mean",
                    "given_fwd_err": "fwd_given_mean"}[col]
        n = int(table[col].notna().sum())
        print(f"overall {label:9s} ({n} points): mean {100 * table[col].mean():.1f}%, "
              f"max {100 * table[col].max():.1f}%, (model, plan) groups over 10% mean: "
              f"{int((groups[mean_col] > 10).sum())} of {len(groups)}")
    if args.plot:
        plot(table.assign(pred=table["pooled_pred"]), args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
