"""Cost and effect of max_min_fairness's second stage (``fill``, on by default).

Gavel-generator jobs (static, multi-GPU, Gavel's measured throughputs) on two clusters: ``busy``
(N/4 GPUs per type, as in the policy benchmarks) and ``light`` (N GPUs per type, where a vertex of
the max-min LP leaves capacity idle). Per size, side by side in one run, ``--repeats`` times each
(median wall time of ``policy.solve``): ``fill=false`` and ``fill=true``; ``fill_s`` is the second
stage's own time (``extra["fill"]["seconds"]``). Also reported: the total normalized throughput
``Σ_m thr(m)/thr(m, X_equal)`` and the GPUs in use, before and after the second stage.

    python benchmarks/max_min_fill.py --sizes 256 512 1024 2048 --repeats 3
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd

from policyopt.data import load_gavel
from policyopt.policy import get_policy
from policyopt.problem import Cluster, Problem
from policyopt.sim.traces import gavel_trace, parse_job_type


def workload(n: int, per_type: int, seed: int = 0) -> Problem:
    g = load_gavel()
    trace = gavel_trace(g, n, static=True, multi_gpu=True, seed=seed)
    types = [g.type_index(*parse_job_type(j.job_type)) for j in trace]
    cluster = Cluster.from_counts(dict.fromkeys(("v100", "p100", "k80"), per_type), gpus_per_server=4)
    return g.problem(types, cluster, steps=np.array([j.steps for j in trace]))


def gpus_in_use(problem: Problem, allocation: dict[str, dict[str, float]]) -> float:
    sf = {j.id: j.scale_factor for j in problem.jobs}
    return float(sum(sum(alloc.values()) * sf[job] for job, alloc in allocation.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    get_policy("max_min_fairness").solve(workload(16, 4))  # imports and first-call costs, untimed
    rows = []
    for n in args.sizes:
        for load, per_type in (("busy", max(n // 4, 1)), ("light", n)):
            problem = workload(n, per_type)
            times: dict[bool, list[float]] = {False: [], True: []}
            results = {}
            fill_s = []
            for _ in range(args.repeats):
                for fill in (False, True):
                    policy = get_policy("max_min_fairness", fill=fill)
                    t0 = time.perf_counter()
                    res = policy.solve(problem)
                    times[fill].append(time.perf_counter() - t0)
                    results[fill] = res
                    if fill:
                        fill_s.append(res.extra["fill"]["seconds"])
            off, on = statistics.median(times[False]), statistics.median(times[True])
            info = results[True].extra["fill"]
            rows.append({
                "jobs": n, "cluster": f"{load} ({3 * per_type} GPUs)", "fill_off_s": off, "fill_on_s": on,
                "fill_s": statistics.median(fill_s), "ratio": on / off,
                "norm_thr_before": info["normalized_throughput_before"],
                "norm_thr_after": info["normalized_throughput_after"],
                "gpus_before": gpus_in_use(problem, results[False].allocation),
                "gpus_after": gpus_in_use(problem, results[True].allocation),
                "same_t": abs(results[True].objective - results[False].objective)
                <= 1e-6 * abs(results[False].objective),
            })
            print(pd.DataFrame(rows[-1:]).to_string(index=False, float_format=lambda v: f"{v:.4g}"), flush=True)
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))


if __name__ == "__main__":
    main()
