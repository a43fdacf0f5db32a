"""Trace generators are seeded and follow the published distributions; trace files load with clear errors."""
from __future__ import annotations

import json

import numpy as np
import pytest

from policyopt import InputError
from policyopt.sim.traces import gavel_trace, load_trace, save_trace, shockwave_trace


def test_gavel_trace_distribution_and_determinism(gavel) -> None:
    a = gavel_trace(gavel, 4000, 10.0, seed=3, multi_gpu=True, priorities=True, slo_factors=[1.2, 2, 10])
    b = gavel_trace(gavel, 4000, 10.0, seed=3, multi_gpu=True, priorities=True, slo_factors=[1.2, 2, 10])
    assert a == b
    assert a != gavel_trace(gavel, 4000, 10.0, seed=4, multi_gpu=True)
    sf = np.array([j.scale_factor for j in a])
    for s, p in zip((1, 2, 4, 8), (0.7, 0.1, 0.15, 0.05)):
        assert abs((sf == s).mean() - p) < 0.03
    dur = np.array([j.duration_v100 for j in a])
    assert dur.min() >= 60 * 10 ** 1.5 - 1e-6 and dur.max() <= 60 * 10 ** 4 + 1e-6
    assert abs((dur < 60 * 10 ** 3).mean() - 0.8) < 0.03
    gaps = np.diff([j.arrival for j in a])
    assert abs(gaps.mean() - 360.0) < 30.0  # 10 jobs/hour → 6 minutes on average
    assert abs(np.mean([j.weight == 5.0 for j in a]) - 0.2) < 0.03
    ratios = {round(j.slo_seconds / j.duration_v100, 6) for j in a}
    assert ratios == {1.2, 2.0, 10.0}


def test_static_and_shockwave(gavel) -> None:
    s = gavel_trace(gavel, 50, static=True, seed=0)
    assert all(j.arrival == 0.0 for j in s)
    w = shockwave_trace(gavel, 3000, seed=1)
    sizes = np.array([j.extra["size"] for j in w])
    assert abs((sizes == "S").mean() - 0.72) < 0.03
    sf = np.array([j.scale_factor for j in w])
    assert abs((sf == 2).mean() - 0.30) < 0.03
    assert abs(np.diff([j.arrival for j in w]).mean() - 45.0) < 5.0  # 80 jobs/hour


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_trace_round_trip(gavel, tmp_path, suffix) -> None:
    t = gavel_trace(gavel, 30, 20.0, seed=2, multi_gpu=True)
    p = tmp_path / f"trace{suffix}"
    save_trace(t, p)
    back = load_trace(p, gavel)
    assert [(j.id, j.arrival, j.job_type, j.steps) for j in back] == [(j.id, j.arrival, j.job_type, j.steps) for j in t]


def test_trace_errors(gavel, tmp_path) -> None:
    p = tmp_path / "t.json"
    p.write_text(json.dumps([{"arrival": 0, "job_type": "ResNet-18 (batch size 16)#1", "steps": -3}]))
    with pytest.raises(InputError, match=r"trace\[0\]\.steps"):
        load_trace(p, gavel)
    p.write_text(json.dumps([{"arrival": 0, "job_type": "NoSuchModel#1", "steps": 3}]))
    with pytest.raises(InputError, match=r"trace\[0\]\.job_type"):
        load_trace(p, gavel)
    c = tmp_path / "t.csv"
    c.write_text("id,arrival,job_type,steps\n0,abc,ResNet-18 (batch size 16)#1,5\n")
    with pytest.raises(InputError, match=r"trace.csv\[0\]\.arrival"):
        load_trace(c, gavel)
    with pytest.raises(InputError, match="rate"):
        gavel_trace(gavel, 5)
