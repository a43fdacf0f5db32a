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

Where the backend answers from the linking rows' prices (max-sum throughput:
:mod:`policyopt.solvers.prices`), a fresh build started from the kept capacity rows' multipliers
(:func:`seed_prices`) is cheaper than the splice, and is taken instead (:meth:`JobSetModel.prefers_rebuild`);
when jobs only left, their columns and rows are held at 0 in place (:func:`retire`).

The updated LP is the LP a fresh build of the new problem gives, up to the order of columns and
rows and powers of two on linking rows: the same optimum. Anything other than a change of the job
set — another cluster (types, counts, prices), other configurations, other options, space sharing,
a subclassed allocation space, another solver than HiGHS, an explicit ``algorithm`` — goes to the
cold path, and a cold build is adopted as the next problems' model (:func:`adopt`). Only the
public modeling API and the standard form are used; the backend needs ``splice``
(:meth:`policyopt.solvers.highs.HighsModel.splice`).
"""
from __future__ import annotations

import math
import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import aggregate_cold, aggregate_resolve
from .aggregate_resolve import AggregateModel
from .allocation import AllocationSpace
from .errors import SolverError
from .modeling import Model, Variable
from .standard_form import any_nonzero
from .warm_start import BasisSnapshot
from ._incremental_parts import (_CACHE_BATCH, _CACHE_SIZE, _KEY, Codes, Layout, _Block, _codes,
                                 _LabelView, _layout, _lookup, retire)

__all__ = ["JobSetModel", "Splice", "adopt", "eligible", "forget", "seed_prices", "seeded", "state", "update"]



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


_EMPTY = np.empty(0, np.int64)  # codes not read yet (JobSetModel._index)
_ZERO = np.zeros(1)


class JobSetModel:
    """One loaded LP and how its columns and rows belong to jobs (see the module docstring)."""

    def __init__(self, policy: Any, space: AllocationSpace, model: Model, loaded: Any,
                 layout: tuple[Layout, Layout], obj_name: str | None) -> None:
        self.lock = threading.Lock()
        self.loaded = loaded
        # what :func:`_signature` reads, kept; the signature itself is formed at the first update (a
        # model kept by a policy object that solves once is never compared)
        self._signed: tuple[Any, ...] | None = (type(policy), dict(policy.config), space.problem.cluster,
                                                space.configs.labels)
        self._signature: tuple[Any, ...] | None = None
        self.var_layout, self.block_layout = layout
        self.obj_name = obj_name
        self.ids: np.ndarray = space.jobs.labels.copy()  # each slot's job id
        # slots of jobs that left while the model answered by prices: their columns and rows held
        # at 0 in place (:func:`retire`); never matched again, deleted by the next splice
        self.dead = np.zeros(len(self.ids), bool)
        self._slot_of: dict[Any, int] | None = None  # job id → slot, built when a lookup needs it
        self.T, self.scale, self.weights = space.T.copy(), space.scale.copy(), space.weights.copy()
        # the column and row codes and the dimensions are read from the model at the first update
        # (:meth:`_index`): most kept models are replaced by a cold build before any update uses them
        self._model: Model | None = model
        self.col_code = self.col_slot = self.col_inner = _EMPTY
        self.row_code = self.row_slot = self.row_inner = _EMPTY
        self.var_dims: dict[str, tuple[Any, ...]] = {}
        self.block_dims: dict[str, tuple[Any, ...]] = {}
        sf = loaded.sf
        self.base = (sf.c.copy(), sf.col_lower.copy(), sf.col_upper.copy(), sf.row_lower.copy(), sf.row_upper.copy())
        self._cache: dict[bytes, _Block] = {}  # blocks by job data (_blocks), oldest first
        self.start: Any = None  # the backend's basis kept for the next problem (keep_start)
        self.start_runs = 0
        self._pos_of_slot = np.arange(len(self.ids))
        self.updates = 0  # problems answered by an in-place update (tests and benchmarks read it)
        # whether the next problem may be built afresh from this model's prices (the backend's
        # prefers_rebuild): not when a fresh build of this policy did not start from them before
        self.rebuild_ok = True
        # the layout of the backend's price path (one row per job, no linking variable: max-sum
        # throughput), checked in full on the fresh build
        self.star_layout = all(per_job for per_job, _ in self.var_layout.values()) and all(
            len(names) == 1 for per_job, names in self.block_layout.values() if per_job)

    @property
    def signature(self) -> tuple[Any, ...]:
        """:func:`_signature` of the policy and space this model was built for."""
        if self._signature is None:
            assert self._signed is not None
            self._signature, self._signed = _signature_of(*self._signed), None
        return self._signature

    # ------------------------------------------------------------------ basis kept for the next problem
    def _index(self) -> None:
        """Read the codes of the columns and rows and the dimensions from the adopted model, once
        (the model is not changed after :func:`adopt`; the loaded copy is)."""
        model, self._model = self._model, None
        if model is None:
            return
        self.col_code, self.col_slot, self.col_inner = _codes(model, self.var_layout, True)
        self.row_code, self.row_slot, self.row_inner = _codes(model, self.block_layout, False)
        self.var_dims = {name: tuple(v.dims) for name, v in model.variables.items()}
        self.block_dims = {name: tuple(b.dims) for name, b in model.blocks.items()}

    def prefers_rebuild(self) -> bool:
        """Whether the next problem is better built afresh and started from this model's prices
        (the model's layout may have the backend's shape, the backend says so, and no earlier fresh
        build of this policy ignored them)."""
        return self.rebuild_ok and self.star_layout and bool(self.loaded.prefers_rebuild())

    def linking_duals(self) -> dict[str, np.ndarray] | None:
        """The last answer's multipliers (original row scale) of the rows of each constraint block
        that is not per job (the capacity rows), by block name, in the block's flat order; ``None``
        without them."""
        y = self.loaded.answer_duals()
        if y is None:
            return None
        out = {}
        for k, (name, (per_job, _)) in enumerate(self.block_layout.items()):
            if per_job:
                continue
            if self._model is not None:  # not updated yet: the adopted model's rows
                b = self._model.blocks[name]
                out[name] = y[b.start:b.stop].copy()
            else:
                sel = (self.row_code == k).nonzero()[0]
                out[name] = y[sel[np.argsort(self.row_inner[sel])]]
        return out

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
        d = (sf.c != c).nonzero()[0]
        if d.size:
            self.loaded.set_costs(d, c[d])
        d = ((sf.col_lower != lo) | (sf.col_upper != hi)).nonzero()[0]
        if d.size:
            self.loaded.set_col_bounds(d, lo[d], hi[d])
        d = ((sf.row_lower != rlo) | (sf.row_upper != rhi)).nonzero()[0]
        if d.size:  # set_row_bounds takes original (unscaled) bounds
            s = sf.row_scale[d]
            self.loaded.set_row_bounds(d, rlo[d] / s, rhi[d] / s)

    # ------------------------------------------------------------------ the update
    def update(self, policy: Any, space: AllocationSpace) -> dict[str, Variable] | None:
        """Bring the loaded model to ``space``'s job set (the caller holds :attr:`lock`); returns the
        variables over ``space`` (columns of the updated model), or ``None`` when the change is not a
        pure change of the job set (then nothing was changed)."""
        if _signature(policy, space) != self.signature:
            return None
        if self.prefers_rebuild():
            # where the backend answers from the linking rows' prices, a fresh build started from
            # them (:func:`seed_prices`) costs less than a splice; jobs that only left are held at 0
            # in place instead (no build, no new matrix: the shape stays known)
            return retire(self, space)
        if not self.loaded.holds_model():
            # (while the structured fast path answers, HiGHS never held the whole LP: a fresh build
            # and detection cost less than the update — Gavel's 2,048-job workload: 7.0 ms cold
            # against 8.6 ms updated, max-sum)
            return None
        ids = space.jobs.labels
        n = len(ids)
        slot = self._slots(ids)
        kept = (slot >= 0).nonzero()[0]
        if kept.size:
            s = slot[kept]
            same = ((space.T[kept] == self.T[s]).all(axis=1) & (space.scale[kept] == self.scale[s])
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
        add_pos = added.nonzero()[0]
        self.restore_base()
        start = self.start
        if start is not None and self.loaded.runs != self.start_runs:
            self.loaded.restore_basis(start)  # the kept basis (a later stage ran since), same size
        self._index()
        # one gather each: slot -1 (a linking column or row, always kept) reads the extra last entry
        keep_ext = np.empty(S + 1, bool)
        keep_ext[:S], keep_ext[S] = keep_slot, True
        keep_cols, keep_rows = keep_ext[self.col_slot], keep_ext[self.row_slot]
        new_slot = np.empty(S + 1, np.int64)  # old slot → new slot (kept ones); -1 stays -1
        keep_slot.cumsum(out=new_slot[:S])
        new_slot[:S] -= 1
        new_slot[S] = -1
        n_keep = int(np.count_nonzero(keep_slot))
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
            sl_k = new_slot[sl[keep]]
            m_code, m_slot, m_inner = meta
            return (np.concatenate([code[keep], m_code]),
                    np.concatenate([sl_k, np.where(m_slot >= 0, m_slot + n_keep, -1)]),
                    np.concatenate([inner[keep], m_inner]))

        self.col_code, self.col_slot, self.col_inner = relabel(self.col_code, self.col_slot, self.col_inner,
                                                               keep_cols, cols_meta)
        self.row_code, self.row_slot, self.row_inner = relabel(self.row_code, self.row_slot, self.row_inner,
                                                               keep_rows, rows_meta)
        kept_order = keep_slot.nonzero()[0]
        self.ids = np.concatenate([self.ids[kept_order], ids[add_pos]])
        self.dead = np.zeros(len(self.ids), bool)
        self._slot_of = None
        self.T = np.concatenate([self.T[kept_order], space.T[add_pos]])
        self.scale = np.concatenate([self.scale[kept_order], space.scale[add_pos]])
        self.weights = np.concatenate([self.weights[kept_order], space.weights[add_pos]])
        sf = self.loaded.sf
        self.base = (sf.c.copy(), sf.col_lower.copy(), sf.col_upper.copy(), sf.row_lower.copy(), sf.row_upper.copy())
        if start is not None and not self.loaded.basis_valid():
            # HiGHS drops a basis when deleted columns and rows held other than one basic variable
            # per deleted row; it keeps the statuses (the kept ones, new columns nonbasic at a bound,
            # new rows basic): set back, completed by HiGHS only if the count is off
            self.loaded.repair_basis()
        self.start = None
        self.updates += 1
        # position in the new problem of each slot: kept slots where the problem has them, then added
        pos_of_slot = np.empty(len(self.ids), np.int64)
        pos_of_slot[new_slot[s]] = kept
        pos_of_slot[n_keep:] = add_pos
        self._pos_of_slot = pos_of_slot
        return self._variables(space, pos_of_slot)

    def _slots(self, ids: np.ndarray) -> np.ndarray:
        """Each job's slot in the kept model (``-1``: new), by
        :func:`~policyopt.aggregate_resolve.match_slots` (the common prefix and suffix by one
        vectorized comparison each; only a middle part where both sides have jobs looked up by id)."""
        slot, _, _, self._slot_of = aggregate_resolve.match_slots(self.ids, ids, self._slot_of)
        if self.dead.any():  # (a job with the id of one that left is new)
            slot[self.dead[slot] & (slot >= 0)] = -1
        return slot

    def _build_delta(self, policy: Any, space: AllocationSpace, add_pos: np.ndarray, keep_cols: np.ndarray,
                     keep_rows: np.ndarray) -> tuple[Splice, Codes, Codes] | None:
        """The blocks of the jobs at ``add_pos`` of ``space`` as a :class:`Splice` (and the new
        columns' and rows' layout codes): each job's block from the cache of blocks by job data
        (:meth:`_blocks`), else built by the policy on the sub-space of those jobs and compiled."""
        blk = self._blocks(policy, space, add_pos)
        if blk is None:
            return None
        sf = self.loaded.sf
        # linking columns/rows the blocks refer to ↔ the kept model's (by variable/block and flat index)
        main_lc = (keep_cols & (self.col_slot < 0)).nonzero()[0]
        main_lr = (keep_rows & (self.row_slot < 0)).nonzero()[0]
        mc = _lookup(self.col_code[main_lc] * _KEY + self.col_inner[main_lc], main_lc, blk.lc_key)
        mr = _lookup(self.row_code[main_lr] * _KEY + self.row_inner[main_lr], main_lr, blk.lr_key)
        if mc is None or mr is None:
            return None
        if (any_nonzero(blk.lc_c != sf.c[mc]) or any_nonzero(blk.lc_lo != sf.col_lower[mc])
                or any_nonzero(blk.lc_hi != sf.col_upper[mc])):
            return None
        ms = sf.row_scale[mr]
        if any_nonzero(blk.lr_lo != sf.row_lower[mr] / ms) or any_nonzero(blk.lr_hi != sf.row_upper[mr] / ms):
            return None
        # numbering after the update: kept columns/rows first (in order), then the blocks' own ones
        nkc, nkr = int(np.count_nonzero(keep_cols)), int(np.count_nonzero(keep_rows))
        col_new = keep_cols.cumsum() - 1
        row_new = keep_rows.cumsum() - 1
        link_r, link_c = blk.e_r < 0, blk.e_c < 0
        r = np.where(link_r, 0, blk.e_r + nkr)
        c = np.where(link_c, 0, blk.e_c + nkc)
        v = blk.e_v.copy()
        if any_nonzero(link_r):  # unscaled entries of linking rows: at the kept row's scale
            ir = np.searchsorted(blk.lr_key, -1 - blk.e_r[link_r])
            r[link_r] = row_new[mr[ir]]
            v[link_r] *= ms[ir]
        if any_nonzero(link_c):
            c[link_c] = col_new[mc[np.searchsorted(blk.lc_key, -1 - blk.e_c[link_c])]]
        splice = Splice(keep_cols, keep_rows, blk.c, blk.lo, blk.hi, blk.rlo, blk.rhi, blk.rscale, r, c, v)
        return splice, (blk.ccode, blk.cslot, blk.cinner), (blk.rcode, blk.rslot, blk.rinner)

    def _blocks(self, policy: Any, space: AllocationSpace, add_pos: np.ndarray) -> _Block | None:
        """The blocks of the jobs at ``add_pos`` (in that order) in job-local numbering. A job's block
        depends only on its data (``T`` row, scale factor, weight) once the policy, its options, the
        cluster and the configurations are fixed (the signature), so blocks are kept by data: a
        simulator's arrivals are mostly of kinds seen before and need no model build. Jobs not
        seen are built together on the sub-space of those jobs; ``None`` if that model's layout is
        not the kept one."""
        keys = [space.T[i].tobytes() + space.scale[i:i + 1].tobytes() + space.weights[i:i + 1].tobytes()
                for i in add_pos.tolist()] if add_pos.size <= _CACHE_BATCH else None
        cache = self._cache
        got: list[_Block | None] = [cache.get(k) for k in keys] if keys is not None else [None] * add_pos.size
        missing = [i for i, b in enumerate(got) if b is None]
        if missing:
            built = self._compile_blocks(policy, space, add_pos[missing])
            if built is None:
                return None
            if keys is None:
                return built
            for i, b in zip(missing, built.split()):
                got[i] = b
                cache[keys[i]] = b
            while len(cache) > _CACHE_SIZE:
                cache.pop(next(iter(cache)))
        blocks = [b for b in got if b is not None]
        return blocks[0] if len(blocks) == 1 else _Block.concat(blocks)

    def _compile_blocks(self, policy: Any, space: AllocationSpace, pos: np.ndarray) -> _Block | None:
        """The blocks of the jobs at ``pos``: the policy's model on the sub-space of those jobs,
        compiled (its linking rows' entries unscaled; its own rows keep their scale, which depends
        on the row alone)."""
        sub = space.restrict(pos)
        model = Model(policy.name)
        X = sub.add_allocation(model)
        policy.build(model, sub, X)
        lay = _layout(model)
        if lay is None or list(lay[0].items()) != list(self.var_layout.items()) or \
                list(lay[1].items()) != list(self.block_layout.items()):
            return None
        d = model.compile()
        sf = self.loaded.sf
        if d.sense != sf.sense or d.offset != sf.offset or d.is_mip:
            return None
        ccode, cslot, cinner = _codes(model, self.var_layout, True)
        rcode, rslot, rinner = _codes(model, self.block_layout, False)
        own_c, link_c = (cslot >= 0).nonzero()[0], (cslot < 0).nonzero()[0]
        own_r, link_r = (rslot >= 0).nonzero()[0], (rslot < 0).nonzero()[0]
        A = d.A if d.A.format == "csc" else d.A.tocsc()
        # its triplets in column order (as ``tocoo`` gives them, without the COO constructor's checks)
        r, v = A.indices.astype(np.int64), A.data
        c = np.repeat(np.arange(A.shape[1], dtype=np.int64), A.indptr[1:] - A.indptr[:-1])
        if ((rslot[r] < 0) & (cslot[c] < 0)).any():
            return None  # an entry between linking rows and columns would be counted twice
        c_local = np.empty(d.num_cols, np.int64)
        c_local[own_c] = np.arange(own_c.size)
        c_local[link_c] = -1 - (ccode[link_c] * _KEY + cinner[link_c])
        r_local = np.empty(d.num_rows, np.int64)
        r_local[own_r] = np.arange(own_r.size)
        r_local[link_r] = -1 - (rcode[link_r] * _KEY + rinner[link_r])
        v = np.where(rslot[r] < 0, v / d.row_scale[r], v)
        lck, lrk = ccode[link_c] * _KEY + cinner[link_c], rcode[link_r] * _KEY + rinner[link_r]
        oc, orr = np.argsort(lck), np.argsort(lrk)
        lcs, lrs = link_c[oc], link_r[orr]
        ds = d.row_scale[lrs]
        return _Block(d.c[own_c], d.col_lower[own_c], d.col_upper[own_c], ccode[own_c], cslot[own_c], cinner[own_c],
                      d.row_lower[own_r], d.row_upper[own_r], d.row_scale[own_r], rcode[own_r], rslot[own_r],
                      rinner[own_r], r_local[r], c_local[c], v, lck[oc], d.c[lcs], d.col_lower[lcs],
                      d.col_upper[lcs], lrk[orr], d.row_lower[lrs] / ds, d.row_upper[lrs] / ds)

    def snapshot(self, space: AllocationSpace, variables: dict[str, Variable]) -> BasisSnapshot:
        """The backend's current basis with the labels of ``space`` (:mod:`policyopt.warm_start`): a
        cold build after a change that is not a pure change of the job set (another cluster, say)
        still starts from it. Read from the backend only when used."""
        model, layout = self._model, self.block_layout
        if model is not None:  # codes not read yet: from the adopted model, if the view is read
            def rows_of() -> tuple[dict[str, tuple[Any, ...]], Codes]:
                assert model is not None
                return {n: tuple(b.dims) for n, b in model.blocks.items()}, _codes(model, layout, False)
        else:
            dims, codes = self.block_dims, (self.row_code, self.row_slot, self.row_inner)

            def rows_of() -> tuple[dict[str, tuple[Any, ...]], Codes]:
                return dims, codes
        view = _LabelView(variables, layout, space, self._pos_of_slot, rows_of)
        return BasisSnapshot(view, source=self.loaded.basis_reader())  # type: ignore[arg-type]

    def _variables(self, space: AllocationSpace, pos_of_slot: np.ndarray) -> dict[str, Variable]:
        """The model's variables over ``space`` (their ``cols`` point into the updated model)."""
        out: dict[str, Variable] = {}
        sf = self.loaded.sf
        # bounds by one gather each: column -1 (a masked slot) reads the extra last entry, 0
        lo_ext, hi_ext = np.concatenate((sf.col_lower, _ZERO)), np.concatenate((sf.col_upper, _ZERO))
        for k, (name, (per_job, names)) in enumerate(self.var_layout.items()):
            old = self.var_dims[name]
            if per_job:
                dims = (space.rows if names[0] == "rows" else space.jobs,) + old[1:]
            else:
                dims = old
            shape = tuple(len(d) for d in dims)
            cols = np.full(shape, -1, np.int64)
            sel = (self.col_code == k).nonzero()[0]
            flat = cols.reshape(-1) if cols.ndim else cols.reshape(1)
            if per_job:
                width = math.prod(shape[1:])
                pos = pos_of_slot[self.col_slot[sel]]
                if self.dead.any():  # (columns of jobs that left: not in the problem)
                    sel, pos = sel[pos >= 0], pos[pos >= 0]
                flat[pos * width + self.col_inner[sel]] = sel
            else:
                flat[self.col_inner[sel]] = sel
            at = cols.reshape(-1)  # (a 0-d cols too: the bounds stay arrays of cols' shape)
            out[name] = Variable(Model(name), name, dims, cols, lo_ext[at].reshape(cols.shape),
                                 hi_ext[at].reshape(cols.shape), False)
        return out


