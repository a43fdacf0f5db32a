"""Solver benchmarking harness: formulations × backends × sizes, phases timed separately.

Every case (policy, size, backend) runs in a forked child process, so its peak memory is its own
(``ru_maxrss`` growth over the child's starting RSS, plus the Python-heap peak from
``tracemalloc``). Repeats are interleaved — repeat 1 of every backend, then repeat 2, ... — so
that ratios between backends see the same machine noise. For each (policy, size) the harness
checks that every backend reached the same objective (relative difference ≤ ``agree_tol``).

Results: one row per run (``runs.csv``) and a summary with medians and spreads
(``summary.csv``), plus plots of total and solve time against size per backend.
"""
from __future__ import annotations

import multiprocessing as mp
import resource
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import pandas as pd

from ..policy import get_policy, policy_class
from ..problem import Problem

__all__ = ["BenchConfig", "run_benchmark", "summarize", "plot_summary", "DEFAULT_BACKENDS", "gavel_problem"]

#: backend spec -> policy options (solver + algorithm)
DEFAULT_BACKENDS: dict[str, dict[str, Any]] = {
    "highs:simplex": {"solver": "highs", "algorithm": "simplex"},
    "highs:ipm": {"solver": "highs", "algorithm": "ipm"},
    "cvxpy:CLARABEL": {"solver": "cvxpy:CLARABEL"},
    "cvxpy:HIGHS": {"solver": "cvxpy:HIGHS"},
    "pulp:CBC": {"solver": "pulp:PULP_CBC_CMD"},
    "pulp:HiGHS": {"solver": "pulp:HiGHS"},
}


#: $/GPU-hour used in Gavel's cost experiments (cloud on-demand prices)
GAVEL_PRICES = {"v100": 3.06, "p100": 1.46, "k80": 0.90}


def backend_options(spec: str) -> dict[str, Any]:
    """``highs:ipm`` → ``{"solver": "highs", "algorithm": "ipm"}``; unknown specs pass through as
    a solver name (``cvxpy:SCS``)."""
    if spec in DEFAULT_BACKENDS:
        return dict(DEFAULT_BACKENDS[spec])
    base, _, sub = spec.partition(":")
    if base == "highs" and sub:
        return {"solver": "highs", "algorithm": sub}
    return {"solver": spec}


