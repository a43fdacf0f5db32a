"""The executor: real training jobs scheduled round by round by a policy and the mechanism.

Each round of ``round_seconds`` (the executor clock advances by the wall time of each round,
scheduling included; time while no executor runs is not counted):

1. **Arrivals**: jobs whose ``arrival`` has passed become active (a recompute event).
2. **Recompute** on arrivals, completions and job failures, at most once every
   ``recompute_interval`` seconds (:class:`~policyopt.mechanism.RecomputeClock`): the policy solves
   the problem of the active jobs (throughputs from the profiler table, or measured online
   ones with ``online_throughputs``; remaining steps; time since arrival) and the allocation is
   installed in the :class:`~policyopt.mechanism.RoundMechanism` (deficits carried).
3. **Placement**: the mechanism's selection is placed on slots (consolidation, lease renewal,
   migration minimization; :class:`~policyopt.executor.planning.RoundPlacer`).
4. **Start / continue / preempt**: a job whose process runs on exactly the slots it gets again
   keeps its process; its lease is renewed (a new ``lease_id`` and deadline in its lease file).
   Every other running process gets ``SIGTERM`` and checkpoints; then new processes start (they
   resume from their newest verified checkpoint). Every lease ends at the round's deadline with
   ``keep_workers``, so a worker waits for the next decision instead of exiting.
5. **Run the round**, polling the processes: a process that exits with ``completed`` finishes
   its job at exactly its step budget (JCT = finish − arrival on the executor clock); a process
   that crashes is restarted at once from its checkpoint (``restarts``), and a job whose process
   crashes more than ``max_restarts`` times in a row is marked ``failed`` with its error while the
   others carry on.
6. **Account**: read each worker's progress record after the deadline (real steps, losses,
   training seconds), give the mechanism the seconds each job ran, and commit everything to the
   SQLite state in one transaction.

Data-parallel jobs (``scale_factor`` ``K > 1``) run as ``K`` processes (ranks), one per slot, that
meet at a rendezvous the executor hands out for each launch (a free port on rank 0's machine).
The job is one unit: its ranks start, renew, stop and restart together; rank 0 writes the
checkpoints and the progress record and every rank resumes the same step. A rank that dies, or a
group that has not formed by the end of the round it was launched in, restarts the whole job from
its newest checkpoint.

Slots and nodes (:class:`~policyopt.executor.topology.Topology`): each round starts by asking the
backend which slots are alive and where. A lost slot (its node died) ends the processes of every
job that had a rank there, is taken out of the cluster (the policy is solved again for the
smaller cluster) and the jobs restart whole from their newest checkpoint on surviving slots; a slot
that comes back joins at the next round.

Crash safety: workers checkpoint every ``checkpoint_interval`` seconds (default half a round) and
when stopped. If the executor dies, its workers train to the end of the round, wait
``renewal_wait`` seconds and checkpoint. A restarted executor retires every process recorded in
the state (expired lease, ``SIGTERM``, checkpoint) and resumes from the last committed round; the
jobs resume from their checkpoints, so at most the current round's progress is lost (less, since
the orphans checkpoint when they stop).
"""
from __future__ import annotations

import json
import math
import os
import signal
import threading
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from policyopt.errors import InputError, PolicyOptError
from policyopt.mechanism import RecomputeClock, RoundMechanism
from policyopt.mechanism.recompute import RecomputeEvent

from .backends import TERMINAL_STATUSES, Backend, BackendError, Launch, LocalProcessBackend, ProcessHandle
from .cluster import PIN_MODES, Slot, build_slots, parse_cluster
from .planning import RoundPlacer, build_problem, job_throughputs, mechanism_allocation
from .spec import JobSpec, check_table
from .state import ExecutorState, JobRecord
from .topology import Topology

__all__ = ["ExecutorConfig", "Executor", "ExecutorError", "run_executor", "COMPATIBLE_FIELDS"]


class ExecutorError(PolicyOptError):
    """The executor cannot go on (e.g. a backend failure)."""


def _scale(rec: JobRecord) -> int:
    """The job's scale factor: workers (data-parallel ranks) it trains on."""
    return int(rec.spec.get("scale_factor", 1))


