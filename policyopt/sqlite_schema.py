"""Schema versions of the SQLite stores (the service's sessions, the executor's state).

A store lists its migrations in order; ``PRAGMA user_version = v`` records that the first ``v``
have been applied. :func:`migrate` applies the missing ones, each in its own ``BEGIN IMMEDIATE``
transaction together with the version bump (so a crash leaves the file at a whole version, and two
processes opening the same file apply each step once). Version 1 of every store is its original
``CREATE TABLE IF NOT EXISTS`` script, so a file written before versions were recorded (version 0)
is adopted as it is. A file of a newer version than this code knows is refused: it was written by a
newer policyopt.
"""
from __future__ import annotations

import sqlite3
from typing import Any, Callable, Sequence, Union

from .errors import InputError

__all__ = ["Migration", "migrate", "schema_version", "split_statements"]

#: a migration: an SQL script (statements separated by ``;``) or a function of the connection
Migration = Union[str, Callable[[sqlite3.Connection], None]]


def schema_version(conn: sqlite3.Connection) -> int:
    """The file's ``PRAGMA user_version``."""
    return int(conn.execute("PRAGMA user_version").fetchone()[0])


def split_statements(script: str) -> list[str]:
    """The complete SQL statements of ``script`` (``;`` inside strings or triggers kept)."""
    out, buf = [], ""
    for piece in script.split(";"):
        buf += piece + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \t\r\n;"):
                out.append(buf.strip())
            buf = ""
    if buf.strip(" \t\r\n;"):
        out.append(buf.strip())
    return out


def migrate(conn: sqlite3.Connection, migrations: Sequence[Migration], *, field: str, value: Any) -> int:
    """Bring the database of ``conn`` (autocommit mode: ``isolation_level=None``) to version
    ``len(migrations)``; returns that version. ``field``/``value`` name the file in the
    :class:`InputError` for a file of a newer version."""
    target = len(migrations)
    while True:
        conn.execute("BEGIN IMMEDIATE")
        try:
            version = schema_version(conn)  # read under the write lock: another process may have moved it
            if version > target:
                raise InputError(field, value, f"schema version {version} is newer than this policyopt knows "
                                               f"({target}); it was written by a newer policyopt")
            if version == target:
                conn.execute("COMMIT")
                return target
            step = migrations[version]
            if callable(step):
                step(conn)
            else:
                for statement in split_statements(step):
                    conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {version + 1}")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
