"""Make a policy's allocation packable: realizable by rounds in which every job holds all its GPUs.

A policy's LP bounds each type's *average* GPU use, ``Σ_j X[j, t]·g_j ≤ C_t``, but in a round a
job runs on all ``g_j`` of its GPUs or on none. An ``X`` can therefore be unrealizable: with
``C_v100 = 4``, a 4-GPU job at ``X = 0.5`` and a 2-GPU job at ``X = 1`` on v100 fit on average
(``2 + 2 = 4``), yet in every round that the 4-GPU job runs the 2-GPU job cannot. The round
mechanism then falls behind on some job by a little every round, without bound.

:func:`packable_allocation` replaces ``X`` by the nearest allocation ``Y`` that *is* realizable,
a mixture of round configurations. A configuration ``A`` runs each job on at most one type, and
each type's jobs fit its GPUs at once (``Σ_{j on t} g_j ≤ C_t``); with ``λ_A ≥ 0`` its share of
the rounds::

    Y = Σ_A λ_A · A        Σ_A λ_A ≤ 1

LPs solved with HiGHS, lexicographically:

1. ``max s`` s.t. every job keeps a fraction ``s`` of the throughput the policy gave it,
   ``Σ_t T[j, t]·Y[j, t] ≥ s · Σ_t T[j, t]·X[j, t]``, ``s ≤ 1`` (max-min and finish-time fairness
   are made of these throughputs);
2. ``min Σ_{j,t} g_j·|Y[j, t] - X[j, t]|`` at that ``s``: the packable allocation closest to ``X``;
3. with ``fill`` (work conservation): ``max Σ_{j,t} g_j·Y[j, t]`` s.t. ``Y`` at least stage 2's,
   on the (job, type) entries where ``X`` or stage 2's ``Y`` is positive: GPUs the rounds leave
   idle go to jobs, none is taken away.

When ``X`` is packable, ``s = 1`` and stage 2 returns ``Y = X``. Configurations are generated as
needed (column generation): the pricing problem, the configuration of largest value for the LP's
duals, is a small assignment MILP (each job on at most one type, each type a knapsack over the
jobs' GPU counts) solved exactly by HiGHS. The configurations with ``λ > 0`` (and an idle one for
the rest) are returned with ``Y``; :mod:`policyopt.slurm.schedule` runs them round by round.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import highspy
import numpy as np
import scipy.sparse as sp
from scipy.optimize import linprog
from scipy.sparse import csc_matrix, csr_matrix

from policyopt.errors import InputError
from policyopt.solvers.highs import silence_banner

__all__ = ["PackableAllocation", "packable_allocation"]

#: fractions below this are solver noise (a millionth of a round)
EPS = 1e-6


@dataclass(frozen=True)
class PackableAllocation:
    """``allocation``: job -> type -> ``Y``; ``throughput_kept``: the ``s`` of stage 1 (1 when
    ``X`` was packable), or the smallest ``Σ_t thr·Y / Σ_t thr·X`` over the jobs where the entries
    and shares below ``EPS`` dropped from ``Y`` take a job below it; ``configurations``:
    ``(((job, type), ...), λ)`` with ``λ > 0``, rounds that fit and their shares (``Σ λ = 1``;
    ``()`` is an idle round), ``Y = Σ λ·configuration``; ``changed``: whether stages 1-2 changed
    ``X`` (stage 3 only adds)."""

    allocation: dict[str, dict[str, float]]
    throughput_kept: float
    configurations: list[tuple[tuple[tuple[str, str], ...], float]] = field(default_factory=list)
    changed: bool = False


def _price(w: np.ndarray, allowed: np.ndarray, scale: np.ndarray, capacity: np.ndarray) -> tuple[float, list[int]]:
    """The round configuration of largest total value: ``max Σ w[j, t]·z[j, t]`` over binary
    ``z`` with ``Σ_t z[j, t] ≤ 1`` and ``Σ_j g_j z[j, t] ≤ C_t`` (a HiGHS MILP); its value and
    its entries as flat indices ``j·C + t``."""
    n, nc = w.shape
    use = np.flatnonzero((allowed & (w > 1e-12)).ravel())
    if use.size == 0:
        return 0.0, []
    jobs, types = np.divmod(use, nc)
    rows = np.concatenate([jobs, n + types])
    cols = np.concatenate([np.arange(use.size), np.arange(use.size)])
    vals = np.concatenate([np.ones(use.size), scale[jobs].astype(float)])
    a = csc_matrix((vals, (rows, cols)), shape=(n + nc, use.size))
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = int(use.size), n + nc
    lp.col_cost_ = -w.ravel()[use]
    lp.col_lower_, lp.col_upper_ = np.zeros(use.size), np.ones(use.size)
    lp.row_lower_ = np.full(n + nc, -highspy.kHighsInf)
    lp.row_upper_ = np.concatenate([np.ones(n), capacity.astype(float)])
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = a.indptr, a.indices, a.data
    lp.integrality_ = [highspy.HighsVarType.kInteger] * int(use.size)
    silence_banner()
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    h.run()
    if h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        raise RuntimeError(f"packing: pricing MILP ended {h.modelStatusToString(h.getModelStatus())}")
    chosen = use[np.asarray(h.getSolution().col_value) > 0.5]
    return float(w.ravel()[chosen].sum()), chosen.tolist()


class _Master:
    """The restricted master LPs over the round configurations found so far (module docstring).

    A configuration is a set of entries ``(j, t)`` (flat index ``j·C + t``), each job at most
    once, each type within its GPUs; ``λ`` its share of the rounds, ``Y = Σ λ·A``."""

    def __init__(self, x: np.ndarray, thr: np.ndarray, scale: np.ndarray, capacity: np.ndarray) -> None:
        self.x, self.thr, self.scale, self.capacity = x, thr, scale, capacity
        self.n, self.nc = x.shape
        self.rho = (thr * x).sum(axis=1)  # each job's throughput under X
        self.allowed = thr > 0
        self.cols: list[tuple[int, ...]] = []
        self.seen: set[tuple[int, ...]] = set()
        n, nc = self.n, self.nc
        # T: job j's throughput as a row over the flat entries
        self.tmat = csr_matrix((thr.ravel(), (np.repeat(np.arange(n), nc), np.arange(n * nc))), shape=(n, n * nc))

    def add(self, entries: Sequence[int]) -> bool:
        key = tuple(sorted(entries))
        if not key or key in self.seen:
            return False
        self.seen.add(key)
        self.cols.append(key)
        return True

    def _a_y(self) -> csr_matrix:
        lens = np.fromiter((len(c) for c in self.cols), np.int64, len(self.cols))
        flat = np.fromiter((e for c in self.cols for e in c), np.int64, int(lens.sum()))
        return csr_matrix((np.ones(flat.size), (flat, np.repeat(np.arange(len(self.cols)), lens))),
                          shape=(self.n * self.nc, len(self.cols)))

    def solve(self, stage: int, s_min: float = 0.0, y_min: np.ndarray | None = None
              ) -> tuple[np.ndarray, float, np.ndarray, float]:
        """Stage 1 (max s), 2 (min Σ g|Y - X| at s ≥ s_min) or 3 (max Σ g·Y at Y ≥ y_min). Returns
        λ, s, the pricing weight of each entry (the LP's duals: a new configuration improves when
        the weights of its entries plus the last value exceed 0) and the dual of Σ λ ≤ 1."""
        n, nc, m = self.n, self.nc, len(self.cols)
        ne = n * nc
        a_y = self._a_y()
        g = np.repeat(self.scale.astype(float), nc)
        one = csr_matrix(np.ones((1, m)))
        if stage == 3:
            assert y_min is not None
            a_ub = sp.vstack([one, -a_y]).tocsr()
            b_ub = np.concatenate([[1.0], -y_min.ravel()])
            res = linprog(-(a_y.T @ g), A_ub=a_ub, b_ub=b_ub, bounds=(0, None), method="highs")
            if res.status != 0:
                raise RuntimeError(f"packing LP (stage 3) failed: {res.message}")
            d = res.ineqlin.marginals
            return res.x, 1.0, (g - d[1:]).reshape(n, nc), float(d[0])
        # variables: λ (m), s, d+ (ne), d- (ne)
        z = csr_matrix((n, ne))
        a_ub = sp.vstack([sp.hstack([one, csr_matrix((1, 1 + 2 * ne))]),
                          sp.hstack([-(self.tmat @ a_y), csr_matrix(self.rho[:, None]), z, z])]).tocsr()
        b_ub = np.concatenate([[1.0], np.zeros(n)])
        a_eq = sp.hstack([a_y, csr_matrix((ne, 1)), -sp.identity(ne), sp.identity(ne)]).tocsr()
        c = np.zeros(m + 1 + 2 * ne)
        lo = np.zeros(m + 1 + 2 * ne)
        hi = np.full(m + 1 + 2 * ne, np.inf)
        hi[m] = 1.0
        if stage == 1:
            c[m] = -1.0
        else:
            c[m + 1:] = np.concatenate([g, g])
            lo[m] = s_min
        res = linprog(c, A_ub=a_ub, b_ub=b_ub, A_eq=a_eq, b_eq=self.x.ravel(), bounds=np.stack([lo, hi], 1),
                      method="highs")
        if res.status != 0:
            raise RuntimeError(f"packing LP (stage {stage}) failed: {res.message}")
        d_ub, d_eq = res.ineqlin.marginals, res.eqlin.marginals
        weight = -(self.thr * d_ub[1:][:, None]) + d_eq.reshape(n, nc)
        return res.x[:m], float(res.x[m]), weight, float(d_ub[0])

    def generate(self, stage: int, max_iter: int = 500, **kw: Any) -> tuple[np.ndarray, float]:
        """Column generation to optimality (no configuration with negative reduced cost)."""
        for _ in range(max_iter):
            lam, s, weight, d_conf = self.solve(stage, **kw)
            best, entries = _price(weight, self.allowed, self.scale, self.capacity)
            if best + d_conf <= 1e-9 or not self.add(entries):
                return lam, s
        raise RuntimeError(f"packing LP (stage {stage}): column generation did not converge in {max_iter} rounds")


def packable_allocation(allocation: Mapping[str, Mapping[str, float]], scale_factors: Mapping[str, int],
                        capacity: Mapping[str, int], throughputs: Mapping[str, Mapping[str, float]], *,
                        fill: bool = False) -> PackableAllocation:
    """The packable allocation nearest ``allocation`` (module docstring).

    ``allocation``: job -> type -> ``X``; ``scale_factors``: job -> GPUs; ``capacity``: type ->
    GPUs; ``throughputs``: job -> type -> steps/s (a job never runs where it is 0 or missing).
    ``fill``: then hand GPUs the rounds leave idle to jobs (stage 3), on types where ``X > 0``.
    """
    types = list(capacity)
    jobs = list(allocation)
    for j in jobs:
        if j not in scale_factors:
            raise InputError(f"scale_factors.{j}", None, "missing scale factor for a job in the allocation")
    n, nc = len(jobs), len(types)
    x = np.array([[float(allocation[j].get(t, 0.0)) for t in types] for j in jobs]).reshape(n, nc)
    scale = np.array([int(scale_factors[j]) for j in jobs], dtype=np.int64)
    thr = np.array([[float(throughputs.get(j, {}).get(t, 0.0)) for t in types] for j in jobs]).reshape(n, nc)
    x[(x < EPS) | (thr <= 0)] = 0.0
    cap = np.array([int(capacity[t]) for t in types], dtype=np.int64)
    if n == 0:
        return PackableAllocation({}, 1.0)
    master = _Master(x, thr, scale, cap)
    left = cap.copy()
    greedy: list[int] = []
    for e in np.argsort(-x.ravel(), kind="stable").tolist():  # X's largest entries packed greedily
        jj, tt = divmod(e, nc)
        if x[jj, tt] > 0 and scale[jj] <= left[tt] and all(g // nc != jj for g in greedy):
            greedy.append(e)
            left[tt] -= scale[jj]
    master.add(greedy)
    for jj in range(n):  # and each job alone on its best type
        best = int(np.argmax(thr[jj]))
        if thr[jj, best] > 0 and scale[jj] <= cap[best]:
            master.add([jj * nc + best])
    _, s = master.generate(1)
    lam, _ = master.generate(2, s_min=max(s - 1e-7, 0.0))
    y = (master._a_y() @ lam).reshape(n, nc)
    changed = bool(np.abs(y - x).max(initial=0.0) > 1e-6)
    if fill:  # only on entries X or Y already uses: drop the configurations that leave them
        master.allowed = (thr > 0) & ((x > 0) | (y > 0))
        ok = master.allowed.ravel()
        keep = [k for k, col in enumerate(master.cols) if ok[list(col)].all()]
        master.cols = [master.cols[k] for k in keep]
        master.seen = set(master.cols)
        y_min = np.maximum((master._a_y() @ lam[keep]).reshape(n, nc) - 1e-9, 0.0) if keep else np.zeros_like(y)
        for e in np.flatnonzero(ok).tolist():  # every allowed entry alone (a start for the LP)
            if scale[e // nc] <= cap[e % nc]:
                master.add([e])
        if master.cols:
            lam, _ = master.generate(3, y_min=y_min)
        else:
            lam = np.zeros(0)
        y = (master._a_y() @ lam).reshape(n, nc)
    y[y < EPS] = 0.0
    y = np.minimum(y, 1.0)
    configs = [(tuple((jobs[e // nc], types[e % nc]) for e in col), share)
               for share, col in zip(lam.tolist(), master.cols) if share > EPS]
    idle = 1.0 - sum(share for _, share in configs)
    if idle > EPS:  # rounds in which nothing runs
        configs.append(((), idle))
    out = {j: {t: float(v) for t, v in zip(types, row) if v > 0} for j, row in zip(jobs, y.tolist())}
    # the fraction kept as delivered: dropping entries and shares below EPS can take up to
    # ~EPS x throughput from a job, more than the LP's s allows
    rho = (thr * x).sum(axis=1)
    ratio = (thr * y).sum(axis=1)[rho > 0] / rho[rho > 0]
    return PackableAllocation(out, float(min(s, 1.0, ratio.min(initial=1.0))), configs, changed)
