"""Gavel-style round-based mechanism.

Notation: combination ``k`` (a job or a declared pair), worker type ``c``, target fraction
``X[k, c]``, time ``r[k, c]`` that ``k`` ran on ``c`` since the last allocation change
(*reset*), wall time ``T`` since the reset, carried deficit ``D[k, c]`` (seconds owed to ``k``
on ``c`` from before the reset; positive = owed).

Priority (higher runs first)::

    e[k, c] = r[k, c] - D[k, c]                 # effective time received
    p[k, c] = X[k, c] * T / e[k, c]  if e > 0   # = X / realized fraction
            = +inf                   otherwise  # never run (or still owed) -> first

Entries with ``X = 0`` never run. Ties are broken by the carried deficit ``D`` (largest
first, as in Gavel), then by ``X`` (largest first), then by lease renewal (the combination
ran on this type last round), then by index. Each round walks all ``(k, c)`` entries in that order once and
takes an entry when every job of ``k`` is still idle this round and type ``c`` still has
``scale_factor_k`` free workers (all workers or none; a job runs in at most one combination per
round; a pair shares the workers of one type).

*Renewal credit* ``H`` (``renewal_credit``, seconds, default 0): the entry ``(k, c)`` of a
combination that ran as the same combination on type ``c`` last round (a job alone, or the two
jobs of a pair together) is ranked as if it were owed ``H`` more (``D + H`` in ``e`` and in the
deficit tie-break). A combination then keeps its type (and its GPUs) until it is about ``H``
seconds ahead of its share there, instead of switching type, or stopping, as soon as another
entry ranks higher -- each switch is a checkpoint-restore. Fractions are still realized up to
about ``H`` per entry; ``H = 0`` is Gavel's mechanism.

Deficits across resets: at ``set_allocation`` every combination that survives the change keeps
``D <- clip(D + X_old * T - r, -deficit_cap, +deficit_cap)`` on each type where the new
allocation still gives it time (``X_new > 0``); elsewhere the deficit is dropped because it
could never be repaid there. ``r`` and ``T`` restart at 0. A job short-changed before a reset is
thus served first after it, and one that was ahead waits until it is even.

``ordering="gavel"`` replaces the single walk by Gavel's (:mod:`policyopt.mechanism.gavel_order`):
the types with workers are walked one after another (in Gavel's order, ``v100, p100, k80`` and any
other type after them in ``worker_counts`` order, or that list shuffled every round by a seeded
``random.Random`` with ``shuffle_types``, as Gavel does for heterogeneity-agnostic policies);
within a type by ``X / (L/2 + r)`` (Gavel's share of the type's job-time), the deficit only breaking
ties and carried unclipped (unless ``deficit_cap`` is given) also where ``X_new = 0``; entries with
``X = 0`` that can run (``runnable``) are taken last, on the workers still idle.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Mapping, Sequence

import random

import numpy as np

from policyopt.errors import InputError, UnknownNameError
from policyopt.mechanism.allocation import (
    AllocationArrays,
    build_allocation_arrays,
    validate_worker_counts,
)
from policyopt.mechanism.gavel_order import (ORDERINGS, gavel_priorities, gavel_type_base, gavel_walk_order,
                                             shuffled_type_order)

__all__ = ["Combination", "RoundAssignment", "RoundMechanism"]


@dataclass(frozen=True)
class Combination:
    """One job, or a pair sharing the same GPUs, running on ``num_gpus`` workers of one type.

    ``renewed`` is true when every job of the combination ran on ``worker_type`` last round: its
    lease is renewed and the placer keeps it on the same GPUs.
    """

    jobs: tuple[str, ...]
    worker_type: str
    num_gpus: int
    renewed: bool = False


@dataclass(frozen=True)
class RoundAssignment:
    """What runs this round. ``pending`` lists jobs that do not run, highest priority first."""

    combinations: tuple[Combination, ...]
    pending: tuple[str, ...] = ()

    def running_jobs(self) -> set[str]:
        """Every job that runs this round (alone or in a pair)."""
        return {j for comb in self.combinations for j in comb.jobs}

    def by_job(self) -> dict[str, Combination]:
        """Job id -> the combination it runs in."""
        return {j: comb for comb in self.combinations for j in comb.jobs}

    def gpus_used(self) -> dict[str, int]:
        """Worker type -> number of workers used this round."""
        used: dict[str, int] = {}
        for comb in self.combinations:
            used[comb.worker_type] = used.get(comb.worker_type, 0) + comb.num_gpus
        return used


@dataclass
class _State:
    arrays: AllocationArrays
    received: np.ndarray  # (K, C) seconds run since the reset
    deficit: np.ndarray  # (K, C) seconds owed from before the reset
    active: np.ndarray  # (K,) bool, false once a member job was removed
    elapsed: float = 0.0
    combo_index: dict[tuple[str, ...], int] = field(default_factory=dict)
    runnable: np.ndarray | None = None  # (K, C) bool: X = 0 entries that may run (ordering="gavel")


class RoundMechanism:
    """Realize time fractions ``X`` over rounds (see the module docstring for the math).

    Parameters
    ----------
    worker_counts:
        Worker type -> number of workers (GPUs).
    round_length:
        Seconds per round (6 minutes in Gavel's evaluation).
    deficit_cap:
        Bound, in seconds, on the deficit carried across a reset (default: one round).
        ``float('inf')`` carries everything.
    work_conserving:
        If true (Gavel), idle workers are given to any job with ``X > 0`` even if it is ahead.
        If false, an entry only runs while running it keeps ``r`` within half a round of the
        ideal: ``r + L <= X * (T + L) + D + L / 2``.
    scale_factors:
        Optional initial job -> scale factor map; ``set_allocation`` can extend it.
    renewal_credit:
        Seconds of credit for the entry a combination ran on last round (module docstring).
    ordering:
        ``"default"`` (one walk over all entries by ``X·T/(r − D)``) or ``"gavel"`` (Gavel's per-type
        walks, module docstring); ``"gavel"`` needs ``work_conserving`` and no renewal credit.
    shuffle_types:
        With ``ordering="gavel"``: walk the types in an order shuffled every round (Gavel, for
        heterogeneity-agnostic policies) instead of ``worker_counts`` order.
    shuffle_seed:
        Seed of that shuffle's ``random.Random`` (Gavel's is its simulator seed + 5).
    """

    def __init__(
        self,
        worker_counts: Mapping[str, int],
        *,
        round_length: float = 360.0,
        deficit_cap: float | None = None,
        work_conserving: bool = True,
        scale_factors: Mapping[str, int] | None = None,
        renewal_credit: float = 0.0,
        ordering: str = "default",
        shuffle_types: bool = False,
        shuffle_seed: int = 0,
    ) -> None:
        self._counts = validate_worker_counts(worker_counts)
        if ordering not in ORDERINGS:
            raise InputError("ordering", ordering, f"must be one of {list(ORDERINGS)}")
        self.ordering = ordering
        if not isinstance(shuffle_types, bool):
            raise InputError("shuffle_types", shuffle_types, "must be true or false")
        if shuffle_types and ordering != "gavel":
            raise InputError("shuffle_types", shuffle_types, "shuffles the per-type walks of ordering='gavel' only")
        if isinstance(shuffle_seed, bool) or not isinstance(shuffle_seed, (int, np.integer)):
            raise InputError("shuffle_seed", shuffle_seed, "must be an integer")
        self.shuffle_types = shuffle_types
        self.shuffle_seed = int(shuffle_seed)
        self._shuffler = random.Random(self.shuffle_seed)
        if not np.isfinite(renewal_credit) or renewal_credit < 0:
            raise InputError("renewal_credit", renewal_credit, "must be a finite number of seconds >= 0")
        self.renewal_credit = float(renewal_credit)
        self.worker_types: tuple[str, ...] = tuple(self._counts)
        self._type_index = {t: i for i, t in enumerate(self.worker_types)}
        if not np.isfinite(round_length) or round_length <= 0:
            raise InputError("round_length", round_length, "must be a positive number of seconds")
        self.round_length = float(round_length)
        gavel = ordering == "gavel"
        cap = (float("inf") if gavel else self.round_length) if deficit_cap is None else float(deficit_cap)
        if np.isnan(cap) or cap < 0:
            raise InputError("deficit_cap", deficit_cap, "must be >= 0 seconds")
        self.deficit_cap = cap
        self.work_conserving = bool(work_conserving)
        if gavel and not self.work_conserving:
            raise InputError("work_conserving", work_conserving, "ordering='gavel' is work-conserving (Gavel's)")
        if gavel and self.renewal_credit > 0:
            raise InputError("renewal_credit", renewal_credit, "ordering='gavel' has no renewal credit (use 0)")
        self._scale_factors: dict[str, int] = dict(scale_factors or {})
        self._state: _State | None = None
        self._last_type: dict[str, int] = {}  # job -> type index it ran on last round
        self._last_partner: dict[str, str] = {}  # job -> the job it shared GPUs with last round
        self.num_resets = 0

    # ------------------------------------------------------------------ persistence
    def to_state(self) -> dict[str, Any]:
        """A JSON-serializable snapshot (see :mod:`policyopt.mechanism.state`)."""
        from policyopt.mechanism.state import mechanism_to_state

        return mechanism_to_state(self)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> "RoundMechanism":
        """Inverse of :meth:`to_state`: the restored mechanism schedules exactly like the saved one."""
        from policyopt.mechanism.state import mechanism_from_state

        return mechanism_from_state(state)

    # ------------------------------------------------------------------ allocation
    def set_allocation(
        self,
        allocation: Mapping[str, Mapping[str, float]],
        colocated: Sequence[Mapping[str, Any]] = (),
        scale_factors: Mapping[str, int] | None = None,
        runnable: Mapping[str, Iterable[str]] | None = None,
    ) -> None:
        """Install a new allocation (a reset); carry deficits as the module docstring says.

        ``runnable`` (job -> worker types it can run on alone, e.g. where its throughput is positive):
        with ``ordering="gavel"``, the entries with ``X = 0`` it names are taken last on idle workers."""
        if scale_factors is not None:
            self._scale_factors.update(scale_factors)
        arrays = build_allocation_arrays(allocation, colocated, self._scale_factors, self._counts)
        mask = None
        if runnable is not None:
            row = {j: i for i, j in enumerate(arrays.job_ids)}
            unknown = [j for j in runnable if j not in row]
            if unknown:
                raise UnknownNameError("runnable", unknown[0], arrays.job_ids)
            entries = [(j, t) for j, types in runnable.items() for t in types]
            bad = [(j, t) for j, t in entries if t not in self._type_index]
            if bad:
                raise UnknownNameError(f"runnable.{bad[0][0]}", bad[0][1], self.worker_types)
            rows = np.fromiter((row[j] for j, _ in entries), np.int64, len(entries))
            cols = np.fromiter((self._type_index[t] for _, t in entries), np.int64, len(entries))
            mask = np.zeros(arrays.x.shape, dtype=bool)
            mask[rows, cols] = True
        self.set_allocation_arrays(arrays, mask)

    def set_allocation_arrays(self, arrays: AllocationArrays, runnable: np.ndarray | None = None) -> None:
        """:meth:`set_allocation` for an allocation already in array form (its ``worker_types`` must
        be this mechanism's, in order; the constraints of :func:`build_allocation_arrays` must hold).
        ``runnable``: ``(K, C)`` bool, the entries with ``X = 0`` that ``ordering="gavel"`` may take."""
        if arrays.worker_types != self.worker_types:
            raise InputError("arrays.worker_types", arrays.worker_types, f"must be {self.worker_types}")
        self._scale_factors.update(zip(arrays.job_ids, arrays.scale[:arrays.num_singles].tolist()))
        k, nc = arrays.x.shape
        if runnable is not None:
            runnable = np.asarray(runnable, dtype=bool)
            if runnable.shape != (k, nc):
                raise InputError("runnable", runnable.shape, f"must have the allocation's shape {(k, nc)}")
        deficit = np.zeros((k, nc))
        combo_index = {combo: i for i, combo in enumerate(arrays.combos)}
        old = self._state
        if old is not None:
            carried = old.deficit + old.arrays.x * old.elapsed - old.received
            np.clip(carried, -self.deficit_cap, self.deficit_cap, out=carried)
            pairs = [(i_old, combo_index[c]) for c, i_old in old.combo_index.items()
                     if c in combo_index and old.active[i_old]]
            if pairs:
                src, dst = (np.array(v, dtype=np.int64) for v in zip(*pairs))
                deficit[dst] = carried[src]
            if self.ordering != "gavel":
                deficit[arrays.x <= 0.0] = 0.0
        self._state = _State(arrays, np.zeros((k, nc)), deficit, np.ones(k, dtype=bool),
                             0.0, combo_index, runnable)
        known = set(arrays.job_ids)
        self._last_type = {j: c for j, c in self._last_type.items() if j in known}
        self.num_resets += 1

    def remove_jobs(self, job_ids: Iterable[str]) -> None:
        """Stop scheduling jobs (e.g. completed) without a reset; their rows are masked."""
        st = self._require_state()
        idx = {j: i for i, j in enumerate(st.arrays.job_ids)}
        rows = []
        for j in job_ids:
            if j not in idx:
                raise UnknownNameError("job_ids", j, st.arrays.job_ids)
            rows.append(idx[j])
        gone = np.zeros(len(st.arrays.job_ids), dtype=bool)
        gone[rows] = True
        m = st.arrays.members
        st.active &= ~(gone[m[:, 0]] | ((m[:, 1] >= 0) & gone[np.maximum(m[:, 1], 0)]))
        for j in job_ids:
            self._last_type.pop(j, None)
            self._last_partner.pop(j, None)

    # ------------------------------------------------------------------ views
    @property
    def worker_counts(self) -> dict[str, int]:
        """Worker type -> number of workers."""
        return dict(self._counts)

    @property
    def arrays(self) -> AllocationArrays:
        """The installed allocation as arrays."""
        return self._require_state().arrays

    @property
    def elapsed(self) -> float:
        """Seconds since the last reset."""
        return self._require_state().elapsed

    @property
    def received(self) -> np.ndarray:
        """``r[k, c]``: seconds combination ``k`` ran on type ``c`` since the reset (copy)."""
        return self._require_state().received.copy()

    @property
    def deficits(self) -> np.ndarray:
        """``D[k, c]``: seconds carried from before the reset (copy)."""
        return self._require_state().deficit.copy()

    def realized_fractions(self) -> np.ndarray:
        """``r / T`` (zeros before the first recorded round)."""
        st = self._require_state()
        return st.received / st.elapsed if st.elapsed > 0 else np.zeros_like(st.received)

    def priorities(self, deficit: np.ndarray | None = None) -> np.ndarray:
        """``p[k, c]`` as in the module docstring; ``0`` where the entry cannot run (``deficit``:
        ``D`` to use instead of the carried one). With ``ordering="gavel"``, Gavel's priority
        (:func:`~policyopt.mechanism.gavel_order.gavel_priorities`; ``0`` for ``X = 0``)."""
        st = self._require_state()
        x = st.arrays.x * st.active[:, None]
        if self.ordering == "gavel":
            return gavel_priorities(x, st.received, self.round_length)
        eff = st.received - (st.deficit if deficit is None else deficit)
        with np.errstate(divide="ignore", invalid="ignore"):
            prio = np.where(eff > 0, x * st.elapsed / np.where(eff > 0, eff, 1.0), np.inf)
        prio[x <= 0] = 0.0
        return prio

    def _require_state(self) -> _State:
        if self._state is None:
            raise InputError("allocation", None, "no allocation installed; call set_allocation first")
        return self._state

    # ------------------------------------------------------------------ rounds
    def schedule_round(self) -> RoundAssignment:
        """Pick this round's combinations greedily by priority (see module docstring)."""
        st = self._require_state()
        arr = st.arrays
        nc = len(self.worker_types)
        x = arr.x * st.active[:, None]
        last = np.full(len(arr.job_ids), -1, dtype=np.int64)
        if self._last_type:
            jidx = {j: i for i, j in enumerate(arr.job_ids)}
            for j, c in self._last_type.items():
                last[jidx[j]] = c
        m0, m1 = arr.members[:, 0], arr.members[:, 1]
        type_ids = np.arange(nc)[None, :]
        renew = (last[m0][:, None] == type_ids) & ((m1[:, None] < 0) | (last[np.maximum(m1, 0)][:, None] == type_ids))
        deficit = st.deficit
        if self.renewal_credit > 0:
            deficit = st.deficit + self.renewal_credit * (renew & self._same_combination()[:, None])
        prio = self.priorities(deficit)
        eligible = x > 0
        if self.ordering == "gavel":
            if st.runnable is not None:
                eligible |= st.runnable & st.active[:, None]
            # (Gavel's list: v100, p100, k80, those with workers)
            base = gavel_type_base([self._counts[t] for t in self.worker_types], self.worker_types)
            types = shuffled_type_order(self._shuffler, base) if self.shuffle_types else base
            order = gavel_walk_order(eligible, prio, deficit, x, types)
        else:
            if not self.work_conserving:
                L, T = self.round_length, st.elapsed
                eligible &= st.received + L <= x * (T + L) + deficit + 0.5 * L
            flat = np.flatnonzero(eligible.ravel())
            order = flat[np.lexsort((
                -renew.ravel()[flat].astype(np.int8),
                -x.ravel()[flat],
                -deficit.ravel()[flat],
                -prio.ravel()[flat],
            ))]
        ks, cs = np.divmod(order, nc)
        left = [self._counts[t] for t in self.worker_types]
        open_types = sum(1 for n in left if n > 0)
        busy = bytearray(len(arr.job_ids))
        chosen: list[tuple[int, int]] = []
        for k, c, a, b, s in zip(ks.tolist(), cs.tolist(), m0[ks].tolist(), m1[ks].tolist(),
                                 arr.scale[ks].tolist()):
            if open_types == 0:
                break
            if left[c] < s or busy[a] or (b >= 0 and busy[b]):
                continue
            left[c] -= s
            busy[a] = 1
            if b >= 0:
                busy[b] = 1
            chosen.append((k, c))
            if left[c] == 0:
                open_types -= 1

        combos = tuple(
            Combination(arr.combos[k], self.worker_types[c], int(arr.scale[k]), bool(renew[k, c]))
            for k, c in chosen
        )
        # Pending jobs, ordered by the best position of any of their entries in the walk.
        pos = np.full(len(arr.job_ids), np.iinfo(np.int64).max, dtype=np.int64)
        rank = np.arange(order.size, dtype=np.int64)
        np.minimum.at(pos, m0[ks], rank)
        has_b = m1[ks] >= 0
        np.minimum.at(pos, m1[ks][has_b], rank[has_b])
        waiting = np.flatnonzero((np.frombuffer(bytes(busy), dtype=np.uint8) == 0)
                                 & (pos < np.iinfo(np.int64).max))
        waiting = waiting[np.argsort(pos[waiting], kind="stable")]
        return RoundAssignment(combos, tuple(arr.job_ids[i] for i in waiting.tolist()))

    def _same_combination(self) -> np.ndarray:
        """Per combination: whether it ran as this same combination last round (a job alone, or the
        two jobs of a pair together); with ``renew`` it marks the entries that get the credit."""
        arr = self._require_state().arrays
        together = np.fromiter((self._last_partner.get(c[0]) == c[1] for c in arr.combos[arr.num_singles:]),
                               bool, len(arr.combos) - arr.num_singles)
        alone = np.fromiter((j not in self._last_partner for j in arr.job_ids), bool, arr.num_singles)
        return np.concatenate((alone, together))

    def credit(self, job_id: str, worker_type: str, seconds: float) -> None:
        """``r[job, c] += seconds`` without advancing ``T``: time a job ran alone on ``worker_type``
        that :meth:`record_round` did not record (e.g. the seconds between a round's start and
        the moment a stopped job actually stopped)."""
        st = self._require_state()
        key = (job_id,)
        if key not in st.combo_index:
            raise UnknownNameError("job_id", job_id, st.arrays.job_ids)
        if worker_type not in self._type_index:
            raise UnknownNameError("worker_type", worker_type, self.worker_types)
        if not np.isfinite(seconds) or seconds < 0:
            raise InputError("seconds", seconds, "must be a finite number of seconds >= 0")
        st.received[st.combo_index[key], self._type_index[worker_type]] += float(seconds)

    def record_round(
        self, assignment: RoundAssignment, durations: Mapping[str, float] | None = None,
        length: float | None = None,
    ) -> None:
        """Account one round: ``T += ℓ``; ``r[k, c] += d_k`` for what ran.

        ``ℓ`` is ``length`` (a round cut short, ``0 < ℓ ≤ round_length``) or the round length;
        ``d_k`` is ``ℓ``, or with ``durations`` (job -> seconds run this round, e.g. a job that
        completed mid-round) the smallest duration among the combination's jobs (``0 ≤ d_k ≤ ℓ``).
        """
        st = self._require_state()
        span = self.round_length if length is None else float(length)
        if not (np.isfinite(span) and 0.0 < span <= self.round_length * (1 + 1e-9)):
            raise InputError("length", length, f"must lie in (0, round_length={self.round_length}]")
        rows: list[int] = []
        cols: list[int] = []
        secs: list[float] = []
        for i, comb in enumerate(assignment.combinations):
            key = tuple(sorted(comb.jobs))
            if key not in st.combo_index:
                raise UnknownNameError(f"assignment.combinations[{i}].jobs", key,
                                       ["|".join(c) for c in st.arrays.combos])
            if comb.worker_type not in self._type_index:
                raise UnknownNameError(f"assignment.combinations[{i}].worker_type",
                                       comb.worker_type, self.worker_types)
            if durations is None:
                d = span
            else:
                missing = [j for j in comb.jobs if j not in durations]
                if missing:
                    raise InputError(f"durations.{missing[0]}", None, "no duration for a job that ran")
                d = float(min(durations[j] for j in comb.jobs))
                if not 0.0 <= d <= span * (1 + 1e-9):
                    raise InputError(f"durations.{comb.jobs[0]}", d, f"must lie in [0, length={span}]")
            rows.append(st.combo_index[key])
            cols.append(self._type_index[comb.worker_type])
            secs.append(d)
        if rows:
            np.add.at(st.received, (np.array(rows), np.array(cols)), np.array(secs))
        st.elapsed += span
        self._last_type = {j: self._type_index[comb.worker_type]
                           for comb in assignment.combinations for j in comb.jobs}
        self._last_partner = {comb.jobs[i]: comb.jobs[1 - i] for comb in assignment.combinations
                              if len(comb.jobs) == 2 for i in (0, 1)}
