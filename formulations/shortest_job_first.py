"""Shortest job first, as an exact lexicographic optimization.

What is optimized (our choice, stated precisely): jobs are ordered by their best-case remaining
duration ``d_m = s_m / thr(m, X_fastest)`` (alone on their fastest allowed configuration; ties by
arrival order, then position). Then, lexicographically in that order, minimize the duration
``s_m / thr(m)`` of the first job, then — without making the first worse — of the second, and so
on: equivalently maximize ``thr(m)`` level by level,

.. math::  \\operatorname{lexmax}_X\\; \\big(\\hat t_{\\pi(1)}, \\hat t_{\\pi(2)}, \\dots\\big),
           \\qquad \\hat t_m = thr(m)/thr(m, X_{fastest}) \\in [0, 1].

This is strict priority in SRPT order: a shorter job never loses throughput to a longer one, but a
longer job gets whatever the shorter ones can leave without losing anything (e.g. the other GPU
type when the shorter job is indifferent). Jobs with no remaining steps are finished: they get
nothing and are not levels. Levels below 1e-7 count as 0.

Method (exact):

* **Greedy prefix.** Without pair rows, each job in order takes the free capacity of its
  configurations best-first (fractional knapsack: time ≤ 1, capacity per physical type). While no
  job meets a *tie* — two configurations on different types with the same ``t̂`` per unit time,
  both with free capacity — this is the lexicographic optimum. Proof by induction: if an
  allocation ``Y`` matches the greedy ``G`` on jobs before ``i`` and is at least as good on job ``i``,
  then ``Y_i`` also maximizes job ``i``'s level over the same free capacity, and that fractional
  knapsack with distinct per-type values has a unique maximizer, so ``Y_i = G_i``; hence no ``Y``
  keeping every earlier level can beat ``G`` at a later level. Cost: O(n·configs), no LP.
* **LP sequence** (from the first tie, or from the start when pair rows exist — pairs let earlier
  jobs be rearranged without loss): one LP, loaded once, re-solved in place. Level ``k`` is fixed by
  a row ``t̂_{π(k)} ≥ v_k − 1e-9`` (if a later LP is then infeasible because ``v_k`` was measured on a
  point feasible only to the solver's tolerance, the fixed levels are relaxed by 1e-7, 1e-6, 1e-5
  and the LP re-solved). For each next job: (1) if the current allocation's free capacity fits it
  on its fastest configuration, it goes there — ``t̂ = 1`` is its level's upper bound, no LP;
  (2) otherwise one LP maximizes its ``t̂`` under the fixed levels (earlier jobs may be rearranged
  as long as none loses anything); (3) when that optimum is 0, one look-ahead LP maximizes
  ``Σ_{j≥k} (1 + (K−j)/K)·t̂_{π(j)}`` — it bounds every remaining level, so if it is 0 the sequence
  stops. Single-job slots of jobs not reached yet are closed (they only take capacity).

Over any allocation space: slots occupy :meth:`~policyopt.allocation.AllocationSpace.slot_workers`
workers (the scale factor in the base space, a configuration's GPUs over execution plans). When the
space adds rows beyond job time and capacity (cores, host memory, quotas, guaranteed jobs' SLA rows
— :func:`._common.base_rows_only` is false), the greedy prefix's knapsack argument no longer holds
and the guarantees are ``≥`` rows, so: no greedy prefix (the LP sequence from the start, every
level by the space's own rows); no slot is closed or zeroed (a guaranteed job later in the order
must keep its guaranteed time); a job is settled at level 1 without an LP only if the current
allocation with that job moved to its fastest configuration passes ``space.check``; and at the end
finished and zero-level jobs are cleared only if the result still passes ``space.check``.

Reported ``objective``: the (minimized) duration of the first job in SJF order, in seconds;
``durations`` lists ``s_m/thr(m)`` per job in SJF order for problems of ≤ 64 jobs;
``levels_greedy`` / ``levels_saturated`` / ``levels_by_lp`` count how each level was settled.
"""
from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, SolveResult, Status, Timings

from ._common import LoadedLP, base_rows_only, fastest_throughput, order_by_arrival, slot_workers_matrix

_FIX_TOL = 1e-9
_RETRY_SLACK = (1e-7, 1e-6, 1e-5)
_ZERO = 1e-7  # a level below this fraction of the job's best throughput counts as 0
_TIE = 1e-12


