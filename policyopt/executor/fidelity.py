"""Fidelity: the executor's measured run against the simulator on the same trace.

:func:`simulate_run` replays a run's jobs (same arrivals, steps, policy, cluster, recompute
interval, placer and migration minimizer) in :class:`policyopt.sim.Simulator` — the project's
round simulator — with a throughput table built from the profiler's table
(:func:`table_from_profile`: job type ``t`` on ``K`` workers becomes the simulator job type
``t#K`` with the table's ``K``-worker row, ``<type>_unconsolidated`` columns where a ``K > 1`` job
may be spread, worker types keep their names, the profiler's ``colocated`` pairs fill the paired
table), and the run's machines (``gpus_per_server`` per worker type: the slots of a type on one
node).

The round model (``model="rounds"``, :func:`round_model`) gives the simulator the executor's own
round costs, measured in the run. An executor round of lease ``L`` lasts ``D = plan + stop + L +
settle`` seconds (its mean over the rounds that ran jobs and were not cut short), a job whose
process continues trains ``L`` of them, and a job whose process starts in the round trains
``L − o`` (``o``: the mean over the launches that trained the whole round, from the start of the
round's launches to the worker's first step: fork, model build, checkpoint load, rendezvous). So
the simulator runs rounds of ``D`` seconds, every throughput scaled by ``L / D``,
``restore_seconds = o · D / L`` for every start
(``checkpoint_seconds = 0``: a stop's checkpoint is inside the stop phase of ``D``), without a
renewal credit and without sticky worker types, as the executor's mechanism. ``model="nominal"``
is the plain model: rounds of ``L``, ``restore_seconds`` = the mean worker start-up,
``checkpoint_seconds`` = the mean stop, the simulator's default credit and sticky types.

:func:`compare` reports, per job, ``(JCT_measured − JCT_simulated) / JCT_simulated`` and the
same for the makespan; ``mean_abs_jct_difference_pct`` is the mean of the absolute per-job
differences. With ``measured_throughputs=True`` the simulator instead uses the throughputs the
executor measured per job type and worker type, which separates the error of the throughput
estimate (profiler vs. the loaded machine during the run) from that of the round model.
"""
from __future__ import annotations

import json
import math
from typing import Any, Mapping, Sequence

import numpy as np

from policyopt.errors import InputError

__all__ = ["table_from_profile", "round_model", "simulate_run", "compare", "fidelity_section", "MODELS"]

#: round models of :func:`simulate_run` (module docstring)
MODELS = ("rounds", "nominal")


def table_from_profile(table: Mapping[str, Any], worker_types: Sequence[str],
                       job_types: Sequence[str | tuple[str, int]] | None = None, scale: float = 1.0) -> Any:
    """A :class:`policyopt.data.gavel.GavelThroughputs` over the profiler table's job types;
    ``job_types`` items are names (one worker) or ``(name, K)`` (the ``K``-worker row); every
    throughput is multiplied by ``scale``."""
    from policyopt.data.gavel import GavelThroughputs

    from .planning import job_throughputs

    items = list(job_types) if job_types is not None else list(table["job_types"])
    keys = [(it, 1) if isinstance(it, str) else (str(it[0]), int(it[1])) for it in items]
    base = list(worker_types)
    configs = base + ([f"{t}_unconsolidated" for t in base] if any(k > 1 for _, k in keys) else [])
    rows = [job_throughputs(table, n, base, None, k) for n, k in keys]
    alone = np.array([[float(r.get(c, r.get(c.removesuffix("_unconsolidated"), 0.0))) for c in configs]
                      for r in rows]).reshape(len(keys), len(configs))
    idx = {n: i for i, (n, k) in enumerate(keys) if k == 1}  # the profiled pairs are 1-worker runs
    paired = np.zeros((len(keys), len(keys), len(configs), 2))
    for e in table.get("colocated") or []:
        a, b = e["job_types"]
        t = e["worker_type"]
        if a in idx and b in idx and t in base:
            ta, tb = (float(x) for x in e["throughputs"])
            c = configs.index(t)
            paired[idx[a], idx[b], c] = [ta, tb]
            paired[idx[b], idx[a], c] = [tb, ta]
    return GavelThroughputs(keys, configs, alone * scale, paired * scale)


