"""POP: capacity split, balanced stratified seeded partitions, routing of big jobs / capping k,
stable partitions across rounds, cluster-wide normalizers, pairs only within groups, merging,
parallel = sequential, and the CLI's result JSON — for plain problems and, through the same
``pop``, for reconfigurable ones (rows of the full multi-resource space, SLAs, quotas, labels)."""
from __future__ import annotations

import json
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from policyopt import Cluster, Colocation, Job, Policy, Problem, get_policy
from policyopt.allocation import AllocationSpace
from policyopt.cli import main
from policyopt.errors import InputError
from policyopt.pop import PopSpace, PopState, pop, split_counts

GAVEL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def typed_problem(n: int, seed: int = 0, counts: dict[str, int] | None = None) -> Problem:
    """``n`` jobs of 6 kinds (scale factors 1/2/4), heterogeneous throughputs."""
    rng = np.random.default_rng(seed)
    kinds = [({"v100": 10.0, "p100": 6.0, "k80": 2.0}, 1), ({"v100": 4.0, "p100": 3.5, "k80": 2.5}, 1),
             ({"v100": 8.0, "p100": 7.0, "k80": 1.0}, 1), ({"v100": 20.0, "p100": 9.0, "k80": 4.0}, 2),
             ({"v100": 30.0, "p100": 20.0, "k80": 5.0}, 4), ({"v100": 5.0, "k80": 4.0}, 1)]
    pick = rng.integers(0, len(kinds), n)
    jobs = tuple(Job(f"j{i}", kinds[p][0], scale_factor=kinds[p][1], job_type=f"kind{p}") for i, p in enumerate(pick))
    return Problem(Cluster.from_counts(counts or {"v100": n // 4, "p100": n // 4, "k80": n // 4}), jobs)


def test_split_counts_formula() -> None:
    parts = split_counts(np.array([10, 7, 4, 0]), 4)
    assert parts.sum(axis=0).tolist() == [10, 7, 4, 0]
    for t, c in enumerate([10, 7, 4, 0]):  # each part gets c//k or c//k + 1, (c mod k) of them the +1
        assert sorted(parts[:, t].tolist()) == sorted([c // 4 + (p < c % 4) for p in range(4)])
    # the +1 parts rotate between types instead of all landing on part 0
    assert parts.sum(axis=1).max() - parts.sum(axis=1).min() <= 1


def test_partition_balanced_stratified_seeded() -> None:
    prob = typed_problem(203, seed=1)
    part = PopState(8, seed=3).update(prob)
    sizes = part.sizes()
    assert sizes.max() - sizes.min() <= 1 and sizes.sum() == 203
    kinds = np.array([int(j.job_type[4:]) for j in prob.jobs])
    groups = np.array([part.group[j.id] for j in prob.jobs])
    for kind in np.unique(kinds):
        per_group = np.bincount(groups[kinds == kind], minlength=8)
        assert per_group.max() - per_group.min() <= 1, kind
    again = PopState(8, seed=3).update(prob)
    other = PopState(8, seed=4).update(prob)
    assert again.group == part.group and other.group != part.group


def test_big_job_is_routed_to_a_group_with_room_and_never_runs_where_it_cannot() -> None:
    """15 V100 in 2 groups → 8 + 7: the 8-GPU job can only run in the group with 8."""
    jobs = [Job("big", {"v100": 50.0}, scale_factor=8)] + [Job(f"s{i}", {"v100": 5.0, "k80": 1.0}) for i in range(9)]
    prob = Problem(Cluster.from_counts({"v100": 15, "k80": 4}), tuple(jobs))
    routed = 0
    for seed in range(6):
        res = pop("max_min_fairness_water_filling", 2, seed).solve(prob)
        info = res.extra["pop"]
        g = PopState(2, seed).update(prob).group["big"]
        assert info["group_counts"]["v100"][g] == 8
        assert res.allocation["big"]["v100"] > 0.1
        assert res.space.check(res.X) == []
        assert max(info["group_sizes"]) - min(info["group_sizes"]) <= 1
        assert info["routed"] in ([], ["big"])
        routed += info["routed"] == ["big"]
    assert routed > 0  # some seeds deal the big job to the 7-GPU group: it was moved

def test_k_is_capped_when_a_job_fits_no_group() -> None:
    jobs = [Job("big", {"v100": 50.0}, scale_factor=8)] + [Job(f"s{i}", {"v100": 5.0}) for i in range(7)]
    prob = Problem(Cluster.from_counts({"v100": 8}), tuple(jobs))
    res = pop("max_min_fairness_water_filling", 4, 0).solve(prob)
    assert res.extra["pop"]["k"] == 1 and res.extra["pop"]["k_requested"] == 4
    assert "big" in res.extra["pop"]["k_reason"]
    assert res.allocation["big"]["v100"] > 0


def test_partition_stable_across_rounds() -> None:
    state = PopState(4, seed=0)
    prob = typed_problem(120, seed=2)
    first = dict(state.update(prob).group)
    # round 2: 10 jobs leave, 6 arrive
    leave = {f"j{i}" for i in range(0, 40, 4)}
    new = [Job(f"new{i}", {"v100": 9.0, "p100": 6.0, "k80": 2.0}, job_type="kind0") for i in range(6)]
    prob2 = prob.with_jobs([j for j in prob.jobs if j.id not in leave] + new)
    part2 = state.update(prob2)
    kept = [j for j in first if j not in leave]
    moved = [j for j in kept if part2.group[j] != first[j]]
    assert len(moved) == part2.moved <= 2
    assert part2.arrivals == 6 and part2.departures == 10
    sizes = part2.sizes()
    assert sizes.max() - sizes.min() <= 1
    # round 3, nothing changed: nothing moves
    part3 = state.update(prob2)
    assert part3.group == part2.group and part3.moved == 0


def test_normalizers_are_cluster_wide() -> None:
    prob = typed_problem(40, seed=5, counts={"v100": 10, "p100": 6, "k80": 3})
    full = AllocationSpace(prob)
    part = PopState(3, 0).update(prob)
    sub = [j for j in prob.jobs if part.group[j.id] == 0]
    sub_prob = prob.with_jobs(sub, cluster=Cluster.from_counts(
        {t: int(part.counts[0, i]) for i, t in enumerate(part.worker_types)}))
    ps = PopSpace(sub_prob, False, full.pruning, full.counts)
    idx = [full.jobs.position(j.id) for j in sub]
    assert ps.equal_share_throughput() == pytest.approx(full.equal_share_throughput()[idx], rel=1e-12)
    # the group's own counts would give other values (3/19 vs its own mix)
    plain = AllocationSpace(sub_prob)
    assert not np.allclose(plain.equal_share_throughput(), ps.equal_share_throughput())


def test_merge_objective_and_feasibility_and_parallel_equals_sequential() -> None:
    prob = typed_problem(160, seed=7)
    par = pop("max_min_fairness_water_filling", 4, 1).solve(prob)
    seq = pop("max_min_fairness_water_filling", 4, 1, parallel=False).solve(prob)
    assert par.ok and seq.ok
    info = par.extra["pop"]
    assert info["mode"] == "parallel" and seq.extra["pop"]["mode"] == "sequential"
    assert len(info["partition_seconds"]) == 4 and info["parallel_seconds"] > 0
    assert info["sequential_seconds"] == pytest.approx(sum(info["partition_seconds"]))
    assert seq.extra["pop"]["parallel_seconds"] is None
    assert par.allocation == seq.allocation
    assert par.space.check(par.X) == []
    # objective = min over groups of each group's first level, on the cluster-wide scale
    full = get_policy("max_min_fairness_water_filling").solve(prob)
    u = np.array([par.effective_throughputs[j] for j in prob.job_ids])
    u_full = np.array([full.effective_throughputs[j] for j in prob.job_ids])
    nu = full.space.scale / full.space.equal_share_throughput()
    assert par.objective == pytest.approx((nu * u).min(), rel=1e-6)
    assert par.objective <= full.objective * (1 + 1e-9)
    assert par.objective >= 0.9 * full.objective  # balanced partitions lose little
    # the full water-filling is leximin-optimal: POP's sorted vector cannot beat it lexicographically
    a, b = np.sort(nu * u), np.sort(nu * u_full)
    differ = np.flatnonzero(np.abs(a - b) > 1e-7 * np.maximum(1.0, b))
    assert differ.size == 0 or a[differ[0]] < b[differ[0]]


@pytest.mark.skipif(not GAVEL.exists(), reason=f"Gavel throughputs missing: expected {GAVEL}")
def test_quality_on_gavel_workload() -> None:
    """512 Gavel-like jobs, k = 4: worst normalized throughput within 2% of the full max-min LP."""
    from policyopt.data.gavel import load_gavel

    data = load_gavel()
    rng = np.random.default_rng(0)
    sfs = rng.choice([1, 2, 4, 8], size=512, p=[0.7, 0.1, 0.15, 0.05])
    types = np.array([rng.choice(data.types_with_scale(int(s))) for s in sfs])
    prob = data.problem(types, Cluster.from_counts({"v100": 128, "p100": 128, "k80": 128}, gpus_per_server=4))
    full = get_policy("max_min_fairness").solve(prob)
    res = pop("max_min_fairness", 4, 0, combine="min").solve(prob)
    assert res.ok and res.space.check(res.X) == []
    assert res.objective / full.objective >= 0.98


def test_pairs_only_within_groups() -> None:
    jobs = tuple(Job(f"j{i}", {"v100": 10.0 + i}, job_type=f"t{i % 2}") for i in range(8))
    coloc = tuple(Colocation((f"j{a}", f"j{b}"), "v100", (8.0 + a, 8.0 + b)) for a in range(8) for b in range(a + 1, 8))
    prob = Problem(Cluster.from_counts({"v100": 2}), jobs, coloc)
    P = pop(get_policy("max_min_fairness_water_filling", space_sharing=True), 2, 0, parallel=False)
    res = P.solve(prob)
    part = P.state.partition
    assert res.colocated_allocation
    for c in res.colocated_allocation:
        a, b = c["jobs"]
        assert part.group[a] == part.group[b]
    # per type: singles + pairs (one set of workers per pair) within the cluster's 2 GPUs
    used = (sum(f for a in res.allocation.values() for f in a.values())
            + sum(c["fraction"] for c in res.colocated_allocation))
    assert used <= 2 + 1e-7


def test_policies_without_a_combine_rule_are_refused() -> None:
    with pytest.raises(InputError, match="pop_combine"):
        pop("hierarchical", 2)
    with pytest.raises(InputError, match="k"):
        pop("max_min_fairness_water_filling", 0)
    assert pop("max_min_fairness", 2, combine="min").combine == "min"


def test_cli_result_json_has_pop(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "r.json"
    rc = main(["solve", "--policy", "max_min_fairness_water_filling", "--example", "gavel-small",
               "--pop-k", "2", "--seed", "3", "--output", str(out)])
    assert rc == 0
    d = json.loads(out.read_text())
    assert d["status"] == "optimal"
    assert {"k", "seed", "partition_seconds", "sequential_seconds", "parallel_seconds"} <= set(d["pop"])
    assert d["pop"]["k"] == 2 and d["pop"]["seed"] == 3 and len(d["pop"]["partition_seconds"]) == 2
    assert main(["solve", "--policy", "hierarchical", "--example", "small", "--pop-k", "2"]) == 2
    assert "pop_combine" in capsys.readouterr().err


def test_groups_that_empty_out_between_rounds_are_skipped() -> None:
    prob = typed_problem(8, seed=3, counts={"v100": 16, "p100": 16, "k80": 16})
    policy = pop("max_min_fairness_water_filling", 4, 0, parallel=False)
    first = policy.solve(prob)
    assert first.ok and first.extra["pop"]["k"] == 4
    fewer = prob.with_jobs(prob.jobs[:2])
    res = policy.solve(fewer)
    assert res.ok and set(res.allocation) == {j.id for j in fewer.jobs}
    assert sorted(res.extra["pop"]["group_sizes"]) == [0, 0, 1, 1]
    assert res.extra["pop"]["partition_seconds"].count(0.0) == 2


# ---------------------------------------------------------------------------------------- reconfig
# One `pop` handles ReconfigProblem through its adapter (policyopt/reconfig/pop_support.py).
def reconfig_problem(n: int = 80, nodes: int = 16, quota: float = 0.3, seed: int = 7, max_gpus: int = 16) -> Any:
    from policyopt.reconfig.trace import trace_problem, transformers_trace

    return trace_problem(transformers_trace(n, static=True, seed=seed, max_gpus=max_gpus), nodes=nodes,
                         quota_fraction=quota)


@pytest.fixture(scope="module")
def rc() -> dict[str, Any]:
    """80 transformer jobs on 16 nodes (128 GPUs), tenant 'prod' (guaranteed jobs) with a 30% quota
    that binds; the full problem's space and full LP; POP k = 4 sequential and parallel."""
    from policyopt.reconfig import MultiResourceSpace

    prob = reconfig_problem()
    policy = get_policy("max_sum_throughput", normalize=True)  # Σ_m thr(m)/r_m
    seq = pop(policy, 4, 0, parallel=False).solve(prob)
    par = pop(policy, 4, 0).solve(prob)
    return {"prob": prob, "full": MultiResourceSpace(prob), "seq": seq, "par": par, "full_res": policy.solve(prob)}


def test_reconfig_merged_allocation_satisfies_every_row_of_the_full_space(rc: dict[str, Any]) -> None:
    from policyopt.reconfig.pop_support import allocation_array

    prob, full, res = rc["prob"], rc["full"], rc["seq"]
    assert res.ok and res.extra["pop"]["k"] == 4 and res.extra["pop"]["mode"] == "sequential"
    # labels map back to jobs: every job, every label a configuration the full space allows that job
    assert list(res.allocation) == prob.job_ids
    X = allocation_array(full, res.allocation)
    for jid, alloc in res.allocation.items():
        row = full.jobs.position(jid)
        assert all(full.single_mask[row, full.configs.position(c)] for c in alloc)
        assert all("|g" in c for c in alloc)  # multi-resource configurations, not plain worker types
    # every row: job time, GPUs, cores and host memory per node type, the tenant's quota, SLAs
    assert {"a100.cpus", "a100.host_mem_gib", "quota.prod.gpus", "quota.prod.cpus"} <= set(full.resources.labels)
    assert full.check(X) == []
    use = full.usage(X)
    assert use["quota.prod.gpus"] >= 0.99 * full.resource_limits[full.resources.position("quota.prod.gpus")]  # binds
    # POP's merged allocation is feasible for the full LP, so its (summed) objective cannot beat it
    assert res.objective == pytest.approx(float(np.sum(full.throughput_values(X) / full.ref_thr)), rel=1e-6)
    assert 0.95 * rc["full_res"].objective <= res.objective <= rc["full_res"].objective * (1 + 1e-7)
    # the parallel run (forked workers) gives the same allocation
    assert rc["par"].extra["pop"]["mode"] == "parallel" and rc["par"].allocation == res.allocation


def test_reconfig_slas_met_or_shortfall_reported(rc: dict[str, Any]) -> None:
    prob, full, res = rc["prob"], rc["full"], rc["seq"]
    from policyopt.reconfig.pop_support import allocation_array

    guaranteed = [j for j in prob.job_ids if prob.reconfig.jobs[j].guaranteed]
    report = {r["job"]: r for r in res.extra["sla_report"]}
    assert sorted(report) == sorted(guaranteed)
    # admission is the full problem's: same admitted jobs as the full space
    admitted = {str(full.jobs.labels[m]) for m in full.sla_jobs}
    assert {j for j, r in report.items() if r["admitted"]} == admitted
    assert 0 < len(admitted) < len(guaranteed)  # some guaranteed jobs exceed the quota: queued
    assert all("quota" in r["reason"] for j, r in report.items() if not r["admitted"])
    # an admitted job's report says met exactly when its SLA row of the FULL space holds
    X = allocation_array(full, res.allocation)
    share = full.sla_matrix() @ X.ravel()
    for k, m in enumerate(full.sla_jobs.tolist()):
        r = report[str(full.jobs.labels[m])]
        assert r["met"] == bool(share[k] >= full.sla_target[k] - 1e-6), r
        assert r["met"] or "reason" in r
    info = res.extra["pop"]["sla"]
    assert info["guaranteed"] == len(guaranteed) and info["admitted_full"] == len(admitted)
    assert info["not_met"] == [j for j, r in report.items() if r["admitted"] and not r["met"]]
    assert full.sla_feasible and info["met"] == len(admitted)  # feasible in the full problem: all met


def test_reconfig_groups_split_quotas_and_admit_exactly_their_share(rc: dict[str, Any]) -> None:
    from policyopt.pop import pop_adapter
    from policyopt.reconfig import MultiResourceSpace

    prob, full = rc["prob"], rc["full"]
    adapter = pop_adapter(prob)
    part = PopState(4, 0).update(prob, adapter)
    members = part.members(prob)
    subs = [adapter.sub_problem(part, members[p], p) for p in range(part.k)]
    # the admitted guarantees are dealt as one block by size: groups' GPU requests within one request
    adm = adapter.admitted
    per_group = np.array([adapter.request[m[adm[m]], 0].sum() for m in members])
    assert per_group.max() - per_group.min() <= adapter.request[adm, 0].max()
    q = prob.reconfig.quotas["prod"]
    for res_name in ("gpus", "cpus", "host_mem"):
        total = sum(getattr(s.reconfig.quotas["prod"], res_name) for s in subs)
        assert total == pytest.approx(getattr(q, res_name), rel=1e-9)
    admitted_full = {str(full.jobs.labels[m]) for m in full.sla_jobs}
    for s in subs:
        sp = MultiResourceSpace(s)
        assert s.nodes("a100") == int(s.nodes("a100"))  # whole nodes; the node rows follow the GPUs
        assert {str(sp.jobs.labels[m]) for m in sp.sla_jobs} == admitted_full & set(s.job_ids)
        assert not any(s.reconfig.jobs[j].guaranteed for j in set(s.job_ids) - admitted_full
                       if prob.reconfig.jobs[j].guaranteed)  # queued guaranteed jobs run best-effort


def test_reconfig_partition_stable_across_rounds() -> None:
    from policyopt.pop import pop_adapter

    pool = reconfig_problem(n=96)
    ids = pool.job_ids
    state = PopState(4, 1)
    r1 = pool.with_jobs([j for j in pool.jobs if j.id in set(ids[:80])])
    first = dict(state.update(r1, pop_adapter(r1)).group)
    assert all(c % 8 == 0 for c in state.partition.counts.ravel())  # whole 8-GPU nodes
    leave = set(ids[0:40:5])
    r2 = pool.with_jobs([j for j in pool.jobs if j.id in (set(ids[:86]) - leave)])
    part2 = state.update(r2, pop_adapter(r2))
    kept = [j for j in first if j not in leave]
    moved = [j for j in kept if part2.group[j] != first[j]]
    assert len(moved) == part2.moved <= 2 and part2.arrivals == 6 and part2.departures == len(leave)
    assert part2.sizes().max() - part2.sizes().min() <= 1
    assert state.update(r2, pop_adapter(r2)).group == part2.group


def test_reconfig_k_lowered_and_reported() -> None:
    from policyopt.pop import pop_adapter

    # a 32-GPU request on 8 nodes: with 4 groups of 2 nodes (16 GPUs) it fits none
    big = reconfig_problem(n=24, nodes=8, seed=3, max_gpus=32)
    assert max(j.scale_factor for j in big.jobs) == 32
    part = PopState(4, 0).update(big, pop_adapter(big))
    assert part.k == 2 and part.k_requested == 4 and "fits no group" in part.k_reason
    # the guarantees admitted in the full problem must fit each group's nodes, else k is lowered
    tight = reconfig_problem(n=48, nodes=8, quota=0.5, seed=5)
    part = PopState(4, 1).update(tight, pop_adapter(tight))
    assert part.k == 3 and "guaranteed jobs" in part.k_reason
    res = pop("max_sum_throughput", 4, 1, parallel=False).solve(tight)
    assert res.ok and res.extra["pop"]["k"] == 3 and res.extra["pop"]["k_reason"] == part.k_reason


def test_cli_reconfig_pop(tmp_path: Path) -> None:
    src, out = tmp_path / "rc.json", tmp_path / "out.json"
    reconfig_problem(n=32, nodes=8).to_json(src)
    assert main(["solve", "--input", str(src), "--policy", "max_sum_throughput", "--pop-k", "2", "--seed", "0",
                 "--output", str(out)]) == 0
    d = json.loads(out.read_text())
    assert d["status"] == "optimal" and len(d["allocation"]) == 32
    assert {"k", "seed", "partition_seconds", "sequential_seconds", "parallel_seconds", "sla"} <= set(d["pop"])
    assert d["pop"]["k"] == 2 and len(d["pop"]["partition_seconds"]) == 2 and d["sla_report"]


def test_split_counts_whole_units_and_no_reconfig_import_in_pop() -> None:
    parts = split_counts(np.array([128, 20]), 3, units=np.array([8, 1]))
    assert parts.sum(axis=0).tolist() == [128, 20]
    assert all(c % 8 == 0 for c in parts[:, 0]) and sorted(parts[:, 0].tolist()) == [40, 40, 48]
    odd = split_counts(np.array([21]), 2, units=np.array([8]))  # 2 whole nodes + a partial one of 5
    assert sorted(odd[:, 0].tolist()) == [8, 13]
    code = "import sys, policyopt.pop; sys.exit('policyopt.reconfig' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_reconfig_pop_names_are_aliases() -> None:
    from policyopt.pop import PopPolicy
    from policyopt.reconfig.pop_support import ReconfigPop, reconfig_pop

    assert ReconfigPop is PopPolicy
    P = reconfig_pop(get_policy("fluid_srpt"), 2, 0, parallel=False)
    assert isinstance(P, PopPolicy) and P.state.k_requested == 2 and not P.parallel


class _FailsOnGroupWith(Policy):
    """A policy that raises InputError (not picklable as such) on a sub-problem holding job ``bad``."""

    name = "fails_on_group"
    pop_combine = "sum"

    def solve(self, problem: Problem) -> Any:
        if "bad" in problem.job_ids:
            raise InputError("jobs[bad]", "bad", "this group cannot be solved")
        return get_policy("max_sum_throughput").solve(problem)


class _ThreeArgError(Exception):
    """An exception whose ``__init__`` takes three arguments and that defines no ``__reduce__``."""

    def __init__(self, a: str, b: int, c: str) -> None:
        super().__init__(f"{a}{b}{c}")
        self.a, self.b, self.c = a, b, c


@pytest.mark.parametrize("parallel", [False, True])
def test_errors_in_groups_reach_the_caller_intact(parallel: bool) -> None:
    jobs = tuple(Job(i, {"v100": 1.0 + k}) for k, i in enumerate(["a", "b", "c", "bad", "d", "e"]))
    prob = Problem(Cluster.from_counts({"v100": 6}), jobs)
    with pytest.raises(InputError) as err:
        pop(_FailsOnGroupWith(), 3, 0, parallel=parallel).solve(prob)
    assert err.value.field == "jobs[bad]" and err.value.value == "bad" and "cannot be solved" in str(err.value)
    # what a worker sends back survives pickling and rebuilds the same error
    from policyopt.pop_parallel import _carry

    back = pickle.loads(pickle.dumps(_carry(InputError("a.b", 3, "bad value"))))  # picklable: sent as is
    assert type(back) is InputError and (back.field, back.value, str(back)) == ("a.b", 3, "a.b: bad value (got 3)")
    carried = pickle.loads(pickle.dumps(_carry(_ThreeArgError("x", 1, "y"))))  # not picklable: carried
    again = carried.rebuild()
    assert type(again) is _ThreeArgError and (again.a, again.b, again.c) == ("x", 1, "y")


def test_seed_reshuffles_unlabelled_jobs() -> None:
    """Jobs without a job_type are stratified by scale factor and fastest type, so the seed changes
    which jobs share a group (it used to only renumber the groups) while sizes stay balanced."""
    rng = np.random.default_rng(5)
    jobs = tuple(Job(f"j{i}", {"v100": float(rng.uniform(2, 9)), "k80": float(rng.uniform(0.5, 3))})
                 for i in range(40))
    prob = Problem(Cluster.from_counts({"v100": 8, "k80": 8}), jobs)

    def groups(seed: int) -> set[frozenset[int]]:
        part = PopState(4, seed).update(prob)
        return {frozenset(m.tolist()) for m in part.members(prob)}

    a, b = groups(0), groups(7)
    assert a != b
    assert sorted(len(g) for g in a) == [10, 10, 10, 10] == sorted(len(g) for g in b)
    assert groups(0) == a  # reproducible


def test_policyopt_pop_stays_callable_after_the_submodule_is_imported() -> None:
    """``import policyopt.pop`` replaces the package's lazy ``pop`` attribute with the module; the
    module forwards calls, so ``policyopt.pop(policy, k)`` keeps working either way."""
    import importlib

    import policyopt

    pop_module = importlib.import_module("policyopt.pop")
    direct = pop_module.pop("max_sum_throughput", 2, parallel=False)
    via_package = policyopt.pop("max_sum_throughput", 2, parallel=False)
    assert type(via_package) is type(direct)
