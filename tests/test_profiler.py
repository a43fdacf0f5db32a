"""Profiler: worker-type naming, plan labels, and a tiny real profile through the CLI."""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path

import pytest

from policyopt.errors import InputError, UnknownNameError
from policyopt.jobs.profiler import EXTRA_COLUMNS, PLAN_COLUMNS, cuda_worker_type_name, parse_plan


@pytest.mark.parametrize("name,expected", [("NVIDIA H100 80GB HBM3", "h100"), ("Tesla V100-SXM2-16GB", "v100"),
                                           ("NVIDIA A10G", "a10g"), ("NVIDIA H200", "h200"),
                                           ("Tesla K80", "k80"), ("NVIDIA GeForce RTX 4090", "rtx4090")])
def test_cuda_worker_type_names(name: str, expected: str) -> None:
    assert cuda_worker_type_name(name) == expected


def test_plan_labels() -> None:
    assert parse_plan("dp2-ga4-gc1") == (2, 4, True)
    for bad in ("dp0-ga1-gc0", "dp2-ga1", "tp2-ga1-gc0"):
        with pytest.raises(InputError, match="plans"):
            parse_plan(bad)


def _two_cores() -> bool:
    return len(os.sched_getaffinity(0)) >= 2


@pytest.fixture(scope="module")
def tiny_profile(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict, list[dict], list[dict], list[str]]:
    """One tiny real profile through the CLI, shared by the tests that read it: recommendation-bs128
    on cpu1, alone and paired, plus the data-parallel plan dp2-ga2-gc1 where two cores are usable
    (each profile run starts fresh worker processes that import torch: seconds each)."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from policyopt.jobs.cli import main

    plans = ["dp2-ga2-gc1"] if _two_cores() else []
    out = tmp_path_factory.mktemp("tiny") / "prof"
    assert main(["profile", "--output", str(out), "--job-types", "recommendation-bs128", "--worker-types", "cpu1",
                 "--seconds-per-run", "0.5", "--repeats", "2", "--warmup-steps", "2", "--pairs", "--plans",
                 *plans]) == 0
    table = json.loads((out / "throughputs.json").read_text())
    runs = json.loads((out / "runs.json").read_text())
    with open(out / "plan_samples.csv") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == PLAN_COLUMNS + EXTRA_COLUMNS
        rows = list(reader)
    return table, runs, rows, plans


def test_profile_argument_errors(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    from policyopt.jobs.profiler import profile

    with pytest.raises(UnknownNameError, match="job_type"):
        profile(tmp_path, job_types=["nope-bs1"])
    with pytest.raises(UnknownNameError, match="worker_types"):
        profile(tmp_path, job_types=["lstm-bs10"], worker_types=["tpu9"])
    with pytest.raises(InputError, match="seconds_per_run"):
        profile(tmp_path, seconds_per_run=0)


def test_tiny_profile_writes_a_valid_table_and_samples(tiny_profile: tuple[dict, list[dict], list[dict], list[str]]
                                                       ) -> None:
    table, runs, rows, plans = tiny_profile
    assert table["worker_types"]["cpu1"] == {"count": 1, "device": "cpu", "threads": 1,
                                             "cores": [sorted(os.sched_getaffinity(0))[0]]}
    entry = table["job_types"]["recommendation-bs128"]
    alone, noise = entry["throughputs"]["cpu1"], entry["throughputs_std"]["cpu1"]
    assert alone > 1 and 0 <= noise < alone
    (pair,) = table["colocated"]
    assert pair["job_types"] == ["recommendation-bs128"] * 2 and pair["worker_type"] == "cpu1"
    # both paired throughputs measured (how they compare with alone depends on machine load: that is
    # a measurement, reported by the profiler, not something a test can assert)
    assert all(t > 0 for t in pair["throughputs"])
    # 2 alone runs (repeats), then 2 x 2 paired; the plan's runs (if any) come after them
    assert len(runs) == 2 + 4 + 2 * len(plans) and all(r["steady_steps_per_s"] > 0 for r in runs)
    assert [r["measurement"] for r in runs[:6]] == ["alone"] * 2 + ["pair"] * 4
    assert len(rows) == 1 + len(plans)
    base = rows[0]
    assert (base["dp"], base["ga_steps"], base["gc"]) == ("1", "1", "0")
    assert float(base["iter_time"]) == pytest.approx(sum(1 / r["steady_steps_per_s"] for r in runs[:2]) / 2)
    assert 0 < float(base["fwd_time_1gpu"]) < float(base["iter_time"])
    assert base["gpus"] == "0" and base["cpus"] == "1" and int(base["params"]) > 1000


@pytest.mark.slow
def test_profile_samples_data_parallel_plans(tiny_profile: tuple[dict, list[dict], list[dict], list[str]]) -> None:
    if not _two_cores():
        pytest.skip("needs two usable cores")
    _, runs, rows, _ = tiny_profile
    assert len(runs) == 2 + 4 + 2
    assert [(r["dp"], r["ga_steps"], r["gc"], r["cpus"]) for r in rows] == [("1", "1", "0", "1"), ("2", "2", "1", "2")]
    assert float(rows[1]["bw_intra"]) > 0 and float(rows[1]["iter_time"]) > 0
    assert rows[1]["fwd_time_1gpu"] == rows[0]["fwd_time_1gpu"]  # the same one-device base


def test_profile_writes_k_worker_rows(tmp_path: Path) -> None:
    """``--plans dp2-ga1-gc0`` puts the 2-worker throughput of each worker type into throughputs.json
    (``scale_factors["2"]``): on cpu1 it is the dp2 plan sample itself, on cpu2 a run of two ranks
    of two threads each."""
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    if not _two_cores():
        pytest.skip("needs two usable cores")
    from policyopt.jobs.cli import main

    out = tmp_path / "prof"
    assert main(["profile", "--output", str(out), "--job-types", "recommendation-bs128", "--worker-types", "cpu1",
                 "cpu2", "--seconds-per-run", "0.5", "--repeats", "2", "--warmup-steps", "2",
                 "--plans", "dp2-ga1-gc0"]) == 0
    table = json.loads((out / "throughputs.json").read_text())
    runs = json.loads((out / "runs.json").read_text())
    row = table["job_types"]["recommendation-bs128"]["scale_factors"]["2"]
    assert row["plan"] == "dp2-ga1-gc0" and set(row["throughputs"]) == {"cpu1", "cpu2"}
    plan = [r["steady_steps_per_s"] for r in runs if r["measurement"] == "plan" and r["dp"] == 2]
    scale = [r for r in runs if r["measurement"] == "scale"]
    assert len(plan) == 2 and row["throughputs"]["cpu1"] == pytest.approx(sum(plan) / 2)
    assert len(scale) == 2 and all(r["dp"] == 2 and r["threads"] == 2 and r["worker_type"] == "cpu2" for r in scale)
    assert row["throughputs"]["cpu2"] == pytest.approx(sum(r["steady_steps_per_s"] for r in scale) / 2)
