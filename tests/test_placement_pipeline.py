"""Tests for priority policies, the stage registries and the round pipeline."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from policyopt.errors import InputError, UnknownNameError
from policyopt.mechanism import RoundAssignment, RoundMechanism
from policyopt.placement import (
    PLACERS,
    PRIORITY_POLICIES,
    ClusterLayout,
    ConsolidatingPlacer,
    FinishTimeFairness,
    FirstInFirstOut,
    JobInfo,
    LeastAttainedService,
    MatchingMigration,
    MatchingPacker,
    MechanismPolicy,
    PairThroughputTable,
    Placement,
    Placer,
    Registry,
    RoundPipeline,
    Tiresias,
)


def test_ranking_policies() -> None:
    jobs = [
        JobInfo("a", arrival_time=3.0, attained_service=100.0, rho=1.0),
        JobInfo("b", arrival_time=1.0, attained_service=5000.0, rho=3.0),
        JobInfo("c", arrival_time=2.0, attained_service=50.0, rho=2.0),
        JobInfo("d", arrival_time=4.0, attained_service=9e9, rho=0.5, high_priority=True),
    ]
    ids = lambda order: [jobs[i].job_id for i in order]  # noqa: E731
    assert ids(LeastAttainedService().rank(jobs)) == ["d", "c", "a", "b"]
    assert ids(FirstInFirstOut().rank(jobs)) == ["d", "b", "c", "a"]
    assert ids(FinishTimeFairness().rank(jobs)) == ["d", "b", "c", "a"]
    # Tiresias: a, c in queue 0 (FIFO: c before a), b in queue 1
    assert ids(Tiresias(thresholds=(1000.0,)).rank(jobs)) == ["d", "c", "a", "b"]
    with pytest.raises(InputError):
        Tiresias(thresholds=(10.0, 5.0))
    with pytest.raises(InputError, match="duplicate"):
        FirstInFirstOut().rank([JobInfo("x"), JobInfo("x")])


def test_admission_respects_capacity_and_preferences() -> None:
    jobs = [JobInfo("big", 4, arrival_time=0), JobInfo("k", 1, arrival_time=1, worker_types=("k80",)),
            JobInfo("s", 2, arrival_time=2), JobInfo("late", 1, arrival_time=3)]
    a = FirstInFirstOut().select(jobs, {"v100": 4, "k80": 2})
    got = {c.jobs[0]: (c.worker_type, c.num_gpus) for c in a.combinations}
    # s needs 2 GPUs but only one k80 is left; the later 1-GPU job backfills it
    assert got == {"big": ("v100", 4), "k": ("k80", 1), "late": ("k80", 1)}
    assert a.pending == ("s",)
    with pytest.raises(UnknownNameError):
        FirstInFirstOut().select([JobInfo("x", worker_types=("tpu",))], {"v100": 1})


def test_registry_and_from_names() -> None:
    layout = ClusterLayout.from_servers({"v100": (2, 4)})
    pipe = RoundPipeline.from_names(layout, "fifo", "consolidate", "none", "simple")
    assert pipe.policy.name == "fifo" and pipe.migration is not None and pipe.migration.name == "simple"
    with pytest.raises(UnknownNameError) as e:
        RoundPipeline.from_names(layout, "shortest-first")
    assert e.value.field == "priority_policy" and "las" in e.value.known
    with pytest.raises(InputError, match="stages are"):
        RoundPipeline.from_names(layout, "las", options={"solver": {}})
    reg: Registry[object] = Registry("thing")
    reg.register("x")(type("X", (), {}))
    with pytest.raises(InputError, match="already registered"):
        reg.register("x")(type("Y", (), {}))
    assert "las" in PRIORITY_POLICIES and "consolidate" in PLACERS


def test_custom_stage_is_swappable() -> None:
    class ReversedPlacer(Placer):
        """Highest GPU ids first (a deliberately different placer)."""

        def place(self, layout: ClusterLayout, assignment: RoundAssignment, previous: Placement | None) -> Placement:
            free = list(range(layout.num_gpus))[::-1]
            gpus = {}
            for c in assignment.combinations:
                ids = [free.pop(0) for _ in range(c.num_gpus)]
                for j in c.jobs:
                    gpus[j] = ids
            return Placement.build(layout, gpus, [c.jobs for c in assignment.combinations if len(c.jobs) == 2])

    layout = ClusterLayout.from_servers({"v100": (1, 4)})
    pipe = RoundPipeline(layout, FirstInFirstOut(), ReversedPlacer())
    res = pipe.run_round([JobInfo("a", 1), JobInfo("b", 2)])
    assert res.placement.gpus == {"a": (3,), "b": (1, 2)}


def _workload(rng: np.random.Generator, n: int) -> tuple[list[JobInfo], PairThroughputTable]:
    models = ["m0", "m1", "m2", "m3"]
    alone = {t: {m: float(rng.uniform(1, 5)) for m in models} for t in ("v100", "k80")}
    packed = {t: {(a, b): (alone[t][a] * rng.uniform(0.4, 0.9), alone[t][b] * rng.uniform(0.4, 0.9))
                  for a in models for b in models if rng.random() < 0.8} for t in alone}
    jobs = [JobInfo(f"j{i}", int(rng.choice([1, 1, 2, 4])), arrival_time=float(i),
                    attained_service=float(rng.uniform(0, 1000)), high_priority=bool(rng.random() < 0.1))
            for i in range(n)]
    table = PairThroughputTable({j.job_id: models[int(rng.integers(4))] for j in jobs}, alone, packed)
    return jobs, table


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_pipeline_rounds_keep_invariants(seed: int) -> None:
    rng = np.random.default_rng(seed)
    layout = ClusterLayout.from_servers({"v100": (3, 4), "k80": (2, 4)})
    jobs, table = _workload(rng, 40)
    pipe = RoundPipeline(layout, LeastAttainedService(), ConsolidatingPlacer(), MatchingPacker(table),
                         MatchingMigration())
    sf = {j.job_id: j.scale_factor for j in jobs}
    packed_any = False
    for _ in range(15):
        res = pipe.run_round(jobs)
        running = [j for c in res.assignment.combinations for j in c.jobs]
        assert len(running) == len(set(running))  # a job runs at most once per round
        assert not set(res.assignment.pending) & set(running)
        for c in res.assignment.combinations:
            assert all(sf[j] == c.num_gpus for j in c.jobs)
            for j in c.jobs:
                assert len(res.placement.gpus[j]) == sf[j]  # never fewer GPUs than the scale factor
        occupancy: dict[int, set[str]] = {}
        for j, gs in res.placement.gpus.items():
            for g in gs:
                occupancy.setdefault(g, set()).add(j)
        pairs = {frozenset(c.jobs) for c in res.assignment.combinations if len(c.jobs) == 2}
        packed_any |= bool(pairs)
        assert all(len(h) == 1 or frozenset(h) in pairs for h in occupancy.values())
        assert not any(frozenset(c.jobs) & {j.job_id for j in jobs if j.high_priority}
                       for c in res.assignment.combinations if len(c.jobs) == 2)
        assert set(res.timings) == {"select", "pack", "place", "migrate", "total"}
        done = set(running)
        jobs = [replace(j, attained_service=j.attained_service + 360.0 * j.scale_factor) if j.job_id in done else j
                for j in jobs]
    assert packed_any


def test_mechanism_policy_in_pipeline_with_lease_renewal() -> None:
    layout = ClusterLayout.from_servers({"v100": (1, 2), "k80": (1, 2)})
    mech = RoundMechanism(layout.worker_counts())
    alloc = {"a": {"k80": 1.0}, "b": {"k80": 0.5}, "c": {"k80": 0.5}, "d": {}, "e": {}}
    col = [{"jobs": ["d", "e"], "worker_type": "v100", "fraction": 1.0}]
    sf = {"a": 1, "b": 1, "c": 1, "d": 2, "e": 2}
    mech.set_allocation(alloc, col, sf)
    pipe = RoundPipeline(layout, MechanismPolicy(mech), ConsolidatingPlacer(), None, MatchingMigration())
    jobs = [JobInfo(j, s) for j, s in sf.items()]
    prev: Placement | None = None
    for _r in range(8):
        res = pipe.run_round(jobs)
        assert ("d", "e") in res.placement.pairs
        for c in res.selection.combinations:
            if c.renewed and prev is not None:
                for j in c.jobs:
                    assert res.placement.gpus[j] == prev.gpus[j]  # lease renewed: same GPUs
        mech.record_round(res.selection)
        prev = res.placement
    last = pipe.run_round(jobs)
    assert last.migrated == frozenset()  # a, d, e always run on their GPUs; b and c alternate
    assert len(last.placement.gpus) == 4
    assert np.abs(mech.realized_fractions() - mech.arrays.x).max() < 1e-9  # 8 rounds: exact
    with pytest.raises(InputError, match="differs"):
        MechanismPolicy(mech).select(jobs, {"v100": 8})
