"""Every policy of the library on 2–4 job cases whose optimum is solved in the test: by hand (exact
fractions in the docstrings), by enumeration, or by a dense scipy ``linprog`` formulation written
here from the policy's definition — never by the code under test."""
from __future__ import annotations

import itertools
from fractions import Fraction as F

import numpy as np
import pytest
from scipy.optimize import linprog

import policyopt
from policyopt import Problem


def two_types(jobs: list[dict], v100: int = 1, k80: int = 1, prices: tuple[float, float] | None = None) -> Problem:
    wt = {"v100": {"count": v100}, "k80": {"count": k80}}
    if prices:
        wt["v100"]["price_per_hour"], wt["k80"]["price_per_hour"] = prices
    return Problem.from_dict({"cluster": {"worker_types": wt}, "jobs": jobs})


def job(i: str, v: float, k: float, **kw: object) -> dict:
    return {"id": i, "throughputs": {"v100": v, "k80": k}, **kw}


def assignment_lp(values: np.ndarray,
                  extra_ub: tuple[np.ndarray, np.ndarray] | None = None) -> tuple[float, np.ndarray]:
    """max Σ values[m,c]·x[m,c] s.t. Σ_c x[m,c] ≤ 1, Σ_m x[m,c] ≤ 1 (one GPU per type), 0 ≤ x ≤ 1."""
    n, C = values.shape
    A, b = [], []
    for m in range(n):
        r = np.zeros(n * C)
        r[m * C:(m + 1) * C] = 1
        A.append(r)
        b.append(1)
    for c in range(C):
        r = np.zeros(n * C)
        r[c::C] = 1
        A.append(r)
        b.append(1)
    A, b = np.array(A), np.array(b, float)
    if extra_ub is not None:
        A, b = np.vstack([A, extra_ub[0]]), np.concatenate([b, extra_ub[1]])
    res = linprog(-values.ravel(), A_ub=A, b_ub=b, bounds=[(0, 1)] * (n * C), method="highs")
    assert res.status == 0
    return -res.fun, res.x.reshape(n, C)


# ---------------------------------------------------------------------------------- max_sum_throughput
def test_max_sum_throughput_hand() -> None:
    """A (10, 8), B (6, 1) on one V100 + one K80: A→K80, B→V100 gives 14 > 10 + 1 = 11.
    Normalized by thr(X_equal) = (9, 3.5): 8/9 + 12/7 = 164/63."""
    p = two_types([job("A", 10, 8), job("B", 6, 1)])
    r = policyopt.solve(p, "max_sum_throughput")
    assert r.objective == pytest.approx(14.0, abs=1e-9)
    assert r.allocation["A"]["k80"] == pytest.approx(1.0) and r.allocation["B"]["v100"] == pytest.approx(1.0)
    rn = policyopt.solve(p, "max_sum_throughput", normalize=True)
    assert rn.objective == pytest.approx(float(F(8, 9) + F(12, 7)), abs=1e-9)


# ---------------------------------------------------------------------------------- makespan
def test_makespan_hand() -> None:
    """A: 100 steps at (10, 5); B: 60 steps at (6, 2); one V100 + one K80.

    In units of 'fraction of the work per second': A (0.1, 0.05), B (0.1, 1/30). A has the
    comparative advantage on the K80, both run full time and both GPUs are busy:
    A = V100 a + K80 (1−a), B = V100 (1−a) + K80 a; equal rates 0.05 + 0.05a = 0.1 − a/15
    ⇒ a = 3/7, rate 1/14 ⇒ M* = 14 s. Cross-checked by a bisection-free dense LP (max z)."""
    p = two_types([job("A", 10, 5, steps_remaining=100), job("B", 6, 2, steps_remaining=60)])
    r = policyopt.solve(p, "makespan")
    assert r.objective == pytest.approx(14.0, rel=1e-9)
    # independent LP: variables x (2×2) and z; max z s.t. thr_m ≥ s_m z
    T = np.array([[10, 5], [6, 2]], float)
    s = np.array([100, 60], float)
    A = [np.r_[-T[0], 0, 0, s[0]], np.r_[0, 0, -T[1], s[1]],
         [1, 1, 0, 0, 0], [0, 0, 1, 1, 0], [1, 0, 1, 0, 0], [0, 1, 0, 1, 0]]
    res = linprog(np.r_[0, 0, 0, 0, -1.0], A_ub=np.array(A, float), b_ub=[0, 0, 1, 1, 1, 1],
                  bounds=[(0, 1)] * 4 + [(0, None)], method="highs")
    assert 1 / res.x[-1] == pytest.approx(14.0, rel=1e-9)
    thr = r.effective_throughputs
    assert max(100 / thr["A"], 60 / thr["B"]) == pytest.approx(14.0, rel=1e-7)


