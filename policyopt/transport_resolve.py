"""Max-sum throughput's re-solves after its class transportation LP, in class totals, from the kept basis.

A policy's first problem of repeated jobs is answered by :mod:`policyopt.class_transport`: the
transportation LP over the job classes (``m_g`` jobs of class ``g``, per-type values ``V_gk``,
scale factor ``s_g``, capacities ``C_k``). In the class totals ``y_gk = m_g x_gk`` it reads

.. math::  \\max \\sum_{g,k} V_{gk}\\, y_{gk} \\quad\\text{s.t.}\\quad \\sum_k y_{gk} \\le m_g \\;(u_g),\\quad
           \\sum_g s_g\\, y_{gk} \\le C_k \\;(p_k),\\quad y \\ge 0

(columns where ``V_gk > 0``): the counts enter only the right-hand side ``b = (m, C)``. A basis
``B`` (columns of ``[A, I]``, its nonbasic columns and slacks at 0) has basic values
``z_B = B⁻¹ b`` — linear in ``m`` — and multipliers that do not depend on ``m`` at all. So after
an arrival or a completion (a change of ``m``) the kept basis gives the new point with one
product ``z = Z (m, 1)`` (the basic columns' values as a map of the counts, made once from the
basis by :meth:`ClassBasis.take`: a row whose slack is basic takes it alone, a tight class row with
one basic column gives it ``m_g``, a small block solves the rest), and it is optimal exactly when
that point is feasible (``z ≥ 0`` and every row within its bound).

*Certificate* (of every answer, recomputed from the point): ``y ≥ 0``, every class row
``Σ_k y_gk ≤ m_g`` and capacity row ``Σ_g s_g y_gk ≤ C_k`` to 1e-9 (relative to the bound, at least 1),
and, with the kept prices ``p ≥ 0`` and ``u_g = max(0, max_k V_gk − s_g p_k)`` (dual feasible for
every column of the whole LP, :mod:`policyopt.solvers.transport`), the Lagrangian bound
``u·m + C·p`` equal to the objective ``Σ V·y`` to 1e-9 relative. In the class LP's own terms
(``x = y/m``) this is :func:`policyopt.solvers.transport.certify`'s certificate, which is the whole
LP's (:mod:`policyopt.class_transport`).

A re-solve (:func:`solve`) matches the new problem's jobs to the kept ones by the common prefix and
suffix of their ids (their data compared at once; where the new problem holds the kept ``Job``
objects around one changed block, by the job tuples alone; where it was made by
:meth:`~policyopt.problem.Problem.with_jobs` from the kept problem or from the problem the kept one
was made from, by the ends that call recorded, with no list compared: :meth:`ClassBasis._ends`), finds the
class of each other job by its data, recounts ``m`` from the changed jobs only, answers from the
kept basis, and gathers the class rows into the result
(:meth:`~policyopt.policy.Policy.class_result`): no modeling layer, no compiled form, no HiGHS run.
Where the kept basis's point is infeasible or not certified, or jobs of data no class has arrived
(new classes appended), the class LP is solved at the new counts
(:func:`policyopt.solvers.transport.solve`: the exact route from the kept capacity prices, else
HiGHS) and its basis is kept instead. A change of the policy's
options, of the cluster or its configurations, a space the route does not take
(:func:`policyopt.incremental.eligible`), or a class LP HiGHS does not certify: ``None`` (the state
is dropped and the policy solves as before, building its kept model).
"""
from __future__ import annotations

import threading
import time
import weakref
from typing import Any

import numpy as np

from ._aggregate_counts import data_keys
from ._aggregate_parts import common_ends
from .allocation import AllocationSpace
from .problem import JobChanges, Problem
from .problem_records import recorded_ends
from .result import PolicyResult, Status, Timings
from .solvers import transport

__all__ = ["ClassBasis", "answered", "forget", "keep", "kept", "solve"]

#: feasibility and optimality tolerance of the certificate (relative), the transportation LP's
TOL = transport.TOL

_KEPT: "weakref.WeakKeyDictionary[Any, ClassBasis]" = weakref.WeakKeyDictionary()


