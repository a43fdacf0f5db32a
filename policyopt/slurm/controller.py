"""``policyopt slurm``: a round-based controller beside a running Slurm.

Every ``R`` seconds (a round) the controller

1. reads the jobs of its partitions (``squeue --json``) and the GPUs of their nodes (``sinfo``);
2. accounts the interval since the last round from Slurm's own records: a managed job that ran
   on nodes of GPU type ``t`` over ``[start, end]`` receives ``|[start, end] ∩ [last, now]|``
   seconds on ``t``, and the round mechanism records the same run (as a fraction of the interval);
3. on arrivals, completions or a change in usable GPUs, solves the policy for the managed jobs
   still running or waiting (``X[job, t]``, GPU counts = usable GPUs minus those held by jobs it
   does not manage), replaces ``X`` by the nearest packable allocation ``Y``
   (:mod:`policyopt.slurm.packing`: a mixture of rounds in which every job holds all its GPUs)
   and installs ``Y`` in the mechanism (a reset; deficits carried);
4. runs one of ``Y``'s round configurations, the one that keeps every job closest to ``Y·T``
   (:mod:`policyopt.slurm.schedule`);
5. enacts the round through Slurm: a running managed job that is not chosen, or chosen for
   another GPU type, is requeued held (``scontrol requeuehold``: SIGTERM, ``KillWait`` seconds to
   checkpoint, SIGKILL); a waiting job that is not chosen is held; a chosen waiting job gets the
   GPU type as its node feature (``Features=TYPE``, ``StartTime=now``) and is released. Slurm
   itself then starts it on nodes of that type.

Only jobs of the managed partitions whose comment opts in (:mod:`policyopt.slurm.mapping`) are
ever changed. The round's bookkeeping is committed to SQLite (:mod:`policyopt.slurm.state`)
before its actions are enacted, so a killed controller restarts where it stopped.
"""
from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import AbstractSet, Any, Callable, Mapping, Sequence

from policyopt.errors import InputError
from policyopt.mechanism import Combination, IsolatedTimeTracker, RoundAssignment, RoundMechanism
from policyopt.mechanism.state import with_worker_counts
from policyopt.slurm.mapping import ManagedJob, managed_job
from policyopt.slurm.packing import packable_allocation
from policyopt.slurm.schedule import DEVIATION_BOUND, choose_with_pins, fill_order
from policyopt.slurm.startcost import (UNKNOWN_START_ROUNDS, StartupModel, learn_startup, measure_start_cost,
                                      running_pins, steps_done)
from policyopt.slurm.report import write_report
from policyopt.slurm.slurmcmd import Slurm, SlurmJob, SlurmNode, job_gpus_by_type, start_estimate
from policyopt.slurm.state import StateStore
from policyopt.slurm.throughputs import ThroughputTable

logger = logging.getLogger(__name__)

__all__ = ["ControllerConfig", "Controller", "job_gpus_by_type", "poll_interval", "start_estimate", "write_report"]

#: seconds of work assumed for a job that gives no step count (finish-time policies need one)
DEFAULT_WORK_SECONDS = 3600.0
#: rounds of owed (or surplus) time a job carries across an allocation change
DEFICIT_ROUNDS = 3.0
#: seconds between the squeue polls that look for a job's end while another waits (early rounds)
EARLY_POLL = 1.0


