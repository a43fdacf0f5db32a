"""The performance model against Rubick's measured A800 iteration times (99 validation points).

    python benchmarks/perfmodel_rubick.py [--plot rubick_pred_vs_measured.png] [--write-csv DIR]

Data: the converted copy of Rubick's artifact in ``benchmarks/data/rubick/`` (see its LICENSE
and :mod:`policyopt.perfmodel.rubick`). Each model is fitted on its profiling samples only
(never on a validation point); every validation point is then predicted. Per (model, plan) it
prints our mean / max relative error |T̂/y − 1|, Rubick's reported mean / max (the executed
``validation.md`` of the artifact; "-" where the artifact states none) and a naive baseline:
linear scaling of the model's sample with the fewest GPUs, T̂ = y_ref·g_ref/g.

Three fits are compared:

* ``per-model``: each model alone, as ``perf-model fit`` without ``--pool``; models with fewer
  samples than free parameters get parameters held at the documented defaults
  :data:`FEW_SAMPLE_DEFAULTS` (in that order, only as many as needed; the offload parameters all
  together when fewer than 3 offload samples exist). A model whose samples inform no value of a
  free parameter is refused (no prediction), as the CLI refuses it.
* ``pooled``: ``perf-model fit --pool`` (default :data:`HARDWARE_POOL`, the parameters bound to
  the cluster rather than the model) over all seven models.
* ``staged``: the pooled fit over the models whose samples include a plan without offload
  (stage 1); then each *offload-only* model (LLaMA: three ZeRO-Offload runs) is fitted alone
  with the stage-1 values of the pooled GPU-side parameters (k_opt, k_sync, k_off) held, and
  k_bwd, k_const held at ``OFFLOAD_ONLY_HELD`` (``perf-model fit --pool ... --staged``,
  :func:`policyopt.perfmodel.pooled.fit_staged`); only its CPU-side offload parameters
  (k_opt_off, k_swap) are fitted to its samples. Reason: in
  offload-only runs the CPU optimizer and the host transfers scale like the compute (all ∝ 1/d),
  so the samples cannot split the time between backward and offload, nor tell a constant
  overhead of the offload path from one of every plan.

**All-reduce latency** (``--allreduce-latency``, default ``auto``): one value α of the optional
``allreduce_latency`` column (s per ring step of an all-reduce, see
:mod:`policyopt.perfmodel.model`) for the whole cluster, a hardware constant like the
bandwidths. ``auto`` picks it on the samples only: the α of :data:`LATENCY_GRID` whose staged fit
has the lowest RMS log error on the samples (the validation points play no part); every fit
below then uses it. ``staged, bandwidth only`` repeats the staged fit with α = 0 (the model
before the latency term) for comparison.

``--phases`` fits every variant also to the measured phase times of the samples without
offload (the artifact's ``Tcc`` and ``Topt``, as Rubick's own fit does).

``staged, T_fwd given`` repeats the staged prediction with the forward time Rubick's own script
fed its model for each plan (the ``fwd_time_plan`` column), as Rubick's validation does; where
that input is more than 10× off our derived forward time (llama7b's ZeRO-Offload script states 3
ms for a ~3 s forward), the derived one is kept. A measured forward holds the forward's own TP
all-reduces and stage sends, so those rows carry only the backward half of T_tp and T_pp.

``staged + 1 profiled TP plan`` answers what one more profiling run per model buys: the
model-parallel validation plans run on a different engine (Megatron-LM) than the data-parallel
samples (DeepSpeed / Hugging Face), whose forward efficiency no sample shows. Per model, one
plan of its ``TP+PP`` group (:func:`profiled_plans`: the largest tp, then the fewest stages and
GPUs) is treated as profiled: its measured iteration time gives the model's ``fwd_scale`` η
(:func:`policyopt.perfmodel.model.solve_fwd_scale`, staged parameters unchanged), which is set on
that model's model-parallel plans (tp·pp > 1). The profiled points are **left out of that
variant's score** (95 of 99 points scored); every other variant scores all 99.

The validation points' ``dp_overlap`` column is 0 on the TP/PP plans (the gradient all-reduce
follows the backward in the artifact's Megatron-LM) and 1 on the data-parallel ones; the samples
are data-parallel DeepSpeed runs without the column (overlapped). ``--write-csv DIR`` writes the
samples and configurations exactly as fitted and predicted, for ``policyopt perf-model fit`` /
``predict``, and DIR/profiled.csv: the one profiled TP plan per model of the ``staged + 1
profiled TP plan`` variant with its measured ``iter_time``, for ``perf-model predict --profiled``.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from policyopt.errors import InputError
from policyopt.perfmodel.fit import MIN_OFFLOAD, NO_OFFLOAD_FIXED, fit_model
from policyopt.perfmodel.model import breakdown, predict_iter_time, profiled_fwd_scale
from policyopt.perfmodel.params import PARAM_NAMES, PerfParams
from policyopt.perfmodel.pooled import fit_pooled, fit_staged, parse_names
from policyopt.perfmodel.rubick import configs_table, load_rubick, samples_table
from policyopt.perfmodel.synthetic import NOMINAL_PARAMS

DATA = Path(__file__).resolve().parent / "data" / "rubick"
#: Held one by one (this order) while a model has fewer samples than free parameters.
FEW_SAMPLE_DEFAULTS: tuple[tuple[str, float], ...] = (
    ("k_swap", 1.0), ("k_off", 1.0), ("k_sync", 1.0), ("k_const", 0.0))
#: Shared across the models of one cluster in the pooled fit.
HARDWARE_POOL = "k_opt,k_opt_off,k_off,k_swap,k_sync"


#: Candidate all-reduce latencies (s per ring step) for ``--allreduce-latency auto``.
LATENCY_GRID: tuple[float, ...] = (0.0, 1e-5, 2e-5, 5e-5, 7e-5, 1e-4, 1.5e-4, 2e-4, 3e-4, 5e-4, 1e-3)


def with_latency(table: pd.DataFrame, alpha: float) -> pd.DataFrame:
    """``table`` with the ``allreduce_latency`` column (blank for α = 0)."""
    return table.assign(allreduce_latency=alpha if alpha > 0 else "")


def choose_latency(samples: pd.DataFrame, pool: tuple[str, ...], n_starts: int
                   ) -> tuple[float, dict[float, float]]:
    """The α of :data:`LATENCY_GRID` with the lowest samples RMSLE of the staged fit, and every
    α's RMSLE (samples only)."""
    scores = {}
    for alpha in LATENCY_GRID:
        tab = with_latency(samples, alpha)
        params, _ = staged_fit(tab, pool, n_starts)
        pred = predict_iter_time(tab, params)
        scores[alpha] = float(np.sqrt(np.mean(np.log(pred / tab["iter_time"].to_numpy()) ** 2)))
    return min(scores, key=lambda a: scores[a]), scores


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


