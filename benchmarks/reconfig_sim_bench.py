"""LP allocation vs Rubick's greedy (and its E/R/N variants), Synergy-like and Sia-like, through
``policyopt simulate --generator transformers`` over several seeds.

    python benchmarks/reconfig_sim_bench.py                          # 3 seeds, about 4 minutes on 2 cores
    python benchmarks/reconfig_sim_bench.py --seeds 0,1 --jobs 24 --nodes 2 --static
    python benchmarks/reconfig_sim_bench.py --methods "fluid_srpt;rubick_greedy@none" --workers 2
    python benchmarks/reconfig_sim_bench.py --quota-mode cap      # the prod quota bounds always

Every run is the command's own path (:func:`policyopt.sim.cli.simulate_from_args` on the parsed
arguments ``--generator transformers --jobs J --rate R --nodes K --round-seconds L --seed S
--window 0:1 --policy P --reconfigure M --quota-mode Q [--option ...]``): the same trace per seed for
every method and the same quota rule for all (``reserve``, the command's default: LP policies
work-conserve past the quota and the greedy baselines grow past it once every job is placed;
``cap``: the quota bounds every method always),
decisions after arrivals and completions, checkpoint-restore ``δ`` charged per reconfiguration,
migration or resume. A method is ``policy[@reconfigure][:key=value,...]`` (default reconfigure
``all``); ``synergy_like`` and ``sia_like`` run their own spaces (original plans with cores varied;
pure data parallelism) whatever ``--reconfigure`` says.

Prints, per method, the mean over seeds of average JCT, p99 JCT, makespan, guaranteed and
best-effort average JCT (hours, all jobs: ``--window 0:1``), reconfigurations, migrations and SLA
violations, then the ratios ``baseline avg JCT / method avg JCT`` (means over seeds; > 1: the method
is better) for the baselines ``rubick_greedy``, ``synergy_like`` and ``sia_like``, and for guaranteed
jobs the ratio to ``rubick_greedy@none`` (exact resource guarantees: requests as asked). Writes
``benchmarks/results/reconfig_sim.csv`` (one row per run), ``…_summary.csv`` and the bar plot
``docs/figures/reconfig/reconfig_sim.png``.
"""
from __future__ import annotations

import argparse
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_METHODS = ("fluid_srpt;fluid_srpt_floor;fluid_srpt_floor:efficiency=0.97;max_sum_throughput:normalize=true;"
                   "rubick_greedy;rubick_greedy@plans;rubick_greedy@resources;rubick_greedy@none;"
                   "synergy_like;sia_like")
LABELS = {"fluid_srpt_floor:efficiency=0.97": "fluid_srpt_floor (efficiency 0.97)",
          "max_sum_throughput:normalize=true": "max_sum_throughput (normalized)",
          "rubick_greedy@plans": "rubick_greedy E (plans)", "rubick_greedy@resources": "rubick_greedy R (resources)",
          "rubick_greedy@none": "rubick_greedy N (none)"}
BASELINES = {"rubick_greedy": "vs greedy", "synergy_like": "vs Synergy-like", "sia_like": "vs Sia-like"}
EXACT = "rubick_greedy@none"  # guaranteed jobs on exactly the resources and plan they asked for
HOUR = 3600.0


def parse_method(text: str) -> tuple[str, str, list[str]]:
    """``"policy@mode:k=v,k=v"`` → (policy, reconfigure mode, ``--option`` values)."""
    head, _, opts = text.partition(":")
    policy, _, mode = head.partition("@")
    return policy, mode or "all", [o for o in opts.split(",") if o]


def run_one(job: tuple[str, int, argparse.Namespace]) -> dict[str, Any]:
    """One simulation through the command's path; its metrics as a table row."""
    from policyopt.sim.cli import add_subparser, simulate_from_args

    method, seed, a = job
    policy, mode, opts = parse_method(method)
    argv = ["simulate", "--generator", "transformers", "--jobs", str(a.jobs), "--nodes", str(a.nodes),
            "--round-seconds", str(a.round_seconds), "--seed", str(seed), "--window", "0:1", "--policy", policy,
            "--reconfigure", mode, "--reschedule", a.reschedule, "--quota-mode", a.quota_mode, "--output", "unused",
            *(["--static"] if a.static else ["--rate", str(a.rate)])]
    for o in opts:
        argv += ["--option", o]
    parser = argparse.ArgumentParser()
    add_subparser(parser.add_subparsers())
    t0 = time.perf_counter()
    res, _ = simulate_from_args(parser.parse_args(argv))
    m = res.metrics
    return {"method": LABELS.get(method, method), "key": method, "seed": seed, "quota": a.quota_mode,
            "avg_jct_h": m["avg_jct"] / HOUR, "p99_jct_h": m["p99_jct"] / HOUR, "makespan_h": m["makespan"] / HOUR,
            "guaranteed_avg_jct_h": (m["guaranteed_avg_jct"] or float("nan")) / HOUR,
            "best_effort_avg_jct_h": (m["best_effort_avg_jct"] or float("nan")) / HOUR,
            "reconfigurations": m["reconfigurations"], "migrations": m["migrations"],
            "checkpoint_h_lost": m["checkpoint_seconds_lost"] / HOUR, "sla_violations": m["sla_violations"],
            "completed": m["completed"], "jobs": m["num_jobs"], "utilization": m["utilization"],
            "decisions": m["decisions"], "wall_s": time.perf_counter() - t0}


