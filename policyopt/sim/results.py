"""A finished :class:`~policyopt.sim.loop.SimulationRun` as a :class:`~policyopt.sim.simulator.SimResult`:
per-job / per-round / per-recompute DataFrames (pandas, built once at the end) and the metrics."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING

import numpy as np

from .loop import PHASES
from .metrics import average_contention, compute_metrics, isolated_throughput, realized_over_planned

if TYPE_CHECKING:
    from .loop import SimulationRun
    from .simulator import SimResult

__all__ = ["build_result"]


def build_result(run: "SimulationRun") -> "SimResult":
    """The run's jobs, rounds, recomputes (and runs, when recorded) tables, metrics and phase timings.

    Per job: ``jct = finish − arrival``; ``isolated_jct = steps / thr_iso`` with ``thr_iso`` the
    throughput under an equal share of the cluster among the average number of contending jobs;
    ``rho = jct / isolated_jct`` (finish-time fairness)."""
    import pandas as pd

    from .simulator import SimResult

    r, cfg, sim = run, run.cfg, run.sim
    N, L = r.N, r.L
    jobs = r.jobs
    jct = r.finish - r.arrival
    nbar = average_contention(r.arrival, r.finish)
    thr_iso = isolated_throughput(r.T_cons, r.sf.astype(float), r.count_arr.astype(float),
                                  np.nan_to_num(nbar, nan=1.0))
    with np.errstate(divide="ignore", invalid="ignore"):
        rho = np.where(np.isfinite(jct) & (thr_iso > 0), jct / (r.steps / thr_iso), np.nan)
    job_df = pd.DataFrame({
        "id": r.ids, "arrival": r.arrival, "job_type": [j.job_type for j in jobs], "scale_factor": r.sf,
        "steps": r.steps, "steps_done": r.done_steps, "weight": r.weight, "priority": r.prio_flag,
        "slo_seconds": r.slo, "entity": [j.entity for j in jobs],
        "duration_v100": [np.nan if j.duration_v100 is None else j.duration_v100 for j in jobs],
        "first_start": r.first_start, "finish": r.finish,
        "jct": jct, "rounds_run": r.n_runs, "compute_seconds": r.compute_s, "overhead_seconds": r.overhead_s,
        "attained_gpu_seconds": r.attained, "preemptions": r.n_preempt, "migrations": r.n_migr, "cost": r.cost,
        "planned_seconds": r.planned_s if r.alloc_mode else np.nan, "held_seconds": r.held_s,
        "avg_contention": nbar, "isolated_jct": r.steps / np.where(thr_iso > 0, thr_iso, np.nan), "rho": rho,
        "in_window": (np.arange(N) >= r.lo) & (np.arange(N) < r.hi)})
    rounds_df = pd.DataFrame(r.round_rows, columns=["start", "length", "active_jobs", "running_jobs",
                                                    "available_gpus", "busy_gpu_seconds", "compute_gpu_seconds",
                                                    "pairs", "migrations", "cost", "norm_throughput"])
    rounds_df["utilization"] = rounds_df["busy_gpu_seconds"] / (rounds_df["available_gpus"] * rounds_df["length"])
    for k, name in enumerate(r.ent_names):
        rounds_df[f"norm_throughput[{name}]"] = [row[k] for row in r.ent_rows]
    rec_df = pd.DataFrame(r.recompute_rows, columns=["time", "jobs", "status", "problem_seconds",
                                                     "recompute_seconds", "policy_seconds", "pairs", "objective"])
    runs_df = None
    if cfg.record_runs:
        runs_df = pd.DataFrame(r.run_rows, columns=["round_start", "job", "worker_type", "num_gpus", "spread",
                                                    "partner", "throughput", "overhead_seconds",
                                                    "compute_seconds", "steps", "gpus"])
    timings = r.timings
    wall = time.perf_counter() - r.t_wall
    timings["total"] = wall
    timings["other"] = wall - sum(timings[p] for p in PHASES)
    extra = {"policy": cfg.policy, "policy_kind": sim.resolved.kind, "cluster": dict(sim.counts),
             "round_seconds": L, "recompute_interval": r.interval, "space_sharing": cfg.space_sharing,
             "packing": cfg.packing, "migration": cfg.migration, "seed": int(cfg.seed),
             "stalled": r.stalled, "simulated_seconds": r.t - r.t0_sim, "worker_failures": r.failures_total,
             "wall_seconds": wall, "phase_seconds": dict(timings), "migration_sources": r.sources,
             "realized_over_planned": realized_over_planned(r.planned_s, r.held_s, L) if r.alloc_mode else None}
    metrics = compute_metrics(job_df, rounds_df, rec_df, window=cfg.window,
                              available_gpu_seconds=r.available_gpu_seconds, extra=extra)
    return SimResult(cfg, dict(sim.counts), job_df, rounds_df, rec_df, metrics, timings, runs_df)
