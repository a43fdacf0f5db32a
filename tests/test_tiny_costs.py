"""An LP whose costs are all tiny (throughputs near the inputs' lower limit, 1e-9) is solved to its
optimum on the whole-LP path: the LP is invariant under scaling every throughput by ``2**-e`` (the
allocation stays optimal, the objective scales exactly), so the optimum of the scaled problem must be
the scaled optimum. HiGHS's dual feasibility tolerance is absolute (1e-7): with costs of 1e-8 it
took the zero allocation for optimal (max-sum throughput scheduled nothing) and with costs of 1e-5
stopped at a vertex 1e-5 below the optimum."""
from __future__ import annotations

import dataclasses

import pytest
from fast_route_checks import make_problem

from policyopt import Problem, get_policy

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
