"""Data parallelism across worker processes (gloo) with GA and GC trains the same model as one process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from policyopt.jobs import ExecutionPlan, build_job  # noqa: E402
from policyopt.jobs.checkpoint import read_checkpoint  # noqa: E402
from policyopt.jobs.plans import DistContext, train_step  # noqa: E402

pytestmark = pytest.mark.torch
ROOT = Path(__file__).resolve().parents[1]


def test_dp2_gloo_with_ga_and_gc_matches_a_single_process(tmp_path: Path) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    cmd = [sys.executable, "-m", "policyopt.jobs.worker", "--job-type", "resnet-bs32", "--job-id", "dp2",
           "--checkpoint-dir", str(tmp_path / "ckpt"), "--progress-file", str(tmp_path / "p.json"),
           "--steps-total", "6", "--lease-seconds", "120", "--threads", "1", "--dp", "2", "--ga", "2", "--gc",
           "--loss-log", str(tmp_path / "loss.txt")]
    worker = subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True)
    # reference while the worker starts: the same job (seed 0), one process, plan dp1-ga1-gc0
    torch.manual_seed(0)
    job = build_job("resnet-bs32", seed=0)
    reference = [train_step(job, job.model, next(job.stream), ExecutionPlan(), DistContext())[0] for _ in range(6)]
    _, stderr = worker.communicate(timeout=120)
    assert worker.returncode == 0, stderr
    losses = [float(line.split()[1]) for line in (tmp_path / "loss.txt").read_text().splitlines()]
    assert len(losses) == 6 and losses == pytest.approx(reference, rel=1e-4)
    payload = read_checkpoint(tmp_path / "ckpt" / "ckpt-000000000006.pt")
    assert payload["step"] == 6
    for key, value in job.model.state_dict().items():
        torch.testing.assert_close(payload["model"][key], value, rtol=1e-3, atol=2e-4)


def test_separately_started_ranks_resume_together_and_match_one_process(tmp_path: Path) -> None:
    """Ranks started one by one (as an executor does, one per slot) meet at a rendezvous the caller
    hands out; two leases of 3 steps (checkpoint, both ranks resume at step 3) train the same model
    as one process for 6 steps; rank 1 writes its own small record."""
    from policyopt.jobs.plans import free_port

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))

    def lease(n: int) -> list[dict]:
        port = free_port()
        procs = []
        for rank in (1, 0):  # rank 1 first: it waits at the rendezvous for rank 0
            cmd = [sys.executable, "-m", "policyopt.jobs.worker", "--job-type", "transformer-bs16", "--job-id", "ext",
                   "--checkpoint-dir", str(tmp_path / "ckpt"), "--progress-file", str(tmp_path / f"p{n}-r{rank}.json"),
                   "--steps-total", "6", "--lease-steps", "3", "--lease-seconds", "120", "--threads", "1",
                   "--dp", "2", "--rank", str(rank), "--master-addr", "127.0.0.1", "--master-port", str(port),
                   "--loss-log", str(tmp_path / "loss.txt")]
            procs.append(subprocess.Popen(cmd, env=env, stderr=subprocess.PIPE, text=True))
        for proc in procs:
            _, err = proc.communicate(timeout=180)
            assert proc.returncode == 0, err[-2000:]
        import json

        return [json.loads((tmp_path / f"p{n}-r{rank}.json").read_text()) for rank in (0, 1)]

    first = lease(1)
    second = lease(2)
    assert first[0]["steps_done"] == 3 and second[0]["session_start_step"] == 3 and second[0]["steps_done"] == 6
    assert second[0]["status"] == "completed"
    assert first[1]["rank"] == 1 and first[1]["steps_done"] == 3 and second[1]["steps_done"] == 6
    torch.manual_seed(0)
    job = build_job("transformer-bs16", seed=0)
    reference = [train_step(job, job.model, next(job.stream), ExecutionPlan(), DistContext())[0] for _ in range(6)]
    losses = [float(line.split()[1]) for line in (tmp_path / "loss.txt").read_text().splitlines()]
    assert losses == pytest.approx(reference, rel=1e-4)


def test_worker_rejects_a_rank_without_a_rendezvous(tmp_path: Path) -> None:
    from policyopt.jobs.worker import main

    assert main(["--job-type", "resnet-bs32", "--job-id", "x", "--checkpoint-dir", str(tmp_path),
                 "--dp", "2", "--rank", "1"]) == 2
    assert main(["--job-type", "resnet-bs32", "--job-id", "x", "--checkpoint-dir", str(tmp_path),
                 "--dp", "2", "--rank", "2", "--master-port", "5000"]) == 2
