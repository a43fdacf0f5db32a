"""Hierarchical water-filling: entity shares follow weights, FIFO inside an entity, agreement with
the published MILP method, and the speed-ups (speculative FIFO chains, twin certificates) never
changing the answer."""
from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from policyopt import Cluster, Entity, Job, Problem, get_policy, solve
from policyopt.errors import InputError
from policyopt.result import Status
from policyopt.formulations.hierarchical import entity_totals
from policyopt.formulations.water_filling import normalized_throughput

GAVEL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def u_of(res) -> np.ndarray:
    return res.space.throughput_values(res.X) * normalized_throughput(res.space)


def homogeneous(entities: dict[str, tuple[float, str, int]], gpus: int = 8) -> Problem:
    """``entities``: name → (weight, policy, number of jobs); every job 1 GPU, 10 steps/s."""
    jobs, ents = [], {}
    for name, (w, pol, k) in entities.items():
        ents[name] = Entity(name, w, pol)
        jobs += [Job(f"{name}-{i}", {"gpu": 10.0}, entity=name) for i in range(k)]
    return Problem(Cluster.from_counts({"gpu": gpus}), tuple(jobs), entities=ents)


def test_entity_shares_follow_weights() -> None:
    """3 entities with weights 1, 2, 3 and plenty of jobs on 12 GPUs: 2, 4 and 6 GPUs."""
    prob = homogeneous({"a": (1.0, "fairness", 10), "b": (2.0, "fairness", 10), "c": (3.0, "fairness", 10)}, 12)
    res = solve(prob, "hierarchical")
    assert res.ok
    tot = entity_totals(prob, u_of(res))
    assert [tot["a"], tot["b"], tot["c"]] == pytest.approx([2.0, 4.0, 6.0], rel=1e-7)
    # inside each entity, fairness: equal shares
    for e, share in (("a", 0.2), ("b", 0.4), ("c", 0.6)):
        assert [res.allocation[f"{e}-{i}"]["gpu"] for i in range(10)] == pytest.approx([share] * 10, rel=1e-7)
    assert res.objective == pytest.approx(2.0, rel=1e-7)  # min_s total_s / W_s


def test_small_entity_saturates_and_rest_is_redistributed() -> None:
    """Entity a (weight 3) has one 1-GPU job: it saturates at 1 GPU; b and c split the rest 1:1."""
    prob = homogeneous({"a": (3.0, "fairness", 1), "b": (1.0, "fairness", 6), "c": (1.0, "fairness", 6)}, 9)
    tot = entity_totals(prob, u_of(solve(prob, "hierarchical")))
    assert [tot["a"], tot["b"], tot["c"]] == pytest.approx([1.0, 4.0, 4.0], rel=1e-7)


def test_fifo_gives_later_jobs_nothing_until_earlier_are_bottlenecked() -> None:
    """Entity f (fifo, 3 jobs) and entity g (fairness, 4 jobs), equal weights, 4 GPUs. Level 1:
    f's first job rises to a full GPU (its own bottleneck) while g's jobs reach 1/4 each; only then
    does f's second job start, and so on."""
    prob = homogeneous({"f": (1.0, "fifo", 3), "g": (1.0, "fairness", 4)}, 4)
    res = get_policy("hierarchical", record_trace=True, fifo_lookahead=1).solve(prob)
    assert res.ok
    trace = res.extra["water_filling"]["trace"]
    for step in trace:
        for k in (1, 2):  # a later fifo job has a guaranteed level only once the earlier one froze at its cap
            if step[f"f-{k}"] > 1e-9:
                assert step[f"f-{k - 1}"] == pytest.approx(1.0, rel=1e-7)
    assert trace[0]["f-0"] == pytest.approx(1.0) and trace[0]["f-1"] == 0.0 and trace[0]["f-2"] == 0.0
    alloc = {j: res.allocation[j]["gpu"] for j in res.allocation}
    # f: 1 + 1 GPUs to its first two jobs, nothing left for the third; g: 2 GPUs, ½ each
    assert [alloc["f-0"], alloc["f-1"], alloc["f-2"]] == pytest.approx([1.0, 1.0, 0.0], abs=1e-7)
    assert [alloc[f"g-{i}"] for i in range(4)] == pytest.approx([0.5] * 4, abs=1e-7)


