"""Reproductions of the published policy comparisons, one command each::

    python -m policyopt.sim.experiments list
    python -m policyopt.sim.experiments NAME [--seeds 0,1,2] [--output docs/figures] [--workers 1] [--quick]
                                        [--scale small|published] [--jobs N] [--rates R1,R2,...]
                                        [--ray-address local|auto|ray://HOST:PORT] [--keep-arriving]
                                        [--variant NAME] [--replot]

Every experiment simulates the *same traces* (same seeds) under each of its arms, on a cluster
smaller than the published one (the development machine has 2 shared cores; sizes are stated per
experiment), and writes ``OUTPUT/NAME.csv`` (one row per run), ``OUTPUT/NAME.json`` (summary with
ratios, the published numbers and ``command``, the command line that re-runs it with every option
given) and figures ``OUTPUT/NAME_*.png``. Experiments whose policies are
not registered (``policyopt.list_policies()``) are skipped with a message naming them.

``--scale published`` (``las_single``, ``las_multi``, ``ftf``, ``fifo``; ``makespan``: 500 jobs at t = 0, the
largest of Gavel's static sweep; ``cost``: 450 jobs at 4.5 jobs/hour run to the end, the small trace scaled
with the cluster, as Gavel's artifact gives no cost sweep) runs the published setup instead: 36 GPUs of
each type (one server per type, so that every multi-GPU job runs consolidated, as Gavel's simulator runs
it) under Gavel's simulator's semantics (``GAVEL_SIMULATOR``: no checkpoint / restore cost, the allocation recomputed at
most once every 1,920 s), a Gavel trace of 6,000 jobs (Poisson arrivals) of which jobs 4,000–5,000 are
measured (window ``[4000, 5000)``, simulated until they have finished, arrivals continuing), 3 seeds per
rate, and the published rate sweep (Gavel's ``run_sweep_continuous.py -a 0 -b 6 -n 16`` single-GPU: 0.4,
0.8, …, 6.0 jobs/hour, also FIFO's trace; ``-a 0 -b 3 -n 11`` multi-GPU, also FTF's trace: 0.3, 0.6, …,
3.0 jobs/hour).
Files are named ``NAME_published.*``; the CSV is rewritten as each simulation finishes. ``--jobs N``
shrinks the trace (the window stays at the same fractions) and ``--rates`` picks rates, for quick looks;
each row records ``arrivals_cover_window`` (whether jobs were still arriving when the window's last job
finished, as in the published runs).

``--variant NAME`` applies an experiment's named per-arm overrides (``list`` names them):
``las_single`` / ``las_multi`` ``gavel_solve`` solve both arms' LPs as Gavel's simulator solves them
(``GAVEL_LP_SOLVE``: Clarabel, the centre of the face of optima, no fill stage), the aware arm too;
``las_single`` ``vertex`` solves the agnostic arm's LP by our default solve (a vertex) instead of the
published setup's closed-form optimum (``AGNOSTIC_PROPORTIONAL``); ``las_multi`` ``gavel_order`` is
``gavel_solve`` with both arms realized by Gavel's round ordering (``SimConfig(ordering="gavel")``); files
``NAME[_published]_VARIANT[_arriving].*``.

``--workers N`` runs the simulations in N local processes; ``--ray-address ADDR`` runs each as a Ray
task (``local``: a Ray instance started on this machine; ``auto`` or ``ray://HOST:PORT``: a running
cluster, every node with policyopt installed), so a sweep that outgrows one machine runs on many.
Either way progress is logged and the CSV rewritten as each simulation finishes, and the files are
the same as a one-process run's.

Experiments (published result in brackets):

* ``las_single`` / ``las_multi`` — heterogeneity-aware vs agnostic LAS (``max_min_fairness`` vs
  ``max_min_fairness_agnostic``) across input rates, single-GPU / multi-GPU Gavel traces
  [Gavel: up to 3.5× / 2.2× lower average JCT at high load];
* ``makespan`` — ``makespan`` vs FIFO (``fifo_agnostic``, and the aware LP ``fifo``) on a static
  trace, and ``makespan`` with space sharing [Gavel: 2.5× lower makespan];
* ``ftf`` — ``finish_time_fairness`` vs ``finish_time_fairness_agnostic`` [~3× average JCT, 2.8× FTF];
* ``fifo`` — FIFO, heterogeneity-agnostic (``fifo_agnostic``) vs aware (``fifo``) and aware with space
  sharing, single-GPU jobs [Gavel's artifact figure: 3.8× / 4.6× lower average JCT at 4.8 jobs/hour];
* ``cost`` — ``min_cost`` and ``min_cost_slo`` vs ``max_sum_throughput`` on a trace with SLOs
  [~1.4× cheaper but ~35 % of jobs miss SLOs; with SLO constraints no violations at ~1.2× cheaper];
* ``hierarchical`` — ``hierarchical`` vs a static per-entity split of the cluster
  (``static_split:max_min_fairness_water_filling``) [~17 % more total throughput];
* ``tesserae`` — Tesserae-style LAS + packing + migration minimization vs LAS alone and vs the simple
  migration rule [up to 1.62× lower JCT, 36 % fewer migrations].

The experiments are defined in :mod:`policyopt.sim.experiment_catalog` and run by
:mod:`policyopt.sim.experiment_runner`; this module is the command line and re-exports both (every
name importable from ``policyopt.sim.experiments`` as before).
"""
from __future__ import annotations

