"""``--keep-arriving``: the trace continued by more jobs of the same generator and rate, the measured
window keeping its job positions, so new jobs keep arriving while the window runs."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest


def test_continue_arrivals_keeps_the_trace_and_continues_the_poisson_process(gavel) -> None:
    from policyopt.sim.experiments import _more_seed, continue_arrivals
    from policyopt.sim.traces import gavel_trace

    base = gavel_trace(gavel, 50, 6.0, seed=4)
    more = gavel_trace(gavel, 101, 6.0, seed=_more_seed(4))
    out = continue_arrivals(base, more)
    assert out[:50] == base and len(out) == 150
    assert [j.id for j in out] == [str(i) for i in range(150)]
    arr = np.array([j.arrival for j in out])
    assert np.all(np.diff(arr) >= 0) and arr[50] > arr[49]
    # the added gaps are the continuing trace's own exponential gaps
    np.testing.assert_allclose(np.diff(arr[49:]), np.diff([j.arrival for j in more]))
    assert [j.job_type for j in out[50:]] == [j.job_type for j in more[1:]]
    assert _more_seed(4) != _more_seed(5) and _more_seed(4) != 4


def test_keep_arriving_definition_and_errors() -> None:
    from policyopt.errors import InputError
    from policyopt.sim import experiments as ex

    exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", keep_arriving=True)
    assert exp.trace["jobs"] == 6000 and exp.trace["extra_jobs"] == ex.KEEP_ARRIVING_EXTRA * 6000
    for name in ("makespan", "cost"):  # a static trace; a trace simulated to the end
        with pytest.raises(InputError, match="keep_arriving"):
            ex.scaled(ex.EXPERIMENTS[name], keep_arriving=True)


def test_keep_arriving_run_measures_the_same_window_with_arrivals_continuing(gavel_dir, tmp_path,
                                                                             monkeypatch) -> None:
    """Small form (108 GPUs, 20 jobs at 6 jobs/h, window positions [13, 16)): the continued run measures
    the same job positions as the plain one while more jobs arrive, and its files are named
    ``*_arriving``. (One chunk of 40 more jobs cannot cover a window whose jobs last up to ~170 h; the
    runs again with more chunks are the next test's.)"""
    from policyopt.sim import experiment_runner
    from policyopt.sim import experiments as ex

    monkeypatch.setattr(experiment_runner, "KEEP_ARRIVING_MAX_CHUNKS", 1)  # read where the runs are made
    args = ["las_single", "--scale", "published", "--jobs", "20", "--rates", "6", "--seeds", "0"]
    assert ex.main([*args, "--output", str(tmp_path), "--keep-arriving"]) == 0
    cont = pd.read_csv(tmp_path / "las_single_published_arriving.csv")
    assert list(cont["arm"]) == ["aware", "agnostic"]
    assert (cont["num_jobs"] == 20 * (1 + ex.KEEP_ARRIVING_EXTRA)).all()
    summary = __import__("json").loads((tmp_path / "las_single_published_arriving.json").read_text())
    assert summary["command"].endswith("--seeds 0 --scale published --jobs 20 --rates 6.0 --keep-arriving")
    assert not (tmp_path / "las_single_published.csv").exists()
    # --replot --keep-arriving redraws from the _arriving CSV; without the flag there is no such CSV here
    (tmp_path / "las_single_published_arriving_bars.png").unlink()
    replot = ["las_single", "--replot", "--scale", "published", "--output", str(tmp_path)]
    assert ex.main([*replot, "--keep-arriving"]) == 0
    assert (tmp_path / "las_single_published_arriving_bars.png").exists()
    assert ex.main(replot) == 2 and not (tmp_path / "las_single_published_bars.png").exists()
    plain_exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=20, rates=[6.0])
    cont_exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=20, rates=[6.0], keep_arriving=True)
    plain, keep_plain = ex._run_one((plain_exp, 0, 6.0, 0))
    _, keep_cont = ex._run_one((cont_exp, 0, 6.0, 0))
    assert len(keep_plain["jct"]) == len(keep_cont["jct"]) == 16 - 13
    assert plain["avg_jct_hours"] == pytest.approx(float(np.mean(keep_plain["jct"])) / 3600)
    assert cont["avg_jct_hours"].iloc[0] == pytest.approx(float(np.mean(keep_cont["jct"])) / 3600)


def test_keep_arriving_runs_again_until_jobs_arrive_past_the_window(gavel_dir) -> None:
    """As in Gavel's simulator (jobs generated until ``jobs_to_complete`` are done): a window that outlasts
    the trace's arrivals (20 jobs at 6 jobs/h plus one chunk of 40: ~10 h of arrivals, window jobs of up
    to ~170 h) is run again with more chunks until new jobs arrive up to its last finish."""
    from policyopt.sim import experiments as ex

    exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=20, rates=[6.0], keep_arriving=True)
    row, keep = ex._run_one((exp, 0, 6.0, 0))
    extra = 20 * ex.KEEP_ARRIVING_EXTRA
    assert row["arrivals_cover_window"] and row["last_arrival_h"] >= row["window_done_h"]
    assert row["num_jobs"] > 20 + extra and (row["num_jobs"] - 20) % extra == 0
    assert len(keep["jct"]) == 16 - 13


def test_a_longer_continuation_keeps_the_shorter_one(gavel) -> None:
    """Chunk k of the continuation has its own seed: 3 chunks begin with the 1-chunk trace, so a run
    repeated with more chunks sees the same jobs up to the end of the shorter trace."""
    from policyopt.sim import experiments as ex

    exp = ex.scaled(ex.EXPERIMENTS["las_multi"], "published", jobs=30, rates=[2.0], keep_arriving=True)
    one = ex._make_trace(exp, 1, 2.0, gavel, chunks=1)
    three = ex._make_trace(exp, 1, 2.0, gavel, chunks=3)
    assert len(one) == 30 + 60 and len(three) == 30 + 3 * 60
    assert three[:len(one)] == one
    assert [j.id for j in three] == [str(i) for i in range(len(three))]
    assert np.all(np.diff([j.arrival for j in three]) >= 0)
