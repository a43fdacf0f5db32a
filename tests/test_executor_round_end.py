"""When a round ends, and what the fork server warms.

* A round in which a job ends and no process is left running ends there (cut short): the run is
  over as soon as its last job ends (the executor clock in the state file stops there, not at the
  round's deadline), and jobs waiting for the slots a finished job freed start at once. A round in
  which another job still trains runs to its deadline. The executor runs here on a backend of
  simulated workers that train for a given number of wall seconds (fast; no torch).
* What the fork server warms for a run: the families of its job types, on the thread counts of
  its slots (``test_executor_paths`` checks a real fork server's).
"""
from __future__ import annotations

import time
from pathlib import Path
from typing import Any, Mapping

import pytest

from policyopt.executor.backends import ProcessHandle
from policyopt.executor.executor import Executor, ExecutorConfig
from policyopt.executor.spec import example_throughputs_path, load_throughput_table, parse_jobs
from policyopt.executor.state import ExecutorState


class _Worker:
    """A simulated worker: it trains while its lease runs and completes after ``need`` seconds of it;
    a new process of the job resumes where the last one stopped."""

    def __init__(self, launch: Any, need: float, resumed: float = 0.0) -> None:
        self.launch = launch
        self.need = need
        self.trained = resumed  # lease seconds trained before this process (its "checkpoint")
        self.start_step = self.steps()
        self.started = self.seen = time.time()
        self.deadline = float(launch.lease["deadline"])
        self.stopped = self.killed = self.blocked = False

    def advance(self) -> None:
        now = time.time()
        if not self.stopped and not self.blocked and self.seen < self.deadline:
            self.trained += min(now, self.deadline) - self.seen
        self.seen = now

    @property
    def completed(self) -> bool:
        return self.trained >= self.need

    def steps(self) -> int:
        return self.launch.steps_total if self.completed else int(self.launch.steps_total * self.trained / self.need)

    def record(self) -> dict[str, Any]:
        self.advance()
        status = ("completed" if self.completed else "stopped" if self.stopped
                  else "waiting" if self.seen >= self.deadline else "running")
        return {"job_id": self.launch.job_id, "status": status, "steps_done": self.steps(),
                "session_start_step": self.start_step,
                "updated_at": self.seen, "wall_seconds": self.seen - self.started, "train_seconds": self.trained,
                "initial_loss": 2.0, "final_loss": 1.0}


class _SimulatedBackend:
    """Workers that need ``seconds[job]`` of lease time to train their steps (see :class:`_Worker`)."""

    name = "simulated"

    def __init__(self, seconds: Mapping[str, float], hang_on_stop: frozenset[str] = frozenset(),
                 blocked_first: frozenset[str] = frozenset()) -> None:
        self.seconds = dict(seconds)
        self.hang_on_stop = hang_on_stop  # jobs whose process checkpoints and stops, then never exits
        self.blocked_first = blocked_first  # jobs whose first process never starts (no record, no exit)
        self.workers: dict[int, _Worker] = {}
        self.killed: list[str] = []

    def start(self, launch: Any) -> ProcessHandle:
        before = [w.trained for w in self.workers.values() if w.launch.job_id == launch.job_id]
        self.workers[launch.launch_id] = w = _Worker(launch, self.seconds[launch.job_id], max(before, default=0.0))
        w.blocked = launch.job_id in self.blocked_first and not before
        return ProcessHandle(launch.job_id, launch.launch_id, 10_000 + launch.launch_id, None, time.time(),
                             launch.progress_file, launch.lease_file, launch.log_file, launch.workers)

    def renew(self, handle: ProcessHandle, lease: Mapping[str, Any]) -> None:
        w = self.workers[handle.launch_id]
        w.advance()
        w.deadline = float(lease["deadline"])

    def stop(self, handle: ProcessHandle) -> None:
        w = self.workers[handle.launch_id]
        w.advance()
        w.stopped = True

    def kill(self, handle: ProcessHandle) -> None:
        self.stop(handle)
        self.workers[handle.launch_id].killed = True
        self.killed.append(handle.job_id)

    def poll(self, handle: ProcessHandle) -> int | None:
        w = self.workers[handle.launch_id]
        w.advance()
        if w.killed:
            return -9
        if w.blocked or (w.stopped and handle.job_id in self.hang_on_stop):
            return None
        return 0 if w.completed or w.stopped else None

    def progress(self, handle: ProcessHandle) -> dict[str, Any] | None:
        w = self.workers[handle.launch_id]
        return None if w.blocked else w.record()

    def log_tail(self, handle: ProcessHandle, lines: int = 5) -> str:
        return ""

    def retire(self, handle: Mapping[str, Any], timeout: float = 30.0) -> dict[str, Any] | None:
        return None

    def rendezvous(self, worker_id: str) -> tuple[str, int]:
        return "127.0.0.1", 1

    def slot_nodes(self, worker_ids: Any) -> dict[str, str]:
        return {w: "local" for w in worker_ids}

    def close(self) -> None:
        pass


