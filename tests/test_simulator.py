"""Trace-driven simulator: hand-computed JCTs, conservation, causality, determinism, CLI round trip."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace

import numpy as np
import pytest

from policyopt import InputError, UnknownNameError
from policyopt.sim.simulator import SimConfig, parse_cluster, simulate
from policyopt.sim.traces import TraceJob, gavel_trace

RESNET = ("ResNet-18 (batch size 16)", 1)
REC = ("Recommendation (batch size 1024)", 1)


def thr(gavel, model_sf, config="v100") -> float:
    return float(gavel.alone[gavel.type_index(*model_sf), gavel.configs.index(config)])


def job(jid: str, model_sf, steps: float, arrival: float = 0.0, **kw) -> TraceJob:
    return TraceJob(jid, arrival, f"{model_sf[0]}#{model_sf[1]}", model_sf[1], steps, **kw)


def test_las_two_jobs_one_gpu_by_hand(gavel) -> None:
    """LAS alternates A, B, A, B on one GPU; restore 10 s on a first start, checkpoint+restore 30 s
    on a resume; a job finishing mid-round keeps the GPU until the round ends.

    Round [0,360): A starts (10 s) and computes 350 s, 250 s left.  Round [360,720): B starts, 350 s
    done, 150 s left.  Round [720,1080): A resumes (30 s) and finishes at 720+30+250 = 1000.
    Round [1080,1440): B resumes (30 s) and finishes at 1080+30+150 = 1260.
    """
    r = thr(gavel, RESNET)
    trace = [job("A", RESNET, r * 600.0), job("B", RESNET, r * 500.0)]
    res = simulate(trace, "v100=1", table=gavel, policy="las", checkpoint_seconds=20.0, restore_seconds=10.0,
                   round_seconds=360.0, seed=0)
    jct = dict(zip(res.jobs["id"], res.jobs["jct"]))
    assert jct["A"] == pytest.approx(1000.0, abs=1e-6)
    assert jct["B"] == pytest.approx(1260.0, abs=1e-6)
    assert res.metrics["makespan"] == pytest.approx(1260.0, abs=1e-6)
    assert res.jobs.set_index("id").loc["A", "preemptions"] == 1
    # utilization: 4 rounds of 360 s on 1 GPU; A holds the GPU 30+250 s of round 3, B 30+150 s of round 4
    assert res.metrics["utilization"] == pytest.approx((360 + 360 + 280 + 180) / 1440.0)


def test_fifo_lp_policy_recomputes_after_completion(gavel) -> None:
    """The LP ``fifo`` policy gives the GPU to A (arrived first); B waits for the recompute at the
    round after A's completion: A finishes at 1000 s, B runs from 1080 s for 500 s (no overheads).
    C arrives at 100 s mid-round and is only considered from the next round on."""
    r = thr(gavel, RESNET)
    trace = [job("A", RESNET, r * 1000.0), job("B", RESNET, r * 500.0, arrival=1.0),
             job("C", RESNET, r * 100.0, arrival=100.0)]
    res = simulate(trace, "v100=1", table=gavel, policy="fifo", checkpoint_seconds=0.0, restore_seconds=0.0,
                   seed=0)
    j = res.jobs.set_index("id")
    assert j.loc["A", "finish"] == pytest.approx(1000.0)
    assert j.loc["B", "finish"] == pytest.approx(1580.0)
    assert j.loc["C", "finish"] == pytest.approx(1800.0 + 100.0)  # C starts at 1800 (B frees at 1800)
    assert (res.recomputes["time"] <= 1800.0 + 1e-9).all() and len(res.recomputes) >= 3


def test_packing_runs_at_colocated_throughput(gavel) -> None:
    """Two jobs packed on one GPU progress at the measured paired throughputs: B finishes at
    10 + 200 s, A at 10 + 300 s (restore 10 s each)."""
    ia, ib = gavel.type_index(*RESNET), gavel.type_index(*REC)
    v = gavel.configs.index("v100")
    pa, pb = gavel.paired[ia, ib, v]
    assert pa > 0 and pb > 0 and pa / thr(gavel, RESNET) + pb / thr(gavel, REC) > 1
    trace = [job("A", RESNET, pa * 300.0), job("B", REC, pb * 200.0)]
    res = simulate(trace, "v100=1", table=gavel, policy="las", packing=True, restore_seconds=10.0, seed=0,
                   record_runs=True)
    j = res.jobs.set_index("id")
    assert j.loc["A", "jct"] == pytest.approx(310.0)
    assert j.loc["B", "jct"] == pytest.approx(210.0)
    assert set(res.runs["partner"]) == {"A", "B"}


def test_spread_job_runs_at_unconsolidated_throughput(gavel) -> None:
    """A 4-GPU job on two 2-GPU servers is spread: it runs at ``v100_unconsolidated`` speed."""
    m = ("ResNet-18 (batch size 16)", 4)
    unc = thr(gavel, m, "v100_unconsolidated")
    assert unc > 0 and unc != thr(gavel, m)
    trace = [job("A", m, unc * 1000.0)]
    res = simulate(trace, "v100=4", table=gavel, policy="las", gpus_per_server=2, restore_seconds=5.0, seed=0,
                   record_runs=True)
    assert res.jobs["jct"].iloc[0] == pytest.approx(1005.0)
    assert res.runs["spread"].all()
    consolidated = simulate(trace, "v100=4", table=gavel, policy="las", gpus_per_server=4, restore_seconds=5.0,
                            seed=0)
    assert consolidated.jobs["jct"].iloc[0] == pytest.approx(5.0 + unc * 1000.0 / thr(gavel, m))


@pytest.fixture(scope="module")
def busy_trace(gavel):
    """40 multi-GPU jobs at 12 jobs/hour, durations divided by 10 (fewer rounds: a fast test)."""
    trace = gavel_trace(gavel, 40, 12.0, seed=5, multi_gpu=True)
    return [replace(j, steps=float(np.ceil(j.steps / 10))) for j in trace]


@pytest.mark.parametrize("policy,kw", [
    ("max_min_fairness", {"failure_mtbf_hours": 10.0, "repair_seconds": 1800.0}),
    ("las", {"packing": True, "migration": "simple"}),
])
def test_conservation_and_causality(gavel, busy_trace, policy, kw) -> None:
    res = simulate(busy_trace, "v100=8,p100=8,k80=8", table=gavel, policy=policy, seed=3, record_runs=True,
                   gpus_per_server=4, **kw)
    jobs = res.jobs.set_index("id")
    assert res.metrics["completed"] == len(busy_trace)
    # steps done = steps required, and also = Σ over rounds of realized throughput × compute time
    assert np.allclose(jobs["steps_done"], jobs["steps"], rtol=1e-9)
    runs = res.runs
    per_job = (runs["throughput"] * runs["compute_seconds"]).groupby(runs["job"]).sum()
    assert np.allclose(per_job.loc[jobs.index], jobs["steps"], rtol=1e-6)
    # no job runs before it arrives; JCT ≥ its best possible duration
    arrival = runs["job"].map(jobs["arrival"])
    assert (runs["round_start"] >= arrival - 1e-9).all()
    assert (jobs["first_start"] >= jobs["arrival"]).all()
    assert (runs["compute_seconds"] + runs["overhead_seconds"] <= 360.0 + 1e-6).all()
    # GPUs per round never exceed the cluster, counting a pair once
    held = runs.drop_duplicates(["round_start", "gpus"]).groupby(["round_start", "worker_type"])["num_gpus"].sum()
    assert (held <= 8).all()
    if "failure_mtbf_hours" in kw:
        assert res.metrics["worker_failures"] > 0
        per_round = runs.drop_duplicates(["round_start", "gpus"]).groupby("round_start")["num_gpus"].sum()
        avail = res.rounds.set_index("start")["available_gpus"]
        assert (per_round <= avail.loc[per_round.index]).all()
        assert (avail < 24).any()


def test_deterministic_for_a_seed(gavel, busy_trace) -> None:
    kw = dict(table=gavel, policy="max_min_fairness", failure_mtbf_hours=5.0, gpus_per_server=4)
    trace = busy_trace[:16]
    a = simulate(trace, "v100=8,p100=8,k80=8", seed=1, **kw)
    b = simulate(trace, "v100=8,p100=8,k80=8", seed=1, **kw)
    c = simulate(trace, "v100=8,p100=8,k80=8", seed=2, **kw)
    cols = ["finish", "migrations", "preemptions", "cost"]
    assert a.jobs[cols].equals(b.jobs[cols])
    assert not a.jobs["finish"].equals(c.jobs["finish"])  # failures drawn from the seed


def test_metrics_fields_and_window(gavel, busy_trace) -> None:
    res = simulate(busy_trace, "v100=8,p100=8,k80=8", table=gavel, policy="las", seed=0, window=(0.25, 0.75))
    m = res.metrics
    w = m["steady_state_window"]
    assert (w["first"], w["last"], w["count"]) == (10, 29, 20)
    jct = res.jobs["jct"].to_numpy()
    assert m["avg_jct"] == pytest.approx(jct[10:30].mean())
    assert m["p99_jct"] == pytest.approx(np.percentile(jct[10:30], 99))
    assert 0 < m["utilization"] <= 1 and m["useful_utilization"] <= m["utilization"]
    rho = res.jobs["rho"]
    assert (rho > 0).all()


def test_bad_inputs(gavel, busy_trace) -> None:
    with pytest.raises(UnknownNameError):
        simulate(busy_trace, "v100=4", table=gavel, policy="no_such_policy")
    with pytest.raises(InputError) as e:
        parse_cluster("v100=four")
    assert e.value.field == "cluster.v100"
    with pytest.raises(InputError) as e:  # an 8-GPU job cannot fit on 4 GPUs
        simulate([job("A", ("ResNet-18 (batch size 16)", 8), 100.0)], "v100=4", table=gavel, policy="las")
    assert e.value.field == "trace[A]"
    with pytest.raises(InputError):
        SimConfig(round_seconds=0)
    with pytest.raises(InputError):
        simulate(busy_trace, "v100=4", table=gavel, policy="las", space_sharing=True)


def test_cli_round_trip(gavel_dir, tmp_path) -> None:
    from policyopt.sim.cli import add_subparser

    parser = argparse.ArgumentParser()
    add_subparser(parser.add_subparsers())
    out = tmp_path / "run"
    args = parser.parse_args(["simulate", "--policy", "max_min_fairness", "--cluster", "v100=8,p100=8,k80=8",
                              "--generator", "gavel", "--jobs", "12", "--rate", "6", "--multi-gpu",
                              "--seed", "4", "--output", str(out),
                              "--throughputs", str(gavel_dir / "simulation_throughputs.json")])
    assert args.func(args) == 0
    m = json.loads((out / "metrics.json").read_text())
    for key in ("avg_jct", "p99_jct", "makespan", "migrations", "utilization", "num_jobs", "steady_state_window"):
        assert key in m
    assert m["num_jobs"] == 12 and m["completed"] == 12
    assert (out / "jobs.csv").exists() and (out / "jct_cdf.png").stat().st_size > 1000
    # the written trace replays to the same metrics
    args2 = parser.parse_args(["simulate", "--policy", "max_min_fairness", "--cluster", "v100=8,p100=8,k80=8",
                               "--trace", str(out / "trace.csv"), "--seed", "4", "--output", str(tmp_path / "r2"),
                               "--no-figures", "--throughputs", str(gavel_dir / "simulation_throughputs.json")])
    assert args2.func(args2) == 0
    m2 = json.loads((tmp_path / "r2" / "metrics.json").read_text())
    assert m2["avg_jct"] == pytest.approx(m["avg_jct"])
