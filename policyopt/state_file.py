"""Guarding SQLite state files (the service's sessions, the executor's run state).

* :func:`check_state_file` — run before a store opens its file: a file that exists but is empty
  (0 bytes: truncated, or emptied by a failed copy), is not an SQLite database, fails
  ``PRAGMA quick_check``, or lacks the store's tables (beyond a header page: a file another
  process is creating) is refused with one
  :class:`~policyopt.errors.InputError` naming the file and what to do (restore a backup,
  ``--repair``, or an explicit ``--new-state``). A store never starts empty over a file that held
  data; only a missing file is created.
* :func:`backup` — a consistent online copy with SQLite's backup API (safe while a server or an
  executor writes: the copy is one committed state, WAL content included).
* :func:`repair` — salvage every readable row of a damaged file into a fresh one (table by table;
  rows on damaged pages are skipped and counted); the damaged file is kept beside it.
* :func:`set_aside` — move a file (and its ``-wal``/``-shm``) to ``<file>.<reason>-<time>`` for
  ``--new-state``; nothing is deleted.
"""
from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path
from typing import Iterable

from .errors import InputError

__all__ = ["check_state_file", "backup", "repair", "set_aside", "SIDE_FILES"]

#: SQLite's companion files of a database in WAL mode
SIDE_FILES = ("-wal", "-shm")


def _advice(path: Path, flag: str) -> str:
    if flag.startswith("policyopt state repair"):  # the executor's state: no server flags
        return (f"restore a backup, or salvage what is readable with `{flag}`, or move the file away to "
                f"start a new run")
    return (f"restore a backup, or salvage what is readable with `{flag} --repair`, or start a new "
            f"empty state with `{flag} --new-state` (the old file is kept beside it)")


