"""An LP whose costs are all tiny (throughputs near the inputs' lower limit, 1e-9) is solved to its
optimum on the whole-LP path: the LP is invariant under scaling every throughput by ``2**-e`` (the
allocation stays optimal, the objective scales exactly), so the optimum of the scaled problem must be
the scaled optimum. HiGHS's dual feasibility tolerance is absolute (1e-7): with costs of 1e-8 it
took the zero allocation for optimal (max-sum throughput scheduled nothing) and with costs of 1e-5
stopped at a vertex 1e-5 below the optimum."""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from fast_route_checks import make_problem

from policyopt import Cluster, Job, Problem, get_policy

SCALE = 2.0 ** -27  # (exact: a power of two; base throughputs 0.5–10 become 3.7e-9–7.5e-8)


def scaled(p: Problem, f: float) -> Problem:
    return p.with_jobs([dataclasses.replace(j, throughputs={c: v * f for c, v in j.throughputs.items()})
                        for j in p.jobs])


@pytest.mark.parametrize("algorithm", ["auto", "simplex", "ipm"])
@pytest.mark.parametrize("f", [SCALE, 2.0 ** -17])
def test_max_sum_with_tiny_throughputs_on_the_whole_lp(algorithm: str, f: float) -> None:
    """300 distinct jobs (no route answers them: the whole LP goes to HiGHS)."""
    p = make_problem(5, 300, 4, 300, scarce=True)
    base = get_policy("max_sum_throughput", algorithm=algorithm).solve(p)
    tiny = get_policy("max_sum_throughput", algorithm=algorithm).solve(scaled(p, f))
    assert base.status.value == tiny.status.value == "optimal"
    assert base.objective is not None
    assert tiny.objective == pytest.approx(base.objective * f, rel=1e-9)
    assert not tiny.space.check(tiny.X, tol=1e-9)


def test_max_min_fairness_with_tiny_throughputs() -> None:
    """Max-min fairness is normalized (its costs do not shrink): the same answer at any scale."""
    p = make_problem(6, 200, 3, 200)
    base = get_policy("max_min_fairness").solve(p)
    tiny = get_policy("max_min_fairness").solve(scaled(p, SCALE))
    assert tiny.objective == pytest.approx(base.objective, rel=1e-9)


def near_ties(seed: int, n: int, K: int, f: float) -> Problem:
    """``n`` jobs whose throughputs on ``K`` types are ``f`` times 1, 1.001 or 1.002 (near ties)."""
    rng = np.random.default_rng(seed)
    names = [f"w{k}" for k in range(K)]
    jobs = [Job(f"j{i}", {w: float(rng.choice([1.0, 1.001, 1.002])) * f for w in names},
                scale_factor=int(rng.choice([1, 2, 4]))) for i in range(n)]
    return Problem(Cluster.from_counts({w: int(rng.integers(4, 10)) for w in names}), tuple(jobs))


@pytest.mark.parametrize("seed", range(4))
def test_max_sum_routes_with_tiny_near_ties(seed: int) -> None:
    """25 jobs (the transportation LP from the space's arrays) of throughputs ~1.9e-9 that differ by
    1e-3 relative: the routes' tolerances were absolute (prices admissible within 1e-12, HiGHS's
    reduced costs within 1e-10, the certificate's gap within 1e-9 for objectives below 1), so they
    certified a point up to 2.6e-4 below the optimum."""
    f = 2.0 ** -29
    base = get_policy("max_sum_throughput").solve(near_ties(seed, 25, 3, 1.0))
    tiny = get_policy("max_sum_throughput").solve(near_ties(seed, 25, 3, f))
    assert base.objective is not None and tiny.objective is not None
    assert tiny.objective == pytest.approx(base.objective * f, rel=1e-9)
    assert not tiny.space.check(tiny.X, tol=1e-9)


@pytest.mark.parametrize("exact", [True, False])
def test_transportation_lp_with_tiny_near_ties(exact: bool) -> None:
    """The transportation LP alone (the exact method, or HiGHS's simplex): the optimum of ``V·2**-30``
    is ``2**-30`` times the optimum of ``V``, or no answer."""
    from policyopt.solvers import transport

    f = 2.0 ** -30
    for seed in range(40):
        rng = np.random.default_rng(seed)
        n, K = int(rng.integers(2, 30)), int(rng.integers(1, 5))
        V = rng.choice([1.0, 1.001, 1.002], (n, K))
        s = rng.choice([1.0, 2.0, 4.0], n)
        C = rng.integers(1, max(2, n // K), K).astype(float)
        a, b = transport.solve(V, s, C, exact=exact), transport.solve(V * f, s, C, exact=exact)
        assert a is not None
        if b is not None:
            assert b.objective == pytest.approx(a.objective * f, rel=1e-9), seed
