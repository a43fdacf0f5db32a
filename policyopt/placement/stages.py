"""Stage interfaces of a scheduling round and their registries.

A round is ``PriorityPolicy -> Packer -> Placer -> MigrationMinimizer`` (see
:class:`policyopt.placement.pipeline.RoundPipeline`); each stage is an object implementing one
of the ABCs below, registered by name so pipelines can be assembled from configuration.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Mapping, Sequence

from policyopt.mechanism.rounds import RoundAssignment
from policyopt.placement.layout import ClusterLayout
from policyopt.placement.migration import MigrationMinimizer
from policyopt.placement.plan import Placement
from policyopt.placement.registry import Registry

__all__ = [
    "JobInfo",
    "PriorityPolicy",
    "Packer",
    "Placer",
    "MigrationMinimizer",
    "PRIORITY_POLICIES",
    "PACKERS",
    "PLACERS",
    "MIGRATION_MINIMIZERS",
]


@dataclass(frozen=True)
class JobInfo:
    """What the round stages need to know about an active job.

    ``attained_service`` is GPU-seconds received so far (LAS / Tiresias); ``rho`` the
    finish-time-fairness ratio (FTF: larger = further behind); ``high_priority`` jobs rank first
    and, like jobs with a ``deadline``, are never packed; ``worker_types`` lists the types the
    job may use in order of preference (``None``: any type, in the cluster's order).
    """

    job_id: str
    scale_factor: int = 1
    arrival_time: float = 0.0
    attained_service: float = 0.0
    rho: float = 1.0
    high_priority: bool = False
    deadline: float | None = None
    worker_types: tuple[str, ...] | None = None

    @property
    def no_packing(self) -> bool:
        """High-priority and deadline-bound jobs get no packing edges."""
        return self.high_priority or self.deadline is not None


class PriorityPolicy(ABC):
    """Stage 1: choose what runs this round (single jobs, or pairs for allocation-based policies)."""

    name: str = ""

    @abstractmethod
    def select(self, jobs: Sequence[JobInfo], capacity: Mapping[str, int]) -> RoundAssignment:
        """Combinations to run (within ``capacity`` GPUs per type) and pending jobs in priority order."""


class Packer(ABC):
    """Stage 2: pair pending jobs with running single jobs on the same GPUs."""

    name: str = ""

    @abstractmethod
    def pack(self, assignment: RoundAssignment, jobs: Mapping[str, JobInfo]) -> RoundAssignment:
        """The assignment with some singles turned into pairs and those partners removed from pending."""


class Placer(ABC):
    """Stage 3: give every combination concrete GPUs."""

    name: str = ""

    @abstractmethod
    def place(self, layout: ClusterLayout, assignment: RoundAssignment, previous: Placement | None) -> Placement:
        """A valid :class:`Placement` of every combination of ``assignment``."""


PRIORITY_POLICIES: Registry[PriorityPolicy] = Registry("priority_policy")
PACKERS: Registry[Packer] = Registry("packer")
PLACERS: Registry[Placer] = Registry("placer")
MIGRATION_MINIMIZERS: Registry[MigrationMinimizer] = Registry("migration_minimizer")


def _register_migration_minimizers() -> None:
    from policyopt.placement.migration import (
        MatchingMigration,
        NoMigrationMinimization,
        SimpleRuleMigration,
        TesseraeMigration,
    )

    for cls in (MatchingMigration, TesseraeMigration, SimpleRuleMigration, NoMigrationMinimization):
        MIGRATION_MINIMIZERS.register(cls.name)(cls)


_register_migration_minimizers()
