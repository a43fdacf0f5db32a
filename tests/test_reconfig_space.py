"""MultiResourceSpace: configurations, pruning, memory, resource rows, SLAs, reconfiguration rule,
and every registered policy solving over it."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from policyopt import InputError, get_policy, list_policies
from policyopt.perfmodel import ClusterSpec, configs_frame, estimate_memory, predict_iter_time
from policyopt.reconfig import CATALOGUE, A100_NODE, CurrentConfig, MultiResourceSpace, ReconfigProblem
from policyopt.reconfig.space import _plan_from_row
from policyopt.reconfig.trace import trace_problem, transformers_trace

# policies whose fast paths bypass the space's rows (see docs/reconfig.md, "Policies"):
# allox / gandiva place one worker per scale factor and shortest_job_first saturates jobs from
# scale·counts free capacity (not run); the water-filling class aggregation uses scale·counts
# (its exact unaggregated path is run instead); makespan_under_budget needs a budget option.
SPECIAL = {"makespan_under_budget": {"budget": 1e9}, "max_sum_throughput": {"normalize": True},
           # partial allocation needs the base space; it refuses this one (test below)
           "max_min_fairness_strategy_proof": None}


@pytest.fixture(scope="module")
def trace():
    return transformers_trace(16, static=True, seed=7, max_gpus=16)


@pytest.fixture(scope="module")
def problem(trace) -> ReconfigProblem:
    return trace_problem(trace, nodes=2, quota_fraction=0.5)


@pytest.fixture(scope="module")
def space(problem) -> MultiResourceSpace:
    return MultiResourceSpace(problem)


def cluster_spec(nodes: int = 1) -> ClusterSpec:
    n = A100_NODE
    return ClusterSpec(8, n.cpus_per_node, n.bw_intra, n.bw_inter, n.bw_pcie, n.gpu_mem_bytes, n.host_mem_per_node)


def test_configurations_fit_memory_and_throughputs_match_the_model(space: MultiResourceSpace) -> None:
    s = space.slots
    usable = space.spec.options.usable_fraction
    for r in s.itertuples():
        entry = CATALOGUE[r.model]
        plan = _plan_from_row(s.loc[r.Index])
        mem = estimate_memory(entry.spec, plan)
        assert mem.gpu_bytes <= usable * A100_NODE.gpu_mem_bytes
        assert mem.host_bytes <= usable * r.nodes * A100_NODE.host_mem_per_node
        res = cluster_spec().resources(int(r.gpus), int(r.cpus))
        res = replace(res, nodes=int(r.nodes), host_mem_bytes=r.nodes * A100_NODE.host_mem_per_node)
        t_iter = float(predict_iter_time(configs_frame(entry.spec, [plan], res), entry.params)[0])
        assert space.T_raw[r.job, r.col] == pytest.approx(1.0 / t_iter, rel=1e-9)
        assert space.H[r.job, r.col] == pytest.approx(mem.host_bytes + space.spec.options.host_mem_per_gpu * r.gpus)


def test_no_configuration_is_dominated(space: MultiResourceSpace) -> None:
    for m in range(len(space.jobs)):
        cols = np.flatnonzero(space.single_mask[m])
        for i in cols:
            for j in cols:
                if i == j:
                    continue
                weak = (space.cfg_gpus[j] <= space.cfg_gpus[i] and space.cfg_cpus[j] <= space.cfg_cpus[i]
                        and space.H[m, j] <= space.H[m, i] and space.T_raw[m, j] >= space.T_raw[m, i])
                strict = (space.cfg_gpus[j] < space.cfg_gpus[i] or space.cfg_cpus[j] < space.cfg_cpus[i]
                          or space.H[m, j] < space.H[m, i] or space.T_raw[m, j] > space.T_raw[m, i])
                assert not (weak and strict), (m, space.configs.labels[i], space.configs.labels[j])


def test_every_job_reaches_its_reference_with_no_more_resources(space: MultiResourceSpace) -> None:
    jf = space.jobs_frame
    for m in range(len(space.jobs)):
        ok = space.sla_ok[m]
        assert ok.any()
        assert np.min(space.cfg_gpus[ok]) <= jf["gpus"][m]


@pytest.mark.parametrize("mode", ["plans", "resources", "none", "dp_only", "cpus_only"])
def test_modes_restrict_what_changes(problem: ReconfigProblem, mode: str) -> None:
    sp = MultiResourceSpace(problem, reconfigure=mode)
    jf = sp.jobs_frame
    s = sp.slots
    req = jf.set_index("job")
    g_req, c_req = req.loc[s["job"], "gpus"].to_numpy(), req.loc[s["job"], "cpus"].to_numpy()
    same_plan = np.all([s[c].to_numpy() == req.loc[s["job"], c].to_numpy()
                        for c in ("dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "zero")], axis=0)
    same_family = np.all([s[c].to_numpy() == req.loc[s["job"], c].to_numpy()
                          for c in ("tp", "pp", "micro_batches", "ga_steps", "gc", "zero")], axis=0)
    if mode == "plans":
        assert np.all(g_req == s["gpus"]) and np.all(c_req == s["cpus"])
    elif mode == "none":
        assert np.all(same_plan) and np.all(c_req == s["cpus"])
        assert np.all(sp.single_mask.sum(axis=1) == 1)
    elif mode == "resources":
        assert np.all(same_family)
        assert sp.single_mask.sum() > len(sp.jobs)  # some job can rescale
    elif mode == "cpus_only":
        assert np.all(same_plan) and np.all(g_req == s["gpus"])
    else:  # dp_only: pure-DP jobs scale over pure-DP plans, the others keep their request
        pure = (req["tp"] == 1) & (req["pp"] == 1) & (req["zero"] == "none") & (req["gc"] == 0)
        is_pure = pure.loc[s["job"]].to_numpy()
        dp_slot = (s["tp"].to_numpy() == 1) & (s["pp"].to_numpy() == 1) & (s["zero"].to_numpy() == "none") \
            & (s["gc"].to_numpy() == 0)
        assert np.all(dp_slot[is_pure]) and np.all(same_plan[~is_pure])


def _with_history(problem: ReconfigProblem, job: str, N: int, T: float, delta: float,
                  current: CurrentConfig) -> ReconfigProblem:
    spec = problem.reconfig
    jobs = dict(spec.jobs)
    jobs[job] = replace(jobs[job], reconfigurations=N, trained_seconds=T, checkpoint_seconds=delta, current=current)
    return problem.with_reconfig(replace(spec, jobs=jobs))


def test_reconfiguration_threshold_is_a_constraint(problem: ReconfigProblem) -> None:
    jid = next(j for j, r in problem.reconfig.jobs.items() if not r.guaranteed)
    rj = problem.reconfig.jobs[jid]
    cur = CurrentConfig(rj.node_type, rj.gpus, rj.cpus, rj.plan)
    # (T − (N+1)·δ)/T: (1000 − 3·10)/1000 = 0.97 ≥ 0.97 → may reconfigure
    free = MultiResourceSpace(_with_history(problem, jid, 2, 1000.0, 10.0, cur))
    m = free.jobs.position(jid)
    assert free.single_mask[m].sum() > 1
    # (1000 − 4·10)/1000 = 0.96 < 0.97 → only the current configuration
    pinned = MultiResourceSpace(_with_history(problem, jid, 3, 1000.0, 10.0, cur))
    m = pinned.jobs.position(jid)
    cols = np.flatnonzero(pinned.single_mask[m])
    assert cols.size == 1 and cols[0] == pinned.current_col[m]
    row = pinned.config_table.iloc[cols[0]]
    assert (int(row["gpus"]), int(row["cpus"]), _plan_from_row(row)) == (rj.gpus, rj.cpus, rj.plan)


def test_round_seconds_amortizes_the_checkpoint_in_the_objective(problem: ReconfigProblem) -> None:
    jid = next(j for j, r in problem.reconfig.jobs.items() if not r.guaranteed)
    rj = problem.reconfig.jobs[jid]
    cur = CurrentConfig(rj.node_type, rj.gpus, rj.cpus, rj.plan)
    p = _with_history(problem, jid, 0, 1e6, 60.0, cur).with_options(round_seconds=600.0)
    sp = MultiResourceSpace(p)
    m = sp.jobs.position(jid)
    cols = np.flatnonzero(sp.single_mask[m])
    other = cols[cols != sp.current_col[m]]
    assert other.size > 0
    np.testing.assert_allclose(sp.T[m, other], sp.T_raw[m, other] * (1 - 60.0 / 600.0))
    assert sp.T[m, sp.current_col[m]] == sp.T_raw[m, sp.current_col[m]]


def test_sla_infeasibility_is_reported(problem: ReconfigProblem) -> None:
    # the only guaranteed job is pinned (may not reconfigure) to a 1-GPU configuration slower than
    # its request: its guarantee cannot be met and must be reported, the rest still solved
    from policyopt.perfmodel import Plan
    spec = problem.reconfig
    jid = next(j for j, r in spec.jobs.items() if r.gpus >= 2
               and r.model in ("vit-86m", "roberta-355m", "bert-336m", "t5-1.2b"))
    jobs = {j: replace(r, guaranteed=(j == jid)) for j, r in spec.jobs.items()}
    rj = jobs[jid]
    cur = CurrentConfig(rj.node_type, 1, 8, Plan(dp=1, ga_steps=8, gc=True))
    jobs[jid] = replace(rj, reconfigurations=5, trained_seconds=100.0, checkpoint_seconds=30.0, current=cur)
    p = problem.with_reconfig(replace(spec, jobs=jobs, quotas={}))
    sp = MultiResourceSpace(p)
    assert [r["job"] for r in sp.sla_report] == [jid]
    rep = sp.sla_report[0]
    assert rep["admitted"] and not rep["met"] and "reason" in rep and rep["time_share"] == 0.0
    assert not sp.sla_feasible
    res = get_policy("max_min_fairness").solve(p)
    assert res.ok and sp.check(res.X) == [] or res.space.check(res.X) == []
    # without the pin the same job's guarantee is met
    jobs[jid] = replace(rj, current=None)
    ok = MultiResourceSpace(problem.with_reconfig(replace(spec, jobs=jobs, quotas={})))
    assert ok.sla_feasible and ok.sla_report[0]["met"]


def test_quota_admission_of_guaranteed_jobs(problem: ReconfigProblem) -> None:
    sp = MultiResourceSpace(problem.with_reconfig(replace(problem.reconfig, quotas={
        "prod": replace(problem.reconfig.quotas["prod"], gpus=1.0)})))
    jf = sp.jobs_frame
    g = jf["guaranteed"].to_numpy(bool)
    admitted = {r["job"] for r in sp.sla_report if r["admitted"]}
    assert all(jf["gpus"][jf["job_id"] == j].iloc[0] <= 1 for j in admitted)
    assert len(sp.sla_report) == int(g.sum())
    assert all(not r["met"] for r in sp.sla_report if not r["admitted"])


POLICIES = [p["name"] for p in list_policies() if p["name"] in SPECIAL and SPECIAL[p["name"]] is not None
            or p["name"] not in SPECIAL]


def test_strategy_proof_refuses_the_plan_space(problem: ReconfigProblem) -> None:
    with pytest.raises(InputError) as info:
        get_policy("max_min_fairness_strategy_proof").solve(problem)
    assert info.value.field == "policy" and "base allocation space" in info.value.problem


@pytest.mark.parametrize("name", POLICIES)
def test_every_policy_solves_within_every_row(problem: ReconfigProblem, name: str) -> None:
    res = get_policy(name, **(SPECIAL.get(name) or {})).solve(problem)
    sp = res.space
    assert isinstance(sp, MultiResourceSpace)
    assert res.X is not None
    assert sp.check(res.X) == [], (name, res.status, res.message)
    use = sp.usage(res.X)
    assert use["a100.gpus"] <= 16 + 1e-6
    assert use["a100.cpus"] <= 2 * 96 + 1e-6
    assert use["quota.prod.gpus"] <= 8 + 1e-6
    if res.ok and sp.sla_feasible and not res.extra.get("integral"):
        # every admitted guaranteed job runs all the time at or above its reference
        t = (np.where(sp.sla_ok, res.X, 0.0)).sum(axis=1)[sp.sla_jobs]
        assert np.all(t >= 1 - 1e-5)
        assert np.all(sp.throughput_values(res.X, sp.T_raw)[sp.sla_jobs] >= sp.ref_thr[sp.sla_jobs] * (1 - 1e-5))


def test_normalization_is_the_reference_throughput(space: MultiResourceSpace) -> None:
    np.testing.assert_allclose(space.equal_share_throughput(), space.ref_thr)
    X = space.isolated_allocation()
    assert space._violations(X, sla=False) == []
    assert np.all(space.throughput_values(X) > 0)