def test_makespan_fill_keeps_optimum_and_uses_capacity() -> None:
    """A alone needs a whole V100 for 10 s; B (5 steps) is not a bottleneck: without fill B may get
    just enough, with fill it takes the idle K80 fully."""
    p = two_types([job("A", 10, 1, steps_remaining=100), job("B", 10, 10, steps_remaining=5)])
    r = policyopt.solve(p, "makespan", fill=True)
    assert r.objective == pytest.approx(10.0, rel=1e-9)
    assert r.effective_throughputs["B"] == pytest.approx(10.0, rel=1e-7)


# ---------------------------------------------------------------------------------- finish-time fairness
def test_finish_time_fairness_hand() -> None:
    """Three jobs, one V100 + one K80, t = 0: A (3, 1), B (1, 3), C (2, 2). X_iso = 1/3 of each type,
    thr(X_iso) = 4/3 for all. With t = 0, ρ_m = thr_iso/thr(m): maximize the smallest thr/thr_iso.
    By symmetry A gets V100 a, B gets K80 a, C the rest: 3a = 2(2 − 2a) ⇒ a = 4/7, thr = 12/7,
    ratio 9/7 ⇒ ρ* = 7/9."""
    p = two_types([job("A", 3, 1, steps_remaining=100), job("B", 1, 3, steps_remaining=100),
                   job("C", 2, 2, steps_remaining=100)])
    r = policyopt.solve(p, "finish_time_fairness")
    assert r.objective == pytest.approx(7 / 9, rel=1e-7)
    assert r.extra["lp_solves"] == 1  # t = 0: the first Newton step is exact
    for m in "ABC":
        assert r.effective_throughputs[m] == pytest.approx(12 / 7, rel=1e-6)


def ftf_bruteforce(p: Problem) -> float:
    """Dense-LP feasibility bisection on ρ (written from the definition; 60 halvings)."""
    types = p.cluster.names
    n, C = len(p.jobs), len(types)
    T = np.array([[j.throughputs.get(t, 0.0) for t in types] for j in p.jobs])
    sf = np.array([j.scale_factor for j in p.jobs], float)
    cnt = np.array([p.cluster.counts[t] for t in types], float)
    ok = (sf[:, None] <= cnt[None, :]) & (T > 0)
    xiso = np.where(ok, cnt[None, :] / n / sf[:, None], 0.0)
    tot = xiso.sum(1)
    xiso[tot > 1] /= tot[tot > 1, None]
    iso = (T * xiso).sum(1)
    s = np.array([j.steps_remaining for j in p.jobs])
    t = np.array([j.time_since_start for j in p.jobs])
    D = t + s / iso

    def feasible(rho: float) -> bool:
        req = s / (rho * D - t)
        A, b = [], []
        for m in range(n):
            r = np.zeros(n * C)
            r[m * C:(m + 1) * C] = -T[m]
            A.append(r)
            b.append(-req[m])
            r = np.zeros(n * C)
            r[m * C:(m + 1) * C] = 1
            A.append(r)
            b.append(1)
        for c in range(C):
            r = np.zeros(n * C)
            r[c::C] = sf
            A.append(r)
            b.append(cnt[c])
        bounds = [(0, 1 if ok[m, c] else 0) for m in range(n) for c in range(C)]
        return linprog(np.zeros(n * C), A_ub=np.array(A), b_ub=np.array(b), bounds=bounds, method="highs").status == 0

    lo, hi = float(np.max(t / D)) + 1e-12, 1.0
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def test_finish_time_fairness_with_elapsed_time_matches_bruteforce() -> None:
    """t > 0 (the non-linear case, several Newton steps) against the test's own bisection."""
    p = two_types([job("A", 3, 1, steps_remaining=300, time_since_start=50.0),
                   job("B", 1, 3, steps_remaining=100, time_since_start=0.0),
                   job("C", 2, 2, steps_remaining=200, time_since_start=400.0),
                   job("D", 4, 1, steps_remaining=50, time_since_start=20.0)], v100=1, k80=2)
    r = policyopt.solve(p, "finish_time_fairness")
    ref = ftf_bruteforce(p)
    assert r.objective == pytest.approx(ref, rel=1e-6)
    assert r.extra["lower_bound"] <= r.objective
    assert r.extra["relative_gap"] <= 1e-7


