"""CLI sub-command ``policyopt slurm``: run the round-based controller beside a Slurm cluster.

    policyopt slurm --policy P --partition NAME[,NAME...] --throughputs FILE --round-seconds R
                    --state FILE [--rounds N] [--output DIR] [--dry-run]

See docs/slurm.md.
"""
from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from policyopt.errors import InputError

__all__ = ["add_subparser", "run_slurm"]


def parse_restart_seconds(value: str | float) -> float | None:
    """``--restart-seconds``: a number of seconds >= 0, or ``auto`` (``None``: learned)."""
    if str(value).strip().lower() == "auto":
        return None
    return _nonnegative("--restart-seconds", value, "seconds", "auto")


def parse_deviation_bound(value: str | float) -> float:
    """``--deviation-bound``: rounds >= 0, or ``inf`` (pins are never cut short)."""
    return _nonnegative("--deviation-bound", value, "rounds", "inf")


def _nonnegative(option: str, value: str | float, unit: str, word: str) -> float:
    """``value`` as a number >= 0 (NaN refused), or an error naming ``option`` and the value."""
    try:
        number = float(value)
    except ValueError:
        raise InputError(option, value, f"must be a number of {unit} >= 0 or '{word}'") from None
    if not number >= 0:
        raise InputError(option, number, "must be >= 0")
    return number


def run_slurm(args: argparse.Namespace) -> int:
    """Build the controller from ``args`` and run it."""
    from policyopt.cli import parse_options
    from policyopt.policy import get_policy
    from policyopt.slurm.controller import Controller, ControllerConfig
    from policyopt.slurm.mapping import parse_weights
    from policyopt.slurm.slurmcmd import Slurm
    from policyopt.slurm.state import StateStore
    from policyopt.slurm.throughputs import load_startup_seconds, load_throughputs

    partitions = [p.strip() for p in args.partition.split(",") if p.strip()]
    if not partitions:
        raise InputError("--partition", args.partition, "name at least one partition")
    if not args.round_seconds > 0:
        raise InputError("--round-seconds", args.round_seconds, "must be > 0")
    if args.rounds is not None and args.rounds < 1:
        raise InputError("--rounds", args.rounds, "must be >= 1")
    restart = parse_restart_seconds(args.restart_seconds)
    bound = parse_deviation_bound(args.deviation_bound)
    policy = get_policy(args.policy, **parse_options(args.option))
    if args.pop_k is not None:
        from policyopt.pop import pop

        policy = pop(policy, k=args.pop_k, seed=args.seed)
    config = ControllerConfig(policy=policy, policy_name=args.policy, partitions=partitions,
                              throughputs=load_throughputs(args.throughputs), round_seconds=float(args.round_seconds),
                              weights=parse_weights(args.weight), work_conserving=not args.no_work_conserving,
                              restart_seconds=restart, startup_prior=load_startup_seconds(args.throughputs),
                              early_rounds=not args.no_early_rounds, deviation_bound=bound)
    store = StateStore(args.state, in_memory=args.dry_run)
    try:
        controller = Controller(config, Slurm(dry_run=args.dry_run), store)
        controller.run(args.rounds if not args.dry_run else 1,
                       output=None if args.output is None or args.dry_run else Path(args.output),
                       exit_when_idle=args.exit_when_idle)
    finally:
        store.close()
    return 0


def add_subparser(subparsers: Any) -> None:
    """Register ``policyopt slurm``."""
    p = subparsers.add_parser(
        "slurm", help="drive a Slurm cluster's GPU jobs round by round with a policy",
        description="Round-based controller beside a running Slurm (docs/slurm.md): each round it reads the "
                    "opted-in jobs of its partitions, solves the policy, runs the round mechanism and enacts the "
                    "round with scontrol (GPU type as node feature, hold/release, requeue with SIGTERM first).")
    p.add_argument("--policy", required=True, help="registered policy name (policyopt policies)")
    p.add_argument("--partition", required=True, help="managed partition(s), comma-separated")
    p.add_argument("--throughputs", required=True,
                   help="throughput table: the profiler's throughputs.json or Gavel's table format")
    p.add_argument("--round-seconds", dest="round_seconds", type=float, required=True, help="round length")
    p.add_argument("--state", required=True, help="SQLite state file (a restart resumes from it)")
    p.add_argument("--rounds", type=int, default=None, help="stop after N rounds (default: run until stopped)")
    p.add_argument("--output", default=None, help="write DIR/report.json after every round")
    p.add_argument("--dry-run", dest="dry_run", action="store_true",
                   help="one round: print what would be done; change nothing in Slurm or in the state file")
    p.add_argument("--weight", action="append", metavar="qos:NAME=W|account:NAME=W",
                   help="priority weight of jobs of a QOS or account (repeatable; default 1)")
    p.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="policy option (repeatable)")
    p.add_argument("--pop-k", dest="pop_k", type=int, default=None, help="apply POP with K sub-problems")
    p.add_argument("--seed", type=int, default=0, help="seed for POP's partition")
    p.add_argument("--no-work-conserving", dest="no_work_conserving", action="store_true",
                   help="do not give idle GPUs to jobs that are ahead of their allocation")
    p.add_argument("--restart-seconds", dest="restart_seconds", default="auto", metavar="S|auto",
                   help="seconds a job loses at each start beyond what Slurm shows (its own startup: imports, "
                        "loading its checkpoint), or 'auto': learned per job type from the jobs that finished "
                        "(before that, the job type's startup_seconds in the --throughputs table if given, else one "
                        "round); "
                        "the round choice trades up to half of them, at most half a round, of each job's "
                        "deviation for fewer stops and moves, and keeps a running job where it runs until its "
                        "run has lasted twice them or while its remaining work takes at most twice them and at "
                        "most one round "
                        "(default auto; 0 follows the allocation round by round)")
    p.add_argument("--deviation-bound", dest="deviation_bound", default="0.5", metavar="ROUNDS",
                   help="rounds a job kept where it runs (or the trade for fewer stops and moves) may leave any "
                        "job's time on a GPU type from its allocation, beyond what the most accurate round "
                        "choice leaves it; past it the mechanism's choice wins (default 0.5; inf: never cut short)")
    p.add_argument("--no-early-rounds", dest="no_early_rounds", action="store_true",
                   help="run rounds only at the round boundaries (default: when a job ends while another "
                        "waits, the next round starts then, so the freed GPUs do not idle until the boundary)")
    p.add_argument("--exit-when-idle", dest="exit_when_idle", action="store_true",
                   help="stop once every managed job seen has finished")
    p.set_defaults(func=run_slurm)


if __name__ == "__main__":  # pragma: no cover
    from policyopt.cli import run_standalone

    raise SystemExit(run_standalone(add_subparser))
