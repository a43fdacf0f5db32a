"""``policyopt run``: run real training jobs under a policy, round by round, to completion.

    policyopt run (--jobs JOBS.json | --example small|multi) --cluster cpu1=1,cpu2=1 --policy NAME
                  --round-seconds S --state STATE.sqlite --output DIR
                  [--throughputs TABLE.json | --profile [alone|busy|schedule]] [--recompute-interval S]
                  [--max-restarts K] [--checkpoint-interval S] [--renewal-wait S] [--backend local|ray]
                  [--ray-address A] [--launcher fork|spawn] [--pin auto|on|off] [--policy-option KEY=VALUE ...]
                  [--space-sharing] [--online-throughputs] [--time-limit S] [--no-fidelity] [--no-live]

Writes ``DIR/report.json`` (per job: ``steps_required``, ``steps_done``, ``jct``,
``initial_loss``, ``final_loss``, ``restarts``, …; see :mod:`policyopt.executor.report`) and keeps
checkpoints, progress files and worker logs under ``DIR/run`` (or ``--run-dir``). Rerunning the
same command with the same ``--state`` after the process was killed resumes the run.

Exit status: 0 every job completed; 1 some job failed (the others completed); 2 bad input;
3 stopped (SIGINT/SIGTERM or ``--time-limit``) — rerun to resume.
``python -m policyopt.executor.cli run ...`` runs it without the main CLI.
"""
from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any, Sequence

from policyopt.errors import InputError

__all__ = ["add_subparser", "run_command", "resolve_throughputs", "main"]

log = logging.getLogger("policyopt.cli")


def add_subparser(subparsers: Any) -> None:
    """Register the ``run`` sub-command (``func`` returns the exit status)."""
    p = subparsers.add_parser(
        "run", help="run real PyTorch training jobs under a policy, round by round",
        description="Run real training jobs (the job zoo) on this machine's worker types under a policy and "
                    "the round mechanism until every job finishes; write DIR/report.json. Rerun with the "
                    "same --state to resume after a crash.")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--jobs", help="JOBS.json: [{id, job_type, steps, arrival?, seed?, weight?}]")
    src.add_argument("--example", choices=["small", "multi"],
                     help="built-in example: 'small' = four real CPU jobs; 'multi' = two 2-worker (data-parallel) "
                          "and two 1-worker jobs (for cpu1=2,cpu2=2)")
    p.add_argument("--cluster", required=True, help="worker types and counts, e.g. cpu1=1,cpu2=1 (or h100=1)")
    p.add_argument("--policy", required=True, help="a policy name (policyopt policies)")
    p.add_argument("--round-seconds", type=float, required=True, help="round length in seconds")
    p.add_argument("--state", required=True, help="SQLite state file (created, or resumed when it exists)")
    p.add_argument("--output", required=True, help="output directory (report.json)")
    p.add_argument("--run-dir", default=None, help="checkpoints, progress and logs (default: OUTPUT/run)")
    tp = p.add_mutually_exclusive_group()
    tp.add_argument("--throughputs", default=None, help="profiler throughputs.json for the policy")
    tp.add_argument("--profile", nargs="?", const="alone", choices=["alone", "busy", "schedule"], default=None,
                    help="measure the throughputs at startup, cached in the state: 'alone' (default; policyopt "
                         "profile, one job at a time), 'busy' (on the run's slots, every slot training) or "
                         "'schedule' (busy, then each round the simulator predicts, as predicted)")
    p.add_argument("--profile-seconds", type=float, default=None,
                   help="seconds per profiling run (--profile; default 2, one round with busy|schedule)")
    p.add_argument("--recompute-interval", type=float, default=None,
                   help="minimum seconds between recomputes (default: one round)")
    p.add_argument("--max-restarts", type=int, default=3,
                   help="a job whose process crashes more than this many times in a row fails")
    p.add_argument("--checkpoint-interval", type=float, default=None,
                   help="periodic checkpoints every S seconds (default: half a round)")
    p.add_argument("--renewal-wait", type=float, default=30.0,
                   help="seconds a worker waits at lease end for the next round's decision")
    p.add_argument("--backend", choices=["local", "ray"], default="local")
    p.add_argument("--ray-address", default=None, help="Ray cluster address (default: start Ray locally)")
    p.add_argument("--ray-resource-prefix", default=None,
                   help="Ray custom resource prefix: a slot of type T needs 1 of PREFIX+T")
    p.add_argument("--launcher", choices=["fork", "spawn"], default="fork",
                   help="fork: from a server that imported torch once (fast); spawn: a fresh interpreter")
    p.add_argument("--pin", choices=["auto", "on", "off"], default="auto", help="pin CPU slots to cores")
    p.add_argument("--policy-option", "-o", action="append", metavar="KEY=VALUE", help="policy option (repeatable)")
    p.add_argument("--space-sharing", action="store_true", help="let the policy pair jobs on a worker")
    p.add_argument("--online-throughputs", action="store_true",
                   help="recompute with the throughputs measured so far instead of the table's")
    p.add_argument("--time-limit", type=float, default=None, help="stop (checkpointed) after S executor seconds")
    p.add_argument("--no-fidelity", action="store_true", help="skip the simulator comparison")
    p.add_argument("--no-live", action="store_true", help="one line per round instead of the live table")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=run_command)


