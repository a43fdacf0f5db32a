"""Integral allocators keep running jobs whose configuration does not change on their nodes
(``CurrentConfig.node_ids``); configurations themselves record no nodes."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt.errors import InputError
from policyopt.reconfig import reconfig_round
from policyopt.reconfig.spec import CurrentConfig
from policyopt.reconfig.trace import JobState, trace_problem, transformers_trace


def _two_rounds(jobs, nodes: int, keep: list):
    d1 = reconfig_round(trace_problem(jobs, nodes=nodes), "rubick_greedy")
    states = {j: JobState(current=d.current()) for j, d in d1.jobs.items()}
    d2 = reconfig_round(trace_problem(keep, nodes=nodes, states=states), "rubick_greedy")
    return d1, d2


def test_rubick_greedy_does_not_replace_unchanged_jobs() -> None:
    jobs = transformers_trace(24, static=True, seed=11, max_gpus=16)
    d1, d2 = _two_rounds(jobs, 3, jobs)
    unchanged = [j for j, e in d2.jobs.items() if e.running and d1.jobs[j].running and not e.reconfigured]
    assert len(unchanged) >= 5
    assert all(d2.jobs[j].nodes == d1.jobs[j].nodes for j in unchanged)  # job 7 moved 1 -> 2 before
    assert d1.jobs[unchanged[0]].current().node_ids == d1.jobs[unchanged[0]].nodes


def test_keeping_nodes_changes_neither_columns_nor_throughputs_nor_capacity(monkeypatch) -> None:
    """Against the greedy's own assignment (the same solve with ``keep_current_nodes`` switched off),
    keeping nodes changes no job's column or throughput and moves at least one job; no node holds
    more GPUs, cores or host memory than it has."""
    from policyopt.reconfig import baselines
    from policyopt.reconfig.placement import NodePool

    moved = 0
    for seed in range(3):
        jobs = transformers_trace(32, static=True, seed=seed, max_gpus=16)
        d1 = reconfig_round(trace_problem(jobs, nodes=4), "rubick_greedy")
        states = {j: JobState(current=d.current()) for j, d in d1.jobs.items()}
        problem = trace_problem([j for i, j in enumerate(jobs) if i % 4], nodes=4, states=states)
        d2 = reconfig_round(problem, "rubick_greedy")
        with monkeypatch.context() as m:
            m.setattr(baselines, "keep_current_nodes", lambda space, assign: assign)
            raw = reconfig_round(problem, "rubick_greedy")
        sp, assign = d2.space, d2.assignment
        np.testing.assert_array_equal(assign.X(sp), raw.assignment.X(raw.space))
        assert sorted(assign.placements) == sorted(raw.assignment.placements)
        for m_, p in assign.placements.items():
            q = raw.assignment.placements[m_]
            assert (p.col, p.thr, sorted(p.gpus), p.spread) == (q.col, q.thr, sorted(q.gpus), q.spread)
            moved += p.nodes != q.nodes
        pool = NodePool(sp)  # fresh: every node's capacity
        used = [np.zeros((a.size, 3)) for a in pool.free_gpu]
        for p in assign.placements.values():
            np.add.at(used[p.node_type], list(p.nodes), np.column_stack([p.gpus, p.cpus, p.host]))
        for t, u in enumerate(used):
            assert (u[:, 0] <= pool.free_gpu[t]).all() and (u[:, 1] <= pool.free_cpu[t] + 1e-9).all()
            assert (u[:, 2] <= pool.free_mem[t] + 1e-6).all()
        for j, e in d2.jobs.items():
            assert not e.running or e.throughput == pytest.approx(raw.jobs[j].throughput)
    assert moved > 0


def test_node_ids_are_read_and_checked() -> None:
    from policyopt.reconfig.spec import ReconfigSpec
    from policyopt.reconfig.trace import trace_problem as tp

    prob = tp(transformers_trace(2, static=True, seed=1, max_gpus=8), nodes=2)
    raw = prob.reconfig.to_dict()
    jid = next(iter(raw["jobs"]))
    job = raw["jobs"][jid]
    job["current"] = {"node_type": job["node_type"], "gpus": job["gpus"], "cpus": job["cpus"],
                      "plan": job["plan"], "nodes": 1, "node_ids": [1]}
    spec = ReconfigSpec.from_dict(raw)
    assert spec.jobs[jid].current == CurrentConfig(job["node_type"], job["gpus"], job["cpus"],
                                                   spec.jobs[jid].plan, 1, (1,))
    job["current"]["node_ids"] = [0, 1]
    with pytest.raises(InputError, match=r"current\.node_ids"):
        ReconfigSpec.from_dict(raw)


def test_simulator_passes_the_relabeled_nodes_to_the_next_decision() -> None:
    from policyopt.perfmodel import Plan
    from policyopt.sim.reconfig_sim import _renamed, _Run

    cur = CurrentConfig("a100", 8, 16, Plan(dp=8), 1, (0,))
    run = _Run("a100", "c", "p", 8, 16.0, 0.0, 1.0, False, cur, ((0, 0, 8, 16.0, 0.0),))
    out = _renamed(run, [np.array([2, 0, 1])])
    assert out.slices[0][1] == 2 and out.current is not None and out.current.node_ids == (2,)
