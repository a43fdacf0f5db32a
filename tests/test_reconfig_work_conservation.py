"""Tenant quotas that reserve instead of cap (``reconfig.options.quota = "reserve"``): capacity the
policy's allocation leaves idle flows on to the guaranteed jobs the quota held back (work
conservation), and no job gets less than the policy gave it."""
from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import get_policy
from policyopt.errors import UnknownNameError
from policyopt.reconfig import CATALOGUE, MultiResourceSpace, ReconfigOptions, ReconfigProblem
from policyopt.reconfig.trace import trace_problem, transformers_trace

POLICIES = [("max_min_fairness", {}), ("fluid_srpt", {}), ("max_sum_throughput", {"normalize": True}),
            ("fluid_srpt_floor", {})]

NODE = {"cpus_per_node": 96, "host_mem_per_node": 1.6e12, "gpu_mem_bytes": 85899345920, "bw_intra": 1.5e11,
        "bw_inter": 1.25e10, "bw_pcie": 1.2e10}


def two_nodes(quota: str | None, with_research: bool) -> ReconfigProblem:
    """16 A100s (two nodes of 8); ``r``: a guaranteed RoBERTa job of tenant ``prod`` (quota: 4 GPUs,
    its request); ``t``: a best-effort T5 job of tenant ``research``. ``quota=None``: the problem
    leaves ``options.quota`` out (the default)."""
    d: dict[str, Any] = {
        "cluster": {"worker_types": {"a100": {"count": 16, "gpus_per_server": 8}}},
        "jobs": [{"id": "r", "steps_remaining": 1000, "entity": "prod"},
                 {"id": "t", "steps_remaining": 500, "entity": "research"}],
        "reconfig": {
            "node_types": {"a100": NODE},
            "models": {"roberta-355m": CATALOGUE["roberta-355m"].to_dict(), "t5-1.2b": CATALOGUE["t5-1.2b"].to_dict()},
            "jobs": {"r": {"model": "roberta-355m", "node_type": "a100", "gpus": 4, "cpus": 32, "plan": {"dp": 4},
                           "guaranteed": True},
                     "t": {"model": "t5-1.2b", "node_type": "a100", "gpus": 2, "cpus": 16,
                           "plan": {"dp": 2, "ga_steps": 2}}},
            "quotas": {"prod": {"gpus": 4}},
            "options": {"reconfigure": "all", "quota": quota},
        },
    }
    if quota is None:
        del d["reconfig"]["options"]["quota"]
    if not with_research:
        d["jobs"] = d["jobs"][:1]
        del d["reconfig"]["jobs"]["t"]
    return ReconfigProblem.from_dict(copy.deepcopy(d))


def gpus_used(res: Any) -> dict[str, float]:
    """GPUs per job: Σ g_c · X[m, c] from the configuration labels (``<type>|g<GPUs>|...``)."""
    return {j: sum(int(label.split("|")[1][1:]) * x for label, x in row.items()) for j, row in res.allocation.items()}


@pytest.mark.parametrize("name, options", POLICIES)
def test_an_idle_cluster_flows_past_the_quota(name: str, options: dict[str, Any]) -> None:
    """Alone on 16 GPUs, the prod job is held to its 4-GPU quota under ``cap`` (12 GPUs idle); under
    ``reserve`` it takes the idle GPUs and runs faster, the policy's objective unchanged."""
    cap = get_policy(name, **options).solve(two_nodes("cap", with_research=False))
    res = get_policy(name, **options).solve(two_nodes("reserve", with_research=False))
    assert cap.ok and res.ok
    assert gpus_used(cap)["r"] == pytest.approx(4.0, abs=1e-6)
    assert gpus_used(res)["r"] > 8.0 + 1e-6  # more than the quota, within the cluster's 16
    assert gpus_used(res)["r"] <= 16.0 + 1e-6
    assert res.effective_throughputs["r"] > 1.5 * cap.effective_throughputs["r"]
    assert res.objective == pytest.approx(cap.objective, rel=1e-6)
    wc = res.extra["work_conservation"]
    assert wc["quota_use"]["quota.prod.gpus"] > 4.0 + 1e-6
    assert wc["normalized_throughput_after"] > wc["normalized_throughput_before"]
    assert res.space.check(res.X) == []  # every row but the quota (which reserves) holds
    assert "work_conservation" not in cap.extra


