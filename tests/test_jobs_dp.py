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
