"""max_min_fairness's second stage (``fill``, on by default): among max-min optimal allocations the
total normalized throughput is maximal, so no worker type sits idle while a job with time to spare
could run on it at no cost to the max-min level.

Checked two ways: directly (no job with spare time on a type with spare capacity where it has a
throughput) and against an independent cvxpy LP (the max total normalized throughput subject to
the max-min level, from the problem's numbers alone)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import policyopt
from policyopt import Cluster, Job, Problem
from policyopt.examples import load_example
from policyopt.problem import physical_type

EPS = 1e-6


def a100_t4_cpu() -> Problem:
    """Five jobs on 2 A100s, 4 T4s and 16 CPU workers; ``svm`` (1 step/s anywhere) is the
    bottleneck (t* = 1), so the others have room: a vertex of the max-min LP leaves 1.5 A100s and
    3.5 T4s idle."""
    return Problem(Cluster.from_counts({"a100": 2, "t4": 4, "cpu": 16}), (
        Job("bert", {"a100": 10.0, "t4": 3.0, "cpu": 0.4}),
        Job("resnet", {"a100": 8.0, "t4": 4.0, "cpu": 1.0}),
        Job("gpt-2gpu", {"a100": 24.0, "t4": 4.0, "cpu": 0.0}, scale_factor=2),
        Job("xgb", {"a100": 3.0, "t4": 2.5, "cpu": 2.0}),
        Job("svm", {"a100": 1.0, "t4": 1.0, "cpu": 1.0}),
    ))


def usable_idle(problem: Problem, allocation: dict[str, dict[str, float]]) -> list[tuple[str, str]]:
    """(job, worker type) pairs where the job has spare time, the type spare capacity, and the job
    a positive throughput there: capacity a job could use without taking any from another job."""
    counts = {w.name: w.count for w in problem.cluster.worker_types}
    used = dict.fromkeys(counts, 0.0)
    spare_time = {}
    for job in problem.jobs:
        alloc = allocation[job.id]
        spare_time[job.id] = 1.0 - sum(alloc.values())
        for config, f in alloc.items():
            used[physical_type(config)] += f * job.scale_factor
    return [(job.id, w) for job in problem.jobs for w, thr in job.throughputs.items()
            if thr > 0 and spare_time[job.id] > EPS and counts[w] - used[w] > EPS]


def cvxpy_fill_optimum(problem: Problem) -> tuple[float, float]:
    """``(t*, max Σ_m thr(m)/thr_eq(m) s.t. every level ≥ t*(1 − 1e-9))`` by cvxpy from the
    problem's numbers (single-server types, no pairs: thr_eq(m) = Σ_c T[m,c]·count_c/Σ count)."""
    cp = pytest.importorskip("cvxpy")
    types = [w.name for w in problem.cluster.worker_types]
    counts = np.array([w.count for w in problem.cluster.worker_types], float)
    T = np.array([[j.throughputs.get(w, 0.0) for w in types] for j in problem.jobs])
    sf = np.array([j.scale_factor for j in problem.jobs], float)
    w = np.array([j.weight for j in problem.jobs], float)
    thr_eq = T @ (counts / counts.sum())
    X = cp.Variable(T.shape, nonneg=True)
    thr = cp.sum(cp.multiply(T, X), axis=1)
    rows = [cp.sum(X, axis=1) <= 1, sf @ X <= counts, X[T == 0] == 0] if (T == 0).any() else \
        [cp.sum(X, axis=1) <= 1, sf @ X <= counts]
    level = cp.multiply(sf / (w * thr_eq), thr)
    t = cp.Variable()
    cp.Problem(cp.Maximize(t), [*rows, level >= t]).solve(solver="CLARABEL")
    t_star = float(t.value)
    second = cp.Problem(cp.Maximize(cp.sum(cp.multiply(1 / thr_eq, thr))), [*rows, level >= t_star * (1 - 1e-9)])
    second.solve(solver="CLARABEL")
    return t_star, float(second.value)


@pytest.mark.parametrize("make", [a100_t4_cpu, lambda: load_example("small")], ids=["a100_t4_cpu", "small"])
def test_no_usable_capacity_left_idle(make) -> None:
    problem = make()
    res = policyopt.solve(problem, "max_min_fairness")
    assert res.status.value == "optimal"
    assert usable_idle(problem, res.allocation) == []
    first = policyopt.solve(problem, "max_min_fairness", fill=False)
    assert res.objective == pytest.approx(first.objective, rel=1e-9)  # t* of the first LP
    assert res.extra["fill"]["min_level"] == pytest.approx(first.objective, rel=1e-6)
    fill = res.extra["fill"]
    assert fill["normalized_throughput_after"] >= fill["normalized_throughput_before"] - 1e-9


def test_a100_t4_cpu_matches_an_independent_lp() -> None:
    """The hand-written problem: t* = 1 (svm), and the returned allocation attains cvxpy's maximum
    total normalized throughput at that level; the first LP alone left GPUs idle."""
    problem = a100_t4_cpu()
    t_star, best_total = cvxpy_fill_optimum(problem)
    assert t_star == pytest.approx(1.0, rel=1e-6)
    res = policyopt.solve(problem, "max_min_fairness")
    assert res.objective == pytest.approx(t_star, rel=1e-6)
    assert res.extra["fill"]["normalized_throughput_after"] == pytest.approx(best_total, rel=1e-6)
    first = policyopt.solve(problem, "max_min_fairness", fill=False)
    assert usable_idle(problem, first.allocation), "the first LP's vertex should leave usable capacity idle"


