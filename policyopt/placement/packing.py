"""Packing (Tesserae): pair pending jobs with placed jobs by maximum-weight bipartite matching.

After as many jobs as fit alone are admitted, every *placed* single job ``p`` (on ``g`` GPUs of
type ``t``) may take one *pending* job ``q`` with the same GPU count onto the same GPUs. With
``n_p = packed throughput of p next to q / throughput of p alone on t`` (and ``n_q`` likewise),
the bipartite graph has an edge ``(p, q)`` with weight ``n_p + n_q`` iff ``n_p > 0`` and
``n_q > 0`` (the pair fits in memory) and ``n_p + n_q > 1`` (packing beats running ``p`` alone);
jobs with ``JobInfo.no_packing`` (high priority, deadline) get no edges. The packer returns a
maximum-weight matching of that graph, computed per GPU count ``g`` by
``linear_sum_assignment(W, maximize=True)`` on the dense weight matrix with ``W = 0`` where there
is no edge; since every edge weighs more than 1 > 0, a maximum full assignment minus its
zero-weight (non-edge) pairs is a maximum-weight matching.

*Pair renewal* (``keep_bonus = b >= 0``, default 0): the packer remembers the pairs of the
assignment it returned last round (its own and the selection's); an edge ``(p, q)`` whose two jobs
were such a pair weighs ``n_p + n_q + b``. A job packed onto another job's GPUs moves with it, so
a new partner is a checkpoint-restore for the guest (and, for a guest that ran elsewhere, a move);
``b`` is the normalized throughput the packer gives up to avoid it -- e.g. ``2 × (checkpoint +
restore seconds) / round seconds`` prices the two jobs' restarts in the matching's unit (one job's
throughput for one round). The edge set is unchanged (a renewed pair must still fit and beat
running ``p`` alone), so ``b`` only breaks the matching's choice among valid pairs.

Optionally a *best-plan* callback ``best_plan(placed, pending, worker_type)`` returns the
normalized throughputs of the best parallelization plan for that pairing (and the plan), or
``None`` when the pair cannot be co-located; it replaces the table weights on every candidate
pair (one Python call per candidate pair, so meant for moderate sizes).
"""
from __future__ import annotations

import ast
import itertools
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Protocol, Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment

from policyopt.errors import InputError, UnknownNameError
from policyopt.mechanism.rounds import Combination, RoundAssignment
from policyopt.placement.stages import PACKERS, JobInfo, Packer

__all__ = [
    "PairThroughputs",
    "PairThroughputTable",
    "PlanChoice",
    "BestPlanFn",
    "MatchingPacker",
    "NoPacking",
    "match_pairs",
]



def _allows(worker_types: tuple[str, ...] | None, t: str) -> bool:
    """A job restricted to ``worker_types`` (None: any) may run on ``t``."""
    return worker_types is None or t in worker_types

class PairThroughputs(Protocol):
    """Normalized packed throughputs for candidate pairs."""

    def normalized(self, first: Sequence[str], second: Sequence[str],
                   worker_type: str) -> tuple[np.ndarray, np.ndarray]:
        """``(n_first, n_second)``, each ``(len(first), len(second))``: packed / alone throughput
        of ``first[i]`` (resp. ``second[j]``) when the two share GPUs of ``worker_type``; 0 if
        the pair does not fit."""


@dataclass(frozen=True)
class PlanChoice:
    """Result of a best-plan callback: normalized throughputs and the chosen plan."""

    first: float
    second: float
    plan: Any = None


BestPlanFn = Callable[[str, str, str], PlanChoice | None]


