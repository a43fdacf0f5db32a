"""Re-solves after a change of the job set, on one loaded model kept per policy object.

A scheduler re-solves its policy after every arrival and completion: the new LP is the old one
with a few per-job blocks removed and a few added — a job's columns (``X[m, ·]``) and its own rows
(time row, epigraph row), linked to the others only through rows and columns that do not belong
to any job (one capacity row per worker type, the epigraph ``t``). For a policy that declares its
LP *job-separable* (:attr:`~policyopt.policy.Policy.incremental_lp`: every coefficient, bound and
cost of a job's block depends only on that job's data and the cluster — no normalization over the
job set), the model of the previous problem is updated in place instead of rebuilt:

* the blocks of jobs that left (or whose data changed) are deleted — from the standard form and
  from the backend (HiGHS ``deleteCols``/``deleteRows``);
* the blocks of jobs that arrived (or changed) are built by the policy's own ``build`` on the
  sub-space of those jobs (:meth:`~policyopt.allocation.AllocationSpace.restrict`), compiled, and
  appended (``addCols``/``addRows``); their entries in the linking rows are rescaled to the rows'
  existing power-of-two scale (any positive scale is exact);
* the next solve starts from the basis the previous solve ended with (or the one a policy kept,
  :meth:`JobSetModel.keep_start`, set back as HiGHS's own copy): HiGHS extends it over the new
  columns (nonbasic) and rows (basic); where a deletion leaves it invalid (the deleted entries held
  other than one basic variable per deleted row) it is set from its statuses with the deleted
  entries dropped, and HiGHS completes it (an *alien* basis). The dual simplex repairs the new rows.

The updated LP is the LP a fresh build of the new problem gives, up to the order of columns and
rows and powers of two on linking rows: the same optimum. Anything other than a change of the job
set — another cluster (types, counts, prices), other configurations, other options, space sharing,
a subclassed allocation space, another solver than HiGHS, an explicit ``algorithm`` — goes to the
cold path, and a cold build is adopted as the next problems' model (:func:`adopt`). Only the
public modeling API and the standard form are used; the backend needs ``splice``
(:meth:`policyopt.solvers.highs.HighsModel.splice`).
"""
from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from .allocation import AllocationSpace
from .errors import SolverError
from .modeling import Model, Variable
from .warm_start import BASIC, LOWER, UPPER, ZERO, BasisSnapshot

__all__ = ["JobSetModel", "Splice", "adopt", "eligible", "forget", "state", "update"]

#: per variable (or constraint block) name: whether it is per job, and its dimension names
Layout = dict[str, tuple[bool, tuple[str, ...]]]
#: per column (or row): its variable's (block's) index in the layout, its job slot (-1: linking) and
#: its flat index inside the job's part (or inside the linking variable/block)
Codes = tuple[np.ndarray, np.ndarray, np.ndarray]

#: dimension names whose first axis is a job (``rows`` = jobs when there are no pair rows)
_JOB_DIMS = ("jobs", "rows")


@dataclass
class Splice:
    """What :meth:`HighsModel.splice` changes: columns and rows kept (boolean masks over the current
    ones), then columns and rows appended. ``col_*`` of the new columns, ``row_*`` of the new rows
    (scaled, as the standard form stores them; ``row_scale`` their factors); the new entries as
    triplets ``(rows, cols, vals)`` in the numbering *after* the update (kept first, then new)."""

    keep_cols: np.ndarray
    keep_rows: np.ndarray
    c: np.ndarray
    col_lower: np.ndarray
    col_upper: np.ndarray
    row_lower: np.ndarray
    row_upper: np.ndarray
    row_scale: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray


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
            pos = np.flatnonzero(flat >= 0)
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