@dataclass
class ControllerConfig:
    """What ``policyopt slurm`` was started with."""

    policy: Any  # a policyopt Policy instance
    policy_name: str
    partitions: list[str]
    throughputs: ThroughputTable
    round_seconds: float
    weights: dict[str, float] = field(default_factory=dict)
    work_conserving: bool = True
    #: seconds a job loses at each start beyond what Slurm shows (its own startup); ``None``: learned
    #: per job type from the jobs that finished (policyopt.slurm.startcost). The round choice gives
    #: up to half of them (and of the measured start cost), at most half a round, of every rank's
    #: deviation for fewer stops and moves, and keeps a job where it runs while its run is young or
    #: its end is near compared with them
    restart_seconds: float | None = None
    #: job type -> seconds per start assumed under ``auto`` until a job of the type finishes (the
    #: throughput table's ``startup_seconds``)
    startup_prior: dict[str, float] = field(default_factory=dict)
    #: when a managed job ends while another waits, run the next round then instead of at the
    #: round boundary (the freed GPUs would idle until it)
    early_rounds: bool = True
    #: rounds a pin or the slack may leave any (job, type) from its due time (the deviation-bounded
    #: pin rule, policyopt.slurm.schedule.choose_with_pins); ``inf``: pins are never cut short
    deviation_bound: float = DEVIATION_BOUND


def poll_interval(waited: float) -> float:
    """Seconds between the controller's ``squeue`` polls after it acted, ``waited`` seconds into
    the wait: ``min(0.1 + 0.2·waited, 0.5)``. Most starts and exits come within the first second,
    where the polls are dense (they narrow Slurm's whole-second start times); a job that takes
    longer is polled at most twice a second (a start observed to half a second is still finer
    than Slurm's own second)."""
    return min(0.1 + 0.2 * max(waited, 0.0), 0.5)


