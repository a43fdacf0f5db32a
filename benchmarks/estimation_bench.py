"""Accuracy of the colocation and scaling estimators on Gavel's measured throughputs, and the effect
of estimated throughputs on a policy.

1. Held-out pairs: per worker type (K80, P100, V100; the 26 single-GPU job types, the only ones
   with pair measurements), hide 10/30/50% of the pair measurements (seeded), fit on the rest,
   predict the hidden cells. Error of the normalized throughput (absolute) and of the raw throughput
   (relative) for ALS / soft-impute / joint ALS (all worker types as one matrix), "completed" and
   "nearest" predictions, vs the baselines row mean, column mean and the rank-0 bias model.
2. Feasibility of the hidden pairs (pairs recorded at zero throughput): memory-threshold model vs
   nearest substitute vs "all feasible".
3. Cold start: job types split in 5 folds; a fold keeps only a fingerprint of m co-runners per
   worker type; errors on the rest of those types' rows and columns.
4. Online: a new job observed against more and more co-runners (``observe``, warm-started refresh).
5. Linear scaling vs the measured 2/4/8-GPU throughputs (consolidated and unconsolidated).
6. Policy effect: space-sharing max-min fairness on 64/128 single-GPU jobs solved with measured-only,
   estimated (plain and cautious) and true tables; each allocation evaluated under the true
   throughputs, relative to the allocation from the true table. Hidden: 30/50/90% of the pairs, or
   9 new job types known by a 3-co-runner fingerprint.
7. Online policy loop: estimate → schedule → observe the packed pairs → re-estimate.

    python benchmarks/estimation_bench.py [--quick] [--seeds 3]
"""
from __future__ import annotations

import argparse
import platform
import time
from typing import Any

import numpy as np

from policyopt.data.gavel import load_gavel
from policyopt.estimation.evaluation import (cold_start_errors, holdout_errors, online_curve, policy_effect,
                                             policy_online, summarize)
from policyopt.estimation.scaling import ScalingModel, power_law_predictions, scaling_dataset

ESTIMATORS: dict[str, dict[str, Any]] = {
    "als": {"method": "als"},
    "soft_impute": {"method": "soft_impute"},
    "als_joint": {"method": "als", "joint": True},
}


def table(header: list[str], rows: list[list[Any]]) -> None:
    """Print a markdown table."""
    def fmt(v: Any) -> str:
        return f"{v:.3f}" if isinstance(v, float) else str(v)
    print("| " + " | ".join(header) + " |")
    print("|" + "|".join("---" for _ in header) + "|")
    for r in rows:
        print("| " + " | ".join(fmt(v) for v in r) + " |")
    print()


def bench_holdout(g: Any, fractions: list[float], seeds: list[int]) -> None:
    print("## 1. Held-out pair measurements (normalized throughput, hidden feasible cells)\n")
    rows, feas = [], []
    for frac in fractions:
        errs: dict[tuple[str, str], list[np.ndarray]] = {}
        rel: dict[tuple[str, str], list[np.ndarray]] = {}
        fz: dict[tuple[str, str], list[dict[str, float]]] = {}
        n_cells = 0
        t0 = time.perf_counter()
        for s in seeds:
            r = holdout_errors(g, frac, s, ESTIMATORS)
            n_cells += r["hidden_cells"]
            for k, (a, b) in r["errors"].items():
                errs.setdefault(k, []).append(a)
                rel.setdefault(k, []).append(b)
            for k, v in r["feasibility"].items():
                fz.setdefault(k, []).append(v)
        dt = time.perf_counter() - t0
        seen_baseline = False
        for (name, m), e in errs.items():
            if m in ("row_mean", "col_mean", "bias"):
                if seen_baseline or name != "als":
                    continue
                label = f"baseline {m}"
            else:
                label = f"{name} {m}"
            a, b = summarize(np.concatenate(e)), summarize(np.concatenate(rel[(name, m)]))
            rows.append([f"{frac:.0%}", label, a["n"], a["median"], a["p90"], a["max"],
                         b["median"], b["p90"], b["max"]])
        for (name, rule), v in fz.items():
            if name != "als":
                continue
            feas.append([f"{frac:.0%}", rule, float(np.mean([x["accuracy"] for x in v])),
                         int(sum(x["infeasible_caught"] for x in v)), int(sum(x["false_alarms"] for x in v))])
        print(f"(fraction {frac:.0%}: {len(seeds)} seeds, {n_cells} hidden feasible cells, {dt:.1f} s)")
    print()
    table(["hidden", "method", "cells", "abs median", "abs p90", "abs max", "rel median", "rel p90", "rel max"], rows)
    print("## 2. Feasibility of hidden pairs (all seeds)\n")
    table(["hidden", "rule", "accuracy", "infeasible caught", "false alarms"], feas)


