"""Parts of :mod:`policyopt.incremental`: the blocks of new jobs in job-local numbering (kept by job
data), the key lookup that matches their linking rows and columns to the kept model's, and the
label view of a kept model that :func:`policyopt.warm_start.carry_basis` reads."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np

from .allocation import AllocationSpace
from .modeling import Model, Variable

#: per variable (or constraint block) name: whether it is per job, and its dimension names
Layout = dict[str, tuple[bool, tuple[str, ...]]]
#: per column (or row): its variable's (block's) index in the layout, its job slot (-1: linking) and
#: its flat index inside the job's part (or inside the linking variable/block)
Codes = tuple[np.ndarray, np.ndarray, np.ndarray]


#: dimension names whose first axis is a job (``rows`` = jobs when there are no pair rows)
_JOB_DIMS = ("jobs", "rows")


def _layout(model: Model) -> tuple[Layout, Layout] | None:
    """Per variable and per constraint block: (whether it is per job, its dimension names); ``None``
    when a job dimension appears elsewhere than first."""
    out: list[Layout] = [{}, {}]
    objs: tuple[dict[str, Any], dict[str, Any]] = (model.variables, model.blocks)
    for k in range(2):
        for name, obj in objs[k].items():
            names = tuple(d.name for d in obj.dims)
            per_job = bool(names) and names[0] in _JOB_DIMS
            if any(n in _JOB_DIMS for n in names[1:]):
                return None
            out[k][name] = (per_job, names)
    return out[0], out[1]


def _codes(model: Model, layout: Layout, variables: bool) -> Codes:
    """:data:`Codes` of the columns (``variables``) or rows of ``model``."""
    size = model.num_cols if variables else model.num_rows
    code = np.full(size, -1, np.int64)
    slot = np.full(size, -1, np.int64)
    inner = np.full(size, -1, np.int64)
    objs: Any = model.variables if variables else model.blocks
    for k, name in enumerate(layout):
        obj = objs[name]
        per_job = layout[name][0]
        if variables:
            flat = obj.cols.ravel()
            pos = (flat >= 0).nonzero()[0]
            idx = flat[pos]
        else:
            pos = np.arange(obj.stop - obj.start)
            idx = obj.start + pos
        code[idx] = k
        if per_job:
            width = int(np.prod([len(d) for d in obj.dims[1:]]))
            slot[idx], inner[idx] = np.divmod(pos, width)
        else:
            inner[idx] = pos
    return code, slot, inner


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
    :func:`policyopt.warm_start.carry_basis` reads of a model); the blocks are computed when read,
    from ``rows_of()`` (the blocks' dimensions and the rows' :data:`Codes` at the time of the view)."""

    def __init__(self, variables: dict[str, Variable], layout: Layout, space: AllocationSpace,
                 pos_of_slot: np.ndarray, rows_of: Callable[[], tuple[dict[str, tuple[Any, ...]], Codes]]) -> None:
        self.variables = variables
        self._args = (layout, space, pos_of_slot, rows_of)
        self._blocks: dict[str, _Rows] | None = None

    @property
    def blocks(self) -> dict[str, _Rows]:
        if self._blocks is None:
            layout, space, pos_of_slot, rows_of = self._args
            block_dims, (code, slot, inner) = rows_of()
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
    if len(space.jobs) > len(st.ids) - int(st.dead.sum()):
        return None  # more jobs than the model holds: one arrived
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
    gone = np.ones(len(st.ids), bool)
    gone[slot] = False
    new_dead = gone & ~st.dead
    sf = loaded.sf
    model = st._model
    variables: dict[str, Variable] | None = None
    if model is not None:
        # no update has read the adopted model's codes: its variables and blocks give the columns and
        # rows of the jobs that left, and the variables over ``space`` (its rows at ``slot``)
        cols, rows, variables = _adopted_parts(model, st.var_layout, st.block_layout, space, slot,
                                               new_dead.nonzero()[0], sf)
    else:
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
    return variables if variables is not None else st._variables(space, pos_of_slot)


def _adopted_parts(model: Model, var_layout: Layout, block_layout: Layout, space: AllocationSpace,
                   slot: np.ndarray, dead: np.ndarray, sf: Any
                   ) -> tuple[np.ndarray, np.ndarray, dict[str, Variable]]:
    """From a model as compiled: the columns and rows of the job slots ``dead``, and its variables
    over ``space`` (job ``i`` at slot ``slot[i]``; bounds as in ``sf``)."""
    cols = [np.zeros(0, np.int64)]
    rows = [np.zeros(0, np.int64)]
    variables = {}
    for name, (per_job, names) in var_layout.items():
        v = model.variables[name]
        dims = tuple(v.dims)
        c = v.cols
        if per_job:
            gone = v.cols[dead].ravel()
            cols.append(gone[gone >= 0])
            dims = (space.rows if names[0] == "rows" else space.jobs,) + dims[1:]
            c = v.cols[slot]
        ok = c >= 0
        cc = np.where(ok, c, 0)
        variables[name] = Variable(Model(name), name, dims, c, np.where(ok, sf.col_lower[cc], 0.0),
                                   np.where(ok, sf.col_upper[cc], 0.0), False)
    for name, (per_job, _) in block_layout.items():
        if per_job:
            b = model.blocks[name]
            width = int(np.prod([len(d) for d in b.dims[1:]]))
            rows.append((b.start + dead[:, None] * width + np.arange(width)).ravel())
    return np.concatenate(cols), np.concatenate(rows), variables
