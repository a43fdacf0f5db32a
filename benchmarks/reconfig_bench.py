"""Reconfiguration-aware multi-resource allocation: example, one-round comparison, JCT simulation,
timings (512 jobs / 64 nodes; 4,096 jobs with POP).

    python benchmarks/reconfig_bench.py                 # everything (about 15 minutes on 2 cores)
    python benchmarks/reconfig_bench.py --parts example,round,timing
    python benchmarks/reconfig_bench.py --parts pop     # 4,096 jobs / 512 nodes, POP k = 4, 8, 16
    python benchmarks/reconfig_bench.py --output reconfig.json
    python benchmarks/reconfig_bench.py --parts round --quota-mode cap   # the prod quota bounds always

Parts:

* ``example`` — the two-job example (RoBERTa + T5 on 4 GPUs), our model beside the published numbers;
* ``round`` — one scheduling round of a static batch of transformer jobs: total normalized throughput
  ``Σ_m thr(m)/r_m`` (``r_m``: the job's requested resources with its original plan) of the integral
  allocation each method runs, jobs running, GPUs used, guarantees met;
* ``sim`` — fluid round simulations (:func:`policyopt.reconfig.simulate_fluid`) of a static batch and
  of a Poisson trace: average / p99 JCT, makespan, guaranteed and best-effort JCT, reconfigurations;
* ``timing`` — seconds per allocation for 512 jobs on 64 nodes (space, LP, rounding; greedy);
* ``pop`` — 4,096 jobs on 512 nodes unpartitioned vs POP (``policyopt.pop.pop``) with k = 4, 8, 16:
  whole-solve seconds sequential and parallel, the sub-problem phase alone (sum of the sub-problems'
  seconds in one process; wall seconds of the parallel phase), the slowest sub-problem, quality
  (objective / the unpartitioned objective; both sum-combined objectives are Σ over jobs), rows of
  the *full* problem's space the merged allocation violates (0 expected) and guaranteed SLAs met,
  counted on the full space's SLA rows. The 1-minute load average and the parallel capacity
  (``pop_bench.parallel_capacity``: work of 2 concurrent processes / work of 1; 2.0 on two idle
  cores) are printed — the development machine's 2 cores are shared.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time
from typing import Any

import numpy as np

from policyopt import get_policy
from policyopt.reconfig import MultiResourceSpace, ReconfigOptions
from policyopt.reconfig.placement import integralize
from policyopt.pop import pop
from policyopt.reconfig.pop_support import allocation_array
from policyopt.reconfig.trace import simulate_fluid, trace_problem, transformers_trace

from pop_bench import parallel_capacity  # the POP part's machine probe (the script's folder is on the path)

METHODS: list[tuple[str, str, dict[str, Any]]] = [
    ("LP fluid_srpt", "fluid_srpt", {}),
    ("LP max_sum_throughput (normalized)", "max_sum_throughput", {"normalize": True}),
    ("LP max_min_fairness", "max_min_fairness", {}),
    ("rubick_greedy (all)", "rubick_greedy", {}),
    ("rubick_greedy E (plans)", "rubick_greedy", {"reconfigure": "plans"}),
    ("rubick_greedy R (resources)", "rubick_greedy", {"reconfigure": "resources"}),
    ("rubick_greedy N (none)", "rubick_greedy", {"reconfigure": "none"}),
    ("synergy_like", "synergy_like", {}),
    ("sia_like", "sia_like", {}),
]


def table(rows: list[dict[str, Any]], cols: list[str]) -> str:
    def fmt(v: Any) -> str:
        if isinstance(v, float):
            return f"{v:.3g}" if abs(v) < 1e4 else f"{v:.4g}"
        return str(v)
    out = ["| " + " | ".join(cols) + " |", "|" + "---|" * len(cols)]
    out += ["| " + " | ".join(fmt(r.get(c, "")) for c in cols) + " |" for r in rows]
    return "\n".join(out)


def part_example() -> dict[str, Any]:
    """The published two-job example (RoBERTa + T5-3B on 4 A800 GPUs): Rubick's measured totals
    recomputed, and our model's even split, best split, greedy and LP (``policyopt.reconfig.examples``)."""
    from policyopt.reconfig import examples as ex_mod

    ex = ex_mod.rubick_two_job_example()
    print(ex_mod.format_two_job(ex, ex_mod.measured_vs_model()), "\n")
    return {"example": repr(ex)}


