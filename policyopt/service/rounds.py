"""Adapter between the service's persisted session state and the round machinery.

Everything the service needs from :mod:`policyopt.mechanism` and :mod:`policyopt.placement` goes
through this one module, so a change in their API touches only this file:

* :func:`mechanism_to_state` / :func:`mechanism_from_state` — a :class:`RoundMechanism` as a JSON
  object and back, exactly (time received ``r[k, c]``, carried deficits ``D[k, c]``, the mask of
  active combinations, wall time ``T`` since the reset, last round's worker type per job). The
  allocation arrays are rebuilt with :func:`build_allocation_arrays` from the same ordered
  allocation, so row ``k`` means the same combination before and after.
* :func:`with_worker_counts` — the same mechanism state over a cluster with other worker counts
  (workers registered or failed), ready for ``set_allocation``, which carries the deficits.
* :func:`fold_configurations` — the policy's ``{job: {config: x}}`` with ``<type>_unconsolidated``
  configurations summed into their physical type: ``X'[m, t] = Σ_{c: phys(c)=t} X[m, c]``
  (placement decides later whether a job is spread).
* :func:`live_layout` — a :class:`ClusterLayout` over the live workers (servers may have different
  sizes after failures), with the map GPU index ↔ worker id.
* :func:`place_round` — mechanism selection → placer → migration minimizer (a
  :class:`RoundPipeline` with the ``mechanism`` priority policy), with last round's placement given
  in worker ids and the result returned in worker ids.

The mechanism's (de)serialization lives in :mod:`policyopt.mechanism.state`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from policyopt.mechanism import Combination, IsolatedTimeTracker, RoundAssignment, RoundMechanism
from policyopt.mechanism.recompute import RecomputeClock, RecomputeEvent
from policyopt.mechanism.state import mechanism_from_state, mechanism_to_state, with_worker_counts
from policyopt.placement import ClusterLayout, Placement, RoundPipeline
from policyopt.placement.packing import PairThroughputTable
from policyopt.placement.stages import MIGRATION_MINIMIZERS, PLACERS, JobInfo
from policyopt.problem import Problem, physical_type

from .store import JobRow

__all__ = [
    "fits_cluster",
    "session_problem",
    "mechanism_to_state",
    "mechanism_from_state",
    "with_worker_counts",
    "fold_configurations",
    "LiveLayout",
    "live_layout",
    "RoundPlan",
    "place_round",
    "clock_to_state",
    "clock_from_state",
    "assignment_to_state",
    "assignment_from_state",
    "check_stage_names",
]


# ------------------------------------------------------------------------------------ mechanism
def fold_configurations(allocation: Mapping[str, Mapping[str, float]],
                        colocated: Sequence[Mapping[str, Any]]
                        ) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """Sum placement variants into their physical worker type (module docstring)."""
    alloc: dict[str, dict[str, float]] = {}
    for job, per in allocation.items():
        row: dict[str, float] = {}
        for cfg, x in per.items():
            t = physical_type(cfg)
            row[t] = row.get(t, 0.0) + float(x)
        alloc[job] = row
    merged: dict[tuple[str, str, str], float] = {}
    for e in colocated:
        a, b = e["jobs"]
        key = (str(a), str(b), physical_type(str(e["worker_type"])))
        merged[key] = merged.get(key, 0.0) + float(e["fraction"])
    coloc = [{"jobs": [a, b], "worker_type": t, "fraction": f} for (a, b, t), f in merged.items()]
    return alloc, coloc


# ------------------------------------------------------------------------------------ clock
def clock_to_state(clock: RecomputeClock) -> dict[str, Any]:
    """A :class:`RecomputeClock` as JSON."""
    return {"min_interval": clock.min_interval, "last_recompute": clock.last_recompute,
            "pending": [[e.time, e.kind, e.subject] for e in clock.pending]}


def clock_from_state(state: Mapping[str, Any]) -> RecomputeClock:
    """Inverse of :func:`clock_to_state`."""
    return RecomputeClock(float(state["min_interval"]), state["last_recompute"],
                          [RecomputeEvent(float(t), str(k), str(s)) for t, k, s in state["pending"]])


# ------------------------------------------------------------------------------------ assignments
def assignment_to_state(a: RoundAssignment) -> dict[str, Any]:
    """A :class:`RoundAssignment` as JSON."""
    return {"combinations": [[list(c.jobs), c.worker_type, c.num_gpus, c.renewed] for c in a.combinations],
            "pending": list(a.pending)}


def assignment_from_state(state: Mapping[str, Any]) -> RoundAssignment:
    """Inverse of :func:`assignment_to_state`."""
    return RoundAssignment(tuple(Combination(tuple(j), t, int(g), bool(r)) for j, t, g, r in state["combinations"]),
                           tuple(state["pending"]))


# ------------------------------------------------------------------------------------ layout
@dataclass(frozen=True, eq=False)
class LiveLayout(ClusterLayout):
    """A layout whose servers of one type may differ in size (some GPUs failed); worker counts are
    the number of GPUs per type, ``count_t = #{g : gpu_type[g] = t}``."""

    def worker_counts(self) -> dict[str, int]:
        counts = np.bincount(self.gpu_type, minlength=len(self.worker_types))
        return {t: int(n) for t, n in zip(self.worker_types, counts.tolist())}


