"""Metrics of a simulation: JCT over a steady-state window, finish-time fairness, cost, SLOs,
migrations, utilization and policy solve times.

**Steady-state window.** Gavel reports the average JCT of jobs 4000–5000 of a long continuous
trace: the first 4000 jobs warm the cluster up, and arrivals continue while the window's jobs run.
Our traces are shorter (hundreds to a few thousand jobs), so the window is proportional: by
default jobs at arrival positions ``[⌊0.25·N⌋, ⌊0.75·N⌋)`` — the first quarter fills the cluster
(queues still growing), the last quarter drains it (arrivals stop, so late jobs see less
contention than in steady state); both are excluded. ``window=(a, b)`` changes the fractions.

**Finish-time fairness** (Themis; as in Gavel): ``ρ_m = JCT_m / JCT_m^iso`` where
``JCT_m^iso = steps_m / thr(m, X_iso)`` is the job's duration on an isolated ``1/n̄_m`` share of
the cluster: ``X_iso[m, c] = count_c / (n̄_m · sf_m)`` on every type the job can use (rows scaled
down to a total of at most 1), and ``n̄_m`` the time-averaged number of jobs in the system
(arrived, not finished) over the job's lifetime ``[arrival_m, finish_m]``. ``ρ ≤ 1`` means the job
did at least as well as with its fair isolated share.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..errors import InputError

__all__ = ["steady_state_window", "isolated_throughput", "average_contention", "mean_active", "window_backlog",
           "summary", "percentiles", "compute_metrics", "realized_over_planned", "DEFAULT_WINDOW"]

DEFAULT_WINDOW: tuple[float, float] = (0.25, 0.75)


def realized_over_planned(planned: np.ndarray, held: np.ndarray, round_seconds: float) -> dict[str, Any]:
    """Per job ``held / planned``: seconds it held GPUs over ``Σ_rounds X_j · (time active)``, the time its
    allocation planned for it. Over jobs planned at least one round's worth: count, mean, p10 and the
    worst (smallest) ratio. Below 1 the rounds did not realize the plan (e.g. GPU counts that do not
    pack); above 1 the work-conserving mechanism gave it idle GPUs."""
    planned = np.asarray(planned, float)
    ok = planned >= round_seconds
    r = np.asarray(held, float)[ok] / planned[ok]
    if not r.size:
        return {"jobs": 0, "mean": None, "p10": None, "worst": None}
    return {"jobs": int(r.size), "mean": float(r.mean()), "p10": float(np.percentile(r, 10)),
            "worst": float(r.min())}


def steady_state_window(num_jobs: int, window: Sequence[float] = DEFAULT_WINDOW) -> tuple[int, int]:
    """Arrival positions ``[lo, hi)`` of the steady-state window (module docstring); never empty."""
    a, b = (float(window[0]), float(window[1])) if len(window) == 2 else (np.nan, np.nan)
    if not (0.0 <= a < b <= 1.0):
        raise InputError("window", list(window), "must be two fractions 0 <= a < b <= 1")
    lo = int(np.floor(a * num_jobs))
    hi = max(lo + 1, int(np.floor(b * num_jobs)))
    return lo, min(hi, num_jobs)


def isolated_throughput(T: np.ndarray, scale: np.ndarray, counts: np.ndarray, n: np.ndarray | float) -> np.ndarray:
    """``thr(m, X_iso)`` with ``X_iso[m,c] = count_c/(n_m·sf_m)`` on usable types, rows capped at 1.

    ``T`` is jobs × types (consolidated throughputs), ``counts`` per type, ``n`` per job (or one number).
    """
    n_jobs = np.maximum(np.broadcast_to(np.asarray(n, float), (T.shape[0],)), 1.0)
    usable = (T > 0) & (scale[:, None] <= counts[None, :])
    x = np.where(usable, counts[None, :] / (n_jobs[:, None] * scale[:, None]), 0.0)
    tot = x.sum(axis=1)
    x /= np.maximum(tot, 1.0)[:, None]
    return (T * x).sum(axis=1)


def average_contention(arrival: np.ndarray, finish: np.ndarray) -> np.ndarray:
    """``n̄_m``: time-average over ``[arrival_m, finish_m]`` of the number of jobs in the system.

    ``n(t) = #{k: arrival_k ≤ t < finish_k}`` is piecewise constant; its integral ``F`` is evaluated
    at every event time once (sorted), and ``n̄_m = (F(finish_m) − F(arrival_m))/(finish_m − arrival_m)``.
    Unfinished jobs (NaN finish) get NaN.
    """
    ok = np.isfinite(finish)
    times = np.concatenate([arrival[ok], finish[ok]])
    delta = np.concatenate([np.ones(ok.sum()), -np.ones(ok.sum())])
    order = np.lexsort((delta, times))  # at equal times, departures (-1) first
    times, delta = times[order], delta[order]
    level = np.cumsum(delta)  # n(t) just after each event
    F = np.concatenate([[0.0], np.cumsum(level[:-1] * np.diff(times))]) if times.size else np.zeros(0)

    def integral(t: np.ndarray) -> np.ndarray:
        k = np.searchsorted(times, t, side="right") - 1
        k = np.clip(k, 0, max(times.size - 1, 0))
        return F[k] + level[k] * (t - times[k])

    out = np.full(arrival.size, np.nan)
    if ok.any():
        span = finish[ok] - arrival[ok]
        val = integral(finish[ok]) - integral(arrival[ok])
        out[ok] = np.where(span > 0, val / np.where(span > 0, span, 1.0), 1.0)
    return out


def mean_active(arrival: np.ndarray, finish: np.ndarray, start: np.ndarray, end: np.ndarray) -> np.ndarray:
    """Time-average of ``n(t) = #{k: arrival_k <= t < finish_k}`` over each interval ``[start_i, end_i]``
    (``n(start_i)`` where the interval is empty); an unfinished job (NaN or infinite finish) is counted
    as in the system from its arrival on."""
    arrival = np.asarray(arrival, float)
    finish = np.where(np.isfinite(finish), np.asarray(finish, float), np.inf)
    arr_sorted, fin_sorted = np.sort(arrival), np.sort(finish[np.isfinite(finish)])

    def integral(t: np.ndarray) -> np.ndarray:
        # ∫_{-inf}^{t} n = Σ_k (t - a_k)^+ - Σ_k (t - f_k)^+ , by prefix sums of the sorted times
        def ramp(times: np.ndarray) -> np.ndarray:
            k = np.searchsorted(times, t, side="right")
            csum = np.concatenate(([0.0], np.cumsum(times)))
            return k * t - csum[k]
        return ramp(arr_sorted) - ramp(fin_sorted)

    start, end = np.asarray(start, float), np.asarray(end, float)
    span = end - start
    point = (np.searchsorted(arr_sorted, start, side="right")
             - np.searchsorted(fin_sorted, start, side="right")).astype(float)
    return np.where(span > 0, (integral(end) - integral(start)) / np.where(span > 0, span, 1.0), point)


def window_backlog(arrival: np.ndarray, finish: np.ndarray, in_window: np.ndarray, parts: int = 4) -> dict[str, Any]:
    """Whether the measured window ran in steady state: jobs in the system over the window's arrivals.

    With ``t0, t1`` the first and last arrival of the window's jobs and ``t2`` the last finish among
    them, returns (hours from the first arrival of the trace) ``t0_h``, ``t1_h``, ``t2_h`` (None when a
    window job is unfinished), ``active[q]`` (:func:`mean_active` over the ``q``-th of ``parts`` equal
    slices of ``[t0, t1]``), ``active_drain`` (over ``[t1, t2]``), ``active_growth`` = last slice's
    mean / first slice's − 1, and ``active_end`` (over the slice-long span that ends at ``te`` =
    ``t2`` or the last arrival, whichever is first; ``te_h``) with ``active_trend`` = ``active_end`` /
    first slice's − 1. In steady state the number in the system does not trend while the window's
    jobs arrive (growth near 0) nor until the window is done (trend near 0); an overloaded policy's
    queue grows (growth, trend well above 0). A flat window with a rising trend is a queue that grows
    slower than the window's span shows."""
    arrival = np.asarray(arrival, float)
    finish = np.asarray(finish, float)
    win = np.asarray(in_window, bool)
    if not win.any():
        raise InputError("in_window", 0, "the window has no jobs")
    origin = float(arrival.min())
    t0, t1 = float(arrival[win].min()), float(arrival[win].max())
    done = bool(np.isfinite(finish[win]).all())
    t2 = float(finish[win].max()) if done else np.nan
    edges = np.linspace(t0, t1, parts + 1)
    act = mean_active(arrival, finish, edges[:-1], edges[1:])
    drain = mean_active(arrival, finish, np.array([t1]), np.array([t2]))[0] if done else np.nan
    te = min(t2, float(arrival.max())) if done else float(arrival.max())
    end = mean_active(arrival, finish, np.array([max(te - (t1 - t0) / parts, t0)]), np.array([te]))[0]
    h = 3600.0
    return {"t0_h": (t0 - origin) / h, "t1_h": (t1 - origin) / h, "t2_h": (t2 - origin) / h if done else None,
            "active": [float(a) for a in act], "active_drain": float(drain) if done else None,
            "active_growth": float(act[-1] / act[0] - 1.0) if act[0] > 0 else None,
            "te_h": (te - origin) / h, "active_end": float(end),
            "active_trend": float(end / act[0] - 1.0) if act[0] > 0 else None}


