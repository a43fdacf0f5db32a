"""The body of a managed Slurm batch job: one of the zoo's training jobs, resumable.

    #!/bin/bash
    #SBATCH --gpus=1 --requeue --comment=policyopt:type=resnet-bs32,steps=300
    exec python -m policyopt.slurm.job --job-type resnet-bs32 --steps-total 300 \\
        --checkpoint-dir ckpt/$SLURM_JOB_ID --progress-file progress/$SLURM_JOB_ID.json

Each start resumes from the newest valid checkpoint and trains until ``--steps-total`` steps are
done (exit 0: Slurm marks the job COMPLETED). When the controller requeues the job, Slurm sends
SIGTERM: the job stops at the next step boundary, writes a checkpoint and exits well within
``KillWait``, and the next start resumes at that step. ``--loss-log`` appends ``step loss`` lines
(so a test can check that every step ran exactly once).

``--gpu-speed TABLE`` emulates GPU types on machines without GPUs: each step takes at least
``1 / TABLE[job type][GPU type of this node]`` seconds, the node's GPU type read from its GRES
(``sinfo -n $SLURMD_NODENAME -o %G``). Without it the job runs at the speed of what it runs on.
"""
from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from policyopt.errors import InputError, PolicyOptError

__all__ = ["main", "node_gpu_type"]


def node_gpu_type(node: str) -> str:
    """The GPU type of ``node`` from its GRES, asking Slurm."""
    from policyopt.slurm.slurmcmd import parse_gres

    res = subprocess.run(["sinfo", "--noheader", "--Node", "--nodes", node, "--format", "%G"],
                         capture_output=True, text=True, timeout=60)
    types = [t for line in res.stdout.splitlines() for t in parse_gres(line)]
    if res.returncode != 0 or not types:
        raise PolicyOptError(f"cannot read the GPU type of node {node!r} ({res.stderr.strip() or 'no GPU GRES'})")
    return types[0]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m policyopt.slurm.job", description=__doc__.split("\n\n")[0])
    p.add_argument("--job-type", required=True, help="a job type of the zoo (policyopt.jobs.JOB_TYPES)")
    p.add_argument("--steps-total", type=int, required=True)
    p.add_argument("--checkpoint-dir", type=Path, required=True)
    p.add_argument("--progress-file", type=Path, default=None)
    p.add_argument("--loss-log", type=Path, default=None, help="append 'step loss' lines")
    p.add_argument("--gpu-speed", type=Path, default=None, help="emulate GPU types with this throughput table")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, default=1)
    return p


def run(args: argparse.Namespace, stop: dict[str, Any]) -> int:
    import torch

    from policyopt.jobs import TrainingSession, build_job
    from policyopt.slurm.throughputs import load_throughputs

    if args.steps_total < 1:
        raise InputError("--steps-total", args.steps_total, "must be >= 1")
    min_step = 0.0
    gpu_type = None
    if args.gpu_speed is not None:
        node = os.environ.get("SLURMD_NODENAME")
        if not node:
            raise InputError("--gpu-speed", str(args.gpu_speed), "needs SLURMD_NODENAME (run inside a Slurm job)")
        gpu_type = node_gpu_type(node)
        speed = load_throughputs(args.gpu_speed).get(args.job_type, {}).get(gpu_type, 0.0)
        if speed <= 0:
            raise InputError("--gpu-speed", f"{args.job_type} on {gpu_type}", "no positive throughput in the table")
        min_step = 1.0 / speed
    torch.set_num_threads(args.threads)
    job = build_job(args.job_type, seed=args.seed)
    session = TrainingSession(os.environ.get("SLURM_JOB_ID", args.job_type), args.checkpoint_dir, job.model,
                              job.optimizer, steps_total=args.steps_total, progress_file=args.progress_file,
                              metadata={"job_type": args.job_type, "gpu_type": gpu_type,
                                        "node": os.environ.get("SLURMD_NODENAME"),
                                        "restart": os.environ.get("SLURM_RESTART_COUNT", "0")})
    stop["session"] = session
    if stop.get("requested"):
        session.request_stop()
    log = open(args.loss_log, "a", buffering=1) if args.loss_log is not None else None  # noqa: SIM115
    try:
        with session as s:
            due = time.monotonic()
            for batch in s.wrap(job.stream):
                job.optimizer.zero_grad()
                loss = job.loss_fn(job.model, batch)
                loss.backward()
                job.optimizer.step()
                value = loss.item()
                s.report(value)
                if log is not None:
                    log.write(f"{s.step + 1} {value!r}\n")
                due = max(due + min_step, time.monotonic() - min_step)  # no catching up after a stall
                pause = due - time.monotonic()
                if pause > 0:
                    time.sleep(pause)
    finally:
        if log is not None:
            log.close()
    rec: dict[str, Any] = s.progress()
    print(f"{rec['status']} at step {rec['steps_done']}/{rec['steps_total']} on {gpu_type or 'this node'}", flush=True)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the job. SIGTERM before training starts exits at once (nothing to save since the last
    checkpoint); during training it stops at the next step boundary and checkpoints."""
    stop: dict[str, Any] = {}

    def on_term(*_: Any) -> None:
        session = stop.get("session")
        if session is None:
            os._exit(0)
        stop["requested"] = True
        session.request_stop()

    signal.signal(signal.SIGTERM, on_term)
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    args = build_parser().parse_args(argv)
    try:
        code = run(args, stop)
    except PolicyOptError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)  # the checkpoint and progress file are written: skip torch's slow interpreter teardown


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
