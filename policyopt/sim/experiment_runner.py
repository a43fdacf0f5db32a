"""Running the experiments of :mod:`policyopt.sim.experiment_catalog`: one simulation per (rate, seed,
arm) — locally, in worker processes or as Ray tasks — and the files they leave (``STEM.csv`` rewritten
as each simulation finishes, ``STEM.json`` with the ratios, figures ``STEM_*.png``; :func:`file_stem`).

Progress and the summary tables are logged under ``policyopt.sim.experiments`` (the command's name).
"""
from __future__ import annotations

import json
import logging
import shlex
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .experiment_catalog import EXPERIMENTS, KEEP_ARRIVING_MAX_CHUNKS, Arm, Experiment, missing_policies, scaled
from .traces import _more_seed, continue_arrivals

log = logging.getLogger("policyopt.sim.experiments")

__all__ = ["run_experiment", "replot", "file_stem", "command_line"]


def file_stem(name: str, scale: str = "small", keep_arriving: bool = False, variant: str | None = None) -> str:
    """The files' stem of experiment ``name``: ``NAME``, ``NAME_published`` at the published scale, then
    ``_VARIANT`` with a variant and ``_arriving`` with ``keep_arriving``
    (``las_multi_published_arriving.csv``, ``las_multi_published_gavel_solve_arriving.csv``, ...)."""
    return ((name if scale == "small" else f"{name}_{scale}") + (f"_{variant}" if variant else "")
            + ("_arriving" if keep_arriving else ""))


def command_line(name: str, output: str | Path, seeds: Sequence[int] | None = None, workers: int = 1,
                 quick: bool = False, scale: str = "small", jobs: int | None = None,
                 rates: Sequence[float] | None = None, ray_address: str | None = None,
                 keep_arriving: bool = False, variant: str | None = None) -> str:
    """The ``python -m policyopt.sim.experiments`` command that makes the same
    :func:`run_experiment` call: every option given (a default is left out), in the parser's order,
    each value quoted for a POSIX shell; rates are written as Python writes the float, so that the
    command reads them back exactly."""
    parts = ["python", "-m", "policyopt.sim.experiments", name, "--output", str(output)]
    if seeds is not None:
        parts += ["--seeds", ",".join(str(int(s)) for s in seeds)]
    if workers != 1:
        parts += ["--workers", str(workers)]
    if ray_address is not None:
        parts += ["--ray-address", ray_address]
    if quick:
        parts.append("--quick")
    if scale != "small":
        parts += ["--scale", scale]
    if jobs is not None:
        parts += ["--jobs", str(jobs)]
    if rates is not None:
        parts += ["--rates", ",".join(repr(float(r)) for r in rates)]
    if keep_arriving:
        parts.append("--keep-arriving")
    if variant:
        parts += ["--variant", variant]
    return shlex.join(parts)


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
                   keep_arriving: bool = False, variant: str | None = None) -> dict[str, Any]:
    """Run experiment ``name`` at ``scale`` (see :func:`scaled`); write CSV / JSON / figures under
    ``output`` (``NAME.*``, or ``NAME_published.*``; the CSV grows as simulations finish); return the summary.

    Simulations run one after another (``workers=1``), in ``workers`` local processes, or — with
    ``ray_address`` — each as a Ray task (:func:`_run_on_ray`); the files are the same either way."""
    import pandas as pd

    from .plots import active_jobs_figure, bar_figure, jct_cdf_figure, jct_vs_load_figure, utilization_figure

    if name not in EXPERIMENTS:
        from ..errors import UnknownNameError

        raise UnknownNameError("experiment", name, EXPERIMENTS)
    exp = scaled(EXPERIMENTS[name], scale, jobs, rates, keep_arriving, variant)
    stem = file_stem(name, scale, keep_arriving, variant)
    out = Path(output)
    out.mkdir(parents=True, exist_ok=True)
    missing = missing_policies(exp)
    if missing:
        summary: dict[str, Any] = {"experiment": name, "status": "skipped", "missing_policies": missing}
        log.warning("%s: skipped, policies not registered: %s", name, ", ".join(missing))
        return summary
    command = command_line(name, output, seeds, workers, quick, scale, jobs, rates, ray_address, keep_arriving,
                           variant)
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
               "command": command,
               "variant": variant, "arm_configs": {a.label: a.config for a in exp.arms},
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


def replot(name: str, output: str | Path, scale: str = "small", keep_arriving: bool = False,
           variant: str | None = None) -> Path | None:
    """Redraw ``STEM_jct_vs_load.png`` and ``STEM_bars.png`` from ``OUTPUT/STEM.csv``, ``STEM`` being
    :func:`file_stem` (``NAME``, ``NAME_published``, ``NAME[_published]_arriving``); a sweep still running
    is drawn as far as it got. Returns the CSV read, or None where there is none."""
    import pandas as pd

    from .plots import bar_figure, jct_vs_load_figure

    exp = EXPERIMENTS[name]
    out = Path(output)
    stem = file_stem(name, scale, keep_arriving, variant)
    path = out / f"{stem}.csv"
    if not path.exists():
        return None
    df = pd.read_csv(path)
    if df["rate"].nunique() > 1:
        jct_vs_load_figure(df, out / f"{stem}_jct_vs_load.png", hue="arm", title=exp.title)
    bar_figure(df, out / f"{stem}_bars.png", metrics=list(exp.metrics), hue="arm", title=exp.title)
    return path


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
