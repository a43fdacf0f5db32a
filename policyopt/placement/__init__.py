"""Placement of a round's jobs on servers and GPUs, with Tesserae-style graph matching.

Stages (each swappable, registered by name): priority policies (:mod:`.priority`), packing
(:mod:`.packing`), consolidating placement (:mod:`.consolidate`, :mod:`.placers`) and migration
minimization (:mod:`.migration`), chained by :class:`RoundPipeline`. See ``docs/placement.md``.
"""
from __future__ import annotations

from policyopt.placement.consolidate import check_capacity, consolidate, first_fit
from policyopt.placement.layout import ClusterLayout
from policyopt.placement.migration import (
    MatchingMigration,
    MigrationMinimizer,
    NoMigrationMinimization,
    SimpleRuleMigration,
    TesseraeMigration,
    matching_relabeling,
    migration_cost,
    simple_rule_relabeling,
    tesserae_relabeling,
)
from policyopt.placement.job_exact import exact_relabeling, job_exact_relabeling, kept_weight, moved_weight
from policyopt.placement.packing import (
    BestPlanFn,
    MatchingPacker,
    NoPacking,
    PairThroughputs,
    PairThroughputTable,
    PlanChoice,
    match_pairs,
)
from policyopt.placement.pipeline import RoundPipeline, RoundResult
from policyopt.placement.placers import ConsolidatingPlacer, FirstFitPlacer
from policyopt.placement.plan import Placement, migrated_jobs, unconsolidated_type
from policyopt.placement.priority import (
    FinishTimeFairness,
    FirstInFirstOut,
    LeastAttainedService,
    MechanismPolicy,
    RankingPolicy,
    Tiresias,
    admit,
)
from policyopt.placement.registry import Registry
from policyopt.placement.sources import MIGRATION_SOURCES, migration_sources
from policyopt.placement.sticky import keep_types
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

__all__ = [
    "ClusterLayout", "Placement", "migrated_jobs", "unconsolidated_type", "MIGRATION_SOURCES", "migration_sources",
    "keep_types",
    "consolidate", "first_fit", "check_capacity", "ConsolidatingPlacer", "FirstFitPlacer",
    "MigrationMinimizer", "MatchingMigration", "TesseraeMigration", "SimpleRuleMigration", "NoMigrationMinimization",
    "matching_relabeling", "tesserae_relabeling", "simple_rule_relabeling", "migration_cost",
    "job_exact_relabeling", "exact_relabeling", "kept_weight", "moved_weight",
    "PairThroughputs", "PairThroughputTable", "PlanChoice", "BestPlanFn", "MatchingPacker",
    "NoPacking", "match_pairs",
    "JobInfo", "PriorityPolicy", "RankingPolicy", "LeastAttainedService", "Tiresias",
    "FirstInFirstOut", "FinishTimeFairness", "MechanismPolicy", "admit",
    "Packer", "Placer", "Registry", "PRIORITY_POLICIES", "PACKERS", "PLACERS",
    "MIGRATION_MINIMIZERS", "RoundPipeline", "RoundResult",
]
