"""Benchmark: POP on Gavel-like workloads — time (parallel and sequential) and quality.

For each size (cluster with n/4 GPUs of each of v100/p100/k80, jobs drawn as in
``water_filling_bench.py``) the full problem is solved (``--full-algorithm``, default interior
point), then POP with k ∈ ``--ks``; parallel and sequential runs alternate (so both see the same
background load) and every timing is the fastest of ``--repeat`` runs:

* ``parallel s`` — wall time of ``PopPolicy.solve`` in parallel mode (partition, processes, merge);
* ``sequential s`` — wall time of the same in sequential mode (one process);
* ``par phase s`` / ``seq phase s`` — only the sub-problem phase: the parallel phase's wall time
  (process start-up and transfers included) and the sum of the sub-problems' times in one process;
* ``cpu s`` — CPU seconds of the sub-problems in the parallel run (when ``par phase`` is well above
  ``cpu s / workers`` the processes waited for cores: the machine is shared);
* ``slowest part s`` — the slowest sub-problem's solve in the sequential runs (each sub-problem's
  fastest time over ``--repeat`` runs, then the maximum over sub-problems);
* ``full/slowest`` — full solve time over the slowest sub-problem (target ≥ 20× at k = 16);
* ``worst`` — min_m u_m(POP) / min_m u_m(full) with u = sf·thr/(w·thr(X_equal)) cluster-wide
  (target ≥ 0.98 at k = 16, 16,384 jobs); ``mean`` — mean u(POP) / mean u(full).

The 1-minute load average and the machine's *parallel capacity* right then (work two concurrent
CPU-bound processes get done / work one gets done in the same wall time: 2.0 on two idle cores,
about 1.0 when other work fills them — the ceiling for any parallel speedup) are printed before and
after (the development machine has 2 cores shared with other work). ``--baseline`` also runs the
reference code's partitioning for comparison: every job to ``randint(0, k−1)`` independently and
``c//k`` workers of each type per group.

Run::

    python benchmarks/pop_bench.py                               # 1,024 … 16,384 jobs, k = 1 … 16
    python benchmarks/pop_bench.py --sizes 4096 --ks 1 4 8 16    # the parallel-vs-sequential case
    python benchmarks/pop_bench.py --sizes 1024 --ks 1 4 --baseline
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np
from water_filling_bench import gavel_problem  # the sibling benchmark's generator (the script's folder is on the path)

from policyopt import Problem, get_policy
from policyopt.allocation import AllocationSpace
from policyopt.data.gavel import load_gavel
from policyopt.pop import Partition, PopState, pop


class ReferencePartition(PopState):
    """The reference code's partition: ``randint(0, k−1)`` per job, ``c//k`` workers per group."""

    def update(self, problem: Problem, adapter: Any = None) -> Partition:
        k = self.k_requested
        counts = np.array([w.count for w in problem.cluster.worker_types], np.int64)
        group = self.rng.integers(0, k, len(problem.jobs))
        return Partition(k, k, self.seed, {j.id: int(g) for j, g in zip(problem.jobs, group)},
                         np.tile(counts // k, (k, 1)), problem.cluster.names)


def _spin(seconds: float) -> int:
    """Iterations of a pure-Python loop in ``seconds`` of wall time (a CPU-bound probe)."""
    end, n = time.perf_counter() + seconds, 0
    while time.perf_counter() < end:
        n += 1
    return n


def parallel_capacity(seconds: float = 1.0) -> float:
    """Work two concurrent processes get done over the work one process gets done in the same wall
    time, right now (2.0 on two idle cores; about 1.0 when other work already fills them)."""
    import multiprocessing as mp

    with mp.get_context("fork").Pool(1) as one:
        single = one.apply(_spin, (seconds,))
    with mp.get_context("fork").Pool(2) as two:
        both = sum(two.map(_spin, [seconds, seconds]))
    return both / single


def normalized(problem: Problem, throughputs: dict[str, float]) -> np.ndarray:
    space = AllocationSpace(problem)
    thr = np.array([throughputs[j] for j in problem.job_ids])
    return space.scale * thr / (space.weights * space.equal_share_throughput())


def run(n: int, ks: Sequence[int], args: argparse.Namespace, data: Any) -> list[dict[str, Any]]:
    prob = gavel_problem(n, args.seed, data=data)
    t_full = np.inf
    for _ in range(args.repeat):  # timings: the fastest of --repeat runs (the machine is shared)
        t0 = time.perf_counter()
        full = get_policy(args.policy, algorithm=args.full_algorithm).solve(prob)
        t_full = min(t_full, time.perf_counter() - t0)
    u_full = normalized(prob, full.effective_throughputs)
    rows = [{"jobs": n, "k": 1, "partition": "-", "parallel_s": None, "sequential_s": t_full,
             "par_phase_s": None, "seq_phase_s": t_full, "cpu_s": None,
             "slowest_part_s": t_full, "speedup": 1.0, "worst": 1.0, "mean": 1.0, "routed": 0}]
    kinds = [("ours", PopState)] + ([("reference", ReferencePartition)] if args.baseline else [])
    for k in ks:
        if k == 1:
            continue
        for label, state_cls in kinds:
            row: dict[str, Any] = {"jobs": n, "k": k, "partition": label}
            wall = {"parallel": np.inf, "sequential": np.inf}
            phase = {"parallel": np.inf, "sequential": np.inf}
            part_s, cpu, seq_res = np.full(k, np.inf), np.inf, None
            for _ in range(args.repeat):
                for mode in ("parallel", "sequential"):  # alternate: both see the same background load
                    policy = pop(get_policy(args.policy, algorithm=args.sub_algorithm), k, args.seed,
                                 combine=args.combine, parallel=mode == "parallel", max_workers=args.workers)
                    policy.state = state_cls(k, args.seed)
                    t0 = time.perf_counter()
                    res = policy.solve(prob)
                    wall[mode] = min(wall[mode], time.perf_counter() - t0)
                    info = res.extra["pop"]
                    if mode == "parallel":
                        if info["parallel_seconds"] is not None and info["parallel_seconds"] < phase[mode]:
                            phase[mode], cpu = info["parallel_seconds"], float(sum(info["partition_cpu_seconds"]))
                    else:
                        phase[mode] = min(phase[mode], info["sequential_seconds"])
                        secs = np.asarray(info["partition_seconds"])
                        part_s = np.minimum(part_s[: secs.size], secs)
                        seq_res = res
            assert seq_res is not None
            info = seq_res.extra["pop"]
            # each sub-problem's fastest time over the runs, then the slowest sub-problem
            row.update({"parallel_s": wall["parallel"], "sequential_s": wall["sequential"],
                        "par_phase_s": None if np.isinf(phase["parallel"]) else phase["parallel"],
                        "seq_phase_s": phase["sequential"], "cpu_s": None if np.isinf(cpu) else cpu,
                        "slowest_part_s": float(part_s.max()), "routed": len(info["routed"]),
                        "status": seq_res.status.value})
            row["speedup"] = t_full / row["slowest_part_s"]
            u = normalized(prob, seq_res.effective_throughputs)
            row["worst"] = float(u.min() / u_full.min())
            row["mean"] = float(u.mean() / u_full.mean())
            rows.append(row)
            print(_fmt(row), flush=True)
    print(_fmt(rows[0]), "(full solve)", flush=True)
    return rows


def _fmt(r: dict[str, Any]) -> str:
    def f(v: Any, p: str = ".3f") -> str:
        return "-" if v is None else format(v, p)
    return (f"| {r['jobs']} | {r['k']} | {r['partition']} | {f(r['parallel_s'])} | {f(r['sequential_s'])} | "
            f"{f(r['par_phase_s'])} | {f(r['seq_phase_s'])} | {f(r['cpu_s'])} | "
            f"{f(r['slowest_part_s'])} | {f(r['speedup'], '.1f')} | {f(r['worst'], '.4f')} | {f(r['mean'], '.4f')} |")


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384])
    ap.add_argument("--ks", type=int, nargs="+", default=[1, 2, 4, 8, 16])
    ap.add_argument("--policy", default="max_min_fairness")
    ap.add_argument("--combine", default="min", help="how sub-objectives recombine (the policy's pop_combine)")
    ap.add_argument("--full-algorithm", default="ipm")
    ap.add_argument("--sub-algorithm", default="ipm")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timings are the fastest of this many runs")
    ap.add_argument("--baseline", action="store_true", help="also run the reference code's partitioning")
    ap.add_argument("--workers", type=int, default=None, help="processes in parallel mode (default: the CPUs)")
    ap.add_argument("--json", help="write all rows to this file")
    args = ap.parse_args(argv)
    data = load_gavel()
    load0 = os.getloadavg()[0]
    cap0 = parallel_capacity()
    print(f"load average (1 min) before: {load0:.2f} on {os.cpu_count()} CPUs; parallel capacity {cap0:.2f} "
          "(work of 2 concurrent processes / work of 1)")
    print("| jobs | k | partition | parallel s | sequential s | par phase s | seq phase s | cpu s | slowest part s "
          "| full/slowest | worst | mean |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    rows = []
    for n in args.sizes:
        rows += run(n, args.ks, args, data)
    load1 = os.getloadavg()[0]
    cap1 = parallel_capacity()
    print(f"load average (1 min) after: {load1:.2f}; parallel capacity {cap1:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps({"load_before": load0, "load_after": load1, "capacity_before": cap0,
                                               "capacity_after": cap1, "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
