"""Keep jobs on last round's worker type when the round's selection has an equivalent choice.

A job that switches worker type between rounds restarts from a checkpoint, and no relabeling can
avoid it. A round mechanism that realizes time fractions ``X[j, c]`` over several types (an LP
optimum is often split across types, degenerate or not) switches a job's type whenever its
priority on another type is higher -- even when its last type has idle GPUs this round. Given the
round's selection, :func:`keep_types` moves a single job selected on type ``c'`` back to its last
type ``c`` when

* the allocation gives it time on ``c`` (``allowed(j, c)``, e.g. ``X[j, c] > 0``), and
* ``c`` is not much slower for it: ``thr(j, c) >= (1 - slack) * thr(j, c')`` (``slack`` = the share
  of a round a migration costs, so staying never loses more than the migration would), and
* ``c`` has ``scale_factor_j`` idle GPUs this round (in selection order, highest priority first), or
  another such job wants the opposite move with the same number of GPUs (a swap: the per-type GPU
  counts stay as selected).

Without a refill (below) who runs is unchanged; only the type of some running jobs changes, and
every type still holds at most its capacity. The mechanism records the type each job ran on, so its priorities see it.

*Refill* (``scale`` given: job -> GPU count): a move frees GPUs the selection had taken on ``c'``,
possibly the ones a pending job was waiting for (a job whose allocation gives it time only on
``c'`` would otherwise wait while another job claims ``c'`` every round and moves away). Pending
jobs, in the selection's priority order, then take freed GPUs of a type the allocation gives them
time on (``allowed``; their last type first, then the fastest) when ``scale_factor`` GPUs of it
are idle.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Mapping

from policyopt.mechanism.rounds import Combination, RoundAssignment

__all__ = ["keep_types"]


def keep_types(
    selection: RoundAssignment,
    last_type: Mapping[str, str],
    capacity: Mapping[str, int],
    allowed: Callable[[str, str], bool],
    throughput: Callable[[str, str], float],
    slack: float = 0.0,
    scale: Mapping[str, int] | None = None,
) -> RoundAssignment:
    """The selection with some single jobs moved back to their last type, and with ``scale`` pending
    jobs refilling the GPUs the moves freed (module docstring)."""
    combos = list(selection.combinations)
    left = dict(capacity)
    for c in combos:
        left[c.worker_type] = left.get(c.worker_type, 0) - c.num_gpus
    idle_before = dict(left)
    movers: list[int] = []
    for i, c in enumerate(combos):
        if len(c.jobs) != 1:
            continue
        j = c.jobs[0]
        prev = last_type.get(j)
        if prev is None or prev == c.worker_type or prev not in left or not allowed(j, prev):
            continue
        if throughput(j, prev) < (1.0 - slack) * throughput(j, c.worker_type):
            continue
        movers.append(i)

    def move(i: int, to: str) -> None:
        c = combos[i]
        left[c.worker_type] += c.num_gpus
        left[to] -= c.num_gpus
        combos[i] = replace(c, worker_type=to, renewed=True)

    rest: list[int] = []
    for i in movers:  # 1. into idle GPUs of the last type
        to = last_type[combos[i].jobs[0]]
        if left[to] >= combos[i].num_gpus:
            move(i, to)
        else:
            rest.append(i)
    # 2. swaps between jobs that want each other's type with the same number of GPUs
    waiting: dict[tuple[str, str, int], list[int]] = {}
    for i in rest:
        c = combos[i]
        to = last_type[c.jobs[0]]
        mates = waiting.get((to, c.worker_type, c.num_gpus))
        if mates:
            k = mates.pop(0)
            frm = c.worker_type
            move(i, to)
            move(k, frm)
        else:
            waiting.setdefault((c.worker_type, to, c.num_gpus), []).append(i)
    if all(a is b for a, b in zip(combos, selection.combinations)):
        return selection
    pending = selection.pending
    if scale is not None:
        freed = {t: left[t] - idle_before[t] for t in left if left[t] > idle_before[t]}
        started: list[str] = []
        for j in selection.pending:
            g = scale.get(j)
            if g is None or not freed:
                continue
            fits = [t for t in freed if freed[t] >= g and left[t] >= g and allowed(j, t)]
            if not fits:
                continue
            prev = last_type.get(j)
            t = prev if prev in fits else max(fits, key=lambda c: throughput(j, c))
            left[t] -= g
            freed[t] -= g
            combos.append(Combination((j,), t, g, renewed=prev == t))
            started.append(j)
        if started:
            gone = set(started)
            pending = tuple(j for j in pending if j not in gone)
    return RoundAssignment(tuple(combos), pending)
