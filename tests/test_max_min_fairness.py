"""max_min_fairness end to end: a hand-solved optimum, backend agreement, properties."""
from __future__ import annotations

from fractions import Fraction as F

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyopt
from policyopt import Problem, available_solvers


def three_jobs() -> Problem:
    return Problem.from_dict({
        "cluster": {"worker_types": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": [{"id": "A", "throughputs": {"v100": 40.0, "k80": 10.0}},
                 {"id": "B", "throughputs": {"v100": 12.0, "k80": 4.0}},
                 {"id": "C", "throughputs": {"v100": 100.0, "k80": 50.0}}]})


def test_three_jobs_hand_solved() -> None:
    """Hand solution (exact fractions): primal point with t = 8/11 and a dual certificate ≤ 8/11.

    Normalized throughput per unit time (thr(m)/thr(m, X_equal), X_equal = (1/2, 1/2)):
    A: V100 40/25 = 8/5, K80 10/25 = 2/5;  B: 12/8 = 3/2, 4/8 = 1/2;  C: 100/75 = 4/3, 50/75 = 2/3.
    Primal: a_V = 5/11; b_V = 5/11, b_K = 1/11; c_V = 1/11, c_K = 10/11 → every job at 8/11,
    both GPUs full, C's time full. Dual: job weights y = (15/16, 1, 3/2)·y_B with Σy = 1, GPU prices
    p_V = 3/2·y_B, p_K = 1/2·y_B, C's time price q_C = 1/2·y_B: every y_m·r_mc ≤ p_c + q_m, so
    t ≤ p_V + p_K + q_C = 5/2·y_B = 8/11.
    """
    r = {"A": (F(8, 5), F(2, 5)), "B": (F(3, 2), F(1, 2)), "C": (F(4, 3), F(2, 3))}
    x = {"A": (F(5, 11), F(0)), "B": (F(5, 11), F(1, 11)), "C": (F(1, 11), F(10, 11))}
    levels = {m: r[m][0] * x[m][0] + r[m][1] * x[m][1] for m in r}
    assert set(levels.values()) == {F(8, 11)}
    assert sum(x[m][0] for m in x) == 1 and sum(x[m][1] for m in x) == 1
    assert all(sum(x[m]) <= 1 for m in x)
    yB = 1 / (F(15, 16) + 1 + F(3, 2))
    y = {"A": F(15, 16) * yB, "B": yB, "C": F(3, 2) * yB}
    p = (F(3, 2) * yB, F(1, 2) * yB)
    q = {"A": F(0), "B": F(0), "C": F(1, 2) * yB}
    assert all(y[m] * r[m][c] <= p[c] + q[m] for m in r for c in (0, 1))
    upper = p[0] + p[1] + sum(q.values())
    assert upper == F(8, 11)

    res = policyopt.solve(three_jobs(), "max_min_fairness")
    assert res.status.value == "optimal"
    assert res.objective == pytest.approx(8 / 11, abs=1e-9)
    norm = {"A": 25.0, "B": 8.0, "C": 75.0}
    for m, thr in res.effective_throughputs.items():
        assert thr / norm[m] >= 8 / 11 - 1e-9


@pytest.mark.parametrize("solver", [s for s in ("highs", "cvxpy", "pulp") if s in available_solvers()])
def test_three_jobs_every_backend(solver: str) -> None:
    res = policyopt.solve(three_jobs(), "max_min_fairness", solver=solver)
    assert res.objective == pytest.approx(8 / 11, abs=1e-6)


def test_algorithms_agree() -> None:
    p = policyopt.examples.load_example("gavel-small") if hasattr(policyopt, "examples") else None
    from policyopt.examples import load_example

    p = load_example("gavel-small")
    objs = [policyopt.solve(p, "max_min_fairness", algorithm=a, space_sharing=True).objective
            for a in ("simplex", "ipm", "auto")]
    assert max(objs) - min(objs) < 1e-6


def test_agnostic_baseline_never_beats_aware_on_aware_objective() -> None:
    from policyopt.examples import load_example

    p = load_example("gavel-small")
    aware = policyopt.solve(p, "max_min_fairness")
    agn = policyopt.solve(p, "max_min_fairness_agnostic")
    space = aware.space
    norm = space.scale / (space.weights * space.equal_share_throughput())
    thr_agn = np.array([agn.effective_throughputs[j] for j in space.jobs.labels])
    assert (thr_agn * norm).min() <= aware.objective + 1e-7


# ------------------------------------------------------------------------------- properties
_coloc_thr = st.one_of(st.just(0.0), st.floats(0.01, 80.0))


