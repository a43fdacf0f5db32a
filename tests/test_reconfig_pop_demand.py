"""POP over reconfigurable problems: nodes follow each group's demand, so max-min fairness keeps the
unpartitioned optimum (the even split left the most crowded group, which sets the merged minimum,
at 0.84 of it on this trace)."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt import get_policy
from policyopt.pop import pop, pop_adapter
from policyopt.reconfig.trace import trace_problem, transformers_trace


@pytest.fixture(scope="module")
def big():
    return trace_problem(transformers_trace(1024, static=True, seed=22), nodes=128)


def test_max_min_under_pop_keeps_the_unpartitioned_optimum(big) -> None:
    policy = get_policy("max_min_fairness")
    full = policy.solve(big).objective
    res = pop(policy, 4, 0, parallel=False).solve(big)
    assert res.extra["pop"]["k"] == 4
    assert res.objective / full >= 0.97
    counts = np.array(res.extra["pop"]["group_counts"]["a100"])
    assert counts.sum() == 1024 and (counts % 8 == 0).all() and len(set(counts.tolist())) > 1


def test_split_capacity_equalizes_the_groups_levels(big) -> None:
    """Each group's level ``(C_g − A_g)/W_g`` after the split: within one node of the best split,
    i.e. no group could take a node from another without falling below it."""
    ad = pop_adapter(big)
    a, w = ad._demand()
    assert (a[~ad.admitted] == 0).all() and (w[ad.admitted] == 0).all() and (w[~ad.admitted] > 0).all()
    k = 4
    rng = np.random.default_rng(0)
    group = rng.integers(0, k, len(big.jobs))
    group[np.flatnonzero(~ad.admitted)[:150]] = 0  # group 0 gets extra demand
    even = np.full((k, 1), 256, np.int64)
    out = ad.split_capacity(group, even)
    assert out.sum() == 1024 and (out % 8 == 0).all()
    A, W = np.bincount(group, a, k), np.bincount(group, w, k)
    level = (out[:, 0] - A) / W
    assert out[0, 0] > 256 and level.min() > ((even[:, 0] - A) / W).min()
    for g in range(k):  # moving one node away from any group drops it below today's minimum
        assert (out[g, 0] - 8 - A[g]) / W[g] <= level.min() + 1e-12
