"""Stateful cluster sessions driven by an external scheduler.

A session holds a cluster (declared worker types, live workers), jobs (interchange job objects),
a policy with options, and a round-based mechanism. Each round the scheduler

1. reports progress (steps done per job, seconds each ran, the round's wall time, completions),
2. asks for the next round: the open round is *closed* (the mechanism records the time each
   combination received, ``r[k, c] += d_k``; the session clock advances by the round's wall time;
   jobs whose ``steps_remaining`` reached 0 or that were reported completed leave), the policy
   allocation ``X`` is *recomputed* when due (after a worker registration or failure: always; after
   job arrivals or completions: when ``min_recompute_interval`` seconds of session time passed since
   the last recompute), then the mechanism picks this round's combinations by priority
   ``X·T / r`` and the placement stages map them to concrete worker ids (consolidation, lease
   renewal, migration minimization).

Live values derived from the session clock ``now`` (seconds): a job's ``time_since_start`` is
``time_since_start₀ + (now − added_at)`` and its remaining SLO ``slo_seconds₀ − (now − added_at)``
(dropped once the deadline has passed).

Every operation validates its whole input before writing and writes everything in one
transaction (:meth:`Store.commit`), under a per-session lock, with the version check of the store,
so a failing request leaves the session exactly as it was and concurrent writers never lose an
update.
"""
from __future__ import annotations

import contextvars
import copy
import secrets
import threading
import time
from typing import Any, Callable, Mapping, Sequence, TypeVar

from policyopt.errors import InputError, UnknownNameError
from policyopt.mechanism import RoundMechanism
from policyopt.mechanism.recompute import RecomputeClock
from policyopt.policy import Policy
from policyopt.problem import Problem

from . import rounds as R
from .limits import Limits
from .round_steps import close_open_round, plan_round, recompute_allocation
from .store import Changes, JobRow, NotFoundError, RoundRow, SessionRow, Store, WorkerRow
from .session_errors import ItemNotFound, RoundConflict, SessionNotFound
from .validation import check_json_numbers, finite_number, make_policy, prefixed

__all__ = ["Limits", "SessionManager", "SessionNotFound", "ItemNotFound", "RoundConflict"]

T = TypeVar("T")

#: ``(key, request digest)`` of the request being served, set by the HTTP layer for a request that
#: carries an ``Idempotency-Key`` header (a context variable: each request runs in its own context)
IDEMPOTENCY: contextvars.ContextVar[tuple[str, str] | None] = contextvars.ContextVar("idempotency", default=None)


def _replay(store: Store, scope: str) -> dict[str, Any] | None:
    """The stored response of this request's Idempotency-Key in ``scope`` (None: run it); the same
    key with another request is an error."""
    idem = IDEMPOTENCY.get()
    if idem is None:
        return None
    prior = store.stored_response(scope, idem[0])
    if prior is None:
        return None
    if prior[0] != idem[1]:
        raise InputError("header.Idempotency-Key", idem[0], "was already used for a different request")
    return prior[1]


_JOB_FIELDS = ("id", "throughputs", "scale_factor", "weight", "steps_remaining", "time_since_start",
               "entity", "slo_seconds", "arrival", "priority")