def _measured_table(report: Mapping[str, Any], base: Mapping[str, Any]) -> dict[str, Any]:
    """The profiler table with each (job type, worker type) replaced by the run's measured rate
    (steps / training seconds, summed over the jobs of that type) where it ran."""
    sums: dict[tuple[str, int, str], list[float]] = {}
    for j in report["jobs"].values():
        for t, rate in (j.get("measured_throughputs") or {}).items():
            steps = float(j["steps_by_type"].get(t, 0))
            if rate and rate > 0 and steps > 0:
                acc = sums.setdefault((j["job_type"], int(j.get("scale_factor", 1)), t), [0.0, 0.0])
                acc[0] += steps
                acc[1] += steps / rate
    out: dict[str, Any] = json.loads(json.dumps({"job_types": base["job_types"],
                                                 "colocated": list(base.get("colocated") or [])}))
    for (jt, k, t), (steps, seconds) in sums.items():
        entry = out["job_types"].get(jt)
        row = entry if k == 1 or entry is None else (entry.get("scale_factors") or {}).get(str(k))
        if row is not None and seconds > 0:
            row["throughputs"][t] = steps / seconds
            row.pop("throughputs_unconsolidated", None)  # measured where it ran, consolidated or not
    return out


def round_model(report: Mapping[str, Any]) -> dict[str, Any]:
    """The run's measured round costs (module docstring): ``round_seconds`` ``D``,
    ``rate_scale`` ``L / D``, ``launch_seconds`` ``o`` (``None`` when no launch trained a whole
    round), ``restore_seconds`` ``o · D / L``, ``checkpoint_seconds`` 0, and the sample counts."""
    L = float(report["config"]["round_seconds"])
    finish = {jid: j.get("finish") for jid, j in report["jobs"].items()}
    # a round cut short (its jobs ended and nothing was left to run) is not a round of the model
    rounds = [r for r in report.get("rounds") or [] if r.get("jobs") and not r.get("cut_short")]
    D = float(np.mean([float(r["duration"]) for r in rounds])) if rounds else L
    lost = [L - float(v["train_seconds"]) for r in rounds for jid, v in r["jobs"].items()
            if not v.get("renewed") and v.get("train_seconds") is not None
            and (finish.get(jid) is None or finish[jid] >= float(r["start"]) + float(r["duration"]))]
    o = max(0.0, float(np.mean(lost))) if lost else None
    return {"round_seconds": D, "rate_scale": L / D, "launch_seconds": o,
            "restore_seconds": o * D / L if o is not None else None, "checkpoint_seconds": 0.0,
            "rounds": len(rounds), "launches": len(lost)}


def simulate_run(report: Mapping[str, Any], table: Mapping[str, Any], *, measured_throughputs: bool = False,
                 model: str = "rounds", restore_seconds: float | None = None,
                 checkpoint_seconds: float | None = None, record_runs: bool = False,
                 configurations: bool = True) -> dict[str, Any]:
    """Simulate the run of ``report`` with the round model ``model`` (one of :data:`MODELS`, see
    the module docstring); returns per-job JCTs and makespan, and the model's parameters; with
    ``record_runs`` also ``runs``: ``(round start, job id, worker type)`` per job and round. With
    ``configurations`` (and the table's own rates, no space sharing) a table's measured
    ``configurations`` price each round (:class:`~policyopt.executor.configurations.ConfigurationRates`
    on the table's ``meta.cpu_count`` cores, with ``meta.load_average.start`` other runnable threads);
    ``configuration_rates`` in the result counts the job-rounds each rule priced (``None``: not used)."""
    from policyopt.sim.simulator import SimConfig, Simulator
    from policyopt.sim.traces import TraceJob

    from .configurations import ConfigurationRates, parse_configurations

    if model not in MODELS:
        raise InputError("model", model, f"must be one of {', '.join(MODELS)}")
    cfg = report["config"]
    cluster = {t: int(n) for t, n in cfg["cluster"].items() if int(n) > 0}
    source = _measured_table(report, table) if measured_throughputs else table
    job_types = sorted({(j["job_type"], int(j.get("scale_factor", 1))) for j in report["jobs"].values()})
    gps = {t: int(n) for t, n in (report.get("gpus_per_server") or {}).items() if t in cluster}
    summary = report["summary"]
    rounds = round_model(report)
    extra: dict[str, Any] = {}
    if model == "rounds" and rounds["restore_seconds"] is not None:
        length, scale = rounds["round_seconds"], rounds["rate_scale"]
        restore, ckpt = float(rounds["restore_seconds"]), 0.0
        extra = {"renewal_credit": 0.0, "keep_types": False}
        used = "rounds"
    else:  # nominal (or a run whose report has no launch that trained a whole round)
        length, scale = float(cfg["round_seconds"]), 1.0
        restore = float(summary.get("mean_startup_seconds") or 0.0)
        ckpt = float(summary.get("mean_stop_seconds") or 0.0)
        used = "nominal"
    restore = float(restore_seconds) if restore_seconds is not None else restore
    ckpt = float(checkpoint_seconds) if checkpoint_seconds is not None else ckpt
    gavel = table_from_profile(source, list(cluster), job_types, scale=scale)
    trace = [TraceJob(jid, float(j["arrival"]), f"{j['job_type']}#{int(j.get('scale_factor', 1))}",
                      int(j.get("scale_factor", 1)), float(j["steps_required"]))
             for jid, j in report["jobs"].items()]
    sim_cfg = SimConfig(policy=cfg["policy"], policy_options=dict(cfg.get("policy_options") or {}),
                        space_sharing=bool(cfg.get("space_sharing")), migration=cfg.get("migration", "matching"),
                        placer=cfg.get("placer", "consolidate"), round_seconds=length,
                        recompute_interval=cfg.get("recompute_interval"), checkpoint_seconds=ckpt,
                        restore_seconds=restore, gpus_per_server={t: gps.get(t, 1) for t in cluster},
                        prices={t: 0.0 for t in cluster}, seed=0, record_runs=record_runs, **extra)
    measured = parse_configurations(table) if configurations and not measured_throughputs \
        and not cfg.get("space_sharing") else []
    meta = table.get("meta") or {}
    rates = ConfigurationRates(measured, table.get("worker_types"), scale, cores=int(meta.get("cpu_count") or 1),
                               other_threads=float((meta.get("load_average") or {}).get("start") or 0.0)) \
        if measured else None
    result = Simulator(cluster, sim_cfg, gavel, round_rates=rates).run(trace)
    jobs = result.jobs
    jct = {str(i): float(v) for i, v in zip(jobs["id"], jobs["jct"])}
    finish = [float(v) for v in jobs["finish"]]
    arrival = [float(v) for v in jobs["arrival"]]
    makespan = max(finish) - min(arrival) if all(math.isfinite(f) for f in finish) else None
    out: dict[str, Any] = {}
    if record_runs and result.runs is not None:
        out["runs"] = [(float(t), str(j), str(w)) for t, j, w in
                       zip(result.runs["round_start"], result.runs["job"], result.runs["worker_type"])]
    return {**out, "jct": jct, "makespan": makespan, "model": used,
            "round_seconds": length, "rate_scale": scale, "restore_seconds": restore, "checkpoint_seconds": ckpt,
            "measured_throughputs": measured_throughputs,
            "configuration_rates": dict(rates.used) if rates is not None else None}


