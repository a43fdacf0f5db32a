"""How long does simulating 1,000 jobs on 108 GPUs take, and where does the time go?

    python benchmarks/sim_scale.py [--jobs 1000] [--rate 6] [--cluster v100=36,p100=36,k80=36]
                                   [--policies max_min_fairness,las] [--migration matching] [--seed 0]
                                   [--algorithms auto,simplex]

Simulates one Gavel trace (single-GPU jobs, Poisson arrivals) to completion under each policy —
``max_min_fairness`` is Gavel's LAS (an LP re-solved on every reset event, realized by the round
mechanism); ``las`` is the round-stage least-attained-service heuristic (no LP) — and prints the
wall time split by phase: building problems, policy solves, installing allocations in the mechanism,
selection (mechanism / priority ranking), packing, placement, migration minimization, and the
simulator's own bookkeeping (``execute``: realized throughputs, progress, completions).

``--algorithms auto,simplex`` runs every LP policy once per LP algorithm, side by side in one run:
``auto`` (the default: the structured fast path, interior point on large cold LPs) against
``simplex`` (HiGHS's dual simplex on the whole LP — the previous default below 200,000 non-zeros).
"""
from __future__ import annotations

import argparse
import json
import time

from policyopt.data.gavel import load_gavel
from policyopt.policy import list_policies
from policyopt.sim.simulator import PHASES, SimConfig, Simulator
from policyopt.sim.traces import gavel_trace


def _is_lp(name: str) -> bool:
    """Whether ``name`` is a registered optimization policy (it takes the ``algorithm`` option)."""
    return any(p["name"] == name for p in list_policies())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=1000)
    p.add_argument("--rate", type=float, default=6.0, help="jobs/hour")
    p.add_argument("--cluster", default="v100=36,p100=36,k80=36")
    p.add_argument("--policies", default="max_min_fairness,las")
    p.add_argument("--migration", default="matching")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--algorithms", default="auto",
                   help="comma-separated LP algorithms to compare (policy option `algorithm`), e.g. auto,simplex")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    table = load_gavel()
    trace = gavel_trace(table, args.jobs, args.rate, seed=args.seed)
    rows = []
    algorithms = args.algorithms.split(",")
    runs = [(name, alg if _is_lp(name) else None) for name in args.policies.split(",")
            for alg in (algorithms if _is_lp(name) else algorithms[:1])]
    for name, alg in runs:
        opts = {"algorithm": alg} if alg is not None else {}
        cfg = SimConfig(policy=name, policy_options=opts, migration=args.migration, seed=args.seed)
        t0 = time.perf_counter()
        res = Simulator(args.cluster, cfg, table).run(trace)
        wall = time.perf_counter() - t0
        m = res.metrics
        label = f"{name}[{alg}]" if alg is not None else name
        rows.append({"policy": label, "wall_seconds": wall, "rounds": m["rounds"],
                     "recomputes": m["policy_solve_seconds"]["count"],
                     "solve_ms_mean": None if m["policy_solve_seconds"]["mean"] is None
                     else 1e3 * m["policy_solve_seconds"]["mean"],
                     "max_active": int(res.rounds["active_jobs"].max()), "avg_jct_hours": m["avg_jct"] / 3600,
                     "simulated_hours": m["simulated_seconds"] / 3600, "phases": dict(res.timings)})
    print(f"{args.jobs} jobs, {args.rate} jobs/hour, cluster {args.cluster}, migration={args.migration}")
    head = f"{'policy':>26} {'wall s':>7} {'rounds':>6} {'solves':>6} {'ms/solve':>8} " + \
        " ".join(f"{ph:>8}" for ph in (*PHASES, "other"))
    print(head)
    for r in rows:
        ms = "-" if r["solve_ms_mean"] is None else f"{r['solve_ms_mean']:.1f}"
        print(f"{r['policy']:>26} {r['wall_seconds']:7.1f} {r['rounds']:6d} {r['recomputes']:6d} {ms:>8} " +
              " ".join(f"{r['phases'][ph]:8.2f}" for ph in (*PHASES, "other")))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
