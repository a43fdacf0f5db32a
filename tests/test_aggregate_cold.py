"""A first solve on the class space (``policyopt.aggregate_cold``): where jobs repeat, a
job-separable policy's first call builds the reduced LP from the job classes, never the whole LP.
Every answer equals a cold HiGHS simplex solve of the whole LP (objective to 1e-9 relative, every
row and bound to 1e-9, max-min's fill total to 1e-7), on Gavel-like and generated problems; the
route is taken where jobs repeat and not otherwise, and the kept model's next re-solves still
equal cold solves."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import (Cluster, Job, Policy, PolicyResult, Problem, aggregate_cold, aggregate_resolve, get_policy,
                       incremental)
from policyopt.aggregate_resolve import AggregateModel
from policyopt.standard_form import StandardForm

# max-sum's first problem of repeated jobs answers by its class transportation LP otherwise (no kept
# model: policyopt.class_transport, tested in test_class_transport.py): see conftest
pytestmark = pytest.mark.usefixtures("no_transport_route")

TYPES = ("v100", "p100", "k80")
POLICIES = [("max_min_fairness", {}), ("max_min_fairness", {"fill": False}), ("max_min_fairness_agnostic", {}),
            ("max_sum_throughput", {}), ("max_sum_throughput", {"normalize": True})]


def kind_job(i: int, k: int, seed: int = 0) -> Job:
    """Job ``j<i>`` of kind ``k``: its throughputs, scale factor and weight depend on ``k`` only."""
    r = np.random.default_rng(7919 * seed + 1000 + k)
    thr = {t: float(r.uniform(0.5, 10)) for t in TYPES if r.random() < 0.8 or t == "k80"}
    return Job(f"j{i}", thr, scale_factor=int(r.choice([1, 2, 4])), weight=float(r.choice([1.0, 2.0])))


def kinds_problem(copies: list[int], unique: int = 0, gpus: int = 40, seed: int = 0) -> Problem:
    """``copies[k]`` jobs of kind ``k`` (interleaved), then ``unique`` jobs of kinds of their own."""
    kinds = [k for k, c in enumerate(copies) for _ in range(c)]
    np.random.default_rng(seed).shuffle(kinds)
    kinds += list(range(len(copies), len(copies) + unique))
    jobs = tuple(kind_job(i, k, seed) for i, k in enumerate(kinds))
    return Problem(Cluster.from_counts({t: gpus for t in TYPES}), jobs)


def check(got: PolicyResult, p: Problem, name: str, opts: dict[str, Any]) -> None:
    """``got`` equals a cold simplex solve of the whole LP of ``p``."""
    ref = get_policy(name, algorithm="simplex", **opts).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)  # every row and bound of the whole LP
    assert list(got.space.jobs.labels) == [j.id for j in p.jobs]
    sp_ = got.space  # (classes declared on the space: their masks and equal shares are every job's)
    assert np.array_equal(sp_.single_mask, sp_.single_mask_of(sp_.T, sp_.scale))
    w = sp_.counts / sp_.counts.sum()
    assert np.array_equal(sp_.equal_share_throughput(), sp_._best_placement(sp_.T, sp_.single_mask) @ w)
    if name.startswith("max_min") and opts.get("fill", True):
        assert got.extra["fill"]["normalized_throughput_after"] == pytest.approx(
            ref.extra["fill"]["normalized_throughput_after"], rel=1e-7)
    if name == "max_sum_throughput":  # (its objective is the allocation's own total)
        sp_ = got.space
        thr = sp_.throughput_values(got.X)
        if opts.get("normalize"):
            thr = thr / sp_.equal_share_throughput()
        assert float(thr.sum()) == pytest.approx(got.objective, rel=1e-9)


def route(pol: Policy) -> bool:
    """Whether ``pol``'s first call took the class route (its kept model an aggregated one,
    updated once: by that call)."""
    s = incremental.state(pol)
    return isinstance(s, AggregateModel) and s.updates == 1


@pytest.mark.parametrize("name,opts", POLICIES)
def test_gavel_like_first_call_takes_the_class_route(gavel: Any, name: str, opts: dict) -> None:
    """Gavel's throughputs, 512 jobs of its trace's job types (many repeats): the first call is answered on
    the class space and equals the whole LP's cold simplex solve."""
    from policyopt.sim.traces import gavel_trace, parse_job_type

    trace = gavel_trace(gavel, 512, static=True, multi_gpu=True, seed=5)
    types = [gavel.type_index(*parse_job_type(j.job_type)) for j in trace]
    p = gavel.problem(types, Cluster.from_counts({t: 128 for t in TYPES}, gpus_per_server=4))
    pol = get_policy(name, **opts)
    got = pol.solve(p)
    assert route(pol)
    check(got, p, name, opts)


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(POLICIES), st.lists(st.integers(1, 60), min_size=1, max_size=8), st.integers(0, 6),
       st.integers(4, 80), st.integers(0, 3))
