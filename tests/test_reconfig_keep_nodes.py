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


def test_keeping_nodes_changes_neither_columns_nor_throughputs_nor_capacity() -> None:
    for seed in range(3):
        jobs = transformers_trace(32, static=True, seed=seed, max_gpus=16)
        d1, d2 = _two_rounds(jobs, 4, [j for i, j in enumerate(jobs) if i % 4])
        sp, assign = d2.space, d2.assignment
        X = assign.X(sp)
        np.testing.assert_array_equal(X, d2.result.X)  # what the policy decided
        used = np.zeros(4)
        for p in assign.placements.values():
            np.add.at(used, list(p.nodes), p.gpus)
        assert (used <= 8).all()
        for j, e in d2.jobs.items():
            assert not e.running or e.throughput == pytest.approx(d2.result.effective_throughputs[j])


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
