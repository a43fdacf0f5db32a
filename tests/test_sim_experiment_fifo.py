"""``fifo`` (heterogeneity-agnostic FIFO vs aware FIFO, with and without space sharing, on the
continuous-single trace) and the published-scale forms of ``fifo`` and ``cost``."""
from __future__ import annotations

import json
from dataclasses import replace

import pandas as pd
import pytest


def test_fifo_arms_are_the_figures_and_its_published_setup_is_las_singles() -> None:
    """The arms are the figure's three (agnostic FIFO, aware FIFO, aware FIFO with space sharing), and
    the published setup is the LAS single-GPU one: same cluster, trace, window, semantics and sweep."""
    from policyopt.sim import experiments as ex

    exp = ex.EXPERIMENTS["fifo"]
    assert not ex.missing_policies(exp)
    arms = {a.label: a.config for a in exp.arms}
    assert arms["agnostic"] == {"policy": "fifo_agnostic"}
    assert arms["aware"] == {"policy": "fifo"}
    assert arms["aware+ss"]["policy"] == "fifo" and arms["aware+ss"]["space_sharing"] is True
    assert exp.comparisons() == [("agnostic", "aware"), ("agnostic", "aware+ss"), ("aware", "aware+ss")]
    pub = ex.scaled(exp, "published", keep_arriving=True)
    las = ex.scaled(ex.EXPERIMENTS["las_single"], "published", keep_arriving=True)
    assert pub.cluster == las.cluster == "v100=36,p100=36,k80=36"
    assert pub.trace == las.trace and pub.trace["jobs"] == 6000 and pub.trace["multi_gpu"] is False
    assert pub.common == las.common and pub.common["recompute_interval"] == 1920.0
    assert pub.rates == las.rates and pub.rates[0] == 0.4 and pub.rates[-1] == 6.0 and len(pub.rates) == 15
    assert pub.seeds == (0, 1, 2)


def test_fifo_published_small_form_runs_every_arm_and_writes_its_files(gavel_dir, tmp_path, monkeypatch) -> None:
    """Small form of ``fifo --scale published --keep-arriving`` (20 jobs at 6 jobs/h, one chunk of
    continued arrivals): one row per arm, the three ratios, files ``fifo_published_arriving.*``."""
    from policyopt.sim import experiment_runner
    from policyopt.sim import experiments as ex

    monkeypatch.setattr(experiment_runner, "KEEP_ARRIVING_MAX_CHUNKS", 1)
    args = ["fifo", "--scale", "published", "--jobs", "20", "--rates", "6", "--seeds", "0", "--keep-arriving"]
    assert ex.main([*args, "--output", str(tmp_path)]) == 0
    df = pd.read_csv(tmp_path / "fifo_published_arriving.csv")
    assert list(df["arm"]) == ["aware", "aware+ss", "agnostic"]
    assert list(df["policy"]) == ["fifo", "fifo", "fifo_agnostic"]
    assert (df["num_jobs"] == 20 * (1 + ex.KEEP_ARRIVING_EXTRA)).all()
    assert df["avg_jct_hours"].notna().all() and (df["avg_jct_hours"] > 0).all()
    summary = json.loads((tmp_path / "fifo_published_arriving.json").read_text())
    assert summary["command"] == (f"python -m policyopt.sim.experiments fifo --output {tmp_path} --seeds 0 "
                                  "--scale published --jobs 20 --rates 6.0 --keep-arriving")
    pairs = {(r["baseline"], r["treatment"]) for r in summary["ratios"] if r["metric"] == "avg_jct_hours"}
    assert pairs == {("agnostic", "aware"), ("agnostic", "aware+ss"), ("aware", "aware+ss")}
    base = df.set_index("arm")["avg_jct_hours"]
    r = next(x for x in summary["ratios"] if x["metric"] == "avg_jct_hours" and x["treatment"] == "aware")
    assert r["ratio_of_means"] == pytest.approx(base["agnostic"] / base["aware"])
    assert (tmp_path / "fifo_published_arriving_bars.png").exists()


def test_fifo_space_sharing_arm_runs_job_pairs(gavel) -> None:
    """The ``aware+ss`` arm's configuration, on a contended cluster (3 GPUs, 12 jobs at once), runs
    jobs in pairs on one GPU; the ``aware`` arm's never does."""
    from policyopt.sim import experiments as ex
    from policyopt.sim.simulator import SimConfig, Simulator

    exp = ex.scaled(ex.EXPERIMENTS["fifo"], "published", jobs=12, rates=[6.0])
    exp = replace(exp, cluster="v100=1,p100=1,k80=1")
    trace = ex._make_trace(exp, 0, 6.0, gavel)
    trace = [replace(j, arrival=0.0) for j in trace]  # all at once: a queue to pair from
    arms = {a.label: a.config for a in exp.arms}
    partners = {}
    for label in ("aware", "aware+ss"):
        cfg = {**exp.common, **arms[label], "seed": 0, "record_runs": True, "until": "all",
               "gpus_per_server": 1}
        res = Simulator(exp.cluster, SimConfig(**cfg), gavel).run(trace)
        assert res.metrics["completed"] == 12
        partners[label] = int(res.runs["partner"].notna().sum())
    assert partners["aware"] == 0 and partners["aware+ss"] > 0


def test_cost_published_setup() -> None:
    """``cost --scale published``: the published cluster and simulator semantics, the small trace scaled
    with the cluster (3x the GPUs, jobs and rate), the SLO draw and arms unchanged."""
    from policyopt.sim import experiments as ex

    small = ex.EXPERIMENTS["cost"]
    pub = ex.scaled(small, "published")
    assert pub.cluster == "v100=36,p100=36,k80=36"
    assert pub.trace["jobs"] == 3 * small.trace["jobs"] and pub.rates == (3 * small.rates[0],)
    assert pub.trace["slo_factors"] == (1.2, 2.0, 10.0)
    assert pub.common["recompute_interval"] == 1920.0 and pub.common["gpus_per_server"] == 36
    assert [a.label for a in pub.arms] == [a.label for a in small.arms]
