"""Strategy-proof max-min fairness: exact (conic, cvxpy + Clarabel) vs cutting planes (HiGHS).

For each size (Gavel-generator jobs, N/4 GPUs each of V100/P100/K80, ``policies_bench.workload``):

* ``nsw``: one Nash-social-welfare solve (the core of the mechanism) by each method — time and the
  NSW log-sum of each (the cutting-plane method also reports its certified upper bound);
* ``pa``: the whole partial-allocation mechanism (the NSW solve plus one leave-one-out solve per
  job) up to ``--pa-max`` jobs — time, each method's status (conic/pwl), and the largest relative
  difference between the two methods' discount factors.

Statuses are printed as ``conic/pwl``; cvxpy's ``optimal_inaccurate`` is not ``optimal``.

``--clock cpu`` times with the process's CPU time (all threads) instead of the wall clock: on a
shared, loaded machine the wall clock mostly measures the wait for a core. The load average is
printed before and after.

Run: ``python benchmarks/strategy_proof_bench.py [--sizes 256 512 1024 2048] [--pa-max 256] [--clock cpu]``.
"""
from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import numpy as np
import pandas as pd

from policies_bench import workload  # the sibling benchmark's generator (the script's folder is on the path)

from policyopt.data import load_gavel
from policyopt.result import Timings

GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"
CLOCK = [time.perf_counter]  # or time.process_time (--clock cpu)


def nsw_only(problem, method: str) -> tuple[float, float, float | None, str]:
    """One NSW solve: ``(seconds, log-sum achieved, certified upper bound or None, status)``."""
    from policyopt.formulations import strategy_proof as spm

    from policyopt.policy import get_policy

    pol = get_policy("max_min_fairness_strategy_proof", method=method)
    t0 = CLOCK[0]()
    space = pol.make_space(problem)
    w = np.asarray(space.weights, float)
    if method == "conic":
        out = spm._ConicNSW(space, w).solve()
        return CLOCK[0]() - t0, out[3], None, out[0].value
    nsw = spm._CuttingPlaneNSW(pol, space, w, pol.config["tol"], pol.config["max_rounds"], Timings())
    out = nsw.solve()
    return CLOCK[0]() - t0, out[3], out[4], out[0].value


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[256, 512, 1024, 2048])
    ap.add_argument("--pa-max", type=int, default=256, help="run the whole mechanism up to this many jobs")
    ap.add_argument("--gavel", type=Path, default=GAVEL)
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall clock (default) or the process's CPU time (see the module docstring)")
    args = ap.parse_args()
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"clock: {args.clock}; load average at start: {os.getloadavg()}", flush=True)
    import policyopt

    g = load_gavel(args.gavel)
    rows = []
    for n in args.sizes:
        p = workload(g, n, seed=0, fresh=True)
        tc, vc, _, sc = nsw_only(p, "conic")
        tp, vp, ub, sp = nsw_only(p, "pwl")
        row = {"jobs": n, "nsw_conic_s": tc, "nsw_pwl_s": tp, "nsw_conic": vc, "nsw_pwl": vp,
               "pwl_upper_bound": ub, "nsw_abs_diff": abs(vc - vp), "nsw_status": f"{sc}/{sp}"}
        if n <= args.pa_max:
            res = {}
            for m in ("conic", "pwl"):
                t0 = CLOCK[0]()
                r = policyopt.solve(p, "max_min_fairness_strategy_proof", method=m)
                f = r.extra.get("discount_factors")  # absent when the first NSW solve failed (fallback)
                res[m] = (CLOCK[0]() - t0, None if f is None else np.array(list(f.values())), r.status.value)
            fc, fp = res["conic"][1], res["pwl"][1]
            row.update(pa_conic_s=res["conic"][0], pa_pwl_s=res["pwl"][0],
                       pa_status=f"{res['conic'][2]}/{res['pwl'][2]}",
                       f_max_rel_diff=np.nan if fc is None or fp is None else float(np.max(np.abs(fp - fc) / fc)))
        rows.append(row)
        print(pd.DataFrame([row]).to_string(index=False), flush=True)
    print()
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.6g}"))
    print(f"load average at end: {os.getloadavg()}")


if __name__ == "__main__":
    main()
