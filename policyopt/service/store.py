"""SQLite persistence of cluster sessions (WAL mode, one transaction per change).

Tables (all keyed by ``session_id``)::

    sessions(id, created, version, config, state, mechanism)  config/state/mechanism: JSON text
    workers(session_id, worker_id, seq, worker_type, server)  live workers, seq = registration order
    jobs(session_id, job_id, seq, status, spec, steps_done, steps_remaining, time_since_start,
         added_at, finished_at)                               spec: interchange job object (JSON)
    colocated(session_id, job_a, job_b, worker_type, spec)    colocated throughputs (JSON)
    rounds(session_id, round, started_at, duration, plan, progress)   round history (JSON)

Concurrency: every change is written by :meth:`Store.commit` inside ``BEGIN IMMEDIATE`` (one
writer at a time) after checking that the session's ``version`` is still the one the change was
computed from (optimistic check; a mismatch raises :class:`ConflictError` and writes nothing),
then ``version += 1``. Readers see a consistent snapshot (one read transaction). A new
:class:`Store` on the same file sees everything committed before, so a restarted service
continues its sessions exactly.

The mechanism state (the largest part, ``O(jobs × worker types)``) has its own column, read only
when the caller does not hold the current one (``need_mechanism``); job specs never change after
insertion, so their parsed form is cached per ``(session, job)``.

The file carries a schema version and migrates on open (:mod:`policyopt.sqlite_schema`).

Cost follows the active jobs only: requests that change a session read its *active* jobs (index
``jobs_by_status``, schema version 2), a job's colocated entries are deleted when it leaves, the
job counts of a summary are one ``GROUP BY``, and the round history keeps the last
``round_history`` rounds (older rows are deleted in the transaction that opens a round; SQLite
reuses their pages, so the file stops growing).
"""
from __future__ import annotations

import json
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

from policyopt.sqlite_schema import migrate

