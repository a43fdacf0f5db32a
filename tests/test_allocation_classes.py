"""``AllocationSpace.declare_classes``: a space told each job's class gathers its single-job mask and
equal shares from the classes' rows; a space restricted to some of its jobs answers for those jobs."""
from __future__ import annotations

import numpy as np

from policyopt import Cluster, Job, Problem
from policyopt.allocation import AllocationSpace

KINDS = ({"v100": 3.0, "k80": 1.0}, {"v100": 2.0, "k80": 1.5}, {"v100": 1.0, "k80": 0.8})


def _problem(n: int) -> Problem:
    jobs = tuple(Job(f"j{i}", KINDS[i % 3], steps_remaining=100.0) for i in range(n))
    return Problem(Cluster.from_counts({"v100": 4, "k80": 6}), jobs)


def _declared(n: int) -> AllocationSpace:
    space = AllocationSpace(_problem(n))
    group = np.arange(n) % 3
    rep = np.arange(3)
    space.declare_classes(group, *space.class_rows(space.T[rep], space.scale[rep]))
    return space


def test_declared_classes_give_every_jobs_rows() -> None:
    space, plain = _declared(10), AllocationSpace(_problem(10))
    assert np.array_equal(space.single_mask, plain.single_mask)
    assert np.array_equal(space.equal_share_throughput(), plain.equal_share_throughput())


def test_a_restricted_space_answers_for_its_own_jobs() -> None:
    """``restrict`` keeps a subset of the jobs: its equal shares are those jobs' (not the declared
    classes' gathered over the whole space's jobs)."""
    keep = np.array([1, 4, 5, 9])
    sub = _declared(10).restrict(keep)
    want = AllocationSpace(_problem(10)).restrict(keep)
    assert np.array_equal(sub.single_mask, want.single_mask)
    got = sub.equal_share_throughput()
    assert got.shape == (keep.size,)
    assert np.array_equal(got, want.equal_share_throughput())
