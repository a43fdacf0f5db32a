"""The three steps of a session's ``next_round`` (see :mod:`.sessions`): close the open round,
recompute the allocation when due, and plan the new round's placement.

Each step works on the request's private copies of the session state and job rows; nothing here
writes to the store (the caller commits everything in one transaction).
"""
from __future__ import annotations

import copy
import math
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from policyopt.mechanism import IsolatedTimeTracker, RoundAssignment, RoundMechanism
from policyopt.mechanism.recompute import RecomputeClock
from policyopt.placement.stages import JobInfo
from policyopt.policy import Policy

from . import rounds as R
from .store import JobRow, WorkerRow
from .validation import make_policy, solve_checked

__all__ = ["ClosedRound", "close_open_round", "Recompute", "recompute_allocation", "PlannedRound",
           "plan_round"]


@dataclass
class ClosedRound:
    """What closing the open round produced: the session time at its end, the ``(index,
    duration, progress)`` of the closed round, the jobs it completed, and its assignment."""

    now: float
    closes: list[tuple[int, float, dict[str, Any]]] = field(default_factory=list)
    completed: list[str] = field(default_factory=list)
    previous: dict[str, list[str]] = field(default_factory=dict)
    previous_pairs: list[list[str]] = field(default_factory=list)


def close_open_round(cfg: Mapping[str, Any], state: Mapping[str, Any], view: Mapping[str, JobRow],
                     changed: dict[str, JobRow], mech: RoundMechanism | None,
                     clock: RecomputeClock) -> ClosedRound:
    """Close ``state["open_round"]`` (if any).

    The mechanism records the seconds each job of the round's combinations ran (``r[k, c] +=
    d_k``; a job without a reported duration ran ``min(round wall time, L)``), the session clock
    advances by the round's wall time (``L`` when none was reported), and every active job of the
    round whose ``steps_remaining`` reached 0 or that was reported completed becomes
    ``completed`` at the round's end (its updated row goes into ``changed``).
    """
    now = float(state["time"])
    open_ = state["open_round"]
    if open_ is None:
        return ClosedRound(now)
    prog = open_["progress"]
    L = cfg["round_length"]
    dur = prog["round_duration"] if prog["round_duration"] is not None else L
    selection = R.assignment_from_state(open_["selection"])
    if mech is not None and selection.combinations:
        default = min(dur, L)
        mech.record_round(selection, {j: prog["durations"].get(j, default)
                                      for c in selection.combinations for j in c.jobs})
    end = now + dur
    done = set(prog["completed"])
    completed = []
    for j in open_["assignment"]:
        job = view.get(j)
        if job is not None and job.status == "active" and (job.steps_remaining <= 0.0 or j in done):
            row = changed.setdefault(j, copy.copy(job))
            row.status, row.finished_at = "completed", end
            completed.append(j)
            clock.note("completion", end, j)
    return ClosedRound(end, [(open_["index"], dur, prog)], completed, open_["assignment"], open_["pairs"])


@dataclass
class Recompute:
    """The outcome of :func:`recompute_allocation`."""

    mech: RoundMechanism | None
    policy: Policy | None
    recomputed: bool
    solve_seconds: float
    unschedulable: list[str]


