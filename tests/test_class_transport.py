"""A max-sum throughput policy's first problem of repeated jobs, answered by the transportation LP
over the job classes (``policyopt.class_transport``). Every answer equals a cold HiGHS simplex
solve of the whole LP (objective to 1e-9 relative, every row and bound of the whole LP to 1e-9);
the route answers only a policy's first problem (the re-solves after it, from its kept basis
(``policyopt.transport_resolve``), equal cold solves), and declines where jobs repeat too little,
below 128 jobs, with options the kept model refuses, or when the certificate fails."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import Cluster, Job, PolicyResult, Problem, class_transport, get_policy, incremental, transport_resolve
from policyopt.solvers import transport

TYPES = ("v100", "p100", "k80")
OPTS = [{}, {"normalize": True}]


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


def check(got: PolicyResult, p: Problem, opts: dict[str, Any]) -> None:
    """``got`` equals a cold simplex solve of the whole LP of ``p``, and its objective is its
    allocation's own total."""
    ref = get_policy("max_sum_throughput", algorithm="simplex", **opts).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)  # every row and bound of the whole LP
    assert list(got.space.jobs.labels) == [j.id for j in p.jobs]
    sp_ = got.space
    thr = sp_.throughput_values(got.X)
    if opts.get("normalize"):
        thr = thr / sp_.equal_share_throughput()
    assert float(thr.sum()) == pytest.approx(got.objective, rel=1e-9)
    # the declared classes give every job its own mask row and equal share
    assert np.array_equal(sp_.single_mask, sp_.single_mask_of(sp_.T, sp_.scale))
    w = sp_.counts / sp_.counts.sum()
    assert np.array_equal(sp_.equal_share_throughput(), sp_._best_placement(sp_.T, sp_.single_mask) @ w)


@pytest.mark.parametrize("opts", OPTS)
def test_gavel_like_first_problem_by_class_transport(gavel: Any, opts: dict) -> None:
    """Gavel's throughputs, 512 jobs of its trace's job types: the first problem is answered by
    the class transportation LP (no kept model), exactly."""
    from policyopt.sim.traces import gavel_trace, parse_job_type

    trace = gavel_trace(gavel, 512, static=True, multi_gpu=True, seed=5)
    types = [gavel.type_index(*parse_job_type(j.job_type)) for j in trace]
    p = gavel.problem(types, Cluster.from_counts({t: 128 for t in TYPES}, gpus_per_server=4))
    pol = get_policy("max_sum_throughput", **opts)
    got = pol.solve(p)
    assert class_transport.answered(pol) == 1 and incremental.state(pol) is None
    check(got, p, opts)


@settings(max_examples=30, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(OPTS), st.lists(st.integers(1, 80), min_size=1, max_size=8), st.integers(0, 6),
       st.integers(4, 80), st.integers(0, 3))
def test_generated_first_problems_equal_cold(opts: dict, copies: list[int], unique: int, gpus: int,
                                             seed: int) -> None:
    """Generated problems of repeated kinds and a few unique jobs (scarce and ample GPUs): the
    answer equals the whole LP's, by the class route where it applies."""
    p = kinds_problem(copies, unique, gpus, seed)
    pol = get_policy("max_sum_throughput", **opts)
    got = pol.solve(p)
    n, kinds = len(p.jobs), len(copies) + unique
    if n > 128 and kinds <= n / 4:
        assert class_transport.answered(pol) == 1
    check(got, p, opts)


@pytest.mark.parametrize("opts", OPTS)
def test_the_next_problems_are_re_solved_from_the_kept_basis(opts: dict) -> None:
    """Only the first problem: the arrivals and completions after it are re-solved from its kept
    basis (``policyopt.transport_resolve``, no kept model) — each equal to a cold solve."""
    p = kinds_problem([60, 50, 40, 30], gpus=30)
    pol = get_policy("max_sum_throughput", **opts)
    check(pol.solve(p), p, opts)
    assert class_transport.answered(pol) == 1 and incremental.state(pol) is None
    jobs = list(p.jobs)
    nxt = len(jobs)
    for step in range(4):
        if step % 2:
            jobs.pop(3 * step)
        else:
            jobs.append(kind_job(nxt, step % 4))
            nxt += 1
        q = p.with_jobs(jobs)
        check(pol.solve(q), q, opts)
        assert incremental.state(pol) is None and sum(transport_resolve.answered(pol)) == step + 1
    assert class_transport.answered(pol) == 1


def test_declines_leave_the_problem_to_the_lp() -> None:
    """Too few repeats, below 128 jobs, an explicit algorithm, a ``time_limit`` or ``verbose``: not answered here
    (each answer still equal to the whole LP's)."""
    cases = [(kinds_problem([2] * 150), {}),  # 150 classes of 2 jobs: more than a quarter of the jobs
             (kinds_problem([40, 40, 40]), {}),  # 120 jobs: the small transportation route
             (kinds_problem([60, 50, 40, 30]), {"algorithm": "simplex"}),
             (kinds_problem([60, 50, 40, 30]), {"time_limit": 30.0})]
    for p, opts in cases:
        pol = get_policy("max_sum_throughput", **opts)
        check(pol.solve(p), p, {})
        assert class_transport.answered(pol) == 0
    pol = get_policy("max_sum_throughput", verbose=True)
    assert not class_transport.applies(pol, 500)


def test_a_failed_certificate_solves_the_lp(monkeypatch: pytest.MonkeyPatch) -> None:
    """A class transportation answer that does not certify is not returned: the LP is built and
    solved (its model kept), exactly."""
    calls = []

    def refuse(*a: Any) -> tuple[bool, float, float, np.ndarray]:
        calls.append(1)
        return False, 0.0, 1.0, np.zeros(0)

    monkeypatch.setattr(transport, "certify", refuse)
    p = kinds_problem([60, 50, 40, 30], gpus=30)
    pol = get_policy("max_sum_throughput")
    got = pol.solve(p)
    assert calls and class_transport.answered(pol) == 0
    assert incremental.state(pol) is not None
    monkeypatch.undo()
    check(got, p, {})
