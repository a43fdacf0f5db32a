"""Cumulative isolated time per job, carried from one policy call to the next (Gavel's FTF state).

Finish-time fairness compares a job's finish time with the time it would take in isolation,
``c_m + s_m/thr(m, X_iso)``, where ``c_m`` is the time the job would have needed in isolation for
the steps it has already done. The isolated throughput changes as jobs come and go, so ``c_m`` is
accumulated call by call, as Gavel does:

.. math::  c_m \\leftarrow c_m + \\frac{s_m^{prev} - s_m}{thr^{prev}(m, X_{iso})}

with ``s^prev`` and ``thr^prev`` the job's remaining steps and isolated throughput at the previous
call (a job's first call starts at ``c_m = 0``). The policy reports ``thr(m, X_iso)`` in
``result.extra["isolated_throughputs"]``; :meth:`IsolatedTimeTracker.observe` records it and
:meth:`IsolatedTimeTracker.value` gives the ``isolated_time`` to put on the job at the next call.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["IsolatedTimeTracker"]


class IsolatedTimeTracker:
    """Per-job ``c_m`` (seconds), ``s^prev`` and ``thr^prev`` across policy calls."""

    def __init__(self) -> None:
        self._c: dict[str, float] = {}
        self._prev: dict[str, tuple[float, float]] = {}  # id -> (steps remaining, isolated throughput)

    def value(self, job_id: str, steps_remaining: float) -> float:
        """``c_m`` for a call where the job has ``steps_remaining`` left (0 at its first call)."""
        c = self._c.get(job_id, 0.0)
        prev = self._prev.get(job_id)
        if prev is not None and prev[1] > 0:
            c += max(prev[0] - steps_remaining, 0.0) / prev[1]
        return c

    def observe(self, jobs: Mapping[str, float], result: Any) -> None:
        """After a call on ``jobs`` (id → steps remaining at that call): fold the progress into
        ``c_m`` and keep the call's isolated throughputs (nothing when the policy reports none)."""
        iso = getattr(result, "extra", {}).get("isolated_throughputs")
        if not iso:
            return
        for jid, steps in jobs.items():
            self._c[jid] = self.value(jid, steps)
            rate = iso.get(jid)
            if rate is not None:
                self._prev[jid] = (float(steps), float(rate))

    def forget(self, job_id: str) -> None:
        """Drop a finished job's state."""
        self._c.pop(job_id, None)
        self._prev.pop(job_id, None)

    def retain(self, job_ids: Iterable[str]) -> None:
        """Keep only the state of ``job_ids`` (the jobs still active)."""
        keep = set(job_ids)
        for d in (self._c, self._prev):
            for jid in [j for j in d if j not in keep]:
                del d[jid]

    def to_state(self) -> dict[str, Any]:
        """A JSON object: ``c_m`` and ``(s^prev, thr^prev)`` per job (:meth:`from_state` inverts it)."""
        return {"c": dict(self._c), "prev": {j: [s, r] for j, (s, r) in self._prev.items()}}

    @classmethod
    def from_state(cls, state: Mapping[str, Any] | None) -> "IsolatedTimeTracker":
        """The tracker saved by :meth:`to_state` (``None``: an empty one)."""
        out = cls()
        if state:
            out._c = {str(j): float(v) for j, v in state.get("c", {}).items()}
            out._prev = {str(j): (float(v[0]), float(v[1])) for j, v in state.get("prev", {}).items()}
        return out