def staged_fit(samples: pd.DataFrame, pool: tuple[str, ...], n_starts: int
               ) -> tuple[dict[str, PerfParams], dict[str, str]]:
    """The ``staged`` fit (:func:`fit_staged`): parameters per model and what each held."""
    staged = fit_staged(samples, pool, n_starts=n_starts)
    how = {m: (f"held {', '.join(f'{k}={v:.3g}' for k, v in staged.held[m].items())}"
               if m in staged.held else
               f"pooled {', '.join(pool)} over {len(staged.stage1.params)} models")
           for m in staged.params}
    return staged.params, how


def rubick_forward(configs: pd.DataFrame) -> pd.Series:
    """Rubick's per-plan forward input (s), blank where it is > 10× off our derived one."""
    derived = predict_terms_fwd(configs)
    ratio = configs["rubick_fwd"].to_numpy() / derived
    return configs["rubick_fwd"].where((ratio > 0.1) & (ratio < 10.0))


def predict_terms_fwd(configs: pd.DataFrame) -> np.ndarray:
    """Our derived T_fwd of every configuration (s)."""
    return breakdown(configs.drop(columns=["fwd_time_plan"], errors="ignore"),
                     NOMINAL_PARAMS)["t_fwd"].to_numpy()


def contradicting_points(configs: pd.DataFrame) -> np.ndarray:
    """The 4 points that contradict their model's other measurements (docs/perf-model.md, *What
    is left*): roberta's one-GPU DP, ZeRO-DP+GA and ZeRO-Offload runs (as fast as its two-GPU
    runs, while its GC runs and bert's DP runs halve from 1 to 2 GPUs) and llama30b's
    (dp 1, tp 4, pp 4) run (half of its (1, 4, 6) run with the same serial pass)."""
    m, g = configs["model"], configs["gpus"]
    roberta = (m == "roberta") & (g == 1) & (configs["plan"] != "GC")
    llama = ((m == "llama30b") & (configs["dp"] == 1) & (configs["tp"] == 4)
             & (configs["pp"] == 4))
    return (roberta | llama).to_numpy()


def profiled_plans(configs: pd.DataFrame) -> pd.Index:
    """Index of the one ``TP+PP`` point per model treated as profiled: the largest tp, then the
    fewest pipeline stages, then the fewest GPUs (the first model-parallel run one would make)."""
    mp = configs[configs["plan"] == "TP+PP"]
    order = mp.sort_values(["tp", "pp", "gpus"], ascending=[False, True, True], kind="stable")
    return order.groupby("model", sort=False).head(1).index


