"""Properties the Gavel work states, as hypothesis property tests over random small problems.

* allocations never exceed capacity (checked from the result JSON, independently of the library),
  including jobs whose scale factor exceeds a type's count (they get 0 there);
* sharing incentive: every fairness policy is at least as good as the isolated allocation on its
  own objective;
* enabling space sharing never makes the objective worse;
* on one worker type each policy reduces to its classical form (closed forms computed here).
"""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from scipy.optimize import brentq

import policyopt
from policyopt import Problem

TYPES = ("v100", "p100", "k80")
PRICES = {"v100": 3.06, "p100": 1.46, "k80": 0.9}
SETTINGS = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def random_problem(seed: int, n_max: int = 5, with_pairs: bool = True, one_type: bool = False,
                   unit_scale: bool = False) -> Problem:
    """Random cluster (some types smaller than some jobs' scale factors), jobs, SLOs, colocations."""
    rng = np.random.default_rng(seed)
    types = ("v100",) if one_type else TYPES
    counts = {t: int(rng.integers(1, 5)) for t in types}
    n = int(rng.integers(2, n_max + 1))
    jobs = []
    for i in range(n):
        sf = 1 if unit_scale else int(rng.choice([1, 1, 2, 4]))
        thr = {t: float(rng.uniform(0.5, 20.0)) for t in types}
        if not one_type and rng.random() < 0.2:
            thr[types[int(rng.integers(len(types)))]] = 0.0
        if not any(v > 0 and sf <= counts[t] for t, v in thr.items()):
            sf = 1
            thr[types[0]] = max(thr[types[0]], 1.0)
        jobs.append({"id": f"j{i}", "throughputs": thr, "scale_factor": sf,
                     "weight": float(rng.choice([1.0, 2.0])), "steps_remaining": float(rng.uniform(100, 1e5)),
                     "time_since_start": float(rng.uniform(0, 5e3)) if rng.random() < 0.6 else 0.0,
                     "arrival": float(rng.uniform(0, 100)),
                     "slo_seconds": float(rng.uniform(1e3, 1e5)) if rng.random() < 0.3 else None})
    coloc = []
    if with_pairs:
        for a, b in itertools.combinations(range(n), 2):
            if jobs[a]["scale_factor"] != jobs[b]["scale_factor"]:
                continue
            for t in types:
                ta, tb = jobs[a]["throughputs"][t], jobs[b]["throughputs"][t]
                if ta > 0 and tb > 0 and rng.random() < 0.7:
                    coloc.append({"jobs": [f"j{a}", f"j{b}"], "worker_type": t,
                                  "throughputs": [ta * float(rng.uniform(0.4, 0.95)),
                                                  tb * float(rng.uniform(0.4, 0.95))]})
    cluster = {t: {"count": c, "price_per_hour": PRICES[t]} for t, c in counts.items()}
    return Problem.from_dict({"cluster": {"worker_types": cluster}, "jobs": jobs, "colocated": coloc})


ALL_POLICIES = [("max_min_fairness", {}), ("max_min_fairness_agnostic", {}), ("max_sum_throughput", {}),
                ("makespan", {}), ("makespan", {"fill": True}), ("finish_time_fairness", {}),
                ("finish_time_fairness_agnostic", {}), ("fifo", {}), ("fifo_agnostic", {}),
                ("shortest_job_first", {}), ("min_cost", {}), ("min_cost", {"exact_ratio": True}),
                ("min_cost_slo", {}), ("makespan_under_budget", {"budget": 50.0}), ("isolated", {}),
                ("gandiva", {}), ("allox", {"alpha": 1.0})]


def check_capacity(p: Problem, r: policyopt.PolicyResult, tol: float = 1e-6) -> None:
    """From the result JSON alone: per-type capacity, per-job time, zero where a job cannot run."""
    used = {t: 0.0 for t in p.cluster.names}
    time_ = {j.id: 0.0 for j in p.jobs}
    sf = {j.id: j.scale_factor for j in p.jobs}
    counts = p.cluster.counts
    for jid, alloc in r.allocation.items():
        for cfg, frac in alloc.items():
            t = policyopt.problem.physical_type(cfg)
            assert -tol <= frac <= 1 + tol
            used[t] += sf[jid] * frac
            time_[jid] += frac
            if sf[jid] > counts[t] or p.job(jid).throughputs.get(cfg, 0.0) <= 0:
                assert frac <= tol, (jid, cfg, frac)
    for c in r.colocated_allocation:
        a, b = c["jobs"]
        t = policyopt.problem.physical_type(c["worker_type"])
        used[t] += sf[a] * c["fraction"]
        time_[a] += c["fraction"]
        time_[b] += c["fraction"]
    for t, u in used.items():
        assert u <= counts[t] * (1 + tol) + tol, (t, u, counts[t])
    for jid, tt in time_.items():
        assert tt <= 1 + tol, (jid, tt)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), space_sharing=st.booleans())