class PairThroughputTable:
    """Per-model throughput table: ``alone[type][model]``, ``packed[type][(ma, mb)] = (ta, tb)``.

    Jobs map to models through ``job_model``; a missing packed entry means the pair does not fit
    (``(mb, ma)`` is filled from ``(ma, mb)`` when only one order is given).
    """

    def __init__(
        self,
        job_model: Mapping[str, str],
        alone: Mapping[str, Mapping[str, float]],
        packed: Mapping[str, Mapping[tuple[str, str], tuple[float, float]]],
    ) -> None:
        models = sorted({m for per in alone.values() for m in per}
                        | {m for per in packed.values() for pair in per for m in pair})
        self.models = tuple(models)
        index = {m: i for i, m in enumerate(models)}
        for j, m in job_model.items():
            if m not in index:
                raise UnknownNameError(f"job_model.{j}", m, models)
        self.job_model = dict(job_model)
        self._model_index = index
        self._norm: dict[str, np.ndarray] = {}
        n = len(models)
        for t in set(alone) | set(packed):
            a = np.zeros(n)
            for m, v in alone.get(t, {}).items():
                a[index[m]] = float(v)
            p = np.zeros((n, n, 2))
            given = np.zeros((n, n), dtype=bool)
            for (ma, mb), (ta, tb) in packed.get(t, {}).items():
                i, k = index[ma], index[mb]
                p[i, k] = (ta, tb)
                given[i, k] = True
            fill = given.T & ~given
            p[fill] = p.transpose(1, 0, 2)[fill][:, ::-1]
            with np.errstate(divide="ignore", invalid="ignore"):
                norm = np.stack([np.where(a[:, None] > 0, p[:, :, 0] / a[:, None], 0.0),
                                 np.where(a[None, :] > 0, p[:, :, 1] / a[None, :], 0.0)], axis=-1)
            self._norm[t] = np.nan_to_num(norm)

    @classmethod
    def from_gavel(cls, raw: Mapping[str, Any], job_model: Mapping[str, str]) -> "PairThroughputTable":
        """From Gavel's throughput JSON ``{type: {"('<model>', sf)": {"null": t, "('<other>', sf)": [ta, tb]}}}``.

        Model names are the raw keys (they include the scale factor).
        """
        alone: dict[str, dict[str, float]] = {}
        packed: dict[str, dict[tuple[str, str], tuple[float, float]]] = {}
        for t, per_model in raw.items():
            alone[t], packed[t] = {}, {}
            for m, entries in per_model.items():
                for other, val in entries.items():
                    if other == "null":
                        alone[t][m] = float(val)
                    else:
                        ast.literal_eval(other)  # validates the key format
                        packed[t][(m, other)] = (float(val[0]), float(val[1]))
        return cls(job_model, alone, packed)

    def normalized(self, first: Sequence[str], second: Sequence[str],
                   worker_type: str) -> tuple[np.ndarray, np.ndarray]:
        if worker_type not in self._norm:
            raise UnknownNameError("worker_type", worker_type, self._norm)
        try:
            ia = np.fromiter((self._model_index[self.job_model[j]] for j in first), dtype=np.int64, count=len(first))
            ib = np.fromiter((self._model_index[self.job_model[j]] for j in second), dtype=np.int64, count=len(second))
        except KeyError as exc:
            raise UnknownNameError("job_model", exc.args[0], self.job_model) from None
        norm = self._norm[worker_type][ia[:, None], ib[None, :]]
        return norm[..., 0], norm[..., 1]


