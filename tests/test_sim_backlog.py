"""Steady state of a measured window: jobs in the system over the window's arrivals
(``metrics.mean_active`` / ``metrics.window_backlog``) and the experiment rows that report it."""
from __future__ import annotations

import numpy as np
import pytest


def _brute_mean_active(arrival: np.ndarray, finish: np.ndarray, s: float, e: float) -> float:
    """n(t) sampled on a fine grid (midpoints), unfinished jobs in the system for good."""
    f = np.where(np.isfinite(finish), finish, np.inf)
    t = s + (np.arange(20000) + 0.5) * (e - s) / 20000
    return float(((arrival[None, :] <= t[:, None]) & (t[:, None] < f[None, :])).sum(axis=1).mean())


def test_mean_active_matches_a_sampled_count() -> None:
    from policyopt.sim.metrics import mean_active

    rng = np.random.default_rng(3)
    arrival = np.sort(rng.uniform(0, 100, 40))
    finish = arrival + rng.exponential(20, 40)
    finish[[3, 17]] = np.nan  # never finished: in the system from arrival on
    starts, ends = np.array([0.0, 10.0, 55.0, 90.0]), np.array([30.0, 80.0, 60.0, 200.0])
    got = mean_active(arrival, finish, starts, ends)
    want = [_brute_mean_active(arrival, finish, s, e) for s, e in zip(starts, ends)]
    np.testing.assert_allclose(got, want, rtol=2e-3, atol=2e-3)
    # an empty interval gives n at that instant
    t = float(arrival[5])
    assert mean_active(arrival, finish, np.array([t]), np.array([t]))[0] == \
        ((arrival <= t) & ~(np.nan_to_num(finish, nan=np.inf) <= t)).sum()


def test_window_backlog_tells_a_growing_queue_from_a_steady_one() -> None:
    """Arrivals one per hour; each job stays 5 h (steady: ~5 in the system) or, in the overloaded
    case, a job's stay grows by 0.5 h per arrival (the queue grows linearly)."""
    from policyopt.sim.metrics import window_backlog

    h = 3600.0
    arrival = np.arange(200) * h
    win = (np.arange(200) >= 100) & (np.arange(200) < 150)
    steady = window_backlog(arrival, arrival + 5 * h, win)
    assert steady["active"] == pytest.approx([5.0] * 4, abs=0.3)
    assert abs(steady["active_growth"]) < 0.05
    assert steady["t0_h"] == 100 and steady["t1_h"] == 149 and steady["t2_h"] == 154
    growing = window_backlog(arrival, arrival + (5 + 0.5 * np.arange(200)) * h, win)
    assert growing["active_growth"] > 0.2
    assert growing["active"] == sorted(growing["active"])
    # until the window is done (here: the last arrival comes first) the steady queue stays flat and
    # the growing one keeps growing
    assert abs(steady["active_trend"]) < 0.05 and steady["te_h"] == 154
    assert growing["te_h"] == 199 and growing["active_trend"] > growing["active_growth"] > 0.2
    assert growing["active_end"] == pytest.approx(
        _brute_mean_active(arrival, arrival + (5 + 0.5 * np.arange(200)) * h, (199 - 12.25) * h, 199 * h), rel=1e-3)
    # a window job unfinished: no finish time, no drain average
    fin = arrival + 5 * h
    fin[120] = np.nan
    open_ = window_backlog(arrival, fin, win)
    assert open_["t2_h"] is None and open_["active_drain"] is None


def test_window_backlog_needs_a_window() -> None:
    from policyopt.errors import InputError
    from policyopt.sim.metrics import window_backlog

    with pytest.raises(InputError, match="in_window"):
        window_backlog(np.arange(3.0), np.arange(3.0) + 1, np.zeros(3, bool))


def test_experiment_rows_report_the_backlog(gavel_dir) -> None:
    """A published-scale row (shrunk to 30 jobs) carries the quarter averages, which agree with the
    per-job arrival/finish times of the same run."""
    from policyopt.sim import experiments as ex

    exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=30, rates=[6.0])
    row, keep = ex._run_one((exp, 0, 6.0, 0))
    for k in ("active_q1", "active_q2", "active_q3", "active_q4", "active_growth", "active_end", "active_trend",
              "window_done_h", "last_arrival_h"):
        assert k in row
    assert row["active_q1"] > 0 and row["window_done_h"] > 0
    assert row["active_growth"] == pytest.approx(row["active_q4"] / row["active_q1"] - 1)
    assert keep["active"].shape == keep["util"].shape and row["cpu_seconds"] > 0
