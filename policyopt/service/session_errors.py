"""Errors of session operations, mapped to HTTP statuses by :mod:`policyopt.service.errors`."""
from __future__ import annotations

from typing import Any

__all__ = ["SessionNotFound", "ItemNotFound", "RoundConflict"]


class SessionNotFound(Exception):
    """Unknown session id (HTTP 404)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"no session {session_id!r}")
        self.session_id = session_id


class ItemNotFound(Exception):
    """Unknown worker or job inside a session (HTTP 404)."""

    def __init__(self, field: str, value: str, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.value, self.problem = field, value, problem


class RoundConflict(Exception):
    """A request about a round that is not the open one (HTTP 409)."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        super().__init__(f"{field}: {problem}")
        self.field, self.value, self.problem = field, value, problem
