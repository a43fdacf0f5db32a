"""Water-filling, step 3: one level — fifo speculation (chains of jobs frozen at their caps),
bottleneck certificates (duals, caps, twins, the exceed test), fifo hand-over and the final polish."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._wf_common import _ACTIVE, _FROZEN, _SLACK_TOL, _WAITING, _ZERO_TOL, FillOutcome


class _LevelSteps:
    """Certifying bottlenecks and moving fifo groups on, level by level."""

    if TYPE_CHECKING:  # the engine's state (see WaterFillingEngine.__init__)
        def __getattr__(self, name: str) -> Any: ...

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
    def _plan(self, state: np.ndarray, beta: np.ndarray, events: int) -> dict[int, np.ndarray]:
        """Speculative fifo chains for the next ``events`` cap events of all fifo groups together.

        In fifo group ``g`` the head ``h`` rises as ``β_h + W_g·Δ``; if every job ahead reaches its
        cap ``c_m`` (the largest ``u_m`` any allocation can give it), the ``j``-th job of ``g`` in
        line (``0`` = the head) reaches its cap at ``Δ_gj = (Σ_{i≤j} c_i − β_h)/W_g``. These events,
        merged over the groups in order of ``Δ``, are taken up to ``events`` of them; per group the
        jobs of its taken events are *speculated* (held at their caps) and the job after them is the
        chain's last, active job: ``{group: [head, next, ..., last]}`` (at most ``max_lookahead``
        jobs). Ordering the events over all groups is what lets several groups' chains land in one
        LP: a chain reaching past another group's earlier cap event would fail there."""
        plan: dict[int, np.ndarray] = {}
        if events < 1 or self._xp is None:
            return plan
        # a job at its cap runs all the time on a cap slot: the events are cut where the workers the
        # speculated jobs need on their cap types exceed what the last solution left free (a heuristic
        # that avoids most infeasible chain steps; a chain that fails anyway is re-solved shorter)
        counts = np.asarray(self.capacity if self.capacity is not None else self.space.counts, float)
        cap_m = self.space.capacity_matrix()
        use_slot = cap_m.vals * self._xp.ravel()[cap_m.cols]
        used = np.bincount(cap_m.rows, weights=use_slot, minlength=counts.size)
        memb = self.space.membership_matrix()
        chains: list[np.ndarray] = []
        gids: list[int] = []
        when: list[np.ndarray] = []
        for gi in np.flatnonzero(self.is_fifo).tolist():
            mem = self.groups[gi].members
            live = mem[(state[mem] == _ACTIVE) | (state[mem] == _WAITING)]
            if live.size < 2 or state[live[0]] != _ACTIVE:
                continue
            chain = live[: self.max_lookahead]
            W = self.W[gi] if len(self.groups) > 1 else 1.0
            chains.append(chain)
            gids.append(gi)
            when.append((np.cumsum(self.cap[chain[:-1]]) - beta[self.k_of_job[chain[0]]]) / W)
        if not chains:
            return plan
        # the first `events` events in order of Δ (within a group they come in line order)
        ev_g = np.concatenate([np.full(w.size, i) for i, w in enumerate(when)])
        ev_j = np.concatenate([np.arange(w.size) for w in when])
        order = np.lexsort((ev_j, ev_g, np.concatenate(when)))[:events]
        ev_g, ev_j = ev_g[order], ev_j[order]
        jobs = np.concatenate([c[:-1] for c in chains])[order]
        need = np.zeros((jobs.size, counts.size))
        t = self.cap_type[jobs]
        ok_t = t >= 0
        need[np.flatnonzero(ok_t), t[ok_t]] = self.space.scale[jobs[ok_t]]
        # a group's head stops using what it holds now once it is held at its cap (its first event)
        for e in np.flatnonzero(ev_j == 0).tolist():
            on_head = np.isin(cap_m.cols, memb.cols[memb.rows == chains[ev_g[e]][0]])
            need[e] -= np.bincount(cap_m.rows[on_head], weights=use_slot[on_head], minlength=counts.size)
        over = np.any(used + np.cumsum(need, axis=0) > counts * (1 + 1e-9), axis=1)
        taken = int(np.argmax(over)) if over.any() else jobs.size
        per_group = np.bincount(ev_g[:taken], minlength=len(chains))
        for i in np.flatnonzero(per_group).tolist():
            plan[gids[i]] = chains[i][: int(per_group[i]) + 1]
        return plan

    def _speculative_state(self, state: np.ndarray, level: np.ndarray, beta: np.ndarray,
                           plan: dict[int, np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """State of a chain step: speculated jobs held at their caps, the chain's last job active
        with level ``β_head + W·Δ − Σ caps`` (the water left after the earlier jobs are full)."""
        st, lv, bt = state.copy(), level.copy(), beta.copy()
        for chain in plan.values():
            spec, last = chain[:-1], chain[-1]
            st[spec] = _FROZEN
            lv[spec] = self.cap[spec] * (1.0 - 1e-12)
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
            if start >= waiting.size:  # every waiting job in the model is stuck at 0: and beyond it?
                return frozen + self._zero_beyond_model(gi, out)
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
        self._exceed_res = res
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
