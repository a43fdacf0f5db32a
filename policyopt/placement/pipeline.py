"""A scheduling round as a chain of swappable stages.

``RoundPipeline.run_round(jobs)``:

1. ``policy.select(jobs, capacity)``      -> what runs alone (or in the mechanism's pairs);
2. ``packer.pack(selection, jobs)``       -> pending jobs paired onto placed jobs;
3. ``placer.place(layout, assignment, previous)`` -> concrete GPUs;
4. ``migration.relabel(previous, plan)``  -> GPU ids relabeled to minimize moves.

The pipeline remembers the last placement (``last_placement``) for lease renewal and migration
minimization, and times each stage.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from policyopt.errors import InputError
from policyopt.mechanism.rounds import RoundAssignment
from policyopt.placement.layout import ClusterLayout
from policyopt.placement.migration import MigrationMinimizer
from policyopt.placement.plan import Placement, migrated_jobs
from policyopt.placement.stages import (
    MIGRATION_MINIMIZERS,
    PACKERS,
    PLACERS,
    PRIORITY_POLICIES,
    JobInfo,
    Packer,
    Placer,
    PriorityPolicy,
)

__all__ = ["RoundPipeline", "RoundResult"]


@dataclass(frozen=True)
class RoundResult:
    """One round: the policy's selection, the packed assignment, the final placement."""

    selection: RoundAssignment
    assignment: RoundAssignment
    placement: Placement
    migrated: frozenset[str]
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def spread(self) -> frozenset[str]:
        """Jobs spread over more than one server (unconsolidated)."""
        return self.placement.spread


class RoundPipeline:
    """Compose policy, packer, placer and migration minimizer (each swappable)."""

    def __init__(
        self,
        layout: ClusterLayout,
        policy: PriorityPolicy,
        placer: Placer,
        packer: Packer | None = None,
        migration: MigrationMinimizer | None = None,
    ) -> None:
        self.layout = layout
        self.policy = policy
        self.placer = placer
        self.packer = packer
        self.migration = migration
        self.last_placement: Placement | None = None

    @classmethod
    def from_names(
        cls,
        layout: ClusterLayout,
        policy: str,
        placer: str = "consolidate",
        packer: str = "none",
        migration: str = "matching",
        *,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> "RoundPipeline":
        """Build from registry names; ``options[stage]`` are keyword arguments for that stage
        (stages: ``policy``, ``placer``, ``packer``, ``migration``)."""
        opts = dict(options or {})
        unknown = set(opts) - {"policy", "placer", "packer", "migration"}
        if unknown:
            raise InputError("options", sorted(unknown), "stages are policy, placer, packer, migration")
        return cls(
            layout,
            PRIORITY_POLICIES.create(policy, **opts.get("policy", {})),
            PLACERS.create(placer, **opts.get("placer", {})),
            PACKERS.create(packer, **opts.get("packer", {})),
            MIGRATION_MINIMIZERS.create(migration, **opts.get("migration", {})),
        )

    def run_round(self, jobs: Sequence[JobInfo]) -> RoundResult:
        """Run the four stages for the active ``jobs``; updates ``last_placement``."""
        timings: dict[str, float] = {}
        t0 = time.perf_counter()
        selection = self.policy.select(jobs, self.layout.worker_counts())
        t1 = time.perf_counter()
        by_id = {j.job_id: j for j in jobs}
        assignment = selection if self.packer is None else self.packer.pack(selection, by_id)
        t2 = time.perf_counter()
        plan = self.placer.place(self.layout, assignment, self.last_placement)
        t3 = time.perf_counter()
        placement = plan if self.migration is None else self.migration.relabel(self.last_placement, plan)
        t4 = time.perf_counter()
        timings.update(select=t1 - t0, pack=t2 - t1, place=t3 - t2, migrate=t4 - t3, total=t4 - t0)
        moved = frozenset(migrated_jobs(self.last_placement, placement))
        self.last_placement = placement
        return RoundResult(selection, assignment, placement, moved, timings)
