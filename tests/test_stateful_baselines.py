"""AlloX and Gandiva across calls, with Gavel's semantics: AlloX never preempts a job that ran at
the previous call; Gandiva keeps each job's combination while both jobs remain. The expected
allocations are derived by hand from those rules, not from the policies' output."""
from __future__ import annotations

import itertools

import pytest

import policyopt
from policyopt import Problem, get_policy


def two_types(jobs: list[dict]) -> Problem:
    return Problem.from_dict({"cluster": {"worker_types": {"v100": {"count": 1}, "k80": {"count": 1}}},
                              "jobs": jobs})


def job(i: str, v: float, k: float, steps: float, age: float) -> dict:
    return {"id": i, "throughputs": {"v100": v, "k80": k}, "steps_remaining": steps, "time_since_start": age}


def running(r: policyopt.PolicyResult) -> dict[str, str]:
    return {j: c for j, a in r.allocation.items() for c, f in a.items() if f > 0.5}


def test_allox_keeps_running_jobs_on_their_workers() -> None:
    """Call 1: A (p = 1 s on V100, 2 s on K80) and B (4 s, 4 s): the matching puts A on the V100 and
    B on the K80 (cost 1 + 4 = 5 against 2 + 4 = 6). Call 2: a short job C (p = 0.1 s on the V100)
    arrives; Gavel's AlloX keeps A and B where they run (non-preemptive), so C waits with nothing.
    A fresh policy object (no memory) matches all three jobs and, C being by far the shortest job on
    the V100, puts C at the head of the V100's queue."""
    pol = get_policy("allox")
    r1 = pol.solve(two_types([job("A", 10, 5, 10, 5.0), job("B", 10, 10, 40, 4.0)]))
    assert running(r1) == {"A": "v100", "B": "k80"}
    p2 = two_types([job("A", 10, 5, 9, 6.0), job("B", 10, 10, 39, 5.0), job("C", 100, 1, 10, 0.0)])
    r2 = pol.solve(p2)
    assert running(r2) == {"A": "v100", "B": "k80"}
    assert sum(r2.allocation["C"].values()) == 0.0 and r2.extra["jobs_kept"] == 2
    fresh = policyopt.solve(p2, "allox")
    assert running(fresh).get("C") == "v100"
    # a finished job frees its worker: the waiting job takes it at the next call
    r3 = pol.solve(two_types([job("B", 10, 10, 38, 6.0), job("C", 100, 1, 10, 1.0)]))
    assert running(r3) == {"B": "k80", "C": "v100"}


def four_jobs(ids: list[str]) -> Problem:
    jobs = [{"id": i, "throughputs": {"v100": 10.0}} for i in ids]
    coloc = [{"jobs": [a, b], "worker_type": "v100", "throughputs": [6.0, 6.0]}
             for a, b in itertools.combinations(ids, 2)]
    return Problem.from_dict({"cluster": {"worker_types": {"v100": {"count": 1}}}, "jobs": jobs, "colocated": coloc})


def pairs_of(r: policyopt.PolicyResult) -> set[frozenset[str]]:
    return {frozenset(c["jobs"]) for c in r.colocated_allocation}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_gandiva_keeps_pairs_while_both_jobs_remain(seed: int) -> None:
    """Four jobs on one V100 (oversubscribed), every pair packs at normalized 1.2. Call 2 with the
    same jobs: the same two pairs (Gavel keeps combinations). Call 3 after job `a`'s partner left
    and a new job `e` arrived: the untouched pair stays; `a` and `e` are the only jobs without a
    combination, so they pair with each other."""
    pol = get_policy("gandiva", space_sharing=True, seed=seed)
    first = pairs_of(pol.solve(four_jobs(["a", "b", "c", "d"])))
    assert len(first) == 2
    assert pairs_of(pol.solve(four_jobs(["a", "b", "c", "d"]))) == first
    gone = next(iter(next(p for p in first if "a" in p) - {"a"}))
    rest = [j for j in "abcd" if j != gone] + ["e"]
    third = pairs_of(pol.solve(four_jobs(rest)))
    untouched = next(p for p in first if "a" not in p)
    assert third == {untouched, frozenset({"a", "e"})}


# ------------------------------------------------------------------ Gavel's own test inputs
GAVEL_CLUSTER = {"v100": 2, "p100": 1, "k80": 3}
GAVEL_TYPES = ("v100", "p100", "k80")


def gavel_allox_problem(thr: dict[int, tuple[float, ...]], age: dict[int, float], steps: dict[int, float]) -> Problem:
    return Problem.from_dict({
        "cluster": {"worker_types": {t: {"count": c} for t, c in GAVEL_CLUSTER.items()}},
        "jobs": [{"id": str(j), "throughputs": dict(zip(GAVEL_TYPES, map(float, thr[j]))),
                  "steps_remaining": float(steps[j]), "time_since_start": float(age[j])} for j in thr]})


def min_total_processing_time(thr: dict[int, tuple[float, ...]], steps: dict[int, float],
                              free: dict[str, int]) -> float:
    """Brute force over every one-job-per-worker assignment of all jobs to the free workers (each
    job at the head of its worker's queue): the least ``Σ s_m/T[m, type]`` — Gavel's AlloX cost
    when there are at least as many free workers as jobs."""
    workers = [t for t, c in free.items() for _ in range(c)]
    jobs = list(thr)
    return min(sum(steps[j] / thr[j][GAVEL_TYPES.index(w)] for j, w in zip(jobs, pick))
               for pick in itertools.permutations(workers, len(jobs)))


