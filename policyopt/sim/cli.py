"""``policyopt simulate``: run one trace-driven simulation and write metrics, per-job CSV and figures.

    policyopt simulate --policy NAME [--space-sharing] [--packing] [--migration matching|tesserae|simple|none]
        --cluster v100=36,p100=36,k80=36
        (--trace FILE | --generator gavel|shockwave --jobs N --rate JOBS_PER_HOUR [--multi-gpu] [--static])
        [--round-seconds 360] --seed S --output DIR

    policyopt simulate --generator transformers --policy NAME --reconfigure all|plans|resources|none
        --jobs N (--rate JOBS_PER_HOUR | --static) [--nodes 4] [--threshold 0.97]
        [--checkpoint-seconds S] [--guaranteed-fraction 0.3] [--quota-fraction 0.5]
        [--quota-mode reserve|cap] [--round-seconds 360] --seed S --output DIR

``--policy`` takes any registered optimization policy (realized by the round mechanism), a
round-stage priority policy (``las``, ``tiresias``, ``ftf``, or ``round:fifo`` for the FIFO
heuristic) or ``static_split:NAME``. Writes ``DIR/metrics.json``, ``DIR/jobs.csv``,
``DIR/rounds.csv``, ``DIR/recomputes.csv``, ``DIR/trace.csv`` and ``DIR/jct_cdf.png``,
``DIR/utilization.png``.

``--generator transformers`` simulates reconfigurable transformer jobs (ViT … LLaMA 30B) on
``--nodes`` nodes of 8 GPUs / 96 cores / 1.6 TB: a guaranteed tenant ``prod`` with a quota of
``--quota-fraction`` of every resource and a best-effort tenant ``research``. ``--policy`` is any
registered policy over the multi-resource space (LP policies are rounded to one configuration per
job; ``rubick_greedy``, ``synergy_like``, ``sia_like`` are the baselines); ``--reconfigure`` says what
the allocator may change. Jobs change plan and resources at round boundaries and pay their
checkpoint-restore time ``δ`` (default per model, ``20 s + 16·P bytes / 5 GB/s``); a running job may be
reconfigured only while ``(T − (N+1)·δ)/T ≥ --threshold``. The scheduler re-decides after arrivals
and completions (``--reschedule rounds``: every round). Also writes ``runs.csv`` (per round and job),
``placements.csv`` (per round, job and node) and ``resources.png``; ``metrics.json`` adds
guaranteed / best-effort JCTs, reconfiguration counts and SLA violations (docs/reconfig.md).
"""
from __future__ import annotations

import argparse
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..errors import InputError, UnknownNameError
from ..problem import Entity

__all__ = ["add_subparser", "run_simulate", "simulate_from_args", "build_trace", "config_from_args",
           "reconfig_config_from_args", "GENERATORS", "BACKENDS", "Generator", "Backend"]

log = logging.getLogger("policyopt.cli")


