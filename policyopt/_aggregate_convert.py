"""The conversion of a policy's kept whole-LP model, answered by the block-aggregation fast path,
into an :class:`~policyopt.aggregate_resolve.AggregateModel` (:func:`from_kept`), and the first
stage's basis on a later stage's factorization (:func:`_first_basis`). Parts of
:mod:`policyopt.aggregate_resolve` (which re-exports :func:`from_kept`)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from .aggregate_basis import Basis, KeptFactor

if TYPE_CHECKING:
    from .aggregate_resolve import AggregateModel

__all__ = ["from_kept"]


def _first_basis(fac: KeptFactor, basic: np.ndarray, x: np.ndarray, col_lower: np.ndarray) -> Basis | None:
    """The basis of basic variables ``basic`` (HiGHS's encoding) with point ``x`` under the column
    lower bounds ``col_lower`` as a :class:`Basis` on ``fac``'s factorization: those basic in
    ``fac``'s basis kept at their positions, the others in the positions of those that are not
    basic here; ``None`` if it is not a basis of ``fac``'s size or ``x`` is not its point."""
    n, m = fac.n, fac.m
    var = np.where(basic >= 0, basic, n - 1 - basic)
    if var.size != m or np.count_nonzero(np.bincount(var, minlength=n + m) > 1):
        return None
    now, was = np.zeros(n + m, bool), np.zeros(n + m, bool)
    now[var], was[fac.var0] = True, True
    out = fac.var0.copy()
    out[(~now[fac.var0]).nonzero()[0]] = var[(~was[var]).nonzero()[0]]
    return fac.basis(out, x, col_lower)


def from_kept(st: Any) -> AggregateModel | None:
    """An :class:`AggregateModel` from a kept :class:`~policyopt.incremental.JobSetModel` whose
    loaded model was answered by the block-aggregation fast path and never passed whole to the
    backend, or ``None`` when it was not, or its groups are not classes: each job one block, the
    jobs of a group of equal data, each job's columns its group's (class) columns."""
    loaded, model = st.loaded, st._model
    if model is None or not hasattr(loaded, "aggregation") or loaded.holds_model() or st.dead.any():
        return None
    got = loaded.aggregation()
    if got is None:
        return None
    first = loaded.first_stage() if hasattr(loaded, "first_stage") else None
    agg, small = got
    if not hasattr(small, "set_entries") or agg.structure is None or agg.group is None or agg.keep_mult is None:
        return None
    cb, rb = agg.structure.cb, agg.structure.rb
    n, G = len(st.ids), int(agg.groups)
    # each job's block: that of its rows, the same in every per-job constraint block
    block = None
    for name, (per_job, _) in st.block_layout.items():
        if per_job:
            b = model.blocks[name]
            if n == 0 or (b.stop - b.start) % n:
                return None
            rows_b = rb[b.start:b.stop].reshape(n, -1)
            if block is None:
                block = rows_b[:, 0].copy()
            if np.count_nonzero(rows_b != block[:, None]):
                return None
    if block is None or np.count_nonzero(block < 0) or np.count_nonzero(np.bincount(block, minlength=agg.blocks) != 1):
        return None  # a job without a block or in two, or a block of several jobs (or of none)
    group = agg.group[block]
    rep = np.full(G, -1, np.int64)
    rep[group] = np.arange(n)  # (a job of each group: any one, all hold its data, as checked next)
    if np.count_nonzero(rep < 0):
        return None
    # every job of a group has its representative's data, so its block is the representative's (a
    # job's block depends on its data only): the groups, found by a 64-bit hash of the blocks, are
    # exact. (Where a group holds jobs of unequal data — equal blocks, as max_min_fairness_agnostic's,
    # or a hash collision — the whole LP is built as before.)
    T, scale, weights = st.T, st.scale, st.weights
    of = rep[group]
    if (np.count_nonzero(T != T.take(of, axis=0)) or np.count_nonzero(scale != scale.take(of))
            or np.count_nonzero(weights != weights.take(of))):
        return None
    kc, kr = agg.keep_cols, agg.keep_rows
    col_group = np.where(cb[kc] >= 0, agg.group[np.maximum(cb[kc], 0)], -1)
    row_group = np.where(rb[kr] >= 0, agg.group[np.maximum(rb[kr], 0)], -1)
    src = np.append(agg.col_src, -1)  # (a masked slot, column -1, reads the last entry)
    variables: dict[str, tuple[bool, tuple[Any, ...], np.ndarray]] = {}
    for name, (per_job, _) in st.var_layout.items():
        v = model.variables[name]
        red = src.take(v.cols)
        if per_job:
            red = red.reshape(n, -1)
            cls_cols = red.take(rep, axis=0)
            if np.count_nonzero(red != cls_cols.take(group, axis=0)):
                return None
            owner, at = (cls_cols >= 0).nonzero()  # (the class of each existing column, and where)
            if np.count_nonzero(col_group[cls_cols[owner, at]] != owner):
                return None  # a job's column is not one of its class's (a linking column, say)
            variables[name] = (True, tuple(v.dims), cls_cols)
        else:
            variables[name] = (False, tuple(v.dims), red)
    c, lo, hi, rlo, rhi = st.base
    A = small.sf.A
    ent_col = np.repeat(np.arange(A.shape[1]), np.diff(A.indptr))  # (each entry's column)
    pos = ((row_group[A.indices] < 0) & (col_group[ent_col] >= 0)).nonzero()[0]
    lin_group = col_group[ent_col[pos]]
    m_old = agg.keep_mult[ent_col[pos]]
    if np.count_nonzero(m_old != np.bincount(group, minlength=G)[lin_group]):
        return None
    from .aggregate_resolve import AggregateModel  # (imported here: that module imports this one)

    loaded.aggregation(take=True)  # (the reduced LP is this model's alone from now on)
    out = AggregateModel(st.signature, small, st.obj_name, st.ids, (T, scale, weights), group, rep,
                         col_group, row_group, (c[kc], lo[kc], hi[kc], rlo[kr], rhi[kr]),
                         (pos, lin_group, A.data[pos] / m_old), variables, ent_col)
    out.adopt_factor(first)
    return out