def _signature(policy: Any, space: AllocationSpace) -> tuple[Any, ...]:
    """What must be equal for an in-place update: the policy's class and options, the cluster, the
    configurations."""
    return _signature_of(type(policy), policy.config, space.problem.cluster, space.configs.labels)


def _signature_of(cls: type, config: dict[str, Any], cluster: Any, configs: np.ndarray) -> tuple[Any, ...]:
    return cls, tuple(sorted((k, repr(v)) for k, v in config.items())), cluster, tuple(configs.tolist())


#: per policy object, its kept model (beside it, like warm_start's bases: policies stay picklable)
_STATE: "weakref.WeakKeyDictionary[Any, JobSetModel | AggregateModel]" = weakref.WeakKeyDictionary()


def eligible(policy: Any, space: AllocationSpace) -> bool:
    """Whether ``policy`` on ``space`` may be updated in place: the policy's class itself declares a
    job-separable LP, ``algorithm`` is ``auto``, the backend is HiGHS, the space is the base one
    without pair rows."""
    cfg = policy.config
    # declared by the policy's own class: a subclass may build differently (a normalization over the
    # job set), so it does not inherit the declaration
    return (bool(type(policy).__dict__.get("incremental_lp", False)) and cfg.get("algorithm") == "auto"
            and cfg.get("solver") in (None, "highs") and type(space) is AllocationSpace
            and space.num_pairs == 0 and not space.space_sharing)


