"""Parts of :class:`policyopt.aggregate_resolve.AggregateModel`: each job's class after a change of
the job set, and the reduced LP's standard form brought to new class multiplicities (a mixin; the
state it reads and writes is the model's, see its constructor)."""
from __future__ import annotations

from typing import Any

import numpy as np

from ._aggregate_parts import _PerClass, match_slots
from .allocation import AllocationSpace

__all__: list[str] = []



def data_keys(T: np.ndarray, scale: np.ndarray, weights: np.ndarray) -> dict[bytes, int]:
    """Each class's data row ``(T[g], scale[g], weights[g])`` as bytes → ``g`` (one row per class)."""
    rows = np.concatenate([T, scale[:, None], weights[:, None]], axis=1)
    return dict(zip(rows.view(f"V{rows.shape[1] * rows.itemsize}").ravel().tolist(), range(len(rows))))

class _ClassCounts:
    """The class matching and count updates of :class:`~policyopt.aggregate_resolve.AggregateModel`."""

    # (the model's state these methods use; set by AggregateModel.__init__)
    ids: np.ndarray
    group: np.ndarray
    mult: np.ndarray
    T: np.ndarray
    scale: np.ndarray
    weights: np.ndarray
    rep_T: np.ndarray
    rep_scale: np.ndarray
    rep_weights: np.ndarray
    small: Any
    factor: Any
    base: tuple[np.ndarray, ...]
    col_group: np.ndarray
    row_group: np.ndarray
    lin_pos: np.ndarray
    lin_group: np.ndarray
    lin_unit: np.ndarray
    n_dead: int
    classes_emptied: int
    _keys: dict[bytes, int] | None
    _slot_of: dict[Any, int] | None
    _cls_cols: _PerClass
    _cls_lin: _PerClass
    _cls_parts: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]]

    def _general_classes(self, space: AllocationSpace, p: int, q: int, same_pre: np.ndarray | None,
                         same_suf: np.ndarray | None) -> np.ndarray | None:
        """Each job's class where kept jobs' data changed in the common prefix (``same_pre``: per job,
        whether its data is the kept one's; ``None``: all are) or suffix, or jobs are found in the
        middle by id; ``None`` where a job has data no class has."""
        n, S = len(space.jobs), len(self.ids)
        T, scale, weights = space.T, space.scale, space.weights
        g = np.full(n, -1, np.int64)
        for a, b, sl, same in ((0, p, slice(0, p), same_pre), (n - q, n, slice(S - q, S), same_suf)):
            if b > a:
                g[a:b] = self.group[sl] if same is None else np.where(same, self.group[sl], -1)
        if n - q > p and S - q > p or same_pre is not None or same_suf is not None:
            slot, _, _, self._slot_of = match_slots(self.ids, space.jobs.labels, self._slot_of)
            mid = ((slot >= 0) & (g < 0)).nonzero()[0]
            if mid.size:
                sm = slot[mid]
                same = self._same(T[mid], scale[mid], weights[mid], sm)
                if same is None:
                    g[mid] = self.group[sm]
                else:
                    g[mid[same]] = self.group[sm[same]]
        new = (g < 0).nonzero()[0]
        if new.size:  # arrivals (and kept jobs whose data changed): the class of equal data
            got = self._classes_of(T[new], scale[new], weights[new])
            if got is None:
                return None
            g[new] = got
        return g

    def _same(self, T: np.ndarray, scale: np.ndarray, weights: np.ndarray, at: Any) -> np.ndarray | None:
        """Per job, whether its data equals the kept job's at ``at`` (a slice or positions);
        ``None`` when all do."""
        dT = T != self.T[at]
        if not (np.count_nonzero(dT) or np.count_nonzero(scale != self.scale[at])
                or np.count_nonzero(weights != self.weights[at])):
            return None
        return ~dT.any(axis=1) & (scale == self.scale[at]) & (weights == self.weights[at])

    def _classes_of(self, T: np.ndarray, scale: np.ndarray, weights: np.ndarray) -> np.ndarray | None:
        """The class of equal data of each of these jobs (compared with every class's data), or
        ``None`` if one has no class. A few jobs are first looked up by their data's bytes (equal
        bytes: equal data; a miss, such as ``-0.0`` against ``0.0``, is compared as numbers)."""
        if len(T) <= 8:
            keys = self._class_keys()
            got = [keys.get(T[i].tobytes() + scale[i].tobytes() + weights[i].tobytes()) for i in range(len(T))]
            if None not in got:
                return np.array(got, np.int64)
        eq = ((T[:, None, :] == self.rep_T[None, :, :]).all(axis=2)
              & (scale[:, None] == self.rep_scale[None, :]) & (weights[:, None] == self.rep_weights[None, :]))
        if not eq.any(axis=1).all():
            return None
        return eq.argmax(axis=1)

    def _class_keys(self) -> dict[bytes, int]:
        """Each class's data (throughputs, scale factor, weight) as bytes → the class (built once)."""
        keys = self._keys
        if keys is None:
            keys = self._keys = data_keys(self.rep_T, self.rep_scale, self.rep_weights)
        return keys

    def _few_counts(self, mult: np.ndarray) -> bool:
        """The usual change, in place: the counts of a few classes changed, none emptied or refilled
        (their bounds and rows stay): their costs ``m_g c_g`` and linking entries ``m_g B_g`` set.
        ``False`` (nothing done) otherwise."""
        ch = (mult != self.mult).nonzero()[0]
        if ch.size > 8:
            return False
        if ch.size:
            new, was = mult[ch].tolist(), self.mult[ch].tolist()
            if any((a > 0) != (b > 0) for a, b in zip(new, was)):
                return False
            sf = self.small.sf
            data, cost = sf.A.data, sf.c
            for g, m in zip(ch.tolist(), new):
                pos, unit, cc, c = self._cls_at(g)
                data[pos] = unit * m
                cost[cc] = c * m
            if self.factor is not None:
                self.factor.stale = True
        return True

    def _cls_at(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Class ``g``'s linking entries (positions in the standard form's ``A.data``) and their unit
        values, its columns and their unit costs (found at the class's first change, kept)."""
        got = self._cls_parts.get(g)
        if got is None:
            e = self._cls_lin[g]
            cc = self._cls_cols[g]
            got = self._cls_parts[g] = (self.lin_pos[e], self.lin_unit[e], cc, self.base[0][cc])
        return got

    def _general_restore(self, mult: np.ndarray, sc: np.ndarray, sr: np.ndarray, se: np.ndarray) -> None:
        """:meth:`_restore` of the columns ``sc``, rows ``sr`` and linking entries ``se``."""
        sf, cg, rg = self.small.sf, self.col_group, self.row_group
        c, lo, hi, rlo, rhi = self.base
        live = np.append(mult > 0, True)
        self.n_dead = int(mult.size - np.count_nonzero(mult))
        self.classes_emptied += int(np.count_nonzero((mult == 0) & (self.mult > 0)))
        m_col = np.append(mult, 1).astype(np.float64)[cg[sc]]
        dead_c = ~live[cg[sc]]
        want_c = c[sc] * m_col
        want_lo = np.where(dead_c, 0.0, lo[sc])
        want_hi = np.where(dead_c, 0.0, hi[sc])
        dead_r = ~live[rg[sr]]
        want_rlo = np.where(dead_r, -np.inf, rlo[sr])
        want_rhi = np.where(dead_r, np.inf, rhi[sr])
        pos = self.lin_pos[se]
        vals = self.lin_unit[se] * mult[self.lin_group[se]]
        d = (sf.A.data[pos] != vals).nonzero()[0]
        if d.size:  # (all in the standard form: pushed to HiGHS before its next run, sync)
            sf.A.data[pos[d]] = vals[d]
            if self.factor is not None:
                self.factor.stale = True
        d = (sf.c[sc] != want_c).nonzero()[0]
        if d.size:
            sf.c[sc[d]] = want_c[d]
        d = ((sf.col_lower[sc] != want_lo) | (sf.col_upper[sc] != want_hi)).nonzero()[0]
        if d.size:
            sf.col_lower[sc[d]], sf.col_upper[sc[d]] = want_lo[d], want_hi[d]
        d = ((sf.row_lower[sr] != want_rlo) | (sf.row_upper[sr] != want_rhi)).nonzero()[0]
        if d.size:
            sf.row_lower[sr[d]], sf.row_upper[sr[d]] = want_rlo[d], want_rhi[d]
