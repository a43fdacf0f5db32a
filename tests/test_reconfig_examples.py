"""The two-job example (Rubick Fig. 8): published totals recomputed from the measured iteration times,
our model's splits recomputed independently with the performance model, and structural properties
(oracle ≥ even split, LP bound ≥ every integral allocation). Then the completion-time LP policies
(``fluid_srpt``, ``fluid_srpt_floor``: floors recomputed from the space's arrays and other policies)
and a smoke run of benchmarks/reconfig_policy_bench.py."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from policyopt.perfmodel import ClusterSpec, Resources, best_plan, enumerate_plans, predict_iter_time
from policyopt.perfmodel.table import config_row
from policyopt.reconfig import A100_NODE, CATALOGUE, PUBLISHED_TWO_JOB
from policyopt.reconfig.examples import (RUBICK_MEASURED_ITER_S, RUBICK_ORIGINAL_KIND, fit_to_measured,
                                         measured_vs_model, published_two_job_totals,
                                         rubick_two_job_example, rubick_two_job_problem)

MODELS = ("roberta-355m", "t5-3b")
GPUS = 4


@pytest.fixture(scope="module")
def ex():  # type: ignore[no-untyped-def]
    return rubick_two_job_example()


def _cluster() -> ClusterSpec:
    """The example's node built by hand: 4 GPUs of A100_NODE, 12 cores per GPU, half the host memory."""
    return ClusterSpec(gpus_per_node=GPUS, cpus_per_node=12 * GPUS, bw_intra=A100_NODE.bw_intra,
                       bw_inter=A100_NODE.bw_inter, bw_pcie=A100_NODE.bw_pcie,
                       gpu_mem_bytes=A100_NODE.gpu_mem_bytes, host_mem_per_node=A100_NODE.host_mem_per_node / 2)


def _iter_time(model: str, plan, gpus: int, cpus: int) -> float:  # type: ignore[no-untyped-def]
    cl = _cluster()
    res = Resources(gpus, cpus, 1, cl.bw_intra, cl.bw_inter, cl.bw_pcie, cl.gpu_mem_bytes, cl.host_mem_per_node)
    e = CATALOGUE[model]
    return float(predict_iter_time(pd.DataFrame([config_row(e.spec, plan, res)]), e.params)[0])


def test_reference_is_the_original_plan_on_all_gpus(ex) -> None:  # type: ignore[no-untyped-def]
    problem = rubick_two_job_problem()
    for i, (jid, m) in enumerate(zip(("roberta", "t5"), MODELS)):
        rj = problem.reconfig.jobs[jid]
        assert rj.gpus == GPUS and rj.plan == ex.reference_plans[i] and rj.plan.gpus == GPUS
        assert (rj.plan.tp == GPUS) == (RUBICK_ORIGINAL_KIND[m] == "tp+ga")  # TP+GA vs DP+GA
        ref = CATALOGUE[m].spec.global_batch / _iter_time(m, rj.plan, GPUS, 12 * GPUS)
        assert ex.reference_throughput[i] == pytest.approx(ref, rel=1e-9)