def test_finish_time_fairness_agnostic_hand() -> None:
    """Agnostic: every throughput 1, so with t = 0 ρ_m = (time share under X_iso)/(time share):
    X_iso gives each of 3 jobs 2/3 of the time over two GPUs; capacity 2 ⇒ nothing beats 2/3 for
    all, ρ* = 1, and real_objective evaluates the real ρ of the allocation returned."""
    p = two_types([job("A", 3, 1, steps_remaining=100), job("B", 1, 3, steps_remaining=100),
                   job("C", 2, 2, steps_remaining=100)])
    r = policyopt.solve(p, "finish_time_fairness_agnostic")
    assert r.objective == pytest.approx(1.0, rel=1e-7)
    thr = r.effective_throughputs
    real = max((100 / thr[m]) / (100 / (4 / 3)) for m in "ABC")
    assert r.extra["real_objective"] == pytest.approx(real, rel=1e-9)


# ---------------------------------------------------------------------------------- fifo
def test_fifo_hand() -> None:
    """Arrival A, B, C; weights (M − rank)/thr_fastest = 3/10, 2/10, 1/5. Value per unit of time:
    V100 (3, 2, 1), K80 (2.7, 0.2, 1). Best assignment: A→K80, B→V100 = 4.7 (A→V100 with B→K80
    gives 3.2, with C→K80 4). FIFO-agnostic: value per unit time (3, 2, 1) anywhere ⇒ A and B run, 5."""
    jobs = [job("A", 10, 9, arrival=0.0), job("B", 10, 1, arrival=1.0), job("C", 5, 5, arrival=2.0)]
    p = two_types(jobs)
    r = policyopt.solve(p, "fifo")
    values = np.array([[3, 2.7], [2, 0.2], [1, 1]])
    ref, _ = assignment_lp(values)
    assert ref == pytest.approx(4.7)
    assert r.objective == pytest.approx(4.7, abs=1e-9)
    assert r.allocation["A"]["k80"] == pytest.approx(1.0) and r.allocation["B"]["v100"] == pytest.approx(1.0)
    ra = policyopt.solve(p, "fifo_agnostic")
    assert ra.objective == pytest.approx(5.0, abs=1e-9)
    assert sum(ra.allocation["C"].values()) == pytest.approx(0.0, abs=1e-9)


def test_fifo_arrival_field_orders_jobs() -> None:
    """Arrival times override problem order: C arrived first, so C and A run on one type each."""
    jobs = [job("A", 10, 10, arrival=1.0), job("B", 10, 10, arrival=2.0), job("C", 10, 10, arrival=0.0)]
    r = policyopt.solve(two_types(jobs), "fifo")
    assert sum(r.allocation["B"].values()) == pytest.approx(0.0, abs=1e-9)
    assert sum(r.allocation["C"].values()) == pytest.approx(1.0)
    assert sum(r.allocation["A"].values()) == pytest.approx(1.0)


# ---------------------------------------------------------------------------------- shortest job first
def test_shortest_job_first_hand_with_tie() -> None:
    """Best-case durations A 100/10 = 10 s (indifferent V100/K80), B 200/10 = 20 s, C 300/10 = 30 s.
    Level 1: A gets 10 steps/s (either type). Level 2: B gets the V100 only if A takes the K80 —
    the lexicographic optimum does that (a greedy 'A takes the best type' would not). Level 3: C 0."""
    p = two_types([job("A", 10, 10, steps_remaining=100), job("B", 10, 1, steps_remaining=200),
                   job("C", 10, 5, steps_remaining=300)])
    r = policyopt.solve(p, "shortest_job_first")
    assert r.objective == pytest.approx(10.0, rel=1e-7)
    d = r.extra["durations"]
    assert list(d) == ["A", "B", "C"]
    assert d["A"] == pytest.approx(10.0, rel=1e-7) and d["B"] == pytest.approx(20.0, rel=1e-7)
    assert r.effective_throughputs["C"] == pytest.approx(0.0, abs=1e-6)