def _floats(text: str, field: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise InputError(field, text, "must be comma-separated numbers") from None


def _entities(text: str | None) -> dict[str, Entity] | None:
    """``a=1,b=2:fifo,c=3`` → entities with weights (and policies)."""
    if not text:
        return None
    out: dict[str, Entity] = {}
    for part in text.split(","):
        name, sep, spec = part.strip().partition("=")
        if not sep or not name:
            raise InputError("--entities", text, "must look like a=1,b=2:fifo")
        w, _, pol = spec.partition(":")
        try:
            out[name] = Entity(name, float(w), pol or "fairness")
        except ValueError:
            raise InputError(f"--entities.{name}", w, "weight must be a number") from None
    return out


def _window(args: argparse.Namespace) -> tuple[float, float]:
    window = _floats(args.window.replace(":", ","), "--window")
    if len(window) != 2:
        raise InputError("--window", args.window, "must look like 0.25:0.75")
    return window[0], window[1]


def _cli_field(exc: InputError) -> InputError:
    """The same error with its field written as the command-line option (``round_seconds`` →
    ``--round-seconds``)."""
    if exc.field.startswith("--"):
        return exc
    name = "--" + exc.field.split(".", 1)[0].replace("_", "-")
    if isinstance(exc, UnknownNameError):
        return UnknownNameError(name, exc.value, exc.known)
    return InputError(name, exc.value, exc.problem)


# ---------------------------------------------------------------------------------------- traces
def _gavel_trace(args: argparse.Namespace, table: Any) -> list[Any]:
    from .traces import gavel_trace

    slo = _floats(args.slo_factors, "--slo-factors") if args.slo_factors else None
    return gavel_trace(table, args.jobs, args.rate, seed=args.seed, multi_gpu=args.multi_gpu, static=args.static,
                       priorities=args.priorities, slo_factors=slo)


def _shockwave_trace(args: argparse.Namespace, table: Any) -> list[Any]:
    from .traces import shockwave_trace

    if args.multi_gpu:
        raise InputError("--multi-gpu", True, "applies to --generator gavel; the shockwave generator always draws "
                                              "1/2/4/8-GPU jobs (60/30/9/1 %)")
    kw = {} if args.rate is None else {"rate_per_hour": args.rate}
    return shockwave_trace(table, args.jobs, seed=args.seed, static=args.static, **kw)


def _transformers_trace(args: argparse.Namespace, table: Any) -> list[Any]:
    from ..reconfig.trace import transformers_trace

    if args.jobs < 1:
        raise InputError("--jobs", args.jobs, "must be a positive number of jobs")
    if not args.static and args.rate is None:
        raise InputError("--rate", None, "an arrival rate (jobs/hour) is required unless --static")
    if args.rate is not None and not args.rate > 0:
        raise InputError("--rate", args.rate, "must be a positive number of jobs per hour")
    if not 0.0 <= args.guaranteed_fraction <= 1.0:
        raise InputError("--guaranteed-fraction", args.guaranteed_fraction, "must be in [0, 1]")
    nodes = _nodes(args)
    return transformers_trace(args.jobs, args.rate, seed=args.seed, static=args.static,
                              guaranteed_fraction=args.guaranteed_fraction, max_gpus=nodes * 8)


@dataclass(frozen=True)
class Generator:
    """A ``--generator``: the simulation backend it feeds and how it builds a trace from the
    arguments (``table``: the Gavel throughputs, None for backends that do not use them)."""

    backend: str
    build: Callable[[argparse.Namespace, Any], list[Any]]


#: ``--generator`` name → generator (the parser's choices)
GENERATORS: dict[str, Generator] = {
    "gavel": Generator("gavel", _gavel_trace),
    "shockwave": Generator("gavel", _shockwave_trace),
    "transformers": Generator("reconfig", _transformers_trace),
}


def build_trace(args: argparse.Namespace, table: Any) -> list[Any]:
    """The trace named by ``--trace`` or generated by ``--generator`` (seeded by ``--seed``)."""
    from .traces import assign_entities, load_trace

    if args.trace and args.generator:
        raise InputError("--trace/--generator", [args.trace, args.generator], "give one of --trace and --generator")
    if args.trace:
        trace = load_trace(args.trace, table)
    elif args.generator:
        if args.jobs is None:
            raise InputError("--jobs", None, "is required with --generator")
        if args.generator not in GENERATORS:
            raise UnknownNameError("--generator", args.generator, GENERATORS)
        trace = GENERATORS[args.generator].build(args, table)
    else:
        raise InputError("--trace/--generator", None, f"give --trace FILE or --generator {'|'.join(GENERATORS)}")
    ents = _entities(getattr(args, "entities", None))
    if ents and all(j.entity is None for j in trace):
        trace = assign_entities(trace, list(ents), seed=args.seed)
    return trace


# ---------------------------------------------------------------------------------------- backends
def config_from_args(args: argparse.Namespace) -> Any:
    """A :class:`~policyopt.sim.simulator.SimConfig` from parsed arguments."""
    from ..cli import parse_options
    from .simulator import SimConfig

    window = _window(args)
    return SimConfig(
        policy=args.policy, policy_options=parse_options(args.option), space_sharing=args.space_sharing,
        packing=args.packing, migration=args.migration, placer=args.placer, renew_leases=not args.no_renew,
        keep_types={"auto": None, "on": True, "off": False}[args.keep_types], renewal_credit=args.renewal_credit,
        round_seconds=args.round_seconds, recompute_interval=args.recompute_interval,
        checkpoint_seconds=10.0 if args.checkpoint_seconds is None else args.checkpoint_seconds,
        restore_seconds=10.0 if args.restore_seconds is None else args.restore_seconds,
        gpus_per_server=args.gpus_per_server, entities=_entities(args.entities), type_order=args.type_order,
        slo_margin_seconds=args.slo_margin_seconds,
        failure_mtbf_hours=args.failure_mtbf_hours, repair_seconds=args.repair_seconds, seed=args.seed,
        window=(window[0], window[1]), until=args.until,
        max_seconds=None if args.max_hours is None else args.max_hours * 3600.0, progress=args.progress)


def _nodes(args: argparse.Namespace) -> int:
    nodes = 4 if args.nodes is None else args.nodes
    if nodes < 1:
        raise InputError("--nodes", nodes, "must be a positive number of nodes")
    return nodes


def reconfig_config_from_args(args: argparse.Namespace) -> Any:
    """A :class:`~policyopt.sim.reconfig_sim.ReconfigSimConfig` from parsed arguments (errors name
    the command-line option)."""
    from ..cli import parse_options
    from .reconfig_sim import ReconfigSimConfig

    options = parse_options(args.option)
    if "reconfigure" in options:
        raise InputError("--option", f"reconfigure={options['reconfigure']}",
                         "say what may change with --reconfigure, not as a policy option")
    try:
        return ReconfigSimConfig(
            policy=args.policy, policy_options=options, nodes=_nodes(args),
            reconfigure="all" if args.reconfigure is None else args.reconfigure, threshold=args.threshold,
            round_seconds=args.round_seconds, checkpoint_seconds=args.checkpoint_seconds,
            quota_fraction=args.quota_fraction, quota=args.quota_mode, amortize=args.amortize_checkpoints,
            reschedule=args.reschedule,
            recompute_interval=args.recompute_interval, seed=args.seed, window=_window(args), until=args.until,
            max_seconds=None if args.max_hours is None else args.max_hours * 3600.0, progress=args.progress)
    except InputError as exc:
        raise _cli_field(exc) from None


def _run_gavel(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from ..data.gavel import load_gavel
    from .simulator import Simulator

    if not args.cluster:
        raise InputError("--cluster", None, "is required: GPUs per type, e.g. v100=36,p100=36,k80=36")
    table = load_gavel(args.throughputs) if args.throughputs else load_gavel()
    config = config_from_args(args)
    trace = build_trace(args, table)
    return Simulator(args.cluster, config, table).run(trace), trace


def _run_reconfig(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    from .reconfig_sim import ReconfigSimulator

    config = reconfig_config_from_args(args)
    trace = build_trace(args, None)
    try:
        simulator = ReconfigSimulator(config)
    except InputError as exc:  # the policy name (--policy) or one of its options (--option)
        if exc.field == "policy":
            raise _cli_field(exc) from None
        raise (InputError(f"--option.{exc.field.split('.', 1)[-1]}", exc.value, exc.problem)
               if exc.field.startswith("options.") else exc) from None
    try:
        return simulator.run(trace), trace
    except InputError as exc:
        if exc.field in ("round_seconds", "checkpoint_seconds"):
            raise _cli_field(exc) from None
        raise


@dataclass(frozen=True)
class Backend:
    """How a trace is simulated; ``options`` are the destinations of the options only this backend
    reads (giving one of them to another backend is an error)."""

    run: Callable[[argparse.Namespace], tuple[Any, list[Any]]]
    options: tuple[str, ...]


#: backend name → backend; ``--trace`` files go to ``gavel``
BACKENDS: dict[str, Backend] = {
    "gavel": Backend(_run_gavel, ("cluster", "space_sharing", "packing", "migration", "placer", "no_renew",
                                  "keep_types", "renewal_credit",
                                  "gpus_per_server", "trace", "multi_gpu", "priorities", "slo_factors",
                                  "slo_margin_seconds", "entities", "throughputs", "restore_seconds", "type_order",
                                  "failure_mtbf_hours", "repair_seconds")),
    "reconfig": Backend(_run_reconfig, ("nodes", "reconfigure", "threshold", "guaranteed_fraction",
                                        "quota_fraction", "quota_mode", "amortize_checkpoints", "reschedule")),
}
_DEFAULTS: dict[str, Any] = {}  # the parser's defaults (filled by add_subparser)


def _backend(args: argparse.Namespace) -> Backend:
    """The backend of ``args`` — by the generator's registry entry — after checking that no option of
    another backend was given."""
    name = GENERATORS[args.generator].backend if args.generator in GENERATORS else "gavel"
    for other, backend in BACKENDS.items():
        if other == name:
            continue
        for dest in backend.options:
            value = getattr(args, dest, None)
            if dest in _DEFAULTS and value != _DEFAULTS[dest]:
                where = f"--generator {args.generator}" if args.generator else "--trace"
                raise InputError("--" + dest.replace("_", "-"), value,
                                 f"does not apply to {where} (it is an option of the {other!r} simulation)")
    return BACKENDS[name]


def simulate_from_args(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The simulation result and the trace of ``args`` (what ``policyopt simulate`` runs), without
    writing anything."""
    return _backend(args).run(args)


def run_simulate(args: argparse.Namespace) -> int:
    """Run the simulation described by ``args`` and write ``args.output``."""
    from .traces import save_trace

    result, trace = simulate_from_args(args)
    out = Path(args.output)
    result.write(out, figures=not args.no_figures)
    save_trace(trace, out / "trace.csv")
    m = result.metrics
    keys = ["policy", "num_jobs", "completed", "avg_jct", "p99_jct", "makespan", "migrations", "utilization"]
    keys += [k for k in ("reconfigure", "guaranteed_avg_jct", "best_effort_avg_jct", "reconfigurations",
                         "sla_violations") if k in m]
    print(json.dumps({k: m[k] for k in keys}, default=float))
    for line in human_summary(m):
        log.info("%s", line)
    log.info("wrote %s", out / "metrics.json")
    return 0


def _hours(seconds: Any) -> str:
    return "-" if seconds is None else f"{float(seconds) / 3600:.1f} h"


def human_summary(m: dict[str, Any]) -> list[str]:
    """A few sentences for a person reading the terminal: simulated hours, the steady-state
    window (which jobs it covers), JCTs in hours, utilization."""
    cluster = ",".join(f"{k}={v}" for k, v in (m.get("cluster") or {}).items())
    lines = [f"{m.get('policy')} on {cluster or 'the cluster'}: {m.get('completed')} of {m.get('num_jobs')} jobs "
             f"finished in {_hours(m.get('simulated_seconds'))} simulated ({m.get('rounds')} rounds of "
             f"{m.get('round_seconds', 0):g} s; {m.get('wall_seconds', 0.0):.1f} s of wall time)"
             + (" - STALLED: some jobs can never run" if m.get("stalled") else "")]
    w = m.get("steady_state_window") or {}
    if w:
        a, b = (100 * f for f in w.get("fractions", (0, 0)))
        lines.append(f"steady-state window: the {w.get('count')} jobs at arrival positions {w.get('first')}-"
                     f"{w.get('last')} ({a:g}-{b:g} % of arrivals; {w.get('completed')} finished): average JCT "
                     f"{_hours(m.get('avg_jct'))}, p99 {_hours(m.get('p99_jct'))}")
    everyone = m.get("jct_all") or {}
    if everyone:
        lines.append(f"all jobs: average JCT {_hours(everyone.get('mean'))}, p99 {_hours(everyone.get('p99'))}, "
                     f"makespan {_hours(m.get('makespan'))}; GPU utilization {100 * m.get('utilization', 0.0):.1f} %, "
                     f"{m.get('migrations', 0)} migrations")
    return lines


def add_subparser(subparsers: Any) -> None:
    """Register ``policyopt simulate`` (see the module docstring)."""
    p = subparsers.add_parser("simulate", help="trace-driven simulation of a policy on a GPU cluster",
                              description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--policy", required=True,
                   help="optimization policy, las|tiresias|ftf|round:fifo, or static_split:NAME")
    p.add_argument("--option", action="append", metavar="KEY=VALUE", help="policy option (repeatable)")
    p.add_argument("--space-sharing", action="store_true", help="let the policy pair jobs on the same GPUs")
    p.add_argument("--packing", action="store_true", help="Tesserae packing of pending jobs onto running ones")
    p.add_argument("--migration", default="matching", choices=["matching", "tesserae", "simple", "none"],
                   help="GPU relabeling to avoid migrations: fewest jobs moved (matching, default), Tesserae's "
                        "published rule (tesserae), same GPU else move (simple), none")
    p.add_argument("--keep-types", default="auto", choices=["auto", "on", "off"],
                   help="keep a running job on last round's worker type when the round allows it (auto: on with "
                        "--migration matching)")
    p.add_argument("--renewal-credit", type=float, default=None, metavar="SECONDS",
                   help="mechanism credit for the combination that ran last round (default with --migration matching: "
                        "half a round, at least checkpoint + restore seconds; else 0)")
    p.add_argument("--placer", default="consolidate", help="placement stage (consolidate|first_fit)")
    p.add_argument("--no-renew", action="store_true", help="placements from scratch every round (no lease renewal)")
    p.add_argument("--cluster", help="GPUs per type, e.g. v100=36,p100=36,k80=36 (required except with "
                                     "--generator transformers)")
    p.add_argument("--gpus-per-server", type=int, default=None, help="default: 4 (or gcd(count, 4))")
    src = p.add_argument_group("trace")
    src.add_argument("--trace", help="CSV or JSON trace file")
    src.add_argument("--generator", choices=list(GENERATORS),
                     help="generate the trace: gavel (Gavel's generator and throughputs), shockwave, "
                          "transformers (reconfigurable transformer jobs)")
    src.add_argument("--jobs", type=int, help="number of jobs to generate")
    src.add_argument("--rate", type=float, help="arrival rate, jobs/hour")
    src.add_argument("--multi-gpu", action="store_true", help="gavel: 1/2/4/8 GPUs at 70/10/15/5 %%")
    src.add_argument("--static", action="store_true", help="every job arrives at t=0")
    src.add_argument("--priorities", action="store_true", help="gavel: weight 5 for 20 %% of jobs")
    src.add_argument("--slo-factors", help="gavel: SLO = factor x duration, factor drawn from e.g. 1.2,2,10")
    p.add_argument("--slo-margin-seconds", type=float, default=0.0,
                   help="pose every deadline this much earlier to the policy (rounds make tight SLOs slip)")
    src.add_argument("--entities", help="entities and weights, e.g. a=1,b=2,c=3 (jobs assigned uniformly)")
    src.add_argument("--throughputs", help="Gavel-format throughput JSON (default: the Gavel tables shipped with "
                                           "policyopt, or $POLICYOPT_GAVEL_DIR)")
    p.add_argument("--round-seconds", type=float, default=360.0, help="round length in seconds (default 360)")
    p.add_argument("--recompute-interval", type=float, default=None, help="seconds (default: one round)")
    p.add_argument("--checkpoint-seconds", type=float, default=None,
                   help="checkpoint time (default 10; transformers: checkpoint-restore time δ of every job, "
                        "default per model)")
    p.add_argument("--restore-seconds", type=float, default=None, help="restore time (default 10)")
    p.add_argument("--type-order", default="fastest", choices=["fastest", "cluster"],
                   help="priority policies: try a job's fastest type first, or cluster order (agnostic)")
    p.add_argument("--failure-mtbf-hours", type=float, default=None, help="mean time between failures per GPU")
    p.add_argument("--repair-seconds", type=float, default=3600.0,
                   help="seconds a failed GPU stays down (default 3600; with --failure-mtbf-hours)")
    rc = p.add_argument_group("reconfiguration (--generator transformers)")
    rc.add_argument("--nodes", type=int, default=None, help="nodes of 8 GPUs / 96 cores / 1.6 TB (default 4)")
    rc.add_argument("--reconfigure", default=None, metavar="all|plans|resources|none",
                    help="what the allocator may change: plans and resources (all, default), plans only "
                         "(plans), resources only (resources), nothing (none)")
    rc.add_argument("--threshold", type=float, default=0.97,
                    help="reconfigure a running job only while (T - (N+1)*delta)/T >= this (default 0.97)")
    rc.add_argument("--guaranteed-fraction", type=float, default=0.3,
                    help="share of jobs in the guaranteed tenant 'prod' (default 0.3)")
    rc.add_argument("--quota-fraction", type=float, default=0.5,
                    help="the guaranteed tenant's quota, a fraction of every resource (default 0.5)")
    rc.add_argument("--quota-mode", dest="quota_mode", choices=["reserve", "cap"], default="reserve",
                    help="reserve (default): the quota bounds the guaranteed jobs while the policy decides, "
                         "then capacity the allocation leaves idle flows on to them (work conservation; "
                         "not for cost or budget policies); cap: the quota bounds them always")
    rc.add_argument("--amortize-checkpoints", action="store_true",
                    help="also charge delta/round in the policy's objective for a change of configuration")
    rc.add_argument("--reschedule", default="events", metavar="events|rounds",
                    help="decide after arrivals and completions (events, default) or every round")
    p.add_argument("--window", default="0.25:0.75", help="steady-state window as fractions of jobs, A:B")
    p.add_argument("--until", default="all", choices=["all", "window"],
                   help="stop when every job finished, or when the window's jobs finished")
    p.add_argument("--max-hours", type=float, default=None, help="stop after this much simulated time")
    p.add_argument("--seed", type=int, required=True, help="seed of the generated trace and of every random choice")
    p.add_argument("--output", required=True, help="output directory")
    p.add_argument("--no-figures", action="store_true", help="do not draw the PNG figures")
    p.add_argument("--progress", action="store_true", help="show a progress bar")
    p.set_defaults(func=run_simulate)
    _DEFAULTS.update({a.dest: a.default for a in p._actions})  # noqa: SLF001 - argparse offers no accessor
