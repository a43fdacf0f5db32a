"""The process side of the executor: starting a job's ranks, polling, stopping, restarting and
observing them within a round (:class:`ProcessControl`, a mixin of
:class:`~policyopt.executor.executor.Executor`).

A job of ``K`` workers is ``K`` processes (ranks) that start, renew, stop and restart together
(:class:`Track` holds what the executor has seen of them); rank 0 reports progress. A rank that
dies, a group that has not formed within its round, or a slot whose machine is gone ends the whole
job, which restarts from its newest checkpoint.
"""
from __future__ import annotations

import math
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from policyopt.errors import InputError
from policyopt.mechanism import RecomputeClock, RoundMechanism

from .backends import TERMINAL_STATUSES, Backend, BackendError, Launch, ProcessHandle
from .cluster import Slot
from .config import ExecutorConfig, scale_of
from .state import ExecutorState, JobRecord
from .topology import Topology

__all__ = ["Track", "RoundAcc", "ProcessControl", "EXIT_GRACE"]

#: seconds a stopped process may take to exit once its record says it checkpointed and stopped, or
#: after SIGTERM while it has written no record (it is still starting, e.g. a rank blocked at a
#: rendezvous whose peer is gone, which cannot run its signal handler); then it is killed (nothing
#: of it is lost) instead of holding the round up to the stop timeout
EXIT_GRACE = 5.0


@dataclass
class Track:
    """What the executor has seen of one live job's processes (``ranks[0]`` is ``handle``)."""

    handle: ProcessHandle
    base_steps: int | None = None  # the step it resumed at (known from its first record)
    last_steps: int = 0
    last_train: float = 0.0
    startup: float | None = None
    ranks: list[ProcessHandle] = field(default_factory=list)
    slots: list[int] = field(default_factory=list)
    started_wall: float = 0.0


@dataclass
class RoundAcc:
    """Per-round accumulators."""

    steps: dict[str, int] = field(default_factory=dict)
    train: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)  # job -> executor-clock time it completed/failed
    crashes: dict[str, int] = field(default_factory=dict)
    launched: list[str] = field(default_factory=list)
    not_started: list[str] = field(default_factory=list)  # selected, but a slot's machine was gone
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per phase of the round
    cut_short: bool = False  # ended before its deadline: a job ended and no process was left running