def resolve_throughputs(args: argparse.Namespace, jobs: Sequence[Any], cluster: dict[str, int],
                        run_dir: Path, log: Any, backend: Any = None, slots: Any = None,
                        config: Any = None) -> tuple[dict[str, Any], str]:
    """The throughput table for a new run and where it came from (see ``docs/executor.md``);
    ``--profile busy|schedule`` measures through ``backend`` on ``slots`` (the run's) with the
    checkpoints of ``config`` (the run's :class:`~policyopt.executor.executor.ExecutorConfig`)."""
    from .spec import check_table, example_throughputs_path, load_throughput_table

    types = [t for t, n in cluster.items() if n > 0]
    if args.throughputs:
        table = load_throughput_table(args.throughputs)
        return table, f"file {args.throughputs}"
    if args.profile in ("busy", "schedule"):
        from .busyprofile import predicted_schedule, profile_busy

        pairs = sorted({(j.job_type, j.scale_factor) for j in jobs})
        seconds = args.profile_seconds or args.round_seconds
        log(f"profiling {', '.join(f'{n}#{k}' for n, k in pairs)} on {args.cluster} with every slot busy"
            + (", then the predicted rounds" if args.profile == "schedule" else "") + f" ({seconds} s per run)")
        schedule = None
        if args.profile == "schedule":
            def schedule(table: dict[str, Any]) -> Any:
                return predicted_schedule(jobs, config, table, cluster)
        busy = profile_busy(cluster, pairs, run_dir / "profile", seconds_per_run=seconds, repeats=2, pin=args.pin,
                            checkpoint_interval=config.checkpoint_every if config is not None else None,
                            backend=backend, slots=slots, log=log, schedule=schedule)
        how = "every slot busy" + (", then the predicted rounds" if args.profile == "schedule" else "")
        return busy, f"profiled at startup, {how} ({run_dir / 'profile' / 'throughputs.json'})"
    if args.profile:
        from policyopt.jobs.profiler import profile

        job_types = sorted({j.job_type for j in jobs})
        log(f"profiling {', '.join(job_types)} on {', '.join(types)} ({args.profile_seconds or 2.0} s per run)")
        result = profile(run_dir / "profile", job_types=job_types, worker_types=types,
                         seconds_per_run=args.profile_seconds or 2.0, repeats=2, pairs=bool(args.space_sharing),
                         plans=[f"dp{k}-ga1-gc0" for k in sorted({j.scale_factor for j in jobs} - {1})],
                         log=log)
        return result.table, f"profiled at startup ({run_dir / 'profile' / 'throughputs.json'})"
    name = getattr(args, "example", None) or ("multi" if any(j.scale_factor > 1 for j in jobs) else "small")
    shipped = example_throughputs_path(name)
    table = load_throughput_table(shipped)
    try:
        check_table(table, jobs, {t: n for t, n in cluster.items() if n > 0})
    except InputError as exc:
        if exc.field.startswith("jobs"):  # no table helps a job the cluster cannot hold
            raise
        raise InputError("throughputs", None, f"the shipped table does not cover this run ({exc}); "
                         "give --throughputs TABLE.json or --profile") from None
    return table, f"shipped table {shipped.name} (measured on the 2-core development machine)"


