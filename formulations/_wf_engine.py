"""The water-filling engine: one loaded LP, levels raised by in-place bound updates.

See :mod:`policyopt.formulations.water_filling` for what is computed and why it is exact; this
module holds the machinery (model, certificates, speed-ups) shared by ``max_min_fairness_water_filling``,
``hierarchical`` and the benchmarks.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.result import Status, Timings
from policyopt.solver_api import SolverOptions

from ._wf_certificates import _LevelSteps
from ._wf_common import (
    _ACTIVE,
    _DUAL_TOL,
    _FROZEN,
    _PRICE_TOL,
    _SLACK_TOL,
    _WAITING,
    FAIRNESS,
    FIFO,
    PAIR_COLUMN_MODES,
    FillGroup,
    FillOutcome,
    _cap_type,
    _floor_at,
    _max_slot_throughput,
    _plain_space,
    _use_algorithm,
    normalized_throughput,
)
from ._wf_compaction import _CompactionSteps
from ._wf_model import _ModelSteps

__all__ = ["FAIRNESS", "FIFO", "FillGroup", "FillOutcome", "WaterFillingEngine", "normalized_throughput"]


@dataclass
class _Loop:
    """What :meth:`WaterFillingEngine.run` carries from level to level: job states, frozen jobs'
    floors ``ℓ``, group levels ``β``, the outcome so far, the throughput matrix of the current
    model, per fifo group the length of its last chain (sizes its window), the speculated cap events
    per level LP (``events``, 0 = off) and how many levels in a row froze fifo jobs only at their
    caps (``streak``), the last level LP's solution and how many levels in a row were stuck."""

    state: np.ndarray
    level: np.ndarray
    beta: np.ndarray
    out: FillOutcome
    thr: Any
    lookahead: np.ndarray
    events: int = 0
    streak: int = 0
    spec_failed: bool = False
    x_last: np.ndarray | None = None
    stuck_run: int = 0


