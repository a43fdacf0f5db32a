"""A data-parallel job whose ranks do not all start is restarted whole, not left half running.

The backend below replaces rank 1 of the job's first launch by a process that never joins the
group (as when a slot's machine cannot start it): rank 0 waits at the rendezvous. By the end of
the round after the launch (at least 10 s) the executor kills both, counts a crash, and starts the
job again with a new rendezvous; the run completes with the job at exactly its step count.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")

from policyopt.executor.backends import Launch, LocalProcessBackend, ProcessHandle, process_start_ticks  # noqa: E402
from policyopt.executor.executor import Executor, ExecutorConfig  # noqa: E402
from policyopt.executor.spec import example_throughputs_path, load_throughput_table, parse_jobs  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.timeout(600)]


class MissingRankBackend(LocalProcessBackend):
    """Rank 1 of the first 2-rank launch is a process that never joins."""

    def __init__(self, run_dir: Path) -> None:
        super().__init__(run_dir, warm_job_types=["transformer-bs16"], warm_threads=[1])  # the run's type, cpu1
        self.stand_ins: list[subprocess.Popen[bytes]] = []

    def start(self, launch: Launch) -> ProcessHandle:
        if launch.rank == 1 and not self.stand_ins:
            proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            self.stand_ins.append(proc)
            return ProcessHandle(launch.job_id, launch.launch_id, proc.pid, process_start_ticks(proc.pid), 0.0,
                                 launch.progress_file, launch.lease_file, launch.log_file, launch.workers, self.node, 1)
        return super().start(launch)


def test_a_group_that_does_not_form_is_restarted_whole(tmp_path: Path) -> None:
    jobs = parse_jobs([{"id": "dp", "job_type": "transformer-bs16", "steps": 30, "scale_factor": 2}])
    config = ExecutorConfig(cluster="cpu1=2", policy="max_min_fairness", round_seconds=3.0)
    backend = MissingRankBackend(tmp_path / "run" / "backend")
    executor = Executor(tmp_path / "s.sqlite", jobs, config, load_throughput_table(example_throughputs_path("multi")),
                        tmp_path / "run", backend=backend)
    try:
        report = executor.run()
    finally:
        for proc in backend.stand_ins:
            if proc.poll() is None:
                proc.kill()
    (stand_in,) = backend.stand_ins
    assert stand_in.poll() is not None  # the executor ended the rank that never joined
    job = report["jobs"]["dp"]
    assert job["status"] == "completed" and job["steps_done"] == job["steps_required"] == job["checkpoint_step"]
    assert job["crashes"] == 1 and job["restarts"] == 1 and job["steps_lost"] == 0
    crashes = executor.state.events("crash")
    assert len(crashes) == 1 and "did not all start within the round" in crashes[0]["detail"]["error"]
    launches = executor.state.events("launch")
    assert len({tuple(e["detail"]["rendezvous"]) for e in launches}) == len(launches) >= 2  # a new rendezvous each
