"""Who runs each round in the simulator: an optimization policy through the round mechanism, or a
round-stage priority policy (LAS, Tiresias, FIFO, FTF heuristics).

Policy names (``SimConfig.policy``, ``policyopt simulate --policy``) resolve as follows:

* a registered optimization policy (``policyopt.list_policies()``) → :class:`AllocationScheduler`:
  the policy's allocation ``X`` is recomputed on reset events and realized round by round by a
  :class:`~policyopt.mechanism.RoundMechanism` (Gavel);
* ``round:NAME`` or a bare ``NAME`` that is a round-stage priority policy and not an optimization
  policy (``las``, ``tiresias``, ``ftf``; ``fifo`` is also an LP policy, so the FIFO *heuristic* is
  ``round:fifo``) → :class:`PriorityScheduler` (Tesserae-style: rank jobs every round, admit what
  fits, no LP);
* ``static_split:NAME`` → :class:`PartitionedScheduler`: each entity gets a fixed slice of every
  worker type (its weight's share, :func:`split_counts`) with its own mechanism, and policy ``NAME``
  allocates each slice among the entity's jobs (the baseline of the hierarchical-policy experiment).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Protocol, Sequence

import numpy as np

from ..errors import InputError, UnknownNameError
from ..mechanism import Combination, RoundAssignment, RoundMechanism
from ..mechanism.allocation import AllocationArrays
from ..placement import PRIORITY_POLICIES, JobInfo, PriorityPolicy
from ..policy import get_policy, list_policies
from ..problem import Cluster, Problem, WorkerType, physical_type
from ..result import PolicyResult, Status, Timings

__all__ = ["ResolvedPolicy", "resolve_policy", "SolvesProblems", "AllocationScheduler", "PriorityScheduler",
           "StaticEntitySplit", "PartitionedScheduler", "split_counts", "mechanism_allocation", "planned_fractions",
           "mechanism_arrays", "ROUND_PREFIX", "STATIC_SPLIT_PREFIX"]

ROUND_PREFIX = "round:"
STATIC_SPLIT_PREFIX = "static_split:"


class SolvesProblems(Protocol):
    """Anything with ``solve(problem) -> PolicyResult`` (a :class:`~policyopt.policy.Policy`)."""

    @property
    def name(self) -> str: ...

    def solve(self, problem: Problem) -> PolicyResult: ...


@dataclass(frozen=True)
class ResolvedPolicy:
    """``kind`` is ``allocation`` (optimization policy), ``priority`` (round-stage) or ``static_split``."""

    kind: str
    name: str


def _optimization_names() -> list[str]:
    return [p["name"] for p in list_policies()]


def _priority_names() -> list[str]:
    return [n for n in PRIORITY_POLICIES.names() if n != "mechanism"]


def resolve_policy(name: str) -> ResolvedPolicy:
    """Resolve a simulator policy name (module docstring); unknown names raise ``UnknownNameError``."""
    if not isinstance(name, str) or not name:
        raise InputError("policy", name, "must be a non-empty policy name")
    opt, prio = _optimization_names(), _priority_names()
    if name.startswith(ROUND_PREFIX):
        inner = name[len(ROUND_PREFIX):]
        if inner not in prio:
            raise UnknownNameError("policy", name, [ROUND_PREFIX + p for p in prio])
        return ResolvedPolicy("priority", inner)
    if name.startswith(STATIC_SPLIT_PREFIX):
        inner = name[len(STATIC_SPLIT_PREFIX):]
        if inner not in opt:
            raise UnknownNameError("policy", name, [STATIC_SPLIT_PREFIX + p for p in opt])
        return ResolvedPolicy("static_split", inner)
    if name in opt:
        return ResolvedPolicy("allocation", name)
    if name in prio:
        return ResolvedPolicy("priority", name)
    raise UnknownNameError("policy", name, opt + [p for p in prio if p not in opt] + [ROUND_PREFIX + p for p in prio])


def planned_fractions(mechanism: RoundMechanism) -> dict[str, float]:
    """Job -> total planned time fraction over its single and pair rows of the installed allocation."""
    arr = mechanism.arrays
    per_combo = arr.x.sum(axis=1)
    m0, m1 = arr.members[:, 0], arr.members[:, 1]
    n = len(arr.job_ids)
    frac = np.bincount(m0, weights=per_combo, minlength=n) + \
        np.bincount(m1[m1 >= 0], weights=per_combo[m1 >= 0], minlength=n)
    return dict(zip(arr.job_ids, frac.tolist()))


def mechanism_allocation(result: PolicyResult, counts: Mapping[str, int], scale: Mapping[str, int]
                         ) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]]]:
    """A policy's allocation in the mechanism's terms: placement variants (``v100_unconsolidated``)
    folded into their physical type (the placer decides consolidation each round), tiny solver
    noise dropped, and rows / columns scaled down where solver tolerance pushed them past 1 or past
    the capacity ``Σ_k X[k,c]·sf_k ≤ count_c`` (by at most the solver's feasibility tolerance)."""
    alloc: dict[str, dict[str, float]] = {}
    for job, per in result.allocation.items():
        row: dict[str, float] = {}
        for cfg, f in per.items():
            if f > 1e-9:
                t = physical_type(cfg)
                row[t] = row.get(t, 0.0) + float(f)
        alloc[job] = row
    pairs: dict[tuple[str, str, str], float] = {}
    for e in result.colocated_allocation:
        if e["fraction"] > 1e-9:
            a, b = sorted(e["jobs"])
            key = (a, b, physical_type(e["worker_type"]))
            pairs[key] = pairs.get(key, 0.0) + float(e["fraction"])
    # per-job total ≤ 1
    total: dict[str, float] = {j: sum(r.values()) for j, r in alloc.items()}
    for (a, b, _), f in pairs.items():
        total[a] = total.get(a, 0.0) + f
        total[b] = total.get(b, 0.0) + f
    shrink = {j: 1.0 / s for j, s in total.items() if s > 1.0}
    # per-type capacity
    used: dict[str, float] = {}
    for j, r in alloc.items():
        for t, f in r.items():
            used[t] = used.get(t, 0.0) + f * shrink.get(j, 1.0) * scale[j]
    for (a, b, t), f in pairs.items():
        used[t] = used.get(t, 0.0) + f * min(shrink.get(a, 1.0), shrink.get(b, 1.0)) * scale[a]
    col = {t: counts.get(t, 0) / u for t, u in used.items() if u > counts.get(t, 0)}
    out = {j: {t: f * shrink.get(j, 1.0) * col.get(t, 1.0) for t, f in r.items()} for j, r in alloc.items()}
    coloc: list[dict[str, Any]] = [{"jobs": [a, b], "worker_type": t,
                                    "fraction": f * min(shrink.get(a, 1.0), shrink.get(b, 1.0)) * col.get(t, 1.0)}
                                   for (a, b, t), f in pairs.items()]
    for e in coloc:
        for j in e["jobs"]:
            out.setdefault(j, {})
    return out, coloc


def runnable_matrix(result: PolicyResult, worker_types: Sequence[str]) -> tuple[list[str], np.ndarray] | None:
    """``(jobs, runs)``: ``runs[i, c]`` whether job ``jobs[i]`` of ``result`` can run alone on
    ``worker_types[c]`` (a configuration of that type with a positive throughput); None without the
    result's array form (``result.space``)."""
    space = result.space
    if space is None:
        return None
    pos = {t: k for k, t in enumerate(worker_types)}
    col_type = np.array([pos.get(physical_type(str(c)), -1) for c in space.configs.labels.tolist()], np.int64)
    ok = (np.asarray(space.T) > 0) & space.single_mask & (col_type >= 0)[None, :]
    runs = np.zeros((ok.shape[0], len(worker_types)), bool)
    rows, cols = np.nonzero(ok)
    runs[rows, col_type[cols]] = True
    return [str(j) for j in space.jobs.labels.tolist()], runs


def runnable_types(result: PolicyResult, worker_types: Sequence[str]) -> dict[str, tuple[int, ...]]:
    """Per job of ``result``: the indices into ``worker_types`` of the types where it can run alone (a
    configuration of that type with a positive throughput), in that order; empty without the result's
    array form (``result.space``)."""
    found = runnable_matrix(result, worker_types)
    if found is None:
        return {}
    return {j: tuple(np.flatnonzero(r).tolist()) for j, r in zip(*found)}


def runnable_rows(result: PolicyResult, arrays: AllocationArrays) -> np.ndarray | None:
    """``(K, C)`` bool over the rows of ``arrays``: a single job's row on the types where it can run
    alone (:func:`runnable_matrix`); pair rows false. None without the result's array form."""
    found = runnable_matrix(result, arrays.worker_types)
    if found is None:
        return None
    jobs, runs = found
    pos = {j: i for i, j in enumerate(jobs)}
    n = arrays.num_singles
    idx = np.fromiter((pos.get(j, -1) for j in arrays.job_ids), np.int64, n)
    mask = np.zeros(arrays.x.shape, dtype=bool)
    known = np.flatnonzero(idx >= 0)
    mask[known] = runs[idx[known]]
    return mask


def mechanism_arrays(result: PolicyResult, worker_types: Sequence[str], counts: Mapping[str, int],
                     scale: Mapping[str, int]) -> AllocationArrays | None:
    """:func:`mechanism_allocation` straight from the policy's ``X`` array, as the mechanism's arrays
    (rows: the result's jobs, columns: ``worker_types``), for results without colocated pairs; the
    same floating-point operations in the same order, so the same numbers. ``None`` when the result
    has no array form (then use :func:`mechanism_allocation`)."""
    space, X = result.space, result.X
    if space is None or X is None:
        return None
    if getattr(space, "num_pairs", None) != 0:  # pair rows: the dictionary path
        return None
    jobs = [str(j) for j in space.jobs.labels.tolist()]
    # dictionaries not built yet (Policy.result defers them) come from this space and X as they are
    if not result.is_built("colocated_allocation") and not result.is_built("allocation"):
        if space.jobs.labels.tolist() != jobs:  # the dictionary's keys would differ from the ids
            return None
        lazy = True
    elif result.colocated_allocation or list(result.allocation) != jobs:
        return None
    else:
        lazy = False
    type_pos = {t: k for k, t in enumerate(worker_types)}
    cols: list[int] = []
    for c in space.configs.labels.tolist():
        t = type_pos.get(physical_type(str(c)))
        if t is None:
            return None
        cols.append(t)
    n, nt = len(jobs), len(worker_types)
    single = np.asarray(X, float)[:n]
    keep = space.single_mask & (single > 1e-9)
    F = np.zeros((n, nt))
    for c, t in enumerate(cols):  # a type gets at most two columns (consolidated, unconsolidated): exact
        F[:, t] += np.where(keep[:, c], single[:, c], 0.0)
    # per-job total, shrunk past 1; near 1 summed as the dictionaries are (a job's types in its own order)
    total = F.sum(axis=1)
    labels = np.asarray(space.configs.labels, dtype=object)
    for i in np.flatnonzero(total > 1.0 - 1e-9).tolist():
        row: dict[str, float] = {}
        items = (zip(labels[space.single_mask[i]].tolist(), single[i, space.single_mask[i]].tolist()) if lazy
                 else result.allocation[jobs[i]].items())  # Policy.result's allocation_dict, row i
        for cfg, f in items:
            if f > 1e-9:
                row[physical_type(cfg)] = row.get(physical_type(cfg), 0.0) + float(f)
        total[i] = sum(row.values())
    shrink = np.where(total > 1.0, 1.0 / np.where(total > 1.0, total, 1.0), 1.0)
    sf = np.fromiter((int(scale[j]) for j in jobs), np.int64, n)
    G = F * shrink[:, None]
    col = np.ones(nt)
    for t, wt in enumerate(worker_types):  # per-type capacity, summed in job order as the dicts are
        terms = (G[:, t] * sf)[F[:, t] > 0]
        u = float(np.cumsum(terms)[-1]) if terms.size else 0.0
        if terms.size and u > counts.get(wt, 0):
            col[t] = counts.get(wt, 0) / u
    x = G * col[None, :]
    members = np.full((n, 2), -1, np.int64)
    members[:, 0] = np.arange(n)
    return AllocationArrays(tuple(worker_types), tuple(jobs), tuple((j,) for j in jobs), members, sf, x)


class AllocationScheduler:
    """An optimization policy realized by a :class:`RoundMechanism`.

    ``install`` sets a new allocation (a reset; deficits carry over, see ``docs/mechanism.md``).
    When the available worker counts change (failures, repairs) the mechanism is rebuilt for the
    new counts, which drops carried deficits (they referred to the old capacity); the type shuffler of
    ``shuffle_types`` carries on where it was (Gavel seeds it once per simulation).
    ``ordering`` / ``shuffle_types`` / ``shuffle_seed``: the mechanism's (``RoundMechanism``); with
    ``ordering="gavel"`` every installed job may also run, last, where its ``X`` is 0 and its
    throughput alone positive (:func:`runnable_types`), as in Gavel's scheduler — unless
    ``zero_priority`` is false (Gavel's FIFO policies: :func:`~policyopt.mechanism.gavel_order.gavel_rules`).
    """

    kind = "allocation"

    def __init__(self, policy: SolvesProblems, counts: Mapping[str, int], round_length: float,
                 renewal_credit: float = 0.0, backfill: bool = False, *, ordering: str = "default",
                 shuffle_types: bool = False, shuffle_seed: int = 0, zero_priority: bool = True) -> None:
        self.policy = policy
        self.round_length = float(round_length)
        self.renewal_credit = float(renewal_credit)
        self.backfill = bool(backfill)
        self._mech_options: dict[str, Any] = {"ordering": ordering, "shuffle_types": shuffle_types,
                                              "shuffle_seed": shuffle_seed}
        self.zero_priority = bool(zero_priority)  # (with ordering="gavel": X = 0 entries run last)
        self._runs: dict[str, tuple[int, ...]] = {}  # job -> mechanism type indices it can run on (backfill)
        self.counts = dict(counts)
        self.mechanism = self._new_mechanism()
        self.installed = False
        self._known: set[str] = set()
        self._row: dict[str, int] = {}

    def recompute(self, problem: Problem, scale: Mapping[str, int], counts: Mapping[str, int]) -> PolicyResult:
        """Solve ``problem`` with the policy and install the allocation; returns the policy's result."""
        result = self.policy.solve(problem)
        self.install(result, scale, counts)
        return result

    def install(self, result: PolicyResult, scale: Mapping[str, int], counts: Mapping[str, int]) -> None:
        if dict(counts) != self.counts:
            self.counts = dict(counts)
            shuffler = self.mechanism._shuffler  # noqa: SLF001
            self.mechanism = self._new_mechanism()
            self.mechanism._shuffler = shuffler  # noqa: SLF001  (Gavel never reseeds its type shuffler)
        types = self.mechanism.worker_types
        arrays = mechanism_arrays(result, types, self.counts, scale)
        gavel = self.mechanism.ordering == "gavel" and self.zero_priority
        if arrays is not None:
            self.mechanism.set_allocation_arrays(arrays, runnable_rows(result, arrays) if gavel else None)
        else:
            alloc, coloc = mechanism_allocation(result, self.counts, scale)
            runnable = {j: [types[c] for c in cs] for j, cs in runnable_types(result, types).items()
                        if j in alloc} if gavel else None
            self.mechanism.set_allocation(alloc, coloc, {j: int(scale[j]) for j in alloc}, runnable=runnable)
        self._known = set(self.mechanism.arrays.job_ids)
        self._row = {j: i for i, j in enumerate(self.mechanism.arrays.job_ids)}
        if self.backfill:
            self._runs = runnable_types(result, types)
        self.installed = True

    def _new_mechanism(self) -> RoundMechanism:
        return RoundMechanism(self.counts, round_length=self.round_length, renewal_credit=self.renewal_credit,
                              **self._mech_options)

    def allows(self, job: str, worker_type: str) -> bool:
        """Whether the installed allocation gives ``job`` time alone on ``worker_type`` (``X > 0``)."""
        i = self._row.get(job)
        arr = self.mechanism.arrays
        return i is not None and worker_type in arr.worker_types and \
            bool(arr.x[i, arr.worker_types.index(worker_type)] > 0)

    def select(self, jobs: Sequence[JobInfo], capacity: Mapping[str, int]) -> RoundAssignment:
        if not self.installed:
            return RoundAssignment((), tuple(j.job_id for j in jobs))
        selection = self.mechanism.schedule_round()
        return self._backfilled(selection, capacity) if self.backfill and self._runs else selection

    def _backfilled(self, selection: RoundAssignment, capacity: Mapping[str, int]) -> RoundAssignment:
        """``selection`` plus, on the workers it leaves idle, the installed jobs that do not run: in the
        allocation's job order, each on the first worker type (the mechanism's order) where it can run
        alone and ``scale_factor`` workers are free, whatever its ``X`` there (Gavel's simulator gives
        idle workers to zero-priority jobs under every policy but FIFO)."""
        types = self.mechanism.worker_types
        left = [min(int(capacity.get(t, 0)), self.counts.get(t, 0)) for t in types]
        for t, n in selection.gpus_used().items():
            left[types.index(t)] -= n
        if max(left, default=0) <= 0:
            return selection
        running = selection.running_jobs()
        arr = self.mechanism.arrays
        extra: list[Combination] = []
        for j, s in zip(arr.job_ids, arr.scale[:arr.num_singles].tolist()):
            if j in running or j not in self._known:
                continue
            for c in self._runs.get(j, ()):
                if left[c] >= s:
                    left[c] -= int(s)
                    extra.append(Combination((j,), types[c], int(s)))
                    break
            if max(left) <= 0:
                break
        if not extra:
            return selection
        taken = {c.jobs[0] for c in extra}
        return RoundAssignment(selection.combinations + tuple(extra),
                               tuple(j for j in selection.pending if j not in taken))

    def record(self, selection: RoundAssignment, durations: Mapping[str, float]) -> None:
        if self.installed:
            self.mechanism.record_round(selection, durations)

    def planned_fractions(self) -> dict[str, float]:
        """Job -> its planned time fraction ``sum_c X[(j,), c] + sum_{pairs k ∋ j} sum_c X[k, c]``."""
        if not self.installed:
            return {}
        return planned_fractions(self.mechanism)

    def remove(self, job_ids: Sequence[str]) -> None:
        gone = [j for j in job_ids if j in self._known]
        if gone and self.installed:
            self.mechanism.remove_jobs(gone)
            self._known.difference_update(gone)


class PriorityScheduler:
    """A round-stage ranking policy (``las``, ``tiresias``, ``fifo``, ``ftf``): no allocation."""

    kind = "priority"

    def __init__(self, policy: PriorityPolicy) -> None:
        self.policy = policy

    def select(self, jobs: Sequence[JobInfo], capacity: Mapping[str, int]) -> RoundAssignment:
        return self.policy.select(jobs, capacity)

    def record(self, selection: RoundAssignment, durations: Mapping[str, float]) -> None:
        return None

    def planned_fractions(self) -> dict[str, float]:
        """A ranking policy plans no time fractions."""
        return {}

    def remove(self, job_ids: Sequence[str]) -> None:
        return None


def split_counts(counts: Mapping[str, int], weights: Mapping[str, float]) -> dict[str, dict[str, int]]:
    """Integer split of every worker type among entities in proportion to their weights
    (largest remainder; ties to the heavier entity, then name order): ``{entity: {type: count}}``."""
    names = list(weights)
    w = np.array([float(weights[n]) for n in names])
    if not names or np.any(w <= 0):
        raise InputError("entities", dict(weights), "a static split needs entities with positive weights")
    out: dict[str, dict[str, int]] = {n: {} for n in names}
    for t, c in counts.items():
        share = c * w / w.sum()
        base = np.floor(share).astype(np.int64)
        rem = share - base
        order = np.lexsort((np.arange(len(names)), -w, -rem))
        base[order[: int(c - base.sum())]] += 1
        for n, k in zip(names, base.tolist()):
            out[n][t] = int(k)
    return out


class StaticEntitySplit:
    """Baseline for hierarchical policies: entity ``s`` owns ``split_counts`` of every type and
    policy ``inner`` allocates that slice among its own jobs. Jobs that fit nowhere in their
    entity's slice get nothing (they wait, as they would on a statically partitioned cluster).
    ``solve`` merges the per-entity results into one :class:`PolicyResult`."""

    def __init__(self, inner: str, **options: Any) -> None:
        self.inner = get_policy(inner, **options)
        self.name = STATIC_SPLIT_PREFIX + inner

    def solve_parts(self, problem: Problem) -> dict[str, tuple[PolicyResult | None, dict[str, int], list[str]]]:
        """Per entity: (the inner policy's result on its slice or None, the slice's counts, its job ids)."""
        if not problem.entities:
            raise InputError("entities", {}, "a static per-entity split needs entities")
        shares = split_counts(problem.cluster.counts, {n: e.weight for n, e in problem.entities.items()})
        out: dict[str, tuple[PolicyResult | None, dict[str, int], list[str]]] = {}
        for name in problem.entities:
            counts = shares[name]
            mine = [j for j in problem.jobs if j.entity == name]
            jobs = [j for j in mine if any(t > 0 and j.scale_factor <= counts.get(physical_type(c), 0)
                                           for c, t in j.throughputs.items())]
            res = None
            if jobs and sum(counts.values()) > 0:
                wt = problem.cluster.worker_types
                sub_cluster = Cluster(tuple(WorkerType(w.name, counts[w.name], w.gpus_per_server, w.price_per_hour)
                                            for w in wt))
                sub = Problem(sub_cluster, tuple(jobs), (), {name: problem.entities[name]}, problem.colocated_types)
                res = self.inner.solve(sub)
            out[name] = (res, counts, [j.id for j in mine])
        return out

    def solve(self, problem: Problem) -> PolicyResult:
        """The per-entity allocations merged into one result (each within its entity's slice)."""
        timings = Timings()
        alloc: dict[str, dict[str, float]] = {}
        coloc: list[dict[str, Any]] = []
        thr: dict[str, float] = {}
        status, solver = Status.OPTIMAL, ""
        for res, _, ids in self.solve_parts(problem).values():
            for j in ids:
                alloc.setdefault(j, {})
            if res is None:
                continue
            timings.add(res.timings)
            solver = res.solver
            if res.status is not Status.OPTIMAL:
                status = res.status
            alloc.update(res.allocation)
            coloc.extend(res.colocated_allocation)
            thr.update(res.effective_throughputs)
        return PolicyResult(self.name, solver, status, None, alloc, coloc, thr, timings)


class PartitionedScheduler:
    """A static per-entity split realized as separate clusters: entity ``s`` owns its slice of every
    worker type (:func:`split_counts`), and its own :class:`RoundMechanism` realizes the inner
    policy's allocation on that slice only (a mechanism is work conserving *within* its slice, never
    across slices). The round's selection is the union of the slices' selections."""

    kind = "allocation"

    def __init__(self, split: StaticEntitySplit, round_length: float, renewal_credit: float = 0.0) -> None:
        self.split = split
        self.round_length = float(round_length)
        self.renewal_credit = float(renewal_credit)
        self.parts: dict[str, AllocationScheduler] = {}
        self.owner: dict[str, str] = {}
        self.installed = False

    def recompute(self, problem: Problem, scale: Mapping[str, int], counts: Mapping[str, int]) -> PolicyResult:
        parts = self.split.solve_parts(problem)
        timings = Timings()
        status, solver = Status.OPTIMAL, ""
        pairs: list[dict[str, Any]] = []
        for name, (res, slice_counts, ids) in parts.items():
            for j in ids:
                self.owner[j] = name
            part = self.parts.get(name)
            if part is None or part.counts != slice_counts:
                part = self.parts[name] = AllocationScheduler(self.split.inner, slice_counts, self.round_length,
                                                              self.renewal_credit)
            if res is None:
                part.installed = False
                continue
            part.install(res, scale, slice_counts)
            timings.add(res.timings)
            solver = res.solver
            pairs.extend(res.colocated_allocation)
            if res.status is not Status.OPTIMAL:
                status = res.status
        self.installed = True
        return PolicyResult(self.split.name, solver, status, None, {}, pairs, {}, timings)

    def select(self, jobs: Sequence[JobInfo], capacity: Mapping[str, int]) -> RoundAssignment:
        combos: list[Any] = []
        pending: list[str] = []
        for part in self.parts.values():
            if part.installed:
                a = part.mechanism.schedule_round()
                combos.extend(a.combinations)
                pending.extend(a.pending)
        return RoundAssignment(tuple(combos), tuple(pending))

    def record(self, selection: RoundAssignment, durations: Mapping[str, float]) -> None:
        by_part: dict[str, list[Any]] = {}
        for c in selection.combinations:
            by_part.setdefault(self.owner[c.jobs[0]], []).append(c)
        for name, part in self.parts.items():
            if part.installed:
                part.record(RoundAssignment(tuple(by_part.get(name, ()))), durations)

    def allows(self, job: str, worker_type: str) -> bool:
        """Whether the job's entity slice gives it time alone on ``worker_type``."""
        part = self.parts.get(self.owner.get(job, ""))
        return part is not None and part.installed and part.allows(job, worker_type)

    def planned_fractions(self) -> dict[str, float]:
        """Job -> planned time fraction in its entity's slice."""
        out: dict[str, float] = {}
        for part in self.parts.values():
            out.update(part.planned_fractions())
        return out

    def remove(self, job_ids: Sequence[str]) -> None:
        for part in self.parts.values():
            part.remove(job_ids)