def run_command(args: argparse.Namespace) -> int:
    from policyopt.cli import parse_options

    from .executor import ExecutorConfig, run_executor
    from .report import LineDisplay, LiveDisplay, print_summary, write_report
    from .spec import example_jobs, load_jobs
    from .state import ExecutorState

    def say(msg: str) -> None:
        if not args.quiet:
            print(msg, file=sys.stderr, flush=True)

    jobs = example_jobs(args.example) if args.example else load_jobs(args.jobs)
    config = ExecutorConfig(
        cluster=args.cluster, policy=args.policy, policy_options=parse_options(args.policy_option),
        round_seconds=args.round_seconds, recompute_interval=args.recompute_interval,
        max_restarts=args.max_restarts, checkpoint_interval=args.checkpoint_interval,
        renewal_wait=args.renewal_wait, pin=args.pin, launcher=args.launcher,
        online_throughputs=args.online_throughputs, space_sharing=args.space_sharing, time_limit=args.time_limit)
    output = Path(args.output)
    run_dir = Path(args.run_dir) if args.run_dir else output / "run"
    state = ExecutorState(args.state)
    table = None
    source = "given"
    busy = state.is_new() and args.profile in ("busy", "schedule")  # through the run's own backend, below
    if state.is_new() and not busy:
        table, source = resolve_throughputs(args, jobs, config.cluster, run_dir, say)
        say(f"throughputs: {source}")
    elif not state.is_new():
        say(f"resuming the run in {args.state} (round {state.get('round', 0)}, "
            f"t = {state.get('time', 0.0):.1f} s)")
    backend: Any = None
    slots = None
    if args.backend == "ray":
        import hashlib

        from .ray_backend import RayBackend
        from .cluster import build_slots, worker_type_kind

        # GPUs live on the Ray nodes, not necessarily here: number them per type, each actor gets one
        cuda = {t: list(range(n)) for t, n in config.cluster.items() if worker_type_kind(t)[0] == "cuda"}
        slots = build_slots(config.cluster, config.pin, cuda_types=cuda)
        run_id = hashlib.sha1(str(Path(args.state).resolve()).encode()).hexdigest()[:10]
        saved = state.get("config")
        base_dir = Path(saved["run_dir"]) if saved else run_dir.resolve()
        backend = RayBackend(slots, base_dir / "backend", address=args.ray_address, launcher=args.launcher,
                             resource_prefix=args.ray_resource_prefix, run_id=run_id,
                             warm_job_types=[j.job_type for j in jobs])
    if busy:
        if backend is None:  # the run's own fork server, kept for the run
            from .backends import LocalProcessBackend

            from .cluster import build_slots

            backend = LocalProcessBackend(run_dir / "backend", config.launcher,
                                          warm_job_types=[j.job_type for j in jobs],
                                          warm_threads=[s.threads for s in build_slots(config.cluster, config.pin)])
        try:
            table, source = resolve_throughputs(args, jobs, config.cluster, run_dir, say, backend=backend,
                                                slots=slots, config=config)
        except BaseException:
            backend.close()
            raise
        say(f"throughputs: {source}")
    display: Any = None
    if not args.quiet:
        display = LiveDisplay() if (not args.no_live and sys.stderr.isatty()) else LineDisplay()
    report = run_executor(state, jobs, config, table, run_dir, backend=backend, table_source=source, slots=slots,
                          display=display, log=say if args.no_live or not sys.stderr.isatty() else (lambda _m: None))
    if report["status"] == "finished" and not args.no_fidelity:
        from .fidelity import fidelity_section

        report["fidelity"] = fidelity_section(report, state.get("throughputs")["table"])
    path = write_report(report, output)
    if not args.quiet:
        print_summary(report)
        log.info("wrote %s", path)
    if report["status"] != "finished":
        return 3
    return 1 if report["summary"]["failed"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (same error contract as ``policyopt``)."""
    from policyopt.cli import run_standalone

    return run_standalone(add_subparser, argv, prog="python -m policyopt.executor.cli")


if __name__ == "__main__":
    sys.exit(main())
