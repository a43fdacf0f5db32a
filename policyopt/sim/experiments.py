"""Reproductions of the published policy comparisons, one command each::

    python -m policyopt.sim.experiments list
    python -m policyopt.sim.experiments NAME [--seeds 0,1,2] [--output docs/figures] [--workers 1] [--quick]
                                        [--scale small|published] [--jobs N] [--rates R1,R2,...]
                                        [--ray-address local|auto|ray://HOST:PORT]

Every experiment simulates the *same traces* (same seeds) under each of its arms, on a cluster
smaller than the published one (the development machine has 2 shared cores; sizes are stated per
experiment), and writes ``OUTPUT/NAME.csv`` (one row per run), ``OUTPUT/NAME.json`` (summary with
ratios and the published numbers) and figures ``OUTPUT/NAME_*.png``. Experiments whose policies are
not registered (``policyopt.list_policies()``) are skipped with a message naming them.

``--scale published`` (``las_single``, ``las_multi``, ``ftf``; ``makespan``: 500 jobs at t = 0, the
largest of Gavel's static sweep) runs the published setup instead: 36 GPUs of each type (one server per
type, so that every multi-GPU job runs consolidated, as Gavel's simulator runs it) under Gavel's
simulator's semantics (``GAVEL_SIMULATOR``: no checkpoint / restore cost, the allocation recomputed at
most once every 1,920 s), a Gavel trace of 6,000 jobs (Poisson arrivals) of which jobs 4,000–5,000 are
measured (window ``[4000, 5000)``, simulated until they have finished, arrivals continuing), 3 seeds per
rate, and the published rate sweep (Gavel's ``run_sweep_continuous.py -a 0 -b 6 -n 16`` single-GPU: 0.4,
0.8, …, 6.0 jobs/hour; ``-a 0 -b 3 -n 11`` multi-GPU, also FTF's trace: 0.3, 0.6, …, 3.0 jobs/hour).
Files are named ``NAME_published.*``; the CSV is rewritten as each simulation finishes. ``--jobs N``
shrinks the trace (the window stays at the same fractions) and ``--rates`` picks rates, for quick looks;
each row records ``arrivals_cover_window`` (whether jobs were still arriving when the window's last job
finished, as in the published runs).

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
* ``cost`` — ``min_cost`` and ``min_cost_slo`` vs ``max_sum_throughput`` on a trace with SLOs
  [~1.4× cheaper but ~35 % of jobs miss SLOs; with SLO constraints no violations at ~1.2× cheaper];
* ``hierarchical`` — ``hierarchical`` vs a static per-entity split of the cluster
  (``static_split:max_min_fairness_water_filling``) [~17 % more total throughput];
* ``tesserae`` — Tesserae-style LAS + packing + migration minimization vs LAS alone and vs the simple
  migration rule [up to 1.62× lower JCT, 36 % fewer migrations].
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .traces import _more_seed, continue_arrivals  # noqa: F401  (the trace continued by --keep-arriving)

log = logging.getLogger(__name__)

__all__ = ["Arm", "Experiment", "EXPERIMENTS", "GAVEL_SIMULATOR", "SCALES", "scaled", "run_experiment",
           "missing_policies", "main"]


@dataclass(frozen=True)
class Arm:
    """One side of a comparison: a label and :class:`~policyopt.sim.simulator.SimConfig` overrides."""

    label: str
    config: dict[str, Any]


@dataclass(frozen=True)
class Experiment:
    """A comparison: traces (per seed and rate), arms, cluster, and what the paper reported."""

    name: str
    title: str
    published: str
    cluster: str
    trace: dict[str, Any]
    arms: tuple[Arm, ...]
    baseline: str
    treatment: str
    rates: tuple[float | None, ...] = (None,)
    common: dict[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1, 2)
    metrics: tuple[str, ...] = ("avg_jct_hours",)
    extra_comparisons: tuple[tuple[str, str], ...] = ()  # more (baseline, treatment) pairs to report
    notes: str = ""
    #: the published setup (``--scale published``): overrides of cluster / trace / rates / common, and
    #: ``arms``: per-arm config overrides by label
    published_scale: dict[str, Any] | None = None

    def comparisons(self) -> list[tuple[str, str]]:
        return [(self.baseline, self.treatment), *self.extra_comparisons]

    def required_policies(self) -> list[str]:
        """Registered policy names the arms use (``static_split:`` / ``round:`` prefixes removed)."""
        names = []
        for arm in self.arms:
            p = str(arm.config.get("policy", self.common.get("policy", "")))
            for prefix in ("static_split:", "round:"):
                if p.startswith(prefix):
                    p = p[len(prefix):]
            names.append(p)
        return names


def missing_policies(exp: Experiment) -> list[str]:
    """Names an experiment needs that are neither registered policies nor round-stage policies."""
    from ..placement import PRIORITY_POLICIES
    from ..policy import list_policies

    known = {p["name"] for p in list_policies()} | set(PRIORITY_POLICIES.names())
    return sorted({n for n in exp.required_policies() if n not in known})


# ----------------------------------------------------------------------------------------- definitions
_GAVEL = "v100=12,p100=12,k80=12"  # 1/3 of the published 36 GPUs per type
_WINDOW = {"window": (0.4, 0.8), "until": "window", "migration": "none"}

#: the published scale: 36 GPUs per type, 6,000 jobs, measured jobs [4000, 5000) (+0.5: floor(a*N) is exact)
_PUB_JOBS = 6000
_PUB_CLUSTER = "v100=36,p100=36,k80=36"
#: Gavel's simulator runs every job at its consolidated throughput whatever its placement (it reads
#: ``throughputs[worker_type][(job_type, scale_factor)]``, never the ``*_unconsolidated`` entries); one
#: server of 36 GPUs per type lets the placer consolidate every job, so the published setup does too
#: (with 4-GPU servers an 8-GPU job always spans two and runs up to 9x slower: LM, batch size 10)
_PUB_SERVERS = {"gpus_per_server": 36}
#: Gavel's simulator's semantics, under which the published numbers were measured: a restart costs
#: nothing (its simulator charges no checkpoint / restore), the allocation is recomputed after arrivals
#: and completions at most once every 1,920 s (``Scheduler(minimum_time_between_allocation_resets=1920)``),
#: no migration minimization (it places jobs afresh each round without relabeling)
GAVEL_SIMULATOR = {"recompute_interval": 1920.0, "checkpoint_seconds": 0.0, "restore_seconds": 0.0,
                   "migration": "none", "keep_types": False}
_PUB_COMMON = {**_PUB_SERVERS, **GAVEL_SIMULATOR}
#: the agnostic LP solved as Gavel solves it (ECOS: the centre of the face of optima; our default solve, a
#: vertex, made the agnostic max-min arm 14 % slower than Gavel's own simulator on the published multi-GPU
#: trace, 2.1 jobs/h, seed 1; Clarabel without fill 0.2 %); FTF's agnostic arm also sees V100 rates as Gavel's
GAVEL_AGNOSTIC_SOLVE = {"solver": "cvxpy:CLARABEL", "fill": False}
GAVEL_FTF_AGNOSTIC = {"solver": "cvxpy:CLARABEL", "reference": "fastest"}
_PUB_WINDOW = {"window": (4000.5 / _PUB_JOBS, 5000.5 / _PUB_JOBS), "until": "window", **_PUB_COMMON}
#: Gavel's sweeps: np.linspace(0, 6, 16)[1:] (single-GPU) and np.linspace(0, 3, 11)[1:] (multi-GPU) jobs/hour
_PUB_RATES_SINGLE = tuple(round(0.4 * k, 1) for k in range(1, 16))
_PUB_RATES_MULTI = tuple(round(0.3 * k, 1) for k in range(1, 11))

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in [
    Experiment(
        "las_single", "LAS: heterogeneity-aware vs agnostic, single-GPU jobs",
        "Gavel (OSDI'20) Fig. 8: up to 3.5x lower average JCT at high load (36 GPUs/type, jobs 4000-5000)",
        _GAVEL, {"generator": "gavel", "jobs": 300, "multi_gpu": False},
        (Arm("aware", {"policy": "max_min_fairness"}), Arm("agnostic", {"policy": "max_min_fairness_agnostic"})),
        baseline="agnostic", treatment="aware", rates=(1.5, 2.5, 3.5), common=dict(_WINDOW),
        metrics=("avg_jct_hours", "p99_jct_hours", "utilization"),
        published_scale={"cluster": _PUB_CLUSTER, "jobs": _PUB_JOBS, "rates": _PUB_RATES_SINGLE,
                         "common": _PUB_WINDOW}),
    Experiment(
        "las_multi", "LAS: heterogeneity-aware vs agnostic, multi-GPU jobs (1/2/4/8 GPUs at 70/10/15/5 %)",
        "Gavel (OSDI'20) Fig. 9: up to 2.2x lower average JCT at high load",
        _GAVEL, {"generator": "gavel", "jobs": 240, "multi_gpu": True},
        (Arm("aware", {"policy": "max_min_fairness"}), Arm("agnostic", {"policy": "max_min_fairness_agnostic"})),
        baseline="agnostic", treatment="aware", rates=(0.6, 1.0, 1.4), common=dict(_WINDOW),
        metrics=("avg_jct_hours", "p99_jct_hours", "utilization"),
        published_scale={"cluster": _PUB_CLUSTER, "jobs": _PUB_JOBS, "rates": _PUB_RATES_MULTI,
                         "common": _PUB_WINDOW, "arms": {"agnostic": {"policy_options": GAVEL_AGNOSTIC_SOLVE}}}),
    Experiment(
        "makespan", "Makespan policy vs FIFO on a static trace (all jobs at t=0), with and without space sharing",
        "Gavel (OSDI'20) Fig. 10: makespan policy 2.5x lower makespan than FIFO",
        _GAVEL, {"generator": "gavel", "jobs": 60, "multi_gpu": True, "static": True},
        (Arm("makespan", {"policy": "makespan"}),
         Arm("makespan+ss", {"policy": "makespan", "space_sharing": True, "policy_options": {"pair_top_k": 4}}),
         Arm("fifo (aware LP)", {"policy": "fifo"}),
         Arm("fifo_agnostic", {"policy": "fifo_agnostic"})),
        baseline="fifo_agnostic", treatment="makespan", common={"migration": "none"},
        metrics=("makespan_hours", "avg_jct_hours", "utilization"),
        extra_comparisons=(("fifo_agnostic", "makespan+ss"), ("fifo (aware LP)", "makespan")),
        # Gavel's run_sweep_static.py -c 36:36:36 -a 0 -b 500 -n 6: 100-500 jobs; the largest by default
        published_scale={"cluster": _PUB_CLUSTER, "jobs": 500, "rates": (None,), "common": dict(_PUB_COMMON)}),
    Experiment(
        "ftf", "Finish-time fairness (Themis): heterogeneity-aware vs agnostic",
        "Gavel (OSDI'20) Fig. 11: ~3x lower average JCT and 2.8x better FTF",
        _GAVEL, {"generator": "gavel", "jobs": 300, "multi_gpu": False},
        (Arm("aware", {"policy": "finish_time_fairness"}),
         Arm("agnostic", {"policy": "finish_time_fairness_agnostic"})),
        baseline="agnostic", treatment="aware", rates=(3.0,), common=dict(_WINDOW),
        metrics=("avg_jct_hours", "rho_mean", "rho_p99"),
        # Gavel's artifact runs FTF on the continuous-multiple trace (run_sweep_continuous.py ... -b 3.0 -n 11 -m)
        published_scale={"cluster": _PUB_CLUSTER, "jobs": _PUB_JOBS, "rates": _PUB_RATES_MULTI, "common": _PUB_WINDOW,
                         "trace": {"multi_gpu": True}, "arms": {"agnostic": {"policy_options": GAVEL_FTF_AGNOSTIC}}}),
    Experiment(
        "cost", "Cost: min_cost and min_cost_slo vs max_sum_throughput (SLO = 1.2/2/10 x duration)",
        "Gavel (OSDI'20) sec. 7.3: min cost ~1.4x cheaper, ~35% of jobs miss SLOs; "
        "with SLOs no violations at ~1.2x cheaper",
        _GAVEL, {"generator": "gavel", "jobs": 150, "multi_gpu": False, "slo_factors": (1.2, 2.0, 10.0)},
        (Arm("max_sum_throughput", {"policy": "max_sum_throughput"}), Arm("min_cost", {"policy": "min_cost"}),
         Arm("min_cost_slo", {"policy": "min_cost_slo"}),
         Arm("min_cost_slo+margin", {"policy": "min_cost_slo", "slo_margin_seconds": 720.0})),
        baseline="max_sum_throughput", treatment="min_cost", rates=(1.5,), common={"migration": "none"},
        metrics=("total_cost", "slo_violation_fraction", "avg_jct_hours"),
        extra_comparisons=(("max_sum_throughput", "min_cost_slo"), ("max_sum_throughput", "min_cost_slo+margin")),
        notes="min_cost_slo+margin poses each deadline 720 s (two rounds) earlier than it is"),
    Experiment(
        "hierarchical", "Hierarchical water-filling vs a static per-entity split (entity weights 1, 2, 3)",
        "Gavel (OSDI'20) sec. 7.4: ~17% higher total effective throughput",
        _GAVEL, {"generator": "gavel", "jobs": 150, "multi_gpu": False, "entities": {"a": 1.0, "b": 2.0, "c": 3.0},
                 "entity_probabilities": (0.5, 0.3, 0.2)},
        (Arm("hierarchical", {"policy": "hierarchical"}),
         Arm("static split", {"policy": "static_split:max_min_fairness_water_filling"})),
        baseline="static split", treatment="hierarchical", rates=(3.0, 5.0),
        common={"migration": "none", "max_seconds": "arrivals", "entities": {"a": 1.0, "b": 2.0, "c": 3.0}},
        metrics=("norm_throughput", "avg_jct_hours", "utilization"),
        notes="entity a (weight 1) submits 50% of the jobs, b (weight 2) 30%, c (weight 3) 20%; simulated until "
              "the last arrival; throughput = time average over the second half of that period"),
    Experiment(
        "tesserae", "Tesserae-style LAS: + packing + migration minimization vs LAS alone and vs the simple rule",
        "Tesserae: up to 1.62x lower average JCT, 36% fewer migrations than the simple rule",
        "v100=16,p100=16,k80=16", {"generator": "shockwave", "jobs": 400},
        (Arm("LAS", {"packing": False, "migration": "none"}),
         Arm("LAS+pack+matching", {"packing": True, "migration": "matching"}),
         Arm("LAS+pack+simple", {"packing": True, "migration": "simple"}),
         Arm("LAS+pack+tesserae", {"packing": True, "migration": "tesserae"})),
        baseline="LAS", treatment="LAS+pack+matching", rates=(30.0, 50.0),
        common={"policy": "las", "renew_leases": False, "checkpoint_seconds": 30.0, "restore_seconds": 30.0},
        metrics=("avg_jct_hours", "migrations", "utilization"),
        extra_comparisons=(("LAS+pack+simple", "LAS+pack+matching"), ("LAS+pack+tesserae", "LAS+pack+matching"))),
]}


SCALES = ("small", "published")
#: ``keep_arriving``: jobs added per job of the trace, per chunk of the continuation
KEEP_ARRIVING_EXTRA = 2
#: a run whose window outlasts its arrivals runs again with more chunks (Gavel generates jobs until the
#: window has finished), up to this many (then its row's ``arrivals_cover_window`` is false)
KEEP_ARRIVING_MAX_CHUNKS = 40


def scaled(exp: Experiment, scale: str = "small", jobs: int | None = None,
           rates: Sequence[float] | None = None, keep_arriving: bool = False) -> Experiment:
    """``exp`` at ``scale`` (``small``: as defined; ``published``: its ``published_scale``), with the
    trace cut to ``jobs`` and the rates replaced by ``rates`` when given (quick looks and tests).

    ``keep_arriving``: the trace is continued by chunks of ``KEEP_ARRIVING_EXTRA`` times as many jobs
    again (:func:`continue_arrivals`, the same generator and rate), the measured window keeping its job
    positions, so that new jobs keep arriving until the window has finished (the published
    methodology, Gavel's ``jobs_to_complete``; Poisson traces only): a run whose window outlasts its
    arrivals runs again with more chunks (at most ``KEEP_ARRIVING_MAX_CHUNKS``)."""
    from dataclasses import replace

    from ..errors import InputError, UnknownNameError

    if scale not in SCALES:
        raise UnknownNameError("scale", scale, SCALES)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 10):
        raise InputError("jobs", jobs, "must be an integer >= 10")
    if rates is not None and (not rates or any(not (isinstance(r, (int, float)) and r > 0) for r in rates)):
        raise InputError("rates", rates, "must be positive job rates (jobs/hour)")
    if scale == "published":
        pub = exp.published_scale
        if pub is None:
            with_pub = [n for n, e in EXPERIMENTS.items() if e.published_scale is not None]
            raise InputError("scale", scale, f"experiment {exp.name!r} has no published-scale setup yet "
                                             f"(those with one: {', '.join(with_pub)})")
        exp = replace(exp, cluster=pub["cluster"], trace={**exp.trace, "jobs": pub["jobs"], **pub.get("trace", {})},
                      rates=tuple(pub["rates"]), common={**exp.common, **pub["common"]},
                      arms=tuple(Arm(a.label, {**a.config, **pub.get("arms", {}).get(a.label, {})}) for a in exp.arms))
    if jobs is not None:
        exp = replace(exp, trace={**exp.trace, "jobs": jobs})
    if rates is not None:
        exp = replace(exp, rates=tuple(float(r) for r in rates))
    if keep_arriving:
        if exp.trace.get("generator") != "gavel" or exp.trace.get("static") or None in exp.rates \
                or exp.common.get("until") != "window":
            raise InputError("keep_arriving", True, f"experiment {exp.name!r} is not a Poisson trace measured over "
                                                    "a window (until='window')")
        exp = replace(exp, trace={**exp.trace, "extra_jobs": KEEP_ARRIVING_EXTRA * int(exp.trace["jobs"])})
    return exp


# ----------------------------------------------------------------------------------------- running
def _make_trace(exp: Experiment, seed: int, rate: float | None, table: Any, chunks: int = 1) -> list[Any]:
    """The trace of ``exp`` at ``seed`` / ``rate``; with ``extra_jobs``, continued by ``chunks`` chunks of
    that many jobs each (chunk ``k`` drawn from its own seed, so a longer continuation keeps the shorter)."""
    from .traces import GENERATORS, assign_entities

    spec = dict(exp.trace)
    gen = spec.pop("generator")
    ents = spec.pop("entities", None)
    ent_p = spec.pop("entity_probabilities", None)
    n = int(spec.pop("jobs"))
    extra = int(spec.pop("extra_jobs", 0))
    if gen == "gavel":
        slo = spec.pop("slo_factors", None)
        trace = GENERATORS["gavel"](table, n, rate, seed=seed, slo_factors=slo, **spec)
        for k in range(chunks if extra else 0):
            trace = continue_arrivals(trace, GENERATORS["gavel"](table, extra + 1, rate, seed=_more_seed(seed, k),
                                                                 slo_factors=slo, **spec))
    else:
        trace = GENERATORS["shockwave"](table, n, **({} if rate is None else {"rate_per_hour": rate}), seed=seed,
                                        **spec)
    if ents:
        trace = assign_entities(trace, list(ents), seed=seed, probabilities=ent_p)
    return trace


def _row(exp: Experiment, arm: Arm, seed: int, rate: float | None, res: Any, wall: float) -> dict[str, Any]:
    m = res.metrics
    r = res.rounds
    h = 3600.0
    row: dict[str, Any] = {
        "experiment": exp.name, "arm": arm.label, "policy": m["policy"], "seed": seed, "rate": rate,
        "num_jobs": m["num_jobs"], "completed": m["completed"],
        "avg_jct_hours": None if m["avg_jct"] is None else m["avg_jct"] / h,
        "p99_jct_hours": None if m["p99_jct"] is None else m["p99_jct"] / h,
        "makespan_hours": None if m["makespan"] is None else m["makespan"] / h,
        "utilization": m["utilization"], "migrations": m["migrations"], "preemptions": m["preemptions"],
        "total_cost": m["total_cost"], "slo_violation_fraction": m["slo"]["fraction"],
        "rho_mean": m["ftf_rho"]["mean"], "rho_p99": m["ftf_rho"]["p99"], "rho_max": m["ftf_rho"]["max"],
        "solve_ms_mean": None if m["policy_solve_seconds"]["mean"] is None else 1e3 * m["policy_solve_seconds"]["mean"],
        "recomputes": m["policy_solve_seconds"]["count"], "rounds": m["rounds"], "wall_seconds": wall,
    }
    # SLO misses per SLO factor (SLO = factor × V100 duration in Gavel's generator)
    j = res.jobs
    if j["slo_seconds"].notna().any():
        factor = (j["slo_seconds"] / j["duration_v100"]).round(1)
        miss = j["jct"] > j["slo_seconds"] + 1e-6
        for f, g in miss.groupby(factor):
            row[f"slo_miss[x{f:g}]"] = float(g.mean())
    # time-averaged normalized throughput over the second half of the simulated time (steady state)
    if len(r):
        t = r["start"].to_numpy(float)
        keep = t >= t[0] + 0.5 * (t[-1] + r["length"].iloc[-1] - t[0])
        w = r["length"].to_numpy(float)[keep]
        row["norm_throughput"] = float((r["norm_throughput"].to_numpy(float)[keep] * w).sum() / w.sum())
        for col in r.columns:
            if col.startswith("norm_throughput["):
                row[col.replace("norm_throughput", "share")] = float((r[col].to_numpy(float)[keep] * w).sum() / w.sum())
    return row


def _run_one(task: tuple[Experiment, int, float | None, int]) -> tuple[dict[str, Any], Any]:
    from ..data.gavel import load_gavel
    from .metrics import window_backlog
    from .simulator import SimConfig, Simulator

    exp, seed, rate, arm_index = task
    arm = exp.arms[arm_index]
    table = load_gavel()
    chunks, cpu = 1, 0.0
    while True:
        trace = _make_trace(exp, seed, rate, table, chunks)
        settings = {**exp.common, **arm.config, "seed": seed}
        if len(trace) > exp.trace["jobs"] and "window" in settings:  # continued arrivals: the same window positions
            from .metrics import steady_state_window

            lo, hi = steady_state_window(int(exp.trace["jobs"]), settings["window"])
            settings["window"] = ((lo + 0.5) / len(trace), (hi + 0.5) / len(trace))
        if settings.get("max_seconds") == "arrivals":  # simulate while jobs keep arriving
            settings["max_seconds"] = max(j.arrival for j in trace) - min(j.arrival for j in trace)
        t0, c0 = time.perf_counter(), time.process_time()
        res = Simulator(exp.cluster, SimConfig(**settings), table).run(trace)
        wall = time.perf_counter() - t0
        cpu += time.process_time() - c0
        # the published methodology: jobs keep arriving until the measured window has finished
        win = res.jobs["in_window"].to_numpy(bool)
        fin = res.jobs["finish"].to_numpy(float)[win]
        done = bool(fin.size and np.isfinite(fin).all())
        last = float(res.jobs["arrival"].max())
        covered = done and last >= float(fin.max())
        if covered or not done or not exp.trace.get("extra_jobs") or chunks >= KEEP_ARRIVING_MAX_CHUNKS:
            break
        # the window outlasted the arrivals: again with enough chunks to reach its end (at this run's
        # arrival rate per chunk) and one more, as more arrivals finish the window later
        span = (last - trace[int(exp.trace["jobs"]) - 1].arrival) / chunks
        more = int(np.ceil((float(fin.max()) - last) / span)) + 1 if span > 0 else 1
        chunks = min(chunks + more, KEEP_ARRIVING_MAX_CHUNKS)
        log.info("%s seed=%s rate=%s %s: the window outlasted %d arrivals; again with %d chunks", exp.name, seed,
                 rate, arm.label, len(trace), chunks)
    row = _row(exp, arm, seed, rate, res, wall)
    row["cpu_seconds"] = cpu  # this process's CPU time over every run of this row (the machine may be shared)
    row["arrivals_cover_window"] = covered
    # steady state: jobs in the system over four quarters of the window's arrivals, and while it drains
    bl = window_backlog(res.jobs["arrival"].to_numpy(float), res.jobs["finish"].to_numpy(float), win)
    row.update({f"active_q{q + 1}": a for q, a in enumerate(bl["active"])}, active_drain=bl["active_drain"],
               active_growth=bl["active_growth"], active_end=bl["active_end"], active_trend=bl["active_trend"],
               window_done_h=bl["t2_h"],
               last_arrival_h=(float(res.jobs["arrival"].max()) - float(res.jobs["arrival"].min())) / 3600.0)
    if exp.trace.get("extra_jobs") and not row["arrivals_cover_window"]:
        log.warning("%s seed=%s rate=%s %s: arrivals ended before the window finished (trace of %d jobs)",
                    exp.name, seed, rate, arm.label, len(trace))
    # keep per-job JCTs of the window and per-round utilization for the figures (small)
    keep = {"jct": res.jobs.loc[res.jobs["in_window"], "jct"].to_numpy(float),
            "util_t": res.rounds["start"].to_numpy(float), "util": res.rounds["utilization"].to_numpy(float),
            "active": res.rounds["active_jobs"].to_numpy(float)}
    return row, keep


def _ratios(df: Any, baseline: str, treatment: str, metric: str) -> list[dict[str, Any]]:
    """baseline / treatment per (rate, seed), then mean / min / max over seeds per rate."""
    out = []
    for rate, g in df.groupby(df["rate"].fillna(-1.0)):
        b = g[g["arm"] == baseline].set_index("seed")[metric].astype(float)
        t = g[g["arm"] == treatment].set_index("seed")[metric].astype(float)
        r = (b / t).replace([np.inf, -np.inf], np.nan).dropna()
        out.append({"rate": None if rate == -1.0 else float(rate), "metric": metric, "baseline": baseline,
                    "treatment": treatment, "baseline_mean": _f(b.mean()), "treatment_mean": _f(t.mean()),
                    "ratio_of_means": _f(b.mean() / t.mean()) if t.mean() else None,
                    "ratio_min": _f(r.min()) if len(r) else None, "ratio_max": _f(r.max()) if len(r) else None})
    return out


def _f(x: Any) -> float | None:
    x = float(x)
    return x if np.isfinite(x) else None


def run_experiment(name: str, output: str | Path, seeds: Sequence[int] | None = None, workers: int = 1,
                   quick: bool = False, progress: bool = True, scale: str = "small", jobs: int | None = None,
                   rates: Sequence[float] | None = None, ray_address: str | None = None,
                   keep_arriving: bool = False) -> dict[str, Any]:
    """Run experiment ``name`` at ``scale`` (see :func:`scaled`); write CSV / JSON / figures under
    ``output`` (``NAME.*``, or ``NAME_published.*``; the CSV grows as simulations finish); return the summary.

    Simulations run one after another (``workers=1``), in ``workers`` local processes, or — with
    ``ray_address`` — each as a Ray task (:func:`_run_on_ray`); the files are the same either way."""
    import pandas as pd

    from .plots import active_jobs_figure, bar_figure, jct_cdf_figure, jct_vs_load_figure, utilization_figure

    if name not in EXPERIMENTS:
        from ..errors import UnknownNameError

        raise UnknownNameError("experiment", name, EXPERIMENTS)
    exp = scaled(EXPERIMENTS[name], scale, jobs, rates, keep_arriving)
    stem = (name if scale == "small" else f"{name}_{scale}") + ("_arriving" if keep_arriving else "")
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    missing = missing_policies(exp)
    if missing:
        summary: dict[str, Any] = {"experiment": name, "status": "skipped", "missing_policies": missing}
        log.warning("%s: skipped, policies not registered: %s", name, ", ".join(missing))
        return summary
    seeds = tuple(seeds) if seeds is not None else exp.seeds
    run_rates = exp.rates[-1:] if quick else exp.rates
    if quick:
        seeds = seeds[:1]
    tasks = [(exp, s, r, a) for r in run_rates for s in seeds for a in range(len(exp.arms))]
    t0 = time.perf_counter()
    done: dict[int, tuple[dict[str, Any], Any]] = {}
    csv = out / f"{stem}.csv"

    def finished(k: int, res: tuple[dict[str, Any], Any]) -> None:
        # rewritten as each finishes (rows in task order; arms may add columns): a long sweep can be
        # read, replotted or stopped part-way
        done[k] = res
        pd.DataFrame([done[i][0] for i in sorted(done)]).to_csv(csv, index=False)
        _report(progress, len(done) - 1, tasks, res[0])

    csv.unlink(missing_ok=True)
    if ray_address is not None:
        _run_on_ray(tasks, ray_address, finished)
    elif workers > 1:
        with ProcessPoolExecutor(workers) as pool:
            futures = {pool.submit(_run_one, task): k for k, task in enumerate(tasks)}
            for fut in as_completed(futures):
                finished(futures[fut], fut.result())
    else:
        for k, task in enumerate(tasks):
            finished(k, _run_one(task))
    wall = time.perf_counter() - t0
    results = [done[k] for k in range(len(tasks))]  # task order: the same files for any --workers
    df = pd.DataFrame([r for r, _ in results])
    df.to_csv(csv, index=False)
    ratios = [x for b, t in exp.comparisons() for m in exp.metrics for x in _ratios(df, b, t, m)]
    means = df.groupby(["rate", "arm"], dropna=False, sort=False)[list(exp.metrics)].mean().reset_index() \
        if df["rate"].notna().any() else df.groupby("arm", sort=False)[list(exp.metrics)].mean().reset_index()
    summary = {"experiment": name, "status": "ok", "scale": scale, "title": exp.title, "published": exp.published,
               "cluster": exp.cluster,
               "trace": {k: (list(v) if isinstance(v, tuple) else v) for k, v in exp.trace.items()},
               "seeds": list(seeds), "rates": list(run_rates), "arms": [a.label for a in exp.arms],
               "comparisons": [list(c) for c in exp.comparisons()], "wall_seconds": wall,
               "command": f"python -m policyopt.sim.experiments {name} --output {output}"
                          + ("" if scale == "small" else f" --scale {scale}")
                          + (" --keep-arriving" if keep_arriving else ""),
               "means": json.loads(means.to_json(orient="records")), "ratios": ratios}
    (out / f"{stem}.json").write_text(json.dumps(summary, indent=2))
    # figures
    if len(run_rates) > 1:
        jct_vs_load_figure(df, out / f"{stem}_jct_vs_load.png", hue="arm", title=exp.title)
    bar_figure(df, out / f"{stem}_bars.png", metrics=list(exp.metrics), hue="arm", title=exp.title)
    top = run_rates[-1]
    sel = [(row, keep) for row, keep in results if row["seed"] == seeds[0] and row["rate"] == top]
    cdf_runs = {row["arm"]: _Stub(keep) for row, keep in sel}
    jct_cdf_figure(cdf_runs, out / f"{stem}_jct_cdf.png")
    utilization_figure(cdf_runs, out / f"{stem}_utilization.png")
    active_jobs_figure(cdf_runs, out / f"{stem}_active.png")
    log.info("%s", _markdown(summary))
    return summary


def _run_on_ray(tasks: Sequence[Any], address: str, finished: Any) -> None:
    """Each simulation of ``tasks`` as one Ray task, ``finished(k, result)`` called as each completes.

    ``address``: ``"local"`` starts a Ray instance on this machine; anything else is passed to
    ``ray.init`` (``"auto"``: the cluster this node belongs to; ``"ray://HOST:10001"``: a remote one).
    A Ray session that is already initialized is used as it is (and left running). Every node needs
    policyopt installed (the tasks import it) and the Gavel throughput data it loads.
    """
    from ..errors import InputError

    try:
        import ray
    except ImportError:  # pragma: no cover - depends on the environment
        raise InputError("ray_address", address, "needs the 'ray' package (pip install 'policyopt[ray]')") from None
    started = not ray.is_initialized()
    if started:
        # "local" is Ray's own word for a new instance; address=None would join the cluster named by
        # RAY_ADDRESS or /tmp/ray/ray_current_cluster (any Ray head started on this machine)
        ray.init(address=address, include_dashboard=False, log_to_driver=False)
    try:
        remote = ray.remote(_run_one)
        pending = {remote.remote(task): k for k, task in enumerate(tasks)}
        log.info("%d simulations submitted to Ray (%s)", len(pending), address)
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                finished(pending.pop(ref), ray.get(ref))
    finally:
        if started:
            ray.shutdown()


def replot(name: str, output: str | Path, scale: str = "small") -> None:
    """Redraw ``NAME_jct_vs_load.png`` and ``NAME_bars.png`` from ``OUTPUT/NAME.csv`` (``NAME_published.*``
    with ``scale="published"``; a sweep still running is drawn as far as it got)."""
    import pandas as pd

    from .plots import bar_figure, jct_vs_load_figure

    exp = EXPERIMENTS[name]
    out = Path(output)
    stem = name if scale == "small" else f"{name}_{scale}"
    path = out / f"{stem}.csv"
    if not path.exists():
        return
    df = pd.read_csv(path)
    if df["rate"].nunique() > 1:
        jct_vs_load_figure(df, out / f"{stem}_jct_vs_load.png", hue="arm", title=exp.title)
    bar_figure(df, out / f"{stem}_bars.png", metrics=list(exp.metrics), hue="arm", title=exp.title)


class _Stub:
    """Enough of a SimResult for the CDF / utilization figures."""

    def __init__(self, keep: dict[str, np.ndarray]) -> None:
        import pandas as pd

        self.jobs = pd.DataFrame({"jct": keep["jct"], "in_window": True})
        self.rounds = pd.DataFrame({"start": keep["util_t"], "utilization": keep["util"],
                                    "active_jobs": keep.get("active", np.full(len(keep["util"]), np.nan))})


def _report(progress: bool, k: int, tasks: Sequence[Any], row: dict[str, Any]) -> None:
    if progress:
        jct = row["avg_jct_hours"]
        log.info("[%d/%d] %20s seed=%s rate=%s avg_jct=%s wall=%.1fs", k + 1, len(tasks), row["arm"], row["seed"],
                 row["rate"], "-" if jct is None else f"{jct:.2f}h", row["wall_seconds"])


def _markdown(summary: dict[str, Any]) -> str:
    lines = [f"### {summary['experiment']}: {summary['title']}", "",
             "| rate | metric | baseline | treatment | baseline value | treatment value | ratio (of means) "
             "| ratio range over seeds |", "|---|---|---|---|---|---|---|---|"]
    for r in summary["ratios"]:
        def f(x: Any) -> str:
            return "-" if x is None else f"{x:.3g}"
        lines.append(f"| {f(r['rate'])} | {r['metric']} | {r['baseline']} | {r['treatment']} | "
                     f"{f(r['baseline_mean'])} | {f(r['treatment_mean'])} | "
                     f"{f(r['ratio_of_means'])} | {f(r['ratio_min'])}–{f(r['ratio_max'])} |")
    lines.append(f"\n(wall {summary['wall_seconds']:.0f} s)")
    return "\n".join(lines)


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
    p.add_argument("--replot", action="store_true", help="redraw the load / bar figures from OUTPUT/NAME.csv")
    p.add_argument("--scale", default="small", choices=SCALES,
                   help="small: the sizes above; published: 36 GPUs/type, 6,000 jobs, jobs 4000-5000, "
                        "the published rate sweep (las_single, las_multi, ftf; makespan: 500 jobs)")
    p.add_argument("--jobs", type=int, default=None, help="trace length override (window fractions kept)")
    p.add_argument("--rates", default=None, help="comma-separated job rates (jobs/hour) instead of the sweep")
    p.add_argument("--keep-arriving", action="store_true",
                   help="new jobs keep arriving until the window has finished (the trace continued by twice as "
                        "many jobs; files NAME[_published]_arriving.*)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")  # progress and the summary tables
    if args.replot:
        for n in (list(EXPERIMENTS) if args.name == "all" else [args.name]):
            replot(n, args.output, args.scale)
        return 0
    if args.name == "list":
        for e in EXPERIMENTS.values():
            miss = missing_policies(e)
            print(f"{e.name:14} {e.title}" + (f"  [missing: {', '.join(miss)}]" if miss else ""))
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
                           rates=rates, ray_address=args.ray_address, keep_arriving=args.keep_arriving)
    except PolicyOptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