def bench_cold_start(g: Any, fingerprints: list[int], seeds: list[int]) -> None:
    print("## 3. Cold start: new job types known by a fingerprint of m co-runners per worker type\n")
    rows = []
    for m in fingerprints:
        for name in ("als", "als_joint"):
            t0 = time.perf_counter()
            res = [cold_start_errors(g, m, s, ESTIMATORS[name]) for s in seeds]
            dt = time.perf_counter() - t0
            for method in ("completed", "nearest", "row_mean", "col_mean"):
                if method in ("row_mean", "col_mean") and name != "als":
                    continue
                a = summarize(np.concatenate([r[method] for r in res]))
                rows.append([m, name if method in ("completed", "nearest") else "baseline", method, a["n"],
                             a["median"], a["p90"], a["max"], f"{dt:.1f}"])
    table(["m", "estimator", "method", "cells", "abs median", "abs p90", "abs max", "seconds"], rows)


def bench_online(g: Any, seeds: list[int], steps: tuple[int, ...] = (2, 4, 8, 16)) -> None:
    print("## 4. Online update: a new job's mean abs error on its unobserved cells vs pairs observed "
          "per worker type\n")
    rows = []
    for name in ("als", "als_joint"):
        curves = [online_curve(g, s, ESTIMATORS[name], targets=6, steps=steps) for s in seeds]
        for method in ("completed", "nearest"):
            mean = np.mean([c[method] for c in curves], axis=0)
            rows.append([name, method, *[float(x) for x in mean]])
    table(["estimator", "method", *[f"{s} observed" for s in steps]], rows)


def bench_scaling(g: Any) -> None:
    print("## 5. Linear scaling vs measured multi-GPU throughputs (relative error |pred-meas|/meas)\n")
    d = scaling_dataset(g)
    lin = ScalingModel.linear().predict(d.single, d.gpus, d.configs)
    lomo = np.empty_like(lin)
    for m in np.unique(d.models):  # efficiency fitted without the model it predicts
        sel = d.models == m
        lomo[sel] = ScalingModel.fit(d, exclude_models=[m]).predict(d.single[sel], d.gpus[sel], d.configs[sel])
    pl = power_law_predictions(d)
    unc = np.char.endswith(d.configs, "_unconsolidated")
    rows = []
    for name, p in (("linear g·thr(1)", lin), ("efficiency e[c,g] (leave-model-out)", lomo),
                    ("per-model power law (leave-scale-out)", pl)):
        for spread in (False, True):
            for gpus in (2, 4, 8):
                sel = (unc == spread) & (d.gpus == gpus) & np.isfinite(p)
                r = np.abs(p[sel] - d.measured[sel]) / d.measured[sel]
                ratio = np.median(d.measured[sel] / (gpus * d.single[sel]))
                s = summarize(r)
                rows.append([name, "unconsolidated" if spread else "consolidated", gpus, s["n"], s["median"],
                             s["p90"], s["max"], float(ratio)])
    table(["model", "placement", "g", "n", "rel median", "rel p90", "rel max", "median meas/(g·thr1)"], rows)
    fit = ScalingModel.fit(d)
    print("Fitted efficiencies e[c, g] (all models):\n")
    table(["config", "g=2", "g=4", "g=8"], [[c, *[v[str(k)] for k in (2, 4, 8)]] for c, v in fit.to_dict().items()])