def test_generated_problems_equal_cold(case: tuple[str, dict], copies: list[int], unique: int, gpus: int,
                                       seed: int) -> None:
    """Generated problems of repeated kinds and a few unique jobs: whichever route the first call
    takes (the class route where the jobs repeat enough), the answer equals the whole LP's."""
    name, opts = case
    p = kinds_problem(copies, unique, gpus, seed)
    pol = get_policy(name, **opts)
    got = pol.solve(p)
    n, kinds = len(p.jobs), len(copies) + unique
    if n >= aggregate_cold.MIN_JOBS and kinds <= aggregate_cold.MAX_CLASS_SHARE * n:
        assert route(pol)
    elif n < aggregate_cold.MIN_JOBS:
        assert not route(pol)
    check(got, p, name, opts)


@pytest.mark.parametrize("name,opts", [POLICIES[0], POLICIES[3]])
def test_not_taken_when_jobs_do_not_repeat(name: str, opts: dict) -> None:
    """Jobs of distinct data (or too few jobs) are solved on the whole LP as before."""
    p = kinds_problem([], unique=200, gpus=60)
    pol = get_policy(name, **opts)
    got = pol.solve(p)
    assert not route(pol)
    check(got, p, name, opts)
    few = kinds_problem([20, 20], gpus=10)
    assert len(few.jobs) < aggregate_cold.MIN_JOBS
    pol = get_policy(name, **opts)
    pol.solve(few)
    assert not route(pol)