@st.composite
def problems(draw):
    n_types = draw(st.integers(1, 3))
    types = ["v100", "p100", "k80"][:n_types]
    counts = {t: draw(st.integers(1, 6)) for t in types}
    n_jobs = draw(st.integers(1, 6))
    jobs = []
    for i in range(n_jobs):
        sf = draw(st.sampled_from([1, 1, 2, 4]))
        thr = {t: draw(st.one_of(st.just(0.0), st.floats(0.1, 100.0))) for t in types}
        if all(v == 0 or sf > counts[t] for t, v in thr.items()):
            big = max(counts, key=counts.get)
            sf = min(sf, counts[big])
            thr[big] = draw(st.floats(0.1, 100.0))
        jobs.append({"id": f"j{i}", "throughputs": thr, "scale_factor": sf,
                     "weight": draw(st.floats(0.5, 3.0))})
    coloc = []
    if n_jobs >= 2 and draw(st.booleans()):
        for a in range(n_jobs):
            for b in range(a + 1, n_jobs):
                if draw(st.booleans()):
                    t = draw(st.sampled_from(types))
                    coloc.append({"jobs": [f"j{a}", f"j{b}"], "worker_type": t,
                                  "throughputs": [draw(_coloc_thr), draw(_coloc_thr)]})
    return Problem.from_dict({"cluster": {"worker_types": {t: {"count": c} for t, c in counts.items()}},
                              "jobs": jobs, "colocated": coloc})


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(problems(), st.booleans())
def test_allocation_respects_every_constraint(problem: Problem, sharing: bool) -> None:
    res = policyopt.solve(problem, "max_min_fairness", space_sharing=sharing)
    assert res.status.value == "optimal"
    # recompute every constraint from the problem's own dicts (independent of AllocationSpace)
    counts = problem.cluster.counts
    used = {t: 0.0 for t in counts}
    time_used = {j.id: 0.0 for j in problem.jobs}
    thr = {j.id: 0.0 for j in problem.jobs}
    for j in problem.jobs:
        for cfg, f in res.allocation[j.id].items():
            assert -1e-9 <= f <= 1 + 1e-9
            if f > 1e-9:
                assert j.throughputs[cfg] > 0 and j.scale_factor <= counts[cfg]
            used[cfg] += j.scale_factor * f
            time_used[j.id] += f
            thr[j.id] += j.throughputs.get(cfg, 0.0) * f
    by_pair = {(c.jobs[0], c.jobs[1], c.worker_type): c.throughputs for c in problem.colocated}
    for entry in res.colocated_allocation:
        a, b = entry["jobs"]
        key = (a, b, entry["worker_type"]) if (a, b, entry["worker_type"]) in by_pair else (b, a, entry["worker_type"])
        ta, tb = by_pair[key]
        if key[0] != a:
            ta, tb = tb, ta
        assert sharing and ta > 0 and tb > 0
        f = entry["fraction"]
        assert problem.job(a).scale_factor == problem.job(b).scale_factor
        used[entry["worker_type"]] += problem.job(a).scale_factor * f
        time_used[a] += f
        time_used[b] += f
        thr[a] += ta * f
        thr[b] += tb * f
    for t, u in used.items():
        assert u <= counts[t] + 1e-6
    for u in time_used.values():
        assert u <= 1 + 1e-6
    for jid, v in thr.items():  # labels map back: reported throughputs equal those recomputed
        assert res.effective_throughputs[jid] == pytest.approx(v, rel=1e-6, abs=1e-9)


@settings(max_examples=40, deadline=None)
@given(problems())
def test_space_sharing_never_worse(problem: Problem) -> None:
    a = policyopt.solve(problem, "max_min_fairness").objective
    b = policyopt.solve(problem, "max_min_fairness", space_sharing=True).objective
    assert b >= a - 1e-7


@settings(max_examples=25, deadline=None)
@given(problems())
def test_highs_and_cvxpy_agree(problem: Problem) -> None:
    if "cvxpy" not in available_solvers():
        pytest.skip("cvxpy not installed")
    a = policyopt.solve(problem, "max_min_fairness", space_sharing=True).objective
    b = policyopt.solve(problem, "max_min_fairness", space_sharing=True, solver="cvxpy").objective
    assert a == pytest.approx(b, rel=1e-6, abs=1e-7)


def test_job_bigger_than_a_type_gets_nothing_there() -> None:
    p = Problem.from_dict({"cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 8}}},
                           "jobs": [{"id": "big", "throughputs": {"v100": 100.0, "k80": 10.0}, "scale_factor": 4},
                                    {"id": "small", "throughputs": {"v100": 10.0, "k80": 5.0}}]})
    res = policyopt.solve(p, "max_min_fairness")
    assert res.allocation["big"].get("v100", 0.0) == 0.0
    assert res.allocation["big"]["k80"] > 0
