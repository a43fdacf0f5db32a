"""The controller's state in SQLite: everything a restarted controller needs to carry on.

Tables:

* ``meta(key, value)`` — JSON values: ``config`` (policy, partitions, round seconds), ``mechanism``
  (:meth:`RoundMechanism.to_state`), ``allocation`` (the installed ``X`` and the job set and GPU
  counts it was solved for), ``last_time`` (the end of the last accounted interval), ``stopped``
  (jobs requeued this round: their old GPU type and when the requeue took effect),
  ``observed_starts`` (the controller's ``squeue`` polls around each placed job's start),
  ``placed`` and ``start_cost`` (the measured seconds a start costs);
* ``jobs(job_id, ...)`` — every managed job seen: type, GPUs, submit/end time, final state, restarts;
* ``received(job_id, gpu_type, seconds)`` — GPU-type seconds each job ran, from Slurm's own start
  and end times;
* ``rounds(round, ...)`` — per round: start time, the decision, what Slurm ran during the round,
  the allocation in force, the actions taken.

A round's bookkeeping is written in one transaction before its actions are enacted, so a
controller killed at any point restarts from a consistent state: the interval since ``last_time``
is accounted from Slurm's records on the next round, once.
"""
from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any, Iterator, Mapping

from policyopt.sqlite_schema import migrate

__all__ = ["StateStore", "SCHEMA_VERSION"]

SCHEMA_VERSION = 1  # len(_MIGRATIONS)

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS jobs (
    job_id TEXT PRIMARY KEY, job_type TEXT, gpus INTEGER NOT NULL, weight REAL NOT NULL,
    steps REAL, submit_time REAL NOT NULL, first_round INTEGER NOT NULL, end_time REAL,
    final_state TEXT, restarts INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS received (
    job_id TEXT NOT NULL, gpu_type TEXT NOT NULL, seconds REAL NOT NULL,
    PRIMARY KEY (job_id, gpu_type));
CREATE TABLE IF NOT EXISTS rounds (
    round INTEGER PRIMARY KEY, started REAL NOT NULL, decided TEXT NOT NULL, ran TEXT,
    allocation TEXT NOT NULL, actions TEXT NOT NULL);
"""


#: schema migrations in order (``PRAGMA user_version`` counts those applied)
_MIGRATIONS = (_SCHEMA,)


class StateStore:
    """SQLite state at ``path`` (created on first use). ``in_memory=True`` works on a copy of the
    file in memory (``--dry-run``: nothing is written back)."""

    def __init__(self, path: str | Path, *, in_memory: bool = False) -> None:
        self.path = Path(path)
        if in_memory:
            self.db = sqlite3.connect(":memory:")
            if self.path.exists():
                src = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
                src.backup(self.db)
                src.close()
        else:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("PRAGMA synchronous=FULL")
        migrate(self.db, _MIGRATIONS, field="state", value=str(self.path))  # policyopt.sqlite_schema

    def close(self) -> None:
        self.db.close()

    # ------------------------------------------------------------------ meta
    def get(self, key: str, default: Any = None) -> Any:
        row = self.db.execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return default if row is None else json.loads(row[0])

    def put(self, key: str, value: Any) -> None:
        self.db.execute("INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, json.dumps(value)))

    # ------------------------------------------------------------------ jobs
    def known_jobs(self) -> dict[str, dict[str, Any]]:
        cur = self.db.execute("SELECT job_id, job_type, gpus, weight, steps, submit_time, first_round, "
                              "end_time, final_state, restarts FROM jobs")
        cols = [d[0] for d in cur.description]
        return {row[0]: dict(zip(cols, row)) for row in cur.fetchall()}

    def add_job(self, job_id: str, job_type: str | None, gpus: int, weight: float, steps: float | None,
                submit_time: float, first_round: int) -> None:
        self.db.execute("INSERT OR IGNORE INTO jobs(job_id, job_type, gpus, weight, steps, submit_time, "
                        "first_round) VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (job_id, job_type, gpus, weight, steps, submit_time, first_round))

    def update_job(self, job_id: str, **fields: Any) -> None:
        cols = ", ".join(f"{k}=?" for k in fields)
        self.db.execute(f"UPDATE jobs SET {cols} WHERE job_id=?", (*fields.values(), job_id))

    def add_received(self, job_id: str, gpu_type: str, seconds: float) -> None:
        self.db.execute("INSERT INTO received(job_id, gpu_type, seconds) VALUES (?, ?, ?) "
                        "ON CONFLICT(job_id, gpu_type) DO UPDATE SET seconds = seconds + excluded.seconds",
                        (job_id, gpu_type, seconds))

    def received(self) -> dict[str, dict[str, float]]:
        out: dict[str, dict[str, float]] = {}
        for job_id, gpu_type, seconds in self.db.execute("SELECT job_id, gpu_type, seconds FROM received"):
            out.setdefault(job_id, {})[gpu_type] = seconds
        return out

    # ------------------------------------------------------------------ rounds
    def last_round(self) -> int:
        row = self.db.execute("SELECT MAX(round) FROM rounds").fetchone()
        return -1 if row[0] is None else int(row[0])

    def add_round(self, number: int, started: float, decided: Mapping[str, Any], allocation: Mapping[str, Any],
                  actions: Mapping[str, Any]) -> None:
        self.db.execute("INSERT INTO rounds(round, started, decided, allocation, actions) VALUES (?, ?, ?, ?, ?)",
                        (number, started, json.dumps(decided), json.dumps(allocation), json.dumps(actions)))

    def set_ran(self, number: int, ran: Mapping[str, Any]) -> None:
        self.db.execute("UPDATE rounds SET ran=? WHERE round=?", (json.dumps(ran), number))

    def rounds(self) -> Iterator[dict[str, Any]]:
        for number, started, decided, ran, allocation, actions in self.db.execute(
                "SELECT round, started, decided, ran, allocation, actions FROM rounds ORDER BY round"):
            yield {"round": number, "started": started, "decided": json.loads(decided),
                   "ran": None if ran is None else json.loads(ran), "allocation": json.loads(allocation),
                   "actions": json.loads(actions)}

    def commit(self) -> None:
        self.db.commit()