class JobSetModel:
    """One loaded LP and how its columns and rows belong to jobs (see the module docstring)."""

    def __init__(self, policy: Any, space: AllocationSpace, model: Model, loaded: Any,
                 layout: tuple[Layout, Layout], obj_name: str | None) -> None:
        self.lock = threading.Lock()
        self.loaded = loaded
        self.signature = _signature(policy, space)
        self.var_layout, self.block_layout = layout
        self.obj_name = obj_name
        self.ids: np.ndarray = space.jobs.labels.copy()  # each slot's job id
        self._slot_of: dict[Any, int] | None = None  # job id → slot, built when a lookup needs it
        self.T, self.scale, self.weights = space.T.copy(), space.scale.copy(), space.weights.copy()
        self.col_code, self.col_slot, self.col_inner = _codes(model, self.var_layout, True)
        self.row_code, self.row_slot, self.row_inner = _codes(model, self.block_layout, False)
        self.var_dims = {name: tuple(v.dims) for name, v in model.variables.items()}
        self.block_dims = {name: tuple(b.dims) for name, b in model.blocks.items()}
        sf = loaded.sf
        self.base = (sf.c.copy(), sf.col_lower.copy(), sf.col_upper.copy(), sf.row_lower.copy(), sf.row_upper.copy())
        self.start: Any = None  # the backend's basis kept for the next problem (keep_start)
        self.start_runs = 0
        self._pos_of_slot = np.arange(len(self.ids))
        self.updates = 0  # problems answered by an in-place update (tests and benchmarks read it)

    # ------------------------------------------------------------------ basis kept for the next problem
    def keep_start(self, x: np.ndarray | None) -> None:
        """Keep the backend's current basis (HiGHS's own copy) as the start of the next problem's
        solve, when the solve gave a point ``x``; a policy whose later stages change the loaded
        model (``fill``) calls it after the stage whose basis it wants carried."""
        self.start = self.loaded.basis_object() if x is not None else None
        self.start_runs = self.loaded.runs

    def restore_base(self) -> None:
        """Undo in-place changes made after the solve (costs, column and row bounds back to the
        compiled ones), pushing only what differs."""
        sf, (c, lo, hi, rlo, rhi) = self.loaded.sf, self.base
        d = np.flatnonzero(sf.c != c)
        if d.size:
            self.loaded.set_costs(d, c[d])
        d = np.flatnonzero((sf.col_lower != lo) | (sf.col_upper != hi))
        if d.size:
            self.loaded.set_col_bounds(d, lo[d], hi[d])
        d = np.flatnonzero((sf.row_lower != rlo) | (sf.row_upper != rhi))
        if d.size:  # set_row_bounds takes original (unscaled) bounds
            s = sf.row_scale[d]
            self.loaded.set_row_bounds(d, rlo[d] / s, rhi[d] / s)

    # ------------------------------------------------------------------ the update
    def update(self, policy: Any, space: AllocationSpace) -> dict[str, Variable] | None:
        """Bring the loaded model to ``space``'s job set (the caller holds :attr:`lock`); returns the
        variables over ``space`` (columns of the updated model), or ``None`` when the change is not a
        pure change of the job set (then nothing was changed)."""
        if _signature(policy, space) != self.signature or not self.loaded.holds_model():
            # (while the structured fast path answers, HiGHS never held the whole LP: a fresh build
            # and detection cost less than the update — Gavel's 2,048-job workload: 7.0 ms cold
            # against 8.6 ms updated, max-sum)
            return None
        ids = space.jobs.labels
        n = len(ids)
        slot = self._slots(ids)
        kept = np.flatnonzero(slot >= 0)
        if kept.size:
            s = slot[kept]
            same = (np.all(space.T[kept] == self.T[s], axis=1) & (space.scale[kept] == self.scale[s])
                    & (space.weights[kept] == self.weights[s]))
            kept, s = kept[same], s[same]
        else:
            s = kept
        if kept.size == 0:
            return None  # nothing in common: a cold build is as cheap
        S = len(self.ids)
        keep_slot = np.zeros(S, bool)
        keep_slot[s] = True
        added = np.ones(n, bool)
        added[kept] = False
        add_pos = np.flatnonzero(added)
        self.restore_base()
        start = self.start
        if start is not None and self.loaded.runs != self.start_runs:
            self.loaded.restore_basis(start)  # the kept basis (a later stage ran since), same size
        keep_cols = (self.col_slot < 0) | keep_slot[np.maximum(self.col_slot, 0)]
        keep_rows = (self.row_slot < 0) | keep_slot[np.maximum(self.row_slot, 0)]
        new_slot = np.cumsum(keep_slot) - 1  # old slot → new slot (kept ones)
        n_keep = int(keep_slot.sum())
        cols_meta: Codes
        rows_meta: Codes
        if add_pos.size:
            built = self._build_delta(policy, space, add_pos, keep_cols, keep_rows)
            if built is None:
                return None
            splice, cols_meta, rows_meta = built
        else:
            z = np.zeros(0)
            zi = np.zeros(0, np.int64)
            splice = Splice(keep_cols, keep_rows, z, z, z, z, z, z, zi, zi, z)
            cols_meta = rows_meta = (zi, zi, zi)
        self.loaded.splice(splice)
        # the layout after the update: kept columns/rows (slots renumbered), then the new ones
        def relabel(code: np.ndarray, sl: np.ndarray, inner: np.ndarray, keep: np.ndarray,
                    meta: Codes) -> Codes:
            sl_k = sl[keep]
            sl_k = np.where(sl_k >= 0, new_slot[np.maximum(sl_k, 0)], -1)
            m_code, m_slot, m_inner = meta
            return (np.concatenate([code[keep], m_code]),
                    np.concatenate([sl_k, np.where(m_slot >= 0, m_slot + n_keep, -1)]),
                    np.concatenate([inner[keep], m_inner]))

        self.col_code, self.col_slot, self.col_inner = relabel(self.col_code, self.col_slot, self.col_inner,
                                                               keep_cols, cols_meta)
        self.row_code, self.row_slot, self.row_inner = relabel(self.row_code, self.row_slot, self.row_inner,
                                                               keep_rows, rows_meta)
        kept_order = np.flatnonzero(keep_slot)
        self.ids = np.concatenate([self.ids[kept_order], ids[add_pos]])
        self._slot_of = None
        self.T = np.concatenate([self.T[kept_order], space.T[add_pos]])
        self.scale = np.concatenate([self.scale[kept_order], space.scale[add_pos]])
        self.weights = np.concatenate([self.weights[kept_order], space.weights[add_pos]])
        sf = self.loaded.sf
        self.base = (sf.c.copy(), sf.col_lower.copy(), sf.col_upper.copy(), sf.row_lower.copy(), sf.row_upper.copy())
        if start is not None and not self.loaded.basis_valid():
            # HiGHS drops a basis when deleted columns and rows held other than one basic variable
            # per deleted row: the kept one with the deleted entries dropped and the new ones added
            # (columns nonbasic at a bound, rows basic), completed by HiGHS (an alien basis)
            statuses = self.loaded.statuses_of(start)
            col_st = np.concatenate([statuses[0][keep_cols],
                                     np.where(np.isfinite(splice.col_lower), LOWER,
                                              np.where(np.isfinite(splice.col_upper), UPPER, ZERO)).astype(np.int8)])
            row_st = np.concatenate([statuses[1][keep_rows], np.full(splice.row_lower.size, BASIC, np.int8)])
            self.loaded.set_basis(col_st, row_st)
        self.start = None
        self.updates += 1
        # position in the new problem of each slot: kept slots where the problem has them, then added
        pos_of_slot = np.empty(len(self.ids), np.int64)
        pos_of_slot[new_slot[s]] = kept
        pos_of_slot[n_keep:] = add_pos
        self._pos_of_slot = pos_of_slot
        return self._variables(space, pos_of_slot)

    def _slots(self, ids: np.ndarray) -> np.ndarray:
        """Each job's slot in the kept model (``-1``: new). The common prefix and suffix with the kept
        ids are matched by one vectorized comparison each (an arrival at the end, a completion: no
        per-job work); only a middle part where both sides have jobs is looked up by id."""
        old, n, S = self.ids, len(ids), len(self.ids)
        m = min(n, S)
        diff = np.flatnonzero(ids[:m] != old[:m])
        p = int(diff[0]) if diff.size else m
        q_max = m - p
        tail = np.flatnonzero(ids[n - q_max:][::-1] != old[S - q_max:][::-1]) if q_max else np.zeros(0, np.int64)
        q = int(tail[0]) if tail.size else q_max
        slot = np.full(n, -1, np.int64)
        slot[:p] = np.arange(p)
        slot[n - q:] = np.arange(S - q, S)
        if n - q > p and S - q > p:  # jobs in the middle on both sides: look them up
            if self._slot_of is None:
                self._slot_of = {j: i for i, j in enumerate(old.tolist())}
            get = self._slot_of.get
            mid = ids[p:n - q].tolist()
            found = np.fromiter((get(j, -1) for j in mid), np.int64, len(mid))
            slot[p:n - q] = found
        return slot

    def _build_delta(self, policy: Any, space: AllocationSpace, add_pos: np.ndarray, keep_cols: np.ndarray,
                     keep_rows: np.ndarray) -> tuple[Splice, Codes, Codes] | None:
        """The blocks of the jobs at ``add_pos`` of ``space``, built by the policy on the sub-space of
        those jobs and compiled, as a :class:`Splice` (and the new columns' and rows' layout codes)."""
        sub = space.restrict(add_pos)
        model = Model(policy.name)
        X = sub.add_allocation(model)
        policy.build(model, sub, X)
        lay = _layout(model)
        if lay is None or lay[0].keys() != self.var_layout.keys() or lay[1].keys() != self.block_layout.keys():
            return None
        if list(lay[0].items()) != list(self.var_layout.items()) or \
                list(lay[1].items()) != list(self.block_layout.items()):
            return None
        d = model.compile()
        sf = self.loaded.sf
        if d.sense != sf.sense or d.offset != sf.offset or d.is_mip:
            return None
        ccode, cslot, cinner = _codes(model, self.var_layout, True)
        rcode, rslot, rinner = _codes(model, self.block_layout, False)
        # linking columns/rows of the delta ↔ the model's (by variable/block and flat index)
        link_c = np.flatnonzero(cslot < 0)
        link_r = np.flatnonzero(rslot < 0)
        main_lc = np.flatnonzero(keep_cols & (self.col_slot < 0))
        main_lr = np.flatnonzero(keep_rows & (self.row_slot < 0))
        ck = self.col_code[main_lc] * (1 << 32) + self.col_inner[main_lc]
        rk = self.row_code[main_lr] * (1 << 32) + self.row_inner[main_lr]
        oc, orow = np.argsort(ck), np.argsort(rk)
        cq = ccode[link_c] * (1 << 32) + cinner[link_c]
        rq = rcode[link_r] * (1 << 32) + rinner[link_r]
        ic = np.searchsorted(ck[oc], cq)
        ir = np.searchsorted(rk[orow], rq)
        if np.any(ic >= ck.size) or np.any(ir >= rk.size) or np.any(ck[oc][np.minimum(ic, ck.size - 1)] != cq) \
                or np.any(rk[orow][np.minimum(ir, rk.size - 1)] != rq):
            return None
        mc = main_lc[oc[ic]]  # main column of each linking column of the delta
        mr = main_lr[orow[ir]]
        if (np.any(d.c[link_c] != sf.c[mc]) or np.any(d.col_lower[link_c] != sf.col_lower[mc])
                or np.any(d.col_upper[link_c] != sf.col_upper[mc])):
            return None
        ds, ms = d.row_scale[link_r], sf.row_scale[mr]
        if (np.any(d.row_lower[link_r] / ds != sf.row_lower[mr] / ms)
                or np.any(d.row_upper[link_r] / ds != sf.row_upper[mr] / ms)):
            return None
        # numbering after the update: kept columns/rows first (in order), then the delta's own ones
        nkc, nkr = int(keep_cols.sum()), int(keep_rows.sum())
        col_new = np.cumsum(keep_cols) - 1
        row_new = np.cumsum(keep_rows) - 1
        own_c = np.flatnonzero(cslot >= 0)
        own_r = np.flatnonzero(rslot >= 0)
        cmap = np.empty(d.num_cols, np.int64)
        cmap[own_c] = nkc + np.arange(own_c.size)
        cmap[link_c] = col_new[mc]
        rmap = np.empty(d.num_rows, np.int64)
        rmap[own_r] = nkr + np.arange(own_r.size)
        rmap[link_r] = row_new[mr]
        A = d.A.tocoo()
        r, c, v = A.row, A.col, A.data
        link_row = rslot[r] < 0
        if np.any(link_row & (cslot[c] < 0)):
            return None  # an entry between linking rows and columns would be counted twice
        rescale = np.ones(d.num_rows)  # delta scale → the kept linking row's scale
        rescale[link_r] = ms / ds
        v = v * rescale[r]
        splice = Splice(keep_cols, keep_rows, d.c[own_c], d.col_lower[own_c], d.col_upper[own_c],
                        d.row_lower[own_r], d.row_upper[own_r], d.row_scale[own_r], rmap[r], cmap[c], v)
        return splice, (ccode[own_c], cslot[own_c], cinner[own_c]), (rcode[own_r], rslot[own_r], rinner[own_r])

    def snapshot(self, space: AllocationSpace, variables: dict[str, Variable]) -> BasisSnapshot:
        """The backend's current basis with the labels of ``space`` (:mod:`policyopt.warm_start`): a
        cold build after a change that is not a pure change of the job set (another cluster, say)
        still starts from it. Read from the backend only when used."""
        view = _LabelView(variables, self.block_dims, self.block_layout, space,
                          (self.row_code, self.row_slot, self.row_inner), self._pos_of_slot)
        return BasisSnapshot(view, source=self.loaded.basis_reader())  # type: ignore[arg-type]

    def _variables(self, space: AllocationSpace, pos_of_slot: np.ndarray) -> dict[str, Variable]:
        """The model's variables over ``space`` (their ``cols`` point into the updated model)."""
        out: dict[str, Variable] = {}
        sf = self.loaded.sf
        for k, (name, (per_job, names)) in enumerate(self.var_layout.items()):
            old = self.var_dims[name]
            if per_job:
                dims = (space.rows if names[0] == "rows" else space.jobs,) + old[1:]
            else:
                dims = old
            shape = tuple(len(d) for d in dims)
            cols = np.full(shape, -1, np.int64)
            sel = np.flatnonzero(self.col_code == k)
            flat = cols.reshape(-1) if cols.ndim else cols.reshape(1)
            if per_job:
                width = int(np.prod(shape[1:]))
                flat[pos_of_slot[self.col_slot[sel]] * width + self.col_inner[sel]] = sel
            else:
                flat[self.col_inner[sel]] = sel
            lower = np.where(cols >= 0, sf.col_lower[np.maximum(cols, 0)], 0.0)
            upper = np.where(cols >= 0, sf.col_upper[np.maximum(cols, 0)], 0.0)
            out[name] = Variable(Model(name), name, dims, cols, lower, upper, False)
        return out


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
                sel = np.flatnonzero(code == k)
                dims = block_dims[name]
                if per_job:
                    dims = (space.rows if names[0] == "rows" else space.jobs,) + dims[1:]
                size = int(np.prod([len(d) for d in dims]))
                width = int(np.prod([len(d) for d in dims[1:]]))
                ids = np.full(size, -1, np.int64)
                ids[pos_of_slot[slot[sel]] * width + inner[sel] if per_job else inner[sel]] = sel
                out[name] = _Rows(dims, ids)
            self._blocks = out
        return self._blocks