def integral_of(res, space: MultiResourceSpace):  # type: ignore[no-untyped-def]
    return getattr(res, "assignment", None) or integralize(space, res.X)


def part_round(jobs: int, nodes: int, seed: int, quota: str) -> dict[str, Any]:
    p = trace_problem(transformers_trace(jobs, static=True, seed=seed, max_gpus=nodes * 8), nodes=nodes,
                      options=ReconfigOptions(quota=quota))
    rows = []
    for label, name, opts in METHODS:
        t0 = time.perf_counter()
        res = get_policy(name, **opts).solve(p)
        sp = res.space
        a = integral_of(res, sp)
        dt = time.perf_counter() - t0
        thr = a.throughputs(len(sp.jobs))
        X = a.X(sp)
        met = [bool(thr[m] >= sp.ref_thr[m] * (1 - 1e-9)) for m in sp.sla_jobs]
        rows.append({"method": label, "Σ thr/r (integral)": float(np.sum(thr / sp.ref_thr)),
                     "LP objective": res.objective if not res.extra.get("integral") else "",
                     "jobs running": len(a.placements), "GPUs used": sp.usage(X)[f"{sp.worker_types.labels[0]}.gpus"],
                     "guarantees met": f"{sum(met)}/{len(met)}", "violations": len(sp._violations(X, sla=False)),
                     "seconds": dt})
    print(f"## One round, static batch: {jobs} jobs on {nodes} nodes ({nodes * 8} GPUs), seed {seed}, "
          f"quota {quota}\n")
    print(table(rows, ["method", "Σ thr/r (integral)", "LP objective", "jobs running", "GPUs used",
                       "guarantees met", "violations", "seconds"]), "\n")
    return {"jobs": jobs, "nodes": nodes, "quota": quota, "rows": rows}


def part_sim(jobs: int, nodes: int, seed: int, rate: float | None, round_seconds: float, quota: str
             ) -> dict[str, Any]:
    tr = transformers_trace(jobs, rate_per_hour=rate, static=rate is None, seed=seed, max_gpus=nodes * 8)
    rows = []
    for label, name, opts in METHODS:
        t0 = time.perf_counter()
        res = simulate_fluid(tr, name, nodes=nodes, round_seconds=round_seconds, quota_mode=quota, **opts)
        m = res.metrics()
        h = 3600.0
        rows.append({"method": label, "avg JCT (h)": m["avg_jct"] / h, "p99 JCT (h)": m["p99_jct"] / h,
                     "makespan (h)": m["makespan"] / h, "guaranteed avg (h)": (m["avg_jct_guaranteed"] or 0) / h,
                     "best-effort avg (h)": (m["avg_jct_best_effort"] or 0) / h,
                     "reconfigs": m["reconfigurations"], "SLA misses": m["sla_misses"], "rounds": m["rounds"],
                     "s/round": m["mean_decision_seconds"], "wall s": time.perf_counter() - t0})
        print(f"  {label}: avg {rows[-1]['avg JCT (h)']:.2f} h ({rows[-1]['wall s']:.0f} s)", flush=True)
    base = next(r for r in rows if r["method"] == "rubick_greedy (all)")
    for r in rows:
        r["avg JCT vs greedy"] = base["avg JCT (h)"] / r["avg JCT (h)"]
    kind = "static batch" if rate is None else f"Poisson {rate:g} jobs/h"
    print(f"\n## Fluid simulation, {kind}: {jobs} jobs on {nodes} nodes, rounds of {round_seconds:g} s, seed {seed}, "
          f"quota {quota}\n")
    print(table(rows, ["method", "avg JCT (h)", "avg JCT vs greedy", "p99 JCT (h)", "makespan (h)",
                       "guaranteed avg (h)", "best-effort avg (h)", "reconfigs", "SLA misses", "s/round"]), "\n")
    return {"jobs": jobs, "nodes": nodes, "rate": rate, "round_seconds": round_seconds, "quota": quota, "rows": rows}