def test_fifo_order_follows_arrival() -> None:
    ents = {"f": Entity("f", 1.0, "fifo")}
    jobs = (Job("late", {"gpu": 1.0}, entity="f", arrival=5.0), Job("early", {"gpu": 1.0}, entity="f", arrival=1.0))
    res = solve(Problem(Cluster.from_counts({"gpu": 1}), jobs, entities=ents), "hierarchical")
    assert res.allocation["early"]["gpu"] == pytest.approx(1.0)
    assert res.allocation["late"]["gpu"] == pytest.approx(0.0, abs=1e-9)


def random_entity_problem(seed: int, n: int) -> Problem:
    rng = np.random.default_rng(seed)
    names = ["v100", "p100", "k80"][: 2 + seed % 2]
    counts = {t: int(rng.integers(1, 4)) for t in names}
    ents = {"e0": Entity("e0", 1.0, "fairness"), "e1": Entity("e1", float(rng.integers(1, 4)), "fifo"),
            "e2": Entity("e2", float(rng.integers(1, 4)), "fairness")}
    jobs = []
    for i in range(n):
        thr = {t: float(np.round(rng.uniform(0.5, 10.0), 3)) for t in names}
        jobs.append(Job(str(i), thr, scale_factor=int(rng.choice([1, 1, 2])), weight=float(rng.choice([1.0, 2.0])),
                        entity=f"e{int(rng.integers(0, 3))}"))
    return Problem(Cluster.from_counts(counts), tuple(jobs), entities=ents)


@pytest.mark.parametrize("seed", range(10))
def test_agrees_with_published_milp(seed: int) -> None:
    prob = random_entity_problem(seed, 4 + seed % 4)
    fast = solve(prob, "hierarchical")
    ref = solve(prob, "water_filling_milp", hierarchical=True)
    # Gavel's stopping rule may end the reference with jobs never settled: `stopped`, not a proof
    assert fast.ok and ref.status in (Status.OPTIMAL, Status.STOPPED)
    assert fast.space.check(fast.X, tol=1e-7) == []
    assert u_of(fast) == pytest.approx(u_of(ref), rel=2e-3, abs=5e-5)


@pytest.mark.skipif(not GAVEL.exists(), reason=f"Gavel throughputs missing: expected {GAVEL}")
@pytest.mark.parametrize("seed", [0, 1])
def test_speedups_do_not_change_the_answer(seed: int) -> None:
    """Speculative fifo chains and twin/cap certificates vs one fifo job per level LP and the slack
    certificate after every level, on a Gavel-like problem with 160 jobs in 4 entities."""
    from policyopt.data.gavel import load_gavel

    data = load_gavel()
    rng = np.random.default_rng(seed)
    n = 160
    types = rng.integers(0, len(data.job_types), n)
    cl = Cluster.from_counts({"v100": 40, "p100": 40, "k80": 40}, gpus_per_server=4)
    base = data.problem(types, cl)
    ents = {f"e{i}": Entity(f"e{i}", w, p) for i, (w, p) in
            enumerate([(1.0, "fairness"), (2.0, "fairness"), (3.0, "fifo"), (1.0, "fifo")])}
    owner = rng.integers(0, 4, n)
    jobs = tuple(Job(j.id, j.throughputs, j.scale_factor, entity=f"e{o}") for j, o in zip(base.jobs, owner))
    prob = Problem(cl, jobs, entities=ents)
    fast = get_policy("hierarchical").solve(prob)
    slow = get_policy("hierarchical", fifo_lookahead=1, certify="duals+slack").solve(prob)
    assert fast.ok and slow.ok
    assert fast.extra["water_filling"]["speculated"] > 0
    assert u_of(fast) == pytest.approx(u_of(slow), rel=1e-6, abs=1e-7)