def live_layout(worker_types: Sequence[str], workers: Sequence[tuple[str, str, str]]
                ) -> tuple[LiveLayout, list[str]]:
    """Layout over ``workers`` = ``(worker_id, worker_type, server)`` in registration order.

    GPUs are numbered type by type (in ``worker_types`` order), server by server (servers in
    order of their first registered worker), workers in registration order. Returns the layout
    and ``worker_of[g]``, the worker id of GPU ``g``.
    """
    types = list(worker_types)
    t_index = {t: i for i, t in enumerate(types)}
    server_key: dict[tuple[int, str], int] = {}
    rows: list[tuple[int, int, int, str]] = []  # (type, server order, seq, worker id)
    for seq, (wid, wt, server) in enumerate(workers):
        ti = t_index[wt]
        sk = server_key.setdefault((ti, server), len(server_key))
        rows.append((ti, sk, seq, wid))
    rows.sort()
    worker_of = [r[3] for r in rows]
    gpu_type = np.fromiter((r[0] for r in rows), dtype=np.int64, count=len(rows))
    srv_raw = np.fromiter((r[1] for r in rows), dtype=np.int64, count=len(rows))
    # global server index = rank of (type, server order) among used servers, in GPU order
    change = np.ones(len(rows), dtype=bool)
    if len(rows) > 1:
        change[1:] = (srv_raw[1:] != srv_raw[:-1]) | (gpu_type[1:] != gpu_type[:-1])
    gpu_server = np.cumsum(change) - 1 if len(rows) else np.zeros(0, dtype=np.int64)
    first_gpu = np.flatnonzero(change).astype(np.int64)
    server_size = np.diff(np.append(first_gpu, len(rows))).astype(np.int64)
    server_type = gpu_type[first_gpu] if first_gpu.size else np.zeros(0, dtype=np.int64)
    n_servers = np.bincount(server_type, minlength=len(types))
    max_size = np.zeros(len(types), dtype=np.int64)
    if server_size.size:
        np.maximum.at(max_size, server_type, server_size)
    arrays = [gpu_type, gpu_server.astype(np.int64), server_type, server_size, first_gpu]
    for a in arrays:
        a.setflags(write=False)
    layout = LiveLayout(tuple(types), tuple(int(n) for n in n_servers),
                        tuple(max(int(m), 1) for m in max_size), *arrays)
    return layout, worker_of


# ------------------------------------------------------------------------------------ placement
def check_stage_names(placer: str, migration: str) -> None:
    """Raise :class:`UnknownNameError` unless both stages are registered."""
    PLACERS.create(placer)
    MIGRATION_MINIMIZERS.create(migration)


