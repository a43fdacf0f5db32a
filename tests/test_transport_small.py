"""The transportation LP's exact method on Python lists (policyopt.solvers.transport_small) and the
array method without a basis (``transport_exact.solve(basis=False)``): every answer against HiGHS
on the same LP (objective to 1e-9 relative, the point within every row and bound to 1e-9), the same
point as the array method's, its declines answered by the next route, and max-sum throughput's
small problems through the policy against a cold HiGHS simplex solve of the whole LP."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt import get_policy
from policyopt.solvers import transport, transport_exact, transport_small

TOL = 1e-9


def random_lp(rng: np.random.Generator, n: int, K: int, levels: int = 0, p_zero: float = 0.2,
              cap: float = 0.5, unit: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` jobs × ``K`` types; ``levels`` > 0: values from that many levels (ties between jobs
    and types), a share ``p_zero`` of entries not viable (``-inf`` or 0); capacities ``cap`` of
    the total scale; values times ``unit``."""
    if levels:
        V = rng.choice(rng.uniform(0.5, 20.0, levels), size=(n, K))
    else:
        V = rng.uniform(0.1, 20.0, (n, K))
    gone = rng.random((n, K)) < p_zero
    V[gone] = np.where(rng.random(int(gone.sum())) < 0.5, -np.inf, 0.0)
    s = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    C = np.floor(rng.uniform(0.2, 1.8, K) * cap * s.sum() / K)
    return V * unit, s, C


def check(V: np.ndarray, s: np.ndarray, C: np.ndarray, start: np.ndarray | None = None) -> transport.TransportAnswer:
    """The list method answers, equal to HiGHS's optimum and to the array method's point, feasible."""
    ref = transport.solve(V, s, C, exact=False)
    assert ref is not None
    got = transport_small.solve(V, s, C, start)
    assert got is not None, "the list method declined"
    assert got.basic is None and got.cols is None
    scale = max(1.0, abs(ref.objective))
    assert got.objective == pytest.approx(ref.objective, rel=TOL, abs=TOL * scale if ref.objective == 0 else 0.0)
    x = got.x
    assert x.shape == V.shape and x.min() >= 0.0
    assert x.sum(axis=1).max(initial=0.0) <= 1.0 + TOL
    assert np.all(s @ x <= C + TOL * np.maximum(C, 1.0))
    assert not x[~(V > 0)].any()
    assert float((np.where(V > 0, V, 0.0) * x).sum()) == pytest.approx(got.objective, rel=1e-12, abs=1e-300)
    arrays = transport_exact.solve(V, s, C, start, basis=False)
    assert arrays is not None and arrays.basic is None
    assert np.array_equal(arrays.x, x) and arrays.objective == got.objective
    return got


