"""``Problem.with_jobs``'s record of how a problem's jobs were made from another's
(``policyopt.problem_records.JobChanges``): the longest common prefix and suffix of the same job
objects, checked against a direct scan over generated edits; dropped where the problem's jobs are
not the ones it was made for (``dataclasses.replace``, an edit after, another problem's record, a
pickled copy)."""
from __future__ import annotations

import copy
import dataclasses
import pickle

import numpy as np
import pytest

from policyopt import Cluster, Job, Problem
from policyopt.problem import JobChanges


def _jobs(n: int, start: int = 0) -> list[Job]:
    return [Job(f"j{i}", {"v100": 1.0 + i % 5, "k80": 0.5}) for i in range(start, start + n)]


def _scan(a: list[Job], b: list[Job]) -> tuple[int, int]:
    """The longest common prefix and suffix of the same objects, one position at a time."""
    L = min(len(a), len(b))
    p = 0
    while p < L and a[p] is b[p]:
        p += 1
    q = 0
    while q < L and a[len(a) - 1 - q] is b[len(b) - 1 - q]:
        q += 1
    return p, q


PROBLEM = Problem(Cluster.from_counts({"v100": 4, "k80": 4}), _jobs(30))


@pytest.mark.parametrize("seed", range(40))
def test_the_record_holds_the_longest_common_ends(seed: int) -> None:
    """Random edits (arrivals, completions, a job replaced by an equal copy, a swap, none): the
    record's ends are the direct scan's, and every position they name holds the same object."""
    rng = np.random.default_rng(seed)
    old = list(PROBLEM.jobs)
    new = list(old)
    extra = iter(_jobs(20, start=100))
    for _ in range(int(rng.integers(0, 4))):
        kind = int(rng.integers(0, 5))
        at = int(rng.integers(0, len(new) + 1))
        if kind == 0:
            new.insert(at, next(extra))
        elif kind == 1 and at < len(new):
            new.pop(at)
        elif kind == 2 and at < len(new):
            new[at] = dataclasses.replace(new[at])  # (equal data, another object)
        elif kind == 3 and at + 1 < len(new):
            new[at], new[at + 1] = new[at + 1], new[at]
    q = PROBLEM.with_jobs(new)
    rec = q.job_changes
    assert rec is not None and rec.source is PROBLEM.jobs and rec.jobs is q.jobs
    assert (rec.prefix, rec.suffix) == _scan(old, new)
    assert all(q.jobs[i] is old[i] for i in range(rec.prefix))
    assert all(q.jobs[len(new) - 1 - i] is old[len(old) - 1 - i] for i in range(rec.suffix))


def test_edge_cases() -> None:
    jobs = list(PROBLEM.jobs)
    assert (lambda r: (r.prefix, r.suffix))(JobChanges(tuple(jobs), tuple(jobs))) == (30, 30)
    assert (lambda r: (r.prefix, r.suffix))(JobChanges(tuple(jobs), ())) == (0, 0)
    assert (lambda r: (r.prefix, r.suffix))(JobChanges(tuple(jobs), tuple(jobs[:10]))) == (10, 0)
    assert (lambda r: (r.prefix, r.suffix))(JobChanges(tuple(jobs), tuple(jobs[10:]))) == (0, 20)
    r = JobChanges(tuple(jobs), tuple(jobs))
    with pytest.raises(AttributeError, match="read-only"):
        r.prefix = 3  # type: ignore[misc]


def test_a_record_is_used_only_for_its_own_jobs() -> None:
    """``dataclasses.replace`` with other jobs drops it, an edit of ``jobs`` after makes it
    unread, another problem's record is not read, a pickled or copied problem holds none; other
    changes (the cluster) keep it, and equality ignores it."""
    jobs = list(PROBLEM.jobs)
    q = PROBLEM.with_jobs(jobs[:-1])
    assert q.job_changes is not None and q == Problem(PROBLEM.cluster, jobs[:-1])
    assert dataclasses.replace(q, jobs=tuple(jobs[:-2])).job_changes is None
    assert dataclasses.replace(q, cluster=Cluster.from_counts({"v100": 8, "k80": 4})).job_changes is q.job_changes
    edited = PROBLEM.with_jobs(jobs[:-1])
    object.__setattr__(edited, "jobs", tuple(jobs[:-2]))
    assert edited.job_changes is None
    other = Problem(PROBLEM.cluster, jobs[:-1])
    assert other.job_changes is None
    object.__setattr__(other, "_changes", q.job_changes)  # (another problem's record: other jobs tuple)
    assert other.job_changes is None
    for c in (pickle.loads(pickle.dumps(q)), copy.copy(q), copy.deepcopy(q)):
        assert c.job_changes is None and c == q
    r = pickle.loads(pickle.dumps(q.job_changes))
    assert (r.prefix, r.suffix, len(r.source), len(r.jobs)) == (29, 0, 30, 29)