def state(policy: Any) -> JobSetModel | AggregateModel | None:
    """The model kept for ``policy`` (``None`` if none)."""
    return _STATE.get(policy)


def forget(policy: Any) -> None:
    """Drop the model kept for ``policy``."""
    _STATE.pop(policy, None)


def update(policy: Any, space: AllocationSpace
           ) -> tuple[JobSetModel | AggregateModel, dict[str, Variable]] | None:
    """The kept model of ``policy`` brought to ``space``'s job set, and its variables over ``space``;
    ``None`` (the caller builds cold, then :func:`adopt`) when there is none, it is in use by
    another thread, or the change is not a pure change of the job set. The caller releases
    ``JobSetModel.lock`` after its solve."""
    st = _STATE.get(policy)
    if st is None:
        # none kept: where the jobs repeat, the reduced LP built on the class space (aggregate_cold)
        if not eligible(policy, space):
            return None
        st = aggregate_cold.build(policy, space, _signature(policy, space))
        if st is None:
            return None
        st.lock.acquire()
        _STATE[policy] = st
    elif not eligible(policy, space) or not st.lock.acquire(blocking=False):
        return None
    if _STATE.get(policy) is not st:  # replaced meanwhile (by an aggregated model): build cold
        st.lock.release()
        return None
    try:
        agg = aggregate_resolve.from_kept(st) if isinstance(st, JobSetModel) else None
        if agg is not None:  # answered by the block-aggregation fast path: re-solved on its reduced LP
            agg.lock.acquire()
            _STATE[policy] = agg
            st.lock.release()
            st = agg
        got = st.update(policy, space)
    except SolverError:  # the backend refused an update: the state is unknown, build cold
        got = None
    except BaseException:
        st.lock.release()
        forget(policy)
        raise
    if got is None:
        rebuild = st.prefers_rebuild()
        duals = (st.linking_duals() or {}) if rebuild else None
        st.lock.release()
        forget(policy)
        if duals is not None:
            _PRICES[policy] = duals  # (even empty: adopt then knows the fresh build was not seeded)
        return None
    return st, got