@pytest.mark.parametrize("seed", range(12))
def test_random_lps(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    n, K = int(rng.integers(1, 120)), int(rng.integers(1, 9))
    check(*random_lp(rng, n, K, int(rng.integers(0, 4)), cap=float(rng.choice([0.05, 0.3, 1.0, 3.0]))))


@settings(max_examples=80, deadline=None)
@given(n=st.integers(1, 70), K=st.integers(1, 6), levels=st.integers(0, 3), p_zero=st.sampled_from([0.0, 0.2, 0.6]),
       cap=st.sampled_from([0.0, 0.1, 0.5, 2.0]), unit=st.sampled_from([1.0, 1e-9, 1e6]),
       seed=st.integers(0, 2**32 - 1))
def test_property_equal_to_highs(n: int, K: int, levels: int, p_zero: float, cap: float, unit: float,
                                 seed: int) -> None:
    """Any LP of the shape (ties, zero capacities, values of ~1e-9 and ~1e6): HiGHS's optimum."""
    check(*random_lp(np.random.default_rng(seed), n, K, levels, p_zero, cap, unit))


@pytest.mark.parametrize("seed", range(4))
def test_any_start_prices(seed: int) -> None:
    """From any prices (the optimum's, scaled, random, unusable ones) the same optimum."""
    rng = np.random.default_rng(70 + seed)
    V, s, C = random_lp(rng, int(rng.integers(20, 90)), int(rng.integers(1, 5)), int(rng.integers(0, 3)), cap=0.3)
    ref = check(V, s, C)
    K = C.size
    for start in (ref.p, 2.0 * ref.p + 1.0, 0.5 * ref.p, rng.uniform(0, 3 * max(1.0, float(ref.p.max())), K),
                  np.full(K, np.nan), -np.ones(K), np.ones(K + 1)):
        got = check(V, s, C, start)
        assert got.objective == pytest.approx(ref.objective, rel=TOL)


def test_degenerate_cases() -> None:
    """Identical jobs, all types tied, capacities met exactly, not binding, zero, nothing fits."""
    ones = np.ones(6)
    check(np.full((6, 2), 3.0), ones, np.array([2.0, 1.0]))  # identical jobs, tied types
    check(np.array([[2.0, 1.0], [1.0, 2.0], [1.5, 1.5]]), ones[:3], np.array([1.0, 2.0]))  # met exactly
    check(np.array([[2.0, 1.0], [1.0, 2.0]]), ones[:2], np.array([5.0, 5.0]))  # not binding
    check(np.array([[2.0, 1.0], [1.0, 2.0]]), ones[:2], np.zeros(2))  # no capacity
    check(np.array([[-np.inf, 0.0], [0.0, -1.0]]), ones[:2], np.ones(2))  # no column at all
    check(np.array([[4.0], [3.0], [2.0]]), np.array([1.0, 2.0, 4.0]), np.array([3.0]))  # one type


def test_declines_and_the_next_route_answers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the list method declines (non-finite data, a job with a column and no scale factor, no
    job, too many types, its step cap) it returns None; ``transport.solve(basis=False)`` then
    answers by the array method or HiGHS, certified."""
    rng = np.random.default_rng(5)
    V, s, C = random_lp(rng, 30, 3, cap=0.3)
    for bad in (np.nan, np.inf):
        W = V.copy()
        W[4, 1] = bad
        assert transport_small.solve(W, s, C) is None
    for bad_s in (0.0, -1.0, np.inf, np.nan):
        t = s.copy()
        t[int(np.argmax(V.max(axis=1)))] = bad_s
        assert transport_small.solve(V, t, C) is None
    for bad_c in (np.nan, np.inf, -1.0):
        D = C.copy()
        D[0] = bad_c
        assert transport_small.solve(V, s, D) is None
    assert transport_small.solve(np.zeros((0, 3)), np.zeros(0), np.ones(3)) is None
    assert transport_small.solve(np.zeros((3, 0)), np.ones(3), np.zeros(0)) is None
    wide = random_lp(rng, 4, transport_exact.MAX_TYPES + 1, cap=0.2)
    assert transport_small.solve(*wide) is None
    monkeypatch.setattr(transport_small, "MAX_STEPS", 0)
    monkeypatch.setattr(transport_small, "STEPS_PER_TYPE", 0)
    assert transport_small.solve(V, s, C) is None
    ans = transport.solve(V, s, C, basis=False)
    assert ans is not None and ans.objective == pytest.approx(transport.solve(V, s, C, exact=False).objective,
                                                              rel=TOL)


def test_a_refused_certificate_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The list method's answer stands only where the certificate holds."""
    V, s, C = random_lp(np.random.default_rng(9), 20, 3, cap=0.3)
    certify = transport.certify
    seen: list[bool] = []

    def refuse_first(*a: Any) -> Any:
        got = certify(*a)
        seen.append(got[0])
        return (False, *got[1:]) if len(seen) == 1 else got

    monkeypatch.setattr(transport, "certify", refuse_first)
    assert transport_small.solve(V, s, C) is None
    seen.clear()
    ans = transport.solve(V, s, C, basis=False)
    assert ans is not None and len(seen) == 2  # (the list method's answer refused, the array method's taken)


def test_the_array_method_without_a_basis() -> None:
    """``transport_exact.solve(basis=False)``: the point and objective of the basis run, no basis."""
    rng = np.random.default_rng(11)
    for _ in range(20):
        V, s, C = random_lp(rng, int(rng.integers(1, 150)), int(rng.integers(1, 7)), int(rng.integers(0, 3)),
                            cap=float(rng.choice([0.1, 0.5, 2.0])))
        full = transport_exact.solve(V, s, C)
        lean = transport_exact.solve(V, s, C, basis=False)
        assert full is not None and lean is not None
        assert lean.basic is None and lean.cols is None
        assert np.array_equal(full.x, lean.x) and full.objective == lean.objective
        ok, *_ = transport.certify(V, s, C, lean.x, lean.p)
        assert ok


def _workload() -> Any:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "policies_bench.py"
    spec = importlib.util.spec_from_file_location("policies_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.workload


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("n", [32, 64, 80])
def test_the_policy_answers_by_lists_on_gavel_workloads(gavel: Any, monkeypatch: pytest.MonkeyPatch, n: int,
                                                        normalize: bool) -> None:
    """Max-sum throughput's small problems are answered by the list method, equal to a cold HiGHS
    simplex solve of the whole LP (objective to 1e-9, allocation within every row to 1e-9)."""
    from test_transport_route import check as check_whole

    answered: list[bool] = []
    solve = transport_small.solve

    def spy(*a: Any) -> Any:
        got = solve(*a)
        answered.append(got is not None)
        return got

    monkeypatch.setattr(transport_small, "solve", spy)
    workload = _workload()
    for seed in (0, 1, 2):
        p = workload(gavel, n, seed=seed)
        answered.clear()
        check_whole(get_policy("max_sum_throughput", normalize=normalize).solve(p), p, normalize)
        assert answered == [True]
