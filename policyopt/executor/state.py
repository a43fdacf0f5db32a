"""The executor's persistent state: one SQLite file (WAL journal) that survives a restart.

Tables
------
``meta(key, value)``
    JSON values: ``config`` (the run's :class:`ExecutorConfig` and job list), ``throughputs`` (the
    table the policy uses and where it came from), ``time`` (the executor clock, seconds),
    ``round`` (index of the next round), ``mechanism`` (``RoundMechanism.to_state()``), ``clock``
    (the recompute clock), ``placement`` (last round's job → slot indices and pairs),
    ``allocation`` (the last solve), ``starts`` (wall time of every executor start), ``finished``.
``jobs(job_id, …)``
    One row per job: status (``pending`` → ``active`` → ``completed``/``failed``), steps required
    and done, the newest checkpoint, restarts, crashes, the last error, losses, first start and
    finish times, steps lost to crashes, the live worker process (``process``: a
    :class:`~policyopt.executor.backends.ProcessHandle` as JSON, or the launch in flight) and
    per-job statistics (``stats``: rounds run, migrations, seconds per worker type, …).
``rounds(idx, start, duration, record)``
    One row per committed round: the plan, what ran where, steps per job, utilization.
``events(id, time, wall, kind, job_id, detail)``
    Arrivals, launches, preemptions, crashes, restarts, completions, failures, executor starts.

Every round ends with one transaction that writes the jobs, the round row and the meta values
together, so a restart sees the state at the end of the last committed round; a worker process
is recorded (``jobs.process``) right after it starts, so a restarted executor can retire it.
The file carries a schema version and migrates on open (:mod:`policyopt.sqlite_schema`).
"""
from __future__ import annotations

import json
import math
import sqlite3
import threading
import time
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator, Mapping

from policyopt.errors import InputError
from policyopt.sqlite_schema import migrate

__all__ = ["ExecutorState", "JobRecord", "JOB_STATUSES"]