def _pct(measured: float | None, simulated: float | None) -> float | None:
    if measured is None or simulated is None or not simulated:
        return None
    return 100.0 * (measured - simulated) / simulated


def compare(report: Mapping[str, Any], sim: Mapping[str, Any]) -> dict[str, Any]:
    """Per-job and makespan differences, measured vs simulated (percent of the simulated value)."""
    per_job = {}
    for jid, j in report["jobs"].items():
        s = sim["jct"].get(jid)
        per_job[jid] = {"measured": j["jct"], "simulated": s, "difference_pct": _pct(j["jct"], s)}
    diffs = [abs(v["difference_pct"]) for v in per_job.values() if v["difference_pct"] is not None]
    measured_ms = report["summary"]["makespan"]
    done = [v for v in per_job.values() if v["measured"] is not None and v["simulated"] is not None]
    mean_m = float(np.mean([v["measured"] for v in done])) if done else None
    mean_s = float(np.mean([v["simulated"] for v in done])) if done else None
    return {"available": True, "jobs": per_job,
            "makespan": {"measured": measured_ms, "simulated": sim["makespan"],
                         "difference_pct": _pct(measured_ms, sim["makespan"])},
            "mean_jct": {"measured": mean_m, "simulated": mean_s, "difference_pct": _pct(mean_m, mean_s)},
            "mean_abs_jct_difference_pct": float(np.mean(diffs)) if diffs else None,
            "model": sim["model"], "round_seconds": sim["round_seconds"], "rate_scale": sim["rate_scale"],
            "restore_seconds": sim["restore_seconds"], "checkpoint_seconds": sim["checkpoint_seconds"],
            "configuration_rates": sim.get("configuration_rates")}


def fidelity_section(report: Mapping[str, Any], table: Mapping[str, Any]) -> dict[str, Any]:
    """``report["fidelity"]``: the comparison with the profiler's throughputs (``rounds`` model),
    with the throughputs measured during the run, and the makespan and mean absolute JCT
    difference of the ``nominal`` model (``nominal_model``); ``{"available": False, "reason"}``
    when the simulator cannot run (not installed, or the run did not complete)."""
    if report["summary"].get("makespan") is None:
        return {"available": False, "reason": "the run did not complete every job"}
    try:
        sim = simulate_run(report, table)
        out = compare(report, sim)
        sim_m = simulate_run(report, table, measured_throughputs=True)
        out["with_measured_throughputs"] = compare(report, sim_m)
        nominal = compare(report, simulate_run(report, table, model="nominal"))
        out["nominal_model"] = {k: nominal[k] for k in ("makespan", "mean_abs_jct_difference_pct")}
        out["simulator"] = "policyopt.sim.Simulator"
        return out
    except ImportError as exc:
        return {"available": False, "reason": f"simulator not available: {exc}"}
    except InputError as exc:
        return {"available": False, "reason": f"simulator rejected the trace: {exc}"}