def match_pairs(w_first: np.ndarray, w_second: np.ndarray,
                bonus: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Maximum-weight matching on edges where both weights are > 0 and their sum is > 1; an edge
    weighs ``w_first + w_second (+ bonus)`` (``bonus >= 0`` changes weights, not the edge set).

    Returns matched ``(rows, cols)``; rows/cols without any edge are dropped before the
    Hungarian call to keep it small.
    """
    total = w_first + w_second
    edge = (w_first > 0) & (w_second > 0) & (total > 1.0)
    if bonus is not None:
        total = total + bonus
    rows = np.flatnonzero(edge.any(axis=1))
    cols = np.flatnonzero(edge.any(axis=0))
    if rows.size == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    sub = np.where(edge[np.ix_(rows, cols)], total[np.ix_(rows, cols)], 0.0)
    r, c = linear_sum_assignment(sub, maximize=True)
    keep = sub[r, c] > 0
    return rows[r[keep]], cols[c[keep]]


@PACKERS.register("matching")
class MatchingPacker(Packer):
    """Tesserae packing by maximum-weight bipartite matching (module docstring)."""

    def __init__(self, throughputs: PairThroughputs, best_plan: BestPlanFn | None = None,
                 keep_bonus: float = 0.0) -> None:
        if isinstance(keep_bonus, bool) or not isinstance(keep_bonus, (int, float)) \
                or not np.isfinite(keep_bonus) or keep_bonus < 0:
            raise InputError("keep_bonus", keep_bonus, "must be a finite number >= 0")
        self.throughputs = throughputs
        self.best_plan = best_plan
        self.keep_bonus = float(keep_bonus)
        self.last_plans: dict[tuple[str, str], Any] = {}
        self.last_partner: dict[str, str] = {}

    def pack(self, assignment: RoundAssignment, jobs: Mapping[str, JobInfo]) -> RoundAssignment:
        self.last_plans = {}
        for j in assignment.pending:
            if j not in jobs:
                raise UnknownNameError("assignment.pending", j, jobs)
        placed = [(i, c) for i, c in enumerate(assignment.combinations)
                  if len(c.jobs) == 1 and not (c.jobs[0] in jobs and jobs[c.jobs[0]].no_packing)]
        pending = [j for j in assignment.pending if not jobs[j].no_packing]
        new_combos = list(assignment.combinations)
        taken: set[str] = set()
        for g in sorted({c.num_gpus for _, c in placed}):
            rows_all = [(i, c) for i, c in placed if c.num_gpus == g]
            cand = [j for j in pending if jobs[j].scale_factor == g]
            if not cand:
                continue
            n_first = np.zeros((len(rows_all), len(cand)))
            n_second = np.zeros_like(n_first)
            allowed = np.ones_like(n_first, dtype=bool)
            by_type: dict[str, list[int]] = {}
            for r, (_, c) in enumerate(rows_all):
                by_type.setdefault(c.worker_type, []).append(r)
            for t, rs in by_type.items():
                allowed[rs] = np.fromiter((_allows(jobs[j].worker_types, t) for j in cand),
                                          dtype=bool, count=len(cand))[None, :]
                n_first[rs], n_second[rs] = self.throughputs.normalized([rows_all[r][1].jobs[0] for r in rs], cand, t)
            plans: dict[tuple[int, int], Any] = {}
            if self.best_plan is not None:
                for r, c_ in itertools.product(range(len(rows_all)), range(len(cand))):
                    p_job, t = rows_all[r][1].jobs[0], rows_all[r][1].worker_type
                    choice = self.best_plan(p_job, cand[c_], t)
                    n_first[r, c_], n_second[r, c_] = (0.0, 0.0) if choice is None else (choice.first, choice.second)
                    if choice is not None:
                        plans[(r, c_)] = choice.plan
            n_first[~allowed] = 0.0
            n_second[~allowed] = 0.0
            bonus = None
            if self.keep_bonus > 0 and self.last_partner:
                before = np.array([self.last_partner.get(c.jobs[0]) for _, c in rows_all], dtype=object)
                bonus = self.keep_bonus * (before[:, None] == np.array(cand, dtype=object)[None, :])
            rr, cc = match_pairs(n_first, n_second, bonus)
            for r, c_ in zip(rr.tolist(), cc.tolist()):
                i, comb = rows_all[r]
                q = cand[c_]
                new_combos[i] = Combination((comb.jobs[0], q), comb.worker_type, g, False)
                taken.add(q)
                if (r, c_) in plans:
                    self.last_plans[(comb.jobs[0], q)] = plans[(r, c_)]
        self.last_partner = {c.jobs[k]: c.jobs[1 - k] for c in new_combos if len(c.jobs) == 2 for k in (0, 1)}
        return RoundAssignment(tuple(new_combos), tuple(j for j in assignment.pending if j not in taken))


@PACKERS.register("none")
class NoPacking(Packer):
    """No packing: the assignment is returned unchanged."""

    def pack(self, assignment: RoundAssignment, jobs: Mapping[str, JobInfo]) -> RoundAssignment:
        return assignment