def sjf_order(space: AllocationSpace) -> np.ndarray:
    """Active jobs (``s_m > 0``) by best-case remaining duration, ties by arrival then position."""
    arrival_rank = np.empty(len(space.jobs), np.int64)
    arrival_rank[order_by_arrival(space)] = np.arange(len(space.jobs))
    d = space.steps / fastest_throughput(space, space.T)
    order = np.lexsort((np.arange(d.size), arrival_rank, d))
    return order[space.steps[order] > 0]


def greedy_prefix(space: AllocationSpace, order: np.ndarray, fastest: np.ndarray) -> tuple[np.ndarray, int]:
    """Best-first fill in ``order`` until the first job with a cross-type tie among configurations
    with free capacity (see the module docstring). Returns the single-job allocation and how many
    jobs of ``order`` it settled."""
    n, C = len(space.jobs), len(space.configs)
    X = np.zeros((n, C))
    free = space.counts.astype(float).copy()
    a = np.where(space.single_mask, space.T / fastest[:, None], 0.0)
    W = slot_workers_matrix(space)  # workers a slot occupies (the scale factor in the base space)
    for k, j in enumerate(order.tolist()):
        cfgs = np.flatnonzero(a[j] > 0)
        cfgs = cfgs[free[space.config_type[cfgs]] > 1e-12]
        if cfgs.size > 1:
            vals = a[j, cfgs]
            srt = np.argsort(-vals, kind="stable")
            cfgs, vals = cfgs[srt], vals[srt]
            close = np.abs(np.diff(vals)) <= _TIE * vals[:-1]
            if np.any(close & (space.config_type[cfgs[1:]] != space.config_type[cfgs[:-1]])):
                return X, k
        left = 1.0
        for c in cfgs.tolist():
            t = space.config_type[c]
            sf = W[j, c]
            x = min(left, free[t] / sf)
            if x <= 0:
                continue
            X[j, c] = x
            free[t] -= sf * x
            left -= x
            if left <= 0:
                break
    return X, order.size


