"""The busy profile measures real training processes through the executor's own backend: on
``cpu1=2`` a 2-worker job's row and the one-worker row (two processes side by side, every slot
busy), then each round the simulator predicts; the table is one the executor accepts."""
from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

pytestmark = [pytest.mark.torch, pytest.mark.timeout(400)]


def test_busy_and_schedule_profile_on_two_slots(tmp_path: Path) -> None:
    from policyopt.executor import ExecutorConfig
    from policyopt.executor.busyprofile import predicted_schedule, profile_busy
    from policyopt.executor.spec import check_table, load_throughput_table, parse_jobs

    jobs = parse_jobs([{"id": "dp", "job_type": "lstm-bs10", "steps": 60, "scale_factor": 2},
                       {"id": "one", "job_type": "lstm-bs10", "steps": 40}])
    config = ExecutorConfig(cluster="cpu1=2", round_seconds=1.0)
    table = profile_busy({"cpu1": 2}, [("lstm-bs10", 2)], tmp_path, seconds_per_run=1.0, repeats=1,
                         checkpoint_interval=0.5,
                         schedule=lambda t: predicted_schedule(jobs, config, t, {"cpu1": 2}))
    assert load_throughput_table(tmp_path / "throughputs.json") == table
    check_table(table, jobs, ["cpu1"])
    entry = table["job_types"]["lstm-bs10"]
    one, two = entry["throughputs"]["cpu1"], entry["scale_factors"]["2"]["throughputs"]["cpu1"]
    assert one > 0 and two > 0
    # busy pass: the 2-worker job on both slots, then two one-worker processes side by side
    under = table["meta"]["under_load"]
    assert under["measurements"] == [["lstm-bs10#2@cpu1-0,cpu1-1"], ["lstm-bs10#1@cpu1-0", "lstm-bs10#1@cpu1-1"]]
    # schedule pass: every predicted round measured as predicted (here the jobs of the example, whole)
    assert under["schedule"] and all(s["rounds"] >= 1 for s in under["schedule"])
    assert {x for s in under["schedule"] for x in s["slots"]} <= {
        "lstm-bs10#2@cpu1-0,cpu1-1", "lstm-bs10#1@cpu1-0", "lstm-bs10#1@cpu1-1"}
    assert entry["samples"]["cpu1"] >= 1 and entry["scale_factors"]["2"]["samples"]["cpu1"] >= 1
    assert set(table["meta"]["load_average"]) == {"start", "end"}
    # every process is a sample, and each measured configuration has each job's rate in it
    samples = under["samples"]
    assert len(samples) == 3 + sum(len(s["slots"]) for s in under["schedule"] + under["completed"])
    assert all(s["rate"] > 0 and s["steps"] > 0 and s["train_seconds"] > 0 for s in samples)
    configs = {tuple(map(tuple, c["jobs"])): c for c in table["configurations"]}
    assert ("lstm-bs10", 2, "cpu1") in {m for key in configs for m in key}
    pair = configs[(("lstm-bs10", 1, "cpu1"), ("lstm-bs10", 1, "cpu1"))]
    both = [s["rate"] for s in samples if s["pass"] == "busy" and s["measurement"] == 1]
    assert pair["samples"] >= 1 and len(pair["throughputs"]) == 2 and both
