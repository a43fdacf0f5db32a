"""The water-filling engine with every speed-up on (speculative fifo chains over all groups,
symmetry aggregation, compaction, zero tests) against the level-by-level method (one level LP per
bottleneck: no speculation, no aggregation, no compaction) on random hierarchical instances: the
final levels agree to 1e-7 relative (1e-8 absolute for levels at 0, which carry the LP's 1e-9
feasibility tolerance) and both allocations are feasible to 1e-9."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt import Cluster, Entity, Job, Problem, get_policy
from policyopt.formulations.hierarchical import entity_groups
from policyopt.formulations.water_filling import WaterFillingEngine, normalized_throughput

TYPES = ("v100", "p100", "k80")


def random_problem(seed: int, n: int, policies: tuple[str, ...], gpus: int) -> Problem:
    """``n`` jobs with random throughputs (each type 0.5–10 steps/s, a type missing w.p. 0.15),
    scale factors 1/2/4, weights 1–2, random arrival order; entities with the given policies and
    weights 1–3; ``gpus`` GPUs of each type (few enough that later jobs meet contention)."""
    rng = np.random.default_rng(seed)
    ents = {f"e{i}": Entity(f"e{i}", float(rng.integers(1, 4)), p) for i, p in enumerate(policies)}
    jobs = []
    for i in range(n):
        thr = {t: float(np.round(rng.uniform(0.5, 10.0), 3)) for t in TYPES if rng.random() > 0.15}
        thr = thr or {"k80": 1.0}
        jobs.append(Job(f"j{i}", thr, scale_factor=int(rng.choice([1, 1, 1, 2, 4])),
                        weight=float(rng.choice([1.0, 2.0])), arrival=float(rng.permutation(n)[i]),
                        entity=f"e{int(rng.integers(0, len(policies)))}"))
    return Problem(Cluster.from_counts({t: gpus for t in TYPES}, gpus_per_server=4), tuple(jobs), entities=ents)


def run(problem: Problem, **options: object) -> tuple[np.ndarray, np.ndarray, object, dict]:
    pol = get_policy("hierarchical")
    space = pol.make_space(problem)
    groups, omega = entity_groups(problem, space)
    eng = WaterFillingEngine(space, normalized_throughput(space), groups, omega, pol.get_solver(),
                             pol.solver_options(), **options)  # type: ignore[arg-type]
    out = eng.run()
    assert out.status.value == "optimal", out.message
    return out.levels, out.X, space, out.summary()


CASES = [(seed, n, pols, gpus)
         for seed, (n, pols, gpus) in enumerate([
             (60, ("fifo", "fifo", "fifo"), 6),
             (90, ("fifo", "fifo", "fifo"), 10),
             (80, ("fifo", "fifo", "fairness"), 8),
             (70, ("fifo", "fairness", "fifo", "fifo"), 6),
             (120, ("fifo", "fifo", "fifo"), 16),
             (50, ("fifo", "fifo"), 4),
         ])]


@pytest.mark.parametrize("seed, n, policies, gpus", CASES)
def test_levels_equal_the_level_by_level_method(seed: int, n: int, policies: tuple[str, ...], gpus: int) -> None:
    prob = random_problem(seed, n, policies, gpus)
    fast, X_fast, space, s_fast = run(prob)
    slow, X_slow, _, s_slow = run(prob, max_lookahead=1, aggregate=False, compact=False)
    assert s_slow["speculated"] == 0
    assert fast == pytest.approx(slow, rel=1e-7, abs=1e-8)
    assert space.check(X_fast, tol=1e-9) == []
    assert space.check(X_slow, tol=1e-9) == []
    # the allocation delivers every level (to the LP tolerance)
    u = space.throughput_values(X_fast) * normalized_throughput(space)
    assert np.all(u >= fast - 1e-7 * np.maximum(1.0, fast))


def test_chains_of_several_groups_land_in_one_lp() -> None:
    """Three fifo entities with room for every job at its cap: the cap events of all three are
    speculated together in one LP, so it takes less than half the level LPs of the one-by-one method."""
    prob = random_problem(11, 90, ("fifo", "fifo", "fifo"), 40)
    fast, _, _, s_fast = run(prob)
    slow, _, _, s_slow = run(prob, max_lookahead=1, aggregate=False, compact=False)
    assert fast == pytest.approx(slow, rel=1e-7, abs=1e-8)
    assert s_fast["speculated"] >= 40
    # one group's chain at a time (each cut short by the other groups' earlier cap events) took 58
    # level LPs here, against 71 one by one
    assert s_fast["iterations"] * 2 < s_slow["iterations"]


def test_zero_test_prices_settle_jobs_outside_the_model() -> None:
    """Fifo order a0, a1, ..., a99 (GPU type A only), then c (type B only); one GPU of each type and
    a window of 8 waiting jobs (the other waiting jobs are outside the model). a0 fills A; a1 is
    stuck at 0, so the zero test runs on the window (all stuck); its prices settle the a's outside
    the model at 0 without bringing them in, and stop at c, which B's zero price shows may gain: c
    enters the model and gets B."""
    jobs = [Job(f"a{i}", {"A": 1.0}, arrival=float(i), entity="e") for i in range(100)]
    jobs.append(Job("c", {"B": 1.0}, arrival=100.0, entity="e"))
    prob = Problem(Cluster.from_counts({"A": 1, "B": 1}), tuple(jobs), entities={"e": Entity("e", 1.0, "fifo")})
    res = get_policy("hierarchical", fifo_window=8).solve(prob)
    assert res.ok
    wf = res.extra["water_filling"]
    assert wf["certified_by_prices"] >= 80 and wf["compactions"] <= 2
    assert res.allocation["a0"]["A"] == pytest.approx(1.0)
    assert all(res.allocation[f"a{i}"].get("A", 0.0) == pytest.approx(0.0, abs=1e-9) for i in range(1, 100))
    assert res.allocation["c"]["B"] == pytest.approx(1.0)


@pytest.mark.parametrize("seed", [0, 1])
def test_price_settlement_on_a_saturated_cluster(seed: int) -> None:
    """Three fifo entities, 150 jobs on 3 GPUs per type and a window of 8: most jobs end at 0, most
    of them settled by the zero tests' prices; levels as one level LP per bottleneck."""
    prob = random_problem(100 + seed, 150, ("fifo", "fifo", "fifo"), 4)
    fast, X_fast, space, s_fast = run(prob, window=8)
    slow, _, _, _ = run(prob, max_lookahead=1, aggregate=False, compact=False)
    assert s_fast["certified_by_prices"] >= 30
    assert fast == pytest.approx(slow, rel=1e-7, abs=1e-8)
    assert space.check(X_fast, tol=1e-9) == []