class ClassBasis:
    """A policy's job classes (their data, rows and per-type values), the last problem's jobs and
    their classes, and one basis of the class totals' LP (module docstring)."""

    # (set by :meth:`_prepare` and :meth:`take`)
    rep_T: np.ndarray
    rep_scale: np.ndarray
    rep_weights: np.ndarray
    s: np.ndarray
    bg: np.ndarray
    bk: np.ndarray
    u: np.ndarray
    p: np.ndarray
    _b: np.ndarray
    _sb: np.ndarray
    _vb: np.ndarray
    _bbest: np.ndarray
    _cp: float
    _cap: np.ndarray

    def __init__(self, policy: Any, space: AllocationSpace, group: np.ndarray,
                 rep: tuple[np.ndarray, np.ndarray, np.ndarray],
                 mask: np.ndarray, eq_share: np.ndarray, V: np.ndarray, best: np.ndarray, m: np.ndarray,
                 ans: Any) -> None:
        self.config = dict(policy.config)
        self.variants, self.counts = space._variants, space.counts  # (the cluster's arrays: same object, same cluster)
        self.C = space.counts
        self.ids, self.group = space.jobs.labels, group
        self.jobs: tuple[Any, ...] = space.problem.jobs  # (the kept jobs: :meth:`_ends`)
        self.changes: JobChanges | None = space.problem.job_changes  # (how they were made, if recorded)
        self.T, self.scale, self.weights = space.T, space.scale, space.weights
        self.mask, self.eq_share, self.V, self.best = mask, eq_share, V, best
        self.m = m
        self.lock = threading.Lock()
        self._keys: dict[bytes, int] | None = None
        self.M: np.ndarray | None = None  # the basis's map (:meth:`take`)
        #: problems answered from the kept basis / by a HiGHS run on the class LP
        self.answers = 0
        self.runs = 0
        self._prepare(space.row_scale, rep, ans)

    def _prepare(self, row_scale: np.ndarray, rep: tuple[np.ndarray, np.ndarray, np.ndarray], ans: Any) -> None:
        """The classes' data, scale factors and keys, and the kept basis's map (:meth:`take`, from
        the columns and multipliers the solve computed). (Made with the first problem's answer, not
        at the first re-solve: both were measured, see docs/solvers-class-resolves.md, "Re-solves from the
        class transportation LP's basis".)"""
        at, self.rep_T, self.rep_scale = rep
        self.rep_weights, self.s = self.weights.take(at), row_scale.take(at)
        self._cap = self.C + TOL * np.maximum(self.C, 1.0)
        self._class_keys()
        self.take(ans.basic, ans.p, self.m, ans.cols, ans.y)

    # ------------------------------------------------------------------ the basis
    def take(self, basic: np.ndarray | None, p: np.ndarray, m: np.ndarray,
             cols: tuple[np.ndarray, np.ndarray] | None = None, y: np.ndarray | None = None) -> bool:
        """Keep the basis ``basic`` (HiGHS's encoding, :class:`~policyopt.solvers.transport.TransportAnswer`)
        of the class LP solved at the counts ``m`` (its columns: ``V_gk m_g > 0``, as ``cols`` where
        the solve gave them), with prices ``p`` and the solve's multipliers ``y``
        (``y_g = max(0, max_k m_g (V_gk − s_g p_k))``, so ``u_g = y_g / m_g`` where every ``m_g > 0``);
        ``False`` (none kept) where it is not a basis of the totals' LP or its kernel is singular.

        The basic values as a linear map of ``(m, 1)``, ``z = Z (m, 1)``: a tight class row (slack
        nonbasic) with one basic column gives it ``y = m_g`` (most classes: one column, all their
        jobs on one type); the other basic columns solve the remaining tight rows — the tight class
        rows with several basic columns (``= m_g``) and the tight capacity rows (``= C_k`` less the
        single columns' ``s_g m_g``) — by the inverse of that small block (a handful of rows)."""
        self.M = None
        V, s = self.V, self.s
        G, K = V.shape
        if basic is None or basic.size != G + K:
            return False
        if cols is None:
            jj, kk = np.nonzero((V > 0) & (m > 0)[:, None])  # (the solve's columns, job-major)
        else:
            jj, kk = cols
        # (the basis has a few dozen columns: read as Python lists, not by ~40 small numpy calls,
        # each of whose first use in a process costs 5–15 µs)
        bl = basic.tolist()
        at = [c for c in bl if c >= 0]
        nb = len(at)
        if nb and max(at) >= jj.size:
            return False
        bg, bk = jj.take(at), kk.take(at)
        gl, kl = bg.tolist(), bk.tolist()
        tight = [True] * (G + K)
        for c in bl:
            if c < 0:
                tight[-1 - c] = False
        cnt = [0] * G
        for g in gl:
            cnt[g] += 1
        # (no other check of the basis: a map that is not its solution fails the certificate)
        single = [tight[g] and cnt[g] == 1 for g in gl]
        rc = [i for i in range(nb) if not single[i]]
        r_cls = sorted({g for g in gl if cnt[g] > 1 and tight[g]})
        r_cap = [k for k in range(K) if tight[G + k]]
        nc, r = len(r_cls), len(r_cls) + len(r_cap)
        if r != len(rc):
            return False
        at_cls = {g: i for i, g in enumerate(r_cls)}
        at_cap = {k: nc + i for i, k in enumerate(r_cap)}
        sl = s.tolist()
        A = [[0.0] * r for _ in range(r)]  # the remaining tight rows × the other basic columns
        for j, c in enumerate(rc):
            g = gl[c]
            i = at_cls.get(g)
            if i is not None:
                A[i][j] = 1.0
            i = at_cap.get(kl[c])
            if i is not None:
                A[i][j] = sl[g]
        W = _inverse_rows(A)
        if W is None:
            return False
        # The other basic columns' map W R, R the remaining rows' right-hand sides as maps of
        # (m, 1): a tight class row i reads m_g (R's column g: 1), a tight capacity row C_k less its
        # single columns' s_g m_g (column G: C_k; column g: −s_g). Each of R's columns has one
        # entry (a class is either several columns' or a single column's, one type), so W R is
        # W's columns scaled and placed: no product.
        n1 = G + 1  # (Z's entries as flat positions and values)
        zi = [i for i in range(nb) if single[i]]
        zf = [i * n1 + gl[i] for i in zi]
        zv = [1.0] * len(zi)
        cg = [gl[i] for i in zi if kl[i] in at_cap]  # (single columns on tight capacity rows)
        ci = [(at_cap[kl[i]], -sl[gl[i]]) for i in zi if kl[i] in at_cap]
        Cl = self.C.tolist()
        cr = [Cl[k] for k in r_cap]
        for j, c in enumerate(rc):
            w, at0 = W[j], c * n1
            zf += [at0 + g for g in r_cls]
            zv += w[:nc]
            zf.append(at0 + G)
            zv.append(sum(wt * ct for wt, ct in zip(w[nc:], cr)))
            zf += [at0 + g for g in cg]
            zv += [w[i] * ns for i, ns in ci]
        Z = np.zeros(nb * n1)
        Z[zf] = zv
        Z = Z.reshape(nb, n1)
        pl = [max(v, 0.0) for v in p.tolist()]
        p = np.array(pl)
        if y is not None and y.size == G and 0.0 not in m.tolist():
            u = y / m  # (the solve's multipliers per job: to rounding, the formula below)
        else:
            u = np.maximum((V - np.multiply.outer(s, p)).max(axis=1), 0.0)  # (−inf rows: no column, 0)
        self.M, self.bg, self.bk, self.u, self.p = Z, bg, bk, u, p
        self._b = np.empty(n1)  # (:meth:`answer` sets its first G entries)
        self._b[G] = 1.0
        self._sb, self._vb, self._cp = s.take(bg), V[bg, bk], float(sum(c * v for c, v in zip(Cl, pl)))
        self._bbest = self.best[bg, bk]
        return True

    def answer(self, m: np.ndarray) -> tuple[np.ndarray, float] | None:
        """The basic columns' totals ``z`` (at the classes :attr:`bg` and types :attr:`bk`; every
        other column is 0) at the counts ``m`` from the kept basis, with their objective, or
        ``None`` unless certified (module docstring): ``y ≥ 0`` (the basic values clipped at 0),
        every row within its bound and the bound ``u·m + C·p`` equal to ``Σ V·y``."""
        M = self.M
        if M is None:
            return None
        b = self._b
        G = m.size
        b[:G] = m
        z = M @ b
        np.maximum(z, 0.0, out=z)
        cnz = np.count_nonzero  # (in C; ndarray.all goes through a Python wrapper)
        if cnz(m) != G:
            z[m.take(self.bg) == 0] = 0.0  # (a class without jobs: its row's bound is 0)
        # (every row counted as within its bound, each test true only for numbers: a NaN fails it)
        if cnz(np.bincount(self.bg, z, G) <= m + TOL * np.maximum(m, 1.0)) != G:
            return None
        K = self._cap.size
        if cnz(np.bincount(self.bk, z * self._sb, K) <= self._cap) != K:
            return None
        obj = float(z @ self._vb)
        bound = float(self.u @ m) + self._cp
        if not abs(bound - obj) <= TOL * max(1.0, abs(obj)):
            return None
        return z, obj

    def run(self, m: np.ndarray, threads: int | None) -> tuple[np.ndarray, float] | None:
        """The class LP at the counts ``m`` solved (:func:`policyopt.solvers.transport.solve`: the
        exact primal–dual route started from the kept capacity prices :attr:`p`, a start only —
        its certificate decides —, else HiGHS), its basis kept and the answer read from it
        (:meth:`answer`), or ``None``."""
        self.runs += 1
        Vm = np.full(self.V.shape, -np.inf)  # (a class without jobs: no column; −inf·0 would be NaN)
        np.multiply(self.V, m[:, None], out=Vm, where=(m > 0)[:, None])
        ans = transport.solve(Vm, self.s * m, self.C, threads, start=self.p)
        if ans is None or not self.take(ans.basic, ans.p, m, ans.cols, ans.y):
            return None
        return self.answer(m)

    # ------------------------------------------------------------------ the classes
    def _class_keys(self) -> dict[bytes, int]:
        """Each class's data (throughputs, scale factor, weight) as bytes → the class."""
        keys = self._keys
        if keys is None:
            keys = self._keys = data_keys(self.rep_T, self.rep_scale, self.rep_weights)
        return keys

    def classes_of(self, space: AllocationSpace, a: int, b: int, normalize: bool) -> np.ndarray | None:
        """The class of each job ``a … b−1`` of ``space``: the class of equal data (a few jobs looked
        up by their data's bytes — equal bytes, equal data; otherwise compared as numbers with every
        class's), else a new class (appended, its rows and per-type values computed; the kept basis
        dropped). ``None`` where a new class has a type of infinite value (a zero equal share)."""
        if b == a:
            return np.zeros(0, np.int64)
        T, scale, weights = space.T, space.scale, space.weights
        if b - a <= 8:  # (each job's bytes from one-row slices: no sliced arrays, no scalars)
            keys = self._class_keys()
            got = [keys.get(T[i:i + 1].tobytes() + scale[i:i + 1].tobytes() + weights[i:i + 1].tobytes())
                   for i in range(a, b)]
            if None not in got:
                return np.array(got, np.int64)
        T, scale, weights = T[a:b], scale[a:b], weights[a:b]
        eq = (T[:, None, :] == self.rep_T[None, :, :]).all(axis=2)
        eq &= scale[:, None] == self.rep_scale[None, :]
        eq &= weights[:, None] == self.rep_weights[None, :]
        found = eq.argmax(axis=1)
        new = (~eq.any(axis=1)).nonzero()[0]
        if new.size:
            data = np.concatenate([T[new], scale[new, None], weights[new, None]], axis=1)
            _, first, inverse = np.unique(data, axis=0, return_index=True, return_inverse=True)
            G = self.V.shape[0]
            if not self._append(space, a + new[first], normalize):
                return None
            found[new] = G + inverse.ravel()
        return found

    def _append(self, space: AllocationSpace, at: np.ndarray, normalize: bool) -> bool:
        """Append the classes of the jobs at ``at`` (distinct data, no class has it): their mask rows,
        equal shares and per-type values, computed as :mod:`policyopt.class_transport` does."""
        T, scale = space.T.take(at, axis=0), space.scale.take(at)
        mask, eq_share = space.class_rows(T, scale)
        values = T / eq_share[:, None] if normalize else T
        V, best = transport.per_type(values, mask, space.config_type, len(space.worker_types))
        if not np.isfinite(V[V > -np.inf]).all():
            return False
        self.rep_T = np.concatenate([self.rep_T, T])
        self.rep_scale = np.concatenate([self.rep_scale, scale])
        self.rep_weights = np.concatenate([self.rep_weights, space.weights.take(at)])
        self.mask = np.concatenate([self.mask, mask])
        self.eq_share = np.concatenate([self.eq_share, eq_share])
        self.V, self.best = np.concatenate([self.V, V]), np.concatenate([self.best, best])
        self.s = np.concatenate([self.s, space.row_scale.take(at)])
        self.m = np.concatenate([self.m, np.zeros(at.size)])
        self._keys = None
        self.M = None
        return True

    def match(self, space: AllocationSpace, normalize: bool) -> tuple[np.ndarray, np.ndarray] | None:
        """Each job's class in ``space`` and the classes' counts: the common prefix and suffix of the
        jobs keep their classes where their data equal the kept ones' (:meth:`_ends`), every other
        job is found by its data (:meth:`classes_of`); the counts change by the jobs between them."""
        ids = space.jobs.labels
        n, S = len(ids), len(self.ids)
        p, q, same = self._ends(space, space.problem.jobs)
        if not same:  # (kept jobs' data changed: every job by its data)
            p = q = 0
        mid = self.classes_of(space, p, n - q, normalize)
        if mid is None:
            return None
        group = np.concatenate([self.group[:p], mid, self.group[S - q:]])
        G = self.V.shape[0]
        if not same:
            return group, np.bincount(group, minlength=G).astype(np.float64)
        gone = self.group[p:S - q]
        if mid.size + gone.size > 16:
            return group, self.m + np.bincount(mid, minlength=G) - np.bincount(gone, minlength=G)
        m = self.m.copy()  # (a few jobs: their classes' counts one by one)
        for g in mid.tolist():
            m[g] += 1.0
        for g in gone.tolist():
            m[g] -= 1.0
        return group, m

    def _ends(self, space: AllocationSpace, jobs: tuple[Any, ...]) -> tuple[int, int, bool]:
        """The common prefix and suffix ``p``, ``q`` of the kept jobs and ``jobs`` (``space``'s), and
        whether the jobs there hold the kept data.

        Jobs appended to the kept ones, or the last kept ones gone (a scheduler's next problem made
        from the last one's :class:`~policyopt.problem.Job` objects, :meth:`Problem.with_jobs`), are
        found from the records of how the problems were made
        (:func:`~policyopt.problem_records.recorded_ends`) or by comparing the job tuples (``tuple
        ==``, in C: the same object is equal at once, two distinct ones are compared as jobs, all
        their fields): equal jobs hold equal data — a
        problem's arrays are read from its jobs, which are frozen, and the kept arrays are for the
        same configurations (:func:`solve` checks the cluster arrays). No id or data array is
        read then. One block changed elsewhere: the same by :func:`_same_job_ends`. Otherwise the
        ids' common ends (:func:`~policyopt._aggregate_parts.common_ends`)
        and the data there compared as numbers with the kept ones."""
        kj = self.jobs
        n, S = len(jobs), len(kj)
        got = recorded_ends(kj, self.changes, jobs, space.problem.job_changes)
        if got is not None:
            return got[0], got[1], True
        # (the ends compared by identity first: a rebuilt job list does not pay the jobs' __eq__)
        if n >= S and jobs[S - 1] is kj[-1] and jobs[0] is kj[0] and jobs[:S] == kj:
            return S, 0, True  # (arrivals appended)
        if n < S and jobs[-1] is kj[n - 1] and jobs[0] is kj[0] and jobs == kj[:n]:
            return n, 0, True  # (the last jobs gone)
        got = _same_job_ends(kj, jobs)
        if got is not None:
            return got[0], got[1], True
        p, q = common_ends(self.ids, space.jobs.labels)
        T, scale, weights = space.T, space.scale, space.weights
        kT, ks, kw = self.T, self.scale, self.weights
        cnz = np.count_nonzero
        same = not (p and (cnz(T[:p] != kT[:p]) or cnz(scale[:p] != ks[:p]) or cnz(weights[:p] != kw[:p]))
                    or q and (cnz(T[n - q:] != kT[S - q:]) or cnz(scale[n - q:] != ks[S - q:])
                              or cnz(weights[n - q:] != kw[S - q:])))
        return p, q, same