def check_state_file(path: str | Path, tables: Iterable[str], *, field: str = "state",
                     command: str = "policyopt serve --state") -> None:
    """Refuse a damaged or emptied state file (module docstring); a missing file passes (it will
    be created). ``tables``: tables every non-empty file of this store has; ``command`` (+ the
    file) is the repair command the message suggests."""
    p = Path(path)
    flag = f"{command} {p}"
    if not p.exists():
        return
    if p.is_dir():
        raise InputError(field, str(p), "is a directory, expected an SQLite state file")
    if p.stat().st_size == 0:
        wal = Path(str(p) + "-wal")
        if not (wal.exists() and wal.stat().st_size > 0):
            raise InputError(field, str(p), "the state file is empty (0 bytes) although it exists: it was "
                                            "truncated or emptied, so its sessions are gone; " + _advice(p, flag))
    try:
        conn = sqlite3.connect(f"file:{p}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        raise InputError(field, str(p), f"cannot be opened ({exc}); " + _advice(p, flag)) from None
    try:
        try:
            rows = conn.execute("PRAGMA quick_check").fetchall()
            names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        except sqlite3.DatabaseError as exc:
            raise InputError(field, str(p), f"is not a readable SQLite database ({exc}); "
                                            + _advice(p, flag)) from None
        problems = [r[0] for r in rows if r[0] != "ok"]
        if problems:
            raise InputError(field, str(p), f"the state file is damaged (quick_check: {problems[0]}"
                                            f"{f' and {len(problems) - 1} more' if len(problems) > 1 else ''}); "
                                            + _advice(p, flag))
        missing = sorted(set(tables) - names)
        if missing and names:
            raise InputError(field, str(p), f"is not a policyopt state file of this kind (tables {missing} "
                                            f"missing); " + _advice(p, flag))
        # no tables in one page: SQLite's header page only, as another process that has just created
        # the file leaves it until its first transaction (the tables) commits; nothing can have been
        # lost, and the store's own migration waits for that transaction. More pages: refused.
        if missing and not names and p.stat().st_size > 0 \
                and conn.execute("PRAGMA page_count").fetchone()[0] > 1:
            raise InputError(field, str(p), "holds no tables although it is not empty; " + _advice(p, flag))
    finally:
        conn.close()


def backup(source: str | Path, target: str | Path) -> dict[str, int]:
    """Copy the database ``source`` to ``target`` with SQLite's online backup API (a consistent
    snapshot while writers continue); ``target`` must not exist. Returns ``{"pages", "bytes"}``."""
    src, dst = Path(source), Path(target)
    if not src.is_file():
        raise InputError("state", str(src), "no such state file")
    if dst.exists():
        raise InputError("output", str(dst), "exists already: a backup never overwrites a file")
    dst.parent.mkdir(parents=True, exist_ok=True)
    s = sqlite3.connect(f"file:{src}?mode=ro", uri=True, timeout=30.0)
    d = sqlite3.connect(str(dst))
    try:
        s.backup(d)
        pages = int(d.execute("PRAGMA page_count").fetchone()[0])
        ok = d.execute("PRAGMA quick_check").fetchone()[0]
        if ok != "ok":
            raise InputError("state", str(src), f"the copy fails quick_check ({ok}): the source is damaged")
    except sqlite3.DatabaseError as exc:
        d.close()
        dst.unlink(missing_ok=True)
        raise InputError("state", str(src), f"cannot be copied ({exc}); it may be damaged: try --repair") from None
    finally:
        s.close()
    d.close()
    return {"pages": pages, "bytes": dst.stat().st_size}


def set_aside(path: str | Path, reason: str) -> Path | None:
    """Move ``path`` and its side files to ``<path>.<reason>-<YYYYmmdd-HHMMSS>``; the new name
    (None when there was no file)."""
    p = Path(path)
    if not p.exists():
        return None
    stamp = time.strftime("%Y%m%d-%H%M%S")
    new = p.with_name(f"{p.name}.{reason}-{stamp}")
    k = 1
    while new.exists():
        new = p.with_name(f"{p.name}.{reason}-{stamp}-{k}")
        k += 1
    os.replace(p, new)
    for suffix in SIDE_FILES:
        side = Path(str(p) + suffix)
        if side.exists():
            os.replace(side, Path(str(new) + suffix))
    return new


def repair(path: str | Path) -> dict[str, object]:
    """Salvage the readable rows of ``path`` into a fresh file at ``path`` (same schema, from
    ``sqlite_master``); the damaged file is kept as ``<path>.damaged-<time>``. Rows that cannot be
    read are skipped: scanning restarts past them by rowid. Returns rows kept and lost per table."""
    p = Path(path)
    if not p.is_file() or p.stat().st_size == 0:
        raise InputError("state", str(p), "nothing to repair (missing or empty file): restore a backup or "
                                          "start with --new-state")
    old = set_aside(p, "damaged")
    assert old is not None
    src = sqlite3.connect(f"file:{old}?mode=ro", uri=True)
    dst = sqlite3.connect(str(p), isolation_level=None)
    report: dict[str, object] = {"damaged_file": str(old), "tables": {}}
    try:
        try:
            schema = src.execute("SELECT type, name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                                 "AND name NOT LIKE 'sqlite_%'").fetchall()
            version = int(src.execute("PRAGMA user_version").fetchone()[0])
        except sqlite3.DatabaseError as exc:
            raise InputError("state", str(old), f"its schema cannot be read ({exc}): restore a backup, or "
                                                "start with --new-state") from None
        dst.execute("BEGIN")
        for kind, _name, sql in schema:
            if kind == "table":
                dst.execute(sql)
        tables: dict[str, dict[str, int]] = {}
        for kind, name, _sql in schema:
            if kind != "table":
                continue
            kept = lost = 0
            last = -(2 ** 63)
            while True:
                try:
                    cur = src.execute(f'SELECT rowid, * FROM "{name}" WHERE rowid > ? ORDER BY rowid', (last,))
                    for row in cur:
                        last = row[0]
                        dst.execute(f'INSERT INTO "{name}" VALUES ({",".join("?" * (len(row) - 1))})', row[1:])
                        kept += 1
                    break
                except sqlite3.DatabaseError:
                    lost += 1
                    last += 1  # skip past the unreadable row (or page) and go on
                    if lost > 100_000:
                        break
            tables[name] = {"kept": kept, "unreadable": lost}
        for kind, _name, sql in schema:
            if kind == "index":
                try:
                    dst.execute(sql)
                except sqlite3.IntegrityError:
                    pass  # a unique index broken by the damage: the rows are kept, the index is rebuilt later
        dst.execute(f"PRAGMA user_version = {version}")
        dst.execute("COMMIT")
        report["tables"] = tables
    finally:
        src.close()
        dst.close()
    return report
