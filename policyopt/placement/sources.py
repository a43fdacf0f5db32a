"""Where a round's migrations come from.

A job *migrates* when it runs in two consecutive rounds on different GPU sets. Each migrated job
gets one source, checked in this order:

* ``type`` -- it runs on another worker type (the selection moved it; no placement can help);
* ``size`` -- it holds another number of GPUs (it grew or shrank);
* ``pair`` -- its space-sharing partner changed (alone -> paired, paired -> alone, new partner);
* ``relabeling`` -- the plan kept it on its GPUs but the relabeling moved it;
* ``placement`` -- the plan put it elsewhere (same type, size and partner) and the relabeling did
  not bring it back.
"""
from __future__ import annotations

from typing import Mapping

from policyopt.placement.plan import Placement

__all__ = ["MIGRATION_SOURCES", "migration_sources"]

#: the sources, in the order they are checked
MIGRATION_SOURCES = ("type", "size", "pair", "relabeling", "placement")


def migration_sources(previous: Placement | None, plan: Placement, placement: Placement) -> dict[str, str]:
    """Migrated job -> its source (module docstring); ``plan`` is the placer's output, ``placement``
    the relabeled plan that runs."""
    if previous is None:
        return {}
    old_partner: Mapping[str, str] = previous.partner_of()
    new_partner: Mapping[str, str] = placement.partner_of()
    out: dict[str, str] = {}
    for j, gpus in placement.gpus.items():
        old = previous.gpus.get(j)
        if old is None or old == gpus:
            continue
        if previous.worker_type_of(j) != placement.worker_type_of(j):
            out[j] = "type"
        elif len(old) != len(gpus):
            out[j] = "size"
        elif old_partner.get(j) != new_partner.get(j):
            out[j] = "pair"
        elif plan.gpus[j] == old:
            out[j] = "relabeling"
        else:
            out[j] = "placement"
    return out
