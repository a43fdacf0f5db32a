"""``policyopt profile``: measure the job zoo's throughputs on this machine's worker types.

    policyopt profile --output DIR [--job-types resnet-bs64 lstm-bs20 ...] [--worker-types cpu1 cpu2]
                      [--seconds-per-run 3] [--repeats 3] [--pairs] [--plans dp2-ga1-gc0 ...]

Wired into the main CLI through :func:`add_subparser`; ``python -m policyopt.jobs.cli profile ...``
runs it standalone.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Any, Sequence

from policyopt.errors import InputError

__all__ = ["add_subparser", "run_profile", "main"]

log = logging.getLogger("policyopt.cli")


def add_subparser(subparsers: Any) -> None:
    """Register the ``profile`` sub-command (``func`` returns the exit status)."""
    from .profiler import DEFAULT_PLANS

    p = subparsers.add_parser(
        "profile", help="measure steps/s of the job zoo alone and in pairs on every worker type",
        description="Measure steps/s of job types alone and paired on each worker type present "
                    "(cpu1, cpu2, the CUDA model), repeat for noise, sample execution plans; write "
                    "DIR/throughputs.json, DIR/plan_samples.csv and DIR/runs.json.")
    p.add_argument("--output", required=True, help="output directory")
    p.add_argument("--job-types", nargs="+", default=None, metavar="NAME",
                   help="job types (default: one per family, the middle batch size)")
    p.add_argument("--worker-types", nargs="+", default=None, metavar="NAME",
                   help="subset of the detected worker types (default: all)")
    p.add_argument("--seconds-per-run", type=float, default=3.0, help="training seconds per measurement")
    p.add_argument("--repeats", type=int, default=3, help="fresh-process repeats per measurement (noise)")
    p.add_argument("--warmup-steps", type=int, default=3, help="steps excluded from each run's rate")
    p.add_argument("--pairs", action="store_true", help="also measure every pair sharing a worker type")
    p.add_argument("--plans", nargs="*", default=list(DEFAULT_PLANS), metavar="dpN-gaA-gcG",
                   help="execution plans to sample for plan_samples.csv (none: only the base plan)")
    p.set_defaults(func=run_profile)


def run_profile(args: argparse.Namespace) -> int:
    """Run the profiler and print a summary; raises InputError on bad arguments."""
    from .profiler import profile

    if args.repeats < 1:
        raise InputError("repeats", args.repeats, "must be >= 1")
    if args.warmup_steps < 0:
        raise InputError("warmup_steps", args.warmup_steps, "must be >= 0")
    result = profile(args.output, job_types=args.job_types, worker_types=args.worker_types,
                     seconds_per_run=args.seconds_per_run, repeats=args.repeats, pairs=args.pairs,
                     plans=args.plans, warmup_steps=args.warmup_steps,
                     log=lambda line: print(line, file=sys.stderr, flush=True))
    table = result.table
    workers = list(table["worker_types"])
    print(f"{'job type':24s}" + "".join(f"{w:>20s}" for w in workers))
    for name, entry in table["job_types"].items():
        cells = "".join(f"{entry['throughputs'][w]:12.1f} ±{entry['throughputs_std'][w]:6.1f}" for w in workers)
        print(f"{name:24s}{cells}")
    for pair in table["colocated"]:
        a, b = pair["job_types"]
        alone = [table["job_types"][j]["throughputs"][pair["worker_type"]] for j in (a, b)]
        ratio = [t / s for t, s in zip(pair["throughputs"], alone)]
        print(f"pair {a} + {b} on {pair['worker_type']}: {pair['throughputs'][0]:.1f} + "
              f"{pair['throughputs'][1]:.1f} steps/s (x{ratio[0]:.2f}, x{ratio[1]:.2f} of alone)")
    log.info("wrote %s", ", ".join(result.paths.values()))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (same error contract as ``policyopt``)."""
    from policyopt.cli import run_standalone

    return run_standalone(add_subparser, argv, prog="python -m policyopt.jobs.cli")


if __name__ == "__main__":
    sys.exit(main())