class Controller:
    """One controller over one state file (see the module docstring)."""

    def __init__(self, config: ControllerConfig, slurm: Slurm, store: StateStore, *,
                 log: Callable[[str], None] | None = None) -> None:
        self.cfg = config
        self.slurm = slurm
        self.store = store
        self.log = log or (lambda line: print(line, flush=True))
        saved = store.get("config")
        mine = {"policy": config.policy_name, "partitions": config.partitions,
                "round_seconds": config.round_seconds}
        if saved is not None and (saved["partitions"] != mine["partitions"]
                                  or saved["round_seconds"] != mine["round_seconds"]):
            raise InputError("--state", str(store.path),
                             f"was written for partitions {saved['partitions']} and rounds of "
                             f"{saved['round_seconds']} s; start a new state file for {mine}")
        store.put("config", mine)
        mech_state = store.get("mechanism")
        self.mech: RoundMechanism | None = RoundMechanism.from_state(mech_state) if mech_state else None
        self._warned: set[str] = set()
        #: seconds to wait for requeued jobs to exit before placing them again (Slurm's KillWait bounds it)
        self.requeue_timeout = 60.0
        #: seconds to poll squeue for the start of the jobs placed in a round
        self.start_watch = min(10.0, config.round_seconds / 2)
        #: ``squeue`` calls in the current round (logged with it)
        self.polls = 0

    # ------------------------------------------------------------------ one round
    def run_round(self, now: float | None = None) -> dict[str, Any]:
        """Observe, account, decide, commit, enact. Returns the round's record."""
        cfg, store = self.cfg, self.store
        number = store.last_round() + 1
        nodes = self.slurm.nodes(cfg.partitions)
        jobs = self.slurm.jobs(cfg.partitions)
        self.polls = 1  # squeue calls this round
        now = time.time() if now is None else now
        node_types = {n.name: n.gpu_type for n in nodes}
        gpu_types = sorted({n.gpu_type for n in nodes})
        managed = self._managed(jobs, gpu_types)
        by_id = {j.job_id: j for j in jobs}
        known = store.known_jobs()
        for jid, mj in managed.items():
            if jid not in known and not by_id[jid].finished:
                store.add_job(jid, mj.job_type, mj.gpus, mj.weight, mj.steps, by_id[jid].submit_time, number)
        known = store.known_jobs()

        ran = self._account(now, known, by_id, node_types)
        if number > 0:
            store.set_ran(number - 1, ran)
            measure_start_cost(self.store, ran)
        store.put("stopped", [])  # consumed by the accounting above
        store.put("observed_starts", {})
        learned = learn_startup(store, self._finish(now, known, by_id), managed)
        if learned:
            self.log(f"start cost per start learned (s): {', '.join(f'{j}:{r:.1f}' for j, r in learned.items())}")
        known = store.known_jobs()
        live = [jid for jid, row in known.items() if row["end_time"] is None and jid in managed]

        capacity = self._capacity(nodes, jobs, managed, node_types)
        allocation = store.get("allocation")
        if live and (allocation is None or sorted(allocation["jobs"]) != sorted(live)
                     or allocation["capacity"] != capacity or "configurations" not in allocation):
            allocation = self._solve(now, live, managed, known, capacity, {j for j in live if by_id[j].active})
            store.put("allocation", allocation)
        decided: dict[str, dict[str, Any]] = {}
        if live and self.mech is not None and allocation is not None:
            decided = self._choose(allocation, live, managed, by_id, node_types, now)
        actions = self._plan_actions(decided, managed, by_id, node_types)
        store.add_round(number, now, decided, allocation or {}, actions)
        store.put("placed", actions["place"])
        if self.mech is not None:
            store.put("mechanism", self.mech.to_state())
        store.put("last_time", now)
        store.commit()
        self._enact(actions, {jid: ran[jid]["gpu_type"] for jid in actions["requeue"] if jid in ran})
        self.log(f"round {number}: " + (", ".join(f"{j}->{d['gpu_type']}x{d['gpus']}" for j, d in
                                                 sorted(decided.items(), key=lambda kv: int(kv[0])))
                                        or "nothing to run")
                 + (f"; requeue {actions['requeue']}" if actions["requeue"] else "")
                 + f"; squeue calls {self.polls}")
        return {"round": number, "decided": decided, "actions": actions, "live": live}

    # ------------------------------------------------------------------ steps
    def _managed(self, jobs: Sequence[SlurmJob], gpu_types: Sequence[str]) -> dict[str, ManagedJob]:
        out: dict[str, ManagedJob] = {}
        for job in jobs:
            try:
                mj = managed_job(job, self.cfg.throughputs, gpu_types, self.cfg.weights)
            except InputError as exc:  # one bad job must not stop the cluster's controller
                if job.job_id not in self._warned:
                    logger.warning("policyopt slurm: job %s not managed: %s", job.job_id, exc)
                    self._warned.add(job.job_id)
                continue
            if mj is not None:
                out[job.job_id] = mj
        return out

    def _account(self, now: float, known: Mapping[str, Mapping[str, Any]], by_id: Mapping[str, SlurmJob],
                 node_types: Mapping[str, str]) -> dict[str, Any]:
        """Seconds each managed job ran since ``last_time``, per GPU type, as Slurm shows it; the
        mechanism records the same runs.

        A run is the time a job is ``RUNNING`` in Slurm. Its start is Slurm's ``start_time``, a
        whole second (truncated: the true start lies in ``[s, s + 1)``), narrowed by the
        controller's own ``squeue`` polls after it released the job (``observed_starts``: the
        last poll that still showed the job waiting and the first that showed it running); the
        estimate is the middle of what both allow. A finished job's end is ``end_time + 0.5``
        (also truncated). A job the controller requeued stopped running when ``scontrol
        requeuehold`` returned (``stopped``: Slurm shows it ``COMPLETING`` from then on, with its
        start and end times reset), so its last run is ``[last, stopped]`` on its old type; a job
        moved to another type in the same round has both runs.

        The mechanism records each interval as a round of ``min(Δ, L)`` seconds: an interval
        shorter than ``L`` (a round run early because a job ended) is a short round; of a longer
        one (the controller was late or down, and Slurm kept running what the last round
        decided) only the first ``L`` seconds are recorded. For a job the
        controller placed last round, the seconds from the round's start to its run's start (what
        the start cost) are also counted as received by the mechanism (not in the state's
        per-job seconds, which stay Slurm's): the round choice does not chase time lost to starts.
        """
        last = self.store.get("last_time")
        if last is None:
            return {}
        last = float(last)
        interval = max(now - last, 1e-9)
        window = min(interval, self.cfg.round_seconds)
        observed = self.store.get("observed_starts") or {}
        stopped = {jid: (t, float(ts)) for jid, t, ts in self.store.get("stopped") or []}
        ran: dict[str, Any] = {}
        nominal: dict[str, dict[str, float]] = {}  # job -> type -> seconds within the window

        def in_window(a: float, b: float) -> float:
            return max(min(b, last + window) - max(a, last), 0.0)

        for jid, row in known.items():
            job = by_id.get(jid)
            if row["end_time"] is not None:
                continue
            by_type: dict[str, float] = {}
            rec: dict[str, Any] = {}
            running = job is not None and job.start_time > 0 and (
                job.state == "RUNNING" or job.finished or (job.active and jid not in stopped))
            start = end = 0.0
            if running:
                assert job is not None
                start = start_estimate(job.start_time, observed.get(jid))
                ended = (job.finished or job.state == "COMPLETING") and 0 < job.end_time <= now
                end = min(job.end_time + 0.5, now) if ended else now
            if jid in stopped and not (running and start < last):  # else the requeue failed: one run
                t, ts = stopped[jid]
                tail = min(ts, now) - last
                if tail > 0:
                    by_type[t] = tail
                    nominal.setdefault(jid, {})[t] = in_window(last, ts)
                    rec["stopped"] = {"gpu_type": t, "seconds": tail}
            if running:
                assert job is not None
                types = job_gpus_by_type(job, node_types)
                seconds = end - max(start, last)
                if seconds > 0 and types:
                    gpu_type = max(types, key=types.__getitem__)
                    by_type[gpu_type] = by_type.get(gpu_type, 0.0) + seconds
                    nominal.setdefault(jid, {})[gpu_type] = (nominal.get(jid, {}).get(gpu_type, 0.0)
                                                             + in_window(start, end))
                    rec.update({"gpu_type": gpu_type, "gpus": sum(types.values()), "gpus_by_type": types,
                                "nodes": list(job.nodes), "seconds": seconds})
                    if start >= last:
                        rec["started"] = start - last  # seconds into the interval the run began
            if not by_type:
                continue
            if "gpu_type" not in rec:  # only the stopped run
                t = rec["stopped"]["gpu_type"]
                rec.update({"gpu_type": t, "gpus": int(row["gpus"]), "gpus_by_type": {t: int(row["gpus"])},
                            "nodes": [], "seconds": by_type[t]})
            rec["seconds_by_type"] = by_type
            for t, sec in by_type.items():
                self.store.add_received(jid, t, sec)
            ran[jid] = rec
            if job is not None:
                self.store.update_job(jid, restarts=max(job.restarts, int(row["restarts"] or 0)))
        if self.mech is not None:  # every round advances the mechanism's clock, even an idle one
            mech = self.mech
            scale_of = {j: int(mech.arrays.scale[i]) for i, j in enumerate(mech.arrays.job_ids)}
            ok = {j: {t: min(v, window) for t, v in nominal.get(j, {}).items()
                      if t in mech.worker_types and v > 0}
                  for j in ran if scale_of.get(j) == ran[j]["gpus"]}
            main = {j: max(d, key=d.__getitem__) for j, d in ok.items() if d}
            combos = [Combination((j,), t, ran[j]["gpus"]) for j, t in main.items()]
            mech.record_round(RoundAssignment(tuple(combos)), {j: ok[j][t] for j, t in main.items()},
                              length=min(window, mech.round_length))
            for j, d in ok.items():  # a stopped job's last seconds on its old type
                for t, v in d.items():
                    if t != main[j]:
                        mech.credit(j, t, v)
            # the seconds a job placed last round lost to its start count as received: a start's
            # loss is not chased (a job whose shares add up to 1 could never get it back, and each
            # move made to give it back would lose as much again)
            for jid, gpu_type in self.store.get("placed") or []:
                placed_run = ran.get(jid)
                if jid in ok and placed_run is not None and placed_run["gpu_type"] == gpu_type \
                        and "started" in placed_run:
                    mech.credit(jid, gpu_type, min(float(placed_run["started"]), window))
        return ran

    def _finish(self, now: float, known: Mapping[str, Mapping[str, Any]],
                by_id: Mapping[str, SlurmJob]) -> list[str]:
        """Mark managed jobs that ended (or that Slurm no longer lists) as finished; returns them."""
        done = []
        for jid, row in known.items():
            if row["end_time"] is not None:
                continue
            job = by_id.get(jid)
            if job is None:
                self.store.update_job(jid, end_time=now, final_state="GONE")
            elif job.finished:
                self.store.update_job(jid, end_time=job.end_time or now, final_state=job.state,
                                      restarts=max(job.restarts, int(row["restarts"] or 0)))
            else:
                continue
            done.append(jid)
        if done and self.mech is not None:
            present = set(self.mech.arrays.job_ids)
            gone = [j for j in done if j in present]
            if gone:
                self.mech.remove_jobs(gone)
        return done

    def restart_cost(self, job_type: str | None) -> float:
        """Seconds a start costs a job of this type beyond what Slurm shows: ``--restart-seconds``,
        or when it is ``None`` the learned mean, else the table's prior, else one round
        (:class:`~policyopt.slurm.startcost.StartupModel`)."""
        if self.cfg.restart_seconds is not None:
            return float(self.cfg.restart_seconds)
        return StartupModel.from_state(self.store.get("startup"), self.cfg.startup_prior).estimate(
            job_type, UNKNOWN_START_ROUNDS * self.cfg.round_seconds)

    def _capacity(self, nodes: Sequence[SlurmNode], jobs: Sequence[SlurmJob],
                  managed: Mapping[str, ManagedJob], node_types: Mapping[str, str]) -> dict[str, int]:
        """Usable GPUs per type minus those held by running jobs the controller does not manage."""
        cap: dict[str, int] = {}
        for n in nodes:
            cap[n.gpu_type] = cap.get(n.gpu_type, 0) + (n.gpus if n.usable else 0)
        for job in jobs:
            if job.active and job.job_id not in managed:
                for t, g in job_gpus_by_type(job, node_types).items():
                    cap[t] = max(cap.get(t, 0) - g, 0)
        return dict(sorted(cap.items()))

    def _solve(self, now: float, live: Sequence[str], managed: Mapping[str, ManagedJob],
               known: Mapping[str, Mapping[str, Any]], capacity: Mapping[str, int],
               active: AbstractSet[str] = frozenset()) -> dict[str, Any]:
        from policyopt.problem import Cluster, Job, Problem

        received = self.store.received()
        runnable, skipped = [], []
        for jid in live:
            mj = managed[jid]
            if any(thr > 0 and capacity.get(t, 0) >= mj.gpus for t, thr in mj.throughputs.items()):
                runnable.append(jid)
            else:
                skipped.append(jid)
        if skipped:
            self.log(f"jobs that fit no GPU type now (left waiting): {skipped}")
        alloc: dict[str, dict[str, float]] = {j: {} for j in live}
        x_solved: dict[str, dict[str, float]] = {}
        if runnable and sum(capacity.values()) > 0:
            problem_jobs = []
            # finish-time fairness: each job's cumulative isolated time c_m, carried across solves
            isolated = IsolatedTimeTracker.from_state(self.store.get("isolated_time"))
            for jid in runnable:
                mj = managed[jid]
                best = max(mj.throughputs.values())
                steps = mj.steps if mj.steps is not None else best * DEFAULT_WORK_SECONDS
                starts = int(known[jid]["restarts"] or 0) + (jid in active)  # the runs it has had
                done = steps_done(received.get(jid, {}), mj.throughputs, starts, self.restart_cost(mj.job_type))
                left = max(steps - done, 1e-6 * steps)
                problem_jobs.append(Job(jid, mj.throughputs, scale_factor=mj.gpus, weight=mj.weight,
                                        steps_remaining=left,
                                        time_since_start=max(now - float(known[jid]["submit_time"]), 0.0),
                                        arrival=float(known[jid]["submit_time"]), job_type=mj.job_type,
                                        isolated_time=isolated.value(jid, left)))
            cluster = Cluster.from_counts({t: c for t, c in capacity.items() if c > 0})
            result = self.cfg.policy.solve(Problem(cluster, tuple(problem_jobs)))
            isolated.observe({j.id: j.steps_remaining for j in problem_jobs}, result)
            isolated.retain(live)
            self.store.put("isolated_time", isolated.to_state())
            x_solved = {j: {t: float(v) for t, v in row.items() if v > 1e-9} for j, row in result.allocation.items()}
        policy_x = {j: {t: x_solved.get(j, {}).get(t, 0.0) for t in capacity} for j in live}
        # rounds in which every job holds all its GPUs cannot realize every X: install the nearest
        # packable allocation (policyopt.slurm.packing)
        packed = packable_allocation(x_solved, {j: managed[j].gpus for j in x_solved},
                                     {t: c for t, c in capacity.items() if c > 0},
                                     {j: managed[j].throughputs for j in x_solved}, fill=self.cfg.work_conserving)
        alloc.update(packed.allocation)
        counts = {t: int(c) for t, c in capacity.items()}
        if self.mech is None or tuple(counts) != self.mech.worker_types:
            self.mech = RoundMechanism(counts, round_length=self.cfg.round_seconds,
                                       deficit_cap=DEFICIT_ROUNDS * self.cfg.round_seconds,
                                       work_conserving=self.cfg.work_conserving)
        elif counts != self.mech.worker_counts:
            self.mech = with_worker_counts(self.mech, counts)
        full = {j: {t: alloc[j].get(t, 0.0) for t in counts} for j in live}
        self.mech.set_allocation(full, (), {j: managed[j].gpus for j in live})
        self.log(f"allocation ({self.cfg.policy_name}) over {counts}: "
                 + ", ".join(f"{j}:{{{', '.join(f'{t}={v:.2f}' for t, v in x.items())}}}"
                             for j, x in sorted(x_solved.items(), key=lambda kv: int(kv[0]))))
        if packed.changed:
            self.log(f"packable allocation (keeps {packed.throughput_kept:.1%} of each job's throughput): "
                     + ", ".join(f"{j}:{{{', '.join(f'{t}={v:.2f}' for t, v in x.items())}}}"
                                 for j, x in sorted(packed.allocation.items(), key=lambda kv: int(kv[0]))))
        return {"jobs": list(live), "capacity": dict(capacity), "x": full, "policy_x": policy_x,
                "throughput_kept": packed.throughput_kept, "time": now,
                "configurations": [[[list(e) for e in conf], share] for conf, share in packed.configurations]}

    def _choose(self, allocation: Mapping[str, Any], live: Sequence[str], managed: Mapping[str, ManagedJob],
                by_id: Mapping[str, SlurmJob], node_types: Mapping[str, str],
                now: float) -> dict[str, dict[str, Any]]:
        """This round's jobs: one configuration of the packable allocation (policyopt.slurm.schedule),
        chosen by the seconds each (job, type) is owed under the mechanism's accounting; a running
        job whose run is young or whose end is near compared with its start cost stays where it
        runs (policyopt.slurm.startcost) while no (job, type) is left more than ``deviation_bound``
        rounds from its due time by it (:func:`~policyopt.slurm.schedule.choose_with_pins`)."""
        assert self.mech is not None
        mech, alive = self.mech, set(live)
        types = mech.worker_types
        due = mech.arrays.x * (mech.elapsed + mech.round_length) + mech.deficits - mech.received
        owed = {(j, t): float(due[i, c]) for i, j in enumerate(mech.arrays.job_ids) if j in alive
                for c, t in enumerate(types) if mech.arrays.x[i, c] > 0 or due[i, c] != 0}
        configs = [[(j, t) for j, t in conf if j in alive] for conf, _ in allocation.get("configurations", [])]
        running = {}
        for jid in live:
            job = by_id.get(jid)
            if job is not None and job.active:
                held = job_gpus_by_type(job, node_types)
                if len(held) == 1:
                    running[jid] = next(iter(held))
        # a start loses the seconds Slurm takes to run the job (measured) and the job's own startup
        # (--restart-seconds): fewer stops and moves are worth up to half of both, at most half a round
        start_cost = float(self.store.get("start_cost") or 0.0)
        restart = {jid: self.restart_cost(managed[jid].job_type) for jid in live}
        mean_restart = sum(restart.values()) / len(restart) if restart else 0.0
        slack = min((start_cost + mean_restart) / (2 * mech.round_length), 0.5)
        pins = running_pins(self.store, running, restart, managed, by_id, now, self.cfg.round_seconds)
        # GPUs a pin frees go to the other jobs: where the allocation gives them time, then any type
        shared = {(j, t) for i, j in enumerate(mech.arrays.job_ids) if j in alive
                  for c, t in enumerate(types) if mech.arrays.x[i, c] > 0}
        fill = fill_order(shared, owed, {j: managed[j].throughputs for j in live}, types) if pins else []
        chosen, kept = choose_with_pins(configs, owed, mech.round_length, running, pins,
                                        {j: managed[j].gpus for j in live}, allocation.get("capacity", {}), fill,
                                        start_cost=start_cost, slack=slack, bound=self.cfg.deviation_bound)
        if pins:
            self.log(f"kept where they run (start cost): {', '.join(f'{j}->{t}' for j, t in sorted(kept.items()))}"
                     + (f"; not kept (deviation bound): {sorted(set(pins) - set(kept), key=int)}"
                        if set(pins) - set(kept) else ""))
        return {j: {"gpu_type": t, "gpus": managed[j].gpus} for j, t in chosen}

    def _plan_actions(self, decided: Mapping[str, Mapping[str, Any]], managed: Mapping[str, ManagedJob],
                      by_id: Mapping[str, SlurmJob], node_types: Mapping[str, str]) -> dict[str, Any]:
        requeue, hold, place = [], [], []
        for jid in managed:
            job = by_id[jid]
            want = decided.get(jid)
            if job.active:
                types = job_gpus_by_type(job, node_types)
                if want is None or set(types) != {want["gpu_type"]}:
                    requeue.append(jid)
                    if want is not None:
                        place.append([jid, want["gpu_type"]])
            elif job.state == "PENDING":
                if want is None:
                    if not job.held:
                        hold.append(jid)
                elif job.held or job.features != want["gpu_type"] or job.reason == "BeginTime":
                    place.append([jid, want["gpu_type"]])
        return {"requeue": sorted(requeue, key=int), "hold": sorted(hold, key=int),
                "place": sorted(place, key=lambda p: int(p[0]))}

    def _enact(self, actions: Mapping[str, Any], stopping: Mapping[str, str]) -> None:
        """Requeue, hold, then place and release: first the jobs that were not running, then (once
        their processes have checkpointed and exited) the requeued jobs that move to another type.
        ``stopping``: requeued job -> the GPU type it ran on. Records when each requeue took effect
        (``stopped``) and, from ``squeue`` polls, when each placed job started (``observed_starts``)."""
        slurm, store = self.slurm, self.store
        if actions["requeue"]:
            t0 = time.time()
            slurm.requeue_hold(actions["requeue"])
            t_stop = 0.5 * (t0 + time.time())  # Slurm marks them COMPLETING while the command runs
            store.put("stopped", [[jid, stopping[jid], t_stop] for jid in actions["requeue"] if jid in stopping])
            store.commit()
        slurm.hold(actions["hold"])
        moving = {jid for jid, _ in actions["place"]} & set(actions["requeue"])
        watch: dict[str, float] = {}  # placed job -> the latest time it was known not yet to run
        self._place([p for p in actions["place"] if p[0] not in moving], watch)
        later = [p for p in actions["place"] if p[0] in moving]
        if slurm.dry_run:
            self._place(later, watch)
            return
        # a requeued job turns PENDING once its processes have exited; only then does Slurm set its
        # requeue delay, which place() overrides (StartTime=now). Meanwhile, and until every placed
        # job runs, poll squeue for the start times (Slurm's own are whole seconds).
        observed: dict[str, list[float | None]] = {}
        start = time.monotonic()
        while watch or later:
            ta = time.time()
            jobs = {j.job_id: j for j in slurm.jobs(self.cfg.partitions) if j.job_id in watch or j.job_id in moving}
            self.polls += 1
            tb = time.time()
            for jid in list(watch):
                job = jobs.get(jid)
                if job is not None and job.state == "PENDING":
                    watch[jid] = ta
                    continue
                if job is not None and job.active:
                    observed[jid] = [watch[jid], tb]
                watch.pop(jid)
            waited = time.monotonic() - start
            if later and (waited >= self.requeue_timeout
                          or not any(jobs[j].active for j in moving if j in jobs)):
                self._place(later, watch)
                later = []
                start = time.monotonic()
            elif not later and waited >= self.start_watch:
                break
            time.sleep(poll_interval(time.monotonic() - start))
        observed.update({jid: [lo, None] for jid, lo in watch.items()})
        store.put("observed_starts", observed)
        store.commit()

    def _place(self, place: Sequence[Sequence[str]], watch: dict[str, float]) -> None:
        """``Features=TYPE StartTime=now`` (one ``scontrol update`` per type), then release."""
        if not place:
            return
        by_type: dict[str, list[str]] = {}
        for jid, gpu_type in place:
            by_type.setdefault(gpu_type, []).append(jid)
        for gpu_type, ids in sorted(by_type.items()):
            self.slurm.place(ids, gpu_type)
        t = time.time()
        self.slurm.release([jid for jid, _ in place])
        watch.update({jid: t for jid, _ in place})

    # ------------------------------------------------------------------ loop
    def idle(self) -> bool:
        """No managed job waiting or running (and at least one was seen)."""
        known = self.store.known_jobs()
        return bool(known) and all(r["end_time"] is not None for r in known.values())

    def run(self, rounds: int | None = None, *, output: Path | None = None, exit_when_idle: bool = False,
            sleep: Callable[[float], None] = time.sleep) -> int:
        """Run ``rounds`` rounds (forever when ``None``), one every ``round_seconds``; a round
        starts early when a job it ran ends while another waits (:meth:`wait_for_round`)."""
        done = 0
        while rounds is None or done < rounds:
            began = time.monotonic()
            record = self.run_round()
            done += 1
            if output is not None:
                write_report(self.store, output)
            if exit_when_idle and self.idle():
                break
            if rounds is not None and done >= rounds:
                break
            self.wait_for_round(began + self.cfg.round_seconds, record, sleep)
        return done

    def wait_for_round(self, until: float, record: Mapping[str, Any], sleep: Callable[[float], None] = time.sleep,
                       clock: Callable[[], float] = time.monotonic) -> bool:
        """Wait until ``until`` (on ``clock``). With early rounds, while some job of the round
        ``record`` waits (live, not decided), poll ``squeue`` every :data:`EARLY_POLL` seconds and
        return ``True`` as soon as a job the round ran has ended (finished, or gone from Slurm's
        list): its GPUs are free now, so the next round starts at once, not at ``until``."""
        running = set(record.get("decided", {}))
        waiting = set(record.get("live", ())) - running
        while True:
            left = until - clock()
            if left <= 0:
                return False
            if not (self.cfg.early_rounds and waiting and running and left > EARLY_POLL):
                sleep(left)
                return False
            sleep(EARLY_POLL)
            jobs = {j.job_id: j for j in self.slurm.jobs(self.cfg.partitions)}
            ended = sorted((j for j in running if j not in jobs or jobs[j].finished), key=int)
            if ended:
                self.log(f"jobs ended while others wait: {ended}; next round now")
                return True