def test_gavel_allox_inputs_running_jobs_keep_their_workers() -> None:
    """Gavel's ``test_allox`` (scheduler/tests/policies_tests.py): four jobs on 2 V100s, 1 P100 and
    3 K80s, then job 0 leaves and job 4 arrives. Gavel's assertions — jobs still running keep
    their allocation; no type is over-used — plus, derived independently: call 1 is a min-cost
    matching (its cost equals the brute-force least total processing time, 1150 s: 1 and 2 tie
    for the second V100), and at call 2 job 4 takes the best free worker (the V100 job 0 left:
    100/4 = 25 s against 100 s on a K80). Before AlloX kept running jobs, call 2 moved jobs 1 and 2."""
    thr1 = {0: (2.0, 1.0, 0.5), 1: (3.0, 2.0, 1.0), 2: (4.0, 3.0, 2.0), 3: (1.0, 1.0, 1.0)}
    steps1 = {0: 300.0, 1: 500.0, 2: 1000.0, 3: 500.0}
    thr2 = {1: (3.0, 2.0, 1.0), 2: (4.0, 3.0, 2.0), 3: (1.0, 1.0, 1.0), 4: (4.0, 2.0, 1.0)}
    steps2 = {1: 100.0, 2: 800.0, 3: 400.0, 4: 100.0}
    pol = get_policy("allox")
    r1 = pol.solve(gavel_allox_problem(thr1, dict.fromkeys(thr1, 0.0), steps1))
    r2 = pol.solve(gavel_allox_problem(thr2, {1: 200.0, 2: 200.0, 3: 200.0, 4: 0.0}, steps2))
    for r in (r1, r2):
        for t, c in GAVEL_CLUSTER.items():
            assert sum(a.get(t, 0.0) for a in r.allocation.values()) <= c + 1e-9
    for j in ("1", "2", "3"):
        assert r2.allocation[j] == r1.allocation[j]
    run1 = running(r1)
    assert len(run1) == 4
    assert r1.objective == pytest.approx(min_total_processing_time(thr1, steps1, GAVEL_CLUSTER)) == 1150.0
    assert sum(steps1[int(j)] / thr1[int(j)][GAVEL_TYPES.index(t)] for j, t in run1.items()) == pytest.approx(1150.0)
    free = dict(GAVEL_CLUSTER)
    for j in ("1", "2", "3"):
        free[run1[j]] -= 1
    assert running(r2)["4"] == "v100" and free["v100"] == 1
    assert min_total_processing_time({4: thr2[4]}, steps2, free) == 25.0


def gavel_gandiva_problem(types: tuple[str, ...], alone: dict[int, tuple[float, ...]],
                          pair: tuple[tuple[float, float], ...]) -> Problem:
    return Problem.from_dict({
        "cluster": {"worker_types": {t: {"count": 1} for t in types}},
        "jobs": [{"id": str(j), "throughputs": dict(zip(types, v))} for j, v in alone.items()],
        "colocated": [{"jobs": ["0", "1"], "worker_type": t, "throughputs": list(p)} for t, p in zip(types, pair)]})


def test_gavel_gandiva_inputs() -> None:
    """Gavel's ``test_gandiva``, three calls of one policy object. Call 1 (one GPU each of three
    types, two jobs: demand fits) — no packing, Gavel's equal split: ``count_t/m`` = 1/2 of every
    type, rows scaled to sum to 1, so 1/3 each. Call 2 (one V100): oversubscribed, the pair's
    normalized throughput 2/2 + 3/3 = 2 ≥ 1, so the pair runs the V100 all the time. Call 3: the
    pair now runs at (1, 1), normalized 1/2 + 1/3 < 1 — Gavel drops it and, with only these two
    jobs to pair, pairs them again at random; we never run a pair that loses throughput (the
    documented difference), so each job runs alone half the time (1 and 1.5 steps/s instead of 1
    and 1)."""
    pol = get_policy("gandiva", space_sharing=True)
    three = ("v100", "p100", "k80")
    r1 = pol.solve(gavel_gandiva_problem(three, {0: (2.0, 1.0, 0.5), 1: (3.0, 2.0, 1.0)},
                                         ((2.0, 3.0), (1.0, 2.0), (0.5, 1.0))))
    assert r1.colocated_allocation == []
    for j in ("0", "1"):
        assert r1.allocation[j] == pytest.approx(dict.fromkeys(three, 1 / 3))
    r2 = pol.solve(gavel_gandiva_problem(("v100",), {0: (2.0,), 1: (3.0,)}, ((2.0, 3.0),)))
    assert [(sorted(c["jobs"]), c["worker_type"], c["fraction"]) for c in r2.colocated_allocation] == \
        [(["0", "1"], "v100", pytest.approx(1.0))]
    r3 = pol.solve(gavel_gandiva_problem(("v100",), {0: (2.0,), 1: (3.0,)}, ((1.0, 1.0),)))
    assert r3.colocated_allocation == [] and r3.extra["pairs_used"] == 0
    assert [r3.allocation[j] for j in ("0", "1")] == [pytest.approx({"v100": 0.5})] * 2