SCENARIOS: list[tuple[str, dict[str, Any]]] = [
    ("30% pairs", {"fraction": 0.3}), ("50% pairs", {"fraction": 0.5}), ("90% pairs", {"fraction": 0.9}),
    ("9 new types", {"fraction": 0.5, "new_types": 9, "fingerprint": 3}),
]


def bench_policy(g: Any, sizes: list[int], seeds: list[int]) -> None:
    print("## 6. Policy effect: space-sharing max_min_fairness, allocation evaluated under TRUE throughputs\n")
    print("Ratios to the allocation computed from the true table (mean over seeds; worst seed in brackets). "
          "`min` = max-min objective, `mean` = mean normalized throughput, `believed` = objective the "
          "policy reported, `infeas` = pair time on pairs that truly cannot run. Hidden: a fraction of the "
          "pair measurements, or all pairs of 9 of the 26 job types but a fingerprint of 3 co-runners per "
          "worker type. `-m0.1-p0.2`: cautious estimates (margin 0.1 subtracted, pairs with P(infeasible) "
          "> 0.2 withheld).\n")
    variants = [("completed", 0.0, 0.5), ("completed", 0.1, 0.2), ("nearest", 0.0, 0.5), ("nearest", 0.1, 0.2)]
    rows = []
    for n in sizes:
        for label, setup in SCENARIOS:
            t0 = time.perf_counter()
            frac = setup["fraction"]
            extra = {k: v for k, v in setup.items() if k != "fraction"}
            res = [policy_effect(g, n, frac, s, ESTIMATORS["als"], variants=variants, **extra) for s in seeds]
            dt = time.perf_counter() - t0
            for key in res[0]:
                if key == "true_opt":
                    continue
                mins = np.array([r[key]["min"] for r in res])
                rows.append([n, label, key, f"{mins.mean():.3f} [{mins.min():.3f}]",
                             float(np.mean([r[key]["mean"] for r in res])),
                             float(np.mean([r[key]["believed"] for r in res])),
                             float(np.mean([r[key]["infeasible_time"] for r in res])), f"{dt:.0f}"])
    table(["jobs", "hidden", "table", "min ratio", "mean ratio", "believed", "infeas", "seconds"], rows)


def bench_policy_online(g: Any, seeds: list[int], rounds: int = 4) -> None:
    print("## 7. Online policy loop (64 jobs, completed estimates): estimate → schedule → observe the packed "
          "pairs → re-estimate\n")
    rows = []
    for label, setup in SCENARIOS[1:]:
        frac = setup["fraction"]
        extra = {k: v for k, v in setup.items() if k != "fraction"}
        res = [policy_online(g, 64, frac, s, ESTIMATORS["als"], rounds=rounds, **extra) for s in seeds]
        for r in range(rounds + 1):
            mins = np.array([x[r]["min"] for x in res])
            rows.append([label, r, f"{mins.mean():.3f} [{mins.min():.3f}]",
                         float(np.mean([x[r]["believed"] for x in res])),
                         float(np.mean([x[r]["infeasible_time"] for x in res])),
                         float(np.mean([x[r]["observed_pairs"] for x in res]))])
    table(["hidden", "round", "min ratio", "believed", "infeas", "pairs observed"], rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="fewer seeds and sizes (smoke run)")
    args = ap.parse_args()
    seeds = list(range(1 if args.quick else args.seeds))
    g = load_gavel()
    print(f"# Estimation benchmark ({platform.processor() or platform.machine()}, seeds {seeds})\n")
    t0 = time.perf_counter()
    bench_holdout(g, [0.1, 0.3, 0.5], seeds)
    bench_cold_start(g, [3] if args.quick else [3, 6], seeds[:2])
    bench_online(g, seeds[:1])
    bench_scaling(g)
    bench_policy(g, [64] if args.quick else [64, 128], seeds)
    bench_policy_online(g, seeds)
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