def percentiles(x: np.ndarray) -> dict[str, float | None]:
    """mean / p50 / p90 / p99 / max of the finite entries (None when there are none)."""
    x = np.asarray(x, float)
    x = x[np.isfinite(x)]
    if not x.size:
        return {"mean": None, "p50": None, "p90": None, "p99": None, "max": None}
    return {"mean": float(x.mean()), "p50": float(np.percentile(x, 50)), "p90": float(np.percentile(x, 90)),
            "p99": float(np.percentile(x, 99)), "max": float(x.max())}


def summary(x: np.ndarray) -> dict[str, float | int | None]:
    """count, total and :func:`percentiles` of ``x``."""
    x = np.asarray(x, float)
    return {"count": int(x.size), "total": float(x.sum()) if x.size else 0.0, **percentiles(x)}


def compute_metrics(jobs: Any, rounds: Any, recomputes: Any, *, window: Sequence[float],
                    available_gpu_seconds: float, extra: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``metrics.json`` dictionary from the per-job, per-round and per-recompute DataFrames.

    ``utilization`` = GPU-seconds held by running jobs (including checkpoint/restore time) over the
    GPU-seconds available (non-failed GPUs) from the first arrival to the end of the simulation;
    ``useful_utilization`` counts only time spent making progress. ``policy_solve_seconds``
    summarizes the policy's own time per recomputation (build + compile + solve + extract).
    """
    n = len(jobs)
    lo, hi = steady_state_window(n, window)
    jct = jobs["jct"].to_numpy(float)
    win = jct[lo:hi]
    done = np.isfinite(jct)
    makespan = float(np.nanmax(jobs["finish"].to_numpy(float)) - jobs["arrival"].min()) if done.any() else None
    slo = jobs["slo_seconds"].to_numpy(float)
    has_slo = np.isfinite(slo)
    missed = has_slo & ~(jct <= slo + 1e-6)
    rho = jobs["rho"].to_numpy(float)
    solve = recomputes["policy_seconds"].to_numpy(float) if len(recomputes) else np.zeros(0)
    busy = float(rounds["busy_gpu_seconds"].sum()) if len(rounds) else 0.0
    useful = float(rounds["compute_gpu_seconds"].sum()) if len(rounds) else 0.0
    out: dict[str, Any] = {
        "num_jobs": n,
        "completed": int(done.sum()),
        "steady_state_window": {"first": lo, "last": hi - 1, "count": hi - lo,
                                "job_ids": [str(jobs["id"].iloc[lo]), str(jobs["id"].iloc[hi - 1])],
                                "fractions": [float(window[0]), float(window[1])],
                                "completed": int(np.isfinite(win).sum()),
                                "rule": "jobs at arrival positions [floor(a*N), floor(b*N))"},
        "avg_jct": float(np.nanmean(win)) if np.isfinite(win).any() else None,
        "p50_jct": percentiles(win)["p50"],
        "p99_jct": percentiles(win)["p99"],
        "jct_all": percentiles(jct),
        "makespan": makespan,
        "migrations": int(jobs["migrations"].sum()),
        "preemptions": int(jobs["preemptions"].sum()),
        "overhead_seconds": float(jobs["overhead_seconds"].sum()),
        "utilization": busy / available_gpu_seconds if available_gpu_seconds > 0 else None,
        "useful_utilization": useful / available_gpu_seconds if available_gpu_seconds > 0 else None,
        "ftf_rho": {**percentiles(rho[lo:hi]), "frac_above_1": float(np.mean(rho[lo:hi][np.isfinite(rho[lo:hi])] > 1.0))
                    if np.isfinite(rho[lo:hi]).any() else None},
        "ftf_rho_all": percentiles(rho),
        "total_cost": float(jobs["cost"].sum()),
        "slo": {"with_slo": int(has_slo.sum()), "violations": int(missed.sum()),
                "fraction": float(missed.sum() / has_slo.sum()) if has_slo.any() else None},
        "policy_solve_seconds": summary(solve),
        "rounds": int(len(rounds)),
    }
    if extra:
        out.update(extra)
    return out
