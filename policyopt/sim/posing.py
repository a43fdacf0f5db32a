"""The problem a policy is asked to solve at a simulator recompute, built from the simulator's arrays.

At time ``t`` the problem has one job per active job that can run on the workers available now
(some configuration with a positive throughput on a type with at least ``scale_factor`` available
workers). Job ``i`` carries its Gavel throughputs (``<type>`` and, for ``scale_factor > 1`` on a type
of at least two servers, ``<type>_unconsolidated``: on a type of one server no placement can spread a
job, so the policy is not offered a throughput the cluster cannot deliver), ``steps_remaining``,
``time_since_start = t − arrival_i``, weight, priority, entity,
``slo_seconds = max(arrival_i + SLO_i − t − margin, 1)`` while the deadline is ahead (else none),
``job_type`` labels when space sharing is on, and ``isolated_time`` (finish-time fairness).

A job's entry is validated by :class:`~policyopt.problem.Job` at its first recompute; later entries
are built unchecked, since only the simulator's own state changes (positive remaining steps,
elapsed time ≥ 0, time to the deadline ≥ 1 s). The columnar view (``T[job, config]`` and the
numeric columns) is handed to the :class:`~policyopt.problem.Problem` from the simulator's arrays,
so the problem does not rebuild it job by job.
"""
from __future__ import annotations

from typing import Any, Collection, Mapping, Sequence

import numpy as np

from ..data.gavel import GavelThroughputs
from ..mechanism import IsolatedTimeTracker
from ..problem import Cluster, Entity, Job, Problem, ProblemArrays, physical_type

__all__ = ["ProblemPoser", "throughput_dicts"]


def throughput_dicts(table: GavelThroughputs, types_present: np.ndarray, cluster_types: Sequence[str],
                     spread_types: Collection[str] | None = None) -> dict[int, dict[str, float]]:
    """Per Gavel job type: ``{config: steps/s}`` on ``cluster_types`` (+ unconsolidated for sf > 1 on the
    ``spread_types``, the types with at least two servers; default: every type)."""
    out = {}
    known = set(cluster_types)
    spread = known if spread_types is None else set(spread_types)
    for t in types_present.tolist():
        s = table.job_types[t][1]
        d = {}
        for c, name in enumerate(table.configs):
            base = physical_type(name)
            if base in known and table.alone[t, c] > 0 and (base == name or (s > 1 and base in spread)):
                d[name] = float(table.alone[t, c])
        out[t] = d
    return out