def _signature(policy: Any, space: AllocationSpace) -> tuple[Any, ...]:
    """What must be equal for an in-place update: the policy's class and options, the cluster, the
    configurations."""
    return (type(policy), tuple(sorted((k, repr(v)) for k, v in policy.config.items())),
            space.problem.cluster, tuple(space.configs.labels.tolist()))


#: per policy object, its kept model (beside it, like warm_start's bases: policies stay picklable)
_STATE: "weakref.WeakKeyDictionary[Any, JobSetModel]" = weakref.WeakKeyDictionary()


def eligible(policy: Any, space: AllocationSpace) -> bool:
    """Whether ``policy`` on ``space`` may be updated in place: the policy declares a job-separable
    LP, ``algorithm`` is ``auto``, the backend is HiGHS, the space is the base one without pair rows."""
    cfg = policy.config
    return (bool(getattr(policy, "incremental_lp", False)) and cfg.get("algorithm") == "auto"
            and cfg.get("solver") in (None, "highs") and type(space) is AllocationSpace
            and space.num_pairs == 0 and not space.space_sharing)


def state(policy: Any) -> JobSetModel | None:
    """The model kept for ``policy`` (``None`` if none)."""
    return _STATE.get(policy)


def forget(policy: Any) -> None:
    """Drop the model kept for ``policy``."""
    _STATE.pop(policy, None)


