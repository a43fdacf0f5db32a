"""The worker process: a lease then a resume, corrupt-checkpoint fallback, SIGTERM, lease-file
renewal, bad arguments (data parallelism: test_jobs_dp.py)."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from policyopt.jobs import CheckpointStore, Lease  # noqa: E402
from policyopt.jobs.checkpoint import read_checkpoint  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    return env


def _worker(tmp: Path, *extra: str, job_type: str = "recommendation-bs128", job_id: str = "j") -> list[str]:
    return [sys.executable, "-m", "policyopt.jobs.worker", "--job-type", job_type, "--job-id", job_id,
            "--checkpoint-dir", str(tmp / f"ckpt-{job_id}"), "--progress-file", str(tmp / f"{job_id}.json"),
            "--threads", "1", *extra]


def _run(cmd: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=_env())


def _progress(tmp: Path, job_id: str = "j") -> dict:
    return json.loads((tmp / f"{job_id}.json").read_text())


def _wait_for(predicate, timeout: float = 60.0) -> None:
    t0 = time.time()
    while not predicate():
        assert time.time() - t0 < timeout, "timed out"
        time.sleep(0.05)


def test_lease_checkpoint_resume_and_corrupt_fallback(tmp_path: Path) -> None:
    first = _run(_worker(tmp_path, "--steps-total", "12", "--lease-steps", "5", "--lease-seconds", "60"))
    assert first.returncode == 0, first.stderr
    rec1 = _progress(tmp_path)
    assert rec1["status"] == "lease_ended" and rec1["steps_done"] == 5 and rec1["steps_per_s"] > 0
    assert rec1["checkpoint"].endswith("ckpt-000000000005.pt")
    from policyopt.jobs.worker import main  # the middle lease in-process (same code, one process less)

    assert main(_worker(tmp_path, "--steps-total", "12", "--lease-steps", "3")[3:]) == 0
    assert _progress(tmp_path)["steps_done"] == 8
    newest = CheckpointStore(tmp_path / "ckpt-j").path_for(8)
    newest.write_bytes(newest.read_bytes()[:-7])  # a torn write the verification must catch
    third = _run(_worker(tmp_path, "--steps-total", "12", "--lease-seconds", "60"))
    assert third.returncode == 0, third.stderr
    rec3 = _progress(tmp_path)
    assert rec3["status"] == "completed" and rec3["steps_done"] == 12
    assert rec3["session_start_step"] == 5 and rec3["resumed_from"].endswith("ckpt-000000000005.pt")
    assert rec3["corrupt_checkpoints"][0]["path"].endswith("ckpt-000000000008.pt")
    assert rec3["first_loss"] == rec1["first_loss"]  # the job's loss history survives
    assert rec3["final_loss"] < rec3["initial_loss"]
    assert [s for s, _ in CheckpointStore(tmp_path / "ckpt-j").list()] == [12, 5]


def test_sigterm_stops_at_a_step_boundary_and_checkpoints(tmp_path: Path) -> None:
    proc = subprocess.Popen(_worker(tmp_path, "--steps-total", "100000", "--lease-seconds", "120"),
                            env=_env(), stderr=subprocess.PIPE)
    progress = tmp_path / "j.json"
    _wait_for(lambda: progress.exists() and _progress(tmp_path)["steps_done"] >= 3)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    rec = _progress(tmp_path)
    assert rec["status"] == "stopped" and rec["checkpoint"] is not None
    assert read_checkpoint(rec["checkpoint"])["step"] == rec["steps_done"] >= 3


def test_keep_workers_lease_file_renewal_in_one_process(tmp_path: Path) -> None:
    lease_file = tmp_path / "lease.json"
    Lease(deadline=time.time() + 120, steps_limit=4, keep_workers=True, lease_id=1).write(lease_file)
    proc = subprocess.Popen(_worker(tmp_path, "--steps-total", "100", "--lease-file", str(lease_file),
                                    "--keep-workers", "--renewal-wait", "60"), env=_env(), stderr=subprocess.PIPE)
    progress = tmp_path / "j.json"
    _wait_for(lambda: progress.exists() and _progress(tmp_path)["status"] == "waiting")
    assert _progress(tmp_path)["steps_done"] == 4
    assert not CheckpointStore(tmp_path / "ckpt-j").list()  # kept its workers: nothing saved yet
    Lease(deadline=time.time() + 120, steps_limit=3, keep_workers=False, lease_id=2).write(lease_file)
    assert proc.wait(timeout=60) == 0
    rec = _progress(tmp_path)
    assert rec["status"] == "lease_ended" and rec["steps_done"] == 7 and rec["leases_in_session"] == 2
    assert rec["pid"] == proc.pid and [s for s, _ in CheckpointStore(tmp_path / "ckpt-j").list()] == [7]


def test_bad_arguments_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policyopt.jobs.worker import main

    assert main(_worker(tmp_path, job_type="resnet-bs7")[3:]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "job_type" in err and "resnet-bs32" in err
    assert main(_worker(tmp_path, "--dp", "0")[3:]) == 2
    assert "dp" in capsys.readouterr().err


def test_worker_command_and_progress_reader(tmp_path: Path) -> None:
    from policyopt.errors import InputError
    from policyopt.jobs.worker import build_parser, read_progress, worker_command

    cmd = worker_command("lstm-bs20", "j", tmp_path / "ck", tmp_path / "p.json", steps_total=300,
                         keep_workers=True, gc=False, cpu_affinity=[0, 1])
    args = build_parser().parse_args(cmd[3:])
    assert (args.job_type, args.steps_total, args.keep_workers, args.gc, args.cpu_affinity) == \
        ("lstm-bs20", 300, True, False, [0, 1])
    with pytest.raises(InputError, match="options.bogus"):
        worker_command("lstm-bs20", "j", "ck", "p.json", bogus=1)
    assert read_progress(tmp_path / "missing.json") is None
