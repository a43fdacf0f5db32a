"""Hierarchical water-filling: entities (tenants) share the cluster, jobs share their entity's part.

Each entity ``s`` of the problem (``Problem.entities``) has a weight ``W_s`` and a policy:

* ``fairness`` — the entity's weight is split among its jobs that are not yet bottlenecked, in
  proportion to their own weights (``W_s·ω_m/Ω_s``), so they rise together;
* ``fifo`` — the whole weight goes to the earliest job (by ``arrival``, else problem order) that is
  not yet bottlenecked; later jobs get nothing until it is.

Levels are raised by :class:`~policyopt.formulations.water_filling.WaterFillingEngine` (one level
LP per iteration, bottlenecks certified by its duals; see that module for the algorithm and why it
is exact). Jobs compete on ``u_m = sf_m·thr(m)/thr(m, X_equal)``; every entity with an active job
gains ``W_s·Δ`` per level, so entity shares follow entity weights until entities bottleneck.

The reported objective is ``min_s (Σ_{m∈s} u_m)/W_s``: the entity-level fairness value.
"""
from __future__ import annotations

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.policy import register_policy
from policyopt.problem import Problem

from .water_filling import FAIRNESS, FIFO, WATER_FILLING_OPTIONS, FillGroup, WaterFillingPolicy, entity_objective

__all__ = ["Hierarchical", "entity_groups", "entity_totals"]


def entity_groups(problem: Problem, space: AllocationSpace) -> tuple[list[FillGroup], np.ndarray]:
    """One :class:`FillGroup` per entity that has jobs (fifo members in arrival order) and the job
    weights ``ω``. Every job must name an entity listed in ``problem.entities``."""
    if not problem.entities:
        raise InputError("entities", {}, "the hierarchical policy needs entities (name → weight, policy)")
    members: dict[str, list[int]] = {name: [] for name in problem.entities}
    for i, job in enumerate(problem.jobs):
        if job.entity is None:
            raise InputError(f"jobs[{job.id}].entity", None,
                             "the hierarchical policy needs every job to name an entity")
        if job.entity not in members:
            raise InputError(f"jobs[{job.id}].entity", job.entity, f"not in entities {sorted(members)}")
        members[job.entity].append(i)
    arrival = np.array([j.arrival if j.arrival is not None else np.nan for j in problem.jobs])
    order_key = np.where(np.isnan(arrival), np.arange(len(problem.jobs), dtype=float), arrival)
    groups = []
    for name, mem in members.items():
        if not mem:
            continue
        ent = problem.entities[name]
        idx = np.array(mem, np.int64)
        if ent.policy == FIFO:
            idx = idx[np.lexsort((idx, order_key[idx]))]
        groups.append(FillGroup(name, FIFO if ent.policy == FIFO else FAIRNESS, ent.weight, idx))
    return groups, space.weights.copy()


def entity_totals(problem: Problem, u: np.ndarray) -> dict[str, float]:
    """``Σ_{m∈s} u_m`` per entity."""
    out: dict[str, float] = {}
    for i, job in enumerate(problem.jobs):
        if job.entity is not None:
            out[job.entity] = out.get(job.entity, 0.0) + float(u[i])
    return out


@register_policy("hierarchical")
class Hierarchical(WaterFillingPolicy):
    """Hierarchical water-filling: weighted entities, fairness or FIFO inside each entity."""

    options = WATER_FILLING_OPTIONS
    # entities and FIFO order span the whole cluster; POP would apply them per group
    pop_combine = None

    def groups(self, problem: Problem, space: AllocationSpace) -> tuple[list[FillGroup], np.ndarray]:
        return entity_groups(problem, space)

    def objective(self, space: AllocationSpace, u: np.ndarray, groups: list[FillGroup], omega: np.ndarray) -> float:
        return entity_objective(u, groups)