class WaterFillingEngine(_ModelSteps, _CompactionSteps, _LevelSteps):
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
                 compact: bool = True, window: int = 32) -> None:
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
        self.stall_retries = 0  # unperturbed warm solves that stalled and were re-solved perturbed
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
        self._exceed_res: Any = None  # the last exceed test's LP result (its prices settle jobs outside the model)
        self._build()

    def _initial_state(self) -> np.ndarray:
        state = np.full(len(self.space.jobs), _WAITING, np.int64)
        for g in self.groups:
            if g.kind == FAIRNESS:
                state[g.members] = _ACTIVE
            elif g.members.size:
                state[g.members[0]] = _ACTIVE
        return state

    # ------------------------------------------------------------------ bound pushes (diffs only)
    def _push(self, key: str, kind: str, idx: np.ndarray, new: np.ndarray,
              batch: dict[str, list[np.ndarray]] | None = None) -> None:
        """Send the entries of bound array ``key`` that changed; with ``batch``, collect them there
        (column and row bounds, sent by :meth:`_flush` in one call each)."""
        cur = self._cur[key]
        ch = np.flatnonzero(~((cur == new) | (np.isnan(cur) & np.isnan(new))))
        if not ch.size:
            return
        cur[ch] = new[ch]
        if kind == "col_hi":
            part = ("col", idx[ch], np.zeros(ch.size), new[ch])
        elif kind == "col_fix":  # 1 → fixed at 0, 0 → free
            lo = np.where(new[ch] > 0, 0.0, -np.inf)
            part = ("col", idx[ch], lo, -lo)
        else:  # row lower bounds
            part = ("row", idx[ch], new[ch], np.full(ch.size, np.inf))
        if batch is None:
            self._flush({f"{part[0]}_{i}": [a] for i, a in enumerate(part[1:])})
            return
        for i, a in enumerate(part[1:]):
            batch.setdefault(f"{part[0]}_{i}", []).append(a)

    def _flush(self, batch: dict[str, list[np.ndarray]]) -> None:
        """Send collected bound changes: one column-bounds and one row-bounds call."""
        if batch.get("col_0"):
            self.loaded.set_col_bounds(*(np.concatenate(batch[f"col_{i}"]) for i in range(3)))
        if batch.get("row_0"):
            self.loaded.set_row_bounds(*(np.concatenate(batch[f"row_{i}"]) for i in range(3)))

    def _apply(self, state: np.ndarray, level: np.ndarray, beta: np.ndarray,
               open_jobs: np.ndarray | None = None) -> np.ndarray:
        """Bounds of one level LP; returns which level columns are active. ``open_jobs``: jobs whose
        columns stay open even if they are waiting or frozen at 0 (the exceed test's candidates)."""
        active = state == _ACTIVE
        k_act = np.zeros(self.k_group.size, bool)
        k_act[self.k_of_job[active]] = True
        batch: dict[str, list[np.ndarray]] = {}
        self._push("e_hi", "col_hi", self.col_e, np.where(active, 0.0, np.inf), batch)
        self._push("eg_hi", "col_hi", self.col_eg, np.where(k_act, 0.0, np.inf), batch)
        self._push("F_lo", "row_lo", self.rows_F, np.where(state == _FROZEN, level, -np.inf), batch)
        fair = self.col_mu >= 0
        self._push("mu_fix", "col_fix", self.col_mu[fair], np.where(active[fair], 0.0, 1.0), batch)
        # a waiting fifo job (or one frozen at exactly 0) holds no allocation: its columns are closed,
        # which keeps the simplex from pivoting through allocations nobody asked for
        closed = (state == _WAITING) | ((state == _FROZEN) & (level <= 0.0))
        if open_jobs is not None:
            closed &= ~open_jobs
        shut = np.zeros(self.col_x.size, bool)
        shut[self._slot_pos[closed[self._slot_job]]] = True
        self._shut = shut
        self._push("x_hi", "col_hi", self.col_x, np.where(shut | ~self.admitted, 0.0, 1.0), batch)
        Omega = np.bincount(self.k_of_job[active], weights=self.wq[active], minlength=self.k_group.size)
        B = np.where(self.k_job >= 0, beta, Omega * beta)
        self._push("G_lo", "row_lo", self.rows_G, np.where(k_act, B, -np.inf), batch)
        self._flush(batch)
        return k_act

    # ------------------------------------------------------------------ run
    def run(self) -> FillOutcome:
        """Raise the levels until every job is frozen. Per level: compact the model when worthwhile
        (:meth:`_maybe_compact`), solve the level LP with fifo speculation (:meth:`_solve_level`),
        take the new levels from its solution (:meth:`_take_levels`), certify bottlenecks
        (:meth:`_certify`), freeze them and move fifo groups on (:meth:`_freeze`); then assemble the
        outcome (:meth:`_outcome`)."""
        lp = self._start_loop()
        while True:
            self._maybe_compact(lp)
            if not np.any(lp.state == _ACTIVE):
                if self.compact and self._pending().any():
                    continue  # a fifo group's window was used up: refill it (progress: jobs come in)
                break
            if len(lp.out.deltas) >= self.max_iterations:
                lp.out.status, lp.out.message = Status.ERROR, f"water-filling stopped after {len(lp.out.deltas)} levels"
                break
            solved = self._solve_level(lp)
            if solved is None:
                break
            res, k_act, active, inc, spec_frozen = solved
            cert = self._certify(lp, res, active, inc, k_act)
            self._freeze(lp, cert, spec_frozen)
        return self._outcome(lp)

    def _start_loop(self) -> _Loop:
        n, K = len(self.space.jobs), self.k_group.size
        level = np.zeros(n)
        out = FillOutcome(X=np.zeros((len(self.space.rows), len(self.space.configs))), levels=level,
                          status=Status.OPTIMAL, trace=[] if self.record_trace else None)
        return _Loop(state=self._initial_state(), level=level, beta=np.zeros(K), out=out,
                     thr=self.space.throughput_matrix(),
                     lookahead=np.ones(len(self.groups), np.int64))

    def _maybe_compact(self, lp: _Loop) -> None:
        """Rebuild the model without settled jobs when nothing is active but jobs wait, or when
        :meth:`_want_compact` says it pays; fifo groups that ran out of jobs start their next."""
        stalled = self.compact and not np.any(lp.state == _ACTIVE) and self._pending().any()
        if not (stalled or self._want_compact(lp.state, lp.level, lp.lookahead)):
            return
        lp.state, lp.level, lp.beta = self._compact(lp.state, lp.level, lp.beta, lp.lookahead)
        lp.thr = self.space.throughput_matrix()
        lp.x_last = None
        for gi in np.flatnonzero(self.is_fifo).tolist():  # groups that ran out of waiting jobs
            mem = self.groups[gi].members
            if mem.size and not np.any(lp.state[mem] == _ACTIVE):
                self._start_next(gi, lp.state, lp.level, lp.beta, bool(self._zero_run[gi]), lp.out)

    def _solve_level(self, lp: _Loop) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, int] | None:
        """One level LP, with fifo chains speculated (shortened and re-solved when a chain step
        does not land), then the new levels taken from it (:meth:`_take_levels`). ``None`` when the
        LP fails (the outcome says why)."""
        out = lp.out
        plan = self._plan(lp.state, lp.beta, lp.events)
        lp.spec_failed = False
        while True:
            st, lv, bt = self._speculative_state(lp.state, lp.level, lp.beta, plan)
            k_act = self._apply(st, lv, bt)
            res = self._solve()
            failed = self._failed_chains(res, plan, lp.beta)
            if not failed:
                break
            out.speculation_failures += 1
            lp.spec_failed = True
            for gi, landed in failed.items():
                lp.lookahead[gi] = 1
                if landed == 0:
                    del plan[gi]
                else:
                    plan[gi] = plan[gi][: landed + 1]
        if not res.ok or res.x is None or res.row_duals is None:
            out.status = res.status
            out.message = f"level LP {len(out.deltas) + 1}: {res.status.value} ({res.message})"
            return None
        for gi, chain in plan.items():  # verified: the speculated jobs froze at their caps
            out.speculated += len(chain) - 1
            lp.lookahead[gi] = len(chain)
        if lp.spec_failed:  # a bottleneck came before the last cap event: as many events as landed
            lp.events, lp.streak = sum(len(c) - 1 for c in plan.values()), 0
        spec_frozen = int((st == _FROZEN).sum() - (lp.state == _FROZEN).sum())
        lp.state, lp.level, lp.beta = st, lv, bt
        active, inc = self._take_levels(lp, res, k_act)
        return res, k_act, active, inc, spec_frozen

    def _take_levels(self, lp: _Loop, res: Any, k_act: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The level LP's solution, made exactly feasible, sets the frozen jobs' floors and the
        groups' new levels ``β``, never above what it delivers (so the next LP always has it as a
        feasible point). Returns the active jobs and each group's rise."""
        state, level = lp.state, lp.level
        active = state == _ACTIVE
        lp.x_last = res.x
        d = max(float(res.x[self.col_delta[0]]), 0.0)
        lp.out.deltas.append(d)
        self._xp = self._project(self.X.value(res.x))
        u = (lp.thr @ self._xp.ravel()) * self.nu
        # floors never above what the solution delivers (it may violate bounds by the solver's
        # tolerance), so the next LP always has this solution as a feasible point
        frozen = state == _FROZEN
        level[frozen] = _floor_at(level[frozen], u[frozen])
        # new levels: what the LP promised, never above what its solution delivers
        inc = self._rates(active) * d
        delivered = np.full(self.k_group.size, np.inf)
        np.minimum.at(delivered, self.k_of_job[active], u[active] / self.omega[active])
        lp.beta = np.where(k_act, np.maximum(_floor_at(lp.beta + inc, delivered), 0.0), lp.beta)
        return active, inc

    def _certify(self, lp: _Loop, res: Any, active: np.ndarray, inc: np.ndarray, k_act: np.ndarray) -> np.ndarray:
        """Bottlenecks of this level: negative duals of the level rows, caps and twins
        (:meth:`_cheap_certificates`), and — when the level is stuck, or always with
        ``certify="duals+slack"`` — the exceed test on the rest (:meth:`_can_exceed`)."""
        out, state, level, beta = lp.out, lp.state, lp.level, lp.beta
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
        lp.stuck_run = lp.stuck_run + 1 if stuck else 0
        if rest.any() and (stuck or self.certify == "duals+slack"):
            # a stuck level: typically the rest of a fairness group that lost a member is
            # bottlenecked too — test those first (one LP), everything left only if stuck again
            hit = np.unique(self.group_of[cert & ~self.is_fifo[self.group_of]])
            tests = [rest & np.isin(self.group_of, hit)]
            if lp.stuck_run >= 3 or self.certify == "duals+slack":
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
        return cert

    def _freeze(self, lp: _Loop, cert: np.ndarray, spec_frozen: int) -> None:
        """Freeze the certified jobs at their levels and move fifo groups on. Speculation adapts:
        levels whose fifo freezes are all at caps make a streak, and from the second one the cap
        events speculated per level LP double (up to ``max_lookahead − 1``); a fifo job frozen below
        its cap (contention) halves them and ends the streak."""
        state, level, beta = lp.state, lp.level, lp.beta
        newly = np.flatnonzero(cert)
        level[newly] = self.omega[newly] * beta[self.k_of_job[newly]]
        state[newly] = _FROZEN
        fifo_new = newly[self.is_fifo[self.group_of[newly]]]
        if fifo_new.size:
            if np.all(level[fifo_new] >= self.cap[fifo_new] * (1.0 - 1e-6)):
                lp.streak += 1
                if lp.streak >= 2 and not lp.spec_failed:
                    lp.events = min(max(1, 2 * lp.events), self.max_lookahead - 1)
            else:
                lp.events, lp.streak = lp.events // 2, 0
        nfrozen = newly.size + spec_frozen
        nfrozen += self._advance_fifo(state, level, beta, newly, lp.out)
        lp.out.frozen_per_iteration.append(int(nfrozen))
        if lp.out.trace is not None:
            lp.out.trace.append(self._to_s0(self._guaranteed_levels(state, level, beta)))

    def _outcome(self, lp: _Loop) -> FillOutcome:
        """The allocation of the last level LP (polished if asked), in the full space (compacted
        jobs' allocations and aggregated classes put back), levels and counters."""
        out, x_last = lp.out, lp.x_last
        if out.status is Status.OPTIMAL and x_last is not None and self.polish:
            polished = self._polish(lp.state, lp.level)
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
            assert Xc is not None  # x_last or fixed_X0 was given (the branch's condition)
            if self.s0 is full:
                out.X = Xc
            else:
                out.X[: len(full.jobs)] = Xc[self.cls]
        out.levels = self._expand(self._to_s0(lp.level))
        out.compactions = self.compactions
        out.cold_retries = self.cold_retries
        out.stall_retries = self.stall_retries
        if out.trace is not None:
            out.trace = [self._expand(t) for t in out.trace]
        out.timings = self.timings
        return out

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
        res = self._guarded(self.loaded.resolve)
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
            res = self._guarded(self.loaded.solve)
            self.lp_solves += 1
        self.timings.solve += time.perf_counter() - t0
        return res

    def _guarded(self, solve: Any) -> Any:
        """``solve()``, counting the runs the loaded model repeated with the perturbation on after the
        unperturbed warm primal simplex hit its iteration cap (a stall on a degenerate vertex;
        :meth:`~policyopt.solver_api.LoadedModel.use_warm_primal`)."""
        before = self.loaded.stall_retries
        res = solve()
        self.stall_retries += self.loaded.stall_retries - before
        return res