@pytest.mark.parametrize("name,opts", POLICIES)
def test_re_solves_after_the_class_route_equal_cold(name: str, opts: dict) -> None:
    """After a first call on the class space, arrivals of known kinds and completions re-solve the
    kept reduced LP (counted), each equal to a cold solve; a job of a new kind goes to the whole LP."""
    copies = [40, 30, 30, 25, 25, 20, 10]
    p = kinds_problem(copies, gpus=50)
    pol = get_policy(name, **opts)
    check(pol.solve(p), p, name, opts)
    assert route(pol)
    jobs = list(p.jobs)
    r = np.random.default_rng(3)
    for step in range(6):
        if step % 2:
            del jobs[int(r.integers(len(jobs)))]
        else:
            jobs.append(kind_job(1000 + step, int(r.integers(len(copies)))))
        q = p.with_jobs(jobs)
        check(pol.solve(q), q, name, opts)
        s = incremental.state(pol)
        assert isinstance(s, AggregateModel) and s.updates == step + 2
    jobs.append(kind_job(2000, 99))  # a new kind: the whole LP, cold
    q = p.with_jobs(jobs)
    check(pol.solve(q), q, name, opts)
    assert not isinstance(incremental.state(pol), AggregateModel)


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_a_failed_certificate_solves_the_whole_lp(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """A first answer on the class space that does not certify (twice: from no basis, then cold)
    is not returned: the whole LP is built and solved, and kept."""
    calls = []

    def refuse(sf: StandardForm, x: np.ndarray, y: np.ndarray, tol: float = 1e-9
               ) -> tuple[bool, float, float, float]:
        calls.append(1)
        return False, 0.0, 1.0, 0.0

    monkeypatch.setattr(aggregate_resolve, "certify", refuse)
    p = kinds_problem([50, 50, 50, 40], gpus=50)
    pol = get_policy(name)
    got = pol.solve(p)
    assert len(calls) == 2
    assert not isinstance(incremental.state(pol), AggregateModel)
    check(got, p, name, {})


def test_job_classes_are_exact() -> None:
    """Classes are rows of exactly equal data; a hash that merges unequal rows (all multipliers 0
    here) is caught by the exact comparison and gives no classes."""
    r = np.random.default_rng(0)
    base = r.uniform(0, 5, (6, 3))
    pick = r.integers(0, 6, 500)
    T, scale, w = base[pick], np.array([1, 2, 4, 1, 2, 8], float)[pick], np.ones(500)
    group, rep = aggregate_cold.job_classes(T, scale, w)
    assert rep.size == 6
    assert np.array_equal(T, T[rep][group]) and np.array_equal(scale, scale[rep][group])
    # each class represented by its first job, classes in the order of their first jobs
    assert np.array_equal(rep, np.sort(np.unique(group, return_index=True)[1]))
    assert np.array_equal(group[rep], np.arange(6))
    assert len({tuple(T[j]) for j in range(500)}) == 6
    T2 = T.copy()
    T2[7, 1] = np.nextafter(T2[7, 1], 10.0)  # one job one ulp away: a class of its own
    group2, rep2 = aggregate_cold.job_classes(T2, scale, w)
    assert rep2.size == 7 and np.count_nonzero(group2 == group2[7]) == 1
    saved = aggregate_cold._MULT.copy()
    try:
        aggregate_cold._MULT[:] = 0
        assert aggregate_cold.job_classes(T, scale, w) is None
    finally:
        aggregate_cold._MULT[:] = saved


def test_bucket_firsts_checks_the_assignment(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each position's smallest position of equal bucket; a table filled in another order (here
    forward: each bucket keeps its last position) is caught and filled again by ``np.minimum.at``."""
    b = np.random.default_rng(5).integers(0, 16, 200)
    want = np.array([int(np.flatnonzero(b == v)[0]) for v in b])
    assert np.array_equal(aggregate_cold._bucket_firsts(b, 16), want)

    def forward(table: np.ndarray, bb: np.ndarray) -> None:
        for i, v in enumerate(bb.tolist()):
            table[v] = i

    monkeypatch.setattr(aggregate_cold, "_fill_reversed", forward)
    assert np.array_equal(aggregate_cold._bucket_firsts(b, 16), want)
    T = np.repeat(np.eye(3), 4, axis=0)[np.random.default_rng(6).permutation(12)]
    group, rep = aggregate_cold.job_classes(T, np.ones(12), np.ones(12))
    assert np.array_equal(rep, np.sort(np.unique(T.argmax(axis=1), return_index=True)[1]))
    assert np.array_equal(T[rep][group], T)


@pytest.mark.parametrize("max_bits", [1, 3, 20])
def test_job_classes_through_crowded_bucket_tables(monkeypatch: pytest.MonkeyPatch, max_bits: int) -> None:
    """Buckets shared by unequal hashes (tables of 2, 8 and up to 2**20 buckets): the jobs of a
    bucket whose first job has another hash are bucketed again, then sorted; the classes are
    those of equal data, each represented by its first job, numbered in that order."""
    monkeypatch.setattr(aggregate_cold, "_MAX_BITS", max_bits)
    r = np.random.default_rng(3)
    for n, kinds in ((1, 1), (7, 7), (300, 40), (2000, 500)):
        base = r.uniform(0, 5, (kinds, 4))
        pick = r.integers(0, kinds, n)
        T, scale, w = base[pick], (1.0 + pick % 3), np.where(pick % 5 == 0, 2.0, 1.0)
        got = aggregate_cold.job_classes(T, scale, w)
        assert got is not None
        group, rep = got
        _, first, inv = np.unique(pick, return_index=True, return_inverse=True)
        order = np.argsort(first)  # the kinds in the order of their first jobs
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        assert np.array_equal(rep, first[order]) and np.array_equal(group, rank[inv])
