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


def gavel_isolated_throughputs(T: np.ndarray, counts: np.ndarray, sf: np.ndarray) -> np.ndarray:
    """Gavel's isolated allocation: each of the ``n`` jobs gets ``count_t/n`` of every type divided
    by its scale factor, rows scaled down to sum to at most 1; its throughput ``Σ_t T·x``."""
    x = np.tile(counts / T.shape[0], (T.shape[0], 1)) / sf[:, None]
    x /= np.maximum(x.sum(axis=1), 1.0)[:, None]
    return (T * x).sum(axis=1)


def gavel_rho_optimum(T: np.ndarray, counts: np.ndarray, s: np.ndarray, t: np.ndarray, c: np.ndarray) -> float:
    """``min_X max_m (t_m + s_m/thr_m(X))/(c_m + s_m/iso_m)`` over Gavel's constraints (job time ≤ 1,
    ``Σ_m x[m, t] ≤ count_t``, scale factors 1), by bisection on ρ with a scipy LP feasibility test."""
    n, K = T.shape
    D = c + s / gavel_isolated_throughputs(T, counts, np.ones(n))
    A_ub = np.vstack([-np.kron(np.eye(n), np.ones(K)) * T.ravel()[None, :],
                      np.kron(np.eye(n), np.ones(K)), np.kron(np.ones(n), np.eye(K))])

    def feasible(rho: float) -> bool:
        if np.any(rho * D <= t):
            return False
        b_ub = np.concatenate([-s / (rho * D - t), np.ones(n), counts])
        return linprog(np.zeros(n * K), A_ub=A_ub, b_ub=b_ub, bounds=(0, 1), method="highs").status == 0

    lo, hi = 1e-6, 1e3
    for _ in range(100):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def gavel_ftf_optimum(jobs: dict[str, tuple[float, float, float]]) -> float:
    """min_X max_m (t_m + s_m/thr_m(X)) / (c_m + s_m/iso_m) on one GPU of each type
    (:func:`gavel_rho_optimum`; iso_m = thr_m with 1/n of every type)."""
    ids = list(jobs)
    T = np.array([THR[j] for j in ids])
    s, t, c = (np.array([jobs[j][k] for j in ids]) for k in range(3))
    return gavel_rho_optimum(T, np.ones(len(TYPES)), s, t, c)


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


# ------------------------------------------------------------------ Gavel's own two-call case
GAVEL_TYPES = ("v100", "p100", "k80")
GAVEL_COUNTS = np.array([1.0, 2.0, 3.0])
GAVEL_THR = np.array([[2.0, 1.0, 0.5], [3.0, 2.0, 1.0]])  # scheduler/tests/policies_tests.py, jobs 0 and 1


def gavel_problem(steps: tuple[float, float], c: tuple[float, float] | None) -> policyopt.Problem:
    return policyopt.Problem.from_dict({
        "cluster": {"worker_types": {t: {"count": int(n)} for t, n in zip(GAVEL_TYPES, GAVEL_COUNTS)}},
        "jobs": [{"id": str(i), "throughputs": dict(zip(GAVEL_TYPES, map(float, GAVEL_THR[i]))),
                  "steps_remaining": steps[i], "time_since_start": 0.0,
                  **({} if c is None else {"isolated_time": c[i]})} for i in range(2)],
    })


