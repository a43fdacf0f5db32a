"""Placer stages wrapping :mod:`policyopt.placement.consolidate`."""
from __future__ import annotations

from policyopt.mechanism.rounds import RoundAssignment
from policyopt.placement.consolidate import consolidate, first_fit
from policyopt.placement.layout import ClusterLayout
from policyopt.placement.plan import Placement
from policyopt.placement.stages import PLACERS, Placer

__all__ = ["ConsolidatingPlacer", "FirstFitPlacer"]


@PLACERS.register("consolidate")
class ConsolidatingPlacer(Placer):
    """Biggest first, best-fit server, lease renewal (see :func:`consolidate`)."""

    def __init__(self, renew: bool = True) -> None:
        self.renew = renew

    def place(self, layout: ClusterLayout, assignment: RoundAssignment, previous: Placement | None) -> Placement:
        return consolidate(layout, assignment, previous, renew=self.renew)


@PLACERS.register("first_fit")
class FirstFitPlacer(Placer):
    """Lowest free GPU ids, ignoring servers (a baseline; see :func:`first_fit`)."""

    def __init__(self, renew: bool = False) -> None:
        self.renew = renew

    def place(self, layout: ClusterLayout, assignment: RoundAssignment, previous: Placement | None) -> Placement:
        return first_fit(layout, assignment, previous, renew=self.renew)
