"""LP completion-time policies vs Rubick's greedy in the fluid round simulation, over several seeds.

    python benchmarks/reconfig_policy_bench.py                      # 5 seeds, static + Poisson
    python benchmarks/reconfig_policy_bench.py --seeds 1,2 --scenarios static \\
        --methods fluid_srpt,fluid_srpt_floor:efficiency=0.97 --workers 2 --output out.json

Every run is :func:`policyopt.reconfig.simulate_fluid` of :func:`policyopt.reconfig.transformers_trace`
(``--jobs`` jobs, requests up to the cluster's GPUs) on ``--nodes`` nodes of 8 GPUs with rounds of
``--round-seconds``; scenario ``static`` (all jobs at time 0) or ``poisson`` (``--rate`` jobs/hour);
the ``prod`` quota of every method ``--quota-mode`` (``reserve``, the default, or ``cap``).
A method is ``policy`` or ``policy:key=value,key=value`` (options to the policy; numbers parsed).
For each (scenario, seed) the table gives average JCT, p99 JCT and makespan (hours), and the ratios
``rubick_greedy / method`` (> 1: the method is better); the summary gives the geometric mean of each
ratio over seeds and the number of seeds where the method is at least as good.
"""
from __future__ import annotations

import argparse
import json
import math
import time
from concurrent.futures import ProcessPoolExecutor
from typing import Any

from policyopt.reconfig.trace import simulate_fluid, transformers_trace

DEFAULT_METHODS = ("rubick_greedy,rubick_greedy:reconfigure=plans,rubick_greedy:reconfigure=resources,"
                   "fluid_srpt,fluid_srpt_floor,fluid_srpt_floor:efficiency=0.97")
METRICS = ("avg_jct", "p99_jct", "makespan")
BASELINE = "rubick_greedy"


def parse_method(text: str) -> tuple[str, dict[str, Any]]:
    """``"name:key=value,key=value"`` → (name, options); values parsed as int/float when they are."""
    name, _, rest = text.partition(":")
    opts: dict[str, Any] = {}
    for item in filter(None, rest.split(";" if ";" in rest else ",")):
        k, _, v = item.partition("=")
        try:
            opts[k] = int(v)
        except ValueError:
            try:
                opts[k] = float(v)
            except ValueError:
                opts[k] = v
    return name, opts


def split_methods(text: str) -> list[str]:
    """Methods separated by commas; a ``key=value`` item after ``name:`` belongs to that method."""
    out: list[str] = []
    for part in text.split(","):
        if "=" in part and ":" not in part and out:
            out[-1] += "," + part
        else:
            out.append(part)
    return out


def run_one(args: tuple[str, str, int, int, int, float, float, str]) -> dict[str, Any]:
    """One simulation: (method, scenario, seed, jobs, nodes, rate, round_seconds, quota mode) → metrics
    (hours)."""
    method, scenario, seed, jobs, nodes, rate, round_seconds, quota = args
    name, opts = parse_method(method)
    static = scenario == "static"
    tr = transformers_trace(jobs, rate_per_hour=None if static else rate, static=static, seed=seed,
                            max_gpus=nodes * 8)
    t0 = time.perf_counter()
    res = simulate_fluid(tr, name, nodes=nodes, round_seconds=round_seconds, quota_mode=quota, **opts)
    m = res.metrics()
    return {"method": method, "scenario": scenario, "seed": seed,
            **{k: m[k] / 3600.0 for k in METRICS}, "reconfigurations": m["reconfigurations"],
            "sla_misses": m["sla_misses"], "unfinished": m["unfinished"], "rounds": m["rounds"],
            "s_per_round": m["mean_decision_seconds"], "wall_s": time.perf_counter() - t0}