def _time(fn, repeat: int) -> tuple[float, Any]:  # type: ignore[no-untyped-def]
    out, ts = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def part_timing(repeat: int, quota: str) -> dict[str, Any]:
    rows = []
    p = trace_problem(transformers_trace(512, static=True, seed=21), nodes=64, options=ReconfigOptions(quota=quota))
    t_space, sp = _time(lambda: MultiResourceSpace(p), repeat)
    rows.append({"case": "512 jobs / 64 nodes", "step": "space (configurations, rows, SLA check)", "seconds": t_space,
                 "size": f"{len(sp.configs)} configs, {int(sp.single_mask.sum())} columns"})
    for name, opts in (("fluid_srpt", {}), ("max_sum_throughput", {"normalize": True}), ("max_min_fairness", {})):
        t, res = _time(lambda: get_policy(name, **opts).solve(p), repeat)  # noqa: B023 - called at once
        tr = res.timings
        rows.append({"case": "512 jobs / 64 nodes", "step": f"{name}: solve() total", "seconds": t,
                     "size": f"build {tr.build:.3f}, compile {tr.compile:.3f}, LP {tr.solve:.3f}"})
        if name == "fluid_srpt":
            t_r, _ = _time(lambda: integralize(res.space, res.X), repeat)  # noqa: B023 - called at once
            rows.append({"case": "512 jobs / 64 nodes", "step": "rounding + placement + fill", "seconds": t_r,
                         "size": ""})
    t, _ = _time(lambda: get_policy("rubick_greedy").solve(p), 1)
    rows.append({"case": "512 jobs / 64 nodes", "step": "rubick_greedy solve()", "seconds": t, "size": ""})
    print(f"## Time per allocation (quota {quota})\n")
    print(table(rows, ["case", "step", "seconds", "size"]), "\n")
    return {"rows": rows}


# ---------------------------------------------------------------------------------------- POP
POP_POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "fluid_srpt": ("fluid_srpt", {}),
    "max_sum_throughput": ("max_sum_throughput", {"normalize": True}),
    "max_min_fairness": ("max_min_fairness", {}),
}


def _pop_quality(space: MultiResourceSpace, allocation: dict[str, dict[str, float]]) -> tuple[int, str]:
    """Violated rows of the full space (job time, GPUs, cores, host memory, quotas) and guaranteed
    SLAs met (admitted jobs whose full-space SLA row holds) of an allocation."""
    X = allocation_array(space, allocation)
    viol = len(space._violations(X, sla=False))
    share = space.sla_matrix() @ X.ravel()
    met = int(np.sum(share >= space.sla_target - 1e-6))
    return viol, f"{met}/{space.sla_jobs.size}"


