"""Pick each round's jobs from the configurations of a packable allocation.

:func:`policyopt.slurm.packing.packable_allocation` writes the installed allocation as a mixture
of round configurations, ``Y = Σ_s λ_s·A_s``, each of which fits the cluster (every job on all its
GPUs of one type). Each round the controller runs one of them: the one that leaves every entry
``(job, type)`` closest to its due time. With ``owed[e] = Y[e]·(T + L) + D[e] - r[e]`` (the seconds
``e`` is owed at the end of this round if it does not run: ``T`` seconds since the allocation was
installed, ``L`` the round, ``D`` carried deficit, ``r`` seconds received) and ``a_s[e] = 1`` when
configuration ``s`` runs ``e``, the deviation after the round is ``L·a_s[e] - owed[e]``; an
entry that starts (its job is not running on that type now) adds the start cost ``δ`` to its
``|deviation|`` (the seconds a requeue, checkpoint, exit and Slurm's scheduling pass take, as the
controller measures them). Each configuration is scored by its vector of ``|deviation|`` values sorted
from largest to smallest, ``v_s``, in rounds, and the configurations are ordered by ``v_s``
lexicographically (the smallest largest deviation, then the smallest second largest, and so on:
every entry, not only the worst one, is kept as close to its due time as the configurations
allow). With ``v*`` the lexicographically smallest, the configurations *near* it are those with
``v_s[i] ≤ v*[i] + slack`` at every rank ``i``; among them the one that stops or moves the fewest
running jobs is chosen (then the lexicographic order): each stop or move costs a checkpoint, an
exit and a start, so the controller sets ``slack = δ / (2L)`` and trades a little accuracy for
fewer restarts only when restarts are expensive. Comparing every rank, not only the largest,
matters when one entry's deviation dominates: with only the largest compared, every other entry
may drift up to it unseen, and the fewest-moves rule then never moves a job that runs.
Only configurations with ``λ > 0`` are candidates, so in the long run the mixture is ``Y``; with
no start cost no entry drifts from ``Y·T + D`` by more than about a round (measured, not a
theorem: tests/test_slurm_packing.py). Time lost to starts cannot be made up by a job whose
shares add up to 1, so restarts, not the choice, set the error then.

When a start costs the job much more than that (its own startup, ``r`` seconds: the controller's
``--restart-seconds``), some running jobs are *pinned* where they run
(:mod:`policyopt.slurm.startcost`) and :func:`keep_pinned` rewrites the configurations to keep
them, filling the GPUs this frees in the order of :func:`fill_order`; the choice above then runs
on the rewritten configurations. Pins and the slack are bounded (:func:`choose_with_pins`): with
``|d*[e]|`` the deviation the most accurate configuration leaves entry ``e`` (no pin, no slack),
the round may leave each entry at most ``max(B, |d*[e]|)`` rounds from its due time, ``B`` the
controller's ``--deviation-bound``; a pin that would take some entry further is not kept.
"""
from __future__ import annotations

from typing import Collection, Mapping, Sequence

import numpy as np

#: rounds a kept job (a pin) or the slack's trade for fewer starts may leave any (job, type) from
#: its due time, beyond what the most accurate configuration leaves it (:func:`choose_with_pins`)
DEVIATION_BOUND = 0.5

__all__ = ["DEVIATION_BOUND", "choose_configuration", "choose_with_pins", "deviation_limit", "fill_order",
           "keep_pinned"]


def _deviations(configurations: Sequence[Sequence[tuple[str, str]]], owed: Mapping[tuple[str, str], float],
                round_length: float, running: Mapping[str, str],
                start_cost: float) -> tuple[list[tuple[str, str]], np.ndarray]:
    """The entries and, per configuration and entry, ``|deviation|`` after the round in rounds
    (``|L·a_s[e] - owed[e]|``, plus the start cost ``δ`` for an entry that starts)."""
    entries = sorted(set(owed) | {e for c in configurations for e in c})
    index = {e: i for i, e in enumerate(entries)}
    base = -np.array([float(owed.get(e, 0.0)) for e in entries])
    runs = np.zeros((len(configurations), len(entries)))
    starts = np.zeros_like(runs)
    for k, conf in enumerate(configurations):
        runs[k, [index[e] for e in conf]] = 1.0
        starts[k, [index[e] for e in conf if running.get(e[0]) != e[1]]] = 1.0
    cost = np.abs(base[None, :] + round_length * runs) + min(max(start_cost, 0.0), round_length) * starts
    return entries, cost / max(round_length, 1e-12)


