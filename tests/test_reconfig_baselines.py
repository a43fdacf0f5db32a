"""Integral allocations (rubick_greedy and its E/R/N variants, synergy_like, sia_like, LP + rounding),
per-node capacity, the round hook, the trace generator, the two-job example and the fluid loop."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from policyopt import get_policy
from policyopt.perfmodel import Plan, best_plan, estimate_memory
from policyopt.reconfig import (A100_NODE, CATALOGUE, MultiResourceSpace, ReconfigOptions, reconfig_round,
                                two_job_example)
from policyopt.reconfig.examples import GPUS_PER_NODE
from policyopt.reconfig.placement import Assignment, integralize
from policyopt.reconfig.pop_support import reconfig_pop
from policyopt.reconfig.trace import checkpoint_seconds, simulate_fluid, trace_problem, transformers_trace

NODES = 3


@pytest.fixture(scope="module")
def problem():
    return trace_problem(transformers_trace(24, static=True, seed=11, max_gpus=16), nodes=NODES)


def per_node_use(space: MultiResourceSpace, assign: Assignment) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """GPUs, cores and host bytes used on every node, recomputed from the placements."""
    g, c, h = np.zeros(NODES), np.zeros(NODES), np.zeros(NODES)
    for m, p in assign.placements.items():
        assert sum(p.gpus) == space.cfg_gpus[p.col]
        assert sum(p.cpus) == pytest.approx(space.cfg_cpus[p.col])
        assert sum(p.host) == pytest.approx(space.H[m, p.col])
        for nd, gi, ci, hi in zip(p.nodes, p.gpus, p.cpus, p.host):
            g[nd] += gi
            c[nd] += ci
            h[nd] += hi
    return g, c, h


def check_integral(res) -> None:  # type: ignore[no-untyped-def]
    sp = res.space
    a = res.assignment
    X = res.X
    assert set(np.unique(X)) <= {0.0, 1.0}
    assert sp._violations(X, sla=False) == []
    g, c, h = per_node_use(sp, a)
    assert np.all(g <= GPUS_PER_NODE) and np.all(c <= A100_NODE.cpus_per_node + 1e-6)
    assert np.all(h <= A100_NODE.host_mem_per_node * (1 + 1e-9))
    # admitted guarantees are met whenever their cheapest allocation is feasible (it is here)
    if sp.sla_feasible:
        thr = a.throughputs(len(sp.jobs))
        assert np.all(thr[sp.sla_jobs] >= sp.ref_thr[sp.sla_jobs] * (1 - 1e-9))
    # plans never OOM per the memory model
    for m, p in a.placements.items():
        row = dict(sp.config_table.iloc[p.col])
        if p.spread_plan:
            row.update(p.spread_plan)
        plan = Plan(dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]), micro_batches=int(row["micro_batches"]),
                    ga_steps=int(row["ga_steps"]), gc=bool(row["gc"]), zero=str(row["zero"]))
        mem = estimate_memory(CATALOGUE[sp.jobs_frame["model"][m]].spec, plan)
        assert mem.gpu_bytes <= 0.9 * A100_NODE.gpu_mem_bytes
        assert mem.host_bytes <= 0.9 * len(p.nodes) * A100_NODE.host_mem_per_node


@pytest.mark.parametrize("name, options", [
    ("rubick_greedy", {}), ("rubick_greedy", {"reconfigure": "plans"}),
    ("rubick_greedy", {"reconfigure": "resources"}), ("rubick_greedy", {"reconfigure": "none"}),
    ("synergy_like", {}), ("sia_like", {}),
])
def test_baselines_are_integral_and_within_every_node(problem, name: str, options: dict) -> None:
    res = get_policy(name, **options).solve(problem)
    check_integral(res)
    sp = res.space
    jf = sp.jobs_frame
    for m, p in res.assignment.placements.items():
        row = sp.config_table.iloc[p.col]
        same_plan = all(row[k] == jf[k][m] for k in ("dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "zero"))
        if options.get("reconfigure") == "plans":
            assert row["gpus"] == jf["gpus"][m] and row["cpus"] == jf["cpus"][m]
        if options.get("reconfigure") == "none" or name == "synergy_like":
            assert same_plan and row["gpus"] == jf["gpus"][m]
        if options.get("reconfigure") == "resources":
            assert all(row[k] == jf[k][m] for k in ("tp", "pp", "micro_batches", "ga_steps", "gc", "zero"))


def test_lp_bounds_the_greedy_and_rounding_keeps_most_of_it(problem) -> None:
    lp = get_policy("max_sum_throughput", normalize=True).solve(problem)
    greedy = get_policy("rubick_greedy").solve(problem)
    # the greedy's 0/1 allocation is feasible for the LP, so the LP optimum bounds it
    assert lp.space.check(greedy.X) == []
    assert lp.objective >= greedy.objective - 1e-6
    a = integralize(lp.space, lp.X)
    rounded = float(np.sum(a.throughputs(len(lp.space.jobs)) / lp.space.ref_thr))
    assert rounded >= greedy.objective - 1e-6
    assert rounded <= lp.objective + 1e-6


def test_reconfig_round_flags_reconfigurations(problem) -> None:
    first = reconfig_round(problem, "fluid_srpt")
    assert not any(d.reconfigured for d in first.jobs.values())  # nothing ran before
    # feed the decisions back as current configurations with a long history (rule allows it)
    spec = problem.reconfig
    jobs = {j: replace(r, current=first.jobs[j].current(), trained_seconds=1e6) for j, r in spec.jobs.items()}
    again = reconfig_round(problem.with_reconfig(replace(spec, jobs=jobs)), "fluid_srpt")
    for jid, d in again.jobs.items():
        cur = jobs[jid].current
        if d.running and cur is not None:
            same = (d.gpus, d.cpus, d.plan, d.node_type) == (cur.gpus, cur.cpus, cur.plan, cur.node_type)
            assert d.reconfigured == (not same)
    # with δ so large that the rule forbids any change, nobody is reconfigured
    jobs = {j: replace(r, trained_seconds=100.0, checkpoint_seconds=50.0) for j, r in jobs.items()}
    pinned = reconfig_round(problem.with_reconfig(replace(spec, jobs=jobs)), "fluid_srpt")
    assert not any(d.reconfigured for d in pinned.jobs.values())


def test_reconfig_round_drives_a_pop_wrapped_policy(problem) -> None:
    """POP's merged result has no space of its own: the round reads its allocation over the full
    problem's space, rounds it to one configuration per job and places it within node capacity."""
    from policyopt.pop import pop

    wrapped = pop(get_policy("max_sum_throughput", normalize=True), 2, parallel=False)
    rnd = reconfig_round(problem, wrapped)
    assert rnd.result.space is None and isinstance(rnd.space, MultiResourceSpace)
    assert set(rnd.jobs) == {j.id for j in problem.jobs}
    running = [d for d in rnd.jobs.values() if d.running]
    assert running and all(d.plan is not None and d.gpus == d.plan.gpus for d in running)
    g, c, h = per_node_use(rnd.space, rnd.assignment)
    assert np.all(g <= GPUS_PER_NODE) and np.all(c <= A100_NODE.cpus_per_node + 1e-6)
    assert np.all(h <= A100_NODE.host_mem_per_node * (1 + 1e-9))
    assert rnd.sla_report is rnd.result.extra["sla_report"]  # the merged report, not rebuilt
    assert rnd.total_normalized_throughput > 0


