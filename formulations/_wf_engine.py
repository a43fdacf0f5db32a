"""The water-filling engine: one loaded LP, levels raised by in-place bound updates.

See :mod:`policyopt.formulations.water_filling` for what is computed and why it is exact; this
module holds the machinery (model, certificates, speed-ups) shared by ``max_min_fairness_water_filling``,
``hierarchical`` and the benchmarks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Sequence

import numpy as np
import scipy.sparse as sp

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.modeling import IndexSet, LinExpr, Model, Triplets, Variable
from policyopt.result import Status, Timings
from policyopt.solver_api import LoadedModel, SolverOptions, auto_algorithm

__all__ = ["FillGroup", "FillOutcome", "WaterFillingEngine", "normalized_throughput", "FAIRNESS", "FIFO"]

FAIRNESS = "fairness"
FIFO = "fifo"
_DUAL_TOL = 1e-9     # relative dual threshold for a bottleneck certificate
_SLACK_TOL = 1e-8    # relative improvement above which a job counts as able to exceed its level
_ZERO_TOL = 1e-6     # a fifo job that can gain at most this (u units) is bottlenecked at 0
_MARGIN = 1e-12       # relative margin when a requirement is reset to what a solution delivers

_PRICE_TOL = 1e-9    # reduced cost above which a closed pair column is admitted (column generation)
PAIR_COLUMN_MODES = ("auto", "all", "price")

_ACTIVE, _WAITING, _FROZEN = 0, 1, 2


@dataclass(frozen=True)
class FillGroup:
    """Jobs raised together: ``kind`` fairness|fifo, weight ``W_g``, member job positions
    (for fifo, in service order: earliest first)."""

    name: str
    kind: str
    weight: float
    members: np.ndarray


@dataclass
class FillOutcome:
    """What one water-filling run produced."""

    X: np.ndarray                       # allocation (rows × configs) of the last level LP
    levels: np.ndarray                  # final level ℓ_m of every job (u units)
    status: Status
    message: str = ""
    deltas: list[float] = field(default_factory=list)          # Δ* per level LP
    frozen_per_iteration: list[int] = field(default_factory=list)
    lp_solves: int = 0
    certified_by_duals: int = 0
    certified_by_slack: int = 0
    certified_by_twins: int = 0         # by reaching their cap, or as twins of certified jobs
    forced: int = 0                     # jobs frozen without a certificate (numerical fallback)
    speculated: int = 0                 # fifo jobs frozen at their caps by verified chain steps
    speculation_failures: int = 0       # chain steps re-solved with a shorter chain
    priced_columns: int = 0             # pair columns admitted by column generation
    priced_rounds: int = 0              # re-solves after admitting priced columns
    compactions: int = 0                # model rebuilds that dropped settled jobs
    cold_retries: int = 0               # LPs re-solved cold after a warm solve failed
    timings: Timings = field(default_factory=Timings)
    trace: list[np.ndarray] | None = None  # guaranteed levels after each iteration (opt-in)

    def summary(self) -> dict[str, Any]:
        return {"iterations": len(self.deltas), "lp_solves": self.lp_solves,
                "pair_columns_priced": self.priced_columns, "pricing_rounds": self.priced_rounds,
                "compactions": self.compactions, "cold_retries": self.cold_retries,
                "certified_by_duals": self.certified_by_duals, "certified_by_twins": self.certified_by_twins,
                "certified_by_slack": self.certified_by_slack,
                "forced": self.forced, "speculated": self.speculated,
                "speculation_failures": self.speculation_failures, "deltas": self.deltas,
                "frozen_per_iteration": self.frozen_per_iteration}


def normalized_throughput(space: AllocationSpace) -> np.ndarray:
    """``ν_m = sf_m / thr(m, X_equal)``, so that ``u_m = ν_m·thr(m)``."""
    return space.scale / space.equal_share_throughput()


class WaterFillingEngine:
    """Builds the level LP once, then runs the levels with in-place bound/cost updates.

    ``normalizer``: ``ν_m`` (``u_m = ν_m·thr(m)``); ``omega``: per-job weights inside fairness groups
    (1 for fifo members); ``capacity``: optional per-type capacity overriding the cluster's counts
    (fractional allowed). ``certify``: ``"duals"`` (exceed test only when a level is stuck) or
    ``"duals+slack"`` (exceed test after every level).

    Warm starts: every change between levels is a bound change that keeps the previous basis primal
    feasible — a frozen job's row ``A_m`` is not relaxed but gets a slack column ``e_m`` whose upper
    bound opens from 0 to ∞ (likewise ``e'_k`` for a group row ``G_k``), and each fifo job has its
    own level column, so starting the next job of a fifo group moves no other row.
    """

    def __init__(self, space: AllocationSpace, normalizer: np.ndarray, groups: Sequence[FillGroup],
                 omega: np.ndarray, solver: Any, options: SolverOptions, *,
                 capacity: np.ndarray | None = None, certify: str = "duals", record_trace: bool = False,
                 max_iterations: int | None = None, polish: bool = False, max_lookahead: int = 256,
                 aggregate: bool = True, pair_columns: str = "auto", pair_seed: int = 4,
                 compact: bool = True, window: int = 64) -> None:
        n = len(space.jobs)
        self.full_space = space
        self.space: Any = space
        self.nu = np.asarray(normalizer, np.float64)
        self.groups = list(groups)
        self.group_of = np.full(n, -1, np.int64)
        for gi, g in enumerate(self.groups):
            if g.kind not in (FAIRNESS, FIFO):
                raise InputError(f"groups.{g.name}.kind", g.kind, "must be 'fairness' or 'fifo'")
            if not g.weight > 0:
                raise InputError(f"groups.{g.name}.weight", g.weight, "must be positive")
            if np.any(self.group_of[g.members] >= 0):
                raise InputError(f"groups.{g.name}.members", g.members.tolist(), "a job is in two groups")
            self.group_of[g.members] = gi
        if np.any(self.group_of < 0):
            raise InputError("groups", np.flatnonzero(self.group_of < 0).tolist(), "jobs in no group")
        self.is_fifo = np.array([g.kind == FIFO for g in self.groups], bool)
        om = np.asarray(omega, np.float64).copy()
        om[self.is_fifo[self.group_of]] = 1.0
        if np.any(om <= 0):
            raise InputError("jobs[].weight", om[om <= 0].tolist(), "weights must be positive")
        self.omega = om
        self.cls = np.arange(n)
        # symmetry reduction and compaction rebuild the model over their own job-class space, which
        # knows only time and per-type capacity rows: spaces that add rows (execution plans: cores,
        # memory, quotas, SLAs) or count workers per slot differently are solved as they are
        plain = _plain_space(space)
        compact = compact and plain
        if aggregate and plain and not space.num_pairs:
            self._aggregate()
            n = len(self.space.jobs)
        # ω_m·q_m: a class of q interchangeable jobs weighs q times one of them in its group
        self.wq = self.omega * getattr(self.space, "mult", np.ones(n))
        self.solver = solver
        self.options = options
        self.capacity = capacity
        self.capacity0 = capacity
        if certify not in ("duals", "duals+slack"):
            raise InputError("options.certify", certify, "must be 'duals' or 'duals+slack'")
        self.certify = certify
        self.record_trace = record_trace
        if pair_columns not in PAIR_COLUMN_MODES:
            raise InputError("options.pair_columns", pair_columns, f"must be one of {list(PAIR_COLUMN_MODES)}")
        self.pair_columns = pair_columns
        self.pair_seed = max(1, int(pair_seed))
        self.price_batch = max(64, len(space.jobs))
        self.priced_rounds = 0
        self.priced_columns = 0
        self.cold_retries = 0
        self.max_iterations = max_iterations if max_iterations is not None else 4 * n + 10
        self.polish = polish
        self.max_lookahead = max(1, int(max_lookahead))
        self.timings = Timings()
        self.lp_solves = 0
        self.cap = self.nu * _max_slot_throughput(self.space)
        self.cap_type = _cap_type(self.space)
        self.twin = np.full(n, -1, np.int64)
        self._level_columns()
        self.twin = self._twins()
        self._xp: np.ndarray | None = None   # last level LP's allocation, made exactly feasible
        # compaction (see _compact): the model holds the jobs idx0 of the space s0 (after aggregation);
        # per-job arrays of s0 are kept to bring waiting fifo jobs back in
        self.compact = bool(compact)
        self.window = max(8, int(window))
        self.compactions = 0
        self.s0 = self.space
        self.idx0 = np.arange(n)
        self.level0 = np.zeros(n)            # final levels of jobs dropped from the model
        self.settled0 = np.zeros(n, bool)    # dropped for good (the others out of the model are waiting)
        P0 = self.space.num_pairs
        self.pairs0 = np.arange(P0)          # s0 pair rows in the model
        self.admitted_pairs0 = np.zeros(P0, bool)  # pair rows whose columns pricing opened
        self.fixed_X0: np.ndarray | None = None  # allocations of settled jobs (rows of s0 × configs)
        self.per_job0 = {"nu": self.nu, "omega": self.omega, "group_of": self.group_of, "wq": self.wq,
                         "cap": self.cap, "cap_type": self.cap_type}
        self.groups0 = list(self.groups)
        self._zero_run = np.zeros(len(self.groups), bool)  # fifo: last job froze at 0 (test the next first)
        self._build()

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
        k_group, k_job = [], []
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
        X = sp_.add_allocation(model)
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
            self.first_algorithm = auto_algorithm(sf, structured=False, sequence=True)
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
        more than ``4·n`` pairs and several groups or a fifo group): only each job's ``pair_seed`` best pairs (by normalized combined
        throughput ``Σ_side Tp/T_best``) start open; :meth:`_solve` admits the others on positive
        reduced cost. ``all``: every pair column is open from the start."""
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

    # ------------------------------------------------------------------ compaction
    def _droppable(self, state: np.ndarray, level: np.ndarray) -> np.ndarray:
        """Settled jobs whose rows and columns can leave the model without changing any later LP:
        frozen at (or within ``_ZERO_TOL`` of) 0 — their allocation, at most that, is kept as it is —
        or frozen at their cap on a unique single-job slot type (``u_m ≥ c_m`` forces their whole
        time onto that type, so their allocation is fixed up to the solver tolerance and is moved
        into the capacity)."""
        frozen = state == _FROZEN
        at_cap = frozen & (level >= self.cap * (1.0 - 1e-9)) & (self.cap_type >= 0)
        out = (frozen & (level <= _ZERO_TOL)) | at_cap
        sp_ = self.space
        if sp_.num_pairs and self._xp is not None and out.any():
            # a job leaves only with its pair rows empty: they leave with it
            busy = self._xp[len(sp_.jobs):].sum(axis=1)
            in_pair = np.zeros(state.size)
            for side in (0, 1):
                np.maximum.at(in_pair, sp_.pair_jobs[:, side], busy)
            out &= in_pair <= 1e-12
        return out

    def _fifo_window(self, lookahead: np.ndarray) -> np.ndarray:
        """Waiting jobs per fifo group held in the model: enough for the longest speculative chain."""
        return np.maximum(self.window, 4 * lookahead)

    def _excess_waiting(self, state: np.ndarray, lookahead: np.ndarray) -> np.ndarray:
        """Waiting fifo jobs beyond their group's window (they hold nothing; they wait outside)."""
        out = np.zeros(state.size, bool)
        win = self._fifo_window(lookahead)
        for gi in np.flatnonzero(self.is_fifo).tolist():
            mem = self.groups[gi].members
            waiting = mem[state[mem] == _WAITING]
            out[waiting[int(win[gi]):]] = True
        return out

    def _pending(self) -> np.ndarray:
        """s0 jobs that are neither in the model nor settled: waiting fifo jobs outside the window."""
        out = ~self.settled0
        out[self.idx0] = False
        return out

    def _want_compact(self, state: np.ndarray, level: np.ndarray, lookahead: np.ndarray) -> bool:
        if not self.compact:
            return False
        shed = self._droppable(state, level) | self._excess_waiting(state, lookahead)
        if shed.sum() >= max(64, state.size // 3):
            return True
        pending = self._pending()
        if not pending.any():
            return False
        # refill: a fifo group with jobs outside the model and too few waiting inside
        need = np.bincount(self.per_job0["group_of"][pending], minlength=len(self.groups)) > 0
        for gi in np.flatnonzero(need & self.is_fifo).tolist():
            mem = self.groups[gi].members
            if int((state[mem] == _WAITING).sum()) <= lookahead[gi]:
                return True
        return False

    def _to_s0(self, values: np.ndarray) -> np.ndarray:
        """Per-job values of the model's jobs as values over ``s0`` (others: their final levels, 0
        for waiting jobs outside the model)."""
        if self.idx0.size == self.level0.size and self.fixed_X0 is None:
            return values
        v0 = self.level0.copy()
        v0[self.idx0] = values
        return v0

    def _compact(self, state: np.ndarray, level: np.ndarray, beta: np.ndarray,
                 lookahead: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Rebuild the level LP over the jobs still in play. Settled jobs leave for good (exact: see
        :meth:`_droppable`): their levels and allocations are kept aside and the capacity shrinks by
        what they use. Waiting fifo jobs beyond their group's window leave too, and jobs waiting
        outside come back when a group's window runs short — a waiting job holds nothing and enters
        no row, so where it waits changes no LP. Every per-job and per-level-column array is
        re-indexed; the next LP starts cold on the smaller model. An LP's cost grows with its size,
        so this pays on long fifo chains (most of their jobs wait, then end at their cap or at 0)."""
        s0 = self.s0
        n0, C = len(s0.jobs), len(s0.configs)
        if self.fixed_X0 is None:
            self.fixed_X0 = np.zeros((len(s0.rows), C))
        xp0 = np.zeros((len(s0.rows), C))
        if self._xp is not None:
            xp0[self.rows0] = self._xp
        if self.pricing:  # pair rows pricing opened stay open in the next model
            self.admitted_pairs0[self.pairs0[self._admitted_pair_rows()]] = True
        drop = self._droppable(state, level)
        gone = np.flatnonzero(drop)
        self.fixed_X0[self.idx0[gone]] = xp0[self.idx0[gone]]
        self.level0[self.idx0[gone]] = level[gone]
        self.settled0[self.idx0[gone]] = True
        # s0-wide view of who is waiting, then each fifo group's window (in its fifo order)
        state0 = np.full(n0, _FROZEN, np.int64)
        state0[self._pending()] = _WAITING
        state0[self.idx0] = state
        state0[self.settled0] = _FROZEN
        inmodel = ~self.settled0 & (state0 != _WAITING)
        win = self._fifo_window(lookahead)
        for gi, g in enumerate(self.groups0):
            waiting = g.members[state0[g.members] == _WAITING]
            inmodel[waiting[: int(win[gi]) if self.is_fifo[gi] else waiting.size]] = True
        new_idx0 = np.flatnonzero(inmodel)
        # per-model-job values carried over (jobs coming back in: waiting, level 0, nothing held)
        pos = np.full(n0, -1, np.int64)
        pos[self.idx0] = np.arange(self.idx0.size)
        old = pos[new_idx0]
        came = old < 0
        oldc = np.maximum(old, 0)
        new_state = np.where(came, _WAITING, state[oldc])
        new_level = np.where(came, 0.0, level[oldc])
        old_k_of_job = self.k_of_job
        fair_k = np.full(len(self.groups), -1, np.int64)
        fk = self.k_job < 0
        fair_k[self.k_group[fk]] = np.flatnonzero(fk)
        # capacity left for the model: the base capacity minus what every settled job uses
        base = np.asarray(self.capacity0 if self.capacity0 is not None else s0.counts, float)
        per_config = ((self._mult0(np.arange(n0)) * s0.scale)[:, None] * self.fixed_X0[:n0]).sum(axis=0)
        remaining = np.maximum(base - np.bincount(s0.config_type, weights=per_config, minlength=base.size), 0.0)
        # rebuild the model's job space and re-index
        self.idx0 = new_idx0
        if isinstance(s0, _ClassSpace):
            self.space = _ClassSpace(self._full_of_s0(), self._rep0(new_idx0), self._mult0(new_idx0))
            self.pairs0 = np.zeros(0, np.int64)
        else:  # the base space (possibly with pairs): pair rows whose two jobs stay
            inv0 = np.full(n0, -1, np.int64)
            inv0[new_idx0] = np.arange(new_idx0.size)
            self.pairs0 = (np.flatnonzero((inv0[s0.pair_jobs] >= 0).all(axis=1)) if s0.num_pairs
                           else np.zeros(0, np.int64))
            self.space = s0.restrict(new_idx0, self.pairs0)
        for key, arr in self.per_job0.items():
            setattr(self, key, arr[new_idx0])
        pos[:] = -1
        pos[new_idx0] = np.arange(new_idx0.size)
        self.groups = [FillGroup(g.name, g.kind, g.weight, pos[g.members][pos[g.members] >= 0]) for g in self.groups0]
        self._level_columns()
        kj = np.maximum(self.k_job, 0)
        from_job = (self.k_job >= 0) & ~came[kj]
        old_k = np.where(self.k_job >= 0, old_k_of_job[oldc[kj]], fair_k[self.k_group])
        beta = np.where(from_job | (self.k_job < 0), beta[np.maximum(old_k, 0)], 0.0)
        self.twin = self._twins()
        self._xp = xp0[self.rows0]
        self.capacity = remaining
        self.compactions += 1
        self._build()
        return new_state, new_level, beta

    @property
    def rows0(self) -> np.ndarray:
        """s0 rows of the model's rows: its jobs, then its pairs."""
        return np.concatenate([self.idx0, len(self.s0.jobs) + self.pairs0])

    def _full_of_s0(self) -> Any:
        return self.s0.full if isinstance(self.s0, _ClassSpace) else self.s0

    def _rep0(self, idx: np.ndarray) -> np.ndarray:
        """Rows of the full space behind jobs ``idx`` of ``s0``."""
        return self.s0.rep[idx] if isinstance(self.s0, _ClassSpace) else idx

    def _mult0(self, idx: np.ndarray) -> np.ndarray:
        return self.s0.mult[idx] if isinstance(self.s0, _ClassSpace) else np.ones(idx.size)

    def _admitted_pair_rows(self) -> np.ndarray:
        """Pair rows of the model with an admitted column."""
        n = len(self.space.jobs)
        pc = self.X.cols[n:]
        open_col = np.zeros(self.sf.num_cols, bool)
        open_col[self.col_x[self.admitted]] = True
        return ((pc >= 0) & open_col[np.maximum(pc, 0)]).any(axis=1)

    def _initial_state(self) -> np.ndarray:
        state = np.full(len(self.space.jobs), _WAITING, np.int64)
        for g in self.groups:
            if g.kind == FAIRNESS:
                state[g.members] = _ACTIVE
            elif g.members.size:
                state[g.members[0]] = _ACTIVE
        return state

    # ------------------------------------------------------------------ bound pushes (diffs only)
    def _push(self, key: str, kind: str, idx: np.ndarray, new: np.ndarray) -> None:
        cur = self._cur[key]
        ch = np.flatnonzero(~((cur == new) | (np.isnan(cur) & np.isnan(new))))
        if not ch.size:
            return
        cur[ch] = new[ch]
        inf = np.full(ch.size, np.inf)
        if kind == "col_hi":
            self.loaded.set_col_bounds(idx[ch], np.zeros(ch.size), new[ch])
        elif kind == "col_fix":  # 1 → fixed at 0, 0 → free
            lo = np.where(new[ch] > 0, 0.0, -np.inf)
            self.loaded.set_col_bounds(idx[ch], lo, -lo)
        else:  # row lower bounds
            self.loaded.set_row_bounds(idx[ch], new[ch], inf)

    def _apply(self, state: np.ndarray, level: np.ndarray, beta: np.ndarray,
               open_jobs: np.ndarray | None = None) -> np.ndarray:
        """Bounds of one level LP; returns which level columns are active. ``open_jobs``: jobs whose
        columns stay open even if they are waiting or frozen at 0 (the exceed test's candidates)."""
        active = state == _ACTIVE
        k_act = np.zeros(self.k_group.size, bool)
        k_act[self.k_of_job[active]] = True
        self._push("e_hi", "col_hi", self.col_e, np.where(active, 0.0, np.inf))
        self._push("eg_hi", "col_hi", self.col_eg, np.where(k_act, 0.0, np.inf))
        self._push("F_lo", "row_lo", self.rows_F, np.where(state == _FROZEN, level, -np.inf))
        fair = self.col_mu >= 0
        self._push("mu_fix", "col_fix", self.col_mu[fair], np.where(active[fair], 0.0, 1.0))
        # a waiting fifo job (or one frozen at exactly 0) holds no allocation: its columns are closed,
        # which keeps the simplex from pivoting through allocations nobody asked for
        closed = (state == _WAITING) | ((state == _FROZEN) & (level <= 0.0))
        if open_jobs is not None:
            closed &= ~open_jobs
        shut = np.zeros(self.col_x.size, bool)
        shut[self._slot_pos[closed[self._slot_job]]] = True
        self._shut = shut
        self._push("x_hi", "col_hi", self.col_x, np.where(shut | ~self.admitted, 0.0, 1.0))
        Omega = np.bincount(self.k_of_job[active], weights=self.wq[active], minlength=self.k_group.size)
        B = np.where(self.k_job >= 0, beta, Omega * beta)
        self._push("G_lo", "row_lo", self.rows_G, np.where(k_act, B, -np.inf))
        return k_act

    # ------------------------------------------------------------------ run
    def run(self) -> FillOutcome:
        n, K = len(self.space.jobs), self.k_group.size
        state = self._initial_state()
        beta = np.zeros(K)
        level = np.zeros(n)
        out = FillOutcome(X=np.zeros((len(self.space.rows), len(self.space.configs))), levels=level,
                          status=Status.OPTIMAL, trace=[] if self.record_trace else None)
        x_last: np.ndarray | None = None
        thr = self.space.throughput_matrix()
        lookahead = np.ones(len(self.groups), np.int64)  # fifo: jobs per chain step (1 = no speculation)
        streak = np.zeros(len(self.groups), np.int64)     # fifo: jobs frozen at their caps in a row
        stuck_run = 0
        while True:
            stalled = self.compact and not np.any(state == _ACTIVE) and self._pending().any()
            if stalled or self._want_compact(state, level, lookahead):
                state, level, beta = self._compact(state, level, beta, lookahead)
                thr = self.space.throughput_matrix()
                x_last = None
                for gi in np.flatnonzero(self.is_fifo).tolist():  # groups that ran out of waiting jobs
                    mem = self.groups[gi].members
                    if mem.size and not np.any(state[mem] == _ACTIVE):
                        self._start_next(gi, state, level, beta, bool(self._zero_run[gi]), out)
            if not np.any(state == _ACTIVE):
                if self.compact and self._pending().any():
                    continue  # a fifo group's window was used up: refill it (progress: jobs come in)
                break
            if len(out.deltas) >= self.max_iterations:
                out.status, out.message = Status.ERROR, f"water-filling stopped after {len(out.deltas)} levels"
                break
            plan = self._plan(state, level, lookahead)
            while True:
                st, lv, bt = self._speculative_state(state, level, beta, plan)
                k_act = self._apply(st, lv, bt)
                res = self._solve()
                failed = self._failed_chains(res, plan, beta)
                if not failed:
                    break
                out.speculation_failures += 1
                for gi, landed in failed.items():
                    lookahead[gi], streak[gi] = 1, 0  # contention ahead: speculate again only after 2 caps
                    if landed == 0:
                        del plan[gi]
                    else:
                        plan[gi] = plan[gi][: landed + 1]
            if not res.ok or res.x is None or res.row_duals is None:
                out.status = res.status
                out.message = f"level LP {len(out.deltas) + 1}: {res.status.value} ({res.message})"
                break
            for gi, chain in plan.items():  # verified: the speculated jobs froze at their caps
                out.speculated += len(chain) - 1
                lookahead[gi] = len(chain)
            spec_frozen = int((st == _FROZEN).sum() - (state == _FROZEN).sum())
            state, level, beta = st, lv, bt
            active = state == _ACTIVE
            x_last = res.x
            d = max(float(res.x[self.col_delta[0]]), 0.0)
            out.deltas.append(d)
            self._xp = self._project(self.X.value(res.x))
            u = (thr @ self._xp.ravel()) * self.nu
            # floors never above what the solution delivers (it may violate bounds by the solver's
            # tolerance), so the next LP always has this solution as a feasible point
            frozen = state == _FROZEN
            level[frozen] = _floor_at(level[frozen], u[frozen])
            # new levels: what the LP promised, never above what its solution delivers
            inc = self._rates(active) * d
            delivered = np.full(self.k_group.size, np.inf)
            np.minimum.at(delivered, self.k_of_job[active], u[active] / self.omega[active])
            beta = np.where(k_act, np.maximum(_floor_at(beta + inc, delivered), 0.0), beta)
            yA = res.row_duals[self.rows_A]
            tau = _DUAL_TOL * max(float(np.abs(yA[active]).sum()), 1e-300)
            cert = active & (yA < -tau)
            if not cert.any():  # numerically degenerate: freeze the job with the strongest dual
                cand = np.flatnonzero(active)
                cert[cand[np.argmin(yA[cand])]] = True
                out.forced += 1
            out.certified_by_duals += int(cert.sum())
            more = self._cheap_certificates(cert, active, beta)
            out.certified_by_twins += int(more.sum())
            cert |= more
            # stuck: no level rose by more than the tolerance (margins of _floor_at move levels by 1e-8)
            stuck = bool(np.all(inc[k_act] <= _SLACK_TOL * np.maximum(1.0, beta[k_act])))
            rest = active & ~cert
            stuck_run = stuck_run + 1 if stuck else 0
            if rest.any() and (stuck or self.certify == "duals+slack"):
                # a stuck level: typically the rest of a fairness group that lost a member is
                # bottlenecked too — test those first (one LP), everything left only if stuck again
                hit = np.unique(self.group_of[cert & ~self.is_fifo[self.group_of]])
                tests = [rest & np.isin(self.group_of, hit)]
                if stuck_run >= 3 or self.certify == "duals+slack":
                    tests.append(rest)
                st = state.copy()
                st[cert] = _FROZEN
                lv = np.where(cert, self.omega * beta[self.k_of_job], level)
                for cand in tests:
                    cand = cand & ~cert
                    if cand.any() and not self._can_exceed(cand, st, lv, beta):
                        out.certified_by_slack += int(cand.sum())
                        cert |= cand
                        break
            newly = np.flatnonzero(cert)
            level[newly] = self.omega[newly] * beta[self.k_of_job[newly]]
            state[newly] = _FROZEN
            # fifo jobs freezing at their caps one after another: look further ahead (doubling from the
            # second one); a job that froze below its cap met contention: stop speculating there
            for h in newly[self.is_fifo[self.group_of[newly]]].tolist():
                gi = self.group_of[h]
                if level[h] >= self.cap[h] * (1.0 - 1e-6):
                    streak[gi] += 1
                    if streak[gi] >= 2:
                        lookahead[gi] = min(2 * lookahead[gi], self.max_lookahead)
                else:
                    lookahead[gi], streak[gi] = 1, 0
            nfrozen = newly.size + spec_frozen
            nfrozen += self._advance_fifo(state, level, beta, newly, out)
            out.frozen_per_iteration.append(int(nfrozen))
            if out.trace is not None:
                out.trace.append(self._to_s0(self._guaranteed_levels(state, level, beta)))
        if out.status is Status.OPTIMAL and x_last is not None and self.polish:
            polished = self._polish(state, level)
            x_last = polished if polished is not None else x_last
        out.lp_solves = self.lp_solves
        out.priced_columns, out.priced_rounds = self.priced_columns, self.priced_rounds
        full = self.full_space
        out.X = np.zeros((len(full.rows), len(full.configs)))
        if x_last is not None or self.fixed_X0 is not None:
            Xc = self.X.value(x_last) if x_last is not None else self._xp
            if self.fixed_X0 is not None:  # compacted: dropped jobs' allocations + the model's
                X0 = self.fixed_X0.copy()
                if Xc is not None:
                    X0[self.rows0] = Xc
                Xc = X0
            if self.s0 is full:
                out.X = Xc
            else:
                out.X[: len(full.jobs)] = Xc[self.cls]
        out.levels = self._expand(self._to_s0(level))
        out.compactions = self.compactions
        out.cold_retries = self.cold_retries
        if out.trace is not None:
            out.trace = [self._expand(t) for t in out.trace]
        out.timings = self.timings
        return out

    def _cheap_certificates(self, cert: np.ndarray, active: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """Bottlenecks proved without an LP: (a) a job whose level reached its cap ``c_m`` can never
        exceed it; (b) a *twin* of a certified job (same fairness group, weight, scale factor and
        throughputs, no pair rows) is at the same level and, by the symmetry that swaps the two
        jobs, bottlenecked too."""
        lv = self.omega * beta[self.k_of_job]
        more = active & ~cert & (lv >= self.cap * (1.0 - 1e-9))
        done = cert | more
        hit = np.unique(self.twin[done & (self.twin >= 0)])
        if hit.size:
            more |= active & ~done & np.isin(self.twin, hit)
        return more

    def _twins(self) -> np.ndarray:
        """Class id of interchangeable fairness members (``-1``: fifo, or in a pair row)."""
        sp_ = self.space
        n = len(sp_.jobs)
        ok = ~self.is_fifo[self.group_of]
        if sp_.num_pairs:
            ok[sp_.pair_jobs.ravel()] = False
        key = np.column_stack([self.group_of, self.omega, sp_.scale, np.where(sp_.single_mask, sp_.T, 0.0)])
        cls = np.full(n, -1, np.int64)
        if ok.any():
            _, inv = np.unique(key[ok], axis=0, return_inverse=True)
            cls[ok] = inv.ravel()
        return cls

    # ------------------------------------------------------------------ speculative fifo chains
    def _plan(self, state: np.ndarray, level: np.ndarray, lookahead: np.ndarray) -> dict[int, np.ndarray]:
        """Per fifo group with lookahead ``L > 1``: the chain ``[head, next, ...]`` of up to ``L`` jobs.
        All but the last are *speculated* to rise to their cap ``c_m`` (the largest ``u_m`` any
        allocation can give them); the last is the active job."""
        plan: dict[int, np.ndarray] = {}
        # a job at its cap runs all the time on a cap slot: a chain is cut where the workers its jobs
        # need on their cap type exceed what the last solution left free (a heuristic that avoids
        # most infeasible chain steps; a chain that fails anyway is re-solved shorter)
        counts = np.asarray(self.capacity if self.capacity is not None else self.space.counts, float)
        if self._xp is None:
            return plan
        cap_m = self.space.capacity_matrix()
        used = np.bincount(cap_m.rows, weights=cap_m.vals * self._xp.ravel()[cap_m.cols], minlength=counts.size)
        memb = self.space.membership_matrix()
        for gi in np.flatnonzero(self.is_fifo & (lookahead > 1)).tolist():
            mem = self.groups[gi].members
            live = mem[(state[mem] == _ACTIVE) | (state[mem] == _WAITING)]
            if live.size < 2 or state[live[0]] != _ACTIVE:
                continue
            chain = live[: int(lookahead[gi])]
            spec = chain[:-1]
            on_head = np.isin(cap_m.cols, memb.cols[memb.rows == chain[0]])
            head_use = np.bincount(cap_m.rows[on_head], minlength=counts.size,
                                   weights=cap_m.vals[on_head] * self._xp.ravel()[cap_m.cols[on_head]])
            t = self.cap_type[spec]
            need = np.zeros((spec.size, used.size))
            ok_t = t >= 0
            need[np.flatnonzero(ok_t), t[ok_t]] = self.space.scale[spec[ok_t]]
            over = np.any(used - head_use + np.cumsum(need, axis=0) > counts * (1 + 1e-9), axis=1)
            fits = int(np.argmax(over)) if over.any() else spec.size
            if fits >= 1:
                plan[gi] = chain[: fits + 1]
                used = used + need[:fits].sum(axis=0)
        return plan

    def _speculative_state(self, state: np.ndarray, level: np.ndarray, beta: np.ndarray,
                           plan: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """State of a chain step: speculated jobs held at their caps, the chain's last job active
        with level ``β_head + W·Δ − Σ caps`` (the water left after the earlier jobs are full)."""
        st, lv, bt = state.copy(), level.copy(), beta.copy()
        for chain in plan.values():
            spec, last = chain[:-1], chain[-1]
            st[spec] = _FROZEN
            lv[spec] = self.cap[spec] * (1.0 - 1e-9)
            st[last] = _ACTIVE
            bt[self.k_of_job[last]] = beta[self.k_of_job[chain[0]]] - float(self.cap[spec].sum())
        return st, lv, bt

    def _failed_chains(self, res: Any, plan: dict[int, np.ndarray], beta: np.ndarray) -> dict[int, int]:
        """Chains whose water ``β_head + W·Δ*`` did not reach their last job: ``{group: jobs covered}``.
        A chain that reached it is exact: each speculated job hits its cap at an earlier water level,
        where every other requirement is lower, and no job can exceed its cap."""
        if not plan:
            return {}
        if not res.ok or res.x is None:
            return {gi: 0 for gi in plan}
        d = float(res.x[self.col_delta[0]])
        failed: dict[int, int] = {}
        for gi, chain in plan.items():
            W = self.W[gi] if len(self.groups) > 1 else 1.0
            water = beta[self.k_of_job[chain[0]]] + W * d
            a = np.cumsum(self.cap[chain[:-1]])
            if water < a[-1] * (1.0 - 1e-9) - 1e-12:
                failed[gi] = int(np.searchsorted(a, water * (1.0 + 1e-12), side="right"))
        return failed

    def _project(self, X: np.ndarray) -> np.ndarray:
        """The LP solution made exactly feasible (:meth:`AllocationSpace.project`, against the
        engine's capacity): requirements are set from this allocation, so they are always attainable."""
        return AllocationSpace.project(self.space, X, self.capacity)

    def _solve(self) -> Any:
        """Re-solve: the first (cold) solve with the configured algorithm — ``auto`` means interior
        point + crossover on large models — then warm primal simplex from the last basis."""
        t0 = time.perf_counter()
        # every LP here has a feasible point (the last solution, made exactly feasible), so an
        # infeasible or unknown answer is numerical: resolve() checks it by one cold solve
        before = self.loaded.cold_retries
        res = self.loaded.resolve()
        self.cold_retries += self.loaded.cold_retries - before
        if self._model_solves == 0 and self.options.algorithm in ("auto", "simplex"):
            _use_algorithm(self.loaded, "simplex")
        self._model_solves += 1
        self.lp_solves += 1
        while self.pricing and res.ok and res.col_duals is not None:
            # column generation: a closed pair column with a positive reduced cost could raise the
            # objective; open those and re-solve (warm) until none is left — then x and the duals are
            # optimal for the LP over ALL pair columns, so every certificate above stays exact
            d = res.col_duals[self.col_x]
            enter = ~self.admitted & ~self._shut & (d > _PRICE_TOL)
            if not enter.any():
                break
            if enter.sum() > self.price_batch:  # partial pricing: the most attractive columns first
                cand = np.flatnonzero(enter)
                enter[:] = False
                enter[cand[np.argpartition(-d[cand], self.price_batch)[: self.price_batch]]] = True
            self.admitted |= enter
            self._cur["x_hi"][enter] = 1.0
            k = int(enter.sum())
            self.loaded.set_col_bounds(self.col_x[enter], np.zeros(k), np.ones(k))
            self.priced_rounds += 1
            self.priced_columns += k
            res = self.loaded.solve()
            self.lp_solves += 1
        self.timings.solve += time.perf_counter() - t0
        return res

    def _guaranteed_levels(self, state: np.ndarray, level: np.ndarray, beta: np.ndarray) -> np.ndarray:
        """Level every job is guaranteed after this iteration (frozen: ℓ; active: ω·β; waiting: 0)."""
        cur = np.where(state == _ACTIVE, self.omega * beta[self.k_of_job], 0.0)
        return np.where(state == _FROZEN, level, cur)

    def _advance_fifo(self, state: np.ndarray, level: np.ndarray, beta: np.ndarray, newly: np.ndarray,
                      out: FillOutcome) -> int:
        """Start the next job of every fifo group whose current job froze (see :meth:`_start_next`).
        Returns how many jobs the zero tests froze."""
        extra = 0
        heads = newly[self.is_fifo[self.group_of[newly]]]
        for h in heads.tolist():
            extra += self._start_next(int(self.group_of[h]), state, level, beta, bool(level[h] <= _ZERO_TOL), out)
        return extra

    def _start_next(self, gi: int, state: np.ndarray, level: np.ndarray, beta: np.ndarray, zero: bool,
                    out: FillOutcome) -> int:
        """Activate the first waiting job of fifo group ``gi``. When the previous job froze at level 0
        (``zero``), first test (one LP) whether any waiting job of the group in the model can get
        anything at all; if none can, they all freeze at 0 now (each would be bottlenecked at 0 on
        its turn, since levels only rise). Returns how many jobs that froze."""
        mem = self.groups[gi].members
        waiting = mem[state[mem] == _WAITING]
        self._zero_run[gi] = zero
        if not waiting.size:
            return 0
        start, frozen = 0, 0
        if zero:
            # the first waiting job that can get anything: test waiting[lo:hi]; a job that gains in
            # the test's solution can, so the search narrows to the jobs before the first such one;
            # a range where nobody gains is proven stuck at 0 (levels only rise: each would be on
            # its turn) and the job after it — shown able to gain by an earlier test — starts
            lo, hi = 0, waiting.size
            while lo < hi:
                cand = np.zeros(state.size, bool)
                cand[waiting[lo:hi]] = True
                gain = self._exceed_amounts(cand, state, level, beta, abs_tol=_ZERO_TOL)
                if gain is None:
                    break
                first = np.flatnonzero(gain[waiting[lo:hi]])
                if first.size:
                    hi = lo + int(first[0])
                    continue
                state[waiting[lo:hi]] = _FROZEN
                level[waiting[lo:hi]] = 0.0
                out.certified_by_slack += hi - lo
                frozen += hi - lo
                lo = hi
                break
            start = lo
            if start >= waiting.size:
                return frozen
        nxt = waiting[start]
        state[nxt] = _ACTIVE
        beta[self.k_of_job[nxt]] = 0.0
        self._zero_run[gi] = False
        return frozen

    def _rates(self, active: np.ndarray) -> np.ndarray:
        """``r_k = dλ_k/dΔ``: ``W_g/Ω_g`` (fairness, ``Ω_g`` = Σ ω over active members), ``W_g`` (fifo);
        a problem with one group uses ``W = 1``."""
        K = self.k_group.size
        Wk = self.W[self.k_group] if len(self.groups) > 1 else np.ones(K)
        Omega = np.bincount(self.k_of_job[active], weights=self.wq[active], minlength=K)
        return np.where(self.k_job >= 0, Wk, Wk / np.where(Omega > 0, Omega, 1.0))

    def _can_exceed(self, cand: np.ndarray, state: np.ndarray, level: np.ndarray, beta: np.ndarray,
                    abs_tol: float = 0.0) -> bool:
        """One LP (:meth:`_exceed_amounts`); ``False`` (optimum 0) proves that no candidate can
        exceed its level."""
        gain = self._exceed_amounts(cand, state, level, beta, abs_tol)
        return gain is None or bool(gain.any())

    def _exceed_amounts(self, cand: np.ndarray, state: np.ndarray, level: np.ndarray, beta: np.ndarray,
                        abs_tol: float = 0.0) -> np.ndarray | None:
        """One LP: ``Δ = 0``, every job held at its guaranteed level (active: ``ω·β``, frozen: ℓ,
        waiting: 0); maximize ``Σ_{m∈cand} s_m`` with ``s_m ≤ u_m − level_m``, ``s_m ∈ [0, 1]``.
        Returns which candidates gain more than the tolerance in the optimal solution — each of them
        *can* exceed its level (the solution shows how) — or ``None`` when the LP gave no answer.
        All ``False`` (optimum 0) proves that no candidate can."""
        n = state.size
        L = self.loaded
        self._apply(state, level, beta, open_jobs=cand)
        guaranteed = self._guaranteed_levels(state, level, beta)
        F_lo = np.where(cand, guaranteed, np.where(state == _FROZEN, level, -np.inf))
        self._push("F_lo", "row_lo", self.rows_F, F_lo)
        L.set_col_bounds(self.col_delta, np.zeros(1), np.zeros(1))
        cap = np.where(cand, 1.0, 0.0)
        L.set_col_bounds(self.col_s, np.zeros(n), cap)
        L.set_costs(self.col_delta, np.zeros(1))
        L.set_costs(self.col_s, cap)
        res = self._solve()
        L.set_costs(self.col_s, np.zeros(n))
        L.set_costs(self.col_delta, np.ones(1))
        L.set_col_bounds(self.col_s, np.zeros(n), np.zeros(n))
        L.set_col_bounds(self.col_delta, np.full(1, -np.inf), np.full(1, np.inf))
        if not res.ok or res.x is None:
            return None  # no proof: keep the jobs unfrozen (always safe)
        tol = max(_SLACK_TOL * max(float(guaranteed[cand].max(initial=0.0)), 1.0), abs_tol)
        return cand & (res.x[self.col_s] > tol)

    def _polish(self, state: np.ndarray, level: np.ndarray) -> np.ndarray | None:
        """Final LP: every job held at its level, maximize ``Σ_m u_m``. Any optimum of a positive
        combination of the ``u_m`` over that set is Pareto-efficient, so the returned allocation gives
        away nothing the level back-off left on the table."""
        L = self.loaded
        self._apply(state, level, np.zeros(self.k_group.size))
        L.set_col_bounds(self.col_delta, np.zeros(1), np.zeros(1))
        grad = self.space.throughput_matrix().tocsr().T @ self.nu  # ∂(Σ u)/∂X over (rows, configs), C order
        xc = self.X.cols.ravel()
        keep = xc >= 0
        L.set_costs(self.col_delta, np.zeros(1))
        L.set_costs(xc[keep], grad[keep])
        res = self._solve()
        if not res.ok or res.x is None:
            return None
        return res.x


def _floor_at(target: np.ndarray, delivered: np.ndarray) -> np.ndarray:
    """A requirement for the next LP: ``target`` where the current solution delivers it, else what it
    delivers minus a margin of ``1e-8`` (relative), so the current solution stays strictly feasible
    even where it violates a bound by the solver's tolerance; nothing drifts while targets are met."""
    short = delivered < target
    safe = np.where(short, delivered, 0.0)
    return np.where(short, safe - _MARGIN * np.maximum(1.0, np.abs(safe)), target)


def _max_slot_throughput(space: AllocationSpace) -> np.ndarray:
    """Per job, the largest throughput of any slot it can occupy (alone or in a pair): with total
    time ≤ 1, ``thr(m)`` can never exceed it."""
    best = np.where(space.single_mask, space.T, 0.0).max(axis=1)
    if space.num_pairs:
        for side in (0, 1):
            np.maximum.at(best, space.pair_jobs[:, side],
                          np.where(space.pair_mask, space.Tp[:, :, side], 0.0).max(axis=1))
    return best


def _plain_space(space: AllocationSpace) -> bool:
    """True when the space's rows are the base ones (job time, per-type capacity with ``sf`` workers
    per slot): no subclass overrides how rows are added or how slots count workers."""
    cls = type(space)
    return (cls.add_allocation is AllocationSpace.add_allocation
            and cls.slot_workers is AllocationSpace.slot_workers)


def _unique_in_order(a: np.ndarray) -> np.ndarray:
    _, idx = np.unique(a, return_index=True)
    return a[np.sort(idx)]


class _ClassSpace:
    """The allocation space of job classes (see :meth:`WaterFillingEngine._aggregate`): one row per
    class, per-member allocation ``X[class, config]``; per-member time ``Σ_c X ≤ 1``; capacity
    ``Σ_class q·sf·X[class, c on t] ≤ count_t``; ``thr`` per member. Single rows only (no pairs)."""

    def __init__(self, space: AllocationSpace, rep: np.ndarray, mult: np.ndarray) -> None:
        self.full = space
        self.rep = np.asarray(rep, np.int64)
        self.jobs = IndexSet("jobs", [f"class{i}" for i in range(rep.size)])
        self.rows = IndexSet("rows", self.jobs.labels)
        self.configs = space.configs
        self.worker_types = space.worker_types
        self.counts = space.counts
        self.config_type = space.config_type
        self.T = space.T[rep]
        self.scale = space.scale[rep]
        self.single_mask = space.single_mask[rep]
        self.mask = self.single_mask
        self.mult = mult
        self.num_pairs = 0
        self.pair_jobs = np.zeros((0, 2), np.int64)
        self.pair_mask = np.zeros((0, len(self.configs)), bool)
        self.Tp = np.zeros((0, len(self.configs), 2))

    def _slots(self) -> tuple[np.ndarray, np.ndarray]:
        return np.nonzero(self.single_mask)

    def throughput_matrix(self) -> Triplets:
        jj, cc = self._slots()
        C = len(self.configs)
        return Triplets(jj, jj * C + cc, self.T[jj, cc], (len(self.jobs), len(self.jobs) * C))

    def membership_matrix(self) -> Triplets:
        jj, cc = self._slots()
        C = len(self.configs)
        return Triplets(jj, jj * C + cc, np.ones(jj.size), (len(self.jobs), len(self.jobs) * C))

    def throughput_values(self, X: np.ndarray) -> np.ndarray:
        return self.throughput_matrix() @ X.ravel()

    def throughput(self, X: Variable) -> LinExpr:
        return LinExpr.from_matrix(self.throughput_matrix(), X, (self.jobs,))

    def capacity_matrix(self) -> Triplets:
        jj, cc = self._slots()
        C = len(self.configs)
        return Triplets(self.config_type[cc], jj * C + cc, self.mult[jj] * self.scale[jj],
                        (len(self.worker_types), len(self.jobs) * C))

    # the base space's rows and projection, over this space's matrices
    add_allocation = AllocationSpace.add_allocation
    project = AllocationSpace.project


def _cap_type(space: AllocationSpace) -> np.ndarray:
    """Per job, the physical type of its unique cap slot when that is a single-job slot (``-1`` when
    the best slot is tied across types or is a pair slot: no capacity precheck then)."""
    single = np.where(space.single_mask, space.T, 0.0)
    best = single.max(axis=1)
    hits = single >= best[:, None] * (1 - 1e-12)
    types = np.full(len(space.jobs), -1, np.int64)
    for t in range(space.counts.size):
        on_t = hits[:, space.config_type == t].any(axis=1)
        types = np.where(on_t & (types == -1), t, np.where(on_t, -2, types))
    types[types == -2] = -1
    if space.num_pairs:
        pb = np.zeros(len(space.jobs))
        for side in (0, 1):
            np.maximum.at(pb, space.pair_jobs[:, side], np.where(space.pair_mask, space.Tp[:, :, side], 0).max(axis=1))
        types[pb >= best] = -1
    return types


def _use_algorithm(loaded: LoadedModel, algorithm: str) -> None:
    """Switch the LP algorithm of a loaded model for its next solves. HiGHS: the ``solver`` option,
    and for simplex the primal variant (strategy 4): between levels the previous basis stays primal
    feasible, so primal simplex needs a handful of pivots where dual simplex needs hundreds."""
    loaded.options = loaded.options.with_(algorithm=algorithm)
    h = getattr(loaded, "h", None)
    if h is not None and hasattr(h, "setOptionValue"):
        h.setOptionValue("solver", algorithm)
        if algorithm == "simplex":
            h.setOptionValue("simplex_strategy", 4)