JOB_STATUSES = ("pending", "active", "completed", "failed")

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY,
    position INTEGER NOT NULL,
    spec TEXT NOT NULL,
    status TEXT NOT NULL,
    steps_required INTEGER NOT NULL,
    steps_done INTEGER NOT NULL,
    checkpoint TEXT,
    restarts INTEGER NOT NULL,
    crashes INTEGER NOT NULL,
    consecutive_crashes INTEGER NOT NULL,
    error TEXT,
    initial_loss REAL,
    final_loss REAL,
    first_start REAL,
    finish REAL,
    steps_lost INTEGER NOT NULL,
    process TEXT,
    stats TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS rounds (idx INTEGER PRIMARY KEY, start REAL NOT NULL, duration REAL NOT NULL,
                                   record TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS events (id INTEGER PRIMARY KEY AUTOINCREMENT, time REAL NOT NULL, wall REAL NOT NULL,
                                   kind TEXT NOT NULL, job_id TEXT, detail TEXT);
"""

#: schema migrations in order (``PRAGMA user_version`` counts those applied; policyopt.sqlite_schema)
_MIGRATIONS = (_SCHEMA,)

_JOB_COLUMNS = ("job_id", "position", "spec", "status", "steps_required", "steps_done", "checkpoint", "restarts",
                "crashes", "consecutive_crashes", "error", "initial_loss", "final_loss", "first_start", "finish",
                "steps_lost", "process", "stats")


def _finite_or_none(x: Any) -> float | None:
    return None if x is None or not math.isfinite(float(x)) else float(x)


@dataclass
class JobRecord:
    """A job's persisted state (one ``jobs`` row)."""

    job_id: str
    position: int
    spec: dict[str, Any]
    status: str = "pending"
    steps_required: int = 0
    steps_done: int = 0
    checkpoint: str | None = None
    restarts: int = 0
    crashes: int = 0
    consecutive_crashes: int = 0
    error: str | None = None
    initial_loss: float | None = None
    final_loss: float | None = None
    first_start: float | None = None
    finish: float | None = None
    steps_lost: int = 0
    process: dict[str, Any] | None = None
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def arrival(self) -> float:
        return float(self.spec.get("arrival", 0.0))

    @property
    def job_type(self) -> str:
        return str(self.spec["job_type"])

    def to_row(self) -> tuple[Any, ...]:
        d = asdict(self)
        d["spec"] = json.dumps(self.spec, sort_keys=True)
        d["process"] = json.dumps(self.process) if self.process is not None else None
        d["stats"] = json.dumps(self.stats, sort_keys=True)
        d["initial_loss"] = _finite_or_none(self.initial_loss)
        d["final_loss"] = _finite_or_none(self.final_loss)
        return tuple(d[c] for c in _JOB_COLUMNS)

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "JobRecord":
        d = {c: row[c] for c in _JOB_COLUMNS}
        d["spec"] = json.loads(d["spec"])
        d["process"] = json.loads(d["process"]) if d["process"] else None
        d["stats"] = json.loads(d["stats"])
        return cls(**d)


class ExecutorState:
    """The SQLite state file (see the module docstring). Thread-safe for one writer at a time."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        if self.path.exists() and self.path.is_dir():
            raise InputError("state", str(self.path), "is a directory, expected an SQLite file path")
        self.path.parent.mkdir(parents=True, exist_ok=True)
        from policyopt.state_file import check_state_file

        check_state_file(self.path, ("meta", "jobs", "rounds", "events"), command="policyopt state repair")
        try:
            self._db = sqlite3.connect(str(self.path), timeout=30.0, isolation_level=None, check_same_thread=False)
            self._db.row_factory = sqlite3.Row
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=NORMAL")
            migrate(self._db, _MIGRATIONS, field="state", value=str(self.path))
        except sqlite3.DatabaseError as exc:
            raise InputError("state", str(self.path), f"not a usable SQLite file: {exc}") from None
        self._lock = threading.RLock()
        self._depth = 0

    # -- transactions
    @contextmanager
    def transaction(self) -> Iterator["ExecutorState"]:
        """``BEGIN IMMEDIATE`` … ``COMMIT`` (nested calls join the outer transaction)."""
        with self._lock:
            outer = self._depth == 0
            if outer:
                self._db.execute("BEGIN IMMEDIATE")
            self._depth += 1
            try:
                yield self
            except BaseException:
                self._depth -= 1
                if outer:
                    self._db.execute("ROLLBACK")
                raise
            self._depth -= 1
            if outer:
                self._db.execute("COMMIT")

    # -- meta
    def get(self, key: str, default: Any = None) -> Any:
        with self._lock:
            row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return default if row is None else json.loads(row["value"])

    def put(self, key: str, value: Any) -> None:
        with self.transaction():
            self._db.execute("INSERT INTO meta(key, value) VALUES(?, ?) "
                             "ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                             (key, json.dumps(value, sort_keys=True)))

    def is_new(self) -> bool:
        """True when the file holds no run yet."""
        return self.get("config") is None

    # -- jobs
    def jobs(self) -> dict[str, JobRecord]:
        """Every job, in the order of the job list."""
        with self._lock:
            rows = self._db.execute(f"SELECT {', '.join(_JOB_COLUMNS)} FROM jobs ORDER BY position").fetchall()
        return {r["job_id"]: JobRecord.from_row(r) for r in rows}

    def save_jobs(self, records: Mapping[str, JobRecord] | list[JobRecord]) -> None:
        items = list(records.values()) if isinstance(records, Mapping) else list(records)
        marks = ", ".join("?" for _ in _JOB_COLUMNS)
        with self.transaction():
            self._db.executemany(f"INSERT OR REPLACE INTO jobs({', '.join(_JOB_COLUMNS)}) VALUES({marks})",
                                 [r.to_row() for r in items])

    # -- rounds and events
    def add_round(self, index: int, start: float, duration: float, record: Mapping[str, Any]) -> None:
        with self.transaction():
            self._db.execute("INSERT OR REPLACE INTO rounds(idx, start, duration, record) VALUES(?, ?, ?, ?)",
                             (int(index), float(start), float(duration), json.dumps(record, sort_keys=True)))

    def rounds(self) -> list[dict[str, Any]]:
        with self._lock:
            rows = self._db.execute("SELECT idx, start, duration, record FROM rounds ORDER BY idx").fetchall()
        return [{"index": r["idx"], "start": r["start"], "duration": r["duration"], **json.loads(r["record"])}
                for r in rows]

    def event(self, time_s: float, kind: str, job_id: str | None = None, detail: Any = None) -> None:
        with self.transaction():
            self._db.execute("INSERT INTO events(time, wall, kind, job_id, detail) VALUES(?, ?, ?, ?, ?)",
                             (float(time_s), time.time(), kind, job_id,
                              json.dumps(detail, sort_keys=True) if detail is not None else None))

    def events(self, kind: str | None = None) -> list[dict[str, Any]]:
        sql = "SELECT id, time, wall, kind, job_id, detail FROM events"
        args: tuple[Any, ...] = ()
        if kind is not None:
            sql += " WHERE kind = ?"
            args = (kind,)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY id", args).fetchall()
        return [{"id": r["id"], "time": r["time"], "wall": r["wall"], "kind": r["kind"], "job_id": r["job_id"],
                 "detail": json.loads(r["detail"]) if r["detail"] else None} for r in rows]

    def close(self) -> None:
        with self._lock:
            self._db.close()
