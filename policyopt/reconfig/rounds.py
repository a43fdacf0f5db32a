r"""One scheduling round for reconfigurable jobs: the hook a round-based simulator calls.

:func:`reconfig_round` solves a policy over the multi-resource space of a
:class:`~policyopt.reconfig.spec.ReconfigProblem` (whose ``reconfig.jobs[*].current`` says what each
job runs now) and returns, per job, the configuration to run in the next round — node type, GPUs,
cores, plan, nodes — its throughput, and whether that is a reconfiguration (a running job whose
plan or resources change: it pays ``checkpoint_seconds`` and its count ``N`` grows by one).

LP policies return time fractions; they are rounded to one configuration per job with
:func:`~policyopt.reconfig.placement.integralize` (guaranteed jobs first on an SLA-meeting
configuration, then by priority ``Σ_c X[m,c] / max(received_m, ε)`` when ``received`` — the share of
time each job has run so far — is given, else ``Σ_c X[m,c]``; leftover capacity is filled greedily).
Integral policies (``rubick_greedy``, ``synergy_like``, ``sia_like``) are used as they are. A result
without a space of its own — a POP-wrapped policy (:func:`policyopt.pop.pop`) merges its groups'
allocations by configuration label — is read over the full problem's space
(:func:`~policyopt.reconfig.pop_support.allocation_array`) and rounded the same way; its SLA
report is the merged one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

import numpy as np

from policyopt.perfmodel import Plan
from policyopt.policy import Policy, get_policy
from policyopt.result import PolicyResult

from .placement import Assignment, Placement, integralize
from .pop_support import allocation_array
from .space import MultiResourceSpace
from .spec import CurrentConfig, ReconfigProblem

__all__ = ["JobDecision", "RoundDecision", "reconfig_round", "decide"]


@dataclass(frozen=True)
class JobDecision:
    """What one job runs next round (``running`` False: it waits; the other fields are then None)."""

    job_id: str
    running: bool
    node_type: str | None = None
    gpus: int = 0
    cpus: int = 0
    plan: Plan | None = None
    nodes: tuple[int, ...] = ()
    throughput: float = 0.0  # steps/s with this placement
    reconfigured: bool = False  # a running job changes plan or resources
    spread: bool = False

    def current(self) -> CurrentConfig | None:
        """This decision as the job's ``current`` configuration for the next problem."""
        if not self.running or self.plan is None or self.node_type is None:
            return None
        return CurrentConfig(self.node_type, self.gpus, self.cpus, self.plan, len(self.nodes), self.nodes)


@dataclass
class RoundDecision:
    """Per-job decisions of one round, plus the policy result and the SLA report."""

    jobs: dict[str, JobDecision]
    result: PolicyResult
    sla_report: list[dict[str, Any]]
    space: MultiResourceSpace
    assignment: Assignment
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def total_normalized_throughput(self) -> float:
        thr = self.assignment.throughputs(len(self.space.jobs))
        return float(np.sum(thr / self.space.ref_thr))


def _plan_of(space: MultiResourceSpace, p: Placement) -> Plan:
    row = dict(space.config_table.iloc[p.col])
    if p.spread_plan:
        row.update(p.spread_plan)
    return Plan(dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]), micro_batches=int(row["micro_batches"]),
                ga_steps=int(row["ga_steps"]), gc=bool(row["gc"]), zero=str(row["zero"]))


def decide(space: MultiResourceSpace, assign: Assignment) -> dict[str, JobDecision]:
    """Turn an assignment into per-job decisions, flagging reconfigurations of running jobs."""
    out: dict[str, JobDecision] = {}
    spec = space.spec
    for m, jid in enumerate(space.jobs.labels.tolist()):
        p = assign.placements.get(m)
        if p is None:
            out[jid] = JobDecision(jid, False)
            continue
        plan = _plan_of(space, p)
        nt = str(space.worker_types.labels[p.node_type])
        g, c = int(sum(p.gpus)), int(round(sum(p.cpus)))
        cur = spec.jobs[jid].current
        changed = cur is not None and (cur.node_type != nt or cur.gpus != g or cur.cpus != c or cur.plan != plan)
        out[jid] = JobDecision(jid, True, nt, g, c, plan, tuple(p.nodes), float(p.thr), bool(changed), p.spread)
    return out


def reconfig_round(problem: ReconfigProblem, policy: str | Policy = "max_sum_throughput", *,
                   received: Mapping[str, float] | None = None, fill: bool = True,
                   **options: Any) -> RoundDecision:
    """Decide the next round: solve ``policy`` over the problem's multi-resource space, round to one
    configuration per job, place on nodes (see the module docstring).

    ``options`` go to the policy (e.g. ``normalize=True`` for ``max_sum_throughput``,
    ``reconfigure="plans"`` for ``rubick_greedy``). Returns a :class:`RoundDecision`; its ``jobs``
    map job id → :class:`JobDecision` with ``plan``, ``gpus``, ``cpus``, ``throughput`` (steps/s).
    """
    pol = get_policy(policy, **options)
    result = pol.solve(problem)
    space, X = result.space, result.X
    if not isinstance(space, MultiResourceSpace):
        # a result without a space of its own (POP merges its groups' allocations by label):
        # read its allocation over the full problem's space
        space = MultiResourceSpace(problem)
        X = allocation_array(space, result.allocation)
    assign = getattr(result, "assignment", None)
    if assign is None:
        prio = None
        if received is not None:
            share = np.where(space.single_mask, X[: len(space.jobs)], 0.0).sum(axis=1)
            got = np.array([float(received.get(j, 0.0)) for j in space.jobs.labels.tolist()])
            prio = share / np.maximum(got, 1e-3)
        assign = integralize(space, X, prio, fill=fill, reserve=space.quotas_reserve(pol))
    decisions = decide(space, assign)
    report = result.extra.get("sla_report", space.sla_report) if result.space is None \
        else space.sla_report
    return RoundDecision(decisions, result, report, space, assign)