def test_small_matches_an_independent_lp() -> None:
    problem = load_example("small")
    t_star, best_total = cvxpy_fill_optimum(problem)
    res = policyopt.solve(problem, "max_min_fairness")
    assert res.objective == pytest.approx(t_star, rel=1e-6)
    assert res.extra["fill"]["normalized_throughput_after"] == pytest.approx(best_total, rel=1e-6)
    k80 = sum(a.get("k80", 0.0) for a in res.allocation.values())
    assert k80 > 0.1  # the first LP's vertex left every K80 unused


@pytest.mark.parametrize("solver", ["cvxpy", "pulp"])
def test_fill_through_other_backends(solver: str) -> None:
    """The second stage uses the backend-neutral in-place updates: same result on cvxpy and PuLP."""
    problem = a100_t4_cpu()
    ref = policyopt.solve(problem, "max_min_fairness")
    res = policyopt.solve(problem, "max_min_fairness", solver=solver)
    assert res.objective == pytest.approx(ref.objective, rel=1e-5)
    assert res.extra["fill"]["normalized_throughput_after"] == pytest.approx(
        ref.extra["fill"]["normalized_throughput_after"], rel=1e-5)
    assert usable_idle(problem, res.allocation) == []


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 8))
def test_fill_property_random(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    types = ["a100", "t4", "cpu"]
    counts = dict(zip(types, rng.integers(2, 6, 3).tolist()))
    jobs = []
    for i in range(n):
        thr = dict(zip(types, np.round(rng.uniform(0.0, 10.0, 3) * (rng.random(3) > 0.2), 3).tolist()))
        if not any(v > 0 for v in thr.values()):
            thr["cpu"] = 1.0
        jobs.append(Job(f"j{i}", thr, scale_factor=int(rng.choice([1, 1, 2])), weight=float(rng.choice([1, 2]))))
    problem = Problem(Cluster.from_counts(counts), tuple(jobs))
    res = policyopt.solve(problem, "max_min_fairness")
    first = policyopt.solve(problem, "max_min_fairness", fill=False)
    assert res.objective == pytest.approx(first.objective, rel=1e-9, abs=1e-12)
    assert usable_idle(problem, res.allocation) == []


# ------------------------------------------------------------------ hierarchical: spare capacity flows on
def _tenants(jobs: list[Job], counts: dict[str, int], policies: tuple[str, str] = ("fairness", "fairness"),
             weights: tuple[float, float] = (1.0, 3.0)) -> Problem:
    from policyopt import Entity

    return Problem(Cluster.from_counts(counts), tuple(jobs),
                   entities={"prod": Entity("prod", weights[0], policies[0]),
                             "research": Entity("research", weights[1], policies[1])})


@pytest.mark.parametrize("policies", [("fairness", "fairness"), ("fifo", "fairness"), ("fairness", "fifo")])
def test_hierarchical_share_is_not_a_cap(policies: tuple[str, str]) -> None:
    """``prod`` has weight 1 of 4, but ``research`` can only use CPUs: prod's jobs get every GPU
    (their weight share does not cap them on an otherwise idle cluster), research keeps its CPUs."""
    jobs = [Job("p1", {"a100": 10.0, "t4": 3.0}, entity="prod"),
            Job("p2", {"a100": 8.0, "t4": 4.0}, entity="prod", scale_factor=2),
            Job("r1", {"cpu": 1.0}, entity="research")]
    problem = _tenants(jobs, {"a100": 2, "t4": 4, "cpu": 4}, policies)
    res = policyopt.solve(problem, "hierarchical")
    assert res.status.value == "optimal"
    assert usable_idle(problem, res.allocation) == []
    assert sum(res.allocation["r1"].values()) == pytest.approx(1.0, abs=1e-6)
    gpu_time = {j: sum(f for c, f in res.allocation[j].items() if physical_type(c) in ("a100", "t4"))
                for j in ("p1", "p2")}
    assert gpu_time["p1"] == pytest.approx(1.0, abs=1e-6) and gpu_time["p2"] == pytest.approx(1.0, abs=1e-6)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 7))
def test_hierarchical_is_work_conserving(seed: int, n: int) -> None:
    """Random tenants, weights and FIFO/fairness mixes: no job with time to spare is kept off a
    worker type with spare capacity where it can run (Gavel's hierarchical water-filling)."""
    rng = np.random.default_rng(seed)
    types = ["a100", "t4", "cpu"]
    counts = dict(zip(types, rng.integers(2, 6, 3).tolist()))
    jobs = []
    for i in range(n):
        thr = dict(zip(types, np.round(rng.uniform(0.0, 10.0, 3) * (rng.random(3) > 0.3), 3).tolist()))
        if not any(v > 0 for v in thr.values()):
            thr["cpu"] = 1.0
        jobs.append(Job(f"j{i}", thr, scale_factor=int(rng.choice([1, 1, 2])),
                        entity="prod" if i % 2 else "research", arrival=float(i)))
    pols = tuple(str(p) for p in rng.choice(["fairness", "fifo"], 2))
    problem = _tenants(jobs, counts, (pols[0], pols[1]), (float(rng.integers(1, 4)), float(rng.integers(1, 4))))
    res = policyopt.solve(problem, "hierarchical")
    assert res.status.value == "optimal"
    assert usable_idle(problem, res.allocation) == []
