"""Data-parallel jobs in the executor (local backend): ``--example multi`` on ``cpu1=2,cpu2=2``:
two 2-worker jobs (two ranks each, one per slot, gloo) and two 1-worker jobs finish at exactly
their step counts with a falling loss; a 2-worker job always holds two slots of one type."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

pytestmark = [pytest.mark.torch, pytest.mark.timeout(600)]


def test_multi_example_runs_data_parallel_jobs_whole(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policyopt.executor.cli import main

    t0 = time.time()
    code = main(["run", "--example", "multi", "--cluster", "cpu1=2,cpu2=2", "--policy", "max_min_fairness",
                 "--round-seconds", "3", "--state", str(tmp_path / "s.sqlite"), "--output", str(tmp_path / "out"),
                 "--no-live"])
    assert code == 0, capsys.readouterr().err[-3000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert report["status"] == "finished"
    scale = {jid: j["scale_factor"] for jid, j in report["jobs"].items()}
    assert sorted(scale.values()) == [1, 1, 2, 2]
    for jid, job in report["jobs"].items():
        assert job["status"] == "completed", (jid, job)
        assert job["steps_done"] == job["steps_required"] == job["checkpoint_step"], jid
        assert job["final_loss"] < job["initial_loss"], jid
        assert sum(job["steps_by_type"].values()) == job["steps_required"], jid
    for r in report["rounds"]:
        for jid, v in r["jobs"].items():
            assert len(v["workers"]) == scale[jid], (r["index"], jid, v)   # all K workers or none
            assert len({w.rsplit("-", 1)[0] for w in v["workers"]}) == 1   # of one worker type
        held = [w for v in r["jobs"].values() for w in v["workers"]]
        # a job that completed (on its last step, maybe just after a deadline) holds no slot in a later round
        assert all(r["start"] < report["jobs"][jid]["finish"] for jid in r["jobs"]), r
        assert len(held) == len(set(held))                                 # no slot holds two jobs
    ran_dp = [v for r in report["rounds"] for jid, v in r["jobs"].items() if scale[jid] == 2]
    assert ran_dp and all(v["nodes"] == ["local", "local"] and not v["spread"] for v in ran_dp)
    # every launch of a 2-worker job started two ranks with a rendezvous of its own
    from policyopt.executor.state import ExecutorState

    launches = [e for e in ExecutorState(tmp_path / "s.sqlite").events("launch") if scale[e["job_id"]] == 2]
    assert launches and all(len(e["detail"]["pids"]) == 2 and e["detail"]["rendezvous"][1] > 0 for e in launches)
    assert report["slot_events"] == [] and report["gpus_per_server"] == {"cpu1": 2, "cpu2": 2}
    fid = report["fidelity"]
    assert fid["available"], fid
    # the round model needs one launch that trained a whole round; on a fast machine every fresh launch may
    # be of a job that finished inside its round, and the documented fallback is the nominal model
    from policyopt.executor.fidelity import round_model

    if round_model(report)["restore_seconds"] is not None:
        assert fid["model"] == "rounds" and fid["rate_scale"] == pytest.approx(3.0 / fid["round_seconds"])
    else:
        assert fid["model"] == "nominal" and fid["rate_scale"] == 1.0 and fid["round_seconds"] == 3.0
    assert fid["nominal_model"]["makespan"]["measured"] == report["summary"]["makespan"]
    print(f"\nmulti example: wall {time.time() - t0:.1f} s, makespan {report['summary']['makespan']:.1f} s; "
          f"simulated {fid['makespan']['simulated']:.1f} s ({fid['makespan']['difference_pct']:+.1f} %), with "
          f"measured throughputs {fid['with_measured_throughputs']['makespan']['difference_pct']:+.1f} %",
          file=sys.stderr)
