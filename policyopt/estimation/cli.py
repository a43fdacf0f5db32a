"""``policyopt estimate`` sub-command: fill a problem's missing colocations from estimates.

    policyopt estimate --problem IN.json --output OUT.json [--reference problem|gavel]
                       [--method completed|nearest|row_mean|col_mean|bias] [--completion als|soft_impute]
                       [--margin 0.0] [--scaling none|linear|fitted] [--multi-gpu-pairs] [--seed 0]

``--reference problem`` (default) learns from the problem's own ``colocated_types`` table;
``gavel`` from Gavel's measured file (job types must be labelled ``"<model>#<scale factor>"``).
``python -m policyopt.estimation.cli ...`` runs it stand-alone.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from policyopt.errors import PolicyOptError

from .colocation import METHODS, ColocationEstimator
from .problem_fill import estimate_problem
from .scaling import ScalingModel, scaling_dataset

__all__ = ["add_subparser", "cmd_estimate", "main"]

log = logging.getLogger("policyopt.cli")


def cmd_estimate(args: argparse.Namespace) -> int:
    """Read the problem, estimate, write the problem with the added ``colocated_types`` entries."""
    from policyopt.problem import Problem

    problem = Problem.from_json(args.problem)
    opts = {"method": args.completion, "seed": args.seed}
    gavel = None
    if args.reference == "gavel" or args.scaling == "fitted":
        from policyopt.data.gavel import load_gavel

        gavel = load_gavel()
    if args.reference == "gavel":
        est = ColocationEstimator.from_gavel(gavel, **opts).fit()
    else:
        est = ColocationEstimator.from_problem(problem, **opts).fit()
    scaling = None if args.scaling == "none" else (
        ScalingModel.linear() if args.scaling == "linear" else ScalingModel.fit(scaling_dataset(gavel)))
    out = estimate_problem(problem, est, args.method, scaling=scaling, multi_gpu_pairs=args.multi_gpu_pairs,
                           margin=args.margin)
    out.to_json(args.output)
    added = len(out.colocated_types) - len(problem.colocated_types)
    log.info("added %d estimated type colocations (%d in all) to %s", added, len(out.colocated_types), args.output)
    return 0


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--problem", required=True, help="problem JSON (interchange format)")
    parser.add_argument("--output", required=True, help="where to write the completed problem JSON")
    parser.add_argument("--reference", choices=("problem", "gavel"), default="problem")
    parser.add_argument("--method", choices=METHODS, default="completed")
    parser.add_argument("--completion", choices=("als", "soft_impute"), default="als")
    parser.add_argument("--margin", type=float, default=0.0,
                        help="subtracted from predicted normalized throughputs (pessimistic estimates)")
    parser.add_argument("--scaling", choices=("none", "linear", "fitted"), default="none",
                        help="fill multi-GPU jobs' missing configurations (fitted: efficiencies from Gavel)")
    parser.add_argument("--multi-gpu-pairs", action="store_true",
                        help="also estimate pairs of multi-GPU job types (packed pairs scale linearly)")
    parser.add_argument("--seed", type=int, default=0)
    parser.set_defaults(func=cmd_estimate)


def add_subparser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``estimate`` on an argparse sub-parser group."""
    parser = subparsers.add_parser("estimate", help="fill missing colocated throughputs from estimates",
                                   description=__doc__.splitlines()[0])
    _configure(parser)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="policyopt-estimate", description=__doc__.splitlines()[0])
    _configure(parser)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except PolicyOptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