def summarize(runs: Any) -> Any:
    """Means over seeds per method, and the avg-JCT ratios to the baselines (ratio of the means)."""
    cols = ["avg_jct_h", "p99_jct_h", "makespan_h", "guaranteed_avg_jct_h", "best_effort_avg_jct_h",
            "reconfigurations", "migrations", "sla_violations", "wall_s"]
    s = runs.groupby("key", sort=False)[cols].mean()
    s.insert(0, "method", [LABELS.get(k, k) for k in s.index])
    for base, name in BASELINES.items():
        if base in s.index:
            s[f"avg JCT {name}"] = s.loc[base, "avg_jct_h"] / s["avg_jct_h"]
    if EXACT in s.index:
        s["guaranteed vs exact"] = s.loc[EXACT, "guaranteed_avg_jct_h"] / s["guaranteed_avg_jct_h"]
    return s.reset_index(drop=True)


def main(argv: list[str] | None = None) -> int:
    import pandas as pd

    from policyopt.sim.plots import bar_figure

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--seeds", default="0,1,2")
    p.add_argument("--jobs", type=int, default=40)
    p.add_argument("--nodes", type=int, default=4)
    p.add_argument("--rate", type=float, default=2.0, help="jobs/hour (Poisson arrivals)")
    p.add_argument("--static", action="store_true", help="every job at t=0 instead")
    p.add_argument("--round-seconds", type=float, default=1800.0)
    p.add_argument("--methods", default=DEFAULT_METHODS, help="';'-separated policy[@reconfigure][:k=v,...]")
    p.add_argument("--reschedule", default="events", help="events (default) or rounds: decide every round")
    p.add_argument("--quota-mode", default="reserve", choices=["reserve", "cap"],
                   help="the prod quota: reserve (default; idle capacity flows on) or cap (bounds always)")
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--from-csv", help="re-summarize and re-plot the runs of an earlier CSV (no simulation)")
    p.add_argument("--output", default=str(ROOT / "benchmarks" / "results" / "reconfig_sim.csv"))
    p.add_argument("--figure", default=str(ROOT / "docs" / "figures" / "reconfig" / "reconfig_sim.png"))
    a = p.parse_args(argv)
    seeds = [int(x) for x in a.seeds.split(",") if x.strip()]
    methods = [m for m in a.methods.split(";") if m]
    jobs = [(m, s, a) for s in seeds for m in methods]
    t0 = time.perf_counter()
    rows = []
    if a.from_csv:
        rows = pd.read_csv(a.from_csv).to_dict("records")
        for r in rows:
            r["method"] = LABELS.get(r["key"], r["key"])
    elif a.workers > 1:
        with ProcessPoolExecutor(a.workers) as pool:
            rows = list(pool.map(run_one, jobs))
    else:
        for job in jobs:
            rows.append(run_one(job))
            r = rows[-1]
            print(f"  seed {r['seed']} {r['method']}: avg JCT {r['avg_jct_h']:.2f} h ({r['wall_s']:.0f} s)", flush=True)
    runs = pd.DataFrame(rows)
    summary = summarize(runs)
    kind = "all at t=0" if a.static else f"Poisson {a.rate:g} jobs/h"
    print(f"\n{a.jobs} transformer jobs ({kind}) on {a.nodes} nodes of 8 GPUs, rounds of {a.round_seconds:g} s, "
          f"decisions: {a.reschedule}, quota {a.quota_mode}, seeds {seeds}; means over seeds, hours; "
          f"{time.perf_counter() - t0:.0f} s in all\n")
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.precision", 2):
        print(summary.drop(columns=["wall_s"]).to_string(index=False))
    out = Path(a.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    runs.to_csv(out, index=False)
    summary.to_csv(out.with_name(out.stem + "_summary.csv"), index=False)
    fig = Path(a.figure)
    fig.parent.mkdir(parents=True, exist_ok=True)
    bar_figure(runs, fig, metrics=["avg_jct_h", "p99_jct_h", "makespan_h", "guaranteed_avg_jct_h"], hue="method",
               title=f"{a.jobs} transformer jobs ({kind}), {a.nodes} nodes, seeds {a.seeds}")
    print(f"\nwrote {out}, {out.with_name(out.stem + '_summary.csv')} and {fig}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
