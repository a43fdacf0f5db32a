"""Fault tolerance of the executor with real training processes.

* a worker process frozen (SIGSTOP), its newest checkpoint corrupted, then killed (SIGKILL)
  mid-round is restarted; it resumes from the previous checkpoint, losing less than one round of steps;
* a job whose process crashes every time is marked failed with its error after ``max_restarts``
  restarts, and the other jobs carry on.

Killing the executor itself: ``tests/test_executor_restart.py``.
"""
from __future__ import annotations

import os
import signal
import sys
import threading
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

from policyopt.executor.backends import Launch, LocalProcessBackend, ProcessHandle, process_start_ticks  # noqa: E402
from policyopt.executor.executor import Executor, ExecutorConfig  # noqa: E402
from policyopt.executor.spec import example_throughputs_path, load_throughput_table, parse_jobs  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.timeout(600)]


class CrashingBackend(LocalProcessBackend):
    """Starts job ``bad``'s worker pinned to a core that does not exist: the real worker process
    exits with status 2 ("cannot pin to these cores") every time."""

    def start(self, launch: Launch) -> ProcessHandle:
        if launch.job_id == "bad":
            launch = replace(launch, cpu_affinity=(4096,))
        return super().start(launch)


def _step(path: Path) -> int:
    return int(path.name[len("ckpt-"):len("ckpt-") + 12])


def _checkpoints(directory: Path) -> list[Path]:
    return sorted(directory.glob("ckpt-*.pt"))


def _max_round_steps(report: dict[str, Any], job: str) -> int:
    return max(r["jobs"][job]["steps"] for r in report["rounds"] if job in r["jobs"])


def test_killed_worker_with_corrupt_checkpoint_and_a_job_that_keeps_crashing(tmp_path: Path) -> None:
    # job a runs about 190 steps a round on one core of the development machine: 600 steps keep it
    # running for several rounds, so the killer below finds it mid-run even on a fast or idle machine
    a_steps = 400
    jobs = parse_jobs([{"id": "a", "job_type": "lstm-bs10", "steps": a_steps, "seed": 1},
                       {"id": "b", "job_type": "resnet-bs32", "steps": 160},
                       {"id": "bad", "job_type": "recommendation-bs128", "steps": 300}])
    round_s = 2.0
    config = ExecutorConfig(cluster="cpu1=1,cpu2=1", policy="max_min_fairness", round_seconds=round_s,
                            checkpoint_interval=round_s / 3, max_restarts=2)
    run_dir = tmp_path / "run"
    executor = Executor(tmp_path / "state.sqlite", jobs, config, load_throughput_table(example_throughputs_path()),
                        run_dir, backend=CrashingBackend(run_dir / "backend", warm_job_types=[j.job_type for j in jobs],
                                                         warm_threads=[1, 2]))
    seen: dict[str, Any] = {}

    def kill_a_mid_round() -> None:
        ckpt_dir = run_dir / "jobs" / "a" / "checkpoints"
        deadline = time.time() + 300
        while time.time() < deadline and "killed" not in seen:
            time.sleep(0.05)
            track = executor.tracks.get("a")
            if track is None or not _ready(_checkpoints(ckpt_dir)):
                continue
            pid = track.handle.pid
            # freeze the worker first: between looking at its checkpoints and killing it, it must not
            # write a newer one (which would prune the one about to be corrupted) or exit on its own
            try:
                os.kill(pid, signal.SIGSTOP)
            except ProcessLookupError:
                continue
            files = _checkpoints(ckpt_dir)
            if not (_wait_stopped(pid) and _ready(files)):
                os.kill(pid, signal.SIGCONT)
                continue
            newest, previous = files[-1], files[-2]
            raw = bytearray(newest.read_bytes())
            raw[len(raw) // 2] ^= 0xFF                     # flip a byte of the payload
            newest.write_bytes(bytes(raw))
            try:
                os.kill(pid, signal.SIGKILL)               # mid-round: no checkpoint on the way out
            except ProcessLookupError:                     # reaped meanwhile: try the next process
                continue
            seen.update(killed=pid, newest=newest, previous=previous, steps_seen=executor.jobs["a"].steps_done)

    def _ready(files: list[Path]) -> bool:
        # two checkpoints, and the executor has seen the newest one's step (so the loss is visible to it)
        return len(files) >= 2 and executor.jobs["a"].steps_done >= _step(files[-1]) > 0

    killer = threading.Thread(target=kill_a_mid_round, daemon=True)
    killer.start()
    report = executor.run()
    killer.join(timeout=5)
    assert "killed" in seen, "the job process was never killed"
    jobs_out = report["jobs"]
    a, b, bad = jobs_out["a"], jobs_out["b"], jobs_out["bad"]
    # the killed job: restarted from its checkpoint, completed at exactly its step count
    assert a["status"] == "completed" and a["steps_done"] == a_steps and a["checkpoint_step"] == a_steps
    assert a["restarts"] >= 1 and a["crashes"] >= 1
    assert a["final_loss"] < a["initial_loss"]
    corrupt = [c["path"] for c in a["corrupt_checkpoints"]]
    assert str(seen["newest"]) in corrupt                             # verification caught it
    assert Path(str(seen["newest"]) + ".corrupt").exists()            # quarantined
    resumed = [e["detail"] for e in executor.state.events("resumed") if e["job_id"] == "a"]
    after_kill = [r for r in resumed if r["checkpoint"] == str(seen["previous"])]
    assert after_kill and after_kill[0]["step"] == _step(seen["previous"])  # fell back one checkpoint, no further
    assert 0 < a["steps_lost"] <= _max_round_steps(report, "a")       # less than one round of steps lost
    print(f"\nkilled worker of a at >= {seen['steps_seen']} steps with ckpt {_step(seen['newest'])} corrupt: resumed "
          f"at {_step(seen['previous'])}, {a['steps_lost']} steps lost "
          f"(a round: up to {_max_round_steps(report, 'a')}); "
          f"bad failed after {bad['crashes']} crashes: {bad['error'][:80]}", file=sys.stderr)
    # the job that keeps crashing: failed with its error after max_restarts restarts; the others finished
    assert bad["status"] == "failed" and bad["crashes"] == config.max_restarts + 1
    assert bad["restarts"] == config.max_restarts
    assert "pin" in (bad["error"] or ""), bad["error"]
    assert b["status"] == "completed" and b["steps_done"] == 160 and b["final_loss"] < b["initial_loss"]
    assert report["summary"]["failed"] == 1 and report["summary"]["completed"] == 2
    assert process_start_ticks(seen["killed"]) is None or not _is_running(seen["killed"])


def _state(pid: int) -> str | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


def _wait_stopped(pid: int, timeout: float = 5.0) -> bool:
    """True once ``pid`` is stopped by a signal (state T); False when it exited or never stopped."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        state = _state(pid)
        if state in (None, "Z", "X"):
            return False
        if state in ("T", "t"):
            return True
        time.sleep(0.01)
    return False


def _is_running(pid: int) -> bool:
    return _state(pid) not in (None, "Z", "X")
