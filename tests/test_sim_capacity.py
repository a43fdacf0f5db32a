"""``policyopt.sim.capacity``: the fluid capacity (jobs/hour) of a cluster under Gavel's generator."""
from __future__ import annotations

import numpy as np
import pytest


def test_mean_duration_matches_the_generator() -> None:
    from policyopt.sim.capacity import mean_gavel_duration
    from policyopt.sim.traces import _durations

    draws = _durations(np.random.default_rng(0), 400_000)
    assert mean_gavel_duration() == pytest.approx(float(draws.mean()), rel=0.01)


def test_one_gpu_type_needs_no_heterogeneity(gavel) -> None:
    """On V100s only every job runs at speed 1: both capacities are 3600·n / (E[D]·E[s])."""
    from policyopt.sim.capacity import fluid_capacity, mean_gavel_duration

    for multi, mean_s in ((False, 1.0), (True, 0.7 + 0.2 + 0.6 + 0.4)):
        cap = fluid_capacity(gavel, {"v100": 36}, multi_gpu=multi)
        want = 3600.0 * 36 / (mean_gavel_duration() * mean_s)
        assert cap["mean_scale_factor"] == pytest.approx(mean_s)
        assert cap["aware_jobs_per_hour"] == pytest.approx(want, rel=1e-6)
        assert cap["agnostic_jobs_per_hour"] == pytest.approx(want, rel=1e-6)


def test_aware_capacity_exceeds_agnostic_on_mixed_types(gavel) -> None:
    from policyopt.sim.capacity import fluid_capacity, gavel_classes

    p, s, r = gavel_classes(gavel, ["v100", "p100", "k80"], True)
    assert p.sum() == pytest.approx(1.0) and np.allclose(r[:, 0], 1.0) and set(s) == {1.0, 2.0, 4.0, 8.0}
    for multi in (False, True):
        cap = fluid_capacity(gavel, {"v100": 36, "p100": 36, "k80": 36}, multi_gpu=multi)
        assert cap["aware_jobs_per_hour"] > 1.1 * cap["agnostic_jobs_per_hour"]
        # at capacity the aware allocation uses every GPU type fully
        assert all(v == pytest.approx(1.0, abs=1e-6) for v in cap["aware_gpu_share_by_type"].values())
        # and it is no more than the cluster at V100 speed
        one = fluid_capacity(gavel, {"v100": 108}, multi_gpu=multi)["aware_jobs_per_hour"]
        assert cap["aware_jobs_per_hour"] < one
