"""Exactness: makespan and finish-time fairness are exact optima (relative gap ≤ 1e-6), checked on
random problems against formulations written in this test (dense scipy ``linprog``)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

import policyopt
from policyopt import Problem

from test_policies_hand import ftf_bruteforce
from test_policies_properties import random_problem


def dense(p: Problem) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(T, sf, counts, allowed) over physical types, written from the problem's definition."""
    types = p.cluster.names
    T = np.array([[j.throughputs.get(t, 0.0) for t in types] for j in p.jobs])
    sf = np.array([j.scale_factor for j in p.jobs], float)
    cnt = np.array([p.cluster.counts[t] for t in types], float)
    return T, sf, cnt, (T > 0) & (sf[:, None] <= cnt[None, :])


def makespan_reference(p: Problem) -> float:
    """max z s.t. thr_m ≥ s_m z, Σ_c x ≤ 1, Σ_m sf x ≤ count (dense, unscaled rows)."""
    T, sf, cnt, ok = dense(p)
    s = np.array([j.steps_remaining for j in p.jobs])
    n, C = T.shape
    A, b = [], []
    for m in range(n):
        r = np.zeros(n * C + 1)
        r[m * C:(m + 1) * C] = -T[m]
        r[-1] = s[m]
        A.append(r)
        b.append(0.0)
        r = np.zeros(n * C + 1)
        r[m * C:(m + 1) * C] = 1
        A.append(r)
        b.append(1.0)
    for c in range(C):
        r = np.zeros(n * C + 1)
        r[c:n * C:C] = sf
        A.append(r)
        b.append(cnt[c])
    cost = np.zeros(n * C + 1)
    cost[-1] = -1.0
    bounds = [(0, 1 if ok[m, c] else 0) for m in range(n) for c in range(C)] + [(0, None)]
    res = linprog(cost, A_ub=np.array(A), b_ub=np.array(b), bounds=bounds, method="highs")
    assert res.status == 0
    return 1.0 / res.x[-1]


@pytest.mark.parametrize("seed", range(6))
def test_makespan_exact(seed: int) -> None:
    p = random_problem(seed, n_max=6, with_pairs=False)
    r = policyopt.solve(p, "makespan")
    assert r.objective == pytest.approx(makespan_reference(p), rel=1e-6)
    assert r.extra["optimal_makespan"] == pytest.approx(r.objective, rel=1e-6)


@pytest.mark.parametrize("seed", range(6))
def test_finish_time_fairness_exact(seed: int) -> None:
    p = random_problem(100 + seed, n_max=5, with_pairs=False)
    r = policyopt.solve(p, "finish_time_fairness")
    assert r.objective == pytest.approx(ftf_bruteforce(p), rel=1e-6)
    assert r.extra["relative_gap"] <= 1e-7
    assert r.extra["lower_bound"] <= r.objective * (1 + 1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_makespan_under_budget_lp_equals_bisection(seed: int) -> None:
    p = random_problem(200 + seed, n_max=5)
    lp = policyopt.solve(p, "makespan", space_sharing=True)
    for frac in (2.0, 0.8):
        # a budget relative to what the unconstrained optimum spends over its makespan
        cost = float(np.sum(lp.space.cost_matrix() @ lp.X.ravel())) * lp.objective / 3600 * frac
        a = policyopt.solve(p, "makespan_under_budget", budget=cost, space_sharing=True)
        b = policyopt.solve(p, "makespan_under_budget", budget=cost, space_sharing=True, method="bisection")
        assert a.status == b.status
        if a.objective is not None:
            assert b.objective == pytest.approx(a.objective, rel=1e-6)
            assert a.objective >= lp.objective * (1 - 1e-7)
            spent = float(np.sum(a.space.cost_matrix() @ a.X.ravel())) * a.objective / 3600
            assert spent <= cost * (1 + 1e-6)


def test_iteration_caps_return_a_feasible_allocation_with_status() -> None:
    """Cut the iterative policies short: the documented status and a feasible allocation."""
    p = random_problem(103, n_max=5, with_pairs=False)
    full = policyopt.solve(p, "finish_time_fairness")
    if full.extra["lp_solves"] > 1:
        r = policyopt.solve(p, "finish_time_fairness", max_iterations=1)
        assert r.status.value == "time_limit" and r.objective is None and "gap" in r.message
        assert not r.space.check(r.X)
    jobs = [{"id": "A", "throughputs": {"v100": 10, "k80": 10}, "steps_remaining": 100},
            {"id": "B", "throughputs": {"v100": 10, "k80": 1}, "steps_remaining": 200}]
    tie = Problem.from_dict({"cluster": {"worker_types": {"v100": {"count": 1}, "k80": {"count": 1}}}, "jobs": jobs})
    r = policyopt.solve(tie, "shortest_job_first", max_lp_solves=0)  # A ties: an LP is needed at once
    assert r.status.value == "time_limit" and not r.space.check(r.X)


@pytest.mark.parametrize("guard", [False, True])
def test_sjf_warm_primal_resolves_match_dual_simplex(gavel, monkeypatch: pytest.MonkeyPatch, guard: bool) -> None:  # type: ignore[no-untyped-def]
    """Shortest-job-first with space sharing re-solves its LP sequence by primal simplex without
    bound perturbation (``algorithm=auto``); ``algorithm=simplex`` keeps HiGHS's dual simplex. Same
    levels in SJF order. ``guard``: every unperturbed re-solve capped at 0 iterations, so each one is
    re-solved perturbed (the stall guard) — same levels again."""
    from policyopt.solvers import highs
    from policyopt.problem import Cluster
    from policyopt.sim.traces import gavel_trace, parse_job_type

    trace = gavel_trace(gavel, 48, static=True, multi_gpu=True, seed=2)
    types = [gavel.type_index(*parse_job_type(j.job_type)) for j in trace]
    p = gavel.problem(types, Cluster.from_counts({t: 12 for t in ("v100", "p100", "k80")}, gpus_per_server=4),
                      steps=np.array([j.steps for j in trace]), colocated="types")
    if guard:
        monkeypatch.setattr(highs, "_UNPERTURBED_MIN_ITERATIONS", 0)
        monkeypatch.setattr(highs, "_UNPERTURBED_ITERATIONS_PER_DIM", 0)
    a = policyopt.solve(p, "shortest_job_first", space_sharing=True, pair_top_k=8)
    b = policyopt.solve(p, "shortest_job_first", space_sharing=True, pair_top_k=8, algorithm="simplex")
    assert a.ok and b.ok and a.extra["levels_by_lp"] > 5
    assert (a.extra["stall_retries"] > 0) == guard and b.extra["stall_retries"] == 0
    assert not a.space.check(a.X, tol=1e-7)
    assert a.objective == pytest.approx(b.objective, rel=1e-6)
    fastest = {j.id: max(j.throughputs.values()) for j in p.jobs}
    for jid in a.extra["durations"]:
        assert a.effective_throughputs[jid] / fastest[jid] == pytest.approx(
            b.effective_throughputs[jid] / fastest[jid], abs=2e-5), jid