@pytest.mark.parametrize("name, options", POLICIES)
def test_contention_leaves_the_policy_decision(name: str, options: dict[str, Any]) -> None:
    """With a research job that uses every GPU the quota leaves, ``reserve`` gives the same
    throughputs as ``cap``: nothing is idle, so nothing flows past the quota."""
    cap = get_policy(name, **options).solve(two_nodes("cap", with_research=True))
    res = get_policy(name, **options).solve(two_nodes("reserve", with_research=True))
    for job, thr in cap.effective_throughputs.items():
        assert res.effective_throughputs[job] == pytest.approx(thr, rel=1e-5), job
    assert res.extra["work_conservation"]["quota_use"]["quota.prod.gpus"] <= 4.0 + 1e-5


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 10_000), st.sampled_from([0.125, 0.25, 0.5]), st.sampled_from(POLICIES))
def test_reserve_never_gives_a_job_less(seed: int, quota: float, policy: tuple[str, dict[str, Any]]) -> None:
    """Random transformer traces (guaranteed tenant ``prod``, quota a fraction of every resource):
    under ``reserve`` every job runs at least as fast as under ``cap`` (the held stage-1
    throughputs), GPUs, cores and host memory per node type hold, and the total normalized
    throughput does not fall."""
    base = trace_problem(transformers_trace(8, static=True, seed=seed, max_gpus=8), nodes=2, quota_fraction=quota,
                         options=ReconfigOptions(quota="cap"))
    reserve = base.with_reconfig(replace(base.reconfig, options=replace(base.reconfig.options, quota="reserve")))
    name, options = policy
    cap = get_policy(name, **options).solve(base)
    res = get_policy(name, **options).solve(reserve)
    assert cap.ok and res.ok
    for job, thr in cap.effective_throughputs.items():
        assert res.effective_throughputs[job] >= thr * (1 - 1e-6) - 1e-9, job
    sp = res.space
    assert sp.check(res.X) == []
    use = sp.usage(res.X)
    for t, count in zip(sp.worker_types.labels.tolist(), sp.counts.tolist()):
        assert use[f"{t}.gpus"] <= count + 1e-6
    ref = sp.equal_share_throughput()
    before = np.sum(np.array([cap.effective_throughputs[j] for j in sp.jobs.labels]) / ref)
    after = np.sum(np.array([res.effective_throughputs[j] for j in sp.jobs.labels]) / ref)
    assert after >= before * (1 - 1e-6)


def test_quota_mode_is_checked_and_serialized() -> None:
    problem = two_nodes("reserve", with_research=True)
    assert problem.to_dict()["reconfig"]["options"]["quota"] == "reserve"
    d = problem.to_dict()
    d["reconfig"]["options"]["quota"] = "lend"
    with pytest.raises(UnknownNameError) as exc:
        ReconfigProblem.from_dict(d)
    assert exc.value.field == "reconfig.options.quota"


