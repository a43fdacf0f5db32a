"""``policyopt perf-model fit|predict`` sub-commands.

    policyopt perf-model fit --samples SAMPLES.csv --output PARAMS.json [--starts 8] [--seed 0]
                             [--pool k_opt,k_sync,...] [--fix k_off=1,...] [--staged]
    policyopt perf-model predict --params PARAMS.json --configs CONFIGS.csv --output PRED.csv
                                 [--profiled RUNS.csv]

Bad input raises :class:`~policyopt.errors.InputError`; the top-level CLI prints it on one line.
``python -m policyopt.perfmodel.cli ...`` runs the same commands stand-alone.
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from policyopt.errors import InputError

from .fit import fit_all
from .pooled import fit_pooled, fit_staged, parse_assignments, parse_names
from .io import read_configs, read_samples, read_table_csv, write_predictions
from .model import compute_terms, iter_time_from_terms, param_matrix, profiled_fwd_scale
from .params import load_params, save_params
from .table import validate_table

__all__ = ["add_subparser", "cmd_fit", "cmd_predict", "main"]

log = logging.getLogger("policyopt.cli")


def cmd_fit(args: argparse.Namespace) -> int:
    """Fit one parameter set per model of SAMPLES.csv and write PARAMS.json."""
    samples = read_samples(args.samples)
    fixed = parse_assignments(args.fix, "fix")
    pool = parse_names(args.pool, "pool")
    held = ", ".join(f"{k}={v:g}" for k, v in fixed.items()) or "none"
    if args.staged:
        if not pool:
            raise InputError("staged", True, "needs --pool (the parameters of the pooled stage)")
        staged = fit_staged(samples, pool, fixed=fixed, n_starts=args.starts, seed=args.seed)
        save_params(args.output, staged.params, {m: staged.info(m) for m in staged.params})
        print(f"staged fit: pooled {', '.join(staged.pooled)} over "
              f"{len(staged.stage1.params)} models; fixed {held}")
        for name in staged.params:
            what = ("offload-only, held " + ", ".join(f"{k}={v:.4g}" for k, v in
                                                       staged.held[name].items())
                    if name in staged.held else "pooled stage")
            print(f"{name}: {staged.n_samples[name]} samples, RMSLE {staged.rmsle[name]:.4f} "
                  f"({what})")
        return 0
    if pool:
        pooled = fit_pooled(samples, pool, fixed=fixed, n_starts=args.starts, seed=args.seed)
        save_params(args.output, pooled.params, {m: pooled.info(m) for m in pooled.params})
        print(f"pooled fit of {len(pooled.params)} models: pooled {', '.join(pooled.pooled)}; "
              f"fixed {held}; RMSLE {pooled.total_rmsle:.4f}, {pooled.seconds:.2f} s")
        for name in pooled.params:
            print(f"{name}: {pooled.n_samples[name]} samples, RMSLE {pooled.rmsle[name]:.4f}")
        return 0
    fits = fit_all(samples, n_starts=args.starts, seed=args.seed, fixed=fixed or None)
    save_params(args.output, {m: f.params for m, f in fits.items()},
                {m: dict(f.info(), mode="per-model", fixed=fixed) for m, f in fits.items()})
    if fixed:
        print(f"fixed {held}")
    for name, fit in fits.items():
        print(f"{name}: {fit.n_samples} samples ({fit.n_offload} offload), "
              f"RMSLE {fit.rmsle:.4f}, {fit.seconds:.2f} s")
    return 0


def cmd_predict(args: argparse.Namespace) -> int:
    """Predict ``pred_iter_time`` for every row of CONFIGS.csv and write PRED.csv."""
    params = load_params(args.params)
    raw, clean = read_configs(args.configs)
    if args.profiled:
        raw, scale = profiled_fwd_scale(raw, params, read_table_csv(args.profiled, "profiled_file"))
        clean = validate_table(raw, "configs")
        for name, eta in scale.items():
            n = int(((clean["model"] == name) & (clean["tp"] * clean["pp"] > 1)).sum())
            print(f"{name}: fwd_scale {eta:.4g} from its profiled runs, on {n} model-parallel rows")
    pred = iter_time_from_terms(compute_terms(clean), param_matrix(clean["model"], params))
    write_predictions(raw, pred, args.output)
    log.info("wrote %d predictions to %s", len(raw), args.output)
    return 0


def add_subparser(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    """Register ``perf-model`` with ``fit`` and ``predict`` on an argparse sub-parser group."""
    parser = subparsers.add_parser(
        "perf-model", help="fit / apply the execution-plan performance model",
        description="Execution-plan performance model (docs/perf-model.md).")
    sub = parser.add_subparsers(dest="perf_model_command", required=True)
    fit = sub.add_parser("fit", help="fit the seven parameters per model from SAMPLES.csv")
    fit.add_argument("--samples", required=True, help="SAMPLES.csv (configuration + iter_time)")
    fit.add_argument("--output", required=True, help="PARAMS.json to write")
    fit.add_argument("--starts", type=int, default=8, help="least-squares starts (default 8)")
    fit.add_argument("--seed", type=int, default=0, help="seed of the random starts")
    fit.add_argument("--pool", default=None, metavar="NAMES",
                     help="comma-separated parameters shared by all models of the file "
                          "(pooled fit; e.g. k_opt,k_opt_off,k_off,k_swap,k_sync)")
    fit.add_argument("--fix", default=None, metavar="NAME=VALUE,...",
                     help="parameters held at given values instead of fitted (all models)")
    fit.add_argument("--staged", action="store_true",
                     help="with --pool: pool the models that have a sample without offload, "
                          "then fit each offload-only model with the pooled GPU-side values "
                          "and k_bwd=2, k_const=0 held")
    fit.set_defaults(func=cmd_fit)
    pred = sub.add_parser("predict", help="predict iteration times for CONFIGS.csv")
    pred.add_argument("--params", required=True, help="PARAMS.json from `fit`")
    pred.add_argument("--configs", required=True, help="CONFIGS.csv")
    pred.add_argument("--output", required=True, help="PRED.csv to write")
    pred.add_argument("--profiled", default=None, metavar="RUNS.csv",
                      help="profiled model-parallel runs (SAMPLES columns): per model, the "
                           "fwd_scale that matches them is set on its rows with tp*pp > 1 "
                           "and a blank fwd_scale, and written to PRED.csv")
    pred.set_defaults(func=cmd_predict)


def main(argv: Sequence[str] | None = None) -> int:
    """Stand-alone entry point (same error contract as ``policyopt``)."""
    from policyopt.cli import run_standalone

    return run_standalone(add_subparser, argv, prog="python -m policyopt.perfmodel.cli")


if __name__ == "__main__":
    sys.exit(main())