def update(policy: Any, space: AllocationSpace) -> tuple[JobSetModel, dict[str, Variable]] | None:
    """The kept model of ``policy`` brought to ``space``'s job set, and its variables over ``space``;
    ``None`` (the caller builds cold, then :func:`adopt`) when there is none, it is in use by
    another thread, or the change is not a pure change of the job set. The caller releases
    ``JobSetModel.lock`` after its solve."""
    st = _STATE.get(policy)
    if st is None or not eligible(policy, space):
        return None
    if not st.lock.acquire(blocking=False):
        return None
    try:
        got = st.update(policy, space)
    except SolverError:  # the backend refused an update: the state is unknown, build cold
        got = None
    except BaseException:
        st.lock.release()
        forget(policy)
        raise
    if got is None:
        st.lock.release()
        forget(policy)
        return None
    return st, got


def adopt(policy: Any, space: AllocationSpace, model: Model, loaded: Any, obj_var: Variable | None
          ) -> JobSetModel | None:
    """Keep ``model`` (loaded, compiled from ``space``) as ``policy``'s model for its next problems,
    if eligible (else forget any kept one). Returns it with its :attr:`JobSetModel.lock` held: the
    caller releases it once its solves on ``loaded`` are done (another thread's ``update`` builds
    cold meanwhile)."""
    forget(policy)
    if not eligible(policy, space) or not hasattr(loaded, "splice") or model.is_mip:
        return None
    lay = _layout(model)
    if lay is None or any(per_job and len(names) > 2 for per_job, names in lay[0].values()):
        return None
    st = JobSetModel(policy, space, model, loaded, lay, obj_var.name if obj_var is not None else None)
    st.lock.acquire()
    _STATE[policy] = st
    return st
