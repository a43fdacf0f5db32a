"""A demonstration workload for a :class:`~policyopt.slurm.localcluster.LocalSlurm`: real sbatch jobs
running the zoo's training jobs on CPU, with emulated GPU types.

The GPU types are emulated by a throughput table (:data:`DEMO_THROUGHPUTS`, steps/s per job type
and GPU type): each job runs :mod:`policyopt.slurm.job` with ``--gpu-speed``, so a step takes at
least ``1 / throughput`` seconds on a node of that type. The same table is what the controller's
policy is given, so the policy's view of the cluster is true by construction; the training, the
checkpoints, the requeues and the scheduling are real.
"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

from policyopt.slurm.localcluster import LocalSlurm

__all__ = ["DEMO_THROUGHPUTS", "DemoJob", "DEMO_WORKLOAD", "measure_startup", "write_throughputs", "submit",
           "job_script"]

#: steps/s of each job type on each emulated GPU type (the controller's --throughputs table); kept
#: below what a busy 2-core machine delivers with eight jobs running, so the pacing, not the CPU,
#: sets each job's speed
DEMO_THROUGHPUTS = {
    "lstm-bs10": {"v100": 3.0, "k80": 1.5},
    "transformer-bs16": {"v100": 3.0, "k80": 1.0},
    "recommendation-bs128": {"v100": 4.0, "k80": 3.0},
    "recommendation-bs256": {"v100": 4.0, "k80": 2.0},
}


@dataclass(frozen=True)
class DemoJob:
    """One job of the workload: zoo job type, step budget, GPUs (``--gpus``)."""

    job_type: str
    steps: int
    gpus: int = 1


#: six jobs of four types on 1, 2 and 4 GPUs; the 4-GPU job spans both nodes of a GPU type
DEMO_WORKLOAD: tuple[DemoJob, ...] = (
    DemoJob("recommendation-bs128", 60), DemoJob("recommendation-bs256", 60), DemoJob("lstm-bs10", 45, 2),
    DemoJob("transformer-bs16", 45, 4), DemoJob("recommendation-bs128", 60), DemoJob("lstm-bs10", 45),
)


def write_throughputs(path: Path, startup: Mapping[str, float] | None = None) -> Path:
    """Write :data:`DEMO_THROUGHPUTS` in the profiler's ``throughputs.json`` format; with
    ``startup`` (job type -> seconds, e.g. from :func:`measure_startup`) each of those job types
    also gives ``startup_seconds``."""
    types = sorted({t for row in DEMO_THROUGHPUTS.values() for t in row})
    extra = startup or {}
    table = {"job_types": {name: {"throughputs": row, **({"startup_seconds": float(extra[name])} if name in extra
                                                          else {})}
                           for name, row in DEMO_THROUGHPUTS.items()},
             "worker_types": {t: {"device": "emulated"} for t in types},
             "meta": {"unit": "steps/s", "note": "emulated GPU types (policyopt.slurm.demo)"}}
    path.write_text(json.dumps(table, indent=1))
    return path


def measure_startup(job_types: Sequence[str], workdir: Path, timeout: float = 300.0) -> dict[str, float]:
    """Seconds a resumed start of each job type takes, measured here outside Slurm: one run of
    :mod:`policyopt.slurm.job` trains 1 step and checkpoints, then a second run is timed from its
    launch to its exit, resuming from that checkpoint and training 1 more step (interpreter,
    imports, model build, checkpoint load, one step, checkpoint save). What a profiler could
    record beside a job type's throughputs; Slurm's own launch is not in it."""
    out: dict[str, float] = {}
    for job_type in job_types:
        ckpt = workdir / "startup" / job_type
        for steps in (1, 2):
            t0 = time.monotonic()
            subprocess.run([sys.executable, "-m", "policyopt.slurm.job", "--job-type", job_type,
                            "--steps-total", str(steps), "--checkpoint-dir", str(ckpt)],
                           check=True, capture_output=True, timeout=timeout)
            out[job_type] = time.monotonic() - t0
    return out


def job_script(workdir: Path, table: Path) -> Path:
    """The batch script every demo job runs: ``job.sh JOB_TYPE STEPS``."""
    script = workdir / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        f'exec {sys.executable} -m policyopt.slurm.job --job-type "$1" --steps-total "$2" '
        f'--checkpoint-dir {workdir}/ckpt/$SLURM_JOB_ID --progress-file {workdir}/progress/$SLURM_JOB_ID.json '
        f"--loss-log {workdir}/steps/$SLURM_JOB_ID.log --gpu-speed {table}\n")
    script.chmod(0o755)
    for d in ("ckpt", "progress", "steps", "out"):
        (workdir / d).mkdir(parents=True, exist_ok=True)
    return script


def submit(cluster: LocalSlurm, workdir: Path, jobs: Sequence[DemoJob], *, opt_in: bool = True,
           hold: bool = True, partition: str | None = None) -> list[str]:
    """``sbatch`` each job (``--requeue``, ``--gpus=N``; with ``opt_in`` the comment
    ``policyopt:type=NAME,steps=N``; with ``hold`` submitted held). Returns the Slurm job ids."""
    table = workdir / "throughputs.json"
    if not table.exists():
        write_throughputs(table)
    script = job_script(workdir, table)
    ids = []
    for job in jobs:
        argv = ["sbatch", "--parsable", "--requeue", f"--gpus={job.gpus}", f"--output={workdir}/out/%j.out",
                f"--job-name={job.job_type}"]
        if partition:
            argv.append(f"--partition={partition}")
        if opt_in:
            argv.append(f"--comment=policyopt:type={job.job_type},steps={job.steps}")
        if hold:
            argv.append("--hold")
        ids.append(cluster.run(*argv, str(script), job.job_type, str(job.steps)).strip().split(";")[0])
    return ids
