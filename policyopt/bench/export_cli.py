"""``policyopt export`` and ``policyopt import-solution``: take a policy's model to any solver and back."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def _cmd_export(args: argparse.Namespace) -> int:
    from ..cli import _load_problem, parse_options
    from .export import export_policy

    problem = _load_problem(args)
    options = parse_options(args.option)
    if args.space_sharing:
        options["space_sharing"] = True
    source = {"example": args.example} if args.example else (
        {"input": str(Path(args.input).resolve())} if args.input and args.input != "-" else {})
    written = export_policy(args.policy, problem, args.output, fmt=args.format, options=options, pop_k=args.pop_k,
                            seed=args.seed, stage=args.stage, source=source)
    for model, side in written:
        print(f"wrote {model} and {side}", file=sys.stderr)
    return 0


def _cmd_import(args: argparse.Namespace) -> int:
    from ..cli import _load_problem
    from .export import import_solution

    problem = _load_problem(args) if (args.input or args.example) else None
    result = import_solution(args.problem, args.solution, problem)
    text = result.to_json()
    if args.output:
        Path(args.output).write_text(text)
        for r in result.extra.get("import", []):
            gap = "n/a" if r.get("rel_gap") is None else f"{r['rel_gap']:.3g}"
            print(f"imported: objective {r['objective']:.12g}, max violation {r['max_violation']:.3g}, "
                  f"relative gap to HiGHS's optimum {gap}", file=sys.stderr)
    else:
        print(text)
    return 0


def add_subparser(sub: argparse._SubParsersAction) -> None:
    e = sub.add_parser(
        "export", help="write a policy's compiled LP/MILP as MPS or LP with a column map",
        description="Write the standard form a policy solves on a problem as MPS (free format) or CPLEX LP "
                    "(HiGHS's writer; columns c0.., rows r0..) and OUTPUT.json, which maps columns to (job, "
                    "configuration) and records HiGHS's optimum. --pop-k writes one file per POP part. A policy "
                    "that solves a sequence of LPs is refused with the reason; --stage K writes its K-th LP.")
    e.add_argument("--policy", required=True, help="registered policy name (policyopt policies)")
    e.add_argument("--input", help="problem JSON file ('-' = stdin)")
    e.add_argument("--example", help="a built-in example problem: small, gavel-small")
    e.add_argument("--format", choices=["mps", "lp"], default="mps")
    e.add_argument("--output", required=True, help="model file to write (its side file: OUTPUT.json)")
    e.add_argument("--space-sharing", action="store_true", help="use the problem's colocated throughputs")
    e.add_argument("--pop-k", dest="pop_k", type=int, help="POP with K sub-problems: one file per part")
    e.add_argument("--seed", type=int, default=0, help="seed for POP's partition")
    e.add_argument("--stage", type=int, help="multi-stage policies: write the K-th model solved (0-based)")
    e.add_argument("--option", "-o", action="append", metavar="KEY=VALUE", help="policy option (repeatable)")
    e.set_defaults(func=_cmd_export)
    i = sub.add_parser(
        "import-solution", help="turn a solver's solution file for an exported model into a policyopt result",
        description="Read a solution file (lines 'c<index> <value>': HiGHS, Gurobi, SCIP, CBC; or JSON {\"x\": "
                    "[...]}) for a model written by policyopt export and print the policy's result as policyopt "
                    "solve would. POP: one --problem/--solution pair per part.")
    i.add_argument("--problem", required=True, action="append",
                   help="the exported model file or its side file (repeatable: POP parts)")
    i.add_argument("--solution", required=True, action="append", help="solution file (one per --problem)")
    i.add_argument("--input", help="the problem JSON (default: the file or example the export names)")
    i.add_argument("--example", help="the built-in example the export was made from")
    i.add_argument("--output", help="write the result JSON here (else print it)")
    i.set_defaults(func=_cmd_import)