@pytest.mark.parametrize("name, options", [("min_cost", {}), ("makespan_under_budget", {"budget": 1e6})])
def test_cost_policies_keep_the_quota(name: str, options: dict[str, Any]) -> None:
    """More GPU time costs more, so cost objectives and budgets are not work-conserved: the quota
    caps as under ``cap`` (same allocation), and the result says nothing about work conservation."""
    def priced(quota: str) -> ReconfigProblem:
        d = two_nodes(quota, with_research=False).to_dict()
        d["cluster"]["worker_types"]["a100"]["price_per_hour"] = 4.0
        return ReconfigProblem.from_dict(d)

    cap = get_policy(name, **options).solve(priced("cap"))
    res = get_policy(name, **options).solve(priced("reserve"))
    assert cap.ok and res.ok and "work_conservation" not in res.extra
    assert gpus_used(res)["r"] == pytest.approx(gpus_used(cap)["r"], abs=1e-6)
    assert gpus_used(res)["r"] <= 4.0 + 1e-6
    # the round's rounding and fill keep the quota too (the default, reserve, is not theirs)
    from policyopt.reconfig.rounds import reconfig_round

    assert reconfig_round(priced("reserve"), name, **options).jobs["r"].gpus <= 4


def test_a_round_places_what_the_quota_reserves_and_what_flows_on() -> None:
    """``reconfig_round`` (the simulator's decision): alone on two 8-GPU nodes with a quota of half
    the cluster, a guaranteed job is placed on 8 GPUs under ``cap`` and on all 16 under
    ``reserve`` (the rounding admits the guarantee by the quota, then follows the LP)."""
    from policyopt.reconfig.rounds import reconfig_round
    from policyopt.sim.reconfig_sim import ReconfigSimConfig

    job = transformers_trace(16, static=True, seed=2, max_gpus=16)[3]
    placed = {}
    for mode in ("cap", "reserve"):
        cfg = ReconfigSimConfig(policy="max_min_fairness", nodes=2, quota=mode, quota_fraction=0.5)
        problem = trace_problem([job], 0.0, nodes=2, quota_fraction=0.5, options=cfg.options)
        assert list(problem.reconfig.jobs.values())[0].guaranteed
        placed[mode] = reconfig_round(problem, "max_min_fairness").jobs
    (jid, cap), = placed["cap"].items()
    res = placed["reserve"][jid]
    assert cap.gpus == 8 and res.gpus == 16 and res.throughput > cap.throughput
    with pytest.raises(UnknownNameError):
        ReconfigSimConfig(quota="lend")


@pytest.mark.parametrize("name, options", POLICIES)
def test_by_default_spare_capacity_flows_past_the_quota(name: str, options: dict[str, Any]) -> None:
    """Work conservation is the default: a problem that does not set ``options.quota``, alone on an
    otherwise idle 16-GPU cluster, gives the guaranteed ``prod`` job the spare GPUs past its 4-GPU
    quota — in the policy's result and in the round the simulator runs."""
    from policyopt.reconfig.rounds import reconfig_round

    problem = two_nodes(None, with_research=False)
    assert problem.reconfig.options.quota == "reserve"
    res = get_policy(name, **options).solve(problem)
    assert res.ok and gpus_used(res)["r"] > 8.0 + 1e-6
    assert "work_conservation" in res.extra
    assert reconfig_round(problem, name, **options).jobs["r"].gpus == 16


@pytest.mark.parametrize("name", ["rubick_greedy", "synergy_like"])
def test_baselines_grow_past_the_quota_only_where_it_reserves(name: str) -> None:
    """The integral baselines follow the same rule: under ``cap`` the quota bounds every step; under
    ``reserve`` (the default) a quota-free growth phase after every job is placed hands idle
    capacity on. ``rubick_greedy`` alone on 16 GPUs: 4 GPUs under ``cap``, all 16 by default.
    ``synergy_like`` keeps each job's requested GPUs (only cores vary), so its quota-free phase
    has nothing to gain here — and must not break the GPU request."""
    cap = get_policy(name).solve(two_nodes("cap", with_research=False))
    res = get_policy(name).solve(two_nodes(None, with_research=False))
    assert cap.extra["quota_free_moves"] is None and res.extra["quota_free_moves"] is not None
    assert gpus_used(cap)["r"] == pytest.approx(4.0)
    if name == "rubick_greedy":
        assert gpus_used(res)["r"] == pytest.approx(16.0)
        assert res.effective_throughputs["r"] > 2 * cap.effective_throughputs["r"]
    else:
        assert gpus_used(res)["r"] == pytest.approx(4.0)
    assert res.space.check(res.X) == []