def test_never_exceeds_capacity(seed: int, space_sharing: bool) -> None:
    p = random_problem(seed)
    for name, opts in ALL_POLICIES:
        r = policyopt.solve(p, name, space_sharing=space_sharing, **opts)
        check_capacity(p, r)
        assert not r.space.check(r.X), name


def test_scale_factor_above_type_count_gets_zero_there() -> None:
    """A 4-GPU job on a cluster with 2 K80s and 8 V100s: nothing on the K80 under any policy."""
    p = Problem.from_dict({"cluster": {"worker_types": {"v100": {"count": 8, "price_per_hour": 3.0},
                                                        "k80": {"count": 2, "price_per_hour": 1.0}}},
                           "jobs": [{"id": "big", "throughputs": {"v100": 40.0, "k80": 100.0}, "scale_factor": 4},
                                    {"id": "small", "throughputs": {"v100": 10.0, "k80": 5.0}}]})
    for name, opts in ALL_POLICIES:
        r = policyopt.solve(p, name, **opts)
        assert r.allocation["big"].get("k80", 0.0) == 0.0, name
        check_capacity(p, r)


# ---------------------------------------------------------------------------------- sharing incentive
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1), space_sharing=st.booleans())
def test_sharing_incentive(seed: int, space_sharing: bool) -> None:
    p = random_problem(seed)
    iso = policyopt.solve(p, "isolated")
    space = iso.space
    norm = space.scale / (space.weights * space.equal_share_throughput())
    iso_mmf = float(np.min(space.throughput_values(iso.X) * norm))
    r = policyopt.solve(p, "max_min_fairness", space_sharing=space_sharing)
    assert r.objective >= iso_mmf - 1e-7
    r = policyopt.solve(p, "finish_time_fairness", space_sharing=space_sharing)
    assert r.objective <= 1.0 + 1e-7
    s = np.array([j.steps_remaining for j in p.jobs])
    t = np.array([j.time_since_start for j in p.jobs])
    thr = np.array([r.effective_throughputs[j.id] for j in p.jobs])
    thr_iso = np.array([iso.effective_throughputs[j.id] for j in p.jobs])
    rho = (t + s / thr) / (t + s / thr_iso)
    assert np.all(rho <= 1.0 + 1e-6)
    assert np.max(rho) == pytest.approx(r.objective, rel=1e-6)


# ---------------------------------------------------------------------------------- space sharing never worse
SCALAR_POLICIES = [("max_min_fairness", {}), ("max_sum_throughput", {}), ("makespan", {}),
                   ("finish_time_fairness", {}), ("fifo", {}), ("min_cost", {}),
                   ("min_cost", {"exact_ratio": True}), ("makespan_under_budget", {"budget": 50.0})]


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_space_sharing_never_worse(seed: int) -> None:
    p = random_problem(seed)
    for name, opts in SCALAR_POLICIES:
        off = policyopt.solve(p, name, **opts)
        on = policyopt.solve(p, name, space_sharing=True, **opts)
        if off.objective is None:  # e.g. an infeasible budget: sharing may only make it feasible
            continue
        assert on.objective is not None, name
        if policyopt.policy.policy_class(name).objective_sense == "max":
            assert on.objective >= off.objective * (1 - 1e-7) - 1e-9, name
        else:
            assert on.objective <= off.objective * (1 + 1e-7) + 1e-9, name
    # lexicographic: SJF's normalized throughputs, in SJF order, are lexicographically no worse
    off = policyopt.solve(p, "shortest_job_first")
    on = policyopt.solve(p, "shortest_job_first", space_sharing=True)
    fastest = {j.id: max(j.throughputs.values()) for j in p.jobs}
    for jid in off.extra["durations"]:
        a = on.effective_throughputs[jid] / fastest[jid]
        b = off.effective_throughputs[jid] / fastest[jid]
        if a > b + 1e-6:
            break  # strictly better at this level: later levels may be anything
        assert a >= b - 1e-6, jid


