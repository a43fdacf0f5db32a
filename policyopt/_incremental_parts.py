"""Parts of :mod:`policyopt.incremental`: the blocks of new jobs in job-local numbering (kept by job
data), the key lookup that matches their linking rows and columns to the kept model's, and the
label view of a kept model that :func:`policyopt.warm_start.carry_basis` reads."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .allocation import AllocationSpace
from .modeling import Variable

#: per variable (or constraint block) name: whether it is per job, and its dimension names
Layout = dict[str, tuple[bool, tuple[str, ...]]]
#: per column (or row): its variable's (block's) index in the layout, its job slot (-1: linking) and
#: its flat index inside the job's part (or inside the linking variable/block)
Codes = tuple[np.ndarray, np.ndarray, np.ndarray]


#: linking keys: variable/block index × _KEY + flat index
_KEY = 1 << 32
#: blocks kept per model (by job data), and the most new jobs of one update looked up one by one
_CACHE_SIZE = 1024
_CACHE_BATCH = 64


def _lookup(keys: np.ndarray, idx: np.ndarray, want: np.ndarray) -> np.ndarray | None:
    """``idx`` at the positions of ``want`` in ``keys`` (``None`` if one is absent)."""
    if want.size == 0:
        return np.zeros(0, np.int64)
    o = np.argsort(keys)
    at = np.searchsorted(keys[o], want)
    if (at >= keys.size).any() or (keys[o][np.minimum(at, keys.size - 1)] != want).any():
        return None
    return idx[o[at]]


@dataclass
class _Block:
    """Blocks of some jobs in job-local numbering: their own columns and rows (costs, bounds, row
    scales, layout codes with the job's index as slot), their entries (an own index, or ``-1 - key``
    for a linking row/column; linking rows' entries unscaled) and the linking columns and rows they
    refer to, sorted by key, with what must match the kept model (costs, bounds; rows unscaled)."""

    c: np.ndarray
    lo: np.ndarray
    hi: np.ndarray
    ccode: np.ndarray
    cslot: np.ndarray
    cinner: np.ndarray
    rlo: np.ndarray
    rhi: np.ndarray
    rscale: np.ndarray
    rcode: np.ndarray
    rslot: np.ndarray
    rinner: np.ndarray
    e_r: np.ndarray
    e_c: np.ndarray
    e_v: np.ndarray
    lc_key: np.ndarray
    lc_c: np.ndarray
    lc_lo: np.ndarray
    lc_hi: np.ndarray
    lr_key: np.ndarray
    lr_lo: np.ndarray
    lr_hi: np.ndarray

    def split(self) -> list["_Block"]:
        """One block per job (slot ``0`` each), in slot order."""
        jobs = int(max(self.cslot.max(initial=-1), self.rslot.max(initial=-1))) + 1
        e_job = np.where(self.e_r >= 0, self.rslot[np.maximum(self.e_r, 0)], self.cslot[np.maximum(self.e_c, 0)])
        out = []
        for j in range(jobs):  # one pass per new job kind (an update brings a few)
            cs, rs, es = self.cslot == j, self.rslot == j, e_job == j
            cnew = np.cumsum(cs) - 1
            rnew = np.cumsum(rs) - 1
            er, ec = self.e_r[es], self.e_c[es]
            er = np.where(er >= 0, rnew[np.maximum(er, 0)], er)
            ec = np.where(ec >= 0, cnew[np.maximum(ec, 0)], ec)
            lck = np.unique(-1 - ec[ec < 0])
            lrk = np.unique(-1 - er[er < 0])
            ic, ir = np.searchsorted(self.lc_key, lck), np.searchsorted(self.lr_key, lrk)
            out.append(_Block(self.c[cs], self.lo[cs], self.hi[cs], self.ccode[cs], self.cslot[cs] * 0,
                              self.cinner[cs], self.rlo[rs], self.rhi[rs], self.rscale[rs], self.rcode[rs],
                              self.rslot[rs] * 0, self.rinner[rs], er, ec, self.e_v[es], lck, self.lc_c[ic],
                              self.lc_lo[ic], self.lc_hi[ic], lrk, self.lr_lo[ir], self.lr_hi[ir]))
        return out

    @staticmethod
    def concat(blocks: list["_Block"]) -> "_Block":
        """The blocks of several jobs, job ``k`` of the list as slot ``k``."""
        nc = np.cumsum([0] + [b.c.size for b in blocks])
        nr = np.cumsum([0] + [b.rlo.size for b in blocks])

        def cat(name: str) -> np.ndarray:
            return np.concatenate([getattr(b, name) for b in blocks])

        e_r = np.concatenate([np.where(b.e_r >= 0, b.e_r + nr[k], b.e_r) for k, b in enumerate(blocks)])
        e_c = np.concatenate([np.where(b.e_c >= 0, b.e_c + nc[k], b.e_c) for k, b in enumerate(blocks)])
        cslot = np.concatenate([np.full(b.c.size, k, np.int64) for k, b in enumerate(blocks)])
        rslot = np.concatenate([np.full(b.rlo.size, k, np.int64) for k, b in enumerate(blocks)])
        lck, ic = np.unique(cat("lc_key"), return_index=True)
        lrk, ir = np.unique(cat("lr_key"), return_index=True)
        return _Block(cat("c"), cat("lo"), cat("hi"), cat("ccode"), cslot, cat("cinner"), cat("rlo"), cat("rhi"),
                      cat("rscale"), cat("rcode"), rslot, cat("rinner"), e_r, e_c, cat("e_v"), lck,
                      cat("lc_c")[ic], cat("lc_lo")[ic], cat("lc_hi")[ic], lrk, cat("lr_lo")[ir], cat("lr_hi")[ir])


@dataclass
class _Rows:
    """A constraint block's dimensions and its row per cell (C order), for :func:`carry_basis`."""

    dims: tuple[Any, ...]
    row_ids: np.ndarray
    start: int = 0


class _LabelView:
    """The variables and constraint blocks of a kept model by name, over one problem's labels (what
    :func:`policyopt.warm_start.carry_basis` reads of a model); the blocks are computed when read."""

    def __init__(self, variables: dict[str, Variable], block_dims: dict[str, tuple[Any, ...]], layout: Layout,
                 space: AllocationSpace, rows: Codes, pos_of_slot: np.ndarray) -> None:
        self.variables = variables
        self._args = (block_dims, layout, space, rows, pos_of_slot)
        self._blocks: dict[str, _Rows] | None = None

    @property
    def blocks(self) -> dict[str, _Rows]:
        if self._blocks is None:
            block_dims, layout, space, (code, slot, inner), pos_of_slot = self._args
            out = {}
            for k, (name, (per_job, names)) in enumerate(layout.items()):
                sel = (code == k).nonzero()[0]
                dims = block_dims[name]
                if per_job:
                    dims = (space.rows if names[0] == "rows" else space.jobs,) + dims[1:]
                size = int(np.prod([len(d) for d in dims]))
                width = int(np.prod([len(d) for d in dims[1:]]))
                ids = np.full(size, -1, np.int64)
                if per_job:
                    pos = pos_of_slot[slot[sel]]
                    sel, pos = sel[pos >= 0], pos[pos >= 0]  # (rows of jobs that left: -1)
                    ids[pos * width + inner[sel]] = sel
                else:
                    ids[inner[sel]] = sel
                out[name] = _Rows(dims, ids)
            self._blocks = out
        return self._blocks


def retire(st: Any, space: AllocationSpace) -> dict[str, Variable] | None:
    """Bring the kept model ``st`` (a :class:`policyopt.incremental.JobSetModel` whose backend answers
    by the linking rows' prices) to ``space``'s job set when jobs only left: their columns and
    their own rows are held at 0 (bounds ``[0, 0]``; the LP of the remaining jobs, its optimum
    unchanged) and the backend starts from the last answer's multipliers. The matrix stays the
    same object, so its price structure stays known: no build, no detection. ``None`` (nothing
    changed) when a job arrived or changed, or the multipliers are not known."""
    slot = st._slots(space.jobs.labels)
    if (slot < 0).any():
        return None
    if not ((space.T == st.T[slot]).all() and (space.scale == st.scale[slot]).all()
            and (space.weights == st.weights[slot]).all()):
        return None
    st.restore_base()  # (costs or bounds a later stage changed)
    loaded = st.loaded
    y = loaded.answer_duals()
    if y is None or not loaded.set_dual_start(y):  # (the shape is detected here, with the bounds as they were)
        return None
    st._index()
    gone = np.ones(len(st.ids), bool)
    gone[slot] = False
    new_dead = gone & ~st.dead
    cols = (new_dead[st.col_slot] & (st.col_slot >= 0)).nonzero()[0]
    rows = (new_dead[st.row_slot] & (st.row_slot >= 0)).nonzero()[0]
    if cols.size:
        zero = np.zeros(cols.size)
        loaded.set_col_bounds(cols, zero, zero)
    if rows.size:
        zero = np.zeros(rows.size)
        loaded.set_row_bounds(rows, zero, zero)
    base = st.base  # (c, col_lower, col_upper, row_lower, row_upper): restore_base keeps them at 0
    base[1][cols] = base[2][cols] = 0.0
    base[3][rows] = base[4][rows] = 0.0
    st.dead = gone
    pos_of_slot = np.full(len(st.ids), -1, np.int64)
    pos_of_slot[slot] = np.arange(slot.size)
    st._pos_of_slot = pos_of_slot
    st.start = None
    st.updates += 1
    return st._variables(space, pos_of_slot)
