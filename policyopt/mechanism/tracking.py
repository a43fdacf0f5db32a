"""How closely the round mechanism's realized time fractions track the allocation ``X``.

Run ``R`` rounds of a fixed allocation and record, at checkpoints, the tracking error

    err_max(R)  = max_{k,c} | r[k, c] / T - X[k, c] |
    err_mean(R) = mean over entries with X[k, c] > 0 of | r[k, c] / T - X[k, c] |

where ``r`` is the time run and ``T = R * round_length``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from policyopt.errors import InputError
from policyopt.mechanism.rounds import RoundMechanism

__all__ = ["TrackingRow", "track_allocation", "format_tracking_table"]


@dataclass(frozen=True)
class TrackingRow:
    """Tracking error after ``rounds`` rounds."""

    rounds: int
    max_abs_error: float
    mean_abs_error: float


def track_allocation(
    allocation: Mapping[str, Mapping[str, float]],
    colocated: Sequence[Mapping[str, Any]],
    scale_factors: Mapping[str, int],
    worker_counts: Mapping[str, int],
    rounds: int,
    *,
    round_length: float = 360.0,
    checkpoints: Sequence[int] | None = None,
    work_conserving: bool = True,
) -> list[TrackingRow]:
    """Run ``rounds`` rounds of a fixed allocation; return the error at each checkpoint.

    Checkpoints default to powers of two up to ``rounds`` (and ``rounds`` itself).
    """
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise InputError("rounds", rounds, "must be a positive integer")
    if checkpoints is None:
        cps = sorted({2**i for i in range(int(np.log2(rounds)) + 1)} | {int(rounds)})
    else:
        cps = sorted({int(c) for c in checkpoints})
        if cps and (cps[0] < 1 or cps[-1] > rounds):
            raise InputError("checkpoints", list(checkpoints), f"must lie in [1, rounds={rounds}]")
    mech = RoundMechanism(worker_counts, round_length=round_length, work_conserving=work_conserving)
    mech.set_allocation(allocation, colocated, scale_factors)
    x = mech.arrays.x
    positive = x > 0
    rows: list[TrackingRow] = []
    wanted = set(cps)
    for r in range(1, int(rounds) + 1):
        mech.record_round(mech.schedule_round())
        if r in wanted:
            err = np.abs(mech.realized_fractions() - x)
            mean = float(err[positive].mean()) if positive.any() else 0.0
            rows.append(TrackingRow(r, float(err.max()) if err.size else 0.0, mean))
    return rows


def format_tracking_table(rows: Sequence[TrackingRow], round_length: float = 360.0) -> str:
    """A plain-text table: rounds, simulated hours, max and mean absolute error."""
    lines = [f"{'rounds':>7} {'hours':>8} {'max|r/T-X|':>11} {'mean|r/T-X|':>12}"]
    for row in rows:
        lines.append(f"{row.rounds:>7d} {row.rounds * round_length / 3600:>8.1f} "
                     f"{row.max_abs_error:>11.4f} {row.mean_abs_error:>12.4f}")
    return "\n".join(lines)
