"""The executor: real training jobs scheduled round by round by a policy and the mechanism.

Each round of ``round_seconds`` (the executor clock advances by the wall time of each round,
scheduling included; time while no executor runs is not counted):

1. **Arrivals**: jobs whose ``arrival`` has passed become active (a recompute event).
2. **Recompute** on arrivals, completions and job failures, at most once every
   ``recompute_interval`` seconds (:class:`~policyopt.mechanism.RecomputeClock`): the policy solves
   the problem of the active jobs (throughputs from the profiler table, or measured online
   ones with ``online_throughputs``; remaining steps; time since arrival; for finish-time fairness
   the cumulative isolated time, carried from call to call as in the simulator) and the allocation is
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
   others carry on. A round in which a job ended and no process is left running ends there (*cut
   short*, of length ``ℓ < round_seconds``): the run is over when no job is active or pending,
   and otherwise the next round places the waiting jobs on the freed slots at once. The mechanism
   counts such a round as ``ℓ`` seconds (``T += ℓ``).
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
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from policyopt.errors import InputError
from policyopt.mechanism import IsolatedTimeTracker, RecomputeClock, RoundMechanism
from policyopt.mechanism.recompute import RecomputeEvent

from .backends import Backend, BackendError, LocalProcessBackend
from .cluster import Slot, build_slots
from .config import COMPATIBLE_FIELDS, ExecutorConfig, ExecutorError, scale_of
from .planning import RoundPlacer, build_problem, job_throughputs, mechanism_allocation
from .ranks import ProcessControl, RoundAcc, Track
from .spec import JobSpec, check_table
from .state import ExecutorState, JobRecord
from .topology import Topology

__all__ = ["ExecutorConfig", "Executor", "ExecutorError", "run_executor", "COMPATIBLE_FIELDS"]


class Executor(ProcessControl):
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
            self.run_dir / "backend", self.config.launcher, warm_job_types=[j["job_type"] for j in saved["jobs"]],
            warm_threads=[s.threads for s in self.slots])
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
        # finish-time fairness: each job's cumulative isolated time c_m, carried across recomputes
        self.isolated = IsolatedTimeTracker.from_state(self.state.get("isolated_time"))
        self._policy: Any = None  # the policy object, created at the first recompute
        self.tracks: dict[str, Track] = {}
        self._loss_notes: list[tuple[list[int], str, int]] = []  # (lost slots, job, steps done) to record
        self.launches = int(self.state.get("launches", 0))
        self._stop_requested = threading.Event()
        self.status = "running"

    # ------------------------------------------------------------------------------ setup
    def _initialize(self, jobs: list[JobSpec], config: ExecutorConfig, table: dict[str, Any], run_dir: Path,
                    source: str) -> None:
        check_table(table, jobs, {t: n for t, n in config.cluster.items() if n > 0})
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
            warmed = getattr(self.backend, "warmed", None)  # what its fork server warmed, where it has one
            if warmed is not None:
                self.state.event(self.time, "fork_server_ready", detail=warmed)
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
        acc = RoundAcc()
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
        acc.cut_short = t_deadline < deadline and not self._stop_requested.is_set()
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
            k = scale_of(r)
            thr = job_throughputs(self.table, r.job_type, list(counts), measured, k)
            if not any(thr.get(t, 0.0) > 0 and k <= n for t, n in counts.items()):
                continue  # cannot run on the live slots (e.g. after a node loss): it waits
            left = max(r.steps_required - r.steps_done, 1)
            problem_jobs.append({"id": r.job_id, "job_type": r.job_type, "weight": r.spec.get("weight", 1.0),
                                 "throughputs": thr, "scale_factor": k, "steps_remaining": left,
                                 "time_since_start": max(now - r.arrival, 0.0), "arrival": r.arrival,
                                 "isolated_time": self.isolated.value(r.job_id, float(left))})
        if not problem_jobs:
            self.mech = None
            return None
        ids = {j["id"] for j in problem_jobs}
        problem = build_problem(counts, problem_jobs, self.table, self.config.space_sharing,
                                self.placer.gpus_per_server)
        from policyopt.policy import get_policy

        t0 = time.perf_counter()
        if self._policy is None:  # one object per run: policies with memory (AlloX, Gandiva) and warm starts
            self._policy = get_policy(self.config.policy, **self.config._solver_options())
        result = self._policy.solve(problem)
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
        self.isolated.observe({j["id"]: float(j["steps_remaining"]) for j in problem_jobs}, result)
        self.isolated.retain(ids)
        with self.state.transaction():
            self.state.put("allocation", info)
            self.state.put("isolated_time", self.isolated.to_state())
        self.state.event(now, "recompute", detail={k: info[k] for k in ("status", "solve_seconds", "jobs", "events")})
        self.log(f"round {self.round_index}: recomputed the allocation ({result.status.value}, "
                 f"{solve_s * 1e3:.0f} ms) for {len(ids)} jobs")
        return info

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

    # ------------------------------------------------------------------------------ accounting
    def _account(self, placed: Any, slot_sets: Mapping[str, list[int]], acc: RoundAcc, wall0: float,
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
        length = min(L, duration) if acc.cut_short else None
        if length is not None:  # (a job whose process went otherwise, e.g. with a lost node, ran at most that long)
            durations = {j: min(d, length) for j, d in durations.items()}
        if placed.selection.combinations:  # a round cut short advances the mechanism's clock by its length only
            self.mech.record_round(placed.selection, durations, length=length)
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
                          "nodes": nodes, "spread": len(set(nodes)) > 1, "scale_factor": scale_of(rec),
                          "steps": acc.steps.get(j, 0), "train_seconds": acc.train.get(j, 0.0),
                          "steps_done": rec.steps_done, "renewed": j not in acc.launched,
                          "crashes": acc.crashes.get(j, 0)}
        # a data-parallel job keeps all its slots busy while it trains
        busy = sum(t * len(slot_sets.get(j, [0])) for j, t in acc.train.items())
        n_slots = len(self.topology.live)
        record = {"time": now, "wall_start": wall0, "wall_end": wall_end, "jobs": per_job,
                  "pairs": placed.pairs, "migrated": placed.migrated, "recomputed": recomputed is not None,
                  "cut_short": acc.cut_short,
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