def part_pop(jobs: int, nodes: int, ks: list[int], policies: list[str], repeat: int, seed: int = 22,
             quota: str = "reserve") -> dict[str, Any]:
    """Unpartitioned vs POP (module docstring). Timings: the fastest of ``repeat`` runs, sequential
    and parallel runs alternating so both see the same background load."""
    load0, cap0 = os.getloadavg()[0], parallel_capacity()
    big = trace_problem(transformers_trace(jobs, static=True, seed=seed), nodes=nodes,
                        options=ReconfigOptions(quota=quota))
    space = MultiResourceSpace(big)  # the full space, to evaluate merged allocations (not timed)
    rows = []
    for name in policies:
        pname, opts = POP_POLICIES[name]
        policy = get_policy(pname, **opts)
        policy.solve(big)  # warm-up: per-model configuration grids are cached per process
        t_full, full = np.inf, None
        for _ in range(repeat):
            t0 = time.perf_counter()
            full = policy.solve(big)
            t_full = min(t_full, time.perf_counter() - t0)
        assert full is not None
        viol, met = _pop_quality(space, full.allocation)
        rows.append({"policy": name, "k": "-", "sequential s": t_full, "parallel s": "", "sub-problems seq s": "",
                     "sub-problems par s": "", "slowest sub-problem s": "", "objective": full.objective,
                     "quality": 1.0, "violations": viol, "SLAs met": met, "k_reason": ""})
        print(f"  {name} unpartitioned: {t_full:.3f} s", flush=True)
        for k in ks:
            best = {"seq": np.inf, "par": np.inf, "seq_phase": np.inf, "par_phase": np.inf}
            part_s = np.full(k, np.inf)
            res = None
            for _ in range(repeat):
                for parallel in (True, False):
                    t0 = time.perf_counter()
                    r = pop(policy, k, 0, parallel=parallel).solve(big)
                    dt = time.perf_counter() - t0
                    info = r.extra["pop"]
                    if parallel:
                        best["par"] = min(best["par"], dt)
                        best["par_phase"] = min(best["par_phase"], info["parallel_seconds"] or np.inf)
                    else:
                        best["seq"] = min(best["seq"], dt)
                        best["seq_phase"] = min(best["seq_phase"], info["sequential_seconds"])
                        secs = np.asarray(info["partition_seconds"])
                        part_s = np.minimum(part_s[: secs.size], secs)
                        res = r
            assert res is not None
            info = res.extra["pop"]
            viol, met = _pop_quality(space, res.allocation)
            rows.append({"policy": name, "k": info["k"], "sequential s": best["seq"], "parallel s": best["par"],
                         "sub-problems seq s": best["seq_phase"], "sub-problems par s": best["par_phase"],
                         "slowest sub-problem s": float(part_s.max()), "objective": res.objective,
                         "quality": (res.objective / full.objective) if full.objective else "",
                         "violations": viol, "SLAs met": met, "k_reason": info["k_reason"] or ""})
            print(f"  {name} k={k}: sequential {best['seq']:.3f} s, parallel {best['par']:.3f} s", flush=True)
    load1, cap1 = os.getloadavg()[0], parallel_capacity()
    print(f"\n## POP: {jobs} jobs on {nodes} nodes ({nodes * 8} GPUs), quota {quota}, fastest of {repeat}; "
          f"load average {load0:.2f} before, {load1:.2f} after, {os.cpu_count()} CPUs; parallel capacity (work of 2 "
          f"concurrent processes / work of 1) {cap0:.2f} before, {cap1:.2f} after\n")
    print(table(rows, ["policy", "k", "sequential s", "parallel s", "sub-problems seq s", "sub-problems par s",
                       "slowest sub-problem s", "quality", "violations", "SLAs met"]), "\n")
    return {"jobs": jobs, "nodes": nodes, "repeat": repeat, "load_before": load0, "load_after": load1,
            "capacity_before": cap0, "capacity_after": cap1, "rows": rows}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--parts", default="example,round,sim,timing,pop")
    ap.add_argument("--round-jobs", type=int, default=96)
    ap.add_argument("--round-nodes", type=int, default=8)
    ap.add_argument("--sim-jobs", type=int, default=40)
    ap.add_argument("--sim-nodes", type=int, default=4)
    ap.add_argument("--rate", type=float, default=2.0, help="jobs/hour of the Poisson trace")
    ap.add_argument("--round-seconds", type=float, default=1800.0)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pop-jobs", type=int, default=4096)
    ap.add_argument("--pop-nodes", type=int, default=512)
    ap.add_argument("--pop-ks", default="4,8,16")
    ap.add_argument("--pop-policies", default="fluid_srpt,max_sum_throughput",
                    help=f"comma-separated, of {', '.join(POP_POLICIES)}")
    ap.add_argument("--pop-repeat", type=int, default=1)
    ap.add_argument("--quota-mode", default="reserve", choices=["reserve", "cap"],
                    help="reconfig.options.quota of every problem: reserve (default; idle capacity flows past "
                         "the prod quota, for LP policies and the greedy baselines alike) or cap")
    ap.add_argument("--output", default=None, help="write every table as JSON")
    a = ap.parse_args(argv)
    parts = set(a.parts.split(","))
    out: dict[str, Any] = {}
    if "example" in parts:
        out["example"] = part_example()
    if "round" in parts:
        out["round"] = part_round(a.round_jobs, a.round_nodes, a.seed, a.quota_mode)
    if "sim" in parts:
        out["sim_static"] = part_sim(a.sim_jobs, a.sim_nodes, a.seed, None, a.round_seconds, a.quota_mode)
        out["sim_poisson"] = part_sim(a.sim_jobs, a.sim_nodes, a.seed, a.rate, a.round_seconds, a.quota_mode)
    if "timing" in parts:
        out["timing"] = part_timing(a.repeat, a.quota_mode)
    if "pop" in parts:
        out["pop"] = part_pop(a.pop_jobs, a.pop_nodes, [int(k) for k in a.pop_ks.split(",")],
                              a.pop_policies.split(","), a.pop_repeat, quota=a.quota_mode)
    if a.output:
        with open(a.output, "w") as f:
            json.dump(out, f, indent=2, default=str)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
