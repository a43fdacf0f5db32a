"""Policy → mechanism → placement for the executor's rounds.

* :func:`build_problem` poses the allocation problem of the moment in the interchange format
  (``docs/schema.md``): one worker type per cluster type with its live worker count and
  ``gpus_per_server`` (the most slots of that type one machine offers), one job per active job
  with its scale factor ``K``, its ``K``-worker throughputs (and ``<type>_unconsolidated`` for
  ``K > 1``: ranks spread over machines), remaining steps, time since arrival, weight, the
  cumulative isolated time ``c_m`` of finish-time fairness (carried by the executor with an
  :class:`~policyopt.mechanism.IsolatedTimeTracker`, as the simulator does), and —
  with space sharing — one ``colocated`` entry per pair of active single-worker jobs whose job
  types the table measured together on a worker type.
* :func:`mechanism_allocation` turns a policy result into the mechanism's input:
  ``<type>_unconsolidated`` configurations folded into their type, entries below ``1e-9`` dropped,
  and each row (``Σ_c X[j,c] + Σ_pairs ≤ 1``) and column (``Σ_j X[j,c]·sf_j ≤ count_c``) scaled
  down by the factor it exceeds its bound (solver tolerance), so the mechanism accepts it.
* :class:`RoundPlacer` runs one round of :class:`~policyopt.placement.RoundPipeline` with the
  ``mechanism`` priority policy: the mechanism's selection (all ``K`` workers of a job or none),
  then consolidated placement with lease renewal (a job's ranks on one machine when one has ``K``
  free slots of its type, else spread), then migration minimization against last round's
  placement. Its layout's servers are the machines (nodes) that hold the live slots.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import numpy as np

from policyopt.mechanism import RoundAssignment, RoundMechanism
from policyopt.placement import ClusterLayout, Placement, RoundPipeline
from policyopt.problem import Problem, physical_type

__all__ = ["build_problem", "mechanism_allocation", "RoundPlacer", "PlacedRound", "job_throughputs"]


def job_throughputs(table: Mapping[str, Any], job_type: str, worker_types: Sequence[str],
                    measured: Mapping[str, float] | None = None, scale_factor: int = 1) -> dict[str, float]:
    """Steps/s of ``job_type`` on ``scale_factor`` workers per worker type: the table's, replaced by
    ``measured`` rates where given. For ``scale_factor > 1`` also ``<type>_unconsolidated``: the
    row's ``throughputs_unconsolidated`` where it has one, else the same rate (a table measured on
    one machine cannot tell them apart; see ``docs/executor.md``)."""
    from .spec import table_row

    _, row = table_row(table, job_type, scale_factor)
    thr = (row or {}).get("throughputs") or {}
    out = {t: float(thr.get(t, 0.0)) for t in worker_types}
    for t, rate in (measured or {}).items():
        if t in out and rate > 0:
            out[t] = float(rate)
    if scale_factor > 1:
        unc = (row or {}).get("throughputs_unconsolidated") or {}
        for t in worker_types:
            out[f"{t}_unconsolidated"] = float(unc.get(t, out[t]))
    return out


def build_problem(counts: Mapping[str, int], jobs: Sequence[Mapping[str, Any]], table: Mapping[str, Any],
                  space_sharing: bool = False, gpus_per_server: Mapping[str, int] | None = None) -> Problem:
    """The problem for ``jobs`` = ``[{"id", "job_type", "throughputs", "steps_remaining",
    "time_since_start", "weight", "arrival", "scale_factor"?, "isolated_time"?}]`` (see the module
    docstring; ``isolated_time``: finish-time fairness's ``c_m``)."""
    gps = dict(gpus_per_server or {})
    types = {t: {"count": int(n), "gpus_per_server": max(1, int(gps.get(t, 1)))} for t, n in counts.items()}
    out = [{"id": j["id"], "throughputs": j["throughputs"], "scale_factor": int(j.get("scale_factor", 1)),
            "weight": float(j["weight"]),
            "steps_remaining": float(j["steps_remaining"]), "time_since_start": float(j["time_since_start"]),
            "arrival": float(j["arrival"]),
            **({"isolated_time": float(j["isolated_time"])} if j.get("isolated_time") is not None else {})}
           for j in jobs]
    colocated: list[dict[str, Any]] = []
    if space_sharing:
        entries: dict[tuple[str, str, str], tuple[float, float]] = {}
        for e in table.get("colocated") or []:
            a, b = e["job_types"]
            ta, tb = (float(x) for x in e["throughputs"])
            entries[(a, b, e["worker_type"])] = (ta, tb)
            entries[(b, a, e["worker_type"])] = (tb, ta)
        single = [j for j in jobs if int(j.get("scale_factor", 1)) == 1]  # the table's pairs are 1-worker runs
        jobs = single
        for i in range(len(jobs)):
            for k in range(i + 1, len(jobs)):
                for t in counts:
                    pair = entries.get((jobs[i]["job_type"], jobs[k]["job_type"], t))
                    if pair is not None and pair[0] > 0 and pair[1] > 0:
                        colocated.append({"jobs": [jobs[i]["id"], jobs[k]["id"]], "worker_type": t,
                                          "throughputs": [pair[0], pair[1]]})
    return Problem.from_dict({"cluster": {"worker_types": types}, "jobs": out, "colocated": colocated})


def mechanism_allocation(allocation: Mapping[str, Mapping[str, float]], colocated: Sequence[Mapping[str, Any]],
                         counts: Mapping[str, int], scale: Mapping[str, int]
                         ) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """A policy's allocation made acceptable to :class:`RoundMechanism` (see the module docstring)."""
    types = list(counts)
    jobs = list(allocation)
    col = {t: c for c, t in enumerate(types)}
    row = {j: r for r, j in enumerate(jobs)}
    x = np.zeros((len(jobs), len(types)))
    for j, per in allocation.items():
        for cfg, f in per.items():
            t = physical_type(cfg)
            if t in col and f > 1e-9:
                x[row[j], col[t]] += float(f)
    pairs: dict[tuple[str, str, str], float] = {}
    for e in colocated:
        f = float(e["fraction"])
        t = physical_type(str(e["worker_type"]))
        a, b = sorted(str(v) for v in e["jobs"])
        if f > 1e-9 and t in col and a in row and b in row:
            pairs[(a, b, t)] = pairs.get((a, b, t), 0.0) + f
    keys = list(pairs)
    p = np.array([pairs[k] for k in keys])
    pa = np.array([row[k[0]] for k in keys], dtype=np.int64)
    pb = np.array([row[k[1]] for k in keys], dtype=np.int64)
    pt = np.array([col[k[2]] for k in keys], dtype=np.int64)
    sf = np.array([float(scale.get(j, 1)) for j in jobs])
    # rows: Σ_c x[j, c] + Σ_{pairs ∋ j} p ≤ 1
    total = x.sum(axis=1) + np.bincount(pa, p, len(jobs)) + np.bincount(pb, p, len(jobs))
    shrink = np.where(total > 1.0, 1.0 / np.maximum(total, 1e-300), 1.0)
    x *= shrink[:, None]
    p = p * np.minimum(shrink[pa], shrink[pb]) if p.size else p
    # columns: Σ_j x[j, c]·sf_j + Σ_pairs p·sf_a ≤ count_c
    used = (x * sf[:, None]).sum(axis=0) + np.bincount(pt, p * sf[pa] if p.size else p, len(types))
    cap = np.array([float(counts[t]) for t in types])
    colf = np.where(used > cap, cap / np.maximum(used, 1e-300), 1.0)
    x *= colf[None, :]
    p = p * colf[pt] if p.size else p
    alloc = {j: {t: float(x[r, c]) for c, t in enumerate(types)} for j, r in row.items()}
    coloc = [{"jobs": [k[0], k[1]], "worker_type": k[2], "fraction": float(f)} for k, f in zip(keys, p.tolist())]
    return alloc, coloc


@dataclass(frozen=True)
class PlacedRound:
    """One placed round: ``assignment[job]`` = slot indices; ``pairs`` share their slots;
    ``spread`` = jobs whose slots span several machines."""

    selection: RoundAssignment
    assignment: dict[str, list[int]]
    pairs: list[list[str]]
    renewed: dict[str, bool]
    migrated: list[str]
    timings: dict[str, float] = field(default_factory=dict)
    spread: list[str] = field(default_factory=list)


class RoundPlacer:
    """Mechanism selection → placement → migration minimization on the executor's live slots.

    ``servers[type]`` lists the machines that offer that worker type, each as the list of its slot
    indices. The layout's "GPUs" are these slots, numbered type by type (in ``servers`` order) and
    machine by machine; ``gpu_slot[g]`` maps a layout GPU id back to the executor's slot index.
    """

    def __init__(self, servers: Mapping[str, Sequence[Sequence[int]]], placer: str = "consolidate",
                 migration: str = "matching") -> None:
        live = {t: [list(s) for s in srv if s] for t, srv in servers.items()}
        live = {t: srv for t, srv in live.items() if srv}
        self.layout = ClusterLayout.from_server_sizes({t: [len(s) for s in srv] for t, srv in live.items()})
        self.gpu_slot = np.array([g for srv in live.values() for s in srv for g in s], dtype=np.int64)
        self.slot_gpu = {int(s): g for g, s in enumerate(self.gpu_slot.tolist())}
        self.counts = self.layout.worker_counts()
        self.gpus_per_server = dict(zip(self.layout.worker_types, self.layout.gpus_per_server))
        self.placer = placer
        self.migration = migration
        # validate the stage names now (UnknownNameError lists the registered ones)
        from policyopt.placement.stages import MIGRATION_MINIMIZERS, PLACERS

        PLACERS.create(placer)
        MIGRATION_MINIMIZERS.create(migration)

    def previous_placement(self, previous: Mapping[str, Sequence[int]],
                           pairs: Sequence[Sequence[str]]) -> Placement | None:
        """Last round's slots as a placement on this layout (jobs on slots that are gone are left out)."""
        gpus = {j: [self.slot_gpu[int(s)] for s in gs] for j, gs in previous.items()
                if gs and all(int(s) in self.slot_gpu for s in gs)}
        if not gpus:
            return None
        kept = [p for p in pairs if p[0] in gpus and p[1] in gpus]
        return Placement.build(self.layout, gpus, kept)

    def place(self, mech: RoundMechanism, previous: Mapping[str, Sequence[int]],
              previous_pairs: Sequence[Sequence[str]]) -> PlacedRound:
        pipeline = RoundPipeline.from_names(self.layout, "mechanism", placer=self.placer, packer="none",
                                            migration=self.migration, options={"policy": {"mechanism": mech}})
        pipeline.last_placement = self.previous_placement(previous, previous_pairs)
        result = pipeline.run_round([])
        placement = result.placement
        assignment = {j: sorted(int(self.gpu_slot[g]) for g in gs) for j, gs in placement.gpus.items()}
        renewed = {j: bool(c.renewed) for c in result.selection.combinations for j in c.jobs}
        migrated = sorted(j for j, gs in assignment.items() if j in previous and sorted(previous[j]) != sorted(gs))
        return PlacedRound(result.selection, assignment, [list(p) for p in sorted(placement.pairs)], renewed,
                           migrated, dict(result.timings), sorted(placement.spread))