def test_gavel_finish_time_fairness_with_perf_second_call() -> None:
    """Gavel's ``test_finish_time_fairness_with_perf``: jobs 0 and 1 on 1 V100, 2 P100s and 3 K80s,
    300 and 500 steps, then 200 and 300 (time since start 0 at both calls). Isolated throughputs
    by hand: each job gets 1/6, 1/3, 1/2 of the types, so 11/12 and 5/3 steps/s; after call 1,
    c = 100/(11/12) = 1200/11 s and 200/(5/3) = 120 s. Call 2's optimum is Gavel's ρ with those c,
    0.4028 (computed here by an independent bisection); the allocation of the same call without
    the cumulative isolated time scores 0.4306 by Gavel's formula."""
    tracker = IsolatedTimeTracker()
    first = {"0": 300.0, "1": 500.0}
    r1 = policyopt.solve(gavel_problem((300.0, 500.0), tuple(tracker.value(j, s) for j, s in first.items())),
                         "finish_time_fairness")
    assert r1.extra["isolated_throughputs"] == pytest.approx({"0": 11 / 12, "1": 5 / 3})
    tracker.observe(first, r1)
    c = (tracker.value("0", 200.0), tracker.value("1", 300.0))
    assert c == pytest.approx((1200 / 11, 120.0))

    s, zero = np.array([200.0, 300.0]), np.zeros(2)
    expected = gavel_rho_optimum(GAVEL_THR, GAVEL_COUNTS, s, zero, np.array(c))
    assert round(expected, 4) == 0.4028
    r2 = policyopt.solve(gavel_problem((200.0, 300.0), c), "finish_time_fairness")
    assert r2.objective == pytest.approx(expected, rel=1e-6)

    def gavel_score(r: policyopt.PolicyResult) -> float:
        """max_m ρ_m of the result's allocation by Gavel's formula, with the cumulative c."""
        X = np.array([[r.allocation[str(i)].get(t, 0.0) for t in GAVEL_TYPES] for i in range(2)])
        iso = gavel_isolated_throughputs(GAVEL_THR, GAVEL_COUNTS, np.ones(2))
        return float(np.max((s / (GAVEL_THR * X).sum(axis=1)) / (np.array(c) + s / iso)))

    assert gavel_score(r2) == pytest.approx(expected, rel=1e-6)
    without = policyopt.solve(gavel_problem((200.0, 300.0), None), "finish_time_fairness")
    assert round(gavel_score(without), 4) == 0.4306


def best_placement(j: policyopt.Job, t: str, gpus_per_server: int) -> float:
    """The job's throughput on type ``t``: consolidated, unless it is larger than a server and has an
    unconsolidated throughput there."""
    spread = j.throughputs.get(f"{t}_unconsolidated", 0.0)
    return spread if j.scale_factor > gpus_per_server and spread > 0 else max(j.throughputs.get(t, 0.0), spread)


def test_simulator_isolated_time_over_rounds_matches_gavels_update(gavel, monkeypatch) -> None:
    """Every finish-time-fairness call of a multi-GPU simulation (jobs arrive, run for rounds of the
    mechanism, finish): each job's ``isolated_time`` equals Gavel's update recomputed here from the
    posed problems alone — 0 at its first call, then ``c += (s_prev − s)/iso_prev`` with ``iso_prev``
    Gavel's isolated throughput (``count_t/n`` of every type over the scale factor, rows capped at 1)
    at the previous call; a job's throughput on a type is that of its best placement there
    (consolidated, unless the job is larger than a server and has an unconsolidated throughput)."""
    from policyopt.sim import SimConfig, posing
    from policyopt.sim.simulator import Simulator
    from policyopt.sim.traces import gavel_trace

    posed: list[policyopt.Problem] = []
    pose = posing.ProblemPoser.pose

    def spy(self, *args, **kwargs):
        p = pose(self, *args, **kwargs)
        if p is not None:
            posed.append(p)
        return p

    monkeypatch.setattr(posing.ProblemPoser, "pose", spy)
    trace = gavel_trace(gavel, 8, 20.0, seed=3, multi_gpu=True)
    Simulator({"v100": 8, "k80": 8}, SimConfig(policy="finish_time_fairness", round_seconds=360), gavel).run(trace)
    assert len(posed) >= 5 and any(j.scale_factor > 1 for p in posed for j in p.jobs)

    prev: dict[str, tuple[float, float, float]] = {}  # id -> (c, steps, isolated throughput) at the last call
    updated = 0
    for p in posed:
        types = [w.name for w in p.cluster.worker_types]
        counts = np.array([w.count for w in p.cluster.worker_types], float)
        gps = {w.name: w.gpus_per_server or w.count for w in p.cluster.worker_types}

        T = np.array([[best_placement(j, t, gps[t]) for t in types] for j in p.jobs])
        iso = gavel_isolated_throughputs(T, counts, np.array([j.scale_factor for j in p.jobs], float))
        for j in p.jobs:
            if j.id in prev:
                c0, s0, r0 = prev[j.id]
                assert j.isolated_time == pytest.approx(c0 + (s0 - j.steps_remaining) / r0, rel=1e-9)
                updated += j.steps_remaining < s0
            else:
                assert j.isolated_time == 0.0
        prev = {j.id: (float(j.isolated_time), j.steps_remaining, rate) for j, rate in zip(p.jobs, iso.tolist())}
    assert updated >= 5


