"""When to recompute the allocation.

The allocation is recomputed after *events* (job arrival, job completion, worker failure) but at
most once every ``min_interval`` seconds: a recompute is due at time ``now`` iff at least one
event arrived since the last recompute and ``now - last_recompute >= min_interval`` (the first
recompute is due as soon as there is an event).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from policyopt.errors import InputError, UnknownNameError

__all__ = ["EVENT_KINDS", "RecomputeEvent", "RecomputeClock", "recompute_due"]

#: Events that invalidate the current allocation.
EVENT_KINDS: tuple[str, ...] = ("arrival", "completion", "worker_failure")


def recompute_due(
    event_times: Sequence[float], last_recompute: float | None, now: float, min_interval: float
) -> bool:
    """True iff an event happened after ``last_recompute`` (and by ``now``) and the interval passed.

    >>> recompute_due([10.0], last_recompute=0.0, now=100.0, min_interval=360.0)
    False
    >>> recompute_due([10.0], last_recompute=0.0, now=400.0, min_interval=360.0)
    True
    """
    if not np.isfinite(min_interval) or min_interval < 0:
        raise InputError("min_interval", min_interval, "must be a non-negative number of seconds")
    t = np.asarray(event_times, dtype=float)
    lo = -np.inf if last_recompute is None else float(last_recompute)
    pending = bool(np.any((t > lo) & (t <= now))) if t.size else False
    if not pending:
        return False
    return last_recompute is None or now - last_recompute >= min_interval


@dataclass(frozen=True)
class RecomputeEvent:
    """An event that calls for a new allocation."""

    time: float
    kind: str
    subject: str = ""


@dataclass
class RecomputeClock:
    """Bookkeeping for :func:`recompute_due` across a simulation or a live scheduler."""

    min_interval: float
    last_recompute: float | None = None
    pending: list[RecomputeEvent] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not np.isfinite(self.min_interval) or self.min_interval < 0:
            raise InputError("min_interval", self.min_interval, "must be a non-negative number of seconds")

    def note(self, kind: str, time: float, subject: str = "") -> None:
        """Record an event (``kind`` in :data:`EVENT_KINDS`)."""
        if kind not in EVENT_KINDS:
            raise UnknownNameError("kind", kind, EVENT_KINDS)
        if self.last_recompute is not None and time < self.last_recompute:
            raise InputError("time", time, f"event before the last recompute at {self.last_recompute}")
        self.pending.append(RecomputeEvent(float(time), kind, subject))

    def due(self, now: float) -> bool:
        """Is a recompute due at ``now``?"""
        if not any(e.time <= now for e in self.pending):
            return False
        return self.last_recompute is None or now - self.last_recompute >= self.min_interval

    def mark_recomputed(self, now: float) -> list[RecomputeEvent]:
        """Record a recompute at ``now``; return (and clear) the events it absorbed."""
        absorbed = [e for e in self.pending if e.time <= now]
        self.pending = [e for e in self.pending if e.time > now]
        self.last_recompute = float(now)
        return absorbed
