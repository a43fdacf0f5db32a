"""A first solve on the class space: the reduced LP built straight from the job data.

A job-separable policy's LP (:attr:`~policyopt.policy.Policy.incremental_lp`) gives every job a
block that depends only on its data — throughputs ``T[j]``, scale factor ``sf_j``, weight ``w_j`` —
and the cluster. Jobs of equal data form a *class* ``g`` of multiplicity ``m_g``, and the LP's
optimum is that of its *reduced* LP (:mod:`policyopt.aggregate_resolve`), one representative block
per class, its costs and its entries in the linking rows multiplied by ``m_g``:

.. math::  \\max\\ c_L z + \\sum_g m_g c_g x_g \\quad\\text{s.t.}\\quad
           R_g x_g + D_g z \\in [l_g, u_g],\\quad \\sum_g m_g B_g x_g + E z \\in [L, U]

The structured fast path (:mod:`policyopt.solvers.blocks`) reaches it from the whole LP: build,
compile, detect the blocks, hash them into groups, aggregate — all of it over ``n`` jobs, to keep
``G`` blocks. Here, when jobs repeat, the classes are found from the data instead (one hash of each
job's row ``(T[j], sf_j, w_j)`` into 64 bits, each job's first job of equal hash read from a table
indexed by bits of the hash, then every job's row compared exactly with its class representative's,
so a hash collision only declines), and the policy's own
``build`` runs on the space of the ``G`` representatives (:func:`class_space`); its compiled LP
becomes the reduced LP by multiplying the class columns' costs and linking-row entries by ``m_g``
(:func:`build`). It is kept as the policy's :class:`~policyopt.aggregate_resolve.AggregateModel`:
the first answer is that model's re-solve from no basis — solved by HiGHS, certified on the
reduced LP (feasible to 1e-9, Lagrangian bound equal to the objective to 1e-9 relative; the
expansion argument of :mod:`policyopt.aggregate_resolve` makes it the whole LP's certificate) and
gathered per job — and the next problems after an arrival or a completion update it in place.

The structure is checked on the compiled class LP, not assumed: each class's rows hold entries in
its own columns and linking columns only, and the objective has no constant. Few repeats (more than
:data:`MAX_CLASS_SHARE` of the jobs are classes, or fewer than :data:`MIN_JOBS` jobs), another
layout, or a failed certificate go to the whole LP as before.
"""
from __future__ import annotations

import copy
from typing import Any

import numpy as np

from ._incremental_parts import _layout
from .aggregate_resolve import AggregateModel
from .allocation import AllocationSpace
from .modeling import IndexSet, Model

__all__ = ["MAX_CLASS_SHARE", "MIN_JOBS", "build", "class_space", "job_classes"]

#: the class route is taken when the classes are at most this share of the jobs
MAX_CLASS_SHARE = 0.25
#: and from this many jobs (below, the whole LP is small: HiGHS solves it without aggregation)
MIN_JOBS = 128

#: odd 64-bit multipliers of the columns of a job's data row in its hash (seeded: the same every run)
_MULT = np.random.default_rng(20261128).integers(1, 2**62, size=64, dtype=np.int64).astype(np.uint64) * 2 + 1
#: bucket tables of job_classes: at most 2**_MAX_BITS buckets, hashes bucketed this many times before a sort
_MAX_BITS = 20
_BUCKET_ROUNDS = 2