def test_needs_entities() -> None:
    prob = Problem(Cluster.from_counts({"gpu": 1}), (Job("a", {"gpu": 1.0}),))
    with pytest.raises(InputError, match="entities"):
        solve(prob, "hierarchical")
    ents = {"x": Entity("x")}
    prob2 = Problem(Cluster.from_counts({"gpu": 1}), (Job("a", {"gpu": 1.0}, entity="x"), Job("b", {"gpu": 1.0})),
                    entities=ents)
    with pytest.raises(InputError, match=r"jobs\[b\]\.entity"):
        solve(prob2, "hierarchical")


@pytest.mark.skipif(not GAVEL.exists(), reason=f"Gavel throughputs missing: expected {GAVEL}")
def test_pair_column_generation_is_exact() -> None:
    """Pair columns priced in by reduced cost (each job's 2 best pairs to start) give the same levels
    as the LP over every pair column, with space sharing, a fifo entity and two fairness entities."""
    from policyopt.data.gavel import load_gavel

    data = load_gavel()
    rng = np.random.default_rng(3)
    n = 40
    types = rng.integers(0, len(data.job_types), n)
    cl = Cluster.from_counts({"v100": 8, "p100": 8, "k80": 8}, gpus_per_server=4)
    base = data.problem(types, cl, colocated="types")
    ents = {"e0": Entity("e0", 1.0, "fairness"), "e1": Entity("e1", 2.0, "fifo"), "e2": Entity("e2", 3.0, "fairness")}
    owner = rng.integers(0, 3, n)
    prob = base.with_jobs([replace(j, entity=f"e{o}") for j, o in zip(base.jobs, owner)])
    prob = Problem(prob.cluster, prob.jobs, prob.colocated, ents, prob.colocated_types)
    full = get_policy("hierarchical", space_sharing=True, pair_columns="all").solve(prob)
    priced = get_policy("hierarchical", space_sharing=True, pair_columns="price").solve(prob)
    assert full.ok and priced.ok
    wf = priced.extra["water_filling"]
    assert wf["pair_columns_priced"] > 0  # some columns did enter on their reduced cost
    assert priced.space.check(priced.X, tol=1e-7) == []
    assert u_of(priced) == pytest.approx(u_of(full), rel=1e-6, abs=1e-7)
    assert priced.colocated_allocation


def test_fifo_job_after_one_stuck_at_zero_still_runs() -> None:
    """Hand-solved: fifo order a, b, c; a and b run only on the single A GPU, c only on the single B
    GPU. a fills A (its cap); b can get nothing (A is a's) and freezes at 0; c must still get B —
    the zero test may freeze c only if c could not get anything either."""
    jobs = (Job("a", {"A": 1.0}, arrival=0.0, entity="e"), Job("b", {"A": 1.0}, arrival=1.0, entity="e"),
            Job("c", {"B": 1.0}, arrival=2.0, entity="e"))
    prob = Problem(Cluster.from_counts({"A": 1, "B": 1}), jobs, entities={"e": Entity("e", 1.0, "fifo")})
    for opts in ({}, {"compact": False}, {"fifo_lookahead": 1}):
        res = get_policy("hierarchical", **opts).solve(prob)
        assert res.ok
        assert res.allocation["a"]["A"] == pytest.approx(1.0)
        assert res.allocation["b"].get("A", 0.0) == pytest.approx(0.0, abs=1e-9)
        assert res.allocation["c"]["B"] == pytest.approx(1.0)


@pytest.mark.skipif(not GAVEL.exists(), reason=f"Gavel throughputs missing: expected {GAVEL}")
def test_compaction_is_exact() -> None:
    """Rebuilding the level LP without settled jobs and with a small window of waiting fifo jobs (8,
    so windows run out and refill many times) gives the same levels as one model over every job."""
    from policyopt.data.gavel import load_gavel

    data = load_gavel()
    rng = np.random.default_rng(5)
    n = 240
    types = rng.integers(0, len(data.job_types), n)
    cl = Cluster.from_counts({"v100": 30, "p100": 30, "k80": 30}, gpus_per_server=4)
    base = data.problem(types, cl)
    ents = {"e0": Entity("e0", 1.0, "fifo"), "e1": Entity("e1", 2.0, "fifo"), "e2": Entity("e2", 1.0, "fairness")}
    owner = rng.integers(0, 3, n)
    prob = Problem(cl, tuple(replace(j, entity=f"e{o}") for j, o in zip(base.jobs, owner)), entities=ents)
    one = get_policy("hierarchical", compact=False).solve(prob)
    small = get_policy("hierarchical", fifo_window=8).solve(prob)
    assert one.ok and small.ok
    assert small.extra["water_filling"]["compactions"] >= 3
    assert small.space.check(small.X, tol=1e-7) == []
    assert u_of(small) == pytest.approx(u_of(one), rel=1e-6, abs=2e-6)


