"""A placement plan: which GPUs each running job holds this round.

Invariants (checked by :meth:`Placement.build`): GPU ids exist; a job's GPUs are distinct and of
one worker type; a GPU holds at most two jobs, and two only if they are a declared pair, which
then holds exactly the same GPUs. A job is *spread* when its GPUs span more than one server.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping, Sequence

import numpy as np

from policyopt.errors import InputError
from policyopt.placement.layout import ClusterLayout

__all__ = ["Placement", "migrated_jobs", "unconsolidated_type"]


@dataclass(frozen=True, eq=False)
class Placement:
    """Job -> sorted GPU ids on a :class:`ClusterLayout`; ``pairs`` are sorted job-id tuples."""

    layout: ClusterLayout
    gpus: Mapping[str, tuple[int, ...]]
    pairs: frozenset[tuple[str, str]]
    spread: frozenset[str]

    @classmethod
    def build(
        cls,
        layout: ClusterLayout,
        gpus: Mapping[str, Sequence[int]],
        pairs: Iterable[Sequence[str]] = (),
    ) -> "Placement":
        """Validate and build a placement (raises :class:`InputError` on a broken invariant)."""
        jobs = list(gpus)
        norm = {j: tuple(sorted(int(g) for g in gpus[j])) for j in jobs}
        pair_set = frozenset(tuple(sorted((str(p[0]), str(p[1])))) for p in pairs)
        lengths = np.fromiter((len(norm[j]) for j in jobs), dtype=np.int64, count=len(jobs))
        if lengths.size and lengths.min() < 1:
            j = jobs[int(np.argmin(lengths))]
            raise InputError(f"gpus.{j}", gpus[j], "a placed job needs at least one GPU")
        flat = np.fromiter((g for j in jobs for g in norm[j]), dtype=np.int64, count=int(lengths.sum()))
        owner = np.repeat(np.arange(len(jobs)), lengths)
        bad = np.flatnonzero((flat < 0) | (flat >= layout.num_gpus))
        if bad.size:
            j = jobs[int(owner[bad[0]])]
            raise InputError(f"gpus.{j}", gpus[j], f"GPU id outside 0..{layout.num_gpus - 1}")
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if lengths.size else lengths
        if flat.size:
            dup = np.flatnonzero(np.diff(flat) == 0)
            dup = dup[owner[dup] == owner[dup + 1]]
            if dup.size:
                j = jobs[int(owner[dup[0]])]
                raise InputError(f"gpus.{j}", gpus[j], "a GPU listed twice for the same job")
            types = layout.gpu_type[flat]
            mixed = np.minimum.reduceat(types, starts) != np.maximum.reduceat(types, starts)
            if mixed.any():
                j = jobs[int(np.flatnonzero(mixed)[0])]
                raise InputError(f"gpus.{j}", gpus[j], "a job's GPUs must all be of one worker type")
            srv = layout.gpu_server[flat]
            spread_mask = np.minimum.reduceat(srv, starts) != np.maximum.reduceat(srv, starts)
        else:
            spread_mask = np.zeros(0, dtype=bool)
        occupancy = np.bincount(flat, minlength=layout.num_gpus)
        if occupancy.size and occupancy.max() > 2:
            g = int(np.argmax(occupancy))
            holders = sorted({jobs[i] for i in owner[flat == g]})
            raise InputError(f"gpus[*] (GPU {g})", holders, "a GPU holds more than two jobs")
        shared = np.flatnonzero(occupancy == 2)
        if shared.size:
            order = np.argsort(flat, kind="stable")
            sf, so = flat[order], owner[order]
            first = np.searchsorted(sf, shared)
            for g, a, b in zip(shared.tolist(), so[first].tolist(), so[first + 1].tolist()):
                key = tuple(sorted((jobs[a], jobs[b])))
                if key not in pair_set:
                    raise InputError(f"gpus[*] (GPU {g})", list(key),
                                     "two jobs share a GPU but are not a declared pair")
        for a, b in pair_set:
            if a not in norm or b not in norm or norm[a] != norm[b]:
                raise InputError("pairs", (a, b), "a declared pair must hold exactly the same GPUs")
        spread = frozenset(j for j, s in zip(jobs, spread_mask.tolist()) if s)
        return cls(layout, norm, pair_set, spread)  # type: ignore[arg-type]  # pairs were checked to be two ids

    # ------------------------------------------------------------------ queries
    def worker_type_of(self, job: str) -> str:
        """Worker type of the GPUs a job holds."""
        return self.layout.worker_types[int(self.layout.gpu_type[self.gpus[job][0]])]

    def partner_of(self) -> dict[str, str]:
        """Job -> its pair partner (only paired jobs appear)."""
        out: dict[str, str] = {}
        for a, b in self.pairs:
            out[a], out[b] = b, a
        return out

    def slots(self, vocabulary: Mapping[str, int]) -> np.ndarray:
        """``(num_gpus, 2)`` array of job indices (``vocabulary[job]``) per GPU, ``-1`` if empty."""
        out = np.full((self.layout.num_gpus, 2), -1, dtype=np.int64)
        jobs = list(self.gpus)
        if not jobs:
            return out
        lengths = np.fromiter((len(self.gpus[j]) for j in jobs), dtype=np.int64, count=len(jobs))
        flat = np.fromiter((g for j in jobs for g in self.gpus[j]), dtype=np.int64, count=int(lengths.sum()))
        ids = np.repeat(np.fromiter((vocabulary[j] for j in jobs), dtype=np.int64, count=len(jobs)), lengths)
        order = np.lexsort((ids, flat))
        flat, ids = flat[order], ids[order]
        second = np.zeros(flat.size, dtype=bool)
        second[1:] = flat[1:] == flat[:-1]
        out[flat[~second], 0] = ids[~second]
        out[flat[second], 1] = ids[second]
        return out

    def relabel(self, new_to_old: np.ndarray) -> "Placement":
        """Rename every GPU ``g`` to ``new_to_old[g]``; the map must be a permutation within types."""
        perm = np.asarray(new_to_old, dtype=np.int64)
        lay = self.layout
        if perm.shape != (lay.num_gpus,) or not np.array_equal(np.sort(perm), np.arange(lay.num_gpus)) \
                or not np.array_equal(lay.gpu_type[perm], lay.gpu_type):
            raise InputError("new_to_old", perm, "must be a permutation of GPU ids that keeps each GPU's type")
        # a type-keeping permutation of a valid placement is valid (GPUs stay distinct, of one type,
        # shared only by the same pairs); only the sorted GPU tuples and the spread jobs change
        jobs = list(self.gpus)
        lengths = np.fromiter((len(self.gpus[j]) for j in jobs), np.int64, len(jobs))
        flat = perm[np.fromiter((g for j in jobs for g in self.gpus[j]), np.int64, int(lengths.sum()))]
        owner = np.repeat(np.arange(len(jobs)), lengths)
        order = np.lexsort((flat, owner))
        flat = flat[order]
        starts = np.concatenate(([0], np.cumsum(lengths)[:-1])) if lengths.size else lengths
        if flat.size:
            srv = lay.gpu_server[flat]
            spread_mask = np.minimum.reduceat(srv, starts) != np.maximum.reduceat(srv, starts)
        else:
            spread_mask = np.zeros(0, bool)
        ids = flat.tolist()
        gpus = {j: tuple(ids[a:a + n]) for j, a, n in zip(jobs, starts.tolist(), lengths.tolist())}
        spread = frozenset(j for j, s in zip(jobs, spread_mask.tolist()) if s)
        return Placement(lay, gpus, self.pairs, spread)


def migrated_jobs(previous: Placement | None, current: Placement) -> set[str]:
    """Jobs that run in both rounds on different GPU sets."""
    if previous is None:
        return set()
    return {j for j, g in current.gpus.items() if j in previous.gpus and previous.gpus[j] != g}


def unconsolidated_type(worker_type: str, spread: bool, available: Iterable[str]) -> str:
    """``<type>_unconsolidated`` for a spread job when the throughput data has it, else the type."""
    name = f"{worker_type}_unconsolidated"
    return name if spread and name in set(available) else worker_type