class SessionManager:
    """All session operations (the HTTP layer only translates requests and errors)."""

    def __init__(self, store: Store, limits: Limits = Limits()) -> None:  # noqa: B008 - frozen, immutable
        self.store = store
        self.limits = limits
        self._locks: dict[str, threading.Lock] = {}
        self._guard = threading.Lock()
        #: session -> (mechanism_rev, RoundMechanism) as last committed by this process
        self._mechanisms: dict[str, tuple[int, RoundMechanism]] = {}
        self._policies: dict[str, tuple[int, Policy]] = {}  # memory across rounds (AlloX, Gandiva, warm starts)

    # ------------------------------------------------------------------------------ plumbing
    def _lock(self, sid: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(sid, threading.Lock())

    def _load(self, sid: str, **kw: Any) -> tuple[SessionRow, dict[str, JobRow], list[WorkerRow], list[dict[str, Any]]]:
        try:
            return self.store.load(sid, **kw)
        except NotFoundError:
            raise SessionNotFound(sid) from None

    def _mutate(self, sid: str, fn: Callable[[SessionRow, dict[str, JobRow], list[WorkerRow], list[dict[str, Any]]],
                                              tuple[Changes, T]],
                need_mechanism: Callable[[dict[str, Any]], bool] | None = None,
                on_commit: Callable[[], None] | None = None) -> tuple[T, int]:
        """Load → compute (``fn`` must not write) → commit → ``on_commit()``, under the session's lock.
        A request with an Idempotency-Key that already ran returns its stored response (``result``
        without ``version``, and that version) and changes nothing."""
        with self._lock(sid):
            stored = _replay(self.store, sid)
            if stored is not None:
                body = dict(stored)
                return body, int(body.pop("version"))  # type: ignore[return-value]
            sess, jobs, workers, coloc = self._load(sid, need_mechanism=need_mechanism, active_only=True)
            changes, result = fn(sess, jobs, workers, coloc)
            idem = IDEMPOTENCY.get()
            if idem is not None:
                changes.idempotency = (sid, idem[0], idem[1],
                                       lambda v: {**result, "version": v})  # type: ignore[dict-item]  # a body
            try:
                version = self.store.commit(sid, sess.version, changes)
            except NotFoundError:
                raise SessionNotFound(sid) from None
            if on_commit is not None:
                on_commit()
        return result, version

    # ------------------------------------------------------------------------------ create
    def create(self, body: Mapping[str, Any]) -> dict[str, Any]:
        """Create a session from a validated :class:`~policyopt.service.models.SessionCreate` dump."""
        cluster_spec = body["cluster"]
        check_json_numbers(cluster_spec, "cluster", magnitudes=True)
        try:
            base = Problem.from_dict({"cluster": cluster_spec, "jobs": [], "entities": body.get("entities") or {},
                                      "colocated_types": list(body.get("colocated_types") or [])})
        except InputError as exc:
            if exc.field.startswith(("cluster", "entities", "colocated_types")):
                raise
            raise prefixed(exc, "cluster") from None
        policy, options = make_policy(body["policy"], body.get("options") or {},
                                      default_time_limit=self.limits.default_time_limit,
                                      max_time_limit=self.limits.max_time_limit)
        round_length = finite_number("round_length", body.get("round_length", 360.0), low=0.0, strict=True)
        min_interval = finite_number("min_recompute_interval", body.get("min_recompute_interval", 0.0), low=0.0)
        cap = body.get("deficit_cap")
        cap = None if cap is None else finite_number("deficit_cap", cap, low=0.0)
        placer, migration = body.get("placer", "consolidate"), body.get("migration", "matching")
        try:
            R.check_stage_names(placer, "none")
        except InputError as exc:
            raise InputError("placer", placer, exc.problem) from None
        try:
            R.check_stage_names("consolidate", migration)
        except InputError as exc:
            raise InputError("migration", migration, exc.problem) from None
        types = base.cluster.names
        cluster = {w.name: {"count": w.count, "gpus_per_server": w.gpus_per_server, "price_per_hour": w.price_per_hour}
                   for w in base.cluster.worker_types}
        config = {"cluster": cluster, "worker_types": types, "policy": policy.name, "options": options,
                  "round_length": round_length, "min_recompute_interval": min_interval, "placer": placer,
                  "migration": migration, "work_conserving": bool(body.get("work_conserving", True)),
                  "deficit_cap": cap,
                  "entities": {n: {"weight": e.weight, "policy": e.policy} for n, e in base.entities.items()},
                  "colocated_types": [{"job_types": list(c.job_types), "worker_type": c.worker_type,
                                       "throughputs": list(c.throughputs)} for c in base.colocated_types],
                  "packing": bool(body.get("packing", False))}
        specs: list[dict[str, Any]] = []
        if body.get("auto_workers", True):
            for w in base.cluster.worker_types:
                per = w.gpus_per_server or max(w.count, 1)
                specs += [{"id": f"{w.name}-{g // per}-{g % per}", "worker_type": w.name,
                           "server": f"{w.name}-{g // per}"} for g in range(w.count)]
        specs += list(body.get("workers") or [])
        state: dict[str, Any] = {"round": None, "time": 0.0, "next_worker_seq": 0, "next_job_seq": 0,
                 "clock": R.clock_to_state(RecomputeClock(min_interval)), "force_recompute": False,
                 "mechanism_rev": 0, "open_round": None, "allocation": None, "removed_since_round": []}
        new_workers = self._validate_workers(config, [], specs, state)
        sid = secrets.token_hex(16)
        out = {"session_id": sid, "policy": policy.name, "options": options,
               "worker_counts": self._counts(config, new_workers), "round_length": round_length}
        changes = Changes(state=state, workers_add=new_workers, mechanism=None)
        idem = IDEMPOTENCY.get()
        with self._guard:  # one creation per key in this process (the store's key is the last word)
            stored = _replay(self.store, "")
            if stored is not None:
                return stored
            if idem is not None:
                changes.idempotency = ("", idem[0], idem[1], lambda v: {**out, "version": v})
            version = self.store.create(sid, config, changes)
        return {**out, "version": version}

    # ------------------------------------------------------------------------------ reads
    def info(self, sid: str) -> dict[str, Any]:
        sess, _, workers, _ = self._load(sid, jobs=False)
        by_status = self.store.job_counts(sid)
        c, st = sess.config, sess.state
        return {"session_id": sid, "version": sess.version, "round": st["round"], "time": st["time"],
                "policy": c["policy"], "options": c["options"], "round_length": c["round_length"],
                "worker_counts": self._counts(c, workers), "jobs": by_status, "allocation": st["allocation"]}

    def jobs(self, sid: str, status: str | None = None) -> list[dict[str, Any]]:
        sess, jobs, _, _ = self._load(sid, workers=False, active_only=status == "active")
        now = sess.state["time"]
        return [self._job_out(j, now) for j in jobs.values() if status is None or j.status == status]

    def workers(self, sid: str) -> list[dict[str, Any]]:
        _, _, workers, _ = self._load(sid, jobs=False)
        return [{"id": w.worker_id, "worker_type": w.worker_type, "server": w.server} for w in workers]

    def round(self, sid: str, index: int) -> dict[str, Any]:
        try:
            row = self.store.load_round(sid, index)
        except NotFoundError:
            raise SessionNotFound(sid) from None
        if row is None:
            kept = self.store.round_range(sid)
            if kept is not None and index < kept[0]:
                raise ItemNotFound("round", str(index), f"no longer kept: the server keeps the last "
                                                        f"{self.limits.round_history} rounds ({kept[0]}..{kept[1]})")
            raise ItemNotFound("round", str(index), "no such round in this session")
        return {"round": row.round, "started_at": row.started_at, "duration": row.duration,
                "plan": row.plan, "progress": row.progress}

    def delete(self, sid: str) -> None:
        with self._lock(sid):
            try:
                self.store.delete(sid)
            except NotFoundError:
                raise SessionNotFound(sid) from None
        with self._guard:
            self._locks.pop(sid, None)
            self._mechanisms.pop(sid, None)
            self._policies.pop(sid, None)

    @staticmethod
    def _job_out(j: JobRow, now: float) -> dict[str, Any]:
        end = j.finished_at if j.finished_at is not None else now
        return {"id": j.job_id, "status": j.status, "steps_done": j.steps_done, "steps_remaining": j.steps_remaining,
                "time_since_start": j.time_since_start + (end - j.added_at), "added_at": j.added_at,
                "finished_at": j.finished_at, "spec": j.spec}

    @staticmethod
    def _counts(config: Mapping[str, Any], workers: Sequence[WorkerRow]) -> dict[str, int]:
        counts = {t: 0 for t in config["worker_types"]}
        for w in workers:
            counts[w.worker_type] += 1
        return counts

    # ------------------------------------------------------------------------------ workers
    def _validate_workers(self, config: Mapping[str, Any], live: Sequence[WorkerRow],
                          specs: Sequence[Mapping[str, Any]], state: dict[str, Any]) -> list[WorkerRow]:
        if len(live) + len(specs) > self.limits.max_workers_per_session:
            raise InputError("workers", len(specs),
                             f"a session holds at most {self.limits.max_workers_per_session} workers")
        ids = {w.worker_id for w in live}
        server_type = {w.server: w.worker_type for w in live}
        server_size: dict[str, int] = {}
        for w in live:
            server_size[w.server] = server_size.get(w.server, 0) + 1
        types = config["worker_types"]
        out: list[WorkerRow] = []
        seq = state["next_worker_seq"]
        for i, spec in enumerate(specs):
            wid, wt = spec["id"], spec["worker_type"]
            server = spec.get("server") or wid
            if not isinstance(wid, str) or not wid:
                raise InputError(f"workers[{i}].id", wid, "must be a non-empty string")
            if wid in ids:
                raise InputError(f"workers[{i}].id", wid, "a live worker already has this id")
            if wt not in types:
                raise UnknownNameError(f"workers[{i}].worker_type", wt, types)
            if server_type.setdefault(server, wt) != wt:
                raise InputError(f"workers[{i}].server", server,
                                 f"server holds workers of type {server_type[server]!r}; a server has one type")
            server_size[server] = server_size.get(server, 0) + 1
            gps = config["cluster"][wt]["gpus_per_server"]
            if gps is not None and server_size[server] > gps:
                raise InputError(f"workers[{i}].server", server,
                                 f"more than gpus_per_server={gps} workers on one server")
            ids.add(wid)
            out.append(WorkerRow(wid, seq, wt, server))
            seq += 1
        state["next_worker_seq"] = seq
        return out

    def add_workers(self, sid: str, specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        def fn(sess: SessionRow, jobs: dict[str, JobRow], workers: list[WorkerRow], coloc: list[dict[str, Any]]
               ) -> tuple[Changes, dict[str, Any]]:
            state = sess.state  # loaded for this request only: safe to change
            new = self._validate_workers(sess.config, workers, specs, state)
            state["force_recompute"] = True
            return Changes(state=state, workers_add=new), {
                "added": [w.worker_id for w in new], "worker_counts": self._counts(sess.config, [*workers, *new])}

        out, version = self._mutate(sid, fn)
        return {**out, "version": version}

    def remove_worker(self, sid: str, worker_id: str) -> dict[str, Any]:
        def fn(sess: SessionRow, jobs: dict[str, JobRow], workers: list[WorkerRow], coloc: list[dict[str, Any]]
               ) -> tuple[Changes, dict[str, Any]]:
            if worker_id not in {w.worker_id for w in workers}:
                raise ItemNotFound("worker_id", worker_id, "no live worker with this id")
            state = sess.state  # loaded for this request only: safe to change
            clock = R.clock_from_state(state["clock"])
            clock.note("worker_failure", state["time"], worker_id)
            state["clock"] = R.clock_to_state(clock)
            state["force_recompute"] = True
            rest = [w for w in workers if w.worker_id != worker_id]
            return Changes(state=state, workers_remove=[worker_id]), {
                "removed": worker_id, "worker_counts": self._counts(sess.config, rest)}

        out, version = self._mutate(sid, fn)
        return {**out, "version": version}

    # ------------------------------------------------------------------------------ jobs
    def add_jobs(self, sid: str, job_specs: Sequence[Mapping[str, Any]],
                 colocated: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
        # every number is checked by Problem.from_dict below (policyopt.schema.MAGNITUDE)
        def fn(sess: SessionRow, jobs: dict[str, JobRow], workers: list[WorkerRow], coloc: list[dict[str, Any]]
               ) -> tuple[Changes, dict[str, Any]]:
            cfg, state = sess.config, sess.state  # private to this request
            n_active = sum(j.status == "active" for j in jobs.values())
            if n_active + len(job_specs) > self.limits.max_jobs_per_session:
                raise InputError("jobs", len(job_specs), f"a session holds at most {self.limits.max_jobs_per_session} "
                                                         f"active jobs ({n_active} active now)")
            new_ids: list[Any] = []  # ids as given (None: assigned later)
            wanted = [str(j.get("id")) for j in job_specs if isinstance(j, Mapping)]
            used = self.store.existing_job_ids(sid, wanted)  # ids are never reused, also of jobs that left
            for i, spec in enumerate(job_specs):
                if spec.get("steps_remaining") is None:
                    raise InputError(f"jobs[{i}].steps_remaining", None, "is required in a session")
                jid = spec.get("id")
                jid = str(jid) if isinstance(jid, (int, float)) and not isinstance(jid, bool) else jid
                if isinstance(jid, str) and (jid in used or jid in new_ids):
                    raise InputError(f"jobs[{i}].id", jid, "job id already used in this session")
                new_ids.append(jid)
            live = self._counts(cfg, workers)
            nominal = {t: {**{k: v for k, v in spec.items() if v is not None}, "count": max(spec["count"], live[t])}
                       for t, spec in cfg["cluster"].items()}
            active = [j for j in jobs.values() if j.status == "active"]
            problem = Problem.from_dict({
                "cluster": {"worker_types": nominal},
                "jobs": [*job_specs, *(dict(j.spec) for j in active)],
                "colocated": list(colocated), "entities": cfg["entities"],
                "colocated_types": cfg.get("colocated_types", [])})
            known_pairs = {(min(e["jobs"]), max(e["jobs"]), e["worker_type"]) for e in coloc}
            sf = {j.id: j.scale_factor for j in problem.jobs}
            for i, c in enumerate(problem.colocated):
                if (min(c.jobs), max(c.jobs), c.worker_type) in known_pairs:
                    raise InputError(f"colocated[{i}]", list(c.jobs), "colocation already registered in this session")
                if sf[c.jobs[0]] != sf[c.jobs[1]]:
                    raise InputError(f"colocated[{i}].jobs", list(c.jobs),
                                     "paired jobs must have the same scale_factor (they share the same workers)")
            now = state["time"]
            clock = R.clock_from_state(state["clock"])
            seq = state["next_job_seq"]
            rows = []
            full = problem.to_dict()["jobs"]
            for k in range(len(job_specs)):
                spec = full[k]
                rows.append(JobRow(spec["id"], seq + k, "active", spec, 0.0, float(spec["steps_remaining"]),
                                   float(spec["time_since_start"]), now))
                clock.note("arrival", now, spec["id"])
            state["next_job_seq"] = seq + len(job_specs)
            state["clock"] = R.clock_to_state(clock)
            new_coloc = [{"jobs": list(c.jobs), "worker_type": c.worker_type, "throughputs": list(c.throughputs)}
                         for c in problem.colocated]
            return Changes(state=state, jobs=rows, colocated=new_coloc), {"added": [r.job_id for r in rows]}

        out, version = self._mutate(sid, fn)
        return {**out, "version": version}

    def remove_job(self, sid: str, job_id: str) -> dict[str, Any]:
        def fn(sess: SessionRow, jobs: dict[str, JobRow], workers: list[WorkerRow], coloc: list[dict[str, Any]]
               ) -> tuple[Changes, dict[str, Any]]:
            job = jobs.get(job_id)
            if job is None or job.status != "active":
                raise ItemNotFound("job_id", job_id, "no active job with this id")
            state = sess.state  # loaded for this request only: safe to change
            now = state["time"]
            row = copy.copy(job)
            row.status, row.finished_at = "removed", now
            clock = R.clock_from_state(state["clock"])
            clock.note("completion", now, job_id)
            state["clock"] = R.clock_to_state(clock)
            state["removed_since_round"].append(job_id)
            return Changes(state=state, job_updates=[row]), {"removed": job_id}

        out, version = self._mutate(sid, fn)
        return {**out, "version": version}

    # ------------------------------------------------------------------------------ progress
    def _apply_progress(self, cfg: Mapping[str, Any], state: dict[str, Any], jobs: dict[str, JobRow],
                        report: Mapping[str, Any], prefix: str) -> list[JobRow]:
        """Validate ``report`` completely, then fold it into ``state`` (a copy) and return changed jobs."""
        open_ = state["open_round"]
        rnd = report.get("round")
        if open_ is None:
            raise RoundConflict(f"{prefix}round", rnd, "no round is open; call POST .../rounds/next first")
        if rnd != open_["index"]:
            raise RoundConflict(f"{prefix}round", rnd, f"the open round is {open_['index']}")
        ran = open_["assignment"]
        L = cfg["round_length"]
        steps = report.get("steps") or {}
        durations = report.get("durations") or {}
        for name, table in (("steps", steps), ("durations", durations)):
            for j, v in table.items():
                if j not in ran:
                    raise InputError(f"{prefix}{name}.{j}", j, f"job did not run in round {rnd}")
                finite_number(f"{prefix}{name}.{j}", v, low=0.0, high=L if name == "durations" else None)
        rd = report.get("round_duration")
        if rd is not None:
            finite_number(f"{prefix}round_duration", rd, low=0.0, strict=True)
        completed = list(report.get("completed") or [])
        for i, j in enumerate(completed):
            if j not in ran:
                raise InputError(f"{prefix}completed[{i}]", j, f"job did not run in round {rnd}")
        prog = open_["progress"]
        changed: dict[str, JobRow] = {}
        for j, v in steps.items():
            job = jobs.get(j)
            if job is None or job.status != "active" or float(v) == 0.0:
                continue
            row = changed.setdefault(j, copy.copy(job))
            row.steps_done += float(v)
            row.steps_remaining = max(0.0, row.steps_remaining - float(v))
            prog["steps"][j] = prog["steps"].get(j, 0.0) + float(v)
        prog["durations"].update({j: float(v) for j, v in durations.items()})
        if rd is not None:
            prog["round_duration"] = float(rd)
        prog["completed"] = sorted(set(prog["completed"]) | set(completed))
        return list(changed.values())

    def report_progress(self, sid: str, report: Mapping[str, Any]) -> dict[str, Any]:
        def fn(sess: SessionRow, jobs: dict[str, JobRow], workers: list[WorkerRow], coloc: list[dict[str, Any]]
               ) -> tuple[Changes, dict[str, Any]]:
            state = sess.state  # loaded for this request only: safe to change
            rows = self._apply_progress(sess.config, state, jobs, report, "")
            return Changes(state=state, job_updates=rows), {
                "round": state["open_round"]["index"],
                "steps_remaining": {r.job_id: r.steps_remaining for r in rows}}

        out, version = self._mutate(sid, fn)
        return {**out, "version": version}

    # ------------------------------------------------------------------------------ rounds
    def next_round(self, sid: str, request: Mapping[str, Any]) -> dict[str, Any]:
        """Close the open round (if any) and plan the next one (module docstring)."""

        def fn(sess: SessionRow, jobs: dict[str, JobRow], workers: list[WorkerRow], coloc: list[dict[str, Any]]
               ) -> tuple[Changes, dict[str, Any]]:
            t_start = time.perf_counter()
            cfg, state = sess.config, sess.state  # private to this request
            close = request.get("close_round")
            if close is not None and close != state["round"]:
                raise RoundConflict("close_round", close, f"the open round is {state['round']}")
            changed: dict[str, JobRow] = {}
            if request.get("progress") is not None:
                for row in self._apply_progress(cfg, state, jobs, request["progress"], "progress."):
                    changed[row.job_id] = row
            view = {**jobs, **changed}
            held = self._policies.pop(sid, None)  # the policy object of this server's last round, if it was
            policy_obj = held[1] if held is not None and held[0] == state["mechanism_rev"] else None
            cached = self._mechanisms.pop(sid, None)
            if cached is not None and cached[0] == state["mechanism_rev"]:
                mech: RoundMechanism | None = cached[1]
            else:
                mech = R.mechanism_from_state(sess.mechanism) if sess.mechanism is not None else None
            clock = R.clock_from_state(state["clock"])
            closed = close_open_round(cfg, state, view, changed, mech, clock)
            now, completed, previous = closed.now, closed.completed, closed.previous
            view = {**jobs, **changed}
            gone = [*completed, *state["removed_since_round"]]
            if mech is not None and gone:
                known = set(mech.arrays.job_ids)
                mech.remove_jobs([j for j in gone if j in known])
            state["removed_since_round"] = []

            counts = self._counts(cfg, workers)
            active = [j for j in view.values() if j.status == "active"]
            rec = recompute_allocation(cfg, state, active, counts, coloc, now, clock, mech, policy_obj,
                                       self._next_index(state))
            mech, policy_obj = rec.mech, rec.policy
            index = self._next_index(state)
            plan = plan_round(cfg, mech, counts, workers, active, previous, closed.previous_pairs)
            selection, assignment, pairs = plan.selection, plan.assignment, plan.pairs
            running = set(assignment)
            seen: set[str] = set()
            pending = []
            for j in [*plan.mech_pending, *(j.job_id for j in active)]:
                if j not in running and j not in seen and view[j].status == "active":
                    seen.add(j)
                    pending.append(j)
            migrated = sorted(j for j, ws in assignment.items() if j in previous and set(previous[j]) != set(ws))
            state["round"] = index
            state["time"] = now
            state["mechanism_rev"] += 1
            result_mech[0] = (state["mechanism_rev"], mech)
            result_policy[0] = policy_obj
            state["clock"] = R.clock_to_state(clock)
            timings = {**plan.timings, "solve": rec.solve_seconds, "total": time.perf_counter() - t_start}
            response = {"session_id": sid, "round": index, "round_length": cfg["round_length"], "time": now,
                        "placements": plan.placements, "assignment": assignment, "pending": pending,
                        "unschedulable": rec.unschedulable, "completed": completed, "migrated": migrated,
                        "recomputed": rec.recomputed, "allocation": state["allocation"], "timings": timings,
                        "migration": plan.migration}
            state["open_round"] = {"index": index, "selection": R.assignment_to_state(selection),
                                   "assignment": assignment, "pairs": pairs,
                                   "progress": {"steps": {}, "durations": {}, "round_duration": None, "completed": []}}
            return Changes(state=state, job_updates=list(changed.values()),
                           rounds=[RoundRow(index, now, None, response, None)], round_closes=closed.closes,
                           prune_rounds_before=index - self.limits.round_history + 1,
                           mechanism=R.mechanism_to_state(mech) if mech is not None else None), response

        result_mech: list[tuple[int, RoundMechanism | None] | None] = [None]
        result_policy: list[Policy | None] = [None]

        def need_mechanism(st: Mapping[str, Any]) -> bool:  # evaluated under the session lock
            held = self._mechanisms.get(sid)
            return held is None or held[0] != st["mechanism_rev"]

        def keep_mechanism() -> None:  # committed: reuse the object for the next round
            rev, mech = result_mech[0] or (0, None)
            if mech is not None:
                self._mechanisms[sid] = (rev, mech)
            if result_policy[0] is not None:
                self._policies[sid] = (rev, result_policy[0])

        out, version = self._mutate(sid, fn, need_mechanism, keep_mechanism)
        out["version"] = version
        return out

    @staticmethod
    def _next_index(state: Mapping[str, Any]) -> int:
        return 0 if state["round"] is None else int(state["round"]) + 1