def _same_job_ends(old: tuple[Any, ...], new: tuple[Any, ...]) -> tuple[int, int] | None:
    """A common prefix ``p`` and suffix ``q`` (``p + q ≤ min(len(old), len(new))``) of the job tuples
    ``old`` and ``new`` where one block of jobs changed between them (jobs completed or arrived in
    one place), or ``None``. The ends of the same objects are found by bisection on identity (a
    few dozen ``is`` tests, assuming one changed block), then the tuples' ends compared (``tuple
    ==``: identity in C; distinct objects compared as jobs); ``None`` where a spot check of the
    ends finds another object (jobs rebuilt: no costly comparison of distinct jobs) or they
    differ. Any ``p``, ``q`` returned are common ends (checked), not always the longest."""
    n, S = len(new), len(old)
    L = min(n, S)
    if not L or (new[0] is not old[0] and new[-1] is not old[-1]):
        return None
    lo, hi = 0, L  # (the first position not the same object, if the same ones come first)
    while lo < hi:
        mid = (lo + hi) // 2
        if new[mid] is old[mid]:
            lo = mid + 1
        else:
            hi = mid
    p = lo
    lo, hi = 0, L - p  # (the same from the end)
    while lo < hi:
        mid = (lo + hi) // 2
        if new[n - 1 - mid] is old[S - 1 - mid]:
            lo = mid + 1
        else:
            hi = mid
    q = lo
    if (any(new[i] is not old[i] for i in range(0, p, max(1, p // 8)))
            or any(new[n - 1 - i] is not old[S - 1 - i] for i in range(0, q, max(1, q // 8)))):
        return None
    if (p and new[:p] != old[:p]) or (q and new[n - q:] != old[S - q:]):
        return None
    return p, q


#: up to this size the small block is inverted in Python (no LAPACK call: its first call in a
#: process costs ~0.13 ms, the whole block's inverse here a few µs)
_SMALL = 8


def _inverse_rows(a: list[list[float]]) -> list[list[float]] | None:
    """The inverse of the square matrix of rows ``a`` (changed in place), or ``None`` where it is
    singular: Gauss–Jordan with partial pivoting on Python floats up to :data:`_SMALL` rows (a
    row's elimination skipped where its entry is 0: the block is sparse), ``numpy.linalg.inv``
    above."""
    r = len(a)
    if r > _SMALL:
        try:
            return np.linalg.inv(np.array(a).reshape(r, r)).tolist()
        except np.linalg.LinAlgError:
            return None
    inv = [[0.0] * r for _ in range(r)]
    for i in range(r):
        inv[i][i] = 1.0
    rr = range(r)
    for c in rr:
        piv, best = c, abs(a[c][c])
        for i in range(c + 1, r):
            v = abs(a[i][c])
            if v > best:
                piv, best = i, v
        if best == 0.0:
            return None
        if piv != c:
            a[c], a[piv] = a[piv], a[c]
            inv[c], inv[piv] = inv[piv], inv[c]
        ac, ic = a[c], inv[c]
        f = 1.0 / ac[c]
        for t in rr:
            ac[t] *= f
            ic[t] *= f
        for i in rr:
            ai = a[i]
            h = ai[c]
            if i != c and h != 0.0:
                ii = inv[i]
                for t in rr:
                    ai[t] -= h * ac[t]
                    ii[t] -= h * ic[t]
    return inv


def _inverse(A: np.ndarray) -> np.ndarray | None:
    """``A⁻¹`` (square) by :func:`_inverse_rows`, or ``None`` where ``A`` is singular."""
    r = A.shape[0]
    W = _inverse_rows(A.tolist())
    return None if W is None else np.array(W).reshape(r, r)


def keep(policy: Any, space: AllocationSpace, group: np.ndarray, rep: tuple[np.ndarray, np.ndarray, np.ndarray],
         mask: np.ndarray, eq_share: np.ndarray, V: np.ndarray, best: np.ndarray, m: np.ndarray, ans: Any) -> None:
    """Keep ``policy``'s classes and the basis of the class LP's certified answer ``ans``
    (:func:`policyopt.solvers.transport.solve` at the counts ``m``) for its re-solves. ``rep``: each
    class's first job, and its throughputs and scale factor (``space.T`` and ``space.scale`` at those
    jobs, as the caller took them)."""
    _KEPT[policy] = ClassBasis(policy, space, group, rep, mask, eq_share, V, best, m, ans)


def kept(policy: Any) -> ClassBasis | None:
    """The classes and basis kept for ``policy`` (``None`` if none)."""
    return _KEPT.get(policy)


def forget(policy: Any) -> None:
    """Drop what is kept for ``policy``."""
    _KEPT.pop(policy, None)


def answered(policy: Any) -> tuple[int, int]:
    """How many of ``policy``'s re-solves were answered from the kept basis, and by a HiGHS run."""
    st = _KEPT.get(policy)
    return (st.answers, st.runs) if st is not None else (0, 0)


def solve(policy: Any, problem: Problem) -> PolicyResult | None:
    """``policy``'s result on ``problem`` from its kept classes and basis, or ``None`` (the state
    dropped where it no longer applies; module docstring)."""
    st = _KEPT.get(policy)
    if st is None or not st.lock.acquire(blocking=False):
        return None
    try:
        t0 = time.perf_counter()
        cfg = policy.config
        space = policy.make_space(problem)
        # (the options as kept, where incremental.eligible held: the space's type and the cluster
        # arrays are what a problem may change)
        if (cfg != st.config or type(space) is not AllocationSpace or space._variants is not st.variants
                or space.counts is not st.counts or space.num_pairs or not len(space.jobs)):
            _KEPT.pop(policy, None)
            return None
        got = st.match(space, bool(cfg["normalize"]))
        if got is None:
            _KEPT.pop(policy, None)
            return None
        group, m = got
        t1 = time.perf_counter()
        ans = st.answer(m)
        if ans is None:
            ans = st.run(m, cfg["threads"])
            if ans is None:
                _KEPT.pop(policy, None)
                return None
        else:
            st.answers += 1
        z, obj = ans
        t2 = time.perf_counter()
        st.ids, st.group, st.m, st.jobs = space.jobs.labels, group, m, space.problem.jobs
        st.changes = space.problem.job_changes
        st.T, st.scale, st.weights = space.T, space.scale, space.weights
        x = z / np.maximum(m.take(st.bg), 1.0)  # (counts are whole; a class without jobs: z = 0)
        np.minimum(x, 1.0, out=x)  # (a class row within 1e-9 of its bound: at most 1)
        x += 0.0  # (−0.0 reads 0.0)
        Xc = np.zeros(st.mask.shape)
        Xc[st.bg, st._bbest] = x  # (z ≥ 0, no NaN (certified), each on a configuration its mask allows)
        space.declare_classes(group, st.mask, st.eq_share)
        timings = Timings(build=t1 - t0, solve=t2 - t1, extract=time.perf_counter() - t2)
        return policy.class_result(space, Xc, Status.OPTIMAL, obj, "highs", timings, clipped=True, certified=True)
    finally:
        st.lock.release()
