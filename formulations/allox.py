"""AlloX baseline: jobs to (worker, position) slots by min-cost bipartite matching.

AlloX minimizes the sum of completion times on unrelated machines: a job placed ``k``-th from the
end of a worker's queue delays ``k`` jobs (itself included), so slot ``(w, k)`` costs
``k·p[m, type(w)]`` with ``p`` the job's processing time there. Gavel's version: processing time
``s_m / T[m, t]``; the oldest jobs first (by time since start), at most
``max(#workers, ⌊α·n⌋)`` of them; each worker runs the job at the head of its queue
(``X[m, t] = 1``); single-GPU jobs only. Solved as one assignment problem with scipy's
``linear_sum_assignment`` (the graph-matching fast path; no LP over time fractions).

Our generalizations, stated: (1) jobs of scale factor ``sf`` count in worker-seconds — processing
time ``sf·s_m/T[m,t]`` on one worker — and a head-of-queue job gets ``X[m, t] = 1/sf`` (its gang holds
one worker's worth of capacity), so capacity always holds; (2) workers of one type are identical,
so queue positions fill level by level: with ``m`` jobs at most ``⌈m/count_t⌉`` levels per type
are needed (a job at level ``k`` on one worker while another worker of the same type has no level
``k−1`` could move there and cost less), which bounds the matrix at ``m × Σ_t count_t·⌈m/count_t⌉``
instead of ``m × (#workers·m)``; (3) each type uses the job's best allowed placement; types it
cannot run on (zero throughput, fewer workers than ``sf``) are forbidden slots. Gavel's constant
delay term ``t_m`` per job does not change the assignment and is omitted. Space sharing is not used.
Objective: the matching's total weighted completion time ``Σ k·p`` (seconds) of the jobs matched at
this call.

**Across calls, as Gavel's AlloX** (``keep_running``, default on): the policy object remembers which
jobs ran (queue heads) and on which configuration; at its next call those still present keep that
configuration while it is allowed and its type has room (oldest first), their workers are taken out,
and only the other jobs are matched on the free workers — AlloX is non-preemptive. A fresh object
(``policyopt.solve``) has no memory; the simulator and the service keep one object per run. The
default ``alpha`` is Gavel's 1.0 (every waiting job is considered).

Solving the matching: ``method="matching"`` builds one column per (type, level, worker) and calls
``linear_sum_assignment`` (O(m²·columns): ~9 s at 1536 jobs × 4608 slots); ``method="flow"`` uses
that workers of a type are identical — the same assignment is a transportation problem from jobs
(supply 1) to (type, level) slot groups (capacity ``count_t``), whose constraint matrix is totally
unimodular, so a simplex vertex is a matching with the same optimum (~0.1 s at that size; a
non-integral answer, never expected, falls back to the matching). ``auto``: matching up to 5·10^5
matrix entries, else flow. The tests check both give the same optimum.

Over any allocation space (e.g. execution-plan configurations, where a configuration carries its
own GPU count): a slot's workers are :meth:`~policyopt.allocation.AllocationSpace.slot_workers`
``w(m, c)`` (the scale factor in the base space, the configuration's GPUs ``g_c`` over plans), the
processing time on one worker of type ``t`` is ``min_{c on t} w(m,c)·s_m/T[m,c]`` (the job's most
worker-efficient configuration there — in the base space ``w`` is constant per job, so this is its
best placement), and a head-of-queue job gets ``X[m, c] = 1/w(m, c)``: GPU capacity holds as before.
If the space has rows the matching does not see (cores, host memory, quotas, guaranteed jobs' SLA
rows) and the allocation violates one, it is replaced by the nearest allocation within every row
(:func:`._common.nearest_feasible`: least worker-time moved, one LP); ``extra["projected"]`` says so
and ``extra["projection_distance"]`` gives the worker-time moved. ``objective`` stays the
matching's total weighted completion time. In the base space the allocation is always within the
rows, so nothing changes there.
"""
from __future__ import annotations

import time

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import IndexSet, Model
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from ._common import best_config_per_type, nearest_feasible, slot_workers_matrix