def test_baselines_under_contention_keep_what_the_quota_decided() -> None:
    """With a research job beside the prod job, the quota-free phase never shrinks anyone: every
    job runs at least as fast as under ``cap``."""
    cap = get_policy("rubick_greedy").solve(two_nodes("cap", with_research=True))
    res = get_policy("rubick_greedy").solve(two_nodes("reserve", with_research=True))
    for job, thr in cap.effective_throughputs.items():
        assert res.effective_throughputs[job] >= thr * (1 - 1e-9), job


def test_simulate_defaults_to_reserve() -> None:
    """``policyopt simulate --generator transformers`` and :class:`ReconfigSimConfig` default to
    quotas that reserve; ``--quota-mode cap`` keeps the earlier rule."""
    import argparse

    from policyopt.sim.cli import add_subparser
    from policyopt.sim.reconfig_sim import ReconfigSimConfig

    parser = argparse.ArgumentParser()
    add_subparser(parser.add_subparsers())
    base = ["simulate", "--generator", "transformers", "--policy", "fluid_srpt", "--jobs", "2", "--seed", "0",
            "--output", "unused"]
    assert parser.parse_args(base).quota_mode == "reserve"
    assert parser.parse_args([*base, "--quota-mode", "cap"]).quota_mode == "cap"
    assert ReconfigSimConfig().quota == "reserve" and ReconfigSimConfig().options.quota == "reserve"


def pinned_past_the_quota(quota: str | None) -> ReconfigProblem:
    """``r`` (guaranteed, 4-GPU quota) runs on all 16 GPUs — capacity that flowed past its quota in an
    earlier round — and may not reconfigure yet (``(T − (N+1)·δ)/T = (100 − 60)/100 < 0.97``); a
    best-effort job ``t`` wants GPUs too."""
    d = two_nodes(quota, with_research=True).to_dict()
    d["jobs"][0]["time_since_start"] = 100.0
    d["reconfig"]["jobs"]["r"].update({"trained_seconds": 100.0, "checkpoint_seconds": 60.0, "current": {
        "node_type": "a100", "gpus": 16, "cpus": 32, "plan": {"dp": 16}}})
    return ReconfigProblem.from_dict(d)


@pytest.mark.parametrize("name, options", [*POLICIES, ("rubick_greedy", {})])
def test_a_job_pinned_past_its_quota_keeps_its_guarantee(name: str, options: dict[str, Any]) -> None:
    """Under ``reserve`` a guaranteed job can hold more than its quota; when the reconfiguration
    rule then pins it to that configuration, the quota charges it its request (what the quota
    reserved), so its guarantee stays feasible: the job keeps running at least at its reference
    throughput, the SLA report says met, and the policy's solve is optimal (the quota rows used to
    make stage 1 infeasible, and ``rubick_greedy`` left the job out)."""
    from policyopt.reconfig.rounds import reconfig_round

    problem = pinned_past_the_quota(None)
    space = MultiResourceSpace(problem)
    assert space.sla_feasible and space.sla_report[0]["met"]
    res = get_policy(name, **options).solve(problem)
    assert res.ok, (res.status, res.message)
    assert res.effective_throughputs["r"] >= space.ref_thr[0] * (1 - 1e-6)
    decision = reconfig_round(problem, name, **options)
    assert decision.jobs["r"].running and decision.jobs["r"].gpus == 16
    # under cap the same pinned job cannot fit the quota: reported as a shortfall, never hidden
    cap = MultiResourceSpace(pinned_past_the_quota("cap"))
    assert not cap.sla_feasible and not cap.sla_report[0]["met"]
