"""``policyopt bench``: formulations × backends × sizes, phases timed, agreement checked."""
from __future__ import annotations

import argparse
import logging
import sys
import time

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
        cols = [c for c in ("policy", "jobs", "backend", "status", "error") if c in failed]
        print(failed[cols].to_string(index=False))
    if "agrees" in summary and not summary["agrees"].all():
        log.warning("backends disagree on some objectives (see summary.csv rel_diff_vs_median)")
    log.info("wrote %s", ", ".join(str(p) for p in paths))
    return 0


def _sizes(text: str) -> list[int]:
    from .suite import ALL_SIZES

    if text == "all":
        return list(ALL_SIZES)
    return [int(v) for v in text.replace(",", " ").split()]


def _cmd_suite(args: argparse.Namespace) -> int:
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
    )

    from .suite import (
        DEFAULT_SIZES,
        FAMILIES,
        SuiteConfig,
        run_suite,
        summarize_suite,
        write_suite,
    )

    sizes = [n for chunk in args.sizes for n in _sizes(chunk)] if args.sizes else list(DEFAULT_SIZES)
    cfg = SuiteConfig(families=args.policies or tuple(FAMILIES), sizes=sizes, backends=args.backends or (),
                      time_limit=args.time_limit, shift=args.shift)
    with Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                  transient=False) as bar:
        task = bar.add_task("suite", total=None)
        t0 = time.perf_counter()

        def progress(msg: str, done: int, total: int) -> None:
            bar.update(task, description=msg, completed=done, total=total)
            if not bar.console.is_terminal:  # a log file: one line per step
                print(f"[{done}/{total} {time.perf_counter() - t0:7.1f}s] {msg}", file=sys.stderr, flush=True)

        instances, runs = run_suite(cfg, progress)
    summary = summarize_suite(runs, cfg.time_limit, cfg.shift)
    paths = write_suite(instances, runs, summary, cfg, args.output)
    print(summary.to_string(index=False, float_format=lambda v: f"{v:.4g}") if not summary.empty else "no runs")
    if not runs.empty and ((runs["status"] == "optimal") & ~runs["solved"]).any():
        print("\nWARNING: some optimal answers disagree with the reference objective (runs.csv rel_diff)")
    print("wrote " + ", ".join(str(p) for p in paths))
    return 0


def add_subparser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("bench", help="benchmark formulations against solver backends",
                       description="Formulations x backends x sizes on Gavel-style problems; phases timed "
                                   "separately, objectives cross-checked, peak memory, CSV and plots.")
    p.add_argument("--policies", nargs="+", default=["max_min_fairness"], metavar="NAME",
                   help="registered policies to benchmark (default: max_min_fairness)")
    p.add_argument("--sizes", nargs="+", type=int, default=[16, 64, 256], metavar="JOBS",
                   help="problem sizes in jobs; each is a Gavel-style problem on a cluster of JOBS/4 "
                        "(at least 8) each of v100/p100/k80 (default: 16 64 256)")
    p.add_argument("--backends", nargs="+", metavar="SOLVER[:ALGORITHM]",
                   default=["highs:simplex", "highs:ipm", "cvxpy:CLARABEL", "cvxpy:HIGHS", "pulp:CBC", "pulp:HiGHS"],
                   help="solver backends, as --solver takes them plus highs:ALGORITHM (default: highs:simplex "
                        "highs:ipm cvxpy:CLARABEL cvxpy:HIGHS pulp:CBC pulp:HiGHS)")
    p.add_argument("--repeats", type=int, default=3, help="runs per (policy, size, backend); the median is "
                                                          "reported (default 3)")
    p.add_argument("--seed", type=int, default=0, help="seed of the generated problems (default 0)")
    p.add_argument("--space-sharing", action="store_true",
                   help="add the measured colocated throughputs and solve with space sharing")
    p.add_argument("--time-limit", type=float, default=None, help="seconds per solver call (default: none)")
    p.add_argument("--pulp-max", type=int, default=1024, metavar="JOBS",
                   help="largest size given to PuLP backends, whose model building is slow (default 1024)")
    p.add_argument("--output", default="bench-results", metavar="DIR",
                   help="directory for runs.csv, summary.csv and the plots (default: bench-results)")
    p.set_defaults(func=_cmd_bench)
    ps = p.add_subparsers(dest="bench_command", required=False, metavar="{suite}",
                          help="optional: 'suite' runs the standard, versioned benchmark suite instead")
    s = ps.add_parser("suite", help="the standard suite: fixed, versioned policy LPs/MILPs x every installed backend",
                      description="Generate the suite's instances (Gavel data, fixed seeds; every policy family at "
                                  "256 ... 262,144 jobs), solve each with every installed backend under a time limit, "
                                  "check objectives agree, and write per-backend shifted geometric means of time "
                                  "(shift 10 s), solved counts and Dolan-More performance profiles to DIR.")
    s.add_argument("--output", required=True, help="output directory")
    s.add_argument("--sizes", nargs="+", help="jobs per instance from 256 2048 16384 131072 262144, or 'all' "
                                              "(default 256 2048)")
    s.add_argument("--policies", nargs="+",
                   help="families (default all): las max_sum makespan ftf fifo cost_slo "
                        "budget_makespan water_filling_step hierarchical space_sharing wf_milp wf_milp_last")
    s.add_argument("--backends", nargs="+", help="backend specs (default: every installed one of highs highs:ipm "
                                                 "ortools:glop ortools:pdlp clarabel scip cuopt)")
    s.add_argument("--time-limit", type=float, default=30.0, help="seconds per solve (default 30)")
    s.add_argument("--shift", type=float, default=10.0, help="shift of the geometric mean, seconds (default 10)")
    s.set_defaults(func=_cmd_suite)
