"""Round-based mechanism (Gavel-style): realize an allocation of time fractions over rounds.

A policy returns time fractions ``X[m, c]`` (job or job pair ``m``, worker type ``c``); the
mechanism decides, every round, which jobs and pairs run on which worker type so that the
realized fractions track ``X``. See ``docs/mechanism.md``.
"""
from __future__ import annotations

from policyopt.mechanism.allocation import AllocationArrays, build_allocation_arrays
from policyopt.mechanism.isolated_time import IsolatedTimeTracker
from policyopt.mechanism.recompute import EVENT_KINDS, RecomputeClock, recompute_due
from policyopt.mechanism.rounds import Combination, RoundAssignment, RoundMechanism
from policyopt.mechanism.tracking import TrackingRow, format_tracking_table, track_allocation

__all__ = [
    "AllocationArrays",
    "build_allocation_arrays",
    "IsolatedTimeTracker",
    "Combination",
    "RoundAssignment",
    "RoundMechanism",
    "EVENT_KINDS",
    "RecomputeClock",
    "recompute_due",
    "TrackingRow",
    "format_tracking_table",
    "track_allocation",
]
