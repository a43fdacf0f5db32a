"""Water-filling, step 2: compaction — settled jobs leave the model, fifo groups wait in windows,
and the model is rebuilt over what is left (with the dropped jobs' allocations kept)."""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ._wf_common import _FROZEN, _WAITING, _ZERO_TOL, FillGroup, FillOutcome, _ClassSpace


class _CompactionSteps:
    """Dropping settled jobs and rebuilding the level LP over the rest."""

    if TYPE_CHECKING:  # the engine's state (see WaterFillingEngine.__init__)
        fixed_X0: np.ndarray | None
        _xp: np.ndarray | None
        idx0: np.ndarray
        pairs0: np.ndarray
        groups: list[FillGroup]
        compactions: int
        capacity: np.ndarray | None

        def __getattr__(self, name: str) -> Any: ...

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

    def _zero_beyond_model(self, gi: int, out: FillOutcome) -> int:
        """After the zero test proved every waiting job of fifo group ``gi`` in the model stuck at 0,
        settle at 0 the group's jobs waiting outside the model (in fifo order, up to the first that
        may gain) from that LP's prices alone, without bringing them in.

        Column generation's argument: a job ``m`` outside the model would add columns ``x_mc`` (in its
        own time and floor rows and the capacity rows) and ``s_m`` (cost 1, in its floor row
        ``ν_m·Σ_c T_mc·x_mc − s_m ≥ 0``). With the test's optimal duals, the capacity prices
        ``y_t ≥ 0``, and the floor row's dual set to 1, the Lagrangian bound of the test with ``m``
        added is ``z* + max(0, max_c (ν_m·T_mc − y_t(c)·sf_m))`` (the time row ``Σ_c x_mc ≤ 1`` kept),
        ``z*`` the test's optimum. Where that is at most ``1e-6`` (u units, the zero test's own
        threshold) the job can gain nothing now, and — levels only rise — nothing on its turn: it
        freezes at 0. Only for spaces without pair rows (a pair column would also meet its partner's
        rows); the first job that fails the bound stops the walk (fifo order) and enters the model
        as usual."""
        res = self._exceed_res
        s0 = self.s0
        if (not self.compact or res is None or not res.ok or res.row_duals is None or res.objective is None
                or s0.num_pairs):
            return 0
        members = self.groups0[gi].members
        outside = members[self._pending()[members]]
        if not outside.size:
            return 0
        rows = np.arange(*self.sf.row_blocks["X_capacity"])
        price = np.maximum(res.row_duals[rows], 0.0)
        T = np.where(s0.single_mask[outside], s0.T[outside], 0.0)
        sf = self._mult0(outside) * s0.scale[outside]
        gain = self.per_job0["nu"][outside, None] * T - price[s0.config_type][None, :] * sf[:, None]
        bound = max(float(res.objective), 0.0) + np.maximum(gain.max(axis=1, initial=0.0), 0.0)
        ok = bound <= _ZERO_TOL
        k = int(np.argmin(ok)) if not ok.all() else ok.size
        zero = outside[:k]
        self.settled0[zero] = True
        self.level0[zero] = 0.0
        out.certified_by_prices += k
        return k

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