def recompute_allocation(cfg: Mapping[str, Any], state: dict[str, Any], active: Sequence[JobRow],
                         counts: dict[str, int], coloc: list[dict[str, Any]], now: float,
                         clock: RecomputeClock, mech: RoundMechanism | None, policy: Policy | None,
                         next_index: int) -> Recompute:
    """Solve the policy for the active jobs that fit the cluster when a recompute is due.

    Due: a forced recompute (worker change), the clock's ``min_recompute_interval`` after an
    arrival or completion, or no mechanism yet while jobs are active. The new allocation ``X`` is
    handed to the (kept, or new, or re-sized) mechanism; ``state["allocation"]`` records its
    status, objective and solve time. With no schedulable job or no worker the mechanism is
    dropped.
    """
    unschedulable = [j.job_id for j in active if not R.fits_cluster(j.spec, counts)]
    due = bool(state["force_recompute"]) or clock.due(now) or (mech is None and bool(active))
    if not due:
        return Recompute(mech, policy, False, 0.0, unschedulable)
    clock.mark_recomputed(now)
    state["force_recompute"] = False
    bad = set(unschedulable)
    sched = [j for j in active if j.job_id not in bad]
    if not sched or sum(counts.values()) <= 0:
        state["allocation"] = None
        return Recompute(None, policy, True, 0.0, unschedulable)
    isolated = IsolatedTimeTracker.from_state(state.get("isolated_time"))
    problem = R.session_problem(cfg, counts, sched, coloc, now, isolated)
    policy = policy or make_policy(cfg["policy"], cfg["options"], default_time_limit=None,
                                   max_time_limit=None)[0]
    t0 = time.perf_counter()
    res = solve_checked(policy, problem, "jobs")
    solve_seconds = time.perf_counter() - t0
    isolated.observe({j.job_id: float(j.steps_remaining) for j in sched}, res)
    isolated.retain(j.job_id for j in active)
    state["isolated_time"] = isolated.to_state()
    alloc, folded_pairs = R.fold_configurations(res.allocation, res.colocated_allocation)
    if mech is None:
        mech = RoundMechanism(counts, round_length=cfg["round_length"],
                              deficit_cap=cfg["deficit_cap"], work_conserving=cfg["work_conserving"])
    elif mech.worker_counts != counts:
        mech = R.with_worker_counts(mech, counts)
    mech.set_allocation(alloc, folded_pairs, {j.job_id: int(j.spec["scale_factor"]) for j in sched})
    objective = res.objective if res.objective is not None and math.isfinite(res.objective) else None
    state["allocation"] = {"status": res.status.value, "objective": objective, "message": res.message,
                           "computed_in_round": next_index, "solve_seconds": solve_seconds}
    return Recompute(mech, policy, True, solve_seconds, unschedulable)


@dataclass
class PlannedRound:
    """The new round: the mechanism's selection and its placement on worker ids."""

    selection: RoundAssignment
    placements: list[Any]
    assignment: dict[str, list[str]]
    pairs: list[list[str]]
    timings: dict[str, float]
    mech_pending: list[str]
    migration: Any


def plan_round(cfg: Mapping[str, Any], mech: RoundMechanism | None, counts: Mapping[str, int],
               workers: Sequence[WorkerRow], active: Sequence[JobRow], previous: dict[str, list[str]],
               previous_pairs: list[list[str]]) -> PlannedRound:
    """Pick the round's combinations by priority and place them (consolidation, lease renewal,
    migration minimization, optional packing); an empty round without a mechanism or workers."""
    if mech is None or sum(counts.values()) <= 0:
        return PlannedRound(RoundAssignment(()), [], {}, [], {}, [], cfg["migration"])
    layout, worker_of = R.live_layout(cfg["worker_types"],
                                      [(w.worker_id, w.worker_type, w.server) for w in workers])
    packing = None
    if cfg.get("packing"):
        specs = [j.spec for j in active]
        infos = [JobInfo(j.job_id, int(j.spec["scale_factor"]), float(j.added_at),
                         high_priority=bool(j.spec.get("priority")),
                         deadline=None if j.spec.get("slo_seconds") is None else 0.0) for j in active]
        packing = (R.packing_table(specs, cfg.get("colocated_types", []), cfg["worker_types"]), infos)
    plan = R.place_round(mech, layout, worker_of, previous, previous_pairs, cfg["placer"],
                         cfg["migration"], packing)
    return PlannedRound(plan.selection, plan.placements, plan.assignment, plan.pairs, plan.timings,
                        list(plan.selection.pending), plan.migration)
