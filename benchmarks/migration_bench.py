"""Migrations on multi-GPU traces: relabeling rules side by side on the same traces and seeds.

Run:  python benchmarks/migration_bench.py [--seeds 1,2,3] [--rules simple,matching,tesserae]
          [--traces sw,sw+ps,gv,gv+ps,gv1] [--jobs 150] [--csv out.csv]

A rule may carry a renewal credit in seconds, ``matching:h20`` (``renewal_credit=20``), to compare
credits side by side on the same traces.

Traces (cluster ``v100=16,p100=8,k80=8``, 360 s rounds, policy ``max_min_fairness``):

* ``sw``     -- shockwave generator (1/2/4/8 GPUs), 40 jobs/h;
* ``sw+ps``  -- the same with ``packing`` and ``space_sharing``;
* ``gv``     -- gavel generator with ``multi_gpu``, 3 jobs/h;
* ``gv+ps``  -- the same with ``packing`` and ``space_sharing``;
* ``gv1``    -- gavel generator, single-GPU jobs, 6 jobs/h.

Printed per (trace, seed, rule): migrated jobs, their sources (``policyopt.placement.sources``),
average JCT (hours, steady-state window), and per job realized ÷ planned time fraction (mean,
worst); then per trace the change in migrations against the first rule listed. Each simulation is
one ``policyopt.sim.simulate`` call; equivalent command line, e.g.::

    policyopt simulate --policy max_min_fairness --cluster v100=16,p100=8,k80=8 --generator shockwave \\
        --jobs 150 --rate 40 --seed 1 --round-seconds 360 --migration simple --output DIR
"""
from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any, Callable

import pandas as pd
from tqdm import tqdm

from policyopt.data.gavel import GavelThroughputs, load_gavel
from policyopt.sim.simulator import simulate
from policyopt.sim.traces import TraceJob, gavel_trace, shockwave_trace

CLUSTER = "v100=16,p100=8,k80=8"


@dataclass(frozen=True)
class TraceSpec:
    """A trace generator and the simulator options that go with it."""

    build: Callable[[GavelThroughputs, int, int], list[TraceJob]]
    options: dict[str, Any]


def _sw(table: GavelThroughputs, jobs: int, seed: int) -> list[TraceJob]:
    return shockwave_trace(table, jobs, rate_per_hour=40.0, seed=seed)


def _gv(table: GavelThroughputs, jobs: int, seed: int) -> list[TraceJob]:
    return gavel_trace(table, jobs, 3.0, seed=seed, multi_gpu=True)


def _gv1(table: GavelThroughputs, jobs: int, seed: int) -> list[TraceJob]:
    return gavel_trace(table, jobs, 6.0, seed=seed)


PS = {"packing": True, "space_sharing": True}
TRACES: dict[str, TraceSpec] = {
    "sw": TraceSpec(_sw, {}), "sw+ps": TraceSpec(_sw, PS),
    "gv": TraceSpec(_gv, {}), "gv+ps": TraceSpec(_gv, PS),
    "gv1": TraceSpec(_gv1, {}),
}


def run(traces: list[str], seeds: list[int], rules: list[str], jobs: int, options: dict[str, Any]) -> pd.DataFrame:
    """One row per (trace, seed, rule)."""
    table = load_gavel()
    rows = []
    bar = tqdm(total=len(traces) * len(seeds) * len(rules), desc="simulations")
    for name in traces:
        spec = TRACES[name]
        for seed in seeds:
            trace = spec.build(table, jobs, seed)
            for rule in rules:
                base_rule, _, credit = rule.partition(":h")
                extra = {"renewal_credit": float(credit)} if credit else {}
                t0 = time.perf_counter()
                res = simulate(trace, CLUSTER, table=table, policy="max_min_fairness", seed=seed, migration=base_rule,
                               round_seconds=360.0, **spec.options, **options, **extra)
                m = res.metrics
                rp = m["realized_over_planned"] or {}
                rows.append({"trace": name, "seed": seed, "rule": rule, "migrations": m["migrations"],
                             **{f"src_{k}": v for k, v in m["migration_sources"].items()},
                             "avg_jct_h": m["avg_jct"] / 3600.0, "rp_mean": rp.get("mean"), "rp_p10": rp.get("p10"),
                             "rp_worst": rp.get("worst"), "completed": m["completed"],
                             "wall_s": time.perf_counter() - t0})
                bar.update()
    bar.close()
    return pd.DataFrame(rows)


def summarize(df: pd.DataFrame, rules: list[str]) -> pd.DataFrame:
    """Per trace and rule: total migrations, change vs the first rule, worst seed, mean JCT ratio."""
    base = df[df["rule"] == rules[0]].set_index(["trace", "seed"])
    out = []
    for (trace, rule), g in df.groupby(["trace", "rule"], sort=False):
        g = g.set_index(["trace", "seed"])
        b = base.loc[g.index]
        out.append({"trace": trace, "rule": rule, "migrations": int(g["migrations"].sum()),
                    f"vs_{rules[0]}": g["migrations"].sum() / max(b["migrations"].sum(), 1) - 1.0,
                    "worst_seed": (g["migrations"] / b["migrations"].clip(lower=1)).max() - 1.0,
                    "jct_ratio": (g["avg_jct_h"] / b["avg_jct_h"]).mean(),
                    "rp_mean": g["rp_mean"].mean(), "rp_worst": g["rp_worst"].min()})
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", default="1,2,3")
    ap.add_argument("--rules", default="simple,matching")
    ap.add_argument("--traces", default=",".join(TRACES))
    ap.add_argument("--jobs", type=int, default=150)
    ap.add_argument("--no-renew", action="store_true", help="placements from scratch every round")
    ap.add_argument("--csv", help="write the per-run table here")
    args = ap.parse_args()
    seeds = [int(s) for s in args.seeds.split(",")]
    rules = args.rules.split(",")
    traces = args.traces.split(",")
    df = run(traces, seeds, rules, args.jobs, {"renew_leases": not args.no_renew})
    pd.set_option("display.width", 200)
    pd.set_option("display.max_columns", 30)
    print(df.drop(columns=["completed"]).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    print()
    print(summarize(df, rules).to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    if args.csv:
        df.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