def test_trace_is_seeded_and_requests_fit_memory() -> None:
    a = transformers_trace(30, rate_per_hour=10, seed=4)
    b = transformers_trace(30, rate_per_hour=10, seed=4)
    assert a == b and a != transformers_trace(30, rate_per_hour=10, seed=5)
    assert all(x.arrival <= y.arrival for x, y in zip(a, a[1:]))
    for tj in a:
        e = tj.extra
        plan = Plan(**e["plan"])
        assert plan.gpus == e["gpus"] == tj.scale_factor
        assert estimate_memory(CATALOGUE[e["model"]].spec, plan).gpu_bytes <= 0.9 * A100_NODE.gpu_mem_bytes
        assert tj.entity == ("prod" if e["guaranteed"] else "research")
        assert e["checkpoint_seconds"] == pytest.approx(checkpoint_seconds(CATALOGUE[e["model"]].spec.params))
    p = trace_problem(a, 3600.0, nodes=8)
    assert p.reconfig.quotas["prod"].gpus == 32
    assert {j.entity for j in p.jobs} <= {"prod", "research"}


def test_two_job_example_matches_independent_best_plans() -> None:
    ex = two_job_example()
    cl = A100_NODE.cluster_spec(8)
    cl = type(cl)(4, 24, cl.bw_intra, cl.bw_inter, cl.bw_pcie, cl.gpu_mem_bytes, A100_NODE.host_mem_per_node / 2)
    r, t = CATALOGUE["roberta-355m"], CATALOGUE["t5-1.2b"]
    alone = (best_plan(r.spec, r.params, 4, 24, cluster=cl).throughput,
             best_plan(t.spec, t.params, 4, 24, cluster=cl).throughput)
    assert ex.alone == pytest.approx(alone)
    even = (best_plan(r.spec, r.params, 2, 12, cluster=cl).throughput / alone[0]
            + best_plan(t.spec, t.params, 2, 12, cluster=cl).throughput / alone[1])
    assert ex.even.total_speedup == pytest.approx(even)
    assert ex.best.total_speedup >= ex.even.total_speedup
    assert ex.published == (0.78, 1.44)


def test_fluid_simulation_finishes_every_job() -> None:
    tr = transformers_trace(8, rate_per_hour=6, seed=2, max_gpus=8)
    res = simulate_fluid(tr, "fluid_srpt", nodes=1, round_seconds=3600.0)
    m = res.metrics()
    assert m["unfinished"] == 0 and m["jobs"] == 8 and m["sla_misses"] == 0
    assert all(v > 0 for v in res.jct.values())
    # a job cannot finish before its best possible time alone (work / fastest configuration)
    p = trace_problem(tr, nodes=1)
    sp = MultiResourceSpace(p)
    best = np.max(sp.T_raw, axis=1)
    for i, tj in enumerate(tr):
        assert res.jct[tj.id] >= tj.steps / best[i] * (1 - 1e-9)
    # N (reconfigure nothing) never reconfigures
    none = simulate_fluid(tr, "rubick_greedy", nodes=1, round_seconds=3600.0, reconfigure="none")
    assert none.metrics()["reconfigurations"] == 0 and none.metrics()["unfinished"] == 0


def test_pop_over_reconfig_problems_solves_each_group_over_its_space() -> None:
    p = trace_problem(transformers_trace(32, static=True, seed=9, max_gpus=8), nodes=4)
    res = reconfig_pop(get_policy("fluid_srpt"), 2, 0, parallel=False).solve(p)
    assert res.ok and res.extra["pop"]["k"] == 2
    assert set(res.allocation) == set(p.job_ids)
    assert all("|g" in c for a in res.allocation.values() for c in a)  # multi-resource configurations
    opts = ReconfigOptions()
    assert opts.reconfigure == "all"