def test_even_split_recomputed_with_best_plan(ex) -> None:  # type: ignore[no-untyped-def]
    cl = _cluster()
    for i, m in enumerate(MODELS):
        e = CATALOGUE[m]
        b = best_plan(e.spec, e.params, GPUS // 2, 12 * GPUS // 2, cluster=cl)
        assert b is not None
        assert ex.even.throughput[i] == pytest.approx(b.throughput, rel=1e-9)
        assert ex.even.speedup[i] == pytest.approx(b.throughput / ex.reference_throughput[i], rel=1e-9)
    assert ex.even.gpus == (2, 2)
    assert ex.even.total_speedup == pytest.approx(sum(ex.even.speedup))


def test_every_gpu_split_evaluated_or_shown_missing(ex) -> None:  # type: ignore[no-untyped-def]
    cl = _cluster()
    want = {(a, b) for a in range(1, GPUS) for b in range(1, GPUS - a + 1)}
    got = {s.gpus for s in ex.splits}
    assert got | set(ex.missing) == want and not got & set(ex.missing)
    for a, b in ex.missing:  # some job has no plan that divides its batch / fits there
        assert any(enumerate_plans(CATALOGUE[m].spec, g, gpus_per_node=GPUS).empty
                   or best_plan(CATALOGUE[m].spec, CATALOGUE[m].params, g, 12 * g, cluster=cl) is None
                   for m, g in zip(MODELS, (a, b)))
    for s in ex.splits:
        for i, m in enumerate(MODELS):
            e = CATALOGUE[m]
            b = best_plan(e.spec, e.params, s.gpus[i], s.cpus[i], cluster=cl)
            assert b is not None and s.throughput[i] == pytest.approx(b.throughput, rel=1e-9)


def test_sensitivity_aware_split_bounds(ex) -> None:  # type: ignore[no-untyped-def]
    tol = 1e-6
    assert ex.best.total_speedup >= ex.even.total_speedup - tol
    assert ex.best.total_speedup == pytest.approx(max(s.total_speedup for s in ex.splits))
    # the LP optimum of Σ thr/r bounds every integral allocation (greedy, rounded LP, every split)
    for alloc in (ex.best, ex.greedy, ex.lp):
        assert alloc.total_speedup <= ex.lp_bound + tol
        assert sum(alloc.gpus) <= GPUS and sum(alloc.cpus) <= 12 * GPUS
        for i in range(2):
            assert alloc.speedup[i] == pytest.approx(alloc.throughput[i] / ex.reference_throughput[i], rel=1e-9)
    # the greedy and the rounded LP use at most 12 cores per GPU, so the oracle bounds them too
    assert ex.greedy.total_speedup <= ex.best.total_speedup + tol
    assert ex.lp.total_speedup <= ex.best.total_speedup + tol


def test_published_totals_recomputed_from_measurements() -> None:
    m = published_two_job_totals()
    assert m.totals_as_published == PUBLISHED_TWO_JOB
    base = [RUBICK_MEASURED_ITER_S[(mod, RUBICK_ORIGINAL_KIND[mod], GPUS)] for mod in MODELS]
    for i, mod in enumerate(MODELS):
        at2 = min(v for (k_m, _, g), v in RUBICK_MEASURED_ITER_S.items() if k_m == mod and g == 2)
        assert m.even[i] == pytest.approx(base[i] / at2)
    # Rubick's split is the best measured split of the 4 GPUs
    totals = {}
    for a in range(1, GPUS):
        t = [[v for (k_m, _, g), v in RUBICK_MEASURED_ITER_S.items() if k_m == mod and g == gg]
             for mod, gg in zip(MODELS, (a, GPUS - a))]
        if all(t):
            totals[(a, GPUS - a)] = base[0] / min(t[0]) + base[1] / min(t[1])
    assert max(totals, key=totals.get) == m.rubick_gpus
    assert sum(m.rubick) == pytest.approx(totals[m.rubick_gpus])


def test_measured_vs_model_uses_the_performance_model() -> None:
    v = measured_vs_model()
    assert len(v) == len(RUBICK_MEASURED_ITER_S)
    assert np.allclose(v["ratio"], v["model_s"] / v["measured_s"])
    row = v[(v["model"] == "t5-3b") & (v["kind"] == "tp+ga") & (v["gpus"] == 4)].iloc[0]
    plan = rubick_two_job_problem().reconfig.jobs["t5"].plan
    assert row["model_s"] == pytest.approx(_iter_time("t5-3b", plan, 4, 48), rel=1e-9)
    assert v.loc[(v["kind"] == "tp+ga") & (v["gpus"] == 3), "in_plan_space"].all()  # 24 heads % 3 == 0


def test_fit_to_measured_reports_rmsle() -> None:
    fits = fit_to_measured(n_starts=2)
    assert set(fits) == set(MODELS)
    assert all(np.isfinite(r) and r >= 0 for _, r in fits.values())


def test_module_prints_the_table(ex) -> None:  # type: ignore[no-untyped-def]
    out = subprocess.run([sys.executable, "-m", "policyopt.reconfig.examples"], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "Two-job example" in out.stdout
    assert f"**{ex.even.total_speedup:.2f}**" in out.stdout
    assert f"**{ex.lp_bound:.2f}**" in out.stdout


# ---------------------------------------------------------------------------------------------
# The completion-time LP policies (policyopt.reconfig.policies)
# ---------------------------------------------------------------------------------------------
from policyopt import get_policy  # noqa: E402
from policyopt.errors import InputError  # noqa: E402
from policyopt.examples import load_example  # noqa: E402
from policyopt.reconfig.trace import trace_problem, transformers_trace  # noqa: E402


@pytest.fixture(scope="module")
def trace_prob():  # type: ignore[no-untyped-def]
    return trace_problem(transformers_trace(24, static=True, seed=11, max_gpus=16), nodes=3)


def _useful(space, X) -> float:  # type: ignore[no-untyped-def]
    """Σ_m thr(m)/eff_m with eff_m = max_c T[m,c]/g_c, recomputed from the space's arrays."""
    per_gpu = np.where(space.single_mask, space.T / np.maximum(space.cfg_gpus[None, :], 1), 0.0)
    return float(np.sum(space.throughput_values(X) / per_gpu.max(axis=1)))


def test_floor_policy_without_floors_is_fluid_srpt(trace_prob) -> None:  # type: ignore[no-untyped-def]
    a = get_policy("fluid_srpt").solve(trace_prob)
    b = get_policy("fluid_srpt_floor", efficiency=0.0).solve(trace_prob)
    assert b.extra["lp_solves"] == 1 and b.space.check(b.X) == []
    assert b.objective == pytest.approx(a.objective, rel=1e-6)


def test_efficiency_floor_is_the_maximum_useful_work(trace_prob) -> None:  # type: ignore[no-untyped-def]
    r = get_policy("fluid_srpt_floor", efficiency=1.0).solve(trace_prob)
    sp = r.space
    assert sp.check(r.X) == []
    level = r.extra["floor_levels"]["efficiency"]
    assert _useful(sp, r.X) >= level * (1 - 1e-5)
    # no other feasible allocation does more useful work; SRPT's own rate can only drop
    for name, opts in (("fluid_srpt", {}), ("max_sum_throughput", {"normalize": True}), ("makespan", {})):
        other = get_policy(name, **opts).solve(trace_prob)
        assert _useful(other.space, other.X) <= level * (1 + 1e-5)
    assert r.objective <= get_policy("fluid_srpt").solve(trace_prob).objective * (1 + 1e-6)


def test_makespan_floor_keeps_every_job_on_track(trace_prob) -> None:  # type: ignore[no-untyped-def]
    ms = get_policy("makespan").solve(trace_prob)
    z_star = 1.0 / ms.extra["optimal_makespan"]
    for level in (0.5, 1.0):
        r = get_policy("fluid_srpt_floor", efficiency=0.0, makespan=level).solve(trace_prob)
        sp = r.space
        act = sp.steps > 0
        assert r.extra["floor_levels"]["makespan"] == pytest.approx(z_star, rel=1e-5)
        assert np.min(sp.throughput_values(r.X)[act] / sp.steps[act]) >= level * z_star * (1 - 1e-5)
        assert sp.check(r.X) == []


def test_fair_floor_and_generic_space() -> None:
    p = load_example("small")  # a plain Problem: the base AllocationSpace
    r = get_policy("fluid_srpt_floor", efficiency=1.0, makespan=0.5, fair=0.5).solve(p)
    sp = r.space
    assert sp.check(r.X) == [] and set(r.extra["floor_levels"]) == {"efficiency", "makespan", "fair"}
    ratio = sp.throughput_values(r.X) / (sp.weights * sp.equal_share_throughput())
    assert np.min(ratio[sp.steps > 0]) >= 0.5 * r.extra["floor_levels"]["fair"] * (1 - 1e-5)
    assert r.objective <= get_policy("fluid_srpt").solve(p).objective * (1 + 1e-6)


def test_floor_levels_are_validated() -> None:
    with pytest.raises(InputError) as err:
        get_policy("fluid_srpt_floor", makespan=1.5).solve(load_example("small"))
    assert err.value.field == "options.makespan"


def test_policy_bench_parses_methods_and_runs_one_simulation() -> None:
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "reconfig_policy_bench.py"
    spec = importlib.util.spec_from_file_location("reconfig_policy_bench", path)
    bench = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(bench)  # type: ignore[union-attr]
    assert bench.split_methods("a,b:x=1,y=0.5,c") == ["a", "b:x=1,y=0.5", "c"]
    assert bench.parse_method("b:x=1,y=0.5,z=s") == ("b", {"x": 1, "y": 0.5, "z": "s"})
    rows = [bench.run_one((m, "static", 2, 6, 1, 2.0, 3600.0, "reserve"))
            for m in ("rubick_greedy", "fluid_srpt_floor")]
    assert all(r["unfinished"] == 0 and r["sla_misses"] == 0 for r in rows)
    assert all(0 < r["avg_jct"] <= r["p99_jct"] <= r["makespan"] * (1 + 1e-9) for r in rows)
    summ = bench.summarize(rows)
    floor = next(s for s in summ if s["method"] == "fluid_srpt_floor")
    assert floor["avg_jct ratio (gmean)"] == pytest.approx(rows[0]["avg_jct"] / rows[1]["avg_jct"])


def test_t5_3b_heads_allow_tp3_and_count_in_the_reconfiguration_space() -> None:
    from policyopt.perfmodel import Plan, enumerate_plans, estimate_memory
    from policyopt.reconfig import CATALOGUE
    from policyopt.reconfig.catalog import evaluate_rows
    from policyopt.reconfig.examples import rubick_two_job_node

    spec = CATALOGUE["t5-3b"].spec
    assert spec.heads == 24 and spec.hidden % 3 != 0
    assert 3 in set(enumerate_plans(spec, 3)["tp"])  # a TP rank holds whole heads: 24 % 3 = 0
    no_heads = type(spec)(**{**spec.__dict__, "heads": 0})
    assert 3 not in set(enumerate_plans(no_heads, 3)["tp"])  # without heads: hidden % t = 0
    # the reconfiguration space charges the stored attention scores (it used to drop `heads`)
    rows = pd.DataFrame([{"model": "t5-3b", "gpus": 2, "cpus": 24, "nodes": 1, **Plan(dp=2).to_row()}])
    ev = evaluate_rows(rows, {"t5-3b": CATALOGUE["t5-3b"]}, rubick_two_job_node(), 4, 0.9)
    assert ev["gpu_bytes"].iloc[0] == pytest.approx(estimate_memory(spec, Plan(dp=2)).gpu_bytes)
    assert ev["gpu_bytes"].iloc[0] > estimate_memory(no_heads, Plan(dp=2)).gpu_bytes
    assert not bool(ev["feasible"].iloc[0])  # 79 GiB per GPU: plain DP on 2 GPUs does not fit
