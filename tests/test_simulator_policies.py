"""Simulator with allocation policies: space sharing through the mechanism, static per-entity
split vs hierarchical, cost/SLO metrics, early stop at the steady-state window."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from policyopt.sim.scheduling import mechanism_allocation, resolve_policy, split_counts
from policyopt.sim.simulator import simulate
from policyopt.sim.traces import TraceJob, gavel_trace

RESNET = ("ResNet-18 (batch size 16)", 1)
REC = ("Recommendation (batch size 1024)", 1)


def job(jid: str, model_sf, steps: float, arrival: float = 0.0, **kw) -> TraceJob:
    return TraceJob(jid, arrival, f"{model_sf[0]}#{model_sf[1]}", model_sf[1], steps, **kw)


def test_resolve_policy_names() -> None:
    assert resolve_policy("max_min_fairness").kind == "allocation"
    assert resolve_policy("las").kind == "priority"
    assert resolve_policy("fifo").kind == "allocation"          # the LP policy wins the bare name
    assert resolve_policy("round:fifo").kind == "priority"      # the heuristic, explicitly
    assert resolve_policy("static_split:max_min_fairness").kind == "static_split"


def test_split_counts_largest_remainder() -> None:
    s = split_counts({"v100": 12, "k80": 5}, {"a": 1.0, "b": 2.0, "c": 3.0})
    assert s == {"a": {"v100": 2, "k80": 1}, "b": {"v100": 4, "k80": 2}, "c": {"v100": 6, "k80": 2}}
    assert all(sum(s[e][t] for e in s) == n for t, n in {"v100": 12, "k80": 5}.items())


def test_space_sharing_pairs_run_at_paired_throughput(gavel) -> None:
    """max_min_fairness with space sharing on one V100: the two jobs share it all the time at the
    measured colocated throughputs, so each finishes at restore + steps / paired throughput."""
    ia, ib = gavel.type_index(*RESNET), gavel.type_index(*REC)
    pa, pb = gavel.paired[ia, ib, gavel.configs.index("v100")]
    trace = [job("A", RESNET, pa * 3000.0), job("B", REC, pb * 3000.0)]
    res = simulate(trace, "v100=1", table=gavel, policy="max_min_fairness", space_sharing=True, seed=0,
                   restore_seconds=10.0, record_runs=True)
    runs = res.runs
    assert (runs["partner"].notna()).all()
    assert np.allclose(runs.loc[runs["job"] == "A", "throughput"], pa)
    assert res.jobs.set_index("id")["jct"].to_numpy() == pytest.approx([3010.0, 3010.0])
    alone = simulate(trace, "v100=1", table=gavel, policy="max_min_fairness", seed=0, restore_seconds=10.0)
    assert alone.metrics["makespan"] > res.metrics["makespan"]


def test_static_split_keeps_entities_in_their_slice(gavel) -> None:
    """Two entities of weight 1 on 2 V100s, only entity a has jobs: the static split runs a's two jobs
    on its single V100 (time-shared), the hierarchical policy gives each job a V100."""
    r = float(gavel.alone[gavel.type_index(*RESNET), gavel.configs.index("v100")])
    trace = [job("A1", RESNET, r * 3600.0, entity="a"), job("A2", RESNET, r * 3600.0, entity="a"),
             job("B1", RESNET, r * 360.0, arrival=20000.0, entity="b")]
    kw = dict(table=gavel, seed=0, entities={"a": 1.0, "b": 1.0}, record_runs=True, restore_seconds=0.0,
              checkpoint_seconds=0.0)
    static = simulate(trace, "v100=2", policy="static_split:max_min_fairness_water_filling", **kw)
    hier = simulate(trace, "v100=2", policy="hierarchical", **kw)
    per_round = static.runs[static.runs["job"].str.startswith("A")].groupby("round_start").size()
    assert per_round.max() == 1
    assert hier.runs[hier.runs["round_start"] == 0.0]["job"].tolist() == ["A1", "A2"]
    j_static, j_hier = static.jobs.set_index("id"), hier.jobs.set_index("id")
    assert j_hier.loc["A1", "jct"] == pytest.approx(3600.0) and j_hier.loc["A2", "jct"] == pytest.approx(3600.0)
    assert j_static.loc[["A1", "A2"], "jct"].max() == pytest.approx(7200.0)
    assert static.metrics["completed"] == 3


def test_cost_and_slo_metrics(gavel) -> None:
    trace = [replace(j, steps=float(np.ceil(j.steps / 10)))
             for j in gavel_trace(gavel, 24, 10.0, seed=2, slo_factors=[1.2, 2.0, 10.0])]
    res = simulate(trace, "v100=2,p100=2,k80=2", table=gavel, policy="min_cost_slo", seed=0)
    jobs = res.jobs
    m = res.metrics
    assert m["slo"]["with_slo"] == 24
    assert m["slo"]["violations"] == int((jobs["jct"] > jobs["slo_seconds"] + 1e-6).sum())
    # cost = Σ GPU-hours held × price; GPU-hours held ≥ compute time
    assert m["total_cost"] == pytest.approx(jobs["cost"].sum())
    assert m["total_cost"] == pytest.approx(res.rounds["cost"].sum())
    assert (jobs["cost"] > 0).all()


def test_until_window_stops_early(gavel) -> None:
    """With ``until="window"`` the simulation stops at the round in which the last window job finishes."""
    trace = [replace(j, steps=float(np.ceil(j.steps / 10))) for j in gavel_trace(gavel, 40, 20.0, seed=1)]
    trace[-1] = replace(trace[-1], steps=trace[-1].steps * 100)  # a very long last job
    kw = dict(table=gavel, policy="las", seed=0, window=(0.25, 0.5))
    early = simulate(trace, "v100=2,p100=2,k80=2", until="window", **kw)
    full = simulate(trace, "v100=2,p100=2,k80=2", **kw)
    j = early.jobs
    assert np.isfinite(j["jct"].iloc[10:20]).all()
    assert early.metrics["steady_state_window"]["completed"] == 10
    assert early.metrics["completed"] < 40 == full.metrics["completed"]
    last_window_finish = j["finish"].iloc[10:20].max()
    stop = early.metrics["simulated_seconds"] + j["arrival"].min()
    assert last_window_finish <= stop < last_window_finish + 360.0 + 1e-6
    assert early.metrics["avg_jct"] == pytest.approx(full.metrics["avg_jct"])


def test_mechanism_allocation_folds_unconsolidated() -> None:
    from policyopt.result import PolicyResult, Status

    res = PolicyResult("p", "highs", Status.OPTIMAL, 1.0,
                       {"a": {"v100": 0.5, "v100_unconsolidated": 0.5}, "b": {"k80": 1.0 + 1e-9}},
                       [{"jobs": ["c", "d"], "worker_type": "v100", "fraction": 0.25}])
    alloc, coloc = mechanism_allocation(res, {"v100": 4, "k80": 1}, {"a": 2, "b": 1, "c": 1, "d": 1})
    assert alloc["a"] == {"v100": 1.0}
    assert alloc["b"]["k80"] <= 1.0
    assert coloc == [{"jobs": ["c", "d"], "worker_type": "v100", "fraction": 0.25}] and alloc["c"] == {}


def test_experiment_runner_writes_results_and_skips_missing(gavel_dir, tmp_path, monkeypatch) -> None:
    from policyopt.sim import experiments as ex

    tiny = ex.Experiment("tiny", "tiny", "-", "v100=8,p100=8,k80=8", {"generator": "shockwave", "jobs": 12},
                         (ex.Arm("las", {"policy": "las"}), ex.Arm("fifo", {"policy": "round:fifo"})),
                         baseline="fifo", treatment="las", rates=(20.0,), seeds=(0, 1))
    missing = ex.Experiment("needs", "x", "-", "v100=4", {"generator": "shockwave", "jobs": 5},
                            (ex.Arm("a", {"policy": "no_such_policy"}),), baseline="a", treatment="a")
    monkeypatch.setitem(ex.EXPERIMENTS, "tiny", tiny)
    monkeypatch.setitem(ex.EXPERIMENTS, "needs", missing)
    summary = ex.run_experiment("tiny", tmp_path, progress=False)
    df = __import__("pandas").read_csv(tmp_path / "tiny.csv")
    assert len(df) == 4 and set(df["arm"]) == {"las", "fifo"}
    r = next(x for x in summary["ratios"] if x["metric"] == "avg_jct_hours")
    b = df[df["arm"] == "fifo"]["avg_jct_hours"].mean()
    t = df[df["arm"] == "las"]["avg_jct_hours"].mean()
    assert r["ratio_of_means"] == pytest.approx(b / t)
    assert (tmp_path / "tiny.json").exists() and (tmp_path / "tiny_bars.png").exists()
    skipped = ex.run_experiment("needs", tmp_path, progress=False)
    assert skipped == {"experiment": "needs", "status": "skipped", "missing_policies": ["no_such_policy"]}