class ProcessControl:
    """Process lifecycle methods of the executor (the attributes below are set by
    :class:`~policyopt.executor.executor.Executor`)."""

    state: ExecutorState
    config: ExecutorConfig
    backend: Backend
    slots: list[Slot]
    jobs: dict[str, JobRecord]
    tracks: dict[str, Track]
    topology: Topology
    mech: RoundMechanism | None
    clock: RecomputeClock
    run_dir: Path
    launches: int
    time: float
    round_index: int
    display: Any
    log: Callable[[str], None]
    _loss_notes: list[tuple[list[int], str, int]]
    _stop_requested: threading.Event

    def _job_dir(self, job_id: str) -> Path:
        """The directory of a job's checkpoints, progress, lease files and logs (the one place a
        job id becomes a path: through :func:`~policyopt.executor.spec.job_file_name`, a single
        escaped path component, checked to stay inside ``<run-dir>/jobs``)."""
        from .spec import job_file_name

        base = self.run_dir / "jobs"
        path = base / job_file_name(job_id)
        if path.resolve().parent != base.resolve():  # pragma: no cover - job_file_name makes one component
            raise InputError("id", job_id, "the job's directory would leave the run directory")
        return path

    def _launch(self, rec: JobRecord, slot_ids: Sequence[int], lease: Mapping[str, Any], acc: RoundAcc,
                clock_now: float) -> bool:
        """Start the job on ``slot_ids``: one process, or one rank per slot for a data-parallel job
        (rendezvous on rank 0's machine). ``False`` when a slot's machine is gone (nothing runs)."""
        self.launches += 1
        n = self.launches
        world = len(slot_ids) if scale_of(rec) > 1 else 1
        job_dir = self._job_dir(rec.job_id)
        addr, port = "", 0
        try:
            if world > 1:
                addr, port = self.backend.rendezvous(self.slots[slot_ids[0]].worker_id)
        except BackendError as exc:
            self.log(f"{rec.job_id}: no rendezvous on {self.slots[slot_ids[0]].worker_id}: {exc}")
            return False
        launches = []
        for r in range(world):
            ids = slot_ids if world == 1 else [slot_ids[r]]
            slot = self.slots[ids[0]]
            cores: tuple[int, ...] | None = None
            if slot.cores is not None:
                cores = tuple(sorted({c for s in ids for c in (self.slots[s].cores or ())}))
            tag = f"{n}" if r == 0 else f"{n}-r{r}"
            launches.append(Launch(
                rec.job_id, rec.job_type, rec.steps_required, int(rec.spec.get("seed", 0)),
                str(job_dir / "checkpoints"), str(job_dir / f"progress-{tag}.json"), str(job_dir / f"lease-{n}.json"),
                str(job_dir / f"worker-{tag}.log"),
                threads=slot.threads, device=slot.device, cpu_affinity=cores, renewal_wait=self.config.renewal_wait,
                checkpoint_interval=self.config.checkpoint_every, lease=dict(lease),
                workers=tuple(self.slots[s].worker_id for s in ids), launch_id=n, rank=r, world=world,
                master_addr=addr, master_port=port, rendezvous_timeout=self._rendezvous_timeout()))
        # record the launch before it happens: a restarted executor retires it even without a pid
        pending = [{"job_id": rec.job_id, "launch_id": n, "pid": 0, "start_ticks": None, "launched_at": time.time(),
                    "progress_file": x.progress_file, "lease_file": x.lease_file, "log_file": x.log_file,
                    "workers": list(x.workers), "node": "pending", "rank": x.rank} for x in launches]
        rec.process = {**pending[0], "ranks": pending, "lease_id": lease["lease_id"], "rendezvous": [addr, port]}
        with self.state.transaction():
            self.state.put("launches", n)
            self.state.save_jobs([rec])
        handles: list[ProcessHandle] = []
        try:
            for x in launches:
                handles.append(self.backend.start(x))
                ranks = [h.to_dict() for h in handles] + pending[len(handles):]
                rec.process = {**ranks[0], "ranks": ranks, "lease_id": lease["lease_id"], "rendezvous": [addr, port]}
                self.state.save_jobs([rec])
        except BackendError as exc:  # a slot's machine went away between the topology check and now
            self.log(f"{rec.job_id}: could not start on {[self.slots[s].worker_id for s in slot_ids]}: {exc}")
            for h in handles:
                self._quietly(self.backend.kill, h)
            rec.process = None
            self.state.save_jobs([rec])
            return False
        self.tracks[rec.job_id] = Track(handles[0], last_steps=rec.steps_done, ranks=handles, slots=list(slot_ids),
                                         started_wall=time.time())
        rec.stats["launches"] = rec.stats.get("launches", 0) + 1
        if rec.first_start is None:
            rec.first_start = clock_now
        acc.launched.append(rec.job_id)
        self.state.event(clock_now, "launch", rec.job_id, {
            "launch": n, "pid": handles[0].pid, "pids": [h.pid for h in handles],
            "workers": [w for x in launches for w in x.workers],
            "nodes": [self.topology.nodes.get(s) for s in slot_ids],
            "rendezvous": [addr, port] if world > 1 else None, "from_step": rec.steps_done})
        return True

    def _rendezvous_timeout(self) -> float:
        """How long ranks wait for each other (and in a collective): beyond a renewal wait."""
        return max(120.0, self.config.renewal_wait + 60.0)

    @staticmethod
    def _quietly(call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except BackendError:
            return None

    def _dead_slots(self, slot_ids: Sequence[int]) -> list[int]:
        """The slots among ``slot_ids`` whose machine the backend no longer has."""
        try:
            nodes = self.backend.slot_nodes([self.slots[s].worker_id for s in slot_ids])
        except BackendError:
            return list(slot_ids)
        return [s for s in slot_ids if self.slots[s].worker_id not in nodes]

    def _end_on_lost_slots(self, j: str, track: Track, hit: Sequence[int], now: float) -> None:
        """A job had ranks on slots that are gone: kill the survivors; it resumes from its checkpoint."""
        rec = self.jobs[j]
        self._observe(rec, track, self._quietly(self.backend.progress, track.handle), None, now)
        for h in track.ranks:
            self._quietly(self.backend.kill, h)
        self._loss_notes.append((list(hit), j, rec.steps_done))
        rec.stats["node_losses"] = rec.stats.get("node_losses", 0) + 1
        rec.stats["lost_on_node_loss"] = rec.steps_done  # attributed once it resumed
        rec.restarts += 1
        rec.process = None
        del self.tracks[j]
        self.state.event(now, "node_lost", j, {"slots": [self.slots[s].worker_id for s in hit],
                                               "steps_done": rec.steps_done, "checkpoint": rec.checkpoint})

    def _poll_job(self, track: Track) -> tuple[int | None, int | None]:
        """``(exit status, rank)`` once the job's processes ended: rank 0's status when it exited,
        or the status of another rank that failed (the job then fails as a whole)."""
        code0 = self._poll(track.handle)
        if code0 is not None:
            return code0, None
        for r, h in enumerate(track.ranks[1:], start=1):
            code = self._poll(h)
            if code not in (None, 0):
                return code, r
        return None, None

    def _poll(self, handle: ProcessHandle) -> int | None:
        try:
            return self.backend.poll(handle)
        except BackendError:  # its machine is gone: so is the process
            return -int(signal.SIGKILL)

    def _end_ranks(self, track: Track, kill: bool, wait: float = 10.0) -> None:
        """Make sure every rank has ended (after rank 0 exited, or to end a broken group)."""
        if kill:
            for h in track.ranks:
                self._quietly(self.backend.kill, h)
        t0 = time.time()
        for h in track.ranks:
            while self._poll(h) is None:
                if time.time() - t0 > wait:
                    self._quietly(self.backend.kill, h)
                time.sleep(0.02)

    def _observe(self, rec: JobRecord, track: Track, record: Mapping[str, Any] | None, acc: RoundAcc | None,
                 clock_now: float) -> None:
        """Fold a progress record of ``track``'s process into the job and the round's counters."""
        if record is None or record.get("job_id") != rec.job_id:
            return
        if track.base_steps is None:
            start = int(record.get("session_start_step", 0))
            track.base_steps = start
            created = float(record["updated_at"]) - float(record.get("wall_seconds", 0.0))
            track.startup = max(0.0, created - track.handle.launched_at) + float(record.get("resume_seconds", 0.0))
            rec.stats.setdefault("startup_seconds", []).append(track.startup)
            if record.get("resumed_from"):
                self.state.event(clock_now, "resumed", rec.job_id, {"step": start, "checkpoint": record["resumed_from"],
                                                                    "launch": track.handle.launch_id})
            lost = max(0, rec.steps_done - start)
            if lost:
                rec.steps_lost += lost
                self.state.event(clock_now, "steps_lost", rec.job_id, {"lost": lost, "resumed_at": start,
                                                                      "corrupt": record.get("corrupt_checkpoints")})
            if rec.stats.pop("lost_on_node_loss", None) is not None and self.topology.note_resumed(rec.job_id, lost):
                rec.stats["steps_lost_node_loss"] = rec.stats.get("steps_lost_node_loss", 0) + lost
                self.state.put("topology", self.topology.to_state())
            rec.steps_done = start
            track.last_steps = start
            track.last_train = 0.0
            if record.get("corrupt_checkpoints"):
                rec.stats.setdefault("corrupt_checkpoints", []).extend(record["corrupt_checkpoints"])
        steps = int(record.get("steps_done", track.last_steps))
        train = float(record.get("train_seconds") or 0.0)
        if acc is not None:
            acc.steps[rec.job_id] = acc.steps.get(rec.job_id, 0) + max(0, steps - track.last_steps)
            acc.train[rec.job_id] = acc.train.get(rec.job_id, 0.0) + max(0.0, train - track.last_train)
        track.last_steps, track.last_train = steps, train
        rec.steps_done = steps
        self._absorb_checkpoint_and_losses(rec, record)

    @staticmethod
    def _absorb_checkpoint_and_losses(rec: JobRecord, record: Mapping[str, Any]) -> None:
        """A worker record's newest checkpoint and losses, where it reports them."""
        if record.get("checkpoint"):
            rec.checkpoint = record["checkpoint"]
        for key in ("initial_loss", "final_loss"):
            if record.get(key) is not None:
                setattr(rec, key, float(record[key]))

    def _stop(self, jobs: Sequence[str], now: float, running_next: set[str]) -> None:
        """SIGTERM the processes of ``jobs`` and wait until they checkpointed and exited."""
        if not jobs:
            return
        t0 = time.time()
        for j in jobs:
            for h in self.tracks[j].ranks:  # every rank: they agree to stop at the same step
                self._quietly(self.backend.stop, h)
        timeout = max(30.0, self.config.renewal_wait)
        for j in jobs:
            track = self.tracks[j]
            saved_at: float | None = None
            started = False  # it wrote a record: its session began (else it has trained nothing to save)
            looked = 0.0
            while self._poll(track.handle) is None:
                t = time.time()
                if t - t0 > timeout or (saved_at is not None and t - saved_at > EXIT_GRACE) \
                        or (not started and t - t0 > EXIT_GRACE):
                    self.log(f"{j}: killed {t - t0:.0f} s after SIGTERM, " + (
                        "checkpointed and stopped but not exiting" if saved_at is not None else
                        "still starting (e.g. waiting for its other ranks)" if not started else "not stopping"))
                    self._quietly(self.backend.kill, track.handle)
                elif saved_at is None and t - looked >= 0.25:
                    looked = t
                    record = self._quietly(self.backend.progress, track.handle)
                    started = started or record is not None
                    if record is not None and record.get("job_id") == j \
                            and record.get("status") in ("stopped", "completed", "lease_ended"):
                        saved_at = t  # its last checkpoint and record are written: only its exit is left
                time.sleep(0.02)
            self._end_ranks(track, kill=False)
            rec = self.jobs[j]
            final = self._quietly(self.backend.progress, track.handle)
            self._observe(rec, track, final, None, now)
            rec.stats.setdefault("stop_seconds", []).append(time.time() - t0)
            rec.process = None
            del self.tracks[j]
            if rec.status == "active" and (final or {}).get("status") == "completed" \
                    and rec.steps_done >= rec.steps_required:
                self._end_job(rec, "completed", now, None)  # finished after the last round's settle
                if self.mech is not None and j in self.mech.arrays.job_ids:
                    self.mech.remove_jobs([j])
            elif rec.status == "active":
                rec.stats["preemptions" if j not in running_next else "migrations"] = \
                    rec.stats.get("preemptions" if j not in running_next else "migrations", 0) + 1
                self.state.event(now, "preempt" if j not in running_next else "migrate", j,
                                 {"steps_done": rec.steps_done, "checkpoint": rec.checkpoint})

    def _shutdown_processes(self) -> None:
        """Stop every live process (they checkpoint) and record where each job stands."""
        if not self.tracks:
            return
        jobs = list(self.tracks)
        try:
            self._stop(jobs, self.time, running_next=set(jobs))
        except Exception as exc:  # noqa: BLE001 - best effort on the way out
            self.log(f"while stopping workers: {exc}")
        try:
            self._save_jobs()
        except Exception:  # noqa: BLE001
            pass

    def _clock(self, wall: float, wall0: float, now: float) -> float:
        return now + (wall - wall0)

    def _handle_exit(self, j: str, code: int, lease: Mapping[str, Any], slot_sets: Mapping[str, list[int]],
                     acc: RoundAcc, wall0: float, now: float, deadline: float, failed_rank: int | None = None,
                     why: str | None = None) -> None:
        rec = self.jobs[j]
        track = self.tracks[j]
        clock_now = self._clock(time.time(), wall0, now)
        dead = self._dead_slots(track.slots)
        t_wait = time.time()
        while not dead and code != 0 and len(set(self.topology.nodes.get(s) for s in track.slots)) > 1 \
                and time.time() - t_wait < 3.0:
            # a spread group broke: give the backend a moment to see whether a peer's machine is gone
            time.sleep(0.25)
            for h in track.ranks:
                self._poll(h)
            dead = self._dead_slots(track.slots)
        if dead:  # its machine went away: the job restarts whole once the slot is out of the cluster
            self._end_on_lost_slots(j, track, dead, clock_now)
            return
        del self.tracks[j]
        if failed_rank is None and code != 0:  # rank 0 failed: because a peer died first?
            for r, h in enumerate(track.ranks[1:], start=1):
                peer = self._poll(h)
                if peer not in (None, 0):
                    failed_rank, code = r, peer
                    break
        self._end_ranks(track, kill=failed_rank is not None or why is not None)
        record = self._quietly(self.backend.progress, track.handle)
        self._observe(rec, track, record, acc, clock_now)
        rec.process = None
        status = (record or {}).get("status")
        if failed_rank is not None:  # a rank > 0 died: the group is broken, whatever rank 0 says
            h = track.ranks[failed_rank]
            tail = self._quietly(self.backend.log_tail, h) or ""
            record = {"error": f"data-parallel rank {failed_rank} on {h.workers[0]} exited with status {code}"
                               + (f": {tail}" if tail else "")}
            status = "failed"
        if why is not None:
            record, status = {"error": why}, "failed"
        if code == 0 and status == "completed" and rec.steps_done >= rec.steps_required:
            finished_wall = min(float((record or {}).get("updated_at", time.time())), time.time())
            self._end_job(rec, "completed", self._clock(finished_wall, wall0, now), None)
            acc.ended[j] = rec.finish if rec.finish is not None else clock_now
            return
        relaunch = time.time() < deadline and j in slot_sets  # else the next round starts it
        if code == 0 and status in TERMINAL_STATUSES:
            # it left on its own (e.g. the renewal wait ran out): start it again, not a crash
            if relaunch:
                self._launch(rec, slot_sets[j], lease, acc, clock_now)
            return
        error = ((record or {}).get("error") or self._quietly(self.backend.log_tail, track.handle)
                 or f"exit status {code}")
        rec.crashes += 1
        rec.consecutive_crashes += 1
        rec.error = f"exit status {code}: {error}"
        acc.crashes[j] = acc.crashes.get(j, 0) + 1
        self.state.event(clock_now, "crash", j, {"code": code, "error": error, "steps_done": rec.steps_done,
                                                 "consecutive": rec.consecutive_crashes})
        self.log(f"{j}: worker crashed (exit {code}): {error}")
        if rec.consecutive_crashes > self.config.max_restarts:
            self._end_job(rec, "failed", clock_now, rec.error)
            acc.ended[j] = clock_now
            self.log(f"{j}: failed after {rec.consecutive_crashes} crashes in a row")
            return
        rec.restarts += 1
        self.state.event(clock_now, "restart", j, {"restarts": rec.restarts, "from_step": rec.steps_done})
        if relaunch:
            self._launch(rec, slot_sets[j], lease, acc, clock_now)

    def _end_job(self, rec: JobRecord, status: str, at: float, error: str | None) -> None:
        rec.status = status
        rec.finish = at
        if error is not None:
            rec.error = error
        last = self.clock.last_recompute if self.clock.last_recompute is not None else -math.inf
        self.clock.note("completion", max(at, last), rec.job_id)
        self.state.event(at, status, rec.job_id, {"steps_done": rec.steps_done, "error": error})

    def _monitor(self, deadline: float, lease: Mapping[str, Any], slot_sets: Mapping[str, list[int]],
                 acc: RoundAcc, wall0: float, now: float) -> None:
        last_view = 0.0
        while True:
            t = time.time()
            if t >= deadline:
                return
            for j in list(self.tracks):
                code, rank = self._poll_job(self.tracks[j])
                if code is not None:
                    self._handle_exit(j, code, lease, slot_sets, acc, wall0, now, deadline, rank)
                    self._save_jobs()
            if acc.ended and not self.tracks:
                # every process of the round has ended and a job ended with it: the rest of the round
                # would idle (the run is over, or the waiting jobs get the freed slots next round)
                return
            if t - last_view >= 0.5:
                last_view = t
                for j, track in self.tracks.items():
                    self._observe(self.jobs[j], track, self._quietly(self.backend.progress, track.handle), acc,
                                  self._clock(t, wall0, now))
                self._show(slot_sets, self._clock(t, wall0, now), deadline - t)
            if self._stop_requested.is_set():
                return
            time.sleep(min(0.1, max(0.0, deadline - time.time())))

    def _settle(self, deadline: float, lease: Mapping[str, Any], slot_sets: Mapping[str, list[int]], acc: RoundAcc,
                wall0: float, now: float) -> None:
        """After the deadline, wait (≤ ``settle_seconds``) until each worker reports its lease ended."""
        limit = deadline + self.config.settle_seconds
        while True:
            pending, exited = [], []
            for j in list(self.tracks):
                track = self.tracks[j]
                code, rank = self._poll_job(track)
                if code is not None:
                    pending.append(j)
                    exited.append((j, code, rank))
                    continue
                record = self._quietly(self.backend.progress, track.handle)
                # settled = waiting for a renewal; a terminal status (e.g. completed on the last step,
                # just after the deadline) means it is exiting: wait for the exit, so that the job ends in
                # this round and is not renewed into the next one
                if record is not None and record.get("status") != "waiting":
                    pending.append(j)
            for j, code, rank in exited:
                self._handle_exit(j, code, lease, slot_sets, acc, wall0, now, deadline, rank)
            if len(pending) == len(exited) or time.time() >= limit:
                break
            time.sleep(0.02)
        # a data-parallel group that has not formed within its round is restarted whole, never left half running
        grace = max(self.config.round_seconds, 10.0)
        for j in list(self.tracks):
            track = self.tracks[j]
            if len(track.ranks) > 1 and track.base_steps is None and time.time() - track.started_wall >= grace \
                    and self._quietly(self.backend.progress, track.handle) is None:
                self._handle_exit(j, -int(signal.SIGKILL), lease, slot_sets, acc, wall0, now, deadline,
                                  why=f"its {len(track.ranks)} ranks did not all start within the round")
        clock_now = self._clock(time.time(), wall0, now)
        for j, track in self.tracks.items():
            self._observe(self.jobs[j], track, self._quietly(self.backend.progress, track.handle), acc, clock_now)

    def _sleep(self, seconds: float) -> None:
        end = time.time() + seconds
        while not self._stop_requested.is_set() and time.time() < end:
            time.sleep(min(0.1, end - time.time()))

    def _save_jobs(self) -> None:
        for j, _track in self.tracks.items():
            rec = self.jobs[j]
            if rec.process is not None:
                rec.process.setdefault("lease_id", 0)
        self.state.save_jobs(self.jobs)

    def _show(self, slot_sets: Mapping[str, list[int]], clock_now: float, left: float) -> None:
        if self.display is None:
            return
        rows = []
        for rec in self.jobs.values():
            where = (",".join(self.slots[g].worker_id for g in slot_sets.get(rec.job_id, []))
                     if rec.job_id in self.tracks else "")
            rows.append({"id": rec.job_id, "job_type": rec.job_type, "status": rec.status, "worker": where,
                         "steps_done": rec.steps_done, "steps_required": rec.steps_required,
                         "loss": rec.final_loss, "initial_loss": rec.initial_loss, "restarts": rec.restarts,
                         "error": rec.error if rec.status == "failed" else None})
        self.display.update({"round": self.round_index, "time": clock_now, "left": max(0.0, left),
                             "policy": self.config.policy, "jobs": rows})
