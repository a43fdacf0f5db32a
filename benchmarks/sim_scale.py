"""How long does a published-scale simulation on 108 GPUs take, and where does the time go?

    python benchmarks/sim_scale.py [--jobs 6000] [--rate 5.6] [--window 0.667:0.833] [--until window]
                                   [--cluster v100=36,p100=36,k80=36] [--policies max_min_fairness]
                                   [--migration matching] [--seed 0] [--algorithms auto,simplex]

The default is the published form (Gavel, OSDI'20 Fig. 8): 36 GPUs of each type, a Gavel trace of
6,000 single-GPU jobs with Poisson arrivals at 5.6 jobs/hour, metrics over jobs 4,000–5,000 (the
window ``0.667:0.833``), simulated until those jobs have finished. ``--jobs 600`` is a quick run of
the same form (the window stays proportional); ``--until all --window 0.25:0.75 --jobs 1000 --rate 6``
is the earlier 1,000-job form.

Simulates the trace under each policy —
``max_min_fairness`` is Gavel's LAS (an LP re-solved on every reset event, realized by the round
mechanism); ``las`` is the round-stage least-attained-service heuristic (no LP) — and prints the
wall time split by phase: building problems, policy solves, installing allocations in the mechanism,
selection (mechanism / priority ranking), packing, placement, migration minimization, and the
simulator's own bookkeeping (``execute``: realized throughputs, progress, completions; ``other``:
arrivals, stop conditions, results), and the same grouped as the issue names them: policy solves
(``problem`` + ``solve``), mechanism (``install`` + ``select``), placement (``pack`` + ``place``),
migration relabels (``migrate``), bookkeeping (``execute`` + ``other``).

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

#: the issue's grouping of the simulator's phases
GROUPS = {"policy solves": ("problem", "solve"), "mechanism": ("install", "select"), "placement": ("pack", "place"),
          "relabels": ("migrate",), "bookkeeping": ("execute", "other")}


def _is_lp(name: str) -> bool:
    """Whether ``name`` is a registered optimization policy (it takes the ``algorithm`` option)."""
    return any(p["name"] == name for p in list_policies())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--jobs", type=int, default=6000)
    p.add_argument("--rate", type=float, default=5.6, help="jobs/hour")
    p.add_argument("--window", default="0.667:0.833", help="steady-state window A:B (fractions of the trace)")
    p.add_argument("--until", default="window", choices=("window", "all"))
    p.add_argument("--cluster", default="v100=36,p100=36,k80=36")
    p.add_argument("--policies", default="max_min_fairness")
    p.add_argument("--migration", default="matching")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--algorithms", default="auto",
                   help="comma-separated LP algorithms to compare (policy option `algorithm`), e.g. auto,simplex")
    p.add_argument("--json", help="also write the results here")
    args = p.parse_args()
    a, b = (float(x) for x in args.window.split(":"))
    table = load_gavel()
    trace = gavel_trace(table, args.jobs, args.rate, seed=args.seed)
    rows = []
    algorithms = args.algorithms.split(",")
    runs = [(name, alg if _is_lp(name) else None) for name in args.policies.split(",")
            for alg in (algorithms if _is_lp(name) else algorithms[:1])]
    for name, alg in runs:
        opts = {"algorithm": alg} if alg is not None else {}
        cfg = SimConfig(policy=name, policy_options=opts, migration=args.migration, seed=args.seed,
                        window=(a, b), until=args.until)
        t0, c0 = time.perf_counter(), time.process_time()
        res = Simulator(args.cluster, cfg, table).run(trace)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
        m = res.metrics
        label = f"{name}[{alg}]" if alg is not None else name
        rows.append({"policy": label, "wall_seconds": wall, "cpu_seconds": cpu, "rounds": m["rounds"],
                     "recomputes": m["policy_solve_seconds"]["count"],
                     "solve_ms_mean": None if m["policy_solve_seconds"]["mean"] is None
                     else 1e3 * m["policy_solve_seconds"]["mean"],
                     "max_active": int(res.rounds["active_jobs"].max()), "avg_jct_hours": m["avg_jct"] / 3600,
                     "simulated_hours": m["simulated_seconds"] / 3600, "completed": m["completed"],
                     "phases": dict(res.timings),
                     "groups": {g: sum(res.timings[ph] for ph in phs) for g, phs in GROUPS.items()}})
    print(f"{args.jobs} jobs, {args.rate} jobs/hour, window {args.window}, until {args.until}, "
          f"cluster {args.cluster}, migration={args.migration}")
    head = f"{'policy':>26} {'wall s':>7} {'rounds':>6} {'solves':>6} {'ms/solve':>8} " + \
        " ".join(f"{ph:>8}" for ph in (*PHASES, "other"))
    print(head)
    for r in rows:
        ms = "-" if r["solve_ms_mean"] is None else f"{r['solve_ms_mean']:.1f}"
        print(f"{r['policy']:>26} {r['wall_seconds']:7.1f} {r['rounds']:6d} {r['recomputes']:6d} {ms:>8} " +
              " ".join(f"{r['phases'][ph]:8.2f}" for ph in (*PHASES, "other")))
    print()
    print(f"{'policy':>26} {'wall s':>7} {'CPU s':>7} {'done':>5} " + " ".join(f"{g:>14}" for g in GROUPS))
    for r in rows:
        print(f"{r['policy']:>26} {r['wall_seconds']:7.1f} {r['cpu_seconds']:7.1f} {r['completed']:5d} " +
              " ".join(f"{r['groups'][g]:14.2f}" for g in GROUPS))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
