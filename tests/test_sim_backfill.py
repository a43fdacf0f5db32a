"""Gavel's simulator gives idle workers to jobs the allocation gives no time there (``backfill``), and
finish-time fairness's ``fill`` stage: an allocation with the same ``max ρ`` that leaves no capacity
idle a job could use."""
from __future__ import annotations

import numpy as np
import pytest

import policyopt
from policyopt.errors import InputError
from policyopt.policy import get_policy
from policyopt.result import Status, Timings
from policyopt.sim import SimConfig, Simulator
from policyopt.sim.scheduling import AllocationScheduler, runnable_types
from policyopt.sim.traces import gavel_trace


def _installed(backfill: bool) -> AllocationScheduler:
    """v100 = 2, k80 = 1; the allocation gives job ``a`` all of one V100 and nothing to ``b``, ``c``, ``d``:
    ``b`` cannot run on V100, ``c`` needs two GPUs, ``d`` runs anywhere."""
    problem = policyopt.Problem.from_dict({
        "cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 1}}},
        "jobs": [{"id": "a", "throughputs": {"v100": 2.0, "k80": 1.0}},
                 {"id": "b", "throughputs": {"v100": 0.0, "k80": 1.0}},
                 {"id": "c", "throughputs": {"v100": 3.0, "k80": 1.0}, "scale_factor": 2},
                 {"id": "d", "throughputs": {"v100": 1.0, "k80": 1.0}}]})
    policy = get_policy("max_min_fairness")
    space = policy.make_space(problem)
    X = np.zeros(space.mask.shape)
    X[space.jobs.labels.tolist().index("a"), space.configs.labels.tolist().index("v100")] = 1.0
    result = policy.result(space, X, Status.OPTIMAL, None, "given", Timings())
    counts = {"v100": 2, "k80": 1}
    sched = AllocationScheduler(policy, counts, 360.0, backfill=backfill)
    sched.install(result, {"a": 1, "b": 1, "c": 2, "d": 1}, counts)
    return sched


def test_backfill_gives_idle_workers_to_jobs_without_time_there() -> None:
    """Job order, first type with room where the job can run: ``b`` on the K80 (it cannot use a V100),
    ``c`` nowhere (two GPUs), ``d`` on the free V100. Without ``backfill`` only ``a`` runs."""
    sel = _installed(True).select([], {"v100": 2, "k80": 1})
    assert {c.jobs[0]: c.worker_type for c in sel.combinations} == {"a": "v100", "b": "k80", "d": "v100"}
    assert sel.gpus_used() == {"v100": 2, "k80": 1}
    plain = _installed(False).select([], {"v100": 2, "k80": 1})
    assert {c.jobs[0]: c.worker_type for c in plain.combinations} == {"a": "v100"}


def test_backfill_respects_the_available_workers() -> None:
    """A failed V100 (capacity 1) leaves no V100 to backfill: ``b`` still takes the K80."""
    sel = _installed(True).select([], {"v100": 1, "k80": 1})
    assert {c.jobs[0]: c.worker_type for c in sel.combinations} == {"a": "v100", "b": "k80"}


def test_runnable_types_follow_positive_throughputs() -> None:
    sched = _installed(True)
    # worker types (v100, k80); ``c`` needs two GPUs, more than the one K80
    assert sched._runs == {"a": (0, 1), "b": (1,), "c": (0,), "d": (0, 1)}
    assert runnable_types(policyopt.PolicyResult(policy="x", solver="", status=Status.OPTIMAL, objective=None,
                                                 allocation={}, timings=Timings()), ("v100",)) == {}


def test_simconfig_backfill_must_be_a_bool() -> None:
    with pytest.raises(InputError, match="backfill"):
        SimConfig(backfill="yes")  # type: ignore[arg-type]


def test_backfill_uses_the_gpus_finish_time_fairness_leaves_idle(gavel) -> None:
    """Finish-time fairness pins only the jobs at ``max ρ``: its allocation leaves GPUs idle that Gavel's
    simulator hands to other jobs. With ``backfill`` the same run keeps more GPUs busy and finishes the
    jobs sooner on average."""
    trace = gavel_trace(gavel, 40, 2.0, seed=0, multi_gpu=True)
    cfg = dict(policy="finish_time_fairness", round_seconds=360.0, recompute_interval=1920.0,
               checkpoint_seconds=0.0, restore_seconds=0.0, migration="none", keep_types=False,
               gpus_per_server={"v100": 8, "p100": 8, "k80": 8}, seed=0)
    plain = Simulator("v100=8,p100=8,k80=8", SimConfig(**cfg), gavel).run(trace)
    filled = Simulator("v100=8,p100=8,k80=8", SimConfig(**cfg, backfill=True), gavel).run(trace)
    assert filled.metrics["utilization"] > plain.metrics["utilization"] + 0.02
    assert filled.metrics["avg_jct"] < plain.metrics["avg_jct"]


def test_ftf_fill_keeps_the_optimum_and_uses_the_idle_capacity() -> None:
    """One V100 and one K80; ``A`` runs 4 steps/s on the V100 and 1 on the K80, ``B`` 1 on either. ``B``
    cannot beat ``ρ_B = thr(B, X_iso)/thr(B) ≥ 1`` (at most one GPU's time), so ``ρ* = 1`` and ``A`` needs
    only ``thr(A) ≥ 2.5``. ``fill`` keeps ``max ρ = 1`` and gives ``A`` the whole V100 (``B`` the K80)."""
    problem = policyopt.Problem.from_dict({
        "cluster": {"worker_types": {"v100": {"count": 1}, "k80": {"count": 1}}},
        "jobs": [{"id": "A", "throughputs": {"v100": 4.0, "k80": 1.0}, "steps_remaining": 1e5},
                 {"id": "B", "throughputs": {"v100": 1.0, "k80": 1.0}, "steps_remaining": 1e5}]})
    plain = policyopt.solve(problem, "finish_time_fairness")
    filled = policyopt.solve(problem, "finish_time_fairness", fill=True)
    assert plain.objective == pytest.approx(1.0, rel=1e-6)
    assert filled.objective == pytest.approx(plain.objective, rel=1e-9)
    assert filled.extra["fill"]["used"] is True
    assert filled.allocation["A"].get("v100", 0.0) == pytest.approx(1.0, abs=1e-6)
    assert filled.allocation["B"].get("k80", 0.0) == pytest.approx(1.0, abs=1e-6)
    thr = filled.effective_throughputs
    assert thr["A"] == pytest.approx(4.0, abs=1e-5)
    assert 2.5 / thr["A"] <= 1.0 + 1e-6 and 1.0 / thr["B"] <= 1.0 + 1e-6


def test_published_ftf_backfills_and_las_does_not() -> None:
    """``ftf --scale published`` runs with Gavel's backfill; the LAS experiments keep their setup."""
    from policyopt.sim import experiments as ex

    assert ex.scaled(ex.EXPERIMENTS["ftf"], "published").common["backfill"] is True
    for name in ("las_single", "las_multi"):
        assert "backfill" not in ex.scaled(ex.EXPERIMENTS[name], "published").common
