"""Water-filling, step 1: the level LP — twins aggregated into classes, the level columns, the
model built once and loaded, and the pair columns priced in by column generation."""
from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import numpy as np
import scipy.sparse as sp

from policyopt.modeling import IndexSet, LinExpr, Model, Variable
from policyopt.solver_api import auto_algorithm

from ._wf_common import FAIRNESS, FillGroup, _ClassSpace, _unique_in_order


class _ModelSteps:
    """Building and loading the level LP."""

    if TYPE_CHECKING:  # the engine's state (see WaterFillingEngine.__init__)
        nu: np.ndarray
        omega: np.ndarray
        group_of: np.ndarray
        groups: list[FillGroup]

        def __getattr__(self, name: str) -> Any: ...

    # ------------------------------------------------------------------ symmetry reduction
    def _aggregate(self) -> None:
        """Merge interchangeable jobs: members of the same fairness group with equal weight, scale
        factor and throughputs (no pair rows). Averaging any allocation over the permutations of such
        jobs keeps every constraint and every level, so the water-filling allocation gives them equal
        allocations and equal levels: one class with multiplicity ``q`` (capacity ``q·sf`` per unit
        of time) represents them exactly. Fifo members stay single (their order matters)."""
        sp_ = self.full_space
        n = len(sp_.jobs)
        fifo = self.is_fifo[self.group_of]
        key = np.column_stack([self.group_of, self.omega, sp_.scale, np.where(sp_.single_mask, sp_.T, 0.0),
                               np.where(fifo, np.arange(n), -1)])
        _, first, cls = np.unique(key, axis=0, return_index=True, return_inverse=True)
        cls = cls.ravel()
        if first.size == n:
            return
        # number classes in order of first appearance (keeps fifo order and job order stable)
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        self.cls = rank[cls]
        rep = first[order]
        mult = np.bincount(self.cls, minlength=rep.size).astype(float)
        self.space = _ClassSpace(sp_, rep, mult)
        self.nu = self.nu[rep]
        self.omega = self.omega[rep]
        self.group_of = self.group_of[rep]
        self.groups = [FillGroup(g.name, g.kind, g.weight, _unique_in_order(self.cls[g.members]))
                       for g in self.groups]

    def _expand(self, values: np.ndarray) -> np.ndarray:
        return values[self.cls]

    # ------------------------------------------------------------------ model
    def _level_columns(self) -> None:
        """One level column per fairness group and one per fifo job: ``k_of_job``, ``k_group``."""
        n = len(self.space.jobs)
        k_group: list[int] = []
        k_job: list[int] = []
        self.k_of_job = np.empty(n, np.int64)
        for gi, g in enumerate(self.groups):
            if g.kind == FAIRNESS:
                self.k_of_job[g.members] = len(k_group)
                k_group.append(gi)
                k_job.append(-1)
            else:
                self.k_of_job[g.members] = len(k_group) + np.arange(g.members.size)
                k_group.extend([gi] * g.members.size)
                k_job.extend(g.members.tolist())
        self.k_group = np.array(k_group, np.int64)
        self.k_job = np.array(k_job, np.int64)
        self.W = np.array([g.weight for g in self.groups])

    def _build(self) -> None:
        t0 = time.perf_counter()
        sp_ = self.space
        n, K = len(sp_.jobs), self.k_group.size
        model = Model("water_filling")
        X = sp_.add_allocation(model)  # type: ignore[misc]  # _ClassSpace borrows AllocationSpace's method
        u = sp_.throughput(X) * self.nu
        kset = IndexSet("levels", np.arange(K))
        fair = ~self.is_fifo[self.group_of]
        lam = model.add_variables("wf_level", (kset,), -np.inf, np.inf)
        mu = model.add_variables("wf_share", (sp_.jobs,), -np.inf, np.inf, mask=fair)
        delta = model.add_variable("wf_delta", -np.inf, np.inf)
        e = model.add_variables("wf_release", (sp_.jobs,), 0.0, np.inf)
        eg = model.add_variables("wf_release_group", (kset,), 0.0, np.inf)
        s = model.add_variables("wf_slack", (sp_.jobs,), 0.0, 0.0)
        P = sp.csr_matrix((np.ones(n), (np.arange(n), self.k_of_job)), shape=(n, K))
        lam_job = LinExpr.from_matrix(P, lam, (sp_.jobs,))
        free = (-np.inf, np.inf)
        # A_m: u_m/ω_m ≥ λ_k(m) (released by e_m);  L_m: μ_m ≤ λ_g (fairness members)
        model.add_constraints((u * (1.0 / self.omega) - lam_job + e.expr()) >= 0.0, "wf_active")
        fpos = np.flatnonzero(fair)
        model.add_constraints((lam_job.select("jobs", fpos) - mu.expr().select("jobs", fpos)) >= 0.0, "wf_share")
        model.add_constraints((u - s.expr()).between(*free), "wf_floor")
        # G_k: fairness  Σ_{m∈g} ω_m μ_m − W_g Δ ≥ Ω_g β_g ;  fifo job  λ_k − W_g Δ ≥ β_k
        # (released by e'_k)
        k_fifo = self.k_job >= 0
        Wk = self.W[self.k_group] if len(self.groups) > 1 else np.ones(K)
        Q = sp.csr_matrix((self.wq[fpos], (self.k_of_job[fpos], fpos)), shape=(K, n))
        lam_fifo = sp.csr_matrix((np.ones(int(k_fifo.sum())), (np.flatnonzero(k_fifo), np.flatnonzero(k_fifo))),
                                 shape=(K, K))
        g_expr = (LinExpr.from_matrix(Q, mu, (kset,)) + LinExpr.from_matrix(lam_fifo, lam, (kset,))
                  - delta.expr().broadcast((kset,)) * Wk + eg.expr())
        model.add_constraints(g_expr.between(*free), "wf_group")
        model.maximize(delta)
        t1 = time.perf_counter()
        sf = model.compile()
        t2 = time.perf_counter()
        self.model, self.X, self.sf = model, X, sf
        self.rows_A = np.arange(*sf.row_blocks["wf_active"])
        self.rows_F = np.arange(*sf.row_blocks["wf_floor"])
        self.rows_G = np.arange(*sf.row_blocks["wf_group"])
        self.col_delta = np.array([int(delta.cols.ravel()[0])])
        self.col_e, self.col_eg, self.col_s = e.cols.ravel(), eg.cols.ravel(), s.cols.ravel()
        self.col_mu = mu.cols.ravel()          # -1 for fifo jobs
        # LP columns of X per job (its single row and the pair rows it is in): waiting jobs are closed
        mem = sp_.membership_matrix()
        xcols = X.cols.ravel()[mem.cols]
        keep = xcols >= 0
        self.col_x = np.unique(xcols[keep])
        # (owner job, position in col_x) of every slot: a column is shut when any owner is closed
        self._slot_job, self._slot_pos = mem.rows[keep], np.searchsorted(self.col_x, xcols[keep])
        self._init_pair_pricing(X)
        # the first (cold) solve: interior point + crossover is much faster on large models; the
        # warm re-solves then use the primal simplex method from the crossover basis
        self.first_algorithm = self.options.algorithm
        if self.options.algorithm == "auto":
            self.first_algorithm = auto_algorithm(sf, structured=False)
        opts = self.options.with_(algorithm=self.first_algorithm)
        if getattr(self.solver, "name", "") == "highs":  # levels are carried over many LPs: tight tolerances
            opts = opts.with_(extra={"primal_feasibility_tolerance": 1e-9, **opts.extra})
        self.loaded = self.solver.load(sf, opts)
        self._model_solves = 0
        if self.capacity is not None:
            cap_rows = np.arange(*sf.row_blocks["X_capacity"])
            self.loaded.set_row_bounds(cap_rows, np.full(cap_rows.size, -np.inf), np.asarray(self.capacity, float))
        # bounds currently held by the loaded model, to push only what changes
        self._cur: dict[str, np.ndarray] = {  # mu_fix: 1 where μ_m is fixed at 0
            "e_hi": np.full(n, np.inf), "eg_hi": np.full(K, np.inf), "mu_fix": np.zeros(int(fair.sum())),
            "F_lo": np.full(n, -np.inf), "G_lo": np.full(K, -np.inf), "x_hi": np.ones(self.col_x.size)}
        self.timings.build += t1 - t0
        self.timings.compile += t2 - t1
        self.timings.solve += time.perf_counter() - t2

    def _init_pair_pricing(self, X: Variable) -> None:
        """Pair columns by column generation (``pair_columns``: ``price``, or ``auto`` when there are
        more than ``4·n`` pairs and several groups or a fifo group): only each job's ``pair_seed`` best
        pairs (by normalized combined throughput ``Σ_side Tp/T_best``) start open; :meth:`_solve` admits
        the others on positive reduced cost. ``all``: every pair column is open from the start."""
        sp_ = self.space
        n = len(sp_.jobs)
        self.admitted = np.ones(self.col_x.size, bool)
        self._shut = np.zeros(self.col_x.size, bool)
        P = sp_.num_pairs
        # auto: many pairs and several groups (hierarchical: many levels, each a warm re-solve); one
        # fairness group needs few levels, where a single solve over every column is faster
        many_levels = len(self.groups) > 1 or bool(self.is_fifo.any())
        self.pricing = bool(P) and (self.pair_columns == "price"
                                    or (self.pair_columns == "auto" and P > 4 * n and many_levels))
        if not self.pricing:
            return
        best = np.maximum(np.where(sp_.single_mask, sp_.T, 0.0).max(axis=1), 1e-300)
        pj = sp_.pair_jobs
        gain = (np.where(sp_.pair_mask, sp_.Tp[:, :, 0], 0.0) / best[pj[:, 0], None]
                + np.where(sp_.pair_mask, sp_.Tp[:, :, 1], 0.0) / best[pj[:, 1], None]).max(axis=1)
        # each job's pair_seed best pairs (rank within the job's pairs, by gain)
        owner = np.concatenate([pj[:, 0], pj[:, 1]])
        pidx = np.concatenate([np.arange(P), np.arange(P)])
        order = np.lexsort((-np.concatenate([gain, gain]), owner))
        sorted_owner = owner[order]
        rank = np.arange(order.size) - np.searchsorted(sorted_owner, sorted_owner, side="left")
        seed = np.zeros(P, bool)
        seed[pidx[order[rank < self.pair_seed]]] = True
        seed |= self.admitted_pairs0[self.pairs0]  # pair rows pricing opened before a compaction
        pair_cols = X.cols[n:]
        closed = pair_cols[~seed]
        closed = closed[closed >= 0]
        self.admitted[np.searchsorted(self.col_x, closed)] = False