@register_policy("allox")
class AlloX(Policy):
    """AlloX baseline: min-cost matching of jobs to (GPU, queue position) slots (scipy linear_sum_assignment)."""

    pop_combine = "sum"  # how POP recombines sub-problem objectives

    objective_sense = "min"
    options = (
        Option("alpha", float, 1.0, "consider at most max(#free workers, ⌊alpha·n⌋) oldest waiting jobs "
               "(Gavel's default 1.0: every job)"),
        Option("keep_running", bool, True, "jobs that ran at the previous call of this policy object keep "
               "their workers (Gavel's AlloX: non-preemptive); only the others are matched"),
        Option("method", str, "auto",
               "matching (scipy linear_sum_assignment), flow (transportation LP over (type, level) slots, "
               "same optimum), or auto (matching up to 5·10^5 matrix entries, else flow)",
               ("auto", "matching", "flow")),
    )

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        n, nt = len(space.jobs), len(space.worker_types)
        W = slot_workers_matrix(space)                                    # workers per (job, config)
        X = np.zeros((len(space.rows), len(space.configs)))
        counts = space.counts.copy()
        kept = self._keep_running(space, W, X, counts) if self.config["keep_running"] else np.zeros(n, bool)
        waiting = np.flatnonzero(~kept)
        workers = int(counts.sum())
        m = min(waiting.size, max(workers, int(self.config["alpha"] * waiting.size)))
        order = waiting[np.lexsort((waiting, -space.time_since_start[waiting]))][:m]  # oldest first
        if m == 0 or workers == 0:  # nothing to match: the kept jobs (if any) run on
            timings.build = time.perf_counter() - t0
            self._running = self._heads(space, X)
            return self.result(space, X, Status.OPTIMAL, 0.0, "none", timings, jobs_considered=0,
                               jobs_kept=int(kept.sum()), method="none")
        with np.errstate(divide="ignore", invalid="ignore"):
            per_worker = np.where(space.single_mask, space.T / W, 0.0)    # steps/s per worker
        best_cfg = best_config_per_type(space, per_worker[order])         # (m × types)
        sel = (order[:, None], np.maximum(best_cfg, 0))
        thr = np.where(best_cfg >= 0, space.T[sel], 0.0)
        w_sel = np.where(best_cfg >= 0, W[sel], 1.0)
        with np.errstate(divide="ignore"):
            p = np.where(thr > 0, w_sel * space.steps[order, None] / thr, np.inf)
        # slot groups (type t, level k) with count_t identical slots each, k ≤ ⌈m/count_t⌉
        g_type, g_level = [], []
        for t in range(nt):
            c = int(counts[t])
            if c == 0 or not np.isfinite(p[:, t]).any():
                continue
            L = -(-m // c)
            g_type.append(np.full(L, t))
            g_level.append(np.arange(1, L + 1))
        gt = np.concatenate(g_type) if g_type else np.zeros(0, np.int64)
        gk = np.concatenate(g_level) if g_level else np.zeros(0, np.int64)
        cost = gk[None, :] * p[:, gt]                                    # (m × groups)
        entries = m * int(np.sum(counts[gt]))
        method = self.config["method"]
        if method == "auto":
            method = "matching" if entries <= 500_000 else "flow"
        t1 = time.perf_counter()
        timings.build = t1 - t0
        level = None
        solver = "scipy.linear_sum_assignment"
        if method == "flow" and gt.size:
            level, solver = self._flow(space, cost, counts[gt], timings)
        if level is None:  # matching (or a non-integral flow solution: never expected, but safe)
            level = self._matching(cost, counts[gt].astype(np.int64))
            solver = "scipy.linear_sum_assignment"
        t2 = time.perf_counter()
        # level[i] = slot group of job i (-1: unassigned); within a group, jobs take workers 0, 1, ...;
        # each worker runs its highest-level job first
        assigned = np.flatnonzero(level >= 0)
        grp = level[assigned]
        srt = np.lexsort((assigned, grp))
        grp_sorted = grp[srt]
        first = np.searchsorted(grp_sorted, grp_sorted, side="left")
        worker = np.arange(grp_sorted.size) - first
        jobs_i = assigned[srt]
        key = gt[grp_sorted] * (workers + 1) + worker
        srt2 = np.lexsort((-gk[grp_sorted], key))
        head = srt2[np.r_[True, key[srt2][1:] != key[srt2][:-1]]]
        ji = jobs_i[head]
        tj = gt[grp_sorted[head]]
        X[order[ji], best_cfg[ji, tj]] = 1.0 / w_sel[ji, tj]
        objective: float | None = float(cost[assigned, level[assigned]].sum())
        timings.extract += time.perf_counter() - t2
        self._running = self._heads(space, X)
        extra: dict[str, object] = {"jobs_considered": int(m), "jobs_kept": int(kept.sum()), "method": method}
        status, msg = Status.OPTIMAL, ""
        if space.check(X):  # rows the matching does not see (multi-resource spaces)
            X, dist, status, msg = nearest_feasible(self, space, X, timings)
            extra.update(projected=True, projection_distance=dist)
            if status is not Status.OPTIMAL:
                objective = None
        return self.result(space, X, status, objective, solver, timings, msg, **extra)

    def _keep_running(self, space: AllocationSpace, W: np.ndarray, X: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Jobs that ran at this object's previous call keep their configuration (``X = 1/w``) while
        it is still allowed and its type has room (oldest first, per type); their workers leave
        ``counts``. Returns which jobs were kept."""
        n = len(space.jobs)
        kept = np.zeros(n, bool)
        prev: dict[str, str] = getattr(self, "_running", {})
        if not prev:
            return kept
        labels = np.asarray(space.jobs.labels, dtype=str)
        have = np.isin(labels, np.array(list(prev), dtype=str))
        jobs = np.flatnonzero(have)
        cfg_pos = {str(c): k for k, c in enumerate(space.configs.labels)}
        cfg = np.array([cfg_pos.get(prev[str(labels[j])], -1) for j in jobs], np.int64)
        ok = cfg >= 0
        jobs, cfg = jobs[ok], cfg[ok]
        ok = space.single_mask[jobs, cfg] & (W[jobs, cfg] > 0)
        jobs, cfg = jobs[ok], cfg[ok]
        srt = np.lexsort((jobs, -space.time_since_start[jobs]))  # oldest first
        jobs, cfg = jobs[srt], cfg[srt]
        t = space.config_type[cfg]
        w = W[jobs, cfg]
        fits = np.zeros(jobs.size, bool)
        for k in np.unique(t):  # a prefix per type, within its count
            on = np.flatnonzero(t == k)
            fits[on] = np.cumsum(w[on]) <= counts[k] + 1e-9
            counts[k] -= float(w[on][fits[on]].sum())
        X[jobs[fits], cfg[fits]] = 1.0 / w[fits]
        kept[jobs[fits]] = True
        return kept

    @staticmethod
    def _heads(space: AllocationSpace, X: np.ndarray) -> dict[str, str]:
        """Job id → configuration of every job running (a queue head) in ``X``."""
        n = len(space.jobs)
        jj, cc = np.nonzero(X[:n] > 0)
        labels = space.jobs.labels
        configs = space.configs.labels
        return {str(labels[j]): str(configs[c]) for j, c in zip(jj.tolist(), cc.tolist())}

    @staticmethod
    def _matching(cost: np.ndarray, reps: np.ndarray) -> np.ndarray:
        """One column per (type, level, worker): scipy's ``linear_sum_assignment`` (``reps[g]``
        workers in slot group ``g``)."""
        col_group = np.repeat(np.arange(reps.size), reps)
        full = cost[:, col_group]
        finite = np.isfinite(full)
        big = (full[finite].max() if finite.any() else 1.0) * (cost.shape[0] + 1) + 1.0
        from scipy.optimize import (
            linear_sum_assignment,  # lazy: scipy.optimize costs ~0.2 s to import
        )

        ri, ci = linear_sum_assignment(np.where(finite, full, big))
        level = np.full(cost.shape[0], -1, np.int64)
        ok = finite[ri, ci]
        level[ri[ok]] = col_group[ci[ok]]
        return level

    def _flow(self, space: AllocationSpace, cost: np.ndarray, capacity: np.ndarray, timings: Timings
              ) -> tuple[np.ndarray | None, str]:
        """The same assignment as a transportation problem: jobs (supply 1) to slot groups (capacity
        ``count_t``). Its constraint matrix is totally unimodular, so a basic optimal solution is a
        matching with the matching's optimum; solved with simplex (a vertex)."""
        m, G = cost.shape
        jobs = IndexSet("considered", np.arange(m))
        groups = IndexSet("slot_groups", np.arange(G))
        model = Model(f"{self.name}_flow")
        finite = np.isfinite(cost)
        y = model.add_variables("y", (jobs, groups), 0.0, 1.0, mask=finite)
        model.add_constraints(y.sum("slot_groups") == 1.0, "assign")
        model.add_constraints(y.sum("considered") <= capacity.astype(float), "slots")
        model.minimize((y.expr() * np.where(finite, cost, 0.0)).sum())
        t0 = time.perf_counter()
        sf = model.compile()
        t1 = time.perf_counter()
        solver = self.get_solver()
        raw = solver.solve(sf, self.solver_options().with_(algorithm="simplex"))
        timings.compile += t1 - t0
        timings.solve += time.perf_counter() - t1
        if not raw.ok or raw.x is None:
            return None, solver.name
        Y = y.value(raw.x)
        if np.any(np.abs(Y - np.round(Y)) > 1e-6):
            return None, solver.name
        level = np.full(m, -1, np.int64)
        ri, gi = np.nonzero(Y > 0.5)
        level[ri] = gi
        return level, f"{solver.name} (transportation LP)"