#: config fields that must match when a run resumes from its state file
COMPATIBLE_FIELDS = ("cluster", "policy", "policy_options", "round_seconds", "space_sharing")


@dataclass
class ExecutorConfig:
    """Settings of a run (see the module docstring).

    ``checkpoint_interval`` defaults to half a round, so with the two checkpoints the store keeps, a
    corrupt newest checkpoint still leaves one at most a round old. ``renewal_wait``: how long a
    worker waits at the end of its lease for the next decision. ``settle_seconds``: how long the
    executor waits after the deadline for workers to report their final step of the round.
    ``time_limit``: stop (checkpointing everything) when the executor clock passes it.
    """

    cluster: dict[str, int]
    policy: str = "max_min_fairness"
    policy_options: dict[str, Any] = field(default_factory=dict)
    round_seconds: float = 3.0
    recompute_interval: float | None = None
    max_restarts: int = 3
    checkpoint_interval: float | None = None
    renewal_wait: float = 30.0
    settle_seconds: float = 3.0
    placer: str = "consolidate"
    migration: str = "matching"
    pin: str = "auto"
    launcher: str = "fork"
    online_throughputs: bool = False
    space_sharing: bool = False
    time_limit: float | None = None

    def __post_init__(self) -> None:
        self.cluster = parse_cluster(self.cluster)
        for name in ("round_seconds", "renewal_wait", "settle_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InputError(name, value, "must be a positive number of seconds")
        for name in ("recompute_interval", "checkpoint_interval", "time_limit"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise InputError(name, value, "must be a positive number of seconds or null")
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise InputError("max_restarts", self.max_restarts, "must be an integer >= 0")
        if self.pin not in PIN_MODES:
            raise InputError("pin", self.pin, f"must be one of {', '.join(PIN_MODES)}")
        if not isinstance(self.policy_options, Mapping):
            raise InputError("policy_options", self.policy_options, "must be an object")
        from policyopt.policy import get_policy

        get_policy(self.policy, **self._solver_options())  # unknown names/options fail now, not mid-run

    @property
    def interval(self) -> float:
        return float(self.recompute_interval if self.recompute_interval is not None else self.round_seconds)

    @property
    def checkpoint_every(self) -> float:
        return float(self.checkpoint_interval if self.checkpoint_interval is not None else self.round_seconds / 2)

    def _solver_options(self) -> dict[str, Any]:
        opts = dict(self.policy_options)
        if self.space_sharing:
            opts.setdefault("space_sharing", True)
        return opts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExecutorConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            key = sorted(unknown)[0]
            raise InputError(f"config.{key}", data[key], "unknown executor setting")
        return cls(**dict(data))


@dataclass
class _Track:
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
class _RoundAcc:
    """Per-round accumulators."""

    steps: dict[str, int] = field(default_factory=dict)
    train: dict[str, float] = field(default_factory=dict)
    ended: dict[str, float] = field(default_factory=dict)  # job -> executor-clock time it completed/failed
    crashes: dict[str, int] = field(default_factory=dict)
    launched: list[str] = field(default_factory=list)
    not_started: list[str] = field(default_factory=list)  # selected, but a slot's machine was gone
    phases: dict[str, float] = field(default_factory=dict)  # wall seconds per phase of the round


class Executor:
    """Run ``jobs`` on ``config.cluster`` to completion, persisting to ``state``.

    A new state file needs ``jobs``, ``config``, ``table`` (the profiler throughput table the policy
    uses) and ``run_dir`` (checkpoints, progress and lease files, logs). A state file that holds a
    run resumes it: ``jobs``/``config`` may be given again and must then match (the fields in
    :data:`COMPATIBLE_FIELDS` and the job list), other settings (launcher, time limit, …) may
    change. ``display``: an object with ``update(snapshot)`` and ``close()`` (see
    :mod:`policyopt.executor.report`). ``slots``: the workers (default: :func:`build_slots` on this
    machine; a Ray cluster's GPUs are not on the machine that runs the executor).
    """

    def __init__(self, state: ExecutorState | str | Path, jobs: Sequence[JobSpec] | None = None,
                 config: ExecutorConfig | None = None, table: Mapping[str, Any] | None = None,
                 run_dir: str | Path | None = None, *, backend: Backend | None = None,
                 table_source: str = "given", display: Any = None, slots: Sequence[Slot] | None = None,
                 log: Callable[[str], None] | None = None) -> None:
        self.state = state if isinstance(state, ExecutorState) else ExecutorState(state)
        self.log = log or (lambda _msg: None)
        self.display = display
        if self.state.is_new():
            if jobs is None or config is None or table is None or run_dir is None:
                raise InputError("state", str(self.state.path), "holds no run yet: give jobs, config, "
                                 "throughputs and an output directory")
            self._initialize(list(jobs), config, dict(table), Path(run_dir), table_source)
        else:
            self._check_compatible(jobs, config)
        saved = self.state.get("config")
        stored = ExecutorConfig.from_dict(saved["executor"])
        if config is not None:  # non-identity settings may change on a resume
            for name in ("launcher", "time_limit", "settle_seconds", "renewal_wait", "max_restarts", "pin",
                         "online_throughputs", "checkpoint_interval"):
                setattr(stored, name, getattr(config, name))
        self.config = stored
        self.run_dir = Path(saved["run_dir"])
        self.table = self.state.get("throughputs")["table"]
        self.counts = dict(self.config.cluster)
        self.slots: list[Slot] = list(slots) if slots is not None else build_slots(self.counts, self.config.pin)
        if [s.worker_type for s in self.slots] != [t for t, n in self.counts.items() for _ in range(n)]:
            raise InputError("slots", [s.worker_id for s in self.slots], f"do not match the cluster {self.counts}")
        self.worker_types = [t for t, n in self.counts.items() if n > 0]
        self.topology = Topology.from_state(self.slots, self.state.get("topology"))
        self.placer: RoundPlacer | None = None
        self.backend: Backend = backend if backend is not None else LocalProcessBackend(
            self.run_dir / "backend", self.config.launcher)
        self.jobs: dict[str, JobRecord] = self.state.jobs()
        self.time = float(self.state.get("time", 0.0))
        self.round_index = int(self.state.get("round", 0))
        mstate = self.state.get("mechanism")
        self.mech: RoundMechanism | None = RoundMechanism.from_state(mstate) if mstate else None
        cstate = self.state.get("clock") or {"last_recompute": None, "pending": []}
        self.clock = RecomputeClock(self.config.interval, cstate["last_recompute"],
                                    [RecomputeEvent(float(t), str(k), str(s)) for t, k, s in cstate["pending"]])
        placement = self.state.get("placement") or {"assignment": {}, "pairs": []}
        self.previous: dict[str, list[int]] = {j: list(g) for j, g in placement["assignment"].items()}
        self.previous_pairs: list[list[str]] = [list(p) for p in placement["pairs"]]
        self.tracks: dict[str, _Track] = {}
        self._loss_notes: list[tuple[list[int], str, int]] = []  # (lost slots, job, steps done) to record
        self.launches = int(self.state.get("launches", 0))
        self._stop_requested = threading.Event()
        self.status = "running"

    # ------------------------------------------------------------------------------ setup
    def _initialize(self, jobs: list[JobSpec], config: ExecutorConfig, table: dict[str, Any], run_dir: Path,
                    source: str) -> None:
        check_table(table, jobs, [t for t, n in config.cluster.items() if n > 0])
        run_dir = run_dir.resolve()
        records = [JobRecord(j.id, i, j.to_dict(), "pending", j.steps,
                             stats={"rounds_run": 0, "migrations": 0, "preemptions": 0, "seconds_by_type": {},
                                    "steps_by_type": {}, "train_seconds_by_type": {}, "startup_seconds": [],
                                    "stop_seconds": [], "launches": 0})
                   for i, j in enumerate(jobs)]
        with self.state.transaction():
            self.state.put("config", {"executor": config.to_dict(), "jobs": [j.to_dict() for j in jobs],
                                      "run_dir": str(run_dir), "created_at": time.time()})
            self.state.put("throughputs", {"table": table, "source": source})
            self.state.put("time", 0.0)
            self.state.put("round", 0)
            self.state.put("launches", 0)
            self.state.put("starts", [])
            self.state.put("finished", False)
            self.state.save_jobs(records)

    def _check_compatible(self, jobs: Sequence[JobSpec] | None, config: ExecutorConfig | None) -> None:
        saved = self.state.get("config")
        if jobs is not None:
            given = [j.to_dict() for j in jobs]
            if given != saved["jobs"]:
                raise InputError("jobs", [j.id for j in jobs],
                                 f"differ from the job list of the run in {self.state.path}; use another --state")
        if config is not None:
            stored = saved["executor"]
            mine = config.to_dict()
            for name in COMPATIBLE_FIELDS:
                if json.dumps(mine[name], sort_keys=True) != json.dumps(stored[name], sort_keys=True):
                    raise InputError(name, mine[name], f"the run in {self.state.path} has {stored[name]!r}; "
                                                      "use the same setting or another --state")

    # ------------------------------------------------------------------------------ public
    def request_stop(self) -> None:
        """Stop after checkpointing every job (thread-safe; the next run with the same state resumes)."""
        self._stop_requested.set()

    def run(self) -> dict[str, Any]:
        """Run to completion (or until stopped / the time limit); returns the report."""
        from .report import build_report

        starts = self.state.get("starts", [])
        resumed = bool(starts)
        starts.append(time.time())
        self.state.put("starts", starts)
        self.state.event(self.time, "executor_start", detail={"resumed": resumed, "round": self.round_index})
        warm = getattr(self.backend, "warm_up", None)
        if warm is not None:
            warm()
        try:
            if resumed:
                self._recover()
            self._refresh_topology(self.time)
            while not self._finished():
                if self._stop_requested.is_set():
                    self.status = "stopped"
                    break
                if self.config.time_limit is not None and self.time >= self.config.time_limit:
                    self.status = "time_limit"
                    break
                self._round()
            else:
                self.status = "finished"
        except BaseException:
            self._shutdown_processes()
            raise
        finally:
            if self.display is not None:
                self.display.close()
        self._shutdown_processes()
        self.state.put("finished", self.status == "finished")
        self.state.event(self.time, "executor_stop", detail={"status": self.status})
        self.backend.close()
        return build_report(self.state, status=self.status)

    # ------------------------------------------------------------------------------ recovery
    def _recover(self) -> None:
        """Retire every process a previous executor left (see the module docstring)."""
        for rec in self.jobs.values():
            if rec.process is None:
                continue
            final = self._retire_ranks(rec.process)
            n_ranks = len(rec.process.get("ranks") or [0])
            self.log(f"retired {rec.job_id} (pid {rec.process.get('pid')}, {n_ranks} rank(s)): "
                     f"{(final or {}).get('status')} at step {(final or {}).get('steps_done')}")
            if final is not None and final.get("job_id") == rec.job_id:
                self._absorb_final(rec, final)
                if final.get("status") == "completed" and rec.status == "active":
                    self._end_job(rec, "completed", self.time, None)
            rec.process = None
            if rec.status != "active" and self.mech is not None and rec.job_id in self.mech.arrays.job_ids:
                self.mech.remove_jobs([rec.job_id])
            self.state.event(self.time, "retired", rec.job_id, {"status": (final or {}).get("status"),
                                                                "steps_done": (final or {}).get("steps_done"),
                                                                "ranks": n_ranks})
        self.previous, self.previous_pairs = {}, []
        with self.state.transaction():
            self.state.save_jobs(self.jobs)
            self.state.put("placement", {"assignment": {}, "pairs": []})

    def _retire_ranks(self, process: Mapping[str, Any]) -> dict[str, Any] | None:
        """Retire every rank recorded for a launch at once (they stop at the same step); rank 0's record."""
        ranks = list(process.get("ranks") or [process])
        timeout = max(30.0, self.config.renewal_wait)
        results: list[dict[str, Any] | None] = [None] * len(ranks)

        def retire(i: int) -> None:
            try:
                results[i] = self.backend.retire({**ranks[i], "lease_id": process.get("lease_id", 0)}, timeout=timeout)
            except BackendError as exc:  # its machine is gone
                self.log(f"could not retire rank {i} of {process.get('job_id')}: {exc}")

        threads = [threading.Thread(target=retire, args=(i,)) for i in range(len(ranks))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return results[0]

    def _absorb_final(self, rec: JobRecord, final: Mapping[str, Any]) -> None:
        """Fold a retired/stopped process's last record into the job (steps, checkpoint, losses)."""
        steps = final.get("steps_done")
        if isinstance(steps, int):
            rec.steps_done = steps
        self._absorb_checkpoint_and_losses(rec, final)

    @staticmethod
    def _absorb_checkpoint_and_losses(rec: JobRecord, record: Mapping[str, Any]) -> None:
        """A worker record's newest checkpoint and losses, where it reports them."""
        if record.get("checkpoint"):
            rec.checkpoint = record["checkpoint"]
        for key in ("initial_loss", "final_loss"):
            if record.get(key) is not None:
                setattr(rec, key, float(record[key]))

    # ------------------------------------------------------------------------------ the round
    def _finished(self) -> bool:
        return all(r.status in ("completed", "failed") for r in self.jobs.values())

    def _admit(self, now: float) -> None:
        for rec in self.jobs.values():
            if rec.status == "pending" and rec.arrival <= now + 1e-9:
                rec.status = "active"
                self.clock.note("arrival", max(rec.arrival, self.clock.last_recompute or -math.inf), rec.job_id)
                self.state.event(now, "arrival", rec.job_id)

    def _round(self) -> None:
        wall0 = time.time()
        now = self.time
        self._refresh_topology(now)
        self._admit(now)
        active = [r for r in self.jobs.values() if r.status == "active"]
        if not active or self.placer is None:
            pending = [r.arrival for r in self.jobs.values() if r.status == "pending"]
            wait = min(min(pending) - now, self.config.round_seconds) if pending else 0.0
            self._sleep(max(0.0, wait))
            self.time = now + (time.time() - wall0)
            self.state.put("time", self.time)
            return
        recomputed = self._maybe_recompute(now, active)
        if self.mech is None:  # no active job can run on the live slots: wait for slots or arrivals
            self._sleep(self.config.round_seconds)
            self.time = now + (time.time() - wall0)
            self.state.put("time", self.time)
            return
        placed = self.placer.place(self.mech, self.previous, self.previous_pairs)
        slot_sets = {j: sorted(g) for j, g in placed.assignment.items() if self.jobs[j].status == "active"}
        # a process is bound to its slots (cores or device), not to a partner: same slots = keep it
        keep = [j for j in self.tracks if j in slot_sets and sorted(self.previous.get(j, [])) == slot_sets[j]]
        preempt = [j for j in self.tracks if j not in keep]
        t_plan = time.time()
        self._stop(preempt, now, running_next=set(slot_sets))
        slot_sets = {j: g for j, g in slot_sets.items() if self.jobs[j].status == "active"}
        wall_start = time.time()
        deadline = wall_start + self.config.round_seconds
        lease = {"deadline": deadline, "steps_limit": None, "keep_workers": True, "lease_id": self.round_index + 1}
        acc = _RoundAcc()
        for j in keep:
            self.backend.renew(self.tracks[j].handle, lease)
        for j in slot_sets:
            if j not in keep and not self._launch(self.jobs[j], slot_sets[j], lease, acc,
                                                   clock_now=now + (time.time() - wall0)):
                acc.not_started.append(j)
                self.state.event(now, "launch_failed", j, {"workers": [self.slots[s].worker_id for s in slot_sets[j]]})
        slot_sets = {j: g for j, g in slot_sets.items() if j not in acc.not_started}
        self._save_jobs()
        t_started = time.time()
        self._monitor(deadline, lease, slot_sets, acc, wall0, now)
        t_deadline = time.time()
        self._settle(deadline, lease, slot_sets, acc, wall0, now)
        wall_end = time.time()
        acc.phases = {"plan": t_plan - wall0, "stop": wall_start - t_plan, "start": t_started - wall_start,
                      "run": t_deadline - t_started, "settle": wall_end - t_deadline}
        self._account(placed, slot_sets, acc, wall0, wall_end, now, recomputed)

    def _maybe_recompute(self, now: float, active: list[JobRecord]) -> dict[str, Any] | None:
        ids = {r.job_id for r in active}
        installed = set(self.mech.arrays.job_ids) if self.mech is not None else set()
        # due on events (at most every interval); always when no installed job is still active
        if self.mech is not None and not self.clock.due(now + 1e-9) and installed & ids:
            return None
        assert self.placer is not None
        counts = dict(self.placer.counts)
        problem_jobs = []
        for r in active:
            measured = None
            if self.config.online_throughputs:
                measured = {t: v["steps"] / v["seconds"] for t, v in r.stats.get("measured", {}).items()
                            if v["seconds"] >= 1.0 and v["steps"] > 0}
            k = _scale(r)
            thr = job_throughputs(self.table, r.job_type, list(counts), measured, k)
            if not any(thr.get(t, 0.0) > 0 and k <= n for t, n in counts.items()):
                continue  # cannot run on the live slots (e.g. after a node loss): it waits
            problem_jobs.append({"id": r.job_id, "job_type": r.job_type, "weight": r.spec.get("weight", 1.0),
                                 "throughputs": thr, "scale_factor": k,
                                 "steps_remaining": max(r.steps_required - r.steps_done, 1),
                                 "time_since_start": max(now - r.arrival, 0.0), "arrival": r.arrival})
        if not problem_jobs:
            self.mech = None
            return None
        ids = {j["id"] for j in problem_jobs}
        problem = build_problem(counts, problem_jobs, self.table, self.config.space_sharing,
                                self.placer.gpus_per_server)
        from policyopt.policy import get_policy

        t0 = time.perf_counter()
        result = get_policy(self.config.policy, **self.config._solver_options()).solve(problem)
        solve_s = time.perf_counter() - t0
        scale = {j["id"]: int(j["scale_factor"]) for j in problem_jobs}
        alloc, coloc = mechanism_allocation(result.allocation, result.colocated_allocation, counts, scale)
        if self.mech is None:
            self.mech = RoundMechanism(counts, round_length=self.config.round_seconds)
        self.mech.set_allocation(alloc, coloc, scale)
        absorbed = self.clock.mark_recomputed(now)
        info = {"round": self.round_index, "time": now, "status": result.status.value,
                "objective": result.objective if result.objective is None or math.isfinite(result.objective) else None,
                "solve_seconds": solve_s, "jobs": sorted(ids), "events": [[e.kind, e.subject] for e in absorbed],
                "allocation": alloc, "colocated": coloc, "message": result.message}
        self.state.put("allocation", info)
        self.state.event(now, "recompute", detail={k: info[k] for k in ("status", "solve_seconds", "jobs", "events")})
        self.log(f"round {self.round_index}: recomputed the allocation ({result.status.value}, "
                 f"{solve_s * 1e3:.0f} ms) for {len(ids)} jobs")
        return info

    # ------------------------------------------------------------------------------ processes
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

    def _launch(self, rec: JobRecord, slot_ids: Sequence[int], lease: Mapping[str, Any], acc: _RoundAcc,
                clock_now: float) -> bool:
        """Start the job on ``slot_ids``: one process, or one rank per slot for a data-parallel job
        (rendezvous on rank 0's machine). ``False`` when a slot's machine is gone (nothing runs)."""
        self.launches += 1
        n = self.launches
        world = len(slot_ids) if _scale(rec) > 1 else 1
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
        self.tracks[rec.job_id] = _Track(handles[0], last_steps=rec.steps_done, ranks=handles, slots=list(slot_ids),
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

    # ------------------------------------------------------------------------------ slots and nodes
    def _refresh_topology(self, now: float) -> None:
        """Adopt the backend's live slots; on a change, end the jobs that lost a slot (they restart
        whole from their checkpoints), rebuild the placement layout and re-solve the policy."""
        lost, added = self.topology.update(self.backend.slot_nodes([s.worker_id for s in self.slots]), now)
        if self.placer is not None and not lost and not added and not self._loss_notes:
            return
        if lost:
            names = [self.slots[s].worker_id for s in lost]
            self.log(f"lost slot(s) {', '.join(names)}: re-solving for the remaining {len(self.topology.live)} slot(s)")
            for j, track in list(self.tracks.items()):
                hit = [s for s in track.slots if s in set(lost)]
                if hit:
                    self._end_on_lost_slots(j, track, hit, now)
            for j, gs in list(self.previous.items()):
                if any(s in set(lost) for s in gs):
                    del self.previous[j]
        for hit, j, steps in self._loss_notes:  # including jobs whose ranks died before this round noticed
            self.topology.note_job(hit, j, steps)
        self._loss_notes.clear()
        if added:
            self.log(f"slot(s) {', '.join(self.slots[s].worker_id for s in added)} joined")
        self.placer = RoundPlacer(self.topology.servers(), self.config.placer, self.config.migration) \
            if self.topology.live else None
        if self.placer is not None and not self.state.get("gpus_per_server"):
            self.state.put("gpus_per_server", self.placer.gpus_per_server)  # the machines the run started on
        if lost or added:
            self.mech = None  # a different cluster: the next round solves the policy for it
            self.previous_pairs = [p for p in self.previous_pairs if p[0] in self.previous and p[1] in self.previous]
        with self.state.transaction():
            self.state.put("topology", self.topology.to_state())
            self._save_jobs()
            self.state.put("placement", {"assignment": self.previous, "pairs": self.previous_pairs})
            if self.mech is None:  # a resumed run must not schedule on the old cluster's mechanism
                self.state.put("mechanism", None)
        for s in lost:
            self.state.event(now, "slot_lost", detail={"slot": self.slots[s].worker_id})
        for s in added:
            self.state.event(now, "slot_added", detail={"slot": self.slots[s].worker_id,
                                                        "node": self.topology.nodes.get(s)})

    def _dead_slots(self, slot_ids: Sequence[int]) -> list[int]:
        """The slots among ``slot_ids`` whose machine the backend no longer has."""
        try:
            nodes = self.backend.slot_nodes([self.slots[s].worker_id for s in slot_ids])
        except BackendError:
            return list(slot_ids)
        return [s for s in slot_ids if self.slots[s].worker_id not in nodes]

    def _end_on_lost_slots(self, j: str, track: _Track, hit: Sequence[int], now: float) -> None:
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

    # ------------------------------------------------------------------------------ ranks
    def _poll_job(self, track: _Track) -> tuple[int | None, int | None]:
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

    def _end_ranks(self, track: _Track, kill: bool, wait: float = 10.0) -> None:
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

    def _observe(self, rec: JobRecord, track: _Track, record: Mapping[str, Any] | None, acc: _RoundAcc | None,
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
            while self._poll(track.handle) is None:
                if time.time() - t0 > timeout:
                    self._quietly(self.backend.kill, track.handle)
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
                     acc: _RoundAcc, wall0: float, now: float, deadline: float, failed_rank: int | None = None,
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
                 acc: _RoundAcc, wall0: float, now: float) -> None:
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
            if t - last_view >= 0.5:
                last_view = t
                for j, track in self.tracks.items():
                    self._observe(self.jobs[j], track, self._quietly(self.backend.progress, track.handle), acc,
                                  self._clock(t, wall0, now))
                self._show(slot_sets, self._clock(t, wall0, now), deadline - t)
            if self._stop_requested.is_set():
                return
            time.sleep(min(0.1, max(0.0, deadline - time.time())))

    def _settle(self, deadline: float, lease: Mapping[str, Any], slot_sets: Mapping[str, list[int]], acc: _RoundAcc,
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

    # ------------------------------------------------------------------------------ accounting
    def _account(self, placed: Any, slot_sets: Mapping[str, list[int]], acc: _RoundAcc, wall0: float,
                 wall_end: float, now: float, recomputed: dict[str, Any] | None) -> None:
        L = self.config.round_seconds
        duration = wall_end - wall0
        durations = {}
        for comb in placed.selection.combinations:
            for j in comb.jobs:
                ended = acc.ended.get(j)
                durations[j] = min(L, max(0.0, ended - now)) if ended is not None else L
                if j in acc.not_started:
                    durations[j] = 0.0
        assert self.mech is not None
        if placed.selection.combinations:
            self.mech.record_round(placed.selection, durations)
        gone = [j for j in acc.ended if j in set(self.mech.arrays.job_ids)]
        if gone:
            self.mech.remove_jobs(gone)
        per_job = {}
        for j, gs in slot_sets.items():
            rec = self.jobs[j]
            wtype = self.slots[gs[0]].worker_type
            held = (acc.ended[j] - now) if j in acc.ended else duration
            st = rec.stats
            st["rounds_run"] = st.get("rounds_run", 0) + 1
            st.setdefault("seconds_by_type", {})[wtype] = st["seconds_by_type"].get(wtype, 0.0) + max(0.0, held)
            st.setdefault("steps_by_type", {})[wtype] = st["steps_by_type"].get(wtype, 0) + acc.steps.get(j, 0)
            st.setdefault("train_seconds_by_type", {})[wtype] = \
                st["train_seconds_by_type"].get(wtype, 0.0) + acc.train.get(j, 0.0)
            if len([p for p in placed.pairs if j in p]) == 0:
                m = st.setdefault("measured", {}).setdefault(wtype, {"steps": 0, "seconds": 0.0})
                m["steps"] += acc.steps.get(j, 0)
                m["seconds"] += acc.train.get(j, 0.0)
            if j not in acc.crashes and rec.status == "active" and j in self.tracks:
                rec.consecutive_crashes = 0
            nodes = [self.topology.nodes.get(g, "local") for g in gs]
            per_job[j] = {"workers": [self.slots[g].worker_id for g in gs], "worker_type": wtype,
                          "nodes": nodes, "spread": len(set(nodes)) > 1, "scale_factor": _scale(rec),
                          "steps": acc.steps.get(j, 0), "train_seconds": acc.train.get(j, 0.0),
                          "steps_done": rec.steps_done, "renewed": j not in acc.launched,
                          "crashes": acc.crashes.get(j, 0)}
        # a data-parallel job keeps all its slots busy while it trains
        busy = sum(t * len(slot_sets.get(j, [0])) for j, t in acc.train.items())
        n_slots = len(self.topology.live)
        record = {"time": now, "wall_start": wall0, "wall_end": wall_end, "jobs": per_job,
                  "pairs": placed.pairs, "migrated": placed.migrated, "recomputed": recomputed is not None,
                  "launched": acc.launched, "ended": sorted(acc.ended),
                  "allocated_fraction": len({g for gs in slot_sets.values() for g in gs}) / n_slots if n_slots else 0.0,
                  "busy_fraction": busy / (n_slots * duration) if n_slots and duration > 0 else 0.0,
                  "busy_seconds": busy, "slots": n_slots, "timings": placed.timings, "phases": acc.phases,
                  "load_average": os.getloadavg()[0] if hasattr(os, "getloadavg") else None}
        self.previous = {j: list(gs) for j, gs in slot_sets.items() if j in self.tracks}
        self.previous_pairs = [p for p in placed.pairs if p[0] in self.previous and p[1] in self.previous]
        self.time = now + duration
        with self.state.transaction():
            self.state.add_round(self.round_index, now, duration, record)
            self.round_index += 1
            self._save_jobs()
            self.state.put("time", self.time)
            self.state.put("round", self.round_index)
            self.state.put("mechanism", self.mech.to_state())
            self.state.put("clock", {"min_interval": self.clock.min_interval,
                                     "last_recompute": self.clock.last_recompute,
                                     "pending": [[e.time, e.kind, e.subject] for e in self.clock.pending]})
            self.state.put("placement", {"assignment": self.previous, "pairs": self.previous_pairs})
        done = sum(r.status == "completed" for r in self.jobs.values())
        self.log(f"round {self.round_index - 1} ({duration:.1f} s): " + ", ".join(
            f"{j}@{v['worker_type']} +{v['steps']}" for j, v in per_job.items()) + f"; {done}/{len(self.jobs)} done")

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


def run_executor(state: ExecutorState | str | Path, jobs: Sequence[JobSpec] | None, config: ExecutorConfig | None,
                 table: Mapping[str, Any] | None, run_dir: str | Path | None, **kwargs: Any) -> dict[str, Any]:
    """``Executor(...).run()`` with SIGTERM/SIGINT turned into a graceful stop (main thread only)."""
    executor = Executor(state, jobs, config, table, run_dir, **kwargs)
    previous: dict[signal.Signals, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            previous[sig] = signal.signal(sig, lambda *_: executor.request_stop())
    try:
        return executor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
