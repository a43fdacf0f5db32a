"""The array routes of max-sum throughput and max-min fairness (``policyopt.transport_route``,
``policyopt.class_transport``, ``policyopt.transport_resolve``) on the inputs that the kept-model
tests run with those routes switched off (``no_transport_route`` in test_incremental.py, the kept
basis's ``keep`` in test_aggregate_totals.py): the same
sequences of arrivals, completions, throughput changes of kept jobs, reorders and several changes at
once, each answer equal to a cold HiGHS simplex solve of the whole LP, with the routes taken. And the
checks of an answer that only a capacity row can refuse, and max-min's checks of its points."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import test_incremental as kept_tests
from test_class_transport import check

from policyopt import Cluster, Job, Problem, class_transport, get_policy, incremental, transport_resolve
from policyopt.solvers import transport

STEPS = [(0, 1), (1, 4), (2, 3), (1, 100), (0, 50), (3, 7), (4, 11), (2, 2), (2, 150), (4, 5), (3, 100)]


def _run(monkeypatch: pytest.MonkeyPatch, name: str, opts: dict, n: int, kinds: int | None) -> Any:
    """``test_incremental.run_sequence`` with the routes on; the policy object it solved with."""
    made: list[Any] = []

    def spy(policy_name: str, **o: Any) -> Any:
        pol = get_policy(policy_name, **o)
        made.append(pol)
        return pol

    monkeypatch.setattr(kept_tests, "get_policy", spy)
    kept_tests.run_sequence(name, opts, n, STEPS, kinds, 3, kept=None)
    return made[0]


@pytest.mark.parametrize("opts", [{}, {"normalize": True}])
@pytest.mark.parametrize("n,kinds", [(220, 12), (140, 30)])
def test_max_sum_class_routes_on_the_kept_model_sequences(monkeypatch: pytest.MonkeyPatch, opts: dict, n: int,
                                                          kinds: int) -> None:
    """The first problem by the class transportation LP, every later one from its kept classes
    (the kept basis or a HiGHS run on the class LP), none by a kept model."""
    pol = _run(monkeypatch, "max_sum_throughput", opts, n, kinds)
    assert class_transport.answered(pol) == 1
    assert sum(transport_resolve.answered(pol)) == len(STEPS)
    assert incremental.state(pol) is None


@pytest.mark.parametrize("name,opts", [("max_sum_throughput", {}), ("max_sum_throughput", {"normalize": True}),
                                       ("max_min_fairness", {}), ("max_min_fairness", {"fill": False})])
@pytest.mark.parametrize("kinds", [None, 3])
def test_small_array_routes_on_the_kept_model_sequences(monkeypatch: pytest.MonkeyPatch, name: str, opts: dict,
                                                        kinds: int | None) -> None:
    """24 jobs: every problem from the arrays, none by a kept model."""
    pol = _run(monkeypatch, name, opts, 24, kinds)
    assert pol.__dict__.get("_answered_from_arrays") and incremental.state(pol) is None


def test_arrivals_over_a_capacity_without_a_price_are_not_answered_from_the_kept_basis() -> None:
    """The kept basis puts every job of a class on one type whose capacity row is slack (its price
    0): arrivals of that class overflow it. The class rows and the Lagrangian bound still hold at
    the kept basis's point; only its capacity check refuses it, and HiGHS solves the class LP."""
    cl = Cluster.from_counts({"v100": 10, "p100": 200, "k80": 200})
    fast = {"v100": 10.0, "k80": 1.0}
    p = Problem(cl, tuple([Job(f"a{i}", fast) for i in range(4)] + [Job(f"b{i}", {"p100": 5.0}) for i in range(130)]))
    pol = get_policy("max_sum_throughput")
    check(pol.solve(p), p, {})
    st_ = transport_resolve.kept(pol)
    assert class_transport.answered(pol) == 1 and st_ is not None and not st_.p.any()
    q = p.with_jobs(list(p.jobs) + [Job(f"a{i}", fast) for i in range(4, 14)])  # 14 on 10 V100s
    check(pol.solve(q), q, {})
    assert transport_resolve.answered(pol) == (0, 1)


def test_the_certificate_refuses_a_point_over_a_capacity_without_a_price() -> None:
    """A point over a capacity row whose price is 0 meets its bound (the job multiplier pays for
    it): only the feasibility check refuses it."""
    V, s, C = np.array([[1.0]]), np.array([1.0]), np.array([0.5])
    ok, obj, bound, _ = transport.certify(V, s, C, np.array([[1.0]]), np.zeros(1))
    assert obj == bound == 1.0 and not ok
    assert transport.certify(V, s, C, np.array([[0.5]]), np.ones(1))[0]


def test_max_min_points_are_checked_against_every_row() -> None:
    """A max-min point below the level ``t`` on a row, over a job row or over a capacity is refused
    (HiGHS's optimal status alone is not taken for a point)."""
    jj, kk = np.array([0, 0, 1]), np.array([0, 1, 1])
    Vz = np.array([[2.0, 1.0], [0.0, 4.0]])
    a, ws, cap = np.ones(2), np.array([1.0, 2.0]), np.array([1.0, 1.5])
    args = (jj, kk, (2, 2), Vz, a, ws, cap)
    ok = transport._checked(np.array([0.5, 0.0, 0.5, 1.0]), *args, 1.0, 1e-9)
    assert ok is not None and np.allclose(ok[1], [1.0, 2.0])
    assert transport._checked(np.array([0.5, 0.0, 0.2, 1.0]), *args, 1.0, 1e-9) is None  # row 1's level 0.8 < t
    assert transport._checked(np.array([0.9, 0.2, 0.5, 1.0]), *args, 1.0, 1e-9) is None  # job row 0 at 1.1
    assert transport._checked(np.array([0.5, 0.0, 1.0, 1.0]), *args, 1.0, 1e-9) is None  # type 1 at 2.0 > 1.5


@pytest.mark.parametrize("opts", [{}, {"normalize": True}])
def test_class_totals_sequence_from_the_class_transportation_basis(opts: dict) -> None:
    """test_aggregate_totals.py's arrivals and completions (there with the kept basis switched off):
    with it on, the first problem by the class transportation LP and every later one from its kept
    classes and basis, each equal to a cold simplex solve."""
    import test_aggregate_totals as totals

    pol = get_policy("max_sum_throughput", **opts)
    jobs = totals.first_jobs()
    totals.check(pol, "max_sum_throughput", jobs, **opts)
    rng = np.random.default_rng(5)
    nxt = totals.N
    for step in range(8):
        if step % 2:
            del jobs[int(rng.integers(len(jobs)))]
        else:
            jobs.insert(int(rng.integers(len(jobs) + 1)), totals.kind_job(nxt, int(rng.integers(7))))
            nxt += 1
        totals.check(pol, "max_sum_throughput", jobs, **opts)
    assert class_transport.answered(pol) == 1 and incremental.state(pol) is None
    assert sum(transport_resolve.answered(pol)) == 8