class ProblemPoser:
    """Builds the recompute problems of one simulation (module docstring).

    ``tj`` / ``sf`` / ``weight`` / ``slo`` / ``prio`` / ``arrival`` are per-job arrays in trace order
    (``slo`` NaN where none); ``labels`` maps Gavel job types to ``job_type`` labels (space sharing);
    ``counts``: GPUs per type (a type of one server, ``counts ≤ gpus_per_server``, gets no unconsolidated
    throughputs).
    """

    def __init__(self, table: GavelThroughputs, types: Sequence[str], gpus_per_server: Mapping[str, int],
                 prices: Mapping[str, float], ids: Sequence[str], entity_of: Sequence[str | None], tj: np.ndarray,
                 sf: np.ndarray, weight: np.ndarray, slo: np.ndarray, prio: np.ndarray, arrival: np.ndarray,
                 entities: Mapping[str, Entity], coloc_types: Sequence[Any], labels: Mapping[int, str] | None,
                 margin: float, counts: Mapping[str, int] | None = None) -> None:
        self.types, self.gps, self.prices = list(types), gpus_per_server, prices
        self.ids, self.entity_of, self.tj, self.sf = ids, entity_of, tj, sf
        self.weight, self.slo, self.prio, self.arrival = weight, slo, prio, arrival
        self.entities, self.coloc_types, self.labels, self.margin = entities, tuple(coloc_types), labels, margin
        self.isolated = IsolatedTimeTracker()  # finish-time fairness: cumulative isolated time per job
        present = np.unique(tj)
        spread = None if counts is None else [w for w in self.types if counts[w] > gpus_per_server[w]]
        self.thr = throughput_dicts(table, present, self.types, spread)
        # the same throughputs as dense rows over every configuration any job type uses
        self.configs = sorted({c for d in self.thr.values() for c in d})
        col = {c: k for k, c in enumerate(self.configs)}
        rows = int(present.max()) + 1 if present.size else 0
        self.T = np.zeros((rows, len(self.configs)))
        self.has = np.zeros((rows, len(self.configs)), bool)
        # per job type and worker type: some configuration on that type has a positive throughput
        self.runs_on = np.zeros((rows, len(self.types)), bool)
        type_pos = {w: k for k, w in enumerate(self.types)}
        for t, d in self.thr.items():
            for c, v in d.items():
                self.T[t, col[c]] = v
                self.has[t, col[c]] = True
                if v > 0:
                    self.runs_on[t, type_pos[physical_type(c)]] = True
        self._fields: dict[int, dict[str, Any]] = {}  # per trace index: a validated Job's fields

    def pose(self, t: float, active: Sequence[int], avail: Mapping[str, int], remaining: np.ndarray
             ) -> Problem | None:
        """The problem at time ``t`` (``None`` when no worker is available or no active job can run)."""
        A = np.asarray(active, np.int64)
        cap = np.array([avail[w] for w in self.types], np.int64)
        fits = (self.runs_on[self.tj[A]] & (self.sf[A, None] <= cap[None, :])).any(axis=1)
        M = A[fits]  # the others cannot run on what is available now (failures): they wait for repairs
        if sum(avail.values()) == 0 or not M.size:
            return None
        deadline = self.arrival[M] + self.slo[M] - t
        ahead = np.isfinite(self.slo[M]) & (deadline > 0)  # a passed deadline can no longer be met
        left = np.maximum(deadline - self.margin, 1.0)
        elapsed = t - self.arrival[M]
        rem = remaining[M]
        members = []
        for i, r, e, lf, ok in zip(M.tolist(), rem.tolist(), elapsed.tolist(), left.tolist(), ahead.tolist()):
            iso = float(self.isolated.value(self.ids[i], r))
            fields = self._fields.get(i)
            if fields is None:  # first recompute of this job: validated as any Job
                tj = int(self.tj[i])
                job = Job(self.ids[i], self.thr[tj], int(self.sf[i]), float(self.weight[i]), r, e, self.entity_of[i],
                          lf if ok else None, float(self.arrival[i]), bool(self.prio[i]),
                          self.labels[tj] if self.labels is not None else None, isolated_time=iso)
                self._fields[i] = dict(job.__dict__)
            else:  # later: only the simulator's own state changes
                job = Job._unchecked({**fields, "throughputs": dict(fields["throughputs"]), "steps_remaining": r,
                                      "time_since_start": e, "slo_seconds": lf if ok else None, "isolated_time": iso})
            members.append(job)
        jobs = tuple(members)
        names = list(avail)
        used = self.has[self.tj[M]].any(axis=0)
        extra = sorted(c for c, u in zip(self.configs, used.tolist()) if u and c not in avail)
        configs = names + extra
        cols = np.array([self.configs.index(c) if c in self.configs else -1 for c in configs], np.int64)
        T = np.where(cols[None, :] >= 0, self.T[self.tj[M]][:, np.maximum(cols, 0)], 0.0)
        arrays = ProblemArrays(configs, np.array([j.id for j in jobs], dtype=str), T, self.sf[M].astype(float),
                               self.weight[M].astype(float), rem, elapsed, jobs)
        return Problem(Cluster.from_counts(avail, self.gps, self.prices), jobs, (),
                       self.entities if self.entities else {}, self.coloc_types, _arrays=arrays)
