"""The published setup runs multi-GPU jobs at their consolidated throughput, as Gavel's simulator does."""
from __future__ import annotations

import pytest


@pytest.mark.parametrize("name", ["makespan", "las_multi", "ftf"])
def test_published_setup_runs_an_8_gpu_job_at_its_consolidated_throughput(gavel, name) -> None:
    """Gavel's simulator reads ``throughputs[worker_type][(job_type, scale_factor)]`` whatever the
    placement. An 8-GPU LM job (batch size 10: 615 steps/s on 8 consolidated V100s, at most 84.5
    unconsolidated) drawn for 10 h on V100s must finish in 10 h plus a few rounds on the published
    cluster; spread over two 4-GPU servers it would take 7.3x as long (73 h)."""
    from policyopt.sim import experiments as ex
    from policyopt.sim.simulator import SimConfig, Simulator
    from policyopt.sim.traces import TraceJob

    exp = ex.scaled(ex.EXPERIMENTS[name], "published")
    rate = float(gavel.alone[gavel.type_index("LM (batch size 10)", 8), gavel.configs.index("v100")])
    hours = 10.0
    trace = [TraceJob("0", 0.0, "LM (batch size 10)#8", 8, rate * hours * 3600.0, duration_v100=hours * 3600.0),
             TraceJob("1", 0.0, "LM (batch size 10)#1", 1, 1000.0)]
    settings = {**exp.common, **exp.arms[0].config, "seed": 0, "until": "all"}
    settings.pop("window", None)
    res = Simulator(exp.cluster, SimConfig(**settings), gavel).run(trace)
    jct = res.jobs.set_index("id")["jct"]
    assert jct["0"] <= hours * 3600.0 + 3 * 360.0, jct["0"] / 3600.0


def test_one_server_per_type_offers_no_unconsolidated_throughput(gavel) -> None:
    """On a type of one server no placement spreads a job, so the policy must plan with the consolidated
    throughput it will get. ResNet-18 (batch size 256) on 2 GPUs: 15.9 steps/s on consolidated V100s,
    19.7 in the data's unconsolidated entry; the makespan LP planned 0.81 of the job's true makespan
    while it ran at the consolidated rate. Now the plan (the LP's makespan at t = 0) equals the run."""
    from policyopt.sim.simulator import SimConfig, Simulator
    from policyopt.sim.traces import TraceJob

    rate = float(gavel.alone[gavel.type_index("ResNet-18 (batch size 256)", 2), gavel.configs.index("v100")])
    hours = 10.0
    trace = [TraceJob("0", 0.0, "ResNet-18 (batch size 256)#2", 2, rate * hours * 3600.0)]
    cfg = SimConfig(policy="makespan", migration="none", gpus_per_server=8, until="all", seed=0)
    res = Simulator("v100=8,p100=8,k80=8", cfg, gavel).run(trace)
    planned = float(res.recomputes["objective"].iloc[0])
    assert planned == pytest.approx(hours * 3600.0, rel=1e-6)
    assert float(res.jobs["jct"].iloc[0]) <= planned + 2 * 360.0
    # two servers per type: a spread placement is possible, so the unconsolidated entry stays offered
    spread = Simulator("v100=8,p100=8,k80=8", SimConfig(policy="makespan", migration="none", gpus_per_server=4,
                                                          until="all", seed=0), gavel).run(trace)
    assert float(spread.recomputes["objective"].iloc[0]) < 0.85 * hours * 3600.0