@dataclass(frozen=True)
class RoundPlan:
    """One placed round: combinations with worker ids, and bookkeeping for the next round."""

    selection: RoundAssignment
    #: one entry per combination: jobs, worker type, worker ids, spread, renewed
    placements: list[dict[str, Any]]
    #: job -> worker ids it runs on
    assignment: dict[str, list[str]]
    pairs: list[list[str]]
    timings: dict[str, float]
    #: the migration minimizer used (the session's, or ``simple`` past the matching budget)
    migration: str = "none"


def _previous_placement(layout: ClusterLayout, worker_of: Sequence[str],
                        previous: Mapping[str, Sequence[str]], pairs: Sequence[Sequence[str]]) -> Placement | None:
    """Last round's placement in this layout's GPU ids; jobs on a worker that left are dropped."""
    gpu_of = {w: g for g, w in enumerate(worker_of)}
    gpus = {j: [gpu_of[w] for w in ws] for j, ws in previous.items() if ws and all(w in gpu_of for w in ws)}
    if not gpus:
        return None
    kept = [p for p in pairs if p[0] in gpus and p[1] in gpus]
    return Placement.build(layout, gpus, kept)


#: the largest class of interchangeable servers (one type, one size) that the ``matching``
#: migration minimizer may take, a time budget: its memory is linear in the servers (a sparse
#: assignment over the server pairs that share jobs), but its time grows faster than the
#: ``simple`` rule's (measured on one-GPU servers, 90 % busy, every job placed anew: 0.26 s at
#: 2,048 servers, 5.7 s at 16,384); a larger class is relabeled by the ``simple`` rule, whose cost
#: is linear in the GPUs
MATCHING_MAX_SERVERS = 2048


def migration_rule(layout: ClusterLayout, migration: str) -> str:
    """The migration minimizer this round uses: ``migration``, or ``simple`` when ``matching``
    would exceed its budget (:data:`MATCHING_MAX_SERVERS` servers in one class)."""
    if migration != "matching" or layout.num_servers <= MATCHING_MAX_SERVERS:
        return migration
    key = np.asarray(layout.server_type, dtype=np.int64) * (int(np.max(layout.server_size, initial=0)) + 1) \
        + np.asarray(layout.server_size, dtype=np.int64)
    largest = int(np.unique(key, return_counts=True)[1].max(initial=0))
    return "simple" if largest > MATCHING_MAX_SERVERS else migration


def packing_table(jobs: Sequence[Mapping[str, Any]], colocated_types: Sequence[Mapping[str, Any]],
                  worker_types: Sequence[str]) -> PairThroughputTable:
    """Tesserae packing weights for the active ``jobs`` (interchange job objects) from the
    session's ``colocated_types``: a job's model is its ``job_type`` (a job without one is never
    packed); the alone throughput of a type on a worker type is the mean over its active jobs
    (Gavel's tables give every job of a type the same), and a pair's throughputs are the table's."""
    sums: dict[str, dict[str, list[float]]] = {t: {} for t in worker_types}
    job_model: dict[str, str] = {}
    for j in jobs:
        jt = j.get("job_type")
        job_model[str(j["id"])] = jt if jt else f"\x00{j['id']}"  # untyped: a model with no pairs
        for cfg, thr in j["throughputs"].items():
            t = physical_type(cfg)
            if jt and t == cfg and t in sums and thr > 0:
                acc = sums[t].setdefault(jt, [0.0, 0.0])
                acc[0] += float(thr)
                acc[1] += 1.0
    alone = {t: {m: a / n for m, (a, n) in per.items()} for t, per in sums.items()}
    packed: dict[str, dict[tuple[str, str], tuple[float, float]]] = {t: {} for t in worker_types}
    for e in colocated_types:
        a, b = e["job_types"]
        t = physical_type(str(e["worker_type"]))
        if t in packed:
            packed[t][(str(a), str(b))] = (float(e["throughputs"][0]), float(e["throughputs"][1]))
    known = {m for per in alone.values() for m in per} | {m for per in packed.values() for pair in per for m in pair}
    for m in set(job_model.values()) - known:  # no alone throughput, no pair: weight 0, never packed
        alone[worker_types[0]][m] = 0.0
    return PairThroughputTable(job_model, alone, packed)