def _run(tmp_path: Path, cluster: str, seconds: Mapping[str, float], round_seconds: float,
         backend: _SimulatedBackend | None = None) -> dict[str, Any]:
    jobs = parse_jobs([{"id": j, "job_type": "lstm-bs10", "steps": 50, "seed": i} for i, j in enumerate(seconds)])
    table = load_throughput_table(example_throughputs_path("small"))
    cfg = ExecutorConfig(cluster=cluster, round_seconds=round_seconds, pin="off")
    state = ExecutorState(tmp_path / "s.sqlite")
    backend = backend if backend is not None else _SimulatedBackend(seconds)
    report = Executor(state, jobs, cfg, table, tmp_path / "run", backend=backend).run()
    assert report["status"] == "finished"
    assert all(j["status"] == "completed" and j["steps_done"] == 50 for j in report["jobs"].values())
    report["clock"] = ExecutorState(tmp_path / "s.sqlite").get("time")
    return report


def test_the_run_ends_when_its_last_job_ends(tmp_path: Path) -> None:
    report = _run(tmp_path, "cpu1=1", {"a": 0.3}, round_seconds=4.0)
    (only,) = report["rounds"]
    assert only["cut_short"] and only["duration"] < 4.0
    # the executor clock stops when the job ends, not at the round's deadline (4 s)
    assert report["jobs"]["a"]["finish"] <= report["clock"] == pytest.approx(only["duration"])
    assert report["clock"] < 4.0


def test_waiting_jobs_get_the_freed_slot_at_once(tmp_path: Path) -> None:
    report = _run(tmp_path, "cpu1=1", {"a": 0.3, "b": 0.3}, round_seconds=4.0)
    first, second = report["rounds"]
    assert first["cut_short"] and second["cut_short"]
    ran_first = next(iter(first["jobs"]))
    other = next(iter(second["jobs"]))
    assert {ran_first, other} == {"a", "b"}
    # the second job starts when the first one ended, not a round (4 s) later
    assert second["start"] == pytest.approx(first["duration"]) and second["start"] < 4.0
    assert second["start"] <= report["jobs"][other]["first_start"] < 4.0
    assert report["clock"] < 4.0


def test_a_round_with_a_process_still_training_runs_to_its_deadline(tmp_path: Path) -> None:
    report = _run(tmp_path, "cpu1=2", {"short": 0.2, "long": 2.0}, round_seconds=1.5)
    first, *rest = report["rounds"]
    assert set(first["jobs"]) == {"short", "long"}
    assert not first["cut_short"] and first["duration"] >= 1.5  # "long" trained on after "short" ended
    assert report["jobs"]["short"]["finish"] < 1.0
    assert rest and rest[-1]["cut_short"] and set(rest[-1]["jobs"]) == {"long"}
    assert report["clock"] < 3.0  # the second round ends with "long", 0.5 s of training into it


def test_a_stopped_process_that_does_not_exit_is_killed_once_it_checkpointed(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """A preempted process that wrote its checkpoint and ``stopped`` record but hangs on its way out
    is killed after ``EXIT_GRACE`` seconds, not after the stop timeout (30 s)."""
    import policyopt.executor.ranks as ranks

    monkeypatch.setattr(ranks, "EXIT_GRACE", 0.5)
    seconds = {"a": 1.2, "b": 1.2}  # neither fits in a round: they take turns on the one slot
    backend = _SimulatedBackend(seconds, hang_on_stop=frozenset({"a", "b"}))
    report = _run(tmp_path, "cpu1=1", seconds, round_seconds=1.0, backend=backend)
    stops = [r["phases"]["stop"] for r in report["rounds"]]
    assert backend.killed and max(stops) >= 0.5  # a preempted process hung and was killed
    assert max(stops) < 5.0
    assert all(j["steps_lost"] == 0 for j in report["jobs"].values())


def test_a_process_still_starting_that_ignores_sigterm_is_killed(tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A preempted process that has written no record yet (e.g. a rank blocked at its rendezvous,
    whose signal handler cannot run) has trained nothing to save: it is killed ``EXIT_GRACE`` seconds
    after its SIGTERM, not at the stop timeout (30 s)."""
    import policyopt.executor.ranks as ranks

    monkeypatch.setattr(ranks, "EXIT_GRACE", 0.5)
    seconds = {"a": 1.2, "b": 1.2}
    backend = _SimulatedBackend(seconds, blocked_first=frozenset({"a"}))
    report = _run(tmp_path, "cpu1=1", seconds, round_seconds=1.0, backend=backend)
    stops = [r["phases"]["stop"] for r in report["rounds"]]
    assert backend.killed == ["a"] and 0.5 <= max(stops) < 5.0
    assert all(j["steps_lost"] == 0 for j in report["jobs"].values())


torch = pytest.importorskip("torch")


@pytest.mark.torch
def test_warm_plan_covers_the_run_s_families_and_thread_counts() -> None:
    from policyopt.executor.zygote import WARM_JOB_TYPES, warm_arguments, warm_plan

    assert warm_plan() == (WARM_JOB_TYPES, (1, 2))
    assert warm_plan(["lstm-bs40", "lstm-bs20"], [1]) == (("lstm-bs10",), (1,))
    assert warm_plan(["resnet-bs128", "transformer-bs64"], [4, 2]) == (("resnet-bs32", "transformer-bs16"), (2,))
    assert warm_plan(["recommendation-bs256"], [1, 8]) == (("recommendation-bs128",), (1, 2))
    assert warm_plan([], [1]) == ((), (1,))
    assert warm_arguments(None, None) == []
    assert warm_arguments(["lstm-bs20", "lstm-bs10", "lstm-bs20"], [2, 1, 2]) == [
        "--warm=lstm-bs10,lstm-bs20", "--warm-threads=1,2"]