def job_classes(T: np.ndarray, scale: np.ndarray, weights: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """``(group, rep)``: job ``j`` is of class ``group[j]``, whose representative is job ``rep[g]``
    (its first job; classes numbered in the order of their first jobs), where jobs of a class have
    exactly equal ``T`` rows, scale factors and weights; or ``None`` when two jobs of unequal data
    share a hash (or the data holds a NaN).

    Each job's row ``k_j = (T[j], sf_j, w_j)`` (as float64 bit patterns ``b_ji``) is hashed as
    ``h_j = Σ_i a_i b_ji mod 2⁶⁴`` (fixed odd ``a_i``; one integer matrix-vector product of the
    rows side by side). Each job's first job of equal hash ``r_j`` is read from a table of
    ``B ≥ 2n`` buckets indexed by ``bits`` bits of ``h_j`` (the smallest job index per bucket:
    :func:`_bucket_firsts`); jobs whose bucket's first job has another hash are bucketed again by
    the next ``bits`` bits (at most :data:`_BUCKET_ROUNDS` times), then by a sort. Then
    ``k_j = k_{r_j}`` is checked exactly for every job.

    (A process's first call pays for every numpy routine and dtype it uses for the first time,
    ~50–200 µs each here: the rows are hashed and compared side by side, one product and one
    comparison, and a bucket's first job is found by an assignment, not ``np.minimum.at``.)"""
    n, C = T.shape
    if C + 2 > _MULT.size:
        return None
    K = np.concatenate([T, np.reshape(scale, (n, 1)), np.reshape(weights, (n, 1))], axis=1, dtype=np.float64)
    h = K.view(np.uint64) @ _MULT[:C + 2]
    # (no sort of the n hashes: its first call in a process cost 0.12–0.27 ms at 2,048 jobs,
    # the table's 0.03)
    bits = min(_MAX_BITS, (2 * n).bit_length())
    ar = np.arange(n, dtype=np.int64)
    r = ar  # each job's first job of equal hash
    todo = ar
    for k in range(_BUCKET_ROUNDS + 1):
        hk = h if k == 0 else h.take(todo)
        if k < _BUCKET_ROUNDS:  # bits [64 − bits(k+1), 64 − bits k) of the hash
            hb = hk if k == 0 else hk << np.uint64(bits * k)
            b = (hb >> np.uint64(64 - bits)).view(np.int64)
            got = todo.take(_bucket_firsts(b, 1 << bits))
        else:  # (the few left: the first of each run of equal hashes, by a stable sort)
            _, at, inv = np.unique(hk, return_index=True, return_inverse=True)
            got = todo.take(at.take(inv))
        if k == 0:
            r = got  # (a new array: later rounds write into it)
        else:
            r[todo] = got
        bad = (h.take(got) != hk).nonzero()[0]
        if not bad.size:
            break
        todo = todo.take(bad)
    rep = (r == ar).nonzero()[0]
    label = np.empty(n, np.int64)
    label[rep] = np.arange(rep.size)
    group = label.take(r)
    if np.count_nonzero(K != K.take(r, axis=0)):
        return None  # a hash collision (or NaN data): no classes
    return group, rep


def _fill_reversed(table: np.ndarray, b: np.ndarray) -> None:
    """``table[b[i]] = i`` for ``i`` from the last position down (NumPy's assignment runs through
    repeated indices in order, so a bucket keeps its smallest position; :func:`_bucket_firsts`
    checks it)."""
    table[b[::-1]] = np.arange(b.size - 1, -1, -1, dtype=np.int64)


def _bucket_firsts(b: np.ndarray, size: int) -> np.ndarray:
    """Per position ``i``, the smallest position of equal bucket ``b[i]`` (``0 ≤ b < size``).

    Filled by one assignment in reverse order (:func:`_fill_reversed`) and checked: each table
    entry is some position of its bucket, so it is the smallest exactly when no position precedes
    its bucket's entry (``table[b[i]] ≤ i`` for every ``i``); otherwise by ``np.minimum.at``."""
    table = np.empty(size, np.int64)
    _fill_reversed(table, b)
    got = table.take(b)
    if np.count_nonzero(got > np.arange(b.size)):  # (not expected: NumPy's order of assignment)
        table.fill(b.size)
        np.minimum.at(table, b, np.arange(b.size))
        got = table.take(b)
    return got


def class_space(space: AllocationSpace, rep: np.ndarray) -> AllocationSpace:
    """The space of the jobs at positions ``rep`` on the same cluster (as
    :meth:`AllocationSpace.restrict` for a space without pair rows), made without reading any
    per-job mask or share of ``space`` (the sub-space computes its own for its few jobs)."""
    sub = copy.copy(space)
    d = sub.__dict__
    for k in ("single_mask", "mask", "_slot_cache", "_eq_share", "_classes", "_mmf_normalizer"):
        d.pop(k, None)
    sub.jobs = IndexSet("jobs", space.jobs.labels.take(rep))
    for name in ("T", "scale", "weights", "steps", "time_since_start"):
        setattr(sub, name, getattr(space, name).take(rep, axis=0))
    sub.rows = IndexSet("rows", space.rows.labels.take(rep))
    sub.row_scale = space.row_scale.take(rep)
    sub._thr_matrix = None
    return sub


def build(policy: Any, space: AllocationSpace, signature: tuple[Any, ...]) -> AggregateModel | None:
    """``policy``'s reduced LP for ``space`` built on its class space (module docstring), loaded in
    HiGHS (not run) and kept as an :class:`AggregateModel` over ``space``'s jobs; ``None`` when the
    jobs repeat too little or the compiled class LP is not of the block shape. The caller has
    checked :func:`policyopt.incremental.eligible`; ``signature`` is the policy's on ``space``."""
    n = len(space.jobs)
    if n < MIN_JOBS or space.num_pairs:
        return None
    T, scale, weights = space.T, space.scale, space.weights
    got = job_classes(T, scale, weights)
    if got is None:
        return None
    group, rep = got
    G = rep.size
    if G > MAX_CLASS_SHARE * n:
        return None
    sub = class_space(space, rep)
    model = Model(policy.name)
    X = sub.add_allocation(model)
    obj_var = policy.build(model, sub, X)
    lay = _layout(model)
    if lay is None or model.is_mip:
        return None
    var_layout, block_layout = lay
    sf = model.compile()
    if sf.offset != 0.0:  # (a constant would count once, not once per job)
        return None
    N, M = sf.num_cols, sf.num_rows
    col_group = np.full(N, -1, np.int64)
    row_group = np.full(M, -1, np.int64)
    variables: dict[str, tuple[bool, tuple[Any, ...], np.ndarray]] = {}
    for name, (per_job, _) in var_layout.items():
        v = model.variables[name]
        cc = np.asarray(v.cols, np.int64)
        if per_job:
            cc = cc.reshape(G, -1)
            flat = cc.ravel()
            at = (flat >= 0).nonzero()[0]
            col_group[flat.take(at)] = at // cc.shape[1]  # (row-major: a class's slots side by side)
        variables[name] = (per_job, tuple(v.dims), cc)
    for name, (per_job, _) in block_layout.items():
        if per_job:
            b = model.blocks[name]
            w, r = divmod(b.stop - b.start, G)
            if r:
                return None
            row_group[b.start:b.stop] = np.arange(b.stop - b.start) // w
    A = sf.A
    ent_col = np.repeat(np.arange(N), A.indptr[1:] - A.indptr[:-1])
    rg, cg = row_group.take(A.indices), col_group.take(ent_col)
    # a class's rows hold its own columns and linking columns only (the block shape)
    if np.count_nonzero((rg >= 0) & (cg >= 0) & (rg != cg)):
        return None
    pos = ((rg < 0) & (cg >= 0)).nonzero()[0]
    # the compiled unit costs and entries, kept by the model; the reduced LP's own are multiplied
    # by the multiplicities here (class column j: m_g c_j, its linking-row entries m_g a_ij), so
    # the model's first update (next, to the same jobs) finds them as they should be
    base = (sf.c.copy(), sf.col_lower.copy(), sf.col_upper.copy(), sf.row_lower.copy(), sf.row_upper.copy())
    lin_group = cg.take(pos)
    lin_unit = A.data[pos]  # (a copy: fancy indexing)
    mult = np.bincount(group, minlength=G).astype(np.float64)
    sf.c *= np.append(mult, 1.0).take(col_group)  # (column group −1, linking: reads the 1)
    A.data[pos] = lin_unit * mult.take(lin_group)
    from policyopt.solvers.highs import reduced_model

    small = reduced_model(sf, policy.solver_options(sf), cap=False)
    ids = space.jobs.labels
    # (the job arrays are the problem's own, kept as they are: a problem's arrays are not changed in place)
    out = AggregateModel(signature, small, obj_var.name if obj_var is not None else None, ids,
                          (T, scale, weights), group, rep, col_group, row_group, base,
                          (pos, lin_group, lin_unit), variables, ent_col)
    out.loaded.touched = False  # (its costs and bounds are the compiled ones at these multiplicities)
    # each class's mask row and equal share (AllocationSpace.class_rows): the class space's own
    out._cls_rows = (sub.single_mask, sub.equal_share_throughput())
    return out
