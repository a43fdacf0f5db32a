"""``policyopt bench``: formulations × backends × sizes, phases timed, agreement checked."""
from __future__ import annotations

import argparse
import logging

log = logging.getLogger("policyopt.cli")


def _cmd_bench(args: argparse.Namespace) -> int:
    from rich.console import Console

    from .harness import BenchConfig, run_benchmark, summarize, write_results

    console = Console(stderr=True)
    cfg = BenchConfig(policies=args.policies, sizes=args.sizes, backends=args.backends, repeats=args.repeats,
                      seed=args.seed, space_sharing=args.space_sharing, time_limit=args.time_limit,
                      max_size={b: args.pulp_max for b in args.backends if b.startswith("pulp")})
    with console.status("benchmarking") as status:
        runs = run_benchmark(cfg, progress=lambda msg: status.update(msg))
    summary = summarize(runs, cfg.agree_tol)
    paths = write_results(runs, summary, args.output)
    cols = [c for c in ("policy", "jobs", "backend", "build_s", "compile_s", "solve_s", "extract_s", "total_s",
                        "total_spread_s", "peak_rss_mb", "objective", "agrees", "x_fastest") if c in summary]
    print(summary[cols].to_string(index=False, float_format=lambda v: f"{v:.4g}") if not summary.empty else "no runs")
    failed = runs[runs["status"] != "optimal"] if "status" in runs else runs
    if not failed.empty:
        print(f"\n{len(failed)} runs did not reach an optimum:")
        print(failed[[c for c in ("policy", "jobs", "backend", "status", "error") if c in failed]].to_string(index=False))
    if "agrees" in summary and not summary["agrees"].all():
        log.warning("backends disagree on some objectives (see summary.csv rel_diff_vs_median)")
    log.info("wrote %s", ", ".join(str(p) for p in paths))
    return 0


def add_subparser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark formulations against solver backends",
                       description="Formulations x backends x sizes on Gavel-style problems; phases timed "
                                   "separately, objectives cross-checked, peak memory, CSV and plots.")
    p.add_argument("--policies", nargs="+", default=["max_min_fairness"])
    p.add_argument("--sizes", nargs="+", type=int, default=[16, 64, 256])
    p.add_argument("--backends", nargs="+",
                   default=["highs:simplex", "highs:ipm", "cvxpy:CLARABEL", "cvxpy:HIGHS", "pulp:CBC", "pulp:HiGHS"])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--space-sharing", action="store_true")
    p.add_argument("--time-limit", type=float, default=None)
    p.add_argument("--pulp-max", type=int, default=1024, help="largest size given to PuLP backends (slow build)")
    p.add_argument("--output", default="bench-results")
    p.set_defaults(func=_cmd_bench)
