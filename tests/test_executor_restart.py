"""The executor itself is SIGKILLed mid-run; the same ``policyopt run`` command with the same
``--state`` resumes and completes: every job at exactly its step count, the orphaned workers
retired (they checkpoint), nothing lost beyond one round.

The jobs are the ``small`` example's at half their steps (about six 2-second rounds of work, so the
kill after the second round still finds most of the run ahead)."""
from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from policyopt.executor.spec import EXAMPLES

pytest.importorskip("torch")
pytest.importorskip("sklearn")

pytestmark = [pytest.mark.torch, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[1]


def _is_running(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def _max_round_steps(report: dict[str, Any], job: str) -> int:
    """The most steps ``job`` trained in one committed round; a job that finished in the round the
    executor was killed in (found done by the rerun) has no committed round: its bound is its whole
    step count, which that one round trained."""
    return max((r["jobs"][job]["steps"] for r in report["rounds"] if job in r["jobs"]),
               default=report["jobs"][job]["steps_required"])


def _rounds_committed(state: Path) -> int:
    try:
        db = sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=5)
        try:
            return int(db.execute("SELECT COUNT(*) FROM rounds").fetchone()[0])
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def _live_worker_pids(state: Path) -> list[int]:
    db = sqlite3.connect(f"file:{state}?mode=ro", uri=True, timeout=5)
    try:
        rows = db.execute("SELECT process FROM jobs WHERE process IS NOT NULL").fetchall()
    finally:
        db.close()
    return [int(json.loads(r[0])["pid"]) for r in rows if json.loads(r[0]).get("pid")]


@pytest.mark.slow
def test_executor_killed_and_resumed_with_the_same_state(tmp_path: Path) -> None:
    state, out = tmp_path / "state.sqlite", tmp_path / "out"
    (tmp_path / "jobs.json").write_text(json.dumps([dict(j, steps=j["steps"] // 2) for j in EXAMPLES["small"]]))
    cmd = [sys.executable, "-m", "policyopt.executor.cli", "run", "--jobs", str(tmp_path / "jobs.json"),
           "--cluster", "cpu1=1,cpu2=1",
           "--policy", "max_min_fairness", "--round-seconds", "2", "--state", str(state), "--output", str(out),
           "--no-live", "--no-fidelity"]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "first.log", "wb") as log:
        first = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.time() + 240
        # two rounds: with a well-used cluster the small example may finish in three
        while _rounds_committed(state) < 2 and first.poll() is None and time.time() < deadline:
            time.sleep(0.2)
        assert first.poll() is None, (tmp_path / "first.log").read_text()[-2000:]
        time.sleep(0.7)  # mid-round
        orphans = _live_worker_pids(state)
        killed_round = _rounds_committed(state)
        first.send_signal(signal.SIGKILL)
        first.wait()
    # workers that were running at the kill outlive the executor (none if it died between leases)
    orphans = [p for p in orphans if _is_running(p)]
    second = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=400)
    assert second.returncode == 0, second.stdout.decode()[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["summary"]["executor_starts"] == 2
    for jid, job in report["jobs"].items():
        assert job["status"] == "completed" and job["steps_done"] == job["steps_required"], (jid, job)
        assert job["checkpoint_step"] == job["steps_required"]
        assert job["final_loss"] < job["initial_loss"]
        assert job["steps_lost"] <= _max_round_steps(report, jid), (jid, job["steps_lost"])
    assert not any(_is_running(p) for p in orphans)  # retired by the second executor
    if orphans:
        db = sqlite3.connect(str(state))
        retired = db.execute("SELECT COUNT(*) FROM events WHERE kind = 'retired'").fetchone()[0]
        db.close()
        assert retired >= 1
    print(f"\nexecutor killed after round {killed_round}; resumed: " + ", ".join(
        f"{j}: lost {v['steps_lost']} steps (max {_max_round_steps(report, j)} per round)"
        for j, v in report["jobs"].items()), file=sys.stderr)