def gavel_problem(n: int, seed: int = 0, space_sharing: bool = False) -> Problem:
    """N jobs drawn the way Gavel's generator does (1/2/4/8 GPUs at 70/10/15/5 %, durations
    60·10^U(1.5,3) s w.p. 0.8 else 60·10^U(3,4) s → steps), on a cluster of N/4 of each of
    v100/p100/k80 (at least 8 each)."""
    from ..data import load_gavel
    from ..sim.traces import gavel_trace, parse_job_type

    table = load_gavel()
    trace = gavel_trace(table, n, static=True, seed=seed, multi_gpu=True)
    types = [table.type_index(*parse_job_type(j.job_type)) for j in trace]
    from ..problem import Cluster

    counts = {t: max(8, n // 4) for t in ("v100", "p100", "k80")}
    cluster = Cluster.from_counts(counts, gpus_per_server=4, prices=GAVEL_PRICES)
    return table.problem(types, cluster, steps=[j.steps for j in trace],
                         colocated="types" if space_sharing else False)


@dataclass(frozen=True)
class BenchConfig:
    policies: Sequence[str]
    sizes: Sequence[int]
    backends: Sequence[str]
    repeats: int = 3
    seed: int = 0
    space_sharing: bool = False
    time_limit: float | None = None
    agree_tol: float = 1e-6
    max_size: dict[str, int] | None = None  # per backend (e.g. PuLP is slow to build)


def _run_case(policy: str, problem: Problem, opts: dict[str, Any], queue: Any) -> None:
    """Child process: one solve, timings by phase, memory."""
    try:
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        tracemalloc.start()
        t0 = time.perf_counter()
        res = get_policy(policy, **opts).solve(problem)
        wall = time.perf_counter() - t0
        _, py_peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        queue.put({"status": res.status.value, "objective": res.objective, "wall_s": wall,
                   **{f"{k}_s": v for k, v in res.timings.to_dict().items()},
                   "peak_rss_mb": max(rss1 - rss0, 0) / 1024.0, "py_peak_mb": py_peak / 2**20,
                   "solver_used": res.solver})
    except Exception as exc:  # noqa: BLE001 - reported as a row
        queue.put({"status": "error", "error": f"{type(exc).__name__}: {exc}"})


def _preimport_backends(backends: Sequence[str]) -> None:
    import importlib
    import importlib.util

    modules = {"highs": "highspy", "cvxpy": "cvxpy", "pulp": "pulp"}
    for b in backends:
        mod = modules.get(b.partition(":")[0])
        if mod and importlib.util.find_spec(mod):
            importlib.import_module(mod)


def run_benchmark(cfg: BenchConfig, progress: Callable[[str], None] | None = None,
                  problem_factory: Callable[[int, int, bool], Problem] = gavel_problem) -> pd.DataFrame:
    """Run every (policy, size, backend, repeat); one row per run."""
    for p in cfg.policies:
        policy_class(p)  # unknown names fail now, with the list of known ones
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    _preimport_backends(cfg.backends)  # forked children inherit them: import time is not solve time
    rows = []
    total = len(cfg.policies) * len(cfg.sizes) * len(cfg.backends) * cfg.repeats
    done = 0
    for size in cfg.sizes:
        problem = problem_factory(size, cfg.seed, cfg.space_sharing)
        for policy in cfg.policies:
            for rep in range(cfg.repeats):
                for backend in cfg.backends:
                    done += 1
                    if cfg.max_size and size > cfg.max_size.get(backend, size):
                        continue
                    opts = backend_options(backend)
                    if cfg.space_sharing:
                        opts["space_sharing"] = True
                    if cfg.time_limit:
                        opts["time_limit"] = cfg.time_limit
                    q = ctx.Queue()
                    proc = ctx.Process(target=_run_case, args=(policy, problem, opts, q))
                    proc.start()
                    out = q.get()
                    proc.join()
                    rows.append({"policy": policy, "jobs": size, "backend": backend, "repeat": rep, **out})
                    if progress:
                        progress(f"[{done}/{total}] {policy} n={size} {backend} rep {rep}: "
                                 f"{out.get('status')} {out.get('total_s', float('nan')):.3f}s")
    return pd.DataFrame(rows)


def summarize(runs: pd.DataFrame, agree_tol: float = 1e-6) -> pd.DataFrame:
    """Medians and spreads (min–max) per (policy, jobs, backend), and cross-backend agreement."""
    if runs.empty:
        return runs
    ok = runs[runs["status"] == "optimal"].copy()
    phases = [c for c in ("build_s", "compile_s", "solve_s", "extract_s", "total_s", "wall_s") if c in ok]
    g = ok.groupby(["policy", "jobs", "backend"])
    summ = g[phases + ["peak_rss_mb", "py_peak_mb", "objective"]].median()
    spread = g["total_s"].agg(lambda s: float(s.max() - s.min())).rename("total_spread_s")
    summ = summ.join(spread).reset_index()
    ref = summ.groupby(["policy", "jobs"])["objective"].transform("median")
    summ["rel_diff_vs_median"] = (summ["objective"] - ref).abs() / np.maximum(ref.abs(), 1e-12)
    summ["agrees"] = summ["rel_diff_vs_median"] <= agree_tol
    fastest = summ.groupby(["policy", "jobs"])["total_s"].transform("min")
    summ["x_fastest"] = summ["total_s"] / fastest
    return summ


def plot_summary(summary: pd.DataFrame, out_dir: Path) -> list[Path]:
    """Log-log plots of total and solve time vs jobs, one line per backend, per policy (a
    :class:`~matplotlib.figure.Figure`, not pyplot: the user's matplotlib backend is left alone)."""
    from matplotlib.figure import Figure

    paths = []
    for policy, df in summary.groupby("policy"):
        fig = Figure(figsize=(10, 4))
        axes = fig.subplots(1, 2)
        for backend, d in df.groupby("backend"):
            d = d.sort_values("jobs")
            axes[0].plot(d["jobs"], d["total_s"], marker="o", label=backend)
            axes[1].plot(d["jobs"], d["solve_s"], marker="o", label=backend)
        for ax, title in zip(axes, ("total (build+compile+solve+extract)", "solve")):
            ax.set_xscale("log")
            ax.set_yscale("log")
            ax.set_xlabel("jobs")
            ax.set_ylabel("seconds (median)")
            ax.set_title(title)
            ax.grid(True, which="both", alpha=0.3)
        axes[0].legend(fontsize=8)
        fig.suptitle(str(policy))
        fig.tight_layout()
        p = out_dir / f"bench_{policy}.png"
        fig.savefig(p, dpi=110)
        paths.append(p)
    return paths


def write_results(runs: pd.DataFrame, summary: pd.DataFrame, out_dir: str | Path) -> list[Path]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    runs.to_csv(out / "runs.csv", index=False)
    summary.to_csv(out / "summary.csv", index=False)
    paths = [out / "runs.csv", out / "summary.csv"]
    if not summary.empty:
        paths += plot_summary(summary, out)
    return paths
