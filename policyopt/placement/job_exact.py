"""Job-exact migration minimization: relabel a plan so the fewest *jobs* change GPU sets.

A job that runs in two consecutive rounds restarts from a checkpoint as a whole when even one of
its GPUs changes, so the cost of a relabeling ``pi`` (new GPU -> old GPU) is

    cost(pi) = sum_{j in both rounds} c_j * [pi(new_j) != old_j]          (c_j = 1, or restore seconds)

and we maximize the kept weight ``sum_j c_j [pi(new_j) = old_j]``. Relabelings keep the plan's
topology: servers of one class (same worker type and size) are interchangeable, and GPUs inside a
server too. Only jobs with the same type and GPU count in both rounds can be kept.

**Groups.** On one server the GPUs a job holds form a *group*; a declared pair holds one group
together, and distinct groups on a server are disjoint. A spread job has one group (a *part*) on
each server it uses. Mapping new server ``b`` onto old server ``a`` can map any set of disjoint,
equal-size new groups onto old groups, so job ``j`` is kept iff every new part of ``j`` lands on
an old part of ``j``: for a consolidated job, iff ``b -> a`` for its two servers and its group is
matched; for a spread job, iff all its servers map onto the servers it used.

**Exact when no job is spread** (in either round, among the jobs that could be kept):

1. server pair ``(a, b)``: ``V[a, b]`` = maximum-weight matching of new groups of ``b`` onto old
   groups of ``a`` (edge weight: the jobs they share; usually each group has at most one partner,
   then ``V`` is a plain sum, else a small Hungarian);
2. server level: a maximum-weight assignment on ``V`` -- per connected component of the sparse
   graph of pairs with ``V > 0``, by a sparse assignment (LAPJVsp): memory linear in the server
   pairs that share a job, never a dense servers x servers matrix, at any cluster size.

Spread jobs enter ``V`` with their weight divided over their parts (a heuristic: a part may be
matched without its siblings); :func:`exact_relabeling` solves the same model as a MILP (HiGHS)
to measure the gap. **Never worse than the simple rule**: the result is the better (by kept
weight, per server class) of this mapping, the simple rule's
(:func:`~policyopt.placement.migration.simple_rule_relabeling`), the plan as given, and -- when a
job is spread -- Tesserae's (:func:`~policyopt.placement.migration.tesserae_relabeling`).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, linear_sum_assignment, milp
from scipy.sparse.csgraph import connected_components, min_weight_full_bipartite_matching

from policyopt.errors import InputError
from policyopt.placement.layout import ClusterLayout
from policyopt.placement.plan import Placement

__all__ = ["job_exact_relabeling", "exact_relabeling", "kept_weight", "moved_weight", "RelabelingModel",
           "TESSERAE_MAX_SERVERS"]

#: Tesserae's mapping joins the baselines only up to this many servers (it builds a dense
#: servers x servers cost matrix per class); the job-exact method itself stays sparse.
TESSERAE_MAX_SERVERS = 1024


def _flat(placement: Placement, vocab: Mapping[str, int], jobs: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """(job index, GPU id) of every GPU the listed jobs hold, sorted by job then GPU."""
    lengths = np.fromiter((len(placement.gpus[j]) for j in jobs), np.int64, len(jobs))
    gpu = np.fromiter((g for j in jobs for g in placement.gpus[j]), np.int64, int(lengths.sum()))
    job = np.repeat(np.fromiter((vocab[j] for j in jobs), np.int64, len(jobs)), lengths)
    order = np.lexsort((gpu, job))
    return job[order], gpu[order]


def _candidates(previous: Placement, plan: Placement) -> list[str]:
    """Jobs of both rounds with the same worker type and GPU count (the only ones that can be kept)."""
    lay = plan.layout
    out = []
    for j, g in plan.gpus.items():
        o = previous.gpus.get(j)
        if o is not None and len(o) == len(g) and lay.gpu_type[o[0]] == lay.gpu_type[g[0]]:
            out.append(j)
    return out


def _weights(jobs: list[str], costs: Mapping[str, float] | None) -> np.ndarray:
    if costs is None:
        return np.ones(len(jobs))
    w = np.fromiter((float(costs.get(j, 1.0)) for j in jobs), float, len(jobs))
    bad = np.flatnonzero(~(np.isfinite(w) & (w > 0)))
    if bad.size:
        j = jobs[int(bad[0])]
        raise InputError(f"costs.{j}", costs[j], "a job's migration cost must be a positive number")
    return w


@dataclass(frozen=True)
class RelabelingModel:
    """Parts and group edges of a relabeling problem (arrays; see the module docstring).

    Parts (one per job and server, new and old): ``*_job``, ``*_server``, ``*_start`` / ``*_size``
    (slice of the flat GPU arrays ``*_gpu``). Edges: one per (new part, old part) of the same job and
    size; ``edge_new`` / ``edge_old`` index parts, ``edge_w`` = job weight / number of its parts.
    """

    layout: ClusterLayout
    jobs: list[str]
    weight: np.ndarray
    n_parts: np.ndarray
    new_job: np.ndarray
    new_server: np.ndarray
    new_start: np.ndarray
    new_size: np.ndarray
    new_gpu: np.ndarray
    old_job: np.ndarray
    old_server: np.ndarray
    old_start: np.ndarray
    old_size: np.ndarray
    old_gpu: np.ndarray
    edge_new: np.ndarray
    edge_old: np.ndarray
    edge_w: np.ndarray

    @classmethod
    def build(cls, previous: Placement, plan: Placement, costs: Mapping[str, float] | None = None
              ) -> "RelabelingModel":
        lay = plan.layout
        jobs = _candidates(previous, plan)
        vocab = {j: i for i, j in enumerate(jobs)}
        weight = _weights(jobs, costs)

        def parts(p: Placement) -> tuple[np.ndarray, ...]:
            job, gpu = _flat(p, vocab, jobs)
            srv = lay.gpu_server[gpu]
            start = np.flatnonzero(np.r_[True, (job[1:] != job[:-1]) | (srv[1:] != srv[:-1])]) if job.size \
                else np.zeros(0, np.int64)
            size = np.diff(np.r_[start, job.size])
            return job[start], srv[start], start, size, gpu

        nj, ns, nst, nsz, ng = parts(plan)
        oj, os_, ost, osz, og = parts(previous)
        n_parts = np.bincount(nj, minlength=len(jobs))
        # join new and old parts on (job, size): every combination is an edge
        smax = int(max(nsz.max(initial=0), osz.max(initial=0))) + 1
        kn, ko = nj * smax + nsz, oj * smax + osz
        order_o = np.argsort(ko, kind="stable")
        ko_sorted = ko[order_o]
        lo = np.searchsorted(ko_sorted, kn, "left")
        cnt = np.searchsorted(ko_sorted, kn, "right") - lo
        e_new = np.repeat(np.arange(kn.size), cnt)
        offset = np.arange(int(cnt.sum())) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        e_old = order_o[np.repeat(lo, cnt) + offset]
        e_w = weight[nj[e_new]] / n_parts[nj[e_new]]
        return cls(lay, jobs, weight, n_parts, nj, ns, nst, nsz, ng, oj, os_, ost, osz, og, e_new, e_old, e_w)

    # ------------------------------------------------------------------ groups
    def group_keys(self) -> tuple[np.ndarray, np.ndarray]:
        """Per edge, the new and old group: the first GPU of the part (a pair's two jobs share it)."""
        return self.new_gpu[self.new_start[self.edge_new]], self.old_gpu[self.old_start[self.edge_old]]

    def spread_jobs(self) -> np.ndarray:
        """Job indices with more than one part in either round."""
        n_old = np.bincount(self.old_job, minlength=len(self.jobs))
        return np.flatnonzero((self.n_parts > 1) | (n_old > 1))


def kept_weight(previous: Placement, plan: Placement, new_to_old: np.ndarray,
                costs: Mapping[str, float] | None = None, *, per_type: bool = False) -> float | np.ndarray:
    """``sum_j c_j [new_to_old(new_j) = old_j]`` (per worker type with ``per_type``)."""
    lay = plan.layout
    jobs = _candidates(previous, plan)
    vocab = {j: i for i, j in enumerate(jobs)}
    w = _weights(jobs, costs)
    nj, ng = _flat(plan, vocab, jobs)
    oj, og = _flat(previous, vocab, jobs)
    mapped = np.asarray(new_to_old, np.int64)[ng]
    order = np.lexsort((mapped, nj))
    same = mapped[order] == og
    starts = np.flatnonzero(np.r_[True, nj[1:] != nj[:-1]]) if nj.size else np.zeros(0, np.int64)
    kept = np.logical_and.reduceat(same, starts) if same.size else np.zeros(0, bool)
    if not per_type:
        return float(w[kept].sum())
    job_type = lay.gpu_type[og[starts]] if og.size else np.zeros(0, np.int64)
    return np.bincount(job_type[kept], weights=w[kept], minlength=len(lay.worker_types))


def _kept_per_type(m: RelabelingModel, new_to_old: np.ndarray) -> np.ndarray:
    """:func:`kept_weight` per worker type, from a built model (its flat GPU arrays are sorted by job
    then GPU, as :func:`kept_weight` sorts them)."""
    nj = np.repeat(m.new_job, m.new_size)
    mapped = np.asarray(new_to_old, np.int64)[m.new_gpu]
    order = np.lexsort((mapped, nj))
    same = mapped[order] == m.old_gpu
    n = len(m.layout.worker_types)
    if not same.size:
        return np.zeros(n)
    starts = np.flatnonzero(np.r_[True, nj[1:] != nj[:-1]])
    kept = np.logical_and.reduceat(same, starts)
    job_type = m.layout.gpu_type[m.old_gpu[starts]]
    return np.bincount(job_type[kept], weights=m.weight[kept], minlength=n)


def _candidate_weight_per_type(m: RelabelingModel) -> np.ndarray:
    """Per worker type, the weight of every job that could be kept (the most any relabeling keeps)."""
    n = len(m.layout.worker_types)
    if not m.old_job.size:
        return np.zeros(n)
    _, first = np.unique(m.old_job, return_index=True)
    return np.bincount(m.layout.gpu_type[m.old_gpu[m.old_start[first]]], weights=m.weight[m.old_job[first]],
                       minlength=n)


def moved_weight(previous: Placement, plan: Placement, costs: Mapping[str, float] | None = None) -> float:
    """``sum_j c_j`` over jobs of both rounds whose GPU set changes (``plan`` as labeled)."""
    both = [j for j in plan.gpus if j in previous.gpus]
    w = dict(zip(both, _weights(both, costs)))
    return float(sum(w[j] for j in both if previous.gpus[j] != plan.gpus[j]))


def _pair_values(m: RelabelingModel) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per server pair with an edge: (old a, new b, V[a, b]) and per edge whether it is matched
    when ``b -> a`` (the pair's maximum-weight group matching)."""
    g_new, g_old = m.group_keys()
    a = m.old_server[m.edge_old]
    b = m.new_server[m.edge_new]
    if not a.size:
        z = np.zeros(0, np.int64)
        return z, z, np.zeros(0), np.zeros(0, bool)
    # aggregate duplicate (group, group) edges: a pair kept together counts both jobs
    key = np.stack([a, b, g_new, g_old], axis=1)
    uk, inv = np.unique(key, axis=0, return_inverse=True)
    inv = inv.ravel()
    uw = np.bincount(inv, weights=m.edge_w, minlength=len(uk))
    # pairs (a, b) in which some group has two candidate partners need a small matching
    ab = uk[:, 0] * m.layout.num_servers + uk[:, 1]
    dup_new = _duplicated(np.stack([ab, uk[:, 2]], axis=1))
    dup_old = _duplicated(np.stack([ab, uk[:, 3]], axis=1))
    conflict_ab = np.unique(ab[dup_new | dup_old])
    chosen = ~np.isin(ab, conflict_ab)
    for pair in conflict_ab.tolist():
        rows = np.flatnonzero(ab == pair)
        gn, r_new = np.unique(uk[rows, 2], return_inverse=True)
        go, r_old = np.unique(uk[rows, 3], return_inverse=True)
        W = np.zeros((gn.size, go.size))
        W[r_new.ravel(), r_old.ravel()] = uw[rows]
        r, c = linear_sum_assignment(W, maximize=True)
        hit = np.zeros_like(W, dtype=bool)
        hit[r, c] = W[r, c] > 0
        chosen[rows] = hit[r_new.ravel(), r_old.ravel()]
    pairs, pinv = np.unique(ab, return_inverse=True)
    V = np.bincount(pinv.ravel(), weights=np.where(chosen, uw, 0.0), minlength=pairs.size)
    edge_chosen = chosen[inv]
    return pairs // m.layout.num_servers, pairs % m.layout.num_servers, V, edge_chosen


def _duplicated(rows: np.ndarray) -> np.ndarray:
    """Rows that occur more than once."""
    if not len(rows):
        return np.zeros(0, bool)
    _, inv, cnt = np.unique(rows, axis=0, return_inverse=True, return_counts=True)
    return cnt[inv.ravel()] > 1


def _server_assignment(num_servers: int, a: np.ndarray, b: np.ndarray, V: np.ndarray) -> np.ndarray:
    """``old_of[b]``: a maximum-weight assignment of new servers onto old ones on the sparse value
    graph, solved per connected component (-1 where a new server gets no old server with value)."""
    old_of = np.full(num_servers, -1, np.int64)
    if not a.size:
        return old_of
    S = num_servers
    graph = sp.coo_matrix((np.ones(a.size), (a, S + b)), shape=(2 * S, 2 * S)).tocsr()
    _, label = connected_components(graph, directed=False)
    comp = label[a]
    order = np.argsort(comp, kind="stable")
    comp_sorted = comp[order]
    bounds = np.flatnonzero(np.r_[True, comp_sorted[1:] != comp_sorted[:-1], True])
    for s, e in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        idx = order[s:e]
        if idx.size == 1:
            old_of[b[idx[0]]] = a[idx[0]]
            continue
        ra, ia = np.unique(a[idx], return_inverse=True)
        rb, ib = np.unique(b[idx], return_inverse=True)
        r, c = _sparse_max_matching(ia.ravel(), ib.ravel(), V[idx], ra.size, rb.size)
        old_of[rb[c]] = ra[r]
    return old_of


def _sparse_max_matching(rows: np.ndarray, cols: np.ndarray, w: np.ndarray, n_rows: int, n_cols: int
                         ) -> tuple[np.ndarray, np.ndarray]:
    """A maximum-weight matching (not necessarily full) on the sparse bipartite graph with edges
    ``(rows[k], cols[k])`` of weight ``w[k] > 0``; returns the matched ``(row, col)`` pairs.

    Memory linear in the edges (LAPJVsp, :func:`scipy.sparse.csgraph.min_weight_full_bipartite_matching`),
    never an ``n_rows × n_cols`` array: each row also gets a private dummy column, so a matching
    that covers every row always exists and a row left on its dummy is unmatched; every weight is
    shifted by +1 (LAPJVsp needs non-zero weights), which adds the same ``n_rows`` to every
    row-covering matching and so keeps the optimum."""
    keep = w > 0
    rows, cols, w = rows[keep], cols[keep], w[keep]
    if not rows.size:
        z = np.zeros(0, np.int64)
        return z, z
    dummy = np.arange(n_rows)
    graph = sp.csr_matrix((np.r_[w + 1.0, np.ones(n_rows)], (np.r_[rows, dummy], np.r_[cols, n_cols + dummy])),
                          shape=(n_rows, n_cols + n_rows))
    r, c = min_weight_full_bipartite_matching(graph, maximize=True)
    real = c < n_cols
    return r[real].astype(np.int64), c[real].astype(np.int64)


def _complete(layout: ClusterLayout, old_of: np.ndarray, new_gpu: np.ndarray, old_gpu: np.ndarray) -> np.ndarray:
    """A full ``new_to_old`` from a partial server map and GPU map (``new_gpu[i] -> old_gpu[i]``):
    unassigned new servers take the unassigned old servers of their class in order, unmapped GPUs
    the free GPUs of the mapped server in order."""
    mapping = np.full(layout.num_gpus, -1, np.int64)
    mapping[new_gpu] = old_gpu
    key = layout.server_type * (int(layout.server_size.max(initial=0)) + 1) + layout.server_size
    old_of = old_of.copy()
    used = np.zeros(layout.num_servers, bool)
    used[old_of[old_of >= 0]] = True
    for k in np.unique(key).tolist():
        servers = np.flatnonzero(key == k)
        free_new = servers[old_of[servers] < 0]
        free_old = servers[~used[servers]]
        old_of[free_new] = free_old
    size = layout.server_size
    taken = np.zeros(layout.num_gpus, bool)
    taken[old_gpu] = True
    for b in np.flatnonzero(np.bincount(layout.gpu_server[mapping < 0] if (mapping < 0).any() else
                                        np.zeros(0, np.int64), minlength=layout.num_servers)).tolist():
        lo_b, a = int(layout.first_gpu[b]), int(old_of[b])
        lo_a = int(layout.first_gpu[a])
        seg = mapping[lo_b:lo_b + size[b]]
        seg[seg < 0] = lo_a + np.flatnonzero(~taken[lo_a:lo_a + size[a]])
    return mapping


def _fast_mapping(m: RelabelingModel) -> np.ndarray:
    lay = m.layout
    a, b, V, chosen = _pair_values(m)
    old_of = _server_assignment(lay.num_servers, a, b, V)
    ea, eb = m.old_server[m.edge_old], m.new_server[m.edge_new]
    use = chosen & (old_of[eb] == ea)
    # one edge per new part and per old part (duplicates: the two jobs of a kept pair)
    ne, oe = m.edge_new[use], m.edge_old[use]
    g_new, g_old = m.group_keys()
    _, first = np.unique(g_new[use], return_index=True)
    ne, oe = ne[first], oe[first]
    new_ids = _expand(m.new_start[ne], m.new_size[ne], m.new_gpu)
    old_ids = _expand(m.old_start[oe], m.old_size[oe], m.old_gpu)
    return _complete(lay, old_of, new_ids, old_ids)


def _expand(start: np.ndarray, size: np.ndarray, flat: np.ndarray) -> np.ndarray:
    """Concatenate ``flat[start_i : start_i + size_i]``."""
    idx = np.repeat(start - np.cumsum(np.r_[0, size[:-1]]), size) + np.arange(int(size.sum()))
    return flat[idx]


def job_exact_relabeling(previous: Placement, plan: Placement, costs: Mapping[str, float] | None = None,
                         *, baselines: Sequence[np.ndarray] | None = None) -> np.ndarray:
    """Job-exact two-level relabeling (module docstring); returns ``new_to_old``.

    Per server class, the best (by kept weight) of the fast mapping and the ``baselines`` (default:
    the simple rule's mapping and the identity, i.e. the plan as given; and Tesserae's mapping when
    some job is spread, where the fast method is a heuristic, on at most ``TESSERAE_MAX_SERVERS``
    servers), so the result never moves more
    (weighted) jobs than any of them: it starts from them and only accepts improvements.
    """
    from policyopt.placement.migration import simple_rule_relabeling, tesserae_relabeling

    m = RelabelingModel.build(previous, plan, costs)
    best = _fast_mapping(m)
    kb = _kept_per_type(m, best)
    if baselines is None and np.all(kb >= _candidate_weight_per_type(m) - 1e-9):
        return best  # every candidate is kept: no baseline can be strictly better
    if baselines is None:
        baselines = [simple_rule_relabeling(previous, plan), np.arange(plan.layout.num_gpus)]
        # the fast method is a heuristic for spread jobs: Tesserae's mapping competes too, on clusters
        # small enough for its dense servers x servers cost matrix
        if m.spread_jobs().size and plan.layout.num_servers <= TESSERAE_MAX_SERVERS:
            baselines.append(tesserae_relabeling(previous, plan))
    for base in baselines:
        base = np.asarray(base, np.int64)
        k = _kept_per_type(m, base)
        better = np.flatnonzero(k > kb + 1e-9)
        if better.size:
            best = np.where(np.isin(plan.layout.gpu_type, better), base, best)
            kb[better] = k[better]
    return best


def exact_relabeling(previous: Placement, plan: Placement, costs: Mapping[str, float] | None = None,
                     *, time_limit: float = 60.0) -> tuple[np.ndarray, float]:
    """The optimal relabeling by a MILP (HiGHS via :func:`scipy.optimize.milp`): ``(new_to_old, kept)``.

    Variables: ``y[a, b]`` (new server ``b`` -> old server ``a``, only for pairs sharing a job),
    ``z[e]`` (group edge ``e`` matched), ``k[j]`` (job ``j`` kept). Constraints: each server and each
    group matched at most once, ``z[e] <= y[a(e), b(e)]``, and for every new part ``i`` of job ``j``
    ``k[j] <= sum_{e of j at i} z[e]``. Maximize ``sum_j c_j k[j]``. Exact for any plan (spread
    jobs and pairs included); meant for small cases, to measure the fast method's gap.
    """
    m = RelabelingModel.build(previous, plan, costs)
    lay = m.layout
    if not m.edge_new.size:
        return _complete(lay, np.full(lay.num_servers, -1, np.int64), np.zeros(0, np.int64),
                         np.zeros(0, np.int64)), 0.0
    g_new, g_old = m.group_keys()
    ea, eb = m.old_server[m.edge_old], m.new_server[m.edge_new]
    pair_key, e_pair = np.unique(ea * lay.num_servers + eb, return_inverse=True)
    e_pair = e_pair.ravel()
    ge_key, e_ge = np.unique(np.stack([g_new, g_old], axis=1), axis=0, return_inverse=True)  # group edges
    e_ge = e_ge.ravel()
    P, Z, J = pair_key.size, len(ge_key), len(m.jobs)
    nv = P + Z + J
    pa, pb = pair_key // lay.num_servers, pair_key % lay.num_servers
    ze_pair = np.zeros(Z, np.int64)
    ze_pair[e_ge] = e_pair
    rows: list[sp.coo_matrix] = []
    ub: list[np.ndarray] = []

    def block(row_of: np.ndarray, col: np.ndarray, val: np.ndarray, n_rows: int, bound: np.ndarray) -> None:
        rows.append(sp.coo_matrix((val, (row_of, col)), shape=(n_rows, nv)))
        ub.append(bound)

    _, ra = np.unique(pa, return_inverse=True)
    block(ra.ravel(), np.arange(P), np.ones(P), int(ra.max()) + 1, np.ones(int(ra.max()) + 1))  # old server once
    _, rb = np.unique(pb, return_inverse=True)
    block(rb.ravel(), np.arange(P), np.ones(P), int(rb.max()) + 1, np.ones(int(rb.max()) + 1))  # new server once
    _, rn = np.unique(ge_key[:, 0], return_inverse=True)
    block(rn.ravel(), P + np.arange(Z), np.ones(Z), int(rn.max()) + 1, np.ones(int(rn.max()) + 1))  # new group once
    _, ro = np.unique(ge_key[:, 1], return_inverse=True)
    block(ro.ravel(), P + np.arange(Z), np.ones(Z), int(ro.max()) + 1, np.ones(int(ro.max()) + 1))  # old group once
    # z[e] - y[pair(e)] <= 0
    block(np.r_[np.arange(Z), np.arange(Z)], np.r_[P + np.arange(Z), ze_pair], np.r_[np.ones(Z), -np.ones(Z)],
          Z, np.zeros(Z))
    # k[j] - sum_{edges of j at new part i} z <= 0, one row per new part
    n_new = m.new_job.size
    block(np.r_[np.arange(n_new), m.edge_new], np.r_[P + Z + m.new_job, P + e_ge],
          np.r_[np.ones(n_new), -np.ones(m.edge_new.size)], n_new, np.zeros(n_new))
    A = sp.vstack(rows).tocsr()
    c = np.zeros(nv)
    c[P + Z:] = -m.weight
    res = milp(c, constraints=LinearConstraint(A, -np.inf, np.concatenate(ub)), integrality=np.ones(nv),
               bounds=Bounds(0, 1), options={"time_limit": time_limit})
    if res.x is None:
        raise InputError("exact_relabeling", res.message, "the MILP found no solution within the time limit")
    x = np.round(res.x).astype(bool)
    old_of = np.full(lay.num_servers, -1, np.int64)
    old_of[pb[x[:P]]] = pa[x[:P]]
    zsel = x[P:P + Z]
    # one edge per matched group edge: map the new part's GPUs onto the old part's
    first = np.full(Z, -1, np.int64)
    first[e_ge[::-1]] = np.arange(e_ge.size)[::-1]
    es = first[zsel]
    new_ids = _expand(m.new_start[m.edge_new[es]], m.new_size[m.edge_new[es]], m.new_gpu)
    old_ids = _expand(m.old_start[m.edge_old[es]], m.old_size[m.edge_old[es]], m.old_gpu)
    mapping = _complete(lay, old_of, new_ids, old_ids)
    return mapping, float(m.weight[x[P + Z:]].sum())
