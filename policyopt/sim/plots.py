"""Matplotlib figures of simulations, written to files.

Figures are :class:`matplotlib.figure.Figure` objects, never pyplot's: drawing one does not
switch, or even consult, the user's matplotlib backend (``savefig`` renders with Agg on its own).

* :func:`jct_cdf_figure` — CDF of JCT (steady-state window) for one or more runs;
* :func:`utilization_figure` — GPU utilization per round over simulated time;
* :func:`resources_figure` — GPU, CPU-core and host-memory utilization per round (reconfiguration
  simulations);
* :func:`jct_vs_load_figure` — average JCT against the input job rate, one line per policy, with
  the spread over seeds.
"""
from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any, Mapping

import numpy as np

__all__ = ["jct_cdf_figure", "utilization_figure", "active_jobs_figure", "resources_figure", "jct_vs_load_figure",
           "bar_figure"]


def _subplots(*args: Any, figsize: tuple[float, float], **kwargs: Any) -> tuple[Any, Any]:
    """``(figure, axes)`` like ``pyplot.subplots``, without pyplot (module docstring)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*args, **kwargs)


def _save(fig: Any, path: str | Path) -> Path:
    """Lay out and write (120 dpi) a figure; returns its path."""
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    return path


def jct_cdf_figure(runs: Mapping[str, Any], path: str | Path, window_only: bool = True) -> Path:
    """CDF of JCT in hours; ``runs`` maps a label to a :class:`~policyopt.sim.SimResult`."""
    fig, ax = _subplots(figsize=(5, 3.5))
    for label, res in runs.items():
        df = res.jobs[res.jobs["in_window"]] if window_only else res.jobs
        x = np.sort(df["jct"].to_numpy(float)) / 3600.0
        x = x[np.isfinite(x)]
        if x.size:
            ax.plot(x, np.arange(1, x.size + 1) / x.size, label=label)
    ax.set_xscale("log")
    ax.set_xlabel("JCT (hours)")
    ax.set_ylabel("fraction of jobs")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def utilization_figure(runs: Mapping[str, Any], path: str | Path) -> Path:
    """GPU utilization per round (busy GPU-seconds / available) against simulated hours."""
    fig, ax = _subplots(figsize=(6, 3.2))
    for label, res in runs.items():
        r = res.rounds
        if not len(r):
            continue
        t = (r["start"].to_numpy(float) - r["start"].iloc[0]) / 3600.0
        u = r["utilization"].to_numpy(float)
        k = max(1, len(u) // 200)  # light smoothing for long runs
        if k > 1:
            u = np.convolve(u, np.ones(k) / k, mode="same")
        ax.plot(t, u, label=label, lw=1)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("GPU utilization")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def active_jobs_figure(runs: Mapping[str, Any], path: str | Path) -> Path:
    """Jobs in the system (arrived, not finished) at each round's start against simulated hours: flat
    while a policy keeps up with the arrivals (steady state), rising while its queue grows."""
    fig, ax = _subplots(figsize=(6, 3.2))
    for label, res in runs.items():
        r = res.rounds
        if not len(r) or "active_jobs" not in r or not np.isfinite(r["active_jobs"].to_numpy(float)).any():
            continue
        t = (r["start"].to_numpy(float) - r["start"].iloc[0]) / 3600.0
        ax.plot(t, r["active_jobs"].to_numpy(float), label=label, lw=1)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("jobs in the system")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def resources_figure(res: Any, path: str | Path) -> Path:
    """Allocated share of the cluster's GPUs, CPU cores and host memory per round (held time over
    round length) against simulated hours; ``res.rounds`` needs ``utilization``, ``cpu_utilization``
    and ``host_mem_utilization``."""
    fig, ax = _subplots(figsize=(6, 3.2))
    r = res.rounds
    if len(r):
        t = (r["start"].to_numpy(float) - r["start"].iloc[0]) / 3600.0
        for col, label in (("utilization", "GPUs"), ("cpu_utilization", "CPU cores"),
                           ("host_mem_utilization", "host memory")):
            ax.step(t, r[col].to_numpy(float), where="post", label=label, lw=1)
    ax.set_xlabel("simulated time (hours)")
    ax.set_ylabel("allocated fraction")
    ax.set_ylim(0, 1.05)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def jct_vs_load_figure(table: Any, path: str | Path, *, x: str = "rate", y: str = "avg_jct_hours",
                       hue: str = "policy", xlabel: str = "input job rate (jobs/hour)",
                       ylabel: str = "average JCT (hours)", title: str | None = None) -> Path:
    """Mean of ``y`` over seeds against ``x``, one line per ``hue`` (error bars: min–max over seeds)."""
    fig, ax = _subplots(figsize=(5, 3.5))
    for name, g in table.groupby(hue, sort=False):
        agg = g.groupby(x)[y].agg(["mean", "min", "max"]).sort_index()
        xs = agg.index.to_numpy(float)
        ax.errorbar(xs, agg["mean"], yerr=[agg["mean"] - agg["min"], agg["max"] - agg["mean"]],
                    marker="o", capsize=3, label=str(name))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(textwrap.fill(title, 60), fontsize=8)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def bar_figure(table: Any, path: str | Path, *, metrics: list[str], hue: str = "policy",
               title: str | None = None) -> Path:
    """Mean (over seeds) of each metric per policy, one panel per metric (error bars: min–max)."""
    fig, axes = _subplots(1, len(metrics), figsize=(3.2 * len(metrics), 3.2), squeeze=False)
    for ax, m in zip(axes[0], metrics):
        agg = table.groupby(hue, sort=False)[m].agg(["mean", "min", "max"])
        xs = np.arange(len(agg))
        ax.bar(xs, agg["mean"], yerr=[agg["mean"] - agg["min"], agg["max"] - agg["mean"]], capsize=3)
        ax.set_xticks(xs)
        ax.set_xticklabels([str(i) for i in agg.index], rotation=30, ha="right", fontsize=7)
        ax.set_title(m, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    if title:
        fig.suptitle(textwrap.fill(title, 40 * len(metrics)), fontsize=9)
    return _save(fig, path)
