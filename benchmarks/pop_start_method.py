"""POP's parallel phase by start method: fork (unsafe once HiGHS's threads run in the caller; measured
for comparison only), forkserver (what POP uses) and sequential, interleaved in one run.

    python benchmarks/pop_start_method.py --jobs 256 --repeats 6

Max-min fairness on a seeded random problem (three worker types, jobs/4 workers each), k = 2,
2 workers. The first call of each mode is reported apart: with forkserver it also starts the
fork server.
"""
from __future__ import annotations

import argparse
import importlib
import statistics
import time

import numpy as np

import policyopt
from policyopt.pop import pop

pop_module = importlib.import_module("policyopt.pop")  # the module (policyopt.pop is the function)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=256)
    ap.add_argument("--repeats", type=int, default=6)
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    n = args.jobs
    jobs = [{"id": str(i), "throughputs": {"v100": float(rng.uniform(1, 4)), "p100": float(rng.uniform(0.5, 2)),
                                           "k80": float(rng.uniform(0.2, 1))}} for i in range(n)]
    prob = policyopt.Problem.from_dict({"cluster": {"worker_types": {"v100": n // 4, "p100": n // 4, "k80": n // 4}},
                                        "jobs": jobs})
    policyopt.solve(prob, "max_min_fairness")  # HiGHS's threads now run in this process
    modes = ("fork", "forkserver", "sequential")
    first: dict[str, float] = {}
    later: dict[str, list[float]] = {m: [] for m in modes}
    for rep in range(args.repeats):
        for m in modes:
            if m != "sequential":
                pop_module.START_METHOD = m
            t = time.perf_counter()
            pop("max_min_fairness", 2, 0, max_workers=2, parallel=m != "sequential").solve(prob)
            seconds = time.perf_counter() - t
            if rep == 0:
                first[m] = seconds
            else:
                later[m].append(seconds)
    print(f"{n} jobs, k=2, 2 workers; first call: " + ", ".join(f"{m} {v:.3f} s" for m, v in first.items()))
    print(f"median of {args.repeats - 1} later calls: "
          + ", ".join(f"{m} {statistics.median(v):.3f} s" for m, v in later.items()))


if __name__ == "__main__":
    main()
