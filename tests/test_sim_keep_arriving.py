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


def test_keep_arriving_run_measures_the_same_window_with_arrivals_continuing(gavel_dir, tmp_path) -> None:
    """Small form (108 GPUs, 20 jobs at 6 jobs/h, window positions [13, 16)): the continued run measures
    the same job positions as the plain one while more jobs arrive, and its files are named
    ``*_arriving``. (A trace this short cannot cover its window: jobs last up to ~170 h.)"""
    from policyopt.sim import experiments as ex

    args = ["las_single", "--scale", "published", "--jobs", "20", "--rates", "6", "--seeds", "0"]
    assert ex.main([*args, "--output", str(tmp_path), "--keep-arriving", "--workers", "2"]) == 0
    cont = pd.read_csv(tmp_path / "las_single_published_arriving.csv")
    assert list(cont["arm"]) == ["aware", "agnostic"]
    assert (cont["num_jobs"] == 20 * (1 + ex.KEEP_ARRIVING_EXTRA)).all()
    summary = __import__("json").loads((tmp_path / "las_single_published_arriving.json").read_text())
    assert summary["command"].endswith("--scale published --keep-arriving")
    assert not (tmp_path / "las_single_published.csv").exists()
    plain_exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=20, rates=[6.0])
    cont_exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=20, rates=[6.0], keep_arriving=True)
    plain, keep_plain = ex._run_one((plain_exp, 0, 6.0, 0))
    _, keep_cont = ex._run_one((cont_exp, 0, 6.0, 0))
    assert len(keep_plain["jct"]) == len(keep_cont["jct"]) == 16 - 13
    assert plain["avg_jct_hours"] == pytest.approx(float(np.mean(keep_plain["jct"])) / 3600)
    assert cont["avg_jct_hours"].iloc[0] == pytest.approx(float(np.mean(keep_cont["jct"])) / 3600)