@pytest.mark.skipif(not GAVEL.exists(), reason=f"Gavel throughputs missing: expected {GAVEL}")
def test_compaction_on_a_saturated_fractional_cluster() -> None:
    """A fifo chain on a fractional capacity share with every throughput 1 (the heterogeneity-agnostic
    static split): rebuilt models start with the capacity exactly used and floors tight to 1e-12,
    which HiGHS's presolve used to call infeasible. Same levels as one model over every job."""
    from policyopt.data.gavel import load_gavel
    from policyopt.formulations.water_filling import FillGroup, WaterFillingEngine

    data = load_gavel()
    pol = get_policy("hierarchical")
    n = 80
    types = np.random.default_rng(0).integers(0, len(data.job_types), n)
    cl = Cluster.from_counts({"v100": 64, "p100": 64, "k80": 64}, gpus_per_server=4)
    base = data.problem(types, cl)
    jobs = tuple(Job(j.id, {c: 1.0 for c, t in j.throughputs.items() if t > 0}, j.scale_factor) for j in base.jobs)
    space = pol.make_space(Problem(cl, jobs))
    levels = []
    for compact in (True, False):
        eng = WaterFillingEngine(space, normalized_throughput(space), [FillGroup("e", "fifo", 1.0, np.arange(n))],
                                 np.ones(n), pol.get_solver(), pol.solver_options(),
                                 capacity=space.counts / 7.0, window=8, compact=compact)
        out = eng.run()
        assert out.status.value == "optimal", out.message
        assert (eng.compactions >= 3) == compact
        levels.append(out.levels)
    assert levels[0] == pytest.approx(levels[1], rel=1e-6, abs=1e-7)


def test_unperturbed_warm_solves_and_their_stall_guard(monkeypatch: pytest.MonkeyPatch) -> None:
    """Warm primal simplex re-solves run without HiGHS's bound perturbation; a solve that reaches the
    iteration cap is re-solved perturbed. With the cap at 0 every warm solve takes the guard (that is
    the perturbed method throughout): the levels are the same as without it."""
    from policyopt.data.gavel import load_gavel
    from policyopt.solvers import highs

    data = load_gavel()
    rng = np.random.default_rng(7)
    n = 200
    types = rng.integers(0, len(data.job_types), n)
    cl = Cluster.from_counts({"v100": 25, "p100": 25, "k80": 25}, gpus_per_server=4)
    base = data.problem(types, cl)
    ents = {"e0": Entity("e0", 1.0, "fifo"), "e1": Entity("e1", 2.0, "fifo"), "e2": Entity("e2", 3.0, "fifo")}
    owner = rng.integers(0, 3, n)
    prob = Problem(cl, tuple(replace(j, entity=f"e{o}") for j, o in zip(base.jobs, owner)), entities=ents)
    plain = get_policy("hierarchical").solve(prob)
    assert plain.ok and plain.extra["water_filling"]["stall_retries"] == 0
    monkeypatch.setattr(highs, "_UNPERTURBED_MIN_ITERATIONS", 0)
    monkeypatch.setattr(highs, "_UNPERTURBED_ITERATIONS_PER_DIM", 0)
    guarded = get_policy("hierarchical").solve(prob)
    assert guarded.ok and guarded.extra["water_filling"]["stall_retries"] > 0
    assert guarded.space.check(guarded.X, tol=1e-7) == []
    assert u_of(guarded) == pytest.approx(u_of(plain), rel=1e-6, abs=2e-6)