# ---------------------------------------------------------------------------------- one worker type
@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_one_type_classical_forms(seed: int) -> None:
    p = random_problem(seed, n_max=6, with_pairs=False, one_type=True)
    count = p.cluster.counts["v100"]
    T = np.array([j.throughputs["v100"] for j in p.jobs])
    sf = np.array([j.scale_factor for j in p.jobs], float)
    s = np.array([j.steps_remaining for j in p.jobs])
    t = np.array([j.time_since_start for j in p.jobs])
    fits = sf <= count
    # makespan: M* = max(Σ sf·s/T / count, max s/T) (work conservation and one job's speed limit)
    if fits.all():
        m = policyopt.solve(p, "makespan")
        assert m.objective == pytest.approx(max(np.sum(sf * s / T) / count, np.max(s / T)), rel=1e-7)
    # max total throughput: fractional knapsack by T/sf (each job's time ≤ 1)
    cap, best = float(count), 0.0
    for i in np.argsort(-T / sf, kind="stable"):
        if not fits[i]:
            continue
        x = min(1.0, cap / sf[i])
        best += T[i] * x
        cap -= sf[i] * x
    assert policyopt.solve(p, "max_sum_throughput").objective == pytest.approx(best, rel=1e-7)
    # heterogeneity-agnostic = aware when there is only one type
    for name in ("max_min_fairness", "fifo"):
        a = policyopt.solve(p, name).objective
        b = policyopt.solve(p, f"{name}_agnostic").objective
        assert a == pytest.approx(b, rel=1e-7), name
    # finish-time fairness (Themis on one resource): the level ρ at which Σ sf·x_m(ρ) = count,
    # x_m(ρ) = min(1, s/(T(ρ·D − t))), floored by the jobs that cannot go faster than x = 1
    if fits.all():
        xiso = np.minimum(count / len(s) / sf, 1.0)
        D = t + s / (T * xiso)
        floor = float(np.max((t + s / T) / D))

        def excess(rho: float) -> float:
            return float(np.sum(sf * np.minimum(1.0, s / (T * (rho * D - t))))) - count

        rho_star = floor if excess(floor) <= 0 else brentq(excess, floor, 1.0 + 1e-9, xtol=1e-14, rtol=1e-13)
        f = policyopt.solve(p, "finish_time_fairness")
        assert f.objective == pytest.approx(rho_star, rel=1e-6)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_one_type_unit_jobs_fifo_and_sjf_are_classical(seed: int) -> None:
    """Single-GPU jobs on one type: FIFO runs the first ``count`` arrivals; SJF the ``count``
    shortest (s/T) jobs; time-zero FTF agnostic = aware."""
    p = random_problem(seed, n_max=6, with_pairs=False, one_type=True, unit_scale=True)
    count = p.cluster.counts["v100"]
    jobs = list(p.jobs)
    by_arrival = sorted(range(len(jobs)), key=lambda i: (jobs[i].arrival, i))
    r = policyopt.solve(p, "fifo")
    for rank, i in enumerate(by_arrival):
        assert sum(r.allocation[jobs[i].id].values()) == pytest.approx(1.0 if rank < count else 0.0, abs=1e-7)
    d = [j.steps_remaining / j.throughputs["v100"] for j in jobs]
    by_d = sorted(range(len(jobs)), key=lambda i: (d[i], jobs[i].arrival, i))
    r = policyopt.solve(p, "shortest_job_first")
    for rank, i in enumerate(by_d):
        assert sum(r.allocation[jobs[i].id].values()) == pytest.approx(1.0 if rank < count else 0.0, abs=1e-6)
    p0 = p.with_jobs([policyopt.Job(j.id, j.throughputs, steps_remaining=j.steps_remaining) for j in jobs])
    a = policyopt.solve(p0, "finish_time_fairness").objective
    b = policyopt.solve(p0, "finish_time_fairness_agnostic").objective
    assert a == pytest.approx(b, rel=1e-7)


@SETTINGS
@given(seed=st.integers(0, 2**32 - 1))
def test_sjf_greedy_prefix_equals_lp_sequence(seed: int) -> None:
    """The exact greedy prefix (no pairs, no ties) and the pure LP sequence settle the same levels.

    The LP sequence holds each settled level only to ~1e-9 (its back-off and HiGHS's feasibility
    tolerance), and across a near tie of relative gap δ a later job can gain ~1e-9/δ by shifting an
    earlier job between the two types (seed 588: δ = 1.8e-5, a later level 3.8e-5 higher; δ ≈ 1e-3
    gives ~1.5e-6). So near ties (δ < 1e-4) are skipped and levels must agree to 2e-5."""
    p = random_problem(seed, n_max=6, with_pairs=False)
    for job in p.jobs:
        t = np.sort([v for v in job.throughputs.values() if v > 0])
        assume(not np.any(np.diff(t) <= 1e-4 * t[1:]))
    a = policyopt.solve(p, "shortest_job_first")
    b = policyopt.solve(p, "shortest_job_first", method="lp")
    fastest = {j.id: max(j.throughputs.values()) for j in p.jobs}
    for jid in a.extra["durations"]:
        assert a.effective_throughputs[jid] / fastest[jid] == pytest.approx(
            b.effective_throughputs[jid] / fastest[jid], abs=2e-5), jid