def test_tracker_state_round_trip_and_retain() -> None:
    """``to_state``/``from_state`` keep ``c_m`` and ``(s_prev, thr_prev)`` exactly (JSON-safe);
    ``retain`` drops the jobs that left."""
    import json
    from types import SimpleNamespace

    from policyopt.mechanism import IsolatedTimeTracker

    t = IsolatedTimeTracker()
    t.observe({"a": 100.0, "b": 50.0}, SimpleNamespace(extra={"isolated_throughputs": {"a": 4.0, "b": 2.0}}))
    t.observe({"a": 60.0, "b": 40.0}, SimpleNamespace(extra={"isolated_throughputs": {"a": 5.0, "b": 1.0}}))
    back = IsolatedTimeTracker.from_state(json.loads(json.dumps(t.to_state())))
    assert back.value("a", 50.0) == t.value("a", 50.0) == 10.0 + 2.0
    assert back.value("b", 40.0) == 5.0
    back.retain(["a"])
    assert back.value("b", 40.0) == 0.0 and back.value("a", 60.0) == 10.0
    assert IsolatedTimeTracker.from_state(None).to_state() == {"c": {}, "prev": {}}


# ------------------------------------------------------------------ Gavel's agnostic baseline
def test_agnostic_reference_fastest_is_gavels_baseline() -> None:
    """``finish_time_fairness_agnostic -o reference=fastest`` is Gavel's ``FinishTimeFairnessPolicy``: the
    aware policy run on every job's V100 (fastest) throughput on every type. With elapsed time and
    cumulative isolated time it has another optimum than ``reference=one`` (every throughput 1)."""
    thr = {"A": (40.0, 10.0, 4.0), "B": (5.0, 4.0, 2.0), "C": (20.0, 12.0, 6.0)}
    state = {"A": (4000.0, 300.0, 100.0), "B": (900.0, 50.0, 20.0), "C": (2000.0, 600.0, 150.0)}

    def p(rates: dict[str, tuple[float, float, float]]) -> policyopt.Problem:
        return policyopt.Problem.from_dict({
            "cluster": {"worker_types": {t: {"count": 1} for t in GAVEL_TYPES}},
            "jobs": [{"id": j, "throughputs": dict(zip(GAVEL_TYPES, rates[j])), "steps_remaining": s,
                      "time_since_start": t, "isolated_time": c} for j, (s, t, c) in state.items()],
        })

    real = p(thr)
    as_v100 = p({j: (r[0],) * 3 for j, r in thr.items()})
    gavel = policyopt.solve(as_v100, "finish_time_fairness")
    ours = policyopt.solve(real, "finish_time_fairness_agnostic", reference="fastest")
    ones = policyopt.solve(real, "finish_time_fairness_agnostic")
    assert ours.objective == pytest.approx(gavel.objective, rel=1e-6)
    T = np.array([thr[j][0] for j in state])
    s, t, c = (np.array([state[j][k] for j in state]) for k in range(3))
    assert gavel.objective == pytest.approx(gavel_rho_optimum(np.tile(T[:, None], (1, 3)), np.ones(3), s, t, c),
                                            rel=1e-6)
    assert abs(ones.objective - ours.objective) > 1e-3
    with pytest.raises(policyopt.InputError, match="reference"):
        policyopt.solve(real, "finish_time_fairness_agnostic", reference="v100")
