"""Finish-time fairness with Gavel's cumulative isolated time: the tracker's bookkeeping and the
policy's optimum on a hand-built two-call case, checked against an independent bisection of
Gavel's formula (scipy linprog feasibility), not against the policy's own output."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

import policyopt
from policyopt.mechanism import IsolatedTimeTracker

TYPES = ("v100", "k80")
THR = {"A": (4.0, 1.0), "B": (1.0, 1.0), "C": (2.0, 2.0)}


def problem(jobs: dict[str, tuple[float, float, float | None]]) -> policyopt.Problem:
    """``jobs``: id → (steps remaining, time since start, isolated_time); one GPU of each type."""
    return policyopt.Problem.from_dict({
        "cluster": {"worker_types": {t: {"count": 1} for t in TYPES}},
        "jobs": [{"id": j, "throughputs": dict(zip(TYPES, THR[j])), "steps_remaining": s, "time_since_start": t,
                  **({} if c is None else {"isolated_time": c})} for j, (s, t, c) in jobs.items()],
    })


def gavel_ftf_optimum(jobs: dict[str, tuple[float, float, float]]) -> float:
    """min_X max_m (t_m + s_m/thr_m(X)) / (c_m + s_m/iso_m) by bisection on ρ with an LP feasibility
    test per level (Gavel's formula; iso_m = thr_m with 1/n of every type)."""
    ids = list(jobs)
    n, K = len(ids), len(TYPES)
    T = np.array([THR[j] for j in ids])
    iso = T.sum(axis=1) / n
    s, t, c = (np.array([jobs[j][k] for j in ids]) for k in range(3))
    D = c + s / iso

    def feasible(rho: float) -> bool:
        if np.any(rho * D <= t):
            return False
        need = s / (rho * D - t)  # thr_m ≥ need_m
        A_ub = np.vstack([-np.kron(np.eye(n), np.ones(K)) * np.repeat(T, 1, axis=0).ravel()[None, :],
                          np.kron(np.eye(n), np.ones(K)), np.kron(np.ones(n), np.eye(K))])
        b_ub = np.concatenate([-need, np.ones(n), np.ones(K)])
        return linprog(np.zeros(n * K), A_ub=A_ub, b_ub=b_ub, bounds=(0, 1), method="highs").status == 0

    lo, hi = 1e-6, 1e3
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def test_two_calls_hand_computed() -> None:
    """Call 1 (t = 0): A has 400 steps, B 100; isolated throughputs (1/2 of each GPU) are 2.5 and 1.
    40 s later A has done 160 steps and B 40, and C arrives: c_A = 160/2.5 = 64, c_B = 40/1 = 40,
    c_C = 0 (by hand). Call 2's optimum is Gavel's ρ with those c, and differs from c = t."""
    tracker = IsolatedTimeTracker()
    first = {"A": (400.0, 0.0), "B": (100.0, 0.0)}
    p1 = problem({j: (s, t, tracker.value(j, s)) for j, (s, t) in first.items()})
    r1 = policyopt.solve(p1, "finish_time_fairness")
    assert r1.extra["isolated_throughputs"] == pytest.approx({"A": 2.5, "B": 1.0})
    tracker.observe({j: s for j, (s, _) in first.items()}, r1)

    second = {"A": (240.0, 40.0), "B": (60.0, 40.0), "C": (100.0, 0.0)}
    c = {j: tracker.value(j, s) for j, (s, _) in second.items()}
    assert c == pytest.approx({"A": 64.0, "B": 40.0, "C": 0.0})
    r2 = policyopt.solve(problem({j: (s, t, c[j]) for j, (s, t) in second.items()}), "finish_time_fairness")
    expected = gavel_ftf_optimum({j: (s, t, c[j]) for j, (s, t) in second.items()})
    assert r2.objective == pytest.approx(expected, rel=1e-6)
    # the same call without the cumulative isolated time (c = t) has another optimum
    r_old = policyopt.solve(problem({j: (s, t, None) for j, (s, t) in second.items()}), "finish_time_fairness")
    assert r_old.objective == pytest.approx(gavel_ftf_optimum({j: (s, t, t) for j, (s, t) in second.items()}),
                                            rel=1e-6)
    assert abs(r_old.objective - r2.objective) > 1e-3


def test_isolated_time_round_trips_and_is_validated() -> None:
    p = problem({"A": (10.0, 5.0, 3.0), "B": (10.0, 5.0, None)})
    d = p.to_dict()
    assert d["jobs"][0]["isolated_time"] == 3.0 and "isolated_time" not in d["jobs"][1]
    assert policyopt.Problem.from_dict(d).jobs[0].isolated_time == 3.0
    with pytest.raises(policyopt.InputError, match=r"jobs\[0\]\.isolated_time"):
        policyopt.Problem.from_dict({**d, "jobs": [{**d["jobs"][0], "isolated_time": -1.0}, d["jobs"][1]]})


def test_simulator_fills_isolated_time(gavel) -> None:
    """A short simulation under finish_time_fairness: from the second recompute on, jobs carry the
    cumulative isolated time the tracker accumulated from the policy's reported rates."""
    from policyopt.sim import SimConfig
    from policyopt.sim.simulator import Simulator
    from policyopt.sim.traces import gavel_trace

    trace = gavel_trace(gavel, 6, 20.0, seed=1)
    sim = Simulator({"v100": 2, "k80": 2}, SimConfig(policy="finish_time_fairness", round_seconds=360), gavel)
    seen: list[dict[str, float | None]] = []
    original = sim._recompute

    def spy(*args, **kwargs):
        original(*args, **kwargs)
        seen.append(dict(sim._isolated._c))

    sim._recompute = spy  # type: ignore[method-assign]
    sim.run(trace)
    assert len(seen) >= 2 and any(v > 0 for snap in seen for v in snap.values())