def place_round(mech: RoundMechanism, layout: ClusterLayout, worker_of: Sequence[str],
                previous: Mapping[str, Sequence[str]], previous_pairs: Sequence[Sequence[str]],
                placer: str = "consolidate", migration: str = "matching",
                packing: tuple[PairThroughputTable, Sequence[JobInfo]] | None = None) -> RoundPlan:
    """Mechanism selection → packing (with ``packing = (table, job infos)``: pending jobs paired
    onto running single jobs, Tesserae's matching) → placement → migration minimization for one
    round (see module doc); ``matching`` migration falls back to ``simple`` past its budget
    (:func:`migration_rule`)."""
    rule = migration_rule(layout, migration)
    options: dict[str, dict[str, Any]] = {"policy": {"mechanism": mech}}
    if packing is not None:
        options["packer"] = {"throughputs": packing[0]}
    pipeline = RoundPipeline.from_names(layout, "mechanism", placer=placer,
                                        packer="matching" if packing is not None else "none", migration=rule,
                                        options=options)
    pipeline.last_placement = _previous_placement(layout, worker_of, previous, previous_pairs)
    result = pipeline.run_round(list(packing[1]) if packing is not None else [])
    pl = result.placement
    assignment = {j: [worker_of[g] for g in gs] for j, gs in pl.gpus.items()}
    renewed = {j: c.renewed for c in result.selection.combinations for j in c.jobs}
    placements = []
    for comb in result.assignment.combinations:
        first = comb.jobs[0]
        placements.append({"jobs": list(comb.jobs), "worker_type": comb.worker_type,
                           "workers": assignment[first], "spread": first in pl.spread,
                           "renewed": bool(renewed.get(first, False))})
    return RoundPlan(result.selection, placements, assignment, [list(p) for p in sorted(pl.pairs)],
                     dict(result.timings), rule)


def fits_cluster(spec: Mapping[str, Any], counts: Mapping[str, int]) -> bool:
    """Whether a job (its interchange spec) can run on the live ``counts``: some configuration with a
    positive throughput whose physical type has at least ``scale_factor`` workers."""
    sf = spec["scale_factor"]
    return any(t > 0 and sf <= counts.get(physical_type(c), 0) for c, t in spec["throughputs"].items())


def session_problem(cfg: Mapping[str, Any], counts: Mapping[str, int], jobs: Sequence[JobRow],
                    coloc: Sequence[Mapping[str, Any]], now: float,
                    isolated: IsolatedTimeTracker | None = None) -> Problem:
    """The allocation problem of this moment: live worker counts, active schedulable jobs with
    their live ``steps_remaining``, ``time_since_start``, remaining SLO and, from ``isolated``, the
    cumulative isolated time of finish-time fairness (where the job's own spec gives none). Built
    through the interchange format, so job fields added to it later pass through unchanged."""
    cl = cfg["cluster"]
    types = {t: {"count": counts[t], **{k: cl[t][k] for k in ("gpus_per_server", "price_per_hour")
                                         if cl[t][k] is not None}} for t in cfg["worker_types"]}
    out = []
    for j in jobs:
        age = now - j.added_at
        spec = dict(j.spec, steps_remaining=j.steps_remaining, time_since_start=j.time_since_start + age)
        slo = spec.get("slo_seconds")
        spec["slo_seconds"] = None if slo is None or slo - age <= 0 else slo - age
        if spec.get("arrival") is None:
            spec["arrival"] = j.added_at
        if isolated is not None and spec.get("isolated_time") is None:
            spec["isolated_time"] = isolated.value(j.job_id, float(j.steps_remaining))
        out.append(spec)
    ids = {j.job_id for j in jobs}
    pairs = [e for e in coloc if e["jobs"][0] in ids and e["jobs"][1] in ids]
    return Problem.from_dict({"cluster": {"worker_types": types}, "jobs": out, "colocated": pairs,
                              "colocated_types": cfg.get("colocated_types", []),
                              "entities": cfg["entities"]})