@register_policy("shortest_job_first")
class ShortestJobFirst(Policy):
    """Shortest job first: lexicographically minimize durations s_m/thr(m) in best-case SRPT order (exact)."""

    objective_sense = "min"
    options = (Option("max_lp_solves", int, 100000, "cap on LP solves (then: best allocation so far, time_limit)"),
               Option("method", str, "auto",
                      "auto (exact greedy prefix, then LPs) or lp (LP sequence only; a cross-check)", ("auto", "lp")))

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        order = sjf_order(space)
        n, C, K = len(space.jobs), len(space.configs), order.size
        fastest = fastest_throughput(space, space.T)
        Xc = np.zeros((len(space.rows), C))  # current allocation: every fixed level met
        done = 0
        base_rows = base_rows_only(space)  # else: rows the greedy and the shortcuts do not see
        if space.num_pairs == 0 and self.config["method"] == "auto" and base_rows:
            Xc[:n], done = greedy_prefix(space, order, fastest)
        stats = {"levels_greedy": done, "levels_saturated": 0, "levels_by_lp": 0, "lp_solves": 0, "stall_retries": 0}
        status, solver_name, msg = Status.OPTIMAL, "greedy", ""
        if done < K:
            status, solver_name, msg = self._lp_sequence(space, order, fastest, Xc, done, timings, stats,
                                                         base_rows)
        else:
            timings.build = time.perf_counter() - t0
        if K == 0:
            return self.result(space, Xc, Status.OPTIMAL, None, solver_name, timings, "no job has remaining steps")
        # levels that count as 0 (solver noise below _ZERO) and finished jobs: their single-job slots
        # are cleared (with extra rows, only if every row still holds: a guarantee may need them)
        drop = (space.throughput_values(Xc) / fastest <= _ZERO) | (space.steps <= 0)
        cleared = Xc.copy()
        cleared[:n][drop] = 0.0
        if base_rows or not space.check(cleared):
            Xc = cleared
        thr = space.throughput_values(Xc)
        with np.errstate(divide="ignore"):
            dur = space.steps / thr
        extra: dict[str, object] = dict(stats)
        if n <= 64:
            extra["durations"] = {str(space.jobs.labels[m]): (float(dur[m]) if np.isfinite(dur[m]) else None)
                                  for m in order}
        obj = float(dur[order[0]]) if status is Status.OPTIMAL else None
        return self.result(space, Xc, status, obj, solver_name, timings, msg, **extra)

    # ------------------------------------------------------------------ LP sequence
    def _lp_sequence(self, space: AllocationSpace, order: np.ndarray, fastest: np.ndarray, Xc: np.ndarray,
                     k: int, timings: Timings, stats: dict[str, int], base_rows: bool = True
                     ) -> tuple[Status, str, str]:
        """Settle levels ``order[k:]`` (``Xc`` holds the settled prefix and is updated in place).
        ``base_rows=False`` (a space with rows beyond time and capacity): nothing is closed or
        zeroed, and the level-1 shortcut is checked against every row (module docstring)."""
        t0 = time.perf_counter()
        n, K = len(space.jobs), order.size
        model = Model(self.name)
        X = space.add_allocation(model)
        thr_n = space.throughput(X) / fastest  # t̂_m over all jobs
        model.add_constraints(thr_n.between(-np.inf, np.inf), "level")
        model.maximize(thr_n.select("jobs", order).sum())
        Mt = space.throughput_matrix()  # normalized throughput over LP columns (jobs × columns)
        lp_col = X.cols.ravel()[Mt.cols]
        keep = lp_col >= 0
        Mn = sp.csr_matrix((Mt.vals[keep] / fastest[Mt.rows[keep]], (Mt.rows[keep], lp_col[keep])),
                           shape=(n, model.num_cols))
        timings.build += time.perf_counter() - t0
        lp = LoadedLP(self, model, timings)
        level_rows = lp.rows("level")
        all_cols = np.arange(model.num_cols)
        fixed = np.full(n, -np.inf)  # lower bounds of the fixed levels
        # finished jobs hold nothing; single-job slots of jobs not reached yet are closed (they only
        # take capacity; pair slots stay open: a pair with a later job may help an earlier one)
        single_cols = X.cols[:n]
        closed = np.zeros(n, bool)
        if base_rows:
            closed[order[k:]] = True
            shut = np.setdiff1d(np.arange(n), order[:k])
            c = single_cols[shut]
            lp.set_col_bounds(c[c >= 0], 0.0, 0.0)
        finished = np.flatnonzero(space.steps <= 0)
        if finished.size and space.num_pairs and base_rows:
            on_pair = np.isin(space.pair_jobs, finished).any(axis=1)
            pc = X.cols[n:][on_pair]
            lp.set_col_bounds(pc[pc >= 0], 0.0, 0.0)

        def open_jobs(jobs: np.ndarray) -> None:
            jobs = jobs[closed[jobs]]
            if jobs.size:
                cc = single_cols[jobs]
                lp.set_col_bounds(cc[cc >= 0], 0.0, 1.0)
                closed[jobs] = False

        def fix(jobs: np.ndarray, values: np.ndarray) -> None:
            fixed[jobs] = np.maximum(values - _FIX_TOL, 0.0)
            lp.set_row_bounds(level_rows[jobs], fixed[jobs], np.inf)

        def resolve() -> SolveResult:
            raw = lp.solve()
            if not lp.warm_primal and self.config["algorithm"] == "auto":
                lp.use_warm_primal()  # later LPs: new costs, relaxed or met bounds (few primal pivots)
            for slack in _RETRY_SLACK:
                if raw.status is not Status.INFEASIBLE:
                    break
                fx = np.flatnonzero(np.isfinite(fixed))
                fixed[fx] = np.maximum(fixed[fx] - slack, 0.0)
                lp.set_row_bounds(level_rows[fx], fixed[fx], np.inf)
                raw = lp.solve()
            return raw

        if k:
            prefix = order[:k]
            open_jobs(prefix)
            fix(prefix, np.asarray(Mn[prefix] @ self._columns(X, Xc, model.num_cols)).ravel())
        cap = space.capacity_matrix()
        cfg_type = space.config_type
        W = slot_workers_matrix(space)
        fastest_cfgs = space.single_mask & (space.T >= fastest[:, None] * (1 - 1e-12))
        pair_rows_of = None
        if space.num_pairs:
            pair_rows_of = sp.csr_matrix((np.ones(2 * space.num_pairs), (space.pair_jobs.ravel(),
                                          np.repeat(np.arange(space.num_pairs), 2))), shape=(n, space.num_pairs))
        used = cap @ Xc.ravel()
        status = Status.OPTIMAL
        while k < K:
            j = order[k]
            # (1) saturate from free capacity: level 1 is the upper bound, so this is optimal
            busy_pairs = pair_rows_of is not None and np.any(Xc[n:][pair_rows_of[j].indices] > 0)
            if not busy_pairs:
                mine = np.bincount(cfg_type, weights=W[j] * Xc[j], minlength=len(space.counts))
                free = space.counts - (used - mine)
                cand = np.flatnonzero(fastest_cfgs[j])
                ok = cand[free[cfg_type[cand]] >= W[j, cand] - 1e-9]
                if not base_rows:  # the other rows (cores, memory, quotas, guarantees) must hold too
                    first = next((c for c in ok.tolist() if not space.check(_moved(Xc, j, c))), None)
                    ok = ok[:0] if first is None else np.array([first])
                if ok.size:
                    Xc[j] = 0.0
                    Xc[j, ok[0]] = 1.0
                    used = used - mine
                    used[cfg_type[ok[0]]] += W[j, ok[0]]
                    open_jobs(np.array([j]))
                    fix(np.array([j]), np.ones(1))
                    stats["levels_saturated"] += 1
                    k += 1
                    continue
            if lp.solves >= self.config["max_lp_solves"]:
                status = Status.TIME_LIMIT
                break
            # (2) job π(k) alone: maximize t̂_{π(k)} under the fixed levels
            open_jobs(np.array([j]))
            lp.set_costs(all_cols, Mn[j].toarray().ravel())
            raw = resolve()
            stats["levels_by_lp"] += 1
            if not raw.ok or raw.x is None:
                status = raw.status
                break
            Xc[:] = X.value(raw.x)
            if base_rows:
                # levels from the allocation made exactly feasible: the LP meets rows only to its
                # tolerance, and a level it reports could then be a floor the next LP cannot meet
                Xc[:] = space.project(Xc)
                Xc[order[k + 1:]] = 0.0  # later jobs' single-job slots: freeing them keeps every level
                got = np.asarray(Mn @ self._columns(X, Xc, model.num_cols)).ravel()
                low = np.isfinite(fixed) & (got - _FIX_TOL < fixed)
                if low.any():  # floors never above what this allocation delivers
                    fixed[low] = np.maximum(got[low] - _FIX_TOL, 0.0)
                    lp.set_row_bounds(level_rows[low], fixed[low], np.inf)
                v = float(got[j])
            else:
                v = float((Mn[j] @ raw.x)[0])
            used = cap @ Xc.ravel()
            if v <= _ZERO:
                # (3) can any remaining job still get anything?
                open_jobs(order[k:])
                wts = np.zeros(n)
                wts[order[k:]] = 1.0 + (K - np.arange(k, K)) / K  # ≥ 1: the optimum bounds every level
                lp.set_costs(all_cols, Mn.T @ wts)
                raw = resolve()
                if not raw.ok or raw.x is None:
                    status = raw.status
                    break
                if raw.objective is not None and raw.objective <= _ZERO:
                    Xc[:] = X.value(raw.x)
                    break  # every remaining level is 0
            fix(np.array([j]), np.array([max(v, 0.0)]))
            k += 1
        stats["lp_solves"] = lp.solves
        stats["stall_retries"] = lp.stall_retries
        msg = "" if status is Status.OPTIMAL else \
            f"{status.value}: stopped after {k} of {K} levels; returning the allocation so far"
        return status, lp.solver_name, msg

    @staticmethod
    def _columns(X: "object", Xc: np.ndarray, num_cols: int) -> np.ndarray:
        """The LP column vector of an allocation array."""
        x = np.zeros(num_cols)
        cols = X.cols  # type: ignore[attr-defined]
        m = cols >= 0
        x[cols[m]] = Xc[m]
        return x


def _moved(Xc: np.ndarray, j: int, c: int) -> np.ndarray:
    """``Xc`` with job ``j`` alone on configuration ``c`` all the time."""
    X = Xc.copy()
    X[j] = 0.0
    X[j, c] = 1.0
    return X
