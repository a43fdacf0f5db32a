"""Cluster-scheduling policies for deep-learning training, written as optimization problems and solved fast.

The ``policyopt`` command. Sub-commands are contributed by modules listed in :data:`SUBCOMMAND_MODULES`; each exposes
``add_subparser(subparsers)`` and sets ``func`` (``args -> exit code``). Errors a user can cause
(:class:`~policyopt.errors.PolicyOptError`) print one line and exit with code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import re
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from .errors import InputError, PolicyOptError

__all__ = ["SUBCOMMANDS", "SUBCOMMAND_MODULES", "build_parser", "dispatch", "main", "run_standalone"]

#: sub-command → (the module whose ``add_subparser`` adds it, its one-line help), in ``--help``
#: order. ``policyopt --help`` is built from this table alone; a test keeps it equal to the modules.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "solve": ("policyopt.cli", "solve one allocation problem with a policy"),
    "policies": ("policyopt.cli", "list registered policies"),
    "solvers": ("policyopt.cli", "list solver backends (preference order) and their capabilities"),
    "simulate": ("policyopt.sim.cli", "trace-driven simulation of a policy on a GPU cluster"),
    "track-allocation": ("policyopt.mechanism.cli", "realized vs allocated time fractions over rounds"),
    "bench": ("policyopt.bench.cli", "benchmark formulations against solver backends"),
    "export": ("policyopt.bench.export_cli", "write a policy's compiled LP/MILP as MPS or LP with a column map"),
    "import-solution": ("policyopt.bench.export_cli",
                        "turn a solver's solution file for an exported model into a policyopt result"),
    "perf-model": ("policyopt.perfmodel.cli", "fit / apply the execution-plan performance model"),
    "estimate": ("policyopt.estimation.cli", "fill missing colocated throughputs from estimates"),
    "serve": ("policyopt.service.cli", "run the HTTP policy service (FastAPI + uvicorn)"),
    "state": ("policyopt.state_cli", "check, back up (online) or repair an SQLite state file"),
    "profile": ("policyopt.jobs.cli", "measure steps/s of the job zoo alone and in pairs on every worker type"),
    "run": ("policyopt.executor.cli", "run real PyTorch training jobs under a policy, round by round"),
    "slurm": ("policyopt.slurm.cli", "drive a Slurm cluster's GPU jobs round by round with a policy"),
}
#: modules that add sub-commands, in the order they appear in ``--help``
SUBCOMMAND_MODULES: list[str] = list(dict.fromkeys(mod for mod, _ in SUBCOMMANDS.values()))

#: exit status when stdout's reader goes away (``policyopt policies | head -1``): 128 + SIGPIPE
EXIT_BROKEN_PIPE = 141


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
        from .pop import pop

        policy = pop(policy, k=args.pop_k, seed=args.seed)
    result = policy.solve(problem)
    from .cli_result import exit_status, print_summary, report_notes

    out = result.to_dict()
    text = result.to_json()
    if args.output:
        Path(args.output).write_text(text)
        if logging.getLogger("policyopt.cli").isEnabledFor(logging.INFO):
            print_summary(result)
    else:
        print(text)
    report_notes(out)
    return exit_status(out["status"], args.allow_nonoptimal)


def _cmd_policies(args: argparse.Namespace) -> int:
    from .policy import list_policies

    pols = list_policies()
    if args.json:
        print(json.dumps(pols, indent=2, default=str))
        return 0
    from .cli_result import wrap_rows

    print(wrap_rows([(p["name"], str(p["doc"] or "")) for p in pols]))
    return 0


def _cmd_solvers(args: argparse.Namespace) -> int:
    from .cli_result import wrap_rows
    from .solver_api import _REGISTRY, registered_solvers

    rows = []
    for name in registered_solvers():
        cls = _REGISTRY[name]
        flags = str(cls.features).replace("Feature.", "").replace("|", ", ")
        state = "available" if cls.is_available() else "not installed"
        rows.append((name, f"{state}; {flags}. {cls.doc}"))
    print(wrap_rows(rows))
    return 0


def add_subparser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("solve", help="solve one allocation problem with a policy",
                       description="Solve an interchange-format problem (docs/schema.md) with a registered policy.")
    p.add_argument("--policy", default="max_min_fairness",
                   help="registered policy name (policyopt policies; default: max_min_fairness)")
    p.add_argument("--input", help="problem JSON file ('-' = stdin)")
    p.add_argument("--example", help="a built-in example problem: small, gavel-small")
    p.add_argument("--solver", help="highs (default), cvxpy[:SOLVER], pulp[:PULP_CBC_CMD|HiGHS]")
    p.add_argument("--algorithm", choices=["auto", "simplex", "ipm", "pdlp"], help="LP algorithm (HiGHS)")
    p.add_argument("--time-limit", dest="time_limit", type=float, help="seconds per solver call")
    p.add_argument("--space-sharing", action="store_true", help="use the problem's colocated throughputs")
    p.add_argument("--pop-k", dest="pop_k", type=int, help="apply POP with K sub-problems")
    p.add_argument("--seed", type=int, default=0, help="seed for POP's partition")
    p.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="policy option (repeatable)")
    p.add_argument("--output", help="write the result JSON here and print a summary table on stderr "
                                    "(default: the JSON alone on stdout)")
    p.add_argument("--allow-nonoptimal", action="store_true",
                   help="exit 0 for a result that is not optimal (time limit, infeasible, ...); by default such "
                        "results are still written but the exit status says what happened (3-7, docs/cli.md)")
    p.set_defaults(func=_cmd_solve)
    q = sub.add_parser("policies", help="list registered policies",
                       description="List every registered policy (built-in and from --plugin modules) with "
                                   "its one-line description.")
    q.add_argument("--json", action="store_true",
                   help="print a JSON list of {name, doc, class, options} instead of the table")
    q.set_defaults(func=_cmd_policies)
    s = sub.add_parser("solvers", help="list solver backends (preference order) and their capabilities",
                       description="List the solver backends in preference order: whether the library is "
                                   "installed, what it supports (LP, MILP, duals, warm start, time limit) and "
                                   "how to name it in --solver.")
    s.set_defaults(func=_cmd_solvers)


def _stub(args: argparse.Namespace) -> int:
    """The ``func`` of a command whose module is not part of this installation."""
    raise InputError("command", args.command, "is not available in this installation of policyopt")


def _parser(commands: Iterable[str]) -> argparse.ArgumentParser:
    """The parser with the real sub-parsers of ``commands`` (their modules imported) and a
    one-line placeholder for every other command (nothing imported), in :data:`SUBCOMMANDS` order."""
    from . import __version__

    parser = argparse.ArgumentParser(prog="policyopt", description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--version", action="version", version=f"policyopt {__version__}")
    _add_verbosity(parser, 0)
    parser.add_argument("--plugin", action="append", default=[], metavar="MODULE_OR_FILE",
                        help="import a module (or a .py file) that registers policies (repeatable; also "
                             "$POLICYOPT_PLUGINS, comma-separated)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = {SUBCOMMANDS[c][0] for c in commands if c in SUBCOMMANDS}
    loaded: set[str] = set()
    for name, (mod_name, help_text) in SUBCOMMANDS.items():
        if mod_name in wanted and mod_name not in loaded:
            loaded.add(mod_name)
            try:
                mod = importlib.import_module(mod_name)
            except ModuleNotFoundError as exc:  # an optional part that is not built/installed
                if not (exc.name and (exc.name == mod_name or mod_name.startswith(exc.name + "."))):
                    raise
            else:
                mod.add_subparser(sub)
                for real in sub.choices.values():  # `policyopt solve ... -q` works too
                    _add_verbosity(real, argparse.SUPPRESS)
        if name not in sub.choices:
            sub.add_parser(name, help=help_text, add_help=False).set_defaults(func=_stub)
    _plain_text(parser)
    return parser


_BACKTICKS = re.compile(r"`+([^`]*)`+")


def _plain_text(parser: argparse.ArgumentParser) -> None:
    """Drop reStructuredText/Markdown backticks from every description and help text (module
    docstrings double as descriptions; a terminal shows the backticks literally)."""
    if parser.description:
        parser.description = _BACKTICKS.sub(r"\1", parser.description)
    for action in parser._actions:  # noqa: SLF001 - argparse offers no public accessor
        if isinstance(action.help, str):
            action.help = _BACKTICKS.sub(r"\1", action.help)
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            for choice in action._choices_actions:  # noqa: SLF001
                if isinstance(choice.help, str):
                    choice.help = _BACKTICKS.sub(r"\1", choice.help)
            for sub in dict.fromkeys(action.choices.values()):
                _plain_text(sub)


def _add_verbosity(parser: argparse.ArgumentParser, default: Any) -> None:
    """``-v/--verbose`` and ``-q/--quiet`` (counted), skipping an option string the parser already
    uses (``run --quiet`` is the executor's own); sub-parsers pass ``SUPPRESS`` so that they do not
    reset what was given before the command."""
    taken = set(parser._option_string_actions)
    for flags, dest, text in ((("-v", "--verbose"), "log_more", "more messages on stderr (debug)"),
                              (("-q", "--quiet"), "log_less",
                               "fewer messages on stderr (-q: warnings and errors, -qq: errors only)")):
        free = [f for f in flags if f not in taken]
        if free:
            parser.add_argument(*free, action="count", default=default, dest=dest, help=text)


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``policyopt`` parser: every sub-command's module imported (``command=None``, for the
    command reference), or only the one that defines ``command``."""
    return _parser(SUBCOMMANDS if command is None else [command])


def _configure_logging(verbosity: int) -> None:
    """Messages of the ``policyopt`` loggers go to stderr: INFO by default, DEBUG with ``-v``,
    WARNING with ``-q``, ERROR with ``-qq``."""
    level = {1: logging.DEBUG, 0: logging.INFO, -1: logging.WARNING}.get(max(-2, min(1, verbosity)), logging.ERROR)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger("policyopt")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


class _Formatter(logging.Formatter):
    """``message`` for INFO and DEBUG, ``policyopt: warning: message`` above."""

    def format(self, record: logging.LogRecord) -> str:
        text = record.getMessage()
        if record.levelno >= logging.WARNING:
            return f"policyopt: {record.levelname.lower()}: {text}"
        return text


def dispatch(args: argparse.Namespace) -> int:
    """Run a parsed command with the CLI's error contract: a user error prints one line and
    returns 2, never a traceback."""
    try:
        if getattr(args, "plugin", None):
            from .policy import load_plugins

            plugins = [str(Path(p).resolve()) if p.endswith(".py") else p for p in args.plugin]
            load_plugins(plugins)
            # child processes (POP workers, benchmark cases, the service) load them too
            os.environ["POLICYOPT_PLUGINS"] = ",".join(
                [p for p in os.environ.get("POLICYOPT_PLUGINS", "").split(",") if p] + plugins)
        return int(args.func(args) or 0)
    except BrokenPipeError:
        raise
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
    args = parser.parse_args(argv)
    _configure_logging(0)
    return dispatch(args)


def main(argv: Sequence[str] | None = None) -> int:
    """``policyopt [-q|-v] [--plugin M] COMMAND ...``: only the chosen command's module is imported
    (``policyopt --help`` stays as fast as ``import policyopt``)."""
    from_program = argv is None
    argv = list(sys.argv[1:] if argv is None else argv)
    first, _ = build_parser("").parse_known_args(argv)  # exits on --help, --version, no command
    args = build_parser(first.command).parse_args(argv)
    # the command line of a program start (``serve`` may restart itself with it); None in-process
    args.program_argv = argv if from_program else None
    _configure_logging(args.log_more - args.log_less)
    try:
        code = dispatch(args)
        sys.stdout.flush()
    except BrokenPipeError:  # `policyopt ... | head`: the reader left; stop quietly
        _detach_stdout()
        return EXIT_BROKEN_PIPE
    return code


def _detach_stdout() -> None:
    """Point fd 1 at /dev/null so the interpreter's final flush does not report the broken pipe."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # stdout replaced by an object without a file descriptor
        pass
    finally:
        os.close(devnull)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
