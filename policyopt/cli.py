"""The ``policyopt`` command.

Sub-commands are contributed by modules listed in :data:`SUBCOMMAND_MODULES`; each exposes
``add_subparser(subparsers)`` and sets ``func`` (``args -> exit code``). Errors a user can cause
(:class:`~policyopt.errors.PolicyOptError`) print one line and exit with code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from .errors import InputError, PolicyOptError

__all__ = ["main", "build_parser", "dispatch", "run_standalone", "SUBCOMMAND_MODULES"]

#: modules that add sub-commands, in the order they appear in ``--help``
SUBCOMMAND_MODULES: list[str] = [
    "policyopt.cli",
    "policyopt.sim.cli",
    "policyopt.mechanism.cli",
    "policyopt.bench.cli",
    "policyopt.bench.export_cli",
    "policyopt.perfmodel.cli",
    "policyopt.estimation.cli",
    "policyopt.service.cli",
    "policyopt.jobs.cli",
    "policyopt.executor.cli",
]


#: top-level module → the pip extra that installs it (for one-line "missing dependency" errors)
_OPTIONAL_EXTRAS = {"torch": "torch", "sklearn": "torch", "fastapi": "service", "uvicorn": "service",
                    "httpx": "service", "ray": "ray", "cvxpy": "cvxpy", "pulp": "pulp", "mkdocs": "docs"}


def parse_options(pairs: Sequence[str] | None) -> dict[str, Any]:
    """``["k=v", ...]`` → dict; values parsed as JSON where possible (``3``, ``true``, ``"x"``)."""
    out: dict[str, Any] = {}
    for p in pairs or []:
        key, sep, val = p.partition("=")
        if not sep or not key:
            raise InputError("--option", p, "must look like KEY=VALUE")
        try:
            out[key] = json.loads(val)
        except json.JSONDecodeError:
            out[key] = val
    return out


def _load_problem(args: argparse.Namespace) -> Any:
    from .problem import Problem

    if args.input and args.example:
        raise InputError("--input/--example", [args.input, args.example], "give one of --input and --example")
    if args.example:
        from .examples import load_example

        return load_example(args.example)
    if not args.input:
        raise InputError("--input", None, "a problem file is required (or --example small)")
    if args.input == "-":
        return Problem.from_json(sys.stdin.read())
    return Problem.from_json(Path(args.input))


def _cmd_solve(args: argparse.Namespace) -> int:
    from .policy import get_policy

    problem = _load_problem(args)
    options = parse_options(args.option)
    for key in ("solver", "algorithm", "time_limit"):
        val = getattr(args, key)
        if val is not None:
            options[key] = val
    if args.space_sharing:
        options["space_sharing"] = True
    policy = get_policy(args.policy, **options)
    if args.pop_k is not None:
        from .pop import pop  # issue 4: POP combinator

        policy = pop(policy, k=args.pop_k, seed=args.seed)
    result = policy.solve(problem)
    text = result.to_json()
    if args.output:
        Path(args.output).write_text(text)
        _print_summary(result)
    else:
        print(text)
    return 0


def _print_summary(result: Any) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True)
    table = Table(title=f"{result.policy} — {result.status.value} — objective {result.objective}")
    configs = sorted({c for a in result.allocation.values() for c in a})
    table.add_column("job")
    for c in configs:
        table.add_column(c, justify="right")
    table.add_column("steps/s", justify="right")
    for job, alloc in list(result.allocation.items())[:40]:
        table.add_row(job, *[f"{alloc.get(c, 0.0):.3f}" for c in configs],
                      f"{result.effective_throughputs.get(job, 0.0):.3f}")
    console.print(table)
    if len(result.allocation) > 40:
        console.print(f"... {len(result.allocation) - 40} more jobs")
    console.print("timings (s): " + ", ".join(f"{k}={v:.4f}" for k, v in result.timings.to_dict().items()))


def _cmd_policies(args: argparse.Namespace) -> int:
    from .policy import list_policies

    pols = list_policies()
    if args.json:
        print(json.dumps(pols, indent=2, default=str))
        return 0
    for p in pols:
        print(f"{p['name']:36s} {p['doc']}")
    return 0


def _cmd_solvers(args: argparse.Namespace) -> int:
    from .solver_api import _REGISTRY, registered_solvers  # noqa: PLC2701

    for name in registered_solvers():
        cls = _REGISTRY[name]
        flags = str(cls.features).replace("Feature.", "")
        print(f"{name:8s} {'available' if cls.is_available() else 'missing  '} {flags:40s} {cls.doc}")
    return 0


def add_subparser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="solve one allocation problem with a policy",
                       description="Solve an interchange-format problem (docs/schema.md) with a registered policy.")
    p.add_argument("--policy", required=True, help="registered policy name (policyopt policies)")
    p.add_argument("--input", help="problem JSON file ('-' = stdin)")
    p.add_argument("--example", help="a built-in example problem: small, gavel-small")
    p.add_argument("--solver", help="highs (default), cvxpy[:SOLVER], pulp[:PULP_CBC_CMD|HiGHS]")
    p.add_argument("--algorithm", choices=["auto", "simplex", "ipm", "pdlp"], help="LP algorithm (HiGHS)")
    p.add_argument("--time-limit", dest="time_limit", type=float, help="seconds per solver call")
    p.add_argument("--space-sharing", action="store_true", help="use the problem's colocated throughputs")
    p.add_argument("--pop-k", dest="pop_k", type=int, help="apply POP with K sub-problems")
    p.add_argument("--seed", type=int, default=0, help="seed for POP's partition")
    p.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="policy option (repeatable)")
    p.add_argument("--output", help="write the result JSON here (else print it)")
    p.set_defaults(func=_cmd_solve)
    q = sub.add_parser("policies", help="list registered policies")
    q.add_argument("--json", action="store_true")
    q.set_defaults(func=_cmd_policies)
    s = sub.add_parser("solvers", help="list solver backends (preference order) and their capabilities")
    s.set_defaults(func=_cmd_solvers)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="policyopt", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE",
                        help="import a module that registers policies (repeatable; also $POLICYOPT_PLUGINS)")
    sub = parser.add_subparsers(dest="command", required=True)
    for mod_name in SUBCOMMAND_MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as exc:  # an optional part that is not built/installed
            if exc.name and (exc.name == mod_name or mod_name.startswith(exc.name + ".")):
                continue
            raise
        mod.add_subparser(sub)
    return parser


def dispatch(args: argparse.Namespace) -> int:
    """Run a parsed command with the CLI's error contract: a user error prints one line and
    returns 2, never a traceback."""
    try:
        if getattr(args, "plugin", None):
            import os

            from .policy import load_plugins

            load_plugins(args.plugin)
            # child processes (POP workers, benchmark cases, the service) load them too
            os.environ["POLICYOPT_PLUGINS"] = ",".join(
                [p for p in os.environ.get("POLICYOPT_PLUGINS", "").split(",") if p] + args.plugin)
        return int(args.func(args) or 0)
    except PolicyOptError as exc:
        print(f"policyopt: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        extra = _OPTIONAL_EXTRAS.get((exc.name or "").split(".")[0])
        if extra is None:
            raise
        print(f"policyopt: error: this command needs the optional dependency {exc.name!r}: "
              f"pip install 'policyopt[{extra}]'", file=sys.stderr)
        return 2
    except (OSError, json.JSONDecodeError) as exc:
        print(f"policyopt: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("policyopt: interrupted", file=sys.stderr)
        return 130


def run_standalone(add: Any, argv: Sequence[str] | None = None, prog: str = "policyopt") -> int:
    """Entry point for ``python -m policyopt.<part>.cli``: one module's sub-commands, same contract."""
    parser = argparse.ArgumentParser(prog=prog)
    add(parser.add_subparsers(dest="command", required=True))
    return dispatch(parser.parse_args(argv))


def main(argv: Sequence[str] | None = None) -> int:
    return dispatch(build_parser().parse_args(argv))


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