def test_shortest_job_first_lexicographic_vs_enumeration() -> None:
    """4 jobs on 1 V100 + 2 K80: the lexicographic optimum computed in the test by a sequence of dense
    LPs (max t̂ of level k with earlier levels fixed) equals the policy's levels."""
    jobs = [job("A", 8, 6, steps_remaining=40), job("B", 10, 2, steps_remaining=150),
            job("C", 6, 5, steps_remaining=90), job("D", 9, 9, steps_remaining=400)]
    p = two_types(jobs, v100=1, k80=2)
    r = policyopt.solve(p, "shortest_job_first")
    T = np.array([[8, 6], [10, 2], [6, 5], [9, 9]], float)
    s = np.array([40, 150, 90, 400], float)
    order = np.argsort(s / T.max(1), kind="stable")
    n, C = 4, 2
    A_ub = []
    b_ub = []
    for m in range(n):
        row = np.zeros(n * C)
        row[m * C:(m + 1) * C] = 1
        A_ub.append(row)
        b_ub.append(1)
    for c, cnt in enumerate((1, 2)):
        row = np.zeros(n * C)
        row[c::C] = 1
        A_ub.append(row)
        b_ub.append(cnt)
    levels = []
    for m in order:
        obj = np.zeros(n * C)
        obj[m * C:(m + 1) * C] = -T[m]
        res = linprog(obj, A_ub=np.array(A_ub), b_ub=np.array(b_ub), bounds=[(0, 1)] * (n * C), method="highs")
        v = -res.fun
        levels.append(v)
        row = np.zeros(n * C)
        row[m * C:(m + 1) * C] = -T[m]
        A_ub.append(row)
        b_ub.append(-(v - 1e-9))
    got = [r.effective_throughputs[jobs[m]["id"]] for m in order]
    np.testing.assert_allclose(got, levels, rtol=1e-6, atol=1e-6)
    assert r.extra["levels_greedy"] == 4 and r.extra["lp_solves"] == 0  # no ties: the greedy prefix is exact
    r_lp = policyopt.solve(p, "shortest_job_first", method="lp")
    got = [r_lp.effective_throughputs[jobs[m]["id"]] for m in order]
    np.testing.assert_allclose(got, levels, rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------------------------- cost policies
COST_JOBS = [job("A", 30, 6), job("B", 12, 6)]
PRICES = (3.0, 1.0)


def test_min_cost_linear_and_exact_ratio_hand() -> None:
    """Per-slot value T/price: A (10, 6), B (4, 6). Linear form: A→V100 + B→K80 = 16 (vs 6 + 4).
    Exact ratio Σthr/Σcost: A alone on the V100 gives 30/3 = 10; adding B on the K80 lowers it to
    36/4 = 9; every other slot has ratio ≤ 6 ⇒ optimum 10, everything else idle."""
    p = two_types(COST_JOBS, prices=PRICES)
    r = policyopt.solve(p, "min_cost")
    ref, _ = assignment_lp(np.array([[10, 6], [4, 6]], float))
    assert ref == pytest.approx(16.0) and r.objective == pytest.approx(16.0, abs=1e-9)
    rr = policyopt.solve(p, "min_cost", exact_ratio=True)
    assert rr.objective == pytest.approx(10.0, rel=1e-7)
    thr = sum(rr.effective_throughputs.values())
    cost = sum(PRICES[c] * frac for a in rr.allocation.values() for c, frac in enumerate(a.values()))
    assert thr / cost == pytest.approx(10.0, rel=1e-7)


def test_min_cost_slo_feasible_hand() -> None:
    """B must reach 9 steps/s (90 steps in 10 s). With its time ≤ 1: 12·b1 + 6·(1 − b1) ≥ 9 ⇒ b1 ≥ 1/2.
    Best: b1 = b2 = 1/2, A takes the other halves: 4/2 + 6/2 + 10/2 + 6/2 = 13 (LP-checked)."""
    jobs = [COST_JOBS[0], job("B", 12, 6, steps_remaining=90, slo_seconds=10)]
    p = two_types(jobs, prices=PRICES)
    r = policyopt.solve(p, "min_cost_slo")
    slo_row = (np.array([[0, 0, -12, -6]], float), np.array([-9.0]))
    ref, _ = assignment_lp(np.array([[10, 6], [4, 6]], float), slo_row)
    assert ref == pytest.approx(13.0)
    assert r.status.value == "optimal" and r.objective == pytest.approx(13.0, abs=1e-7)
    assert r.effective_throughputs["B"] >= 9 - 1e-6


def test_min_cost_slo_infeasible_reports_jobs_and_falls_back() -> None:
    """B needs 13 steps/s but can reach at most 12: infeasible. The shortfall LP says B misses 1/13.
    best_effort: B at 12 (V100), A on the K80 ⇒ fallback objective 12/3 + 6/1 = 10.
    drop: SLOs ignored ⇒ the plain min_cost optimum 16."""
    jobs = [COST_JOBS[0], job("B", 12, 6, steps_remaining=130, slo_seconds=10)]
    p = two_types(jobs, prices=PRICES)
    r = policyopt.solve(p, "min_cost_slo")
    assert r.status.value == "infeasible"
    assert [v["job"] for v in r.extra["slo_violations"]] == ["B"]
    v = r.extra["slo_violations"][0]
    assert v["required_throughput"] == pytest.approx(13.0)
    assert v["shortfall_fraction"] == pytest.approx(1 / 13, rel=1e-6)
    assert r.effective_throughputs["B"] == pytest.approx(12.0, rel=1e-6)
    assert r.extra["fallback_objective"] == pytest.approx(10.0, rel=1e-6)
    assert "B" in r.message
    rd = policyopt.solve(p, "min_cost_slo", slo_fallback="drop")
    assert rd.status.value == "infeasible" and rd.extra["fallback_objective"] == pytest.approx(16.0, rel=1e-9)
    rr = policyopt.solve(p, "min_cost_slo", exact_ratio=True)
    assert rr.status.value == "infeasible" and rr.extra["slo_violations"][0]["job"] == "B"
    assert rr.effective_throughputs["B"] == pytest.approx(12.0, rel=1e-5)


def test_min_cost_needs_prices() -> None:
    p = two_types(COST_JOBS)
    with pytest.raises(policyopt.InputError) as e:
        policyopt.solve(p, "min_cost")
    assert "price_per_hour" in e.value.field


# ---------------------------------------------------------------------------------- makespan under budget
BUDGET_PROBLEM = {"cluster": {"worker_types": {"v100": {"count": 1, "price_per_hour": 3.6},
                                               "k80": {"count": 1, "price_per_hour": 0.72}}},
                  "jobs": [{"id": "A", "throughputs": {"v100": 10.0, "k80": 5.0}, "steps_remaining": 100}]}


@pytest.mark.parametrize("method", ["lp", "bisection"])
def test_makespan_under_budget_hand(method: str) -> None:
    """100 steps; V100: 10 steps/s at 0.001 $/s = 1e-4 $/step; K80: 5 steps/s at 0.0002 $/s = 4e-5 $/step.
    Budget 0.005 $: x steps on the V100 cost 0.004 + 6e-5·x ≤ 0.005 ⇒ x ≤ 50/3; time
    x/10 + (100 − x)/5 = 20 − x/10 ⇒ M* = 20 − 5/3 = 55/3 s. Budget ≥ 0.01: M* = 10 (V100 only).
    Smallest feasible budget: everything on the K80, 0.004 $."""
    r = policyopt.solve(BUDGET_PROBLEM, "makespan_under_budget", budget=0.005, method=method)
    assert r.objective == pytest.approx(55 / 3, rel=1e-6)
    r = policyopt.solve(BUDGET_PROBLEM, "makespan_under_budget", budget=0.02, method=method)
    assert r.objective == pytest.approx(10.0, rel=1e-6)
    r = policyopt.solve(BUDGET_PROBLEM, "makespan_under_budget", budget=0.003, method=method)
    assert r.status.value == "infeasible"
    assert r.extra["min_budget"] == pytest.approx(0.004, rel=1e-6)
    assert "0.004" in r.message


def test_makespan_under_budget_requires_budget() -> None:
    with pytest.raises(policyopt.InputError) as e:
        policyopt.solve(BUDGET_PROBLEM, "makespan_under_budget")
    assert e.value.field == "options.budget"


# ---------------------------------------------------------------------------------- baselines
def test_isolated_hand() -> None:
    """3 jobs (one of scale factor 2) on 2 V100 + 2 K80: X = count/(n·sf) = 2/3 (sf 1) and 1/3 (sf 2)
    per type; rows of the sf-1 jobs sum to 4/3 > 1 ⇒ scaled to 1/2 each."""
    p = two_types([job("A", 4, 2), job("B", 4, 2), job("C", 4, 2, scale_factor=2)], v100=2, k80=2)
    r = policyopt.solve(p, "isolated")
    assert r.allocation["A"] == pytest.approx({"v100": 0.5, "k80": 0.5})
    assert r.allocation["C"] == pytest.approx({"v100": 1 / 3, "k80": 1 / 3})
    assert not r.space.check(r.X)


def _four_with_pairs(norms_ok: bool) -> Problem:
    jobs = [{"id": str(i), "throughputs": {"v100": 10.0}} for i in range(4)]
    val = 6.0 if norms_ok else 4.0  # normalized sum 1.2 vs 0.8
    coloc = [{"jobs": [str(a), str(b)], "worker_type": "v100", "throughputs": [val, val]}
             for a, b in itertools.combinations(range(4), 2)]
    return Problem.from_dict({"cluster": {"worker_types": {"v100": {"count": 1}}}, "jobs": jobs, "colocated": coloc})


def test_gandiva_hand() -> None:
    """4 single-GPU jobs, 1 V100 (oversubscribed). All pairs pack at normalized 1.2: two random pairs,
    each gets 1/2 of the V100, every job 6 steps/s × 1/2 = 3. If packing lost throughput (0.8)
    no pair is kept: four singles at 1/4, 2.5 steps/s each. Without space sharing: isolated."""
    r = policyopt.solve(_four_with_pairs(True), "gandiva", space_sharing=True, seed=3)
    assert r.extra["pairs_used"] == 2
    assert all(c["fraction"] == pytest.approx(0.5) for c in r.colocated_allocation)
    assert all(v == pytest.approx(3.0) for v in r.effective_throughputs.values())
    r = policyopt.solve(_four_with_pairs(False), "gandiva", space_sharing=True, seed=3)
    assert r.extra["pairs_used"] == 0 and all(v == pytest.approx(2.5) for v in r.effective_throughputs.values())
    r = policyopt.solve(_four_with_pairs(True), "gandiva")
    assert r.extra["pairs_used"] == 0


def test_allox_matches_enumerated_matching() -> None:
    """Processing times p = s/T: A (1, 2), B (4, 4), C (3, 30) on one V100 and one K80. The minimum
    Σ completion time over all ways to split the jobs into two ordered queues (enumerated here,
    shortest-first within a queue) equals AlloX's matching cost, and the queue heads run."""
    jobs = [job("A", 10, 5, steps_remaining=10), job("B", 10, 10, steps_remaining=40),
            job("C", 10, 1, steps_remaining=30)]
    p = two_types(jobs)
    r = policyopt.solve(p, "allox")  # Gavel's default alpha = 1: every job
    P = np.array([[1, 2], [4, 4], [3, 30]], float)
    best, best_heads = np.inf, None
    for assign in itertools.product([0, 1], repeat=3):
        total, heads = 0.0, {}
        for c in (0, 1):
            q = sorted((P[m, c], m) for m in range(3) if assign[m] == c)
            total += sum(k * pt for k, (pt, _) in zip(range(len(q), 0, -1), q))
            if q:
                heads[c] = q[0][1]
        if total < best:
            best, best_heads = total, heads
    assert r.objective == pytest.approx(best)
    names = "ABC"
    cfg = ("v100", "k80")
    for c, m in best_heads.items():
        assert r.allocation[names[m]][cfg[c]] == pytest.approx(1.0)
    assert not r.space.check(r.X)
    # alpha 0.3: max(#workers = 2, ⌊0.3·3⌋) = 2 oldest jobs (equal ages: problem order A, B)
    r2 = policyopt.solve(p, "allox", alpha=0.3)
    assert r2.extra["jobs_considered"] == 2 and sum(r2.allocation["C"].values()) == 0.0
    assert r2.objective == pytest.approx(1 + 4)