__all__ = ["Store", "SessionRow", "JobRow", "WorkerRow", "RoundRow", "Changes", "ConflictError",
           "NotFoundError", "UNCHANGED"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS sessions (
    id TEXT PRIMARY KEY, created REAL NOT NULL, version INTEGER NOT NULL,
    config TEXT NOT NULL, state TEXT NOT NULL, mechanism TEXT);
CREATE TABLE IF NOT EXISTS workers (
    session_id TEXT NOT NULL, worker_id TEXT NOT NULL, seq INTEGER NOT NULL,
    worker_type TEXT NOT NULL, server TEXT NOT NULL,
    PRIMARY KEY (session_id, worker_id));
CREATE TABLE IF NOT EXISTS jobs (
    session_id TEXT NOT NULL, job_id TEXT NOT NULL, seq INTEGER NOT NULL, status TEXT NOT NULL,
    spec TEXT NOT NULL, steps_done REAL NOT NULL, steps_remaining REAL NOT NULL,
    time_since_start REAL NOT NULL, added_at REAL NOT NULL, finished_at REAL,
    PRIMARY KEY (session_id, job_id));
CREATE TABLE IF NOT EXISTS colocated (
    session_id TEXT NOT NULL, job_a TEXT NOT NULL, job_b TEXT NOT NULL, worker_type TEXT NOT NULL,
    spec TEXT NOT NULL, PRIMARY KEY (session_id, job_a, job_b, worker_type));
CREATE TABLE IF NOT EXISTS rounds (
    session_id TEXT NOT NULL, round INTEGER NOT NULL, started_at REAL NOT NULL, duration REAL,
    plan TEXT NOT NULL, progress TEXT,
    PRIMARY KEY (session_id, round));
"""

#: version 2: the indexes that keep a request's cost on the active jobs
_ACTIVE_INDEXES = """
CREATE INDEX IF NOT EXISTS jobs_by_status ON jobs (session_id, status, seq);
CREATE INDEX IF NOT EXISTS colocated_by_b ON colocated (session_id, job_b);
"""

#: schema migrations in order (``PRAGMA user_version`` counts those applied; policyopt.sqlite_schema)
#: version 3: stored responses of requests sent with an Idempotency-Key (scope: a session id, or
#: "" for session creation)
_IDEMPOTENCY = """
CREATE TABLE IF NOT EXISTS idempotency (
    scope TEXT NOT NULL, key TEXT NOT NULL, request TEXT NOT NULL, response TEXT NOT NULL,
    created REAL NOT NULL, PRIMARY KEY (scope, key));
"""

_MIGRATIONS = (_SCHEMA, _ACTIVE_INDEXES, _IDEMPOTENCY)


class ConflictError(Exception):
    """The session changed since it was read (another writer committed first)."""


class NotFoundError(Exception):
    """No session with that id."""


@dataclass
class SessionRow:
    id: str
    created: float
    version: int
    config: dict[str, Any]
    state: dict[str, Any]
    mechanism: Any = None  # filled by load(need_mechanism=...); UNCHANGED when not read


@dataclass
class JobRow:
    job_id: str
    seq: int
    status: str  # active | completed | removed
    spec: dict[str, Any]
    steps_done: float
    steps_remaining: float
    time_since_start: float
    added_at: float
    finished_at: float | None = None


@dataclass
class WorkerRow:
    worker_id: str
    seq: int
    worker_type: str
    server: str


@dataclass
class RoundRow:
    round: int
    started_at: float
    duration: float | None
    plan: dict[str, Any]
    progress: dict[str, Any] | None = None


_SPEC_CACHE_LIMIT = 500_000  # parsed job specs kept in memory (cleared when full)

#: ``Changes.mechanism`` value meaning "leave the stored mechanism as it is"
UNCHANGED = object()


@dataclass
class Changes:
    """Everything one request writes for one session (applied atomically by :meth:`Store.commit`)."""

    state: dict[str, Any]
    jobs: list[JobRow] = field(default_factory=list)  # new jobs (inserted)
    job_updates: list[JobRow] = field(default_factory=list)  # status / steps / finished_at of existing jobs
    mechanism: Any = UNCHANGED  # a JSON object, None, or UNCHANGED
    colocated: list[dict[str, Any]] = field(default_factory=list)  # inserted
    workers_add: list[WorkerRow] = field(default_factory=list)
    workers_remove: list[str] = field(default_factory=list)
    rounds: list[RoundRow] = field(default_factory=list)  # inserted (a newly opened round)
    #: delete the history rows of rounds before this index (retention); None keeps everything
    prune_rounds_before: int | None = None
    #: ``(scope, key, request digest, response(new_version))``: store the response of a request
    #: sent with an Idempotency-Key in the same transaction as its change
    idempotency: tuple[str, str, str, Callable[[int], dict[str, Any]]] | None = None
    #: closed rounds: (round, duration, progress) written into their existing rows
    round_closes: list[tuple[int, float, dict[str, Any]]] = field(default_factory=list)


def _dumps(obj: Any) -> str:
    return json.dumps(obj, separators=(",", ":"), allow_nan=False)


class Store:
    """The session database at ``path`` (created if missing). Thread-safe: one connection per
    thread."""

    def __init__(self, path: str | Path, timeout: float = 30.0) -> None:
        self.path = str(path)
        self.timeout = timeout
        self._local = threading.local()
        self._specs: dict[tuple[str, str], dict[str, Any]] = {}
        from policyopt.state_file import check_state_file

        check_state_file(self.path, ("sessions", "workers", "jobs", "colocated", "rounds"))  # damaged: refused
        conn = self._conn()
        conn.execute("PRAGMA journal_mode=WAL")
        migrate(conn, _MIGRATIONS, field="store", value=self.path)

    def _conn(self) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None, check_same_thread=False)
            conn.execute("PRAGMA synchronous=NORMAL")
            conn.execute(f"PRAGMA busy_timeout={int(self.timeout * 1000)}")
            self._local.conn = conn
        return conn

    @contextmanager
    def _txn(self, mode: str) -> Iterator[sqlite3.Connection]:
        conn = self._conn()
        conn.execute(f"BEGIN {mode}")
        try:
            yield conn
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    # ------------------------------------------------------------------------------ reads
    def load(self, session_id: str, *, jobs: bool = True, workers: bool = True,
             need_mechanism: Callable[[dict[str, Any]], bool] | None = None, active_only: bool = False
             ) -> tuple[SessionRow, dict[str, JobRow], list[WorkerRow], list[dict[str, Any]]]:
        """Session, its jobs (by id, in arrival order; with ``active_only`` only the active ones),
        live workers (registration order) and colocated entries, from one consistent snapshot.
        ``SessionRow.mechanism`` is filled when ``need_mechanism(state)`` is true (else it is
        ``UNCHANGED``)."""
        with self._txn("DEFERRED") as c:
            r = c.execute("SELECT id, created, version, config, state FROM sessions WHERE id=?",
                          (session_id,)).fetchone()
            if r is None:
                raise NotFoundError(session_id)
            sess = SessionRow(r[0], r[1], r[2], json.loads(r[3]), json.loads(r[4]), UNCHANGED)
            if need_mechanism is not None and need_mechanism(sess.state):
                (text,) = c.execute("SELECT mechanism FROM sessions WHERE id=?", (session_id,)).fetchone()
                sess.mechanism = None if text is None else json.loads(text)
            job_rows: dict[str, JobRow] = {}
            coloc: list[dict[str, Any]] = []
            if jobs:
                specs = self._specs
                where = "session_id=? AND status='active'" if active_only else "session_id=?"
                for row in c.execute("SELECT job_id, seq, status, spec, steps_done, steps_remaining, "
                                     f"time_since_start, added_at, finished_at FROM jobs WHERE {where} "
                                     "ORDER BY seq", (session_id,)):
                    key = (session_id, row[0])
                    spec = specs.get(key)
                    if spec is None:
                        if len(specs) >= _SPEC_CACHE_LIMIT:
                            specs.clear()
                        spec = specs[key] = json.loads(row[3])
                    job_rows[row[0]] = JobRow(row[0], row[1], row[2], spec, *row[4:])
                coloc = [json.loads(s) for (s,) in c.execute(
                    "SELECT spec FROM colocated WHERE session_id=? ORDER BY rowid", (session_id,))]
            wk: list[WorkerRow] = []
            if workers:
                wk = [WorkerRow(*row) for row in c.execute(
                    "SELECT worker_id, seq, worker_type, server FROM workers WHERE session_id=? ORDER BY seq",
                    (session_id,))]
        return sess, job_rows, wk, coloc

    def job_counts(self, session_id: str) -> dict[str, int]:
        """Jobs per status (one indexed ``GROUP BY``)."""
        with self._txn("DEFERRED") as c:
            return {st: n for st, n in c.execute(
                "SELECT status, COUNT(*) FROM jobs WHERE session_id=? GROUP BY status", (session_id,))}

    def existing_job_ids(self, session_id: str, ids: list[str]) -> set[str]:
        """Which of ``ids`` the session already has (any status: job ids are never reused)."""
        out: set[str] = set()
        with self._txn("DEFERRED") as c:
            for k in range(0, len(ids), 500):
                chunk = ids[k:k + 500]
                out.update(r[0] for r in c.execute(
                    f"SELECT job_id FROM jobs WHERE session_id=? AND job_id IN ({','.join('?' * len(chunk))})",
                    (session_id, *chunk)))
        return out

    def stored_response(self, scope: str, key: str) -> tuple[str, dict[str, Any]] | None:
        """``(request digest, response)`` stored for ``key`` in ``scope``, or None."""
        with self._txn("DEFERRED") as c:
            r = c.execute("SELECT request, response FROM idempotency WHERE scope=? AND key=?", (scope, key)).fetchone()
        return None if r is None else (r[0], json.loads(r[1]))

    def round_range(self, session_id: str) -> tuple[int, int] | None:
        """The first and last round index kept in the history (None when empty)."""
        with self._txn("DEFERRED") as c:
            r = c.execute("SELECT MIN(round), MAX(round) FROM rounds WHERE session_id=?", (session_id,)).fetchone()
        return None if r is None or r[0] is None else (int(r[0]), int(r[1]))

    def load_round(self, session_id: str, round_index: int) -> RoundRow | None:
        with self._txn("DEFERRED") as c:
            if c.execute("SELECT 1 FROM sessions WHERE id=?", (session_id,)).fetchone() is None:
                raise NotFoundError(session_id)
            r = c.execute("SELECT round, started_at, duration, plan, progress FROM rounds "
                          "WHERE session_id=? AND round=?", (session_id, round_index)).fetchone()
        if r is None:
            return None
        return RoundRow(r[0], r[1], r[2], json.loads(r[3]), None if r[4] is None else json.loads(r[4]))

    def session_ids(self) -> list[str]:
        with self._txn("DEFERRED") as c:
            return [r[0] for r in c.execute("SELECT id FROM sessions ORDER BY created")]

    # ------------------------------------------------------------------------------ writes
    def create(self, session_id: str, config: dict[str, Any], changes: Changes) -> int:
        """Insert a new session (version 1) with its initial rows."""
        with self._txn("IMMEDIATE") as c:
            c.execute("INSERT INTO sessions (id, created, version, config, state) VALUES (?, ?, 0, ?, ?)",
                      (session_id, time.time(), _dumps(config), _dumps(changes.state)))
            return self._apply(c, session_id, 0, changes)

    def commit(self, session_id: str, expected_version: int, changes: Changes) -> int:
        """Apply ``changes`` if the session is still at ``expected_version``; return the new version."""
        with self._txn("IMMEDIATE") as c:
            r = c.execute("SELECT version FROM sessions WHERE id=?", (session_id,)).fetchone()
            if r is None:
                raise NotFoundError(session_id)
            if r[0] != expected_version:
                raise ConflictError(f"session {session_id} is at version {r[0]}, the change was computed "
                                    f"from version {expected_version}; retry")
            version = self._apply(c, session_id, expected_version, changes)
        for j in changes.job_updates:  # committed: a job that left needs no cached spec
            if j.status != "active":
                self._specs.pop((session_id, j.job_id), None)
        return version

    def _apply(self, c: sqlite3.Connection, sid: str, version: int, ch: Changes) -> int:
        if ch.workers_remove:
            c.executemany("DELETE FROM workers WHERE session_id=? AND worker_id=?",
                          [(sid, w) for w in ch.workers_remove])
        if ch.workers_add:
            c.executemany("INSERT INTO workers (session_id, worker_id, seq, worker_type, server) VALUES (?,?,?,?,?)",
                          [(sid, w.worker_id, w.seq, w.worker_type, w.server) for w in ch.workers_add])
        if ch.job_updates:
            c.executemany("UPDATE jobs SET status=?, steps_done=?, steps_remaining=?, finished_at=? "
                          "WHERE session_id=? AND job_id=?",
                          [(j.status, j.steps_done, j.steps_remaining, j.finished_at, sid, j.job_id)
                           for j in ch.job_updates])
        if ch.jobs:
            c.executemany(
                "INSERT INTO jobs (session_id, job_id, seq, status, spec, steps_done, steps_remaining, "
                "time_since_start, added_at, finished_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(sid, j.job_id, j.seq, j.status, _dumps(j.spec), j.steps_done, j.steps_remaining,
                  j.time_since_start, j.added_at, j.finished_at) for j in ch.jobs])
        if ch.colocated:
            c.executemany("INSERT INTO colocated (session_id, job_a, job_b, worker_type, spec) VALUES (?,?,?,?,?)",
                          [(sid, e["jobs"][0], e["jobs"][1], e["worker_type"], _dumps(e)) for e in ch.colocated])
        if ch.rounds:
            c.executemany("INSERT INTO rounds (session_id, round, started_at, duration, plan, progress) "
                          "VALUES (?,?,?,?,?,?)",
                          [(sid, r.round, r.started_at, r.duration, _dumps(r.plan),
                            None if r.progress is None else _dumps(r.progress)) for r in ch.rounds])
        if ch.prune_rounds_before is not None:
            c.execute("DELETE FROM rounds WHERE session_id=? AND round<?", (sid, ch.prune_rounds_before))
        left = [j.job_id for j in ch.job_updates if j.status != "active"]
        if left:  # a job that left takes its colocated entries with it
            c.executemany("DELETE FROM colocated WHERE session_id=? AND (job_a=? OR job_b=?)",
                          [(sid, j, j) for j in left])
        if ch.round_closes:
            c.executemany("UPDATE rounds SET duration=?, progress=? WHERE session_id=? AND round=?",
                          [(d, _dumps(p), sid, r) for r, d, p in ch.round_closes])
        c.execute("UPDATE sessions SET version=?, state=? WHERE id=?", (version + 1, _dumps(ch.state), sid))
        if ch.idempotency is not None:
            scope, key, digest, response = ch.idempotency
            c.execute("INSERT INTO idempotency (scope, key, request, response, created) VALUES (?,?,?,?,?)",
                      (scope, key, digest, _dumps(response(version + 1)), time.time()))
        if ch.mechanism is not UNCHANGED:
            c.execute("UPDATE sessions SET mechanism=? WHERE id=?",
                      (None if ch.mechanism is None else _dumps(ch.mechanism), sid))
        return version + 1

    def delete(self, session_id: str) -> None:
        with self._txn("IMMEDIATE") as c:
            if c.execute("DELETE FROM sessions WHERE id=?", (session_id,)).rowcount == 0:
                raise NotFoundError(session_id)
            for table in ("workers", "jobs", "colocated", "rounds"):
                c.execute(f"DELETE FROM {table} WHERE session_id=?", (session_id,))
            c.execute("DELETE FROM idempotency WHERE scope=?", (session_id,))
        for key in [k for k in self._specs if k[0] == session_id]:
            self._specs.pop(key, None)

    def close(self) -> None:
        """Close this thread's connection (others close when their threads end)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