import argparse
import logging
import sys
from typing import Sequence

from .experiment_catalog import (EXPERIMENTS, GAVEL_AGNOSTIC_SOLVE, GAVEL_FTF_AGNOSTIC,  # noqa: F401  (re-exported)
                                 GAVEL_SIMULATOR, KEEP_ARRIVING_EXTRA, KEEP_ARRIVING_MAX_CHUNKS, SCALES, Arm,
                                 Experiment, missing_policies, scaled)
from .experiment_runner import (_make_trace, _markdown, _ratios, _report, _row, _run_on_ray,  # noqa: F401
                                _run_one, file_stem, replot, run_experiment)
from .traces import _more_seed, continue_arrivals  # noqa: F401  (the trace continued by --keep-arriving)

log = logging.getLogger(__name__)

__all__ = ["Arm", "Experiment", "EXPERIMENTS", "GAVEL_SIMULATOR", "SCALES", "scaled", "run_experiment",
           "missing_policies", "main", "replot", "file_stem"]


def _rate(text: str) -> float:
    from ..errors import InputError

    try:
        return float(text)
    except ValueError:
        raise InputError("rates", text, "must be a number (jobs/hour)") from None


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m policyopt.sim.experiments", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("name", help="experiment name, 'all', or 'list'")
    p.add_argument("--output", default="docs/figures")
    p.add_argument("--seeds", default=None, help="comma-separated seeds (default: the experiment's)")
    p.add_argument("--workers", type=int, default=1, help="parallel processes")
    p.add_argument("--ray-address", default=None,
                   help="run each simulation as a Ray task: 'local' (a Ray instance on this machine), 'auto', "
                        "or a cluster address (ray://HOST:PORT)")
    p.add_argument("--quick", action="store_true", help="one seed, the highest rate only")
    p.add_argument("--replot", action="store_true",
                   help="redraw the load / bar figures from OUTPUT/NAME[_published][_arriving].csv (the same "
                        "--scale and --keep-arriving as the run)")
    p.add_argument("--scale", default="small", choices=SCALES,
                   help="small: the sizes above; published: 36 GPUs/type, 6,000 jobs, jobs 4000-5000, "
                        "the published rate sweep (las_single, las_multi, ftf, fifo; makespan: 500 jobs; "
                        "cost: 450 jobs)")
    p.add_argument("--jobs", type=int, default=None, help="trace length override (window fractions kept)")
    p.add_argument("--rates", default=None, help="comma-separated job rates (jobs/hour) instead of the sweep")
    p.add_argument("--keep-arriving", action="store_true",
                   help="new jobs keep arriving until the window has finished (the trace continued by twice as "
                        "many jobs; files NAME[_published]_arriving.*)")
    p.add_argument("--variant", default=None,
                   help="a named variant of the experiment's arms (las_single, las_multi: gavel_solve, both LPs "
                        "solved as Gavel's simulator solves them; las_single: vertex, the agnostic LP by our "
                        "default solve; las_multi: gavel_order, gavel_solve with Gavel's round ordering); "
                        "files NAME[_published]_VARIANT[_arriving].*")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # progress and the summary tables
    if args.replot:
        if args.name != "all" and args.name not in EXPERIMENTS:
            print(f"error: unknown experiment {args.name!r} (known: {', '.join(EXPERIMENTS)})", file=sys.stderr)
            return 2
        drawn = [n for n in (list(EXPERIMENTS) if args.name == "all" else [args.name])
                 if replot(n, args.output, args.scale, args.keep_arriving, args.variant) is not None]
        if not drawn:
            want = file_stem(args.name if args.name != "all" else "NAME", args.scale, args.keep_arriving, args.variant)
            print(f"error: --replot found no {want}.csv under {args.output}", file=sys.stderr)
            return 2
        return 0
    if args.name == "list":
        for e in EXPERIMENTS.values():
            miss = missing_policies(e)
            print(f"{e.name:14} {e.title}" + (f"  [missing: {', '.join(miss)}]" if miss else "")
                  + (f"  [variants: {', '.join(e.variants)}]" if e.variants else ""))
        return 0
    from ..errors import PolicyOptError

    seeds = [int(s) for s in args.seeds.split(",")] if args.seeds else None
    names = list(EXPERIMENTS) if args.name == "all" else [args.name]
    if args.scale != "small" and args.name == "all":
        names = [n for n in names if EXPERIMENTS[n].published_scale is not None]
    try:
        rates = None if args.rates is None else [_rate(r) for r in args.rates.split(",")]
        for n in names:
            run_experiment(n, args.output, seeds, args.workers, args.quick, scale=args.scale, jobs=args.jobs,
                           rates=rates, ray_address=args.ray_address, keep_arriving=args.keep_arriving,
                           variant=args.variant)
    except PolicyOptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
