"""Fit the performance model to real profiled PyTorch runs and report the held-out error.

Default: re-run the fit/evaluation from the committed tables in ``benchmarks/results/``
(profiler ``plan_samples.csv`` format): two CPU sessions, pooled as repeats of the same runs
(:func:`~policyopt.perfmodel.real.pool_sessions`), and one H200 session. ``--profile`` first
re-measures on this machine's CPU (and the GPU, if present) with
:func:`policyopt.jobs.profiler.profile` and writes the table to ``--csv``.

    python benchmarks/perfmodel_real.py                       # from the committed CSVs, ~30 s
    python benchmarks/perfmodel_real.py --csv A.csv B.csv     # sessions A and B pooled
    python benchmarks/perfmodel_real.py --profile --csv /tmp/real.csv   # re-measure, ~6-8 min

Per model: the fit on all runs (training RMSLE, the four fitted parameters), the repeat noise,
and over ``--splits`` random splits (base run + ``--train − 1`` random runs to fit, the rest
held out) the mean / max relative error of the predicted iteration time, next to the baseline
``T_base / dp``. CPU models try :data:`~policyopt.perfmodel.real.CPU_COLUMN_GRID`, GPU models
:data:`~policyopt.perfmodel.real.GPU_COLUMN_GRID`; a GPU model (dp = 1 only) holds k_sync = 1.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from policyopt.perfmodel.fit import NO_OFFLOAD_FIXED, fit_all
from policyopt.perfmodel.real import (CPU_COLUMN_GRID, GPU_COLUMN_GRID, evaluate_holdout, noise_summary,
                                      read_real_samples, summarize_holdout)

RESULTS = Path(__file__).resolve().parent / "results"
#: Two profiling sessions of the CPU plan grid on an idle 16-core machine (pooled as repeats) and
#: the GA/GC grid on an H200; ``perfmodel_real_cpu.csv`` is an older one on a loaded 2-core machine.
COMMITTED = (RESULTS / "perfmodel_real_cpu_quiet1.csv", RESULTS / "perfmodel_real_cpu_quiet2.csv",
             RESULTS / "perfmodel_real_h200.csv")
JOB_TYPES = ("resnet-bs64", "transformer-bs32", "lstm-bs40")
PLANS = tuple(f"dp{d}-ga{a}-gc{g}" for d in (1, 2) for a in (1, 2, 4) for g in (0, 1))


def run_profile(csv_path: Path, seconds: float, repeats: int, job_types: Sequence[str] = JOB_TYPES,
                worker_types: Sequence[str] | None = None, plans: Sequence[str] = PLANS,
                warmup_steps: int = 2) -> None:
    """Measure ``plans`` for ``job_types`` on ``worker_types`` (default: every detected type but
    ``cpu2``) and copy ``plan_samples.csv`` to csv_path."""
    import tempfile

    from policyopt.jobs.profiler import detect_worker_types, profile

    began = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        # cpu2 (2 threads in one process) yields no plan rows: skip its alone runs.
        workers = (list(worker_types) if worker_types is not None
                   else [name for name in detect_worker_types() if name != "cpu2"])
        result = profile(tmp, job_types=list(job_types), worker_types=workers,
                         seconds_per_run=seconds, repeats=repeats, plans=list(plans),
                         warmup_steps=warmup_steps,
                         log=lambda msg: print(f"{time.perf_counter() - began:6.1f}s {msg}",
                                               flush=True))
        table = pd.read_csv(result.paths["samples"])
    csv_path.parent.mkdir(parents=True, exist_ok=True)
    table.to_csv(csv_path, index=False, float_format="%.6g")
    print(f"profiled {len(table)} runs in {time.perf_counter() - began:.0f} s -> {csv_path}")


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, optionally profile, then print the fit and hold-out tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", type=Path, nargs="+", default=list(COMMITTED),
                    help="profiler plan_samples.csv file(s); several are sessions pooled as repeats")
    ap.add_argument("--profile", action="store_true", help="re-measure into --csv first")
    ap.add_argument("--job-types", nargs="+", default=list(JOB_TYPES), help="job types to profile (--profile)")
    ap.add_argument("--worker-types", nargs="+", default=None,
                    help="worker types to profile (--profile; default: every detected one but cpu2)")
    ap.add_argument("--plans", nargs="+", default=list(PLANS), help="plans to profile (--profile)")
    ap.add_argument("--seconds-per-run", type=float, default=1.5)
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--warmup-steps", type=int, default=2, help="steps excluded from each run's rate (--profile)")
    ap.add_argument("--train", type=int, default=7, help="training runs per split (>= 4)")
    ap.add_argument("--train-gpu", type=int, default=4, help="training runs per split of a GPU model (>= 3)")
    ap.add_argument("--splits", type=int, default=20)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--no-machine-columns", action="store_true",
                    help="only the plain formula (no parallel_capacity / step_overhead choice)")
    args = ap.parse_args(argv)
    if args.profile:
        if len(args.csv) != 1:
            ap.error("--profile writes one --csv file")
        args.csv = args.csv[0]
        run_profile(args.csv, args.seconds_per_run, args.repeats, args.job_types, args.worker_types, args.plans,
                    args.warmup_steps)
    samples = read_real_samples(args.csv)
    pd.set_option("display.width", 160)
    names = [str(p) for p in (args.csv if isinstance(args.csv, list) else [args.csv])]
    print(f"{len(samples)} real runs from {', '.join(names)}")
    print("\nrepeat noise (std / mean of iteration time):")
    print(noise_summary(samples).round(3).to_string(index=False))

    on_gpu = ~samples["model"].str.endswith("@cpu")
    groups = [(label, part, grid, n_train, fixed) for label, part, grid, n_train, fixed in
              (("CPU", samples[~on_gpu], CPU_COLUMN_GRID, args.train, dict(NO_OFFLOAD_FIXED)),
               ("GPU", samples[on_gpu], GPU_COLUMN_GRID, args.train_gpu, {**NO_OFFLOAD_FIXED, "k_sync": 1.0}))
              if len(part)]
    for device, part, grid, n_train, fixed in groups:
        part = part.reset_index(drop=True)
        fits = fit_all(part, fixed=fixed)
        rows = [{"model": name, "runs": f.n_samples, "rmsle": f.rmsle,
                 **{k: v for k, v in f.params.to_dict().items() if k not in fixed}}
                for name, f in fits.items()]
        print(f"\n{device}: fit on all runs ({', '.join(sorted(fixed))} held):")
        print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
        variants = [("plain formula", None)] + ([] if args.no_machine_columns else
                                                [("machine columns chosen on the training runs", grid)])
        for label, columns in variants:
            began = time.perf_counter()
            results = evaluate_holdout(part, n_train=n_train, n_splits=args.splits, seed=args.seed,
                                       column_grid=columns, fixed={k: v for k, v in fixed.items() if k != "k_sync"})
            summary = summarize_holdout(results)
            print(f"\n{device}: held-out error, {label}, {args.splits} random splits, {n_train} training runs "
                  f"({time.perf_counter() - began:.1f} s); baseline = T_base / dp:")
            print(summary.to_string(index=False, float_format=lambda v: f"{v:.3f}"))
            if columns:
                print("columns chosen per split:", results["columns"].value_counts().to_dict())
    return 0


if __name__ == "__main__":
    sys.exit(main())
