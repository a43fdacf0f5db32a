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
