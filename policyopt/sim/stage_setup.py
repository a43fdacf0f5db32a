"""The stages of a simulation round, built once from the run's configuration (used by
:class:`~policyopt.sim.loop.SimulationRun`).

A round passes through a scheduler (an allocation realized by a
:class:`~policyopt.mechanism.RoundMechanism`, a static split, or a priority policy), a packer (pairs
sharing GPUs), a placer (GPUs for each combination) and a migration minimizer (a relabeling of the
placement). With ``keep_types`` (*sticky*, allocation policies) the packer's matching gets a bonus for
keeping a pair, in its unit (one job's throughput for one round)::

    keep_bonus = min(2 * (checkpoint_seconds + restore_seconds) / L, 2)

(the two restarts a kept pair avoids, for a round of ``L`` seconds).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..mechanism.gavel_order import gavel_rules
from ..placement import MIGRATION_MINIMIZERS, PLACERS, MatchingPacker, NoPacking
from .scheduling import AllocationScheduler, PartitionedScheduler, PriorityScheduler

if TYPE_CHECKING:
    from .simulator import Simulator

__all__ = ["RoundStages", "build_stages"]


@dataclass(frozen=True)
class RoundStages:
    """A run's round stages and the flags derived with them.

    ``alloc_mode``: the policy is an allocation (or a static split of one); ``need_rho``: the priority
    policy is ``ftf`` (it reads each job's finish-time fairness ratio); ``exact_relabel``: the migration
    minimizer is the job-exact matching; ``sticky``: allocation policies keep each job's worker type
    (``keep_types``, by default with the matching minimizer)."""

    scheduler: Any
    packer: MatchingPacker | NoPacking
    placer: Any
    migration: Any
    alloc_mode: bool
    need_rho: bool
    exact_relabel: bool
    sticky: bool


def build_stages(sim: "Simulator", round_seconds: float, tj: np.ndarray, ids: Sequence[str]) -> RoundStages:
    """The round stages of ``sim`` (its policy and configuration) for the jobs ``ids`` of Gavel types
    ``tj`` (the packer's pair table), rounds of ``round_seconds``."""
    cfg, L = sim.config, float(round_seconds)
    policy = sim._policy_object()
    kind = sim.resolved.kind
    alloc_mode = kind in ("allocation", "static_split")
    need_rho = kind == "priority" and sim.resolved.name == "ftf"
    from .simulator import default_renewal_credit

    credit = default_renewal_credit(cfg) if cfg.renewal_credit is None else cfg.renewal_credit
    scheduler: Any
    if kind == "static_split":
        scheduler = PartitionedScheduler(policy, L, credit)
    elif alloc_mode:
        rules = gavel_rules(cfg.ordering, sim.resolved.name)  # (the type shuffle, zero-priority entries)
        scheduler = AllocationScheduler(policy, sim.counts, L, credit, cfg.backfill, ordering=cfg.ordering,
                                        shuffle_seed=int(cfg.seed) + 5, **rules)
    else:
        scheduler = PriorityScheduler(policy)
    placer = PLACERS.create(cfg.placer, renew=cfg.renew_leases)
    migration = MIGRATION_MINIMIZERS.create(cfg.migration)
    sticky = alloc_mode and (cfg.migration == "matching" if cfg.keep_types is None else bool(cfg.keep_types))
    keep_bonus = min(2.0 * (cfg.checkpoint_seconds + cfg.restore_seconds) / L, 2.0) if sticky else 0.0
    packer: MatchingPacker | NoPacking = (MatchingPacker(sim._pair_table(tj, ids), keep_bonus=keep_bonus)
                                          if cfg.packing else NoPacking())
    return RoundStages(scheduler, packer, placer, migration, alloc_mode, need_rho,
                       cfg.migration == "matching", sticky)