def with_profiled_scale(configs: pd.DataFrame, params: dict[str, PerfParams]
                        ) -> tuple[pd.DataFrame, pd.Index, dict[str, float]]:
    """``configs`` with ``fwd_scale`` η of each model (solved on its profiled plan,
    :func:`profiled_fwd_scale`, as ``perf-model predict --profiled``) on its model-parallel
    rows; the profiled rows' index; η per model."""
    prof = profiled_plans(configs)
    runs = configs.loc[prof].assign(iter_time=configs.loc[prof, "actual"])
    out, by_model = profiled_fwd_scale(configs, params, runs)
    out.index = configs.index
    return out, prof, by_model


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
           ylabel="predicted (s)", title="Rubick A800 validation points, staged fit (band: ±20%)")
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
    ap.add_argument("--allreduce-latency", default="auto",
                    help="s per ring step of an all-reduce: a number, or auto (chosen on the samples)")
    ap.add_argument("--write-csv", type=Path, default=None, metavar="DIR",
                    help="write DIR/samples.csv and DIR/configs.csv (with the chosen "
                         "allreduce_latency and dp_overlap) for policyopt perf-model fit / predict")
    ap.add_argument("--phases", action="store_true",
                    help="fit also to the samples' measured Tcc / Topt (cc_time, opt_time)")
    ap.add_argument("--rubick-repo", type=Path, default=None, metavar="PATH",
                    help="Rubick's repository: run its own model on the same points (needs autograd)")
    args = ap.parse_args(argv)
    data = load_rubick(args.data)
    samples, configs = samples_table(data, phases=args.phases), configs_table(data)
    print(f"{len(samples)} samples, {len(configs)} validation points")
    pool = parse_names(args.pool, "pool")
    bandwidth_only, _ = staged_fit(samples, pool, args.starts)
    configs_bw = configs
    if args.allreduce_latency == "auto":
        alpha, scores = choose_latency(samples, pool, args.starts)
        print("all-reduce latency α (s per ring step) -> samples RMSLE of the staged fit: "
              + ", ".join(f"{a:g}: {v:.4f}" for a, v in scores.items()) + f"; chosen α = {alpha:g}")
    else:
        try:
            alpha = float(args.allreduce_latency)
        except ValueError:
            ap.error(f"--allreduce-latency: a number of seconds or auto (got {args.allreduce_latency!r})")
        print(f"all-reduce latency α = {alpha:g} s per ring step (given)")
    samples, configs = with_latency(samples, alpha), with_latency(configs, alpha)
    if args.write_csv:
        args.write_csv.mkdir(parents=True, exist_ok=True)
        samples.to_csv(args.write_csv / "samples.csv", index=False)
        configs.to_csv(args.write_csv / "configs.csv", index=False)
        print(f"samples / configs -> {args.write_csv}/samples.csv, configs.csv")

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
    pooled = fit_pooled(samples, pool, n_starts=args.starts)
    staged, staged_how = staged_fit(samples, pool, args.starts)
    for row in rows:
        row["pooled_rmsle"] = pooled.rmsle[str(row["model"])]
        row["staged"] = staged_how[str(row["model"])]
    pd.set_option("display.width", 250)
    pd.set_option("display.max_colwidth", 70)
    print(f"\nfits (samples only); pooled fit shares {', '.join(pooled.pooled)}:")
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}",
                                       na_rep="refused"))
    for model, why in refused.items():
        print(f"per-model fit of {model} refused: {why}")

    mp = configs[(configs["tp"] * configs["pp"] > 1) & (configs["dp"] == 1)]
    derived = mp["fwd_time_1gpu"] / (mp["dp"] * mp["tp"])
    speed = (derived / mp["rubick_fwd"]).groupby([mp["model"], mp["tp"]], sort=False)
    print("\nforward speed of the model-parallel plans with dp = 1 against the samples' data-parallel one, "
          "F/(d·t) ÷ the forward Rubick's script feeds that plan (1 = same per-GPU speed), "
          "per (model, tp): " + "; ".join(f"{m} tp {t}: {lo:.2f}-{hi:.2f}" for (m, t), lo, hi in
                                          zip(speed.groups, speed.min(), speed.max())))
    scaled, profiled, eta = with_profiled_scale(configs, staged)
    if args.write_csv:
        configs.loc[profiled].assign(iter_time=configs.loc[profiled, "actual"]).to_csv(
            args.write_csv / "profiled.csv", index=False)
        print(f"the profiled TP plans (for predict --profiled) -> {args.write_csv}/profiled.csv")
    print("\nprofiled TP plan per model (dp, tp, pp: measured s) -> fwd_scale η on its "
          "model-parallel plans: " + "; ".join(
              f"{r.model} ({r.dp}, {r.tp}, {r.pp}: {r.actual:g}) -> {eta[str(r.model)]:.3f}"
              for r in configs.loc[profiled].itertuples()))
    table = configs.copy()
    own = configs["model"].isin(list(fits)).to_numpy()
    preds = {"per-model": np.full(len(configs), np.nan),
             "pooled": predict_iter_time(configs, pooled.params),
             "staged": predict_iter_time(configs, staged),
             "staged, T_fwd given": predict_iter_time(
                 configs.assign(fwd_time_plan=rubick_forward(configs)), staged),
             "staged, bandwidth only": predict_iter_time(configs_bw, bandwidth_only),
             "staged + 1 profiled TP plan": predict_iter_time(scaled, staged),
             "baseline": linear_baseline(samples, configs)}
    preds["per-model"][own] = predict_iter_time(configs[own], fits)
    short = {"per-model": "own", "pooled": "pooled", "staged": "staged",
             "staged, T_fwd given": "given", "staged, bandwidth only": "bwonly",
             "staged + 1 profiled TP plan": "prof", "baseline": "base"}
    if args.rubick_repo is not None:
        from rubick_peer import PROTOCOLS, peer_predictions
        peer = peer_predictions(args.rubick_repo, data)
        if not (peer["model"].to_numpy() == configs["model"].to_numpy()).all():
            raise InputError("rubick_repo", str(args.rubick_repo), "points out of order")
        for protocol, name in zip(PROTOCOLS, ("rubick_pub", "rubick_fitllama", "rubick_samples")):
            label = f"Rubick's model, {protocol}"
            preds[label] = peer[protocol].to_numpy()
            short[label] = name
    for label, pred in preds.items():
        table[short[label]] = np.abs(pred / table["actual"].to_numpy() - 1.0) * 100
    table.loc[profiled, "prof"] = np.nan  # fitted on: not scored
    grouped = table.groupby(["model", "plan"], sort=False)
    groups = pd.concat({f"{short[k]}_{stat}": grouped[short[k]].agg(stat)
                        for k in preds for stat in ("mean", "max")}, axis=1)
    groups.insert(0, "n", grouped.size())
    groups = groups.join(data.reported.set_index(["model", "plan"])).reset_index()
    print("\nrelative error per (model, plan), % (own_*: per-model fit; pooled_*: pooled fit; "
          "staged_*: staged fit; given_*: staged fit with T_fwd = the forward time Rubick's "
          "script fed its own model; bwonly_*: staged fit without the all-reduce latency (α = 0); "
          "prof_*: staged fit with one profiled TP+PP plan per model (not scored); "
          "base_*: linear scaling; rubick_pub/_fitllama/_samples_*: Rubick's own model run here "
          "(--rubick-repo) as published / with LLaMA fitted on its samples / on the samples only; "
          "rubick_mean/max: reported in the artifact's validation.md):")
    print(groups.rename(columns={"reported_mean_pct": "rubick_mean",
                                 "reported_max_pct": "rubick_max"})
          .to_string(index=False, float_format=lambda v: f"{v:.1f}", na_rep="-"))
    for label in preds:
        col = table[short[label]]
        print(f"overall {label:22s} ({int(col.notna().sum())} points): mean {col.mean():.1f}%, "
              f"max {col.max():.1f}%, (model, plan) groups over 10% mean: "
              f"{int((groups[short[label] + '_mean'] > 10).sum())} of {len(groups)}")
    odd = contradicting_points(configs)
    rest = table[~odd]
    for label in ("staged", "staged + 1 profiled TP plan") + tuple(
            k for k in preds if k.startswith("Rubick's model") and "samples" in k):
        col = rest[short[label]]
        means = col.groupby([rest["model"], rest["plan"]]).mean()
        print(f"overall {label:22s} without the {int(odd.sum())} contradicting points "
              f"({int(col.notna().sum())} points): mean {col.mean():.1f}%, max {col.max():.1f}%, "
              f"(model, plan) groups over 10% mean: {int((means > 10).sum())} of {len(means)}")
    if args.rubick_repo is not None:
        # LLaMA's 3 offload-only samples leave Rubick's 7-parameter fit undetermined: compare
        # also on the models with 4+ samples, where both fits are determined.
        rich = ~table["model"].isin(["llama7b", "llama30b"])
        for label in ("staged", "staged, T_fwd given") + tuple(
                k for k in preds if k.startswith("Rubick's model")):
            col = table.loc[rich, short[label]]
            means = col.groupby([table["model"], table["plan"]]).mean()
            print(f"overall {label:22s} without LLaMA ({int(col.notna().sum())} points): mean "
                  f"{col.mean():.1f}%, max {col.max():.1f}%, (model, plan) groups over 10% mean: "
                  f"{int((means > 10).sum())} of {len(means)}")
    if args.plot:
        plot(table.assign(pred=preds["staged"]), args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