#: per policy object, the linking rows' multipliers left by a kept model that preferred a rebuild,
#: and how many fresh builds were started from such multipliers (tests and benchmarks read it)
_PRICES: "weakref.WeakKeyDictionary[Any, dict[str, np.ndarray]]" = weakref.WeakKeyDictionary()
_SEEDED: "weakref.WeakKeyDictionary[Any, int]" = weakref.WeakKeyDictionary()


def seeded(policy: Any) -> int:
    """How many of ``policy``'s fresh builds started from a kept model's prices (:func:`seed_prices`)."""
    return _SEEDED.get(policy, 0)


def seed_prices(policy: Any, model: Model, loaded: Any) -> bool:
    """Start ``loaded`` (``model`` compiled and loaded, cold) from the multipliers of the linking
    rows (constraint blocks not per job, matched by name and size) that ``policy``'s kept model left
    when it preferred a rebuild (:meth:`JobSetModel.linking_duals`); other rows start at 0. Whether
    the backend took them (its price path then answers, or the whole LP is solved cold); if not,
    the caller carries the basis as usual."""
    duals = _PRICES.pop(policy, None)
    if duals is None:
        return False
    y = np.zeros(loaded.sf.num_rows)
    hit = False
    for name, v in duals.items():
        b = model.blocks.get(name)
        if b is not None and b.stop - b.start == v.size:
            y[b.start:b.stop] = v
            hit = True
    if not (hit and loaded.set_dual_start(y)):
        _PRICES[policy] = {}  # not seeded: adopt keeps the next model updating in place
        return False
    _SEEDED[policy] = _SEEDED.get(policy, 0) + 1
    return True


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
    if _PRICES.pop(policy, None) is not None:
        # this fresh build was preferred to an update but did not start from the kept prices (a
        # policy whose own solve does not use them, or a shape that did not fit): keep updating
        st.rebuild_ok = False
    loaded.return_duals = False  # the policies read only the point of a kept model's solves
    st.lock.acquire()
    _STATE[policy] = st
    return st
