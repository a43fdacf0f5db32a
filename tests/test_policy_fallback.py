"""The documented safe fallback of a policy whose solve ended without an optimum."""
from __future__ import annotations

import numpy as np
import pytest

import policyopt
from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model
from policyopt.policy import get_policy
from policyopt.result import SolveResult, Status


@pytest.fixture
def setup() -> tuple[policyopt.Problem, AllocationSpace, object, int]:
    problem = policyopt.Problem.from_dict({
        "cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 1}}},
        "jobs": [{"id": "A", "throughputs": {"v100": 40.0, "k80": 10.0}},
                 {"id": "B", "throughputs": {"v100": 12.0, "k80": 4.0}},
                 {"id": "C", "throughputs": {"v100": 100.0, "k80": 50.0}}]})
    space = AllocationSpace(problem)
    model = Model()
    X = space.add_allocation(model)
    return problem, space, X, int(X.cols.max()) + 1


def _point(X: object, n_cols: int, values: np.ndarray) -> np.ndarray:
    x = np.zeros(n_cols)
    cols = np.asarray(X.cols).ravel()  # type: ignore[attr-defined]
    x[cols[cols >= 0]] = values.ravel()[cols >= 0]
    return x


def test_an_all_zero_iterate_is_replaced_by_the_isolated_allocation(setup: tuple) -> None:
    """A time-limited solver may hand back its first iterate, all zeros: feasible, but every job
    is slower than under X_iso, so X_iso is returned and the message says why."""
    _, space, X, n_cols = setup
    policy = get_policy("max_min_fairness")
    raw = SolveResult(Status.TIME_LIMIT, None, np.zeros(n_cols))
    got, msg = policy.fallback(space, raw, X)
    iso = space.full_from_single(space.isolated_allocation())
    assert np.array_equal(got, iso) and (space.throughput_values(got) > 0).all()
    assert "no job is faster" in msg and "isolated allocation (fallback)" in msg and msg.startswith("time_limit")


def test_a_useful_feasible_point_is_kept_and_an_infeasible_one_is_not(setup: tuple) -> None:
    problem, space, X, n_cols = setup
    policy = get_policy("max_min_fairness")
    best = policyopt.solve(problem, "max_min_fairness")
    assert best.status is Status.OPTIMAL
    x = _point(X, n_cols, best.X.ravel())
    got, msg = policy.fallback(space, SolveResult(Status.TIME_LIMIT, None, x), X)
    assert np.allclose(got, best.X) and msg == "time_limit: returning the solver's best feasible point"
    # a feasible point that is faster for one job and slower for another (not dominated) is kept
    iso = space.full_from_single(space.isolated_allocation())
    assert np.allclose(iso, [[2 / 3, 1 / 3]] * 3)
    one = np.array([[1.0, 0.0], [1 / 3, 1 / 3], [2 / 3, 1 / 3]])  # A all on v100, B gives up v100 time
    assert not space.check(one)
    thr, thr_iso = space.throughput_values(one), space.throughput_values(iso)
    assert thr[0] > thr_iso[0] and thr[1] < thr_iso[1]
    got, msg = policy.fallback(space, SolveResult(Status.TIME_LIMIT, None, _point(X, n_cols, one.ravel())), X)
    assert np.allclose(got, one) and "best feasible point" in msg
    # the same point with job A idle instead is dominated: X_iso
    idle = one.copy()
    idle[0] = 0.0
    got, msg = policy.fallback(space, SolveResult(Status.TIME_LIMIT, None, _point(X, n_cols, idle.ravel())), X)
    assert np.array_equal(got, iso) and "no job is faster" in msg
    # over capacity: never returned
    got, msg = policy.fallback(space, SolveResult(Status.ERROR, None, np.ones(n_cols)), X)
    assert np.array_equal(got, iso) and msg == "error: returning the isolated allocation (fallback)"