def choose_configuration(configurations: Sequence[Sequence[tuple[str, str]]], owed: Mapping[tuple[str, str], float],
                         round_length: float, running: Mapping[str, str] | None = None, *,
                         start_cost: float = 0.0, slack: float = 0.0,
                         limit: Mapping[tuple[str, str], float] | None = None, bound: float = 0.0) -> int:
    """Index of the configuration to run this round (module docstring); ``-1`` when there is none.

    ``configurations``: each a list of ``(job, type)``; ``owed``: seconds owed per entry (entries
    absent are owed 0); ``running``: job -> type it runs on now; ``start_cost``: seconds of the
    round an entry that starts (is not running there now) loses; ``slack``: rounds of largest
    deviation worth giving up for fewer stops and moves; ``limit``: entry -> the largest
    ``|deviation|`` (rounds) a configuration may leave it (:func:`deviation_limit`; an entry absent
    from it, which the most accurate configuration does not run: ``max(bound, |owed| / L)``): only
    configurations within it on every entry are candidates (``-1`` when none is).
    """
    if not configurations:
        return -1
    now = running or {}
    entries, cost = _deviations(configurations, owed, round_length, now, start_cost)
    allowed = np.arange(len(configurations))
    if limit is not None:
        cap = np.array([limit.get(e, max(bound, abs(float(owed.get(e, 0.0))) / max(round_length, 1e-12)))
                        for e in entries])
        allowed = np.flatnonzero((cost <= cap[None, :] + 1e-9).all(axis=1))
        if not len(allowed):
            return -1
    # v_s: |deviations| in rounds, largest first (rounded so that equal vectors compare equal)
    ranked = np.round(-np.sort(-cost[allowed], axis=1), 9)
    lex = np.lexsort(ranked.T[::-1])  # column 0 (the largest) is the primary key
    near = (ranked <= ranked[lex[0]][None, :] + max(slack, 0.0) + 1e-12).all(axis=1)
    moved = np.array([sum(1 for j, t in now.items() if (j, t) not in set(configurations[int(k)])) for k in allowed])
    rank = np.empty(len(allowed), dtype=np.int64)
    rank[lex] = np.arange(len(allowed))
    return int(allowed[np.lexsort((rank, moved, ~near))[0]])


def deviation_limit(configurations: Sequence[Sequence[tuple[str, str]]], owed: Mapping[tuple[str, str], float],
                    round_length: float, running: Mapping[str, str] | None = None, *, start_cost: float = 0.0,
                    bound: float = DEVIATION_BOUND) -> dict[tuple[str, str], float]:
    """Entry -> ``max(bound, |deviation| the most accurate configuration leaves it)``, in rounds.

    The most accurate configuration ``A*`` is the lexicographically smallest ``v_s`` (module
    docstring: no slack, no pin). A round choice within this limit on every entry moves no entry
    further than ``bound`` rounds from its due time for the sake of fewer starts (slack, pins):
    only where ``A*`` itself leaves an entry further does the limit follow ``A*``."""
    if not configurations:
        return {}
    entries, cost = _deviations(configurations, owed, round_length, running or {}, start_cost)
    best = cost[np.lexsort(np.round(-np.sort(-cost, axis=1), 9).T[::-1])[0]]
    return {e: max(float(bound), float(v)) for e, v in zip(entries, best)}