def summarize(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per (scenario, method): geometric-mean ratios baseline/method over seeds and seeds won."""
    base = {(r["scenario"], r["seed"]): r for r in rows if r["method"] == BASELINE}
    out = []
    for sc in sorted({r["scenario"] for r in rows}):
        for meth in dict.fromkeys(r["method"] for r in rows if r["scenario"] == sc):
            mine = [r for r in rows if r["scenario"] == sc and r["method"] == meth and (sc, r["seed"]) in base]
            if not mine:
                continue
            s: dict[str, Any] = {"scenario": sc, "method": meth, "seeds": len(mine)}
            for k in METRICS:
                ratios = [base[(sc, r["seed"])][k] / r[k] for r in mine]
                s[f"{k} ratio (gmean)"] = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
                s[f"{k} ratio (min)"] = min(ratios)
                s[f"{k} wins"] = sum(x >= 1.0 - 1e-9 for x in ratios)
                s[f"{k} (h, mean)"] = sum(r[k] for r in mine) / len(mine)
            s["reconfigurations (mean)"] = sum(r["reconfigurations"] for r in mine) / len(mine)
            s["sla_misses"] = sum(r["sla_misses"] for r in mine)
            out.append(s)
    return out


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    def fmt(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, float) else str(v)
    lines = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    lines += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--methods", default=DEFAULT_METHODS)
    ap.add_argument("--seeds", default="1,2,3,4,5")
    ap.add_argument("--scenarios", default="static,poisson")
    ap.add_argument("--jobs", type=int, default=40)
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--rate", type=float, default=2.0, help="jobs/hour of the Poisson scenario")
    ap.add_argument("--round-seconds", type=float, default=1800.0)
    ap.add_argument("--quota-mode", default="reserve", choices=["reserve", "cap"],
                    help="the prod quota for every method: reserve (default; idle capacity flows past it) or cap")
    ap.add_argument("--workers", type=int, default=1)
    ap.add_argument("--output", default=None, help="write rows and summary as JSON")
    a = ap.parse_args(argv)
    methods = split_methods(a.methods)
    if BASELINE not in methods:
        methods.insert(0, BASELINE)
    seeds = [int(s) for s in a.seeds.split(",")]
    scenarios = a.scenarios.split(",")
    jobs = [(m, sc, s, a.jobs, a.nodes, a.rate, a.round_seconds, a.quota_mode)
            for sc in scenarios for s in seeds for m in methods]
    rows: list[dict[str, Any]] = []
    if a.workers > 1:
        with ProcessPoolExecutor(a.workers) as pool:
            for r in pool.map(run_one, jobs):
                rows.append(r)
                print(f"  {r['scenario']} seed {r['seed']} {r['method']}: avg {r['avg_jct']:.2f} h, "
                      f"p99 {r['p99_jct']:.2f} h, makespan {r['makespan']:.2f} h", flush=True)
    else:
        for j in jobs:
            r = run_one(j)
            rows.append(r)
            print(f"  {r['scenario']} seed {r['seed']} {r['method']}: avg {r['avg_jct']:.2f} h, "
                  f"p99 {r['p99_jct']:.2f} h, makespan {r['makespan']:.2f} h", flush=True)
    base = {(r["scenario"], r["seed"]): r for r in rows if r["method"] == BASELINE}
    for r in rows:
        b = base.get((r["scenario"], r["seed"]))
        for k in METRICS:
            r[f"{k} ratio"] = b[k] / r[k] if b else float("nan")
    print(f"\n## Per seed ({a.jobs} jobs, {a.nodes} nodes, rounds of {a.round_seconds:g} s, quota {a.quota_mode}; "
          f"ratio = {BASELINE} / method)\n")
    print(table(rows, ["scenario", "seed", "method", "avg_jct", "p99_jct", "makespan", "avg_jct ratio",
                       "p99_jct ratio", "makespan ratio", "reconfigurations", "sla_misses", "wall_s"]))
    summ = summarize(rows)
    print("\n## Summary (geometric mean over seeds of greedy / method; wins = seeds with ratio ≥ 1)\n")
    print(table(summ, ["scenario", "method", "seeds", "avg_jct ratio (gmean)", "avg_jct wins",
                       "p99_jct ratio (gmean)", "p99_jct wins", "makespan ratio (gmean)", "makespan wins",
                       "avg_jct (h, mean)", "p99_jct (h, mean)", "makespan (h, mean)",
                       "reconfigurations (mean)", "sla_misses"]))
    if a.output:
        with open(a.output, "w") as f:
            json.dump({"args": vars(a), "rows": rows, "summary": summ}, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
