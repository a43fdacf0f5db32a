"""Warm starts across problems (``policyopt.warm_start``): a policy instance re-solving after an
arrival or a completion starts from its previous basis, carried over by labels, and reaches the
same optimum as a cold simplex solve."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt import Cluster, Job, Model, Problem, SolverOptions, get_policy, get_solver
from policyopt.warm_start import BasisSnapshot, carry_basis, recall

# max-sum at these sizes answers by its transportation LP otherwise (no kept model): see conftest
pytestmark = pytest.mark.usefixtures("no_transport_route")


def distinct_problem(n: int, seed: int) -> Problem:
    """Jobs with distinct throughputs (no two blocks alike: the whole LP goes to HiGHS)."""
    rng = np.random.default_rng(seed)
    types = ("v100", "p100", "k80")
    jobs = tuple(Job(f"j{i}", {t: float(rng.uniform(0.5, 10)) for t in types if rng.random() < 0.9 or t == "k80"},
                     scale_factor=int(rng.choice([1, 1, 2])), weight=float(rng.choice([1.0, 2.0])))
                 for i in range(n))
    return Problem(Cluster.from_counts({t: max(2, n // 4) for t in types}), jobs)


def build(policy: str, problem: Problem) -> Model:
    pol = get_policy(policy)
    space = pol.make_space(problem)
    model = Model(policy)
    X = space.add_allocation(model)
    pol.build(model, space, X)  # type: ignore[attr-defined]
    return model


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_sum_throughput"])
def test_same_problem_restarts_at_the_optimal_basis(policy: str) -> None:
    p = distinct_problem(30, 1)
    m1, m2 = build(policy, p), build(policy, p)
    first = get_solver("highs").load(m1.compile(), SolverOptions(algorithm="simplex"))
    r1 = first.solve()
    basis = first.get_basis()
    assert basis is not None
    second = get_solver("highs").load(m2.compile(), SolverOptions(algorithm="simplex"))
    col, row = carry_basis(BasisSnapshot(m1, *basis), m2)
    assert np.array_equal(col, basis[0]) and np.array_equal(row, basis[1])
    second.set_basis(col, row)
    r2 = second.solve()
    assert r2.iterations == 0 and r2.objective == pytest.approx(r1.objective, rel=1e-12)


@pytest.mark.parametrize("policy", ["max_min_fairness", "max_sum_throughput"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_arrivals_and_completions_match_cold_solves(policy: str, seed: int, no_price_path: None) -> None:
    base = distinct_problem(41, seed)
    jobs = list(base.jobs)
    sequence = [jobs[:40], jobs[:41], jobs[1:41], jobs[1:40] + jobs[:1]]  # arrival, completion, reorder
    opts = {"fill": False} if policy == "max_min_fairness" else {}  # one LP (LPPolicy.solve)
    warm = get_policy(policy, **opts)
    for js in sequence:
        p = base.with_jobs(js)
        got = warm.solve(p)
        ref = get_policy(policy, algorithm="simplex", **opts).solve(p)
        assert recall(warm) is not None  # the whole LP went through HiGHS
        assert got.objective == pytest.approx(ref.objective, rel=1e-7)
        assert not got.space.check(got.X, tol=1e-9)


def test_policy_stays_picklable_after_a_warm_solve() -> None:
    import pickle

    pol = get_policy("max_sum_throughput")
    pol.solve(distinct_problem(20, 3))
    assert recall(pol) is not None
    copy = pickle.loads(pickle.dumps(pol))
    assert recall(copy) is None and copy.config == pol.config


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_max_min_with_fill_carries_its_first_lp_basis(seed: int) -> None:
    """``max_min_fairness`` with ``fill`` (two LPs through ``LoadedLP``) keeps the basis of its
    max-min LP and starts the next problem's from it: same optima as cold solves after an arrival,
    a completion and a reordering, and the warm max-min LP needs fewer simplex iterations."""
    import highspy

    base = distinct_problem(41, seed)
    jobs = list(base.jobs)
    sequence = [jobs[:40], jobs[:41], jobs[1:41], jobs[1:40] + jobs[:1]]
    warm = get_policy("max_min_fairness")
    iters: list[int] = []
    run = highspy.Highs.run

    def counting(self):  # type: ignore[no-untyped-def]
        out = run(self)
        iters.append(int(self.getInfo().simplex_iteration_count))
        return out

    for k, js in enumerate(sequence):
        p = base.with_jobs(js)
        iters.clear()
        highspy.Highs.run = counting
        try:
            got = warm.solve(p)
        finally:
            highspy.Highs.run = run
        warm_iters = iters[0]
        iters.clear()
        highspy.Highs.run = counting
        try:
            ref = get_policy("max_min_fairness").solve(p)
        finally:
            highspy.Highs.run = run
        cold_iters = iters[0]
        snap = recall(warm)
        assert snap is not None and snap.statuses() is not None
        assert got.objective == pytest.approx(ref.objective, rel=1e-7)
        assert got.extra["fill"]["normalized_throughput_after"] == pytest.approx(
            ref.extra["fill"]["normalized_throughput_after"], rel=1e-7)
        assert not got.space.check(got.X, tol=1e-9)
        if k:
            assert warm_iters < cold_iters, (warm_iters, cold_iters)