def choose_with_pins(configurations: Sequence[Sequence[tuple[str, str]]], owed: Mapping[tuple[str, str], float],
                     round_length: float, running: Mapping[str, str], pinned: Mapping[str, str],
                     gpus: Mapping[str, int], capacity: Mapping[str, int], fill: Sequence[tuple[str, str]] = (), *,
                     start_cost: float = 0.0, slack: float = 0.0,
                     bound: float = float("inf")) -> tuple[list[tuple[str, str]], dict[str, str]]:
    """This round's configuration and the pins it keeps: the *deviation-bounded pin rule*.

    With ``bound`` finite (rounds), the choice must stay within :func:`deviation_limit` on every
    entry: a pin (a job kept where it runs against the most accurate choice, :func:`keep_pinned`)
    and the slack's trade for fewer stops and moves may leave no (job, type) more than ``bound``
    rounds from its due time ``Y·T + D`` (or more than the most accurate configuration leaves it).
    The pins are taken one at a time, most owed on its type first, each kept only while a
    configuration keeping it and the pins taken before it stays within the limit; once a kept job
    has run ``bound`` rounds ahead of its allocation the mechanism's choice wins, and its deficit
    accounting pays the others back in later rounds. ``bound = inf``: every pin kept (the
    configurations rewritten by :func:`keep_pinned`, then :func:`choose_configuration`)."""
    limit = None if bound == float("inf") else deviation_limit(configurations, owed, round_length, running,
                                                                start_cost=start_cost, bound=bound)
    options = [list(c) for c in configurations]
    kept: dict[str, str] = {}
    if limit is None and pinned:
        kept, options = dict(pinned), keep_pinned(configurations, pinned, gpus, capacity, fill)
    elif pinned:
        for j in sorted(pinned, key=lambda j: (-float(owed.get((j, pinned[j]), 0.0)), j)):
            trial = {**kept, j: pinned[j]}
            confs = keep_pinned(configurations, trial, gpus, capacity, fill)
            if choose_configuration(confs, owed, round_length, running, start_cost=start_cost, slack=slack,
                                    limit=limit, bound=bound) >= 0:
                kept, options = trial, confs
    k = choose_configuration(options, owed, round_length, running, start_cost=start_cost, slack=slack, limit=limit,
                             bound=bound)
    return (list(options[k]) if k >= 0 else []), kept


def keep_pinned(configurations: Sequence[Sequence[tuple[str, str]]], pinned: Mapping[str, str],
                gpus: Mapping[str, int], capacity: Mapping[str, int],
                fill: Sequence[tuple[str, str]] = ()) -> list[list[tuple[str, str]]]:
    """The configurations rewritten so that every pinned job keeps running where it runs now.

    ``pinned``: job -> the GPU type it must stay on this round (a job whose run is still young
    compared with its start cost, or that is near its end: the controller's rules). Each
    configuration ``A`` becomes ``P ∪ {(j, t) ∈ A : j ∉ P, fits}``: the pinned entries first, then
    ``A``'s other entries in order while ``Σ gpus ≤ capacity[t]`` holds on their type, then the
    entries of ``fill`` (jobs of the allocation that no entry runs yet, best first) that still
    fit, so GPUs a dropped entry frees are not left idle. A pinned job that no longer fits (the
    capacity shrank) is not kept. Duplicates are dropped; without pins the configurations are
    returned unchanged (as lists)."""
    if not pinned:
        return [list(c) for c in configurations]
    out: list[list[tuple[str, str]]] = []
    seen: set[tuple[tuple[str, str], ...]] = set()
    for conf in configurations:
        used: dict[str, int] = {}
        chosen: list[tuple[str, str]] = []
        jobs: set[str] = set()
        for j, t in [*sorted(pinned.items()), *[e for e in conf if e[0] not in pinned], *fill]:
            if j in jobs or used.get(t, 0) + int(gpus[j]) > int(capacity.get(t, 0)):
                continue
            used[t] = used.get(t, 0) + int(gpus[j])
            chosen.append((j, t))
            jobs.add(j)
        key = tuple(sorted(chosen))
        if key not in seen:
            seen.add(key)
            out.append(chosen)
    return out


def fill_order(shared: Collection[tuple[str, str]], owed: Mapping[tuple[str, str], float],
               throughputs: Mapping[str, Mapping[str, float]], types: Sequence[str]) -> list[tuple[str, str]]:
    """The order in which :func:`keep_pinned` hands GPUs a pin freed to other jobs: first the
    entries the allocation gives time (``shared``), most owed first, then every other type each job
    runs on (throughput > 0, ``throughputs``: job -> type -> steps/s), fastest first. A pinned job
    can leave a job whose only share is on its type without GPUs there; the GPUs of the type the
    allocation had for the pinned job would otherwise stay idle while that job waits."""
    first = sorted(shared, key=lambda e: (-float(owed.get(e, 0.0)), e))
    rest = sorted(((j, t) for j, row in throughputs.items() for t, v in row.items()
                   if v > 0 and t in types and (j, t) not in shared), key=lambda e: (-throughputs[e[0]][e[1]], e))
    return first + rest
