"""Shared fixtures: the Gavel data directory (skips with a clear reason when missing).

Property tests run under the hypothesis profile ``repeatable`` by default: examples derived from
each test's name (``derandomize``), no per-example deadline, so that a run's verdict does not
depend on luck or on the machine's load. ``HYPOTHESIS_PROFILE=explore`` searches afresh with
more examples (new failures found there become ``@example`` cases).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("repeatable", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("explore", max_examples=500, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))

ROOT = Path(__file__).resolve().parents[1]
GAVEL_DIR = ROOT.parent / "shared" / "data" / "gavel"


@pytest.fixture(scope="session")
def gavel_dir() -> Path:
    if not (GAVEL_DIR / "simulation_throughputs.json").exists():
        pytest.skip(f"Gavel throughput data missing: expected {GAVEL_DIR}/simulation_throughputs.json "
                    "(../shared/data/gavel beside the checkout)")
    return GAVEL_DIR


@pytest.fixture(scope="session")
def gavel(gavel_dir: Path):
    from policyopt.data import load_gavel

    return load_gavel(gavel_dir / "simulation_throughputs.json")


@pytest.fixture
def no_price_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The linking-price path (``policyopt.solvers.prices``) off: every LP goes to HiGHS and a kept
    max-sum model is updated in place — for tests of those mechanisms themselves."""
    from policyopt.solvers import prices

    monkeypatch.setattr(prices, "detect", lambda sf: None)
    monkeypatch.setattr(prices, "plausible", lambda sf: False)


@pytest.fixture
def no_transport_route(monkeypatch: pytest.MonkeyPatch) -> None:
    """Max-sum throughput and max-min fairness solved the usual way at every size (built, compiled,
    their models kept for re-solves): for tests of the kept-model machinery on problems small enough
    that the policy would otherwise answer from the space's arrays (``policyopt.transport_route``:
    both policies up to ``TRANSPORT_MAX_JOBS`` jobs, max-min's first problem up to
    ``MAX_MIN_MAX_JOBS``, max-sum's up to ``MAX_SUM_MAX_JOBS``), and max-sum's first problem of repeated jobs by
    its class transportation LP (``policyopt.class_transport``, whose re-solves,
    ``policyopt.transport_resolve``, then never start). The routes on the same inputs:
    tests/test_routes_on_kept_model_inputs.py."""
    from policyopt import class_transport, solver_api, transport_route

    monkeypatch.setattr(solver_api, "TRANSPORT_MAX_JOBS", 0)
    monkeypatch.setattr(transport_route, "MAX_MIN_MAX_JOBS", 0)
    monkeypatch.setattr(transport_route, "MAX_SUM_MAX_JOBS", 0)
    monkeypatch.setattr(class_transport, "applies", lambda policy, n: False)


@pytest.fixture
def max_min_arrays_as_max_sum(monkeypatch: pytest.MonkeyPatch) -> None:
    """Max-min fairness's and max-sum throughput's first problems take the arrays route only up to
    ``TRANSPORT_MAX_JOBS`` jobs, not up to ``transport_route.MAX_MIN_MAX_JOBS`` / ``MAX_SUM_MAX_JOBS``:
    for tests of the kept model's re-solves that start from a first call of a few hundred jobs
    building and keeping the model."""
    from policyopt import solver_api, transport_route

    monkeypatch.setattr(transport_route, "MAX_MIN_MAX_JOBS", solver_api.TRANSPORT_MAX_JOBS)
    monkeypatch.setattr(transport_route, "MAX_SUM_MAX_JOBS", solver_api.TRANSPORT_MAX_JOBS)
