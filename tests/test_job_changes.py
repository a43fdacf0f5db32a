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


@pytest.mark.parametrize("seed", range(60))
def test_the_record_holds_common_ends_of_equal_jobs(seed: int) -> None:
    """Random edits (arrivals, completions, a job replaced by an equal copy or by another job, a
    swap, none): the record's ends hold equal jobs, are at least the runs of the same objects (a
    direct scan), and are those runs where only one block of positions changed."""
    rng = np.random.default_rng(seed)
    old = list(PROBLEM.jobs)
    new = list(old)
    extra = iter(_jobs(20, start=100))
    edits = int(rng.integers(0, 4))
    for _ in range(edits):
        kind = int(rng.integers(0, 6))
        at = int(rng.integers(0, len(new) + 1))
        if kind == 0:
            new.insert(at, next(extra))
        elif kind == 1 and at < len(new):
            new.pop(at)
        elif kind == 2 and at < len(new):
            new[at] = dataclasses.replace(new[at])  # (equal data, another object)
        elif kind == 3 and at + 1 < len(new):
            new[at], new[at + 1] = new[at + 1], new[at]
        elif kind == 4 and at < len(new):
            new[at] = next(extra)
        elif kind == 5:
            del new[at:at + 3]
    q = PROBLEM.with_jobs(new)
    rec = q.job_changes
    assert rec is not None and rec.source is PROBLEM.jobs and rec.jobs is q.jobs
    p, s = _scan(old, new)
    assert rec.prefix >= p and rec.suffix >= s
    assert rec.prefix <= min(len(old), len(new)) and rec.suffix <= min(len(old), len(new))
    assert tuple(new[:rec.prefix]) == tuple(old[:rec.prefix])
    assert tuple(new[len(new) - rec.suffix:]) == tuple(old[len(old) - rec.suffix:])
    if edits <= 1 and len(new) != len(old) or new == old:
        assert (rec.prefix, rec.suffix) == (p, s)


@pytest.mark.parametrize("n, change", [(2048, "complete"), (2048, "arrive"), (2048, "replace"), (7, "replace"),
                                       (2048, "swap"), (2048, "copies"), (1, "complete")])
def test_one_changed_block(n: int, change: str) -> None:
    """One block changed (the usual ``with_jobs`` call): the ends are exactly the runs of the same
    objects around it; jobs all copied: none (copies that are equal count as equal at the ends
    only when the identity runs reach them)."""
    old = tuple(_jobs(n))
    k = n // 3
    new = {"complete": lambda: old[:k] + old[k + 1:], "arrive": lambda: old[:k] + tuple(_jobs(2, start=n)) + old[k:],
           "replace": lambda: old[:k] + tuple(_jobs(1, start=n)) + old[k + 1:],
           "swap": lambda: old[:k] + (old[k + 1], old[k]) + old[k + 2:],
           "copies": lambda: tuple(dataclasses.replace(j) for j in old)}[change]()
    rec = JobChanges(old, new)
    assert (rec.prefix, rec.suffix) == _scan(list(old), list(new))


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
