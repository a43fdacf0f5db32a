"""Which worker slots are alive, on which machine (node), and when slots were lost or added.

The cluster description (``--cluster cpu1=2,cpu2=2``) names the slots the executor wants. The
backend says, each round, where each slot that is alive runs (:meth:`Backend.slot_nodes`): the
local backend has every slot on this machine; the Ray backend has one actor per slot on a node that
offers the slot's worker type, and a slot whose node died is absent until an actor for it runs
again (on a node that joined). :class:`Topology` keeps the live slots and their nodes, records
every change as a *slot event* ``{"time", "event": "lost"|"added", "slot", "worker_type",
"node", "jobs"}`` (``jobs``: the steps each job lost when a node went away, filled in once the
job resumed), and groups the live slots into machines for the placement layout: ``servers()[t]``
lists, per node that has slots of type ``t``, their slot indices.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from .cluster import Slot

__all__ = ["Topology"]


class Topology:
    """Live slots and their nodes (see the module docstring)."""

    def __init__(self, slots: Sequence[Slot], live: Sequence[int] | None = None,
                 nodes: Mapping[int, str] | None = None, events: Sequence[Mapping[str, Any]] = ()) -> None:
        self.slots = list(slots)
        self.live: list[int] = sorted(int(s) for s in live) if live is not None else []
        self.nodes: dict[int, str] = {int(k): str(v) for k, v in (nodes or {}).items()}
        self.events: list[dict[str, Any]] = [dict(e) for e in events]
        self.known = live is not None  # False until the first update

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> dict[str, Any]:
        return {"live": self.live, "nodes": {str(k): v for k, v in self.nodes.items()}, "events": self.events}

    @classmethod
    def from_state(cls, slots: Sequence[Slot], data: Mapping[str, Any] | None) -> "Topology":
        if not data:
            return cls(slots)
        return cls(slots, data["live"], {int(k): v for k, v in data["nodes"].items()}, data.get("events", ()))

    # ------------------------------------------------------------------ changes
    def update(self, slot_nodes: Mapping[str, str], now: float) -> tuple[list[int], list[int]]:
        """Adopt the backend's view (``worker_id -> node`` of the live slots); returns the slot
        indices ``(lost, added)`` since the last update and records them as events (the first
        update records nothing: it is the starting cluster)."""
        by_id = {s.worker_id: s.index for s in self.slots}
        live = sorted(by_id[w] for w in slot_nodes if w in by_id)
        nodes = {by_id[w]: str(n) for w, n in slot_nodes.items() if w in by_id}
        if not self.known:
            self.live, self.nodes, self.known = live, nodes, True
            return [], []
        before = set(self.live)
        lost = sorted(before - set(live))
        added = sorted(set(live) - before)
        for s in lost:
            self._event(now, "lost", s, self.nodes.get(s, "?"))
        for s in added:
            self._event(now, "added", s, nodes[s])
        self.live = live
        self.nodes = {**{s: n for s, n in self.nodes.items() if s not in set(live)}, **nodes}
        return lost, added

    def _event(self, now: float, kind: str, slot: int, node: str) -> None:
        s = self.slots[slot]
        self.events.append({"time": now, "event": kind, "slot": s.worker_id, "worker_type": s.worker_type,
                            "node": node, "jobs": {}})

    def note_job(self, lost_slots: Sequence[int], job_id: str, steps_done: int) -> None:
        """``job_id`` (at ``steps_done``) ran on ``lost_slots``: mark it in their latest loss events."""
        names = {self.slots[s].worker_id for s in lost_slots}
        for e in reversed(self.events):
            if e["event"] == "lost" and e["slot"] in names:
                e["jobs"][job_id] = {"steps_done_at_loss": int(steps_done), "steps_lost": None}
                names.discard(e["slot"])
            if not names:
                break

    def note_resumed(self, job_id: str, steps_lost: int) -> bool:
        """The job resumed after a node loss, losing ``steps_lost`` steps; ``True`` if it was marked."""
        found = False
        for e in self.events:
            entry = e["jobs"].get(job_id) if e["event"] == "lost" else None
            if entry is not None and entry["steps_lost"] is None:
                entry["steps_lost"] = int(steps_lost)
                found = True
        return found

    # ------------------------------------------------------------------ views
    def alive(self, slot_ids: Sequence[int]) -> bool:
        live = set(self.live)
        return all(int(s) in live for s in slot_ids)

    def counts(self) -> dict[str, int]:
        """Worker type -> live slots (types in cluster order, zeros left out)."""
        out: dict[str, int] = {}
        for s in self.live:
            t = self.slots[s].worker_type
            out[t] = out.get(t, 0) + 1
        order = list(dict.fromkeys(s.worker_type for s in self.slots))
        return {t: out[t] for t in order if t in out}

    def servers(self) -> dict[str, list[list[int]]]:
        """Worker type -> one list of live slot indices per node (nodes in order of first slot)."""
        out: dict[str, dict[str, list[int]]] = {}
        for s in self.live:
            slot = self.slots[s]
            out.setdefault(slot.worker_type, {}).setdefault(self.nodes.get(s, "local"), []).append(s)
        order = list(dict.fromkeys(s.worker_type for s in self.slots))
        return {t: list(out[t].values()) for t in order if t in out}
