"""One simulation, round by round (the steps of :mod:`policyopt.sim.simulator`'s module docstring).

:class:`SimulationRun` keeps the trace as per-job arrays (trace order, sorted by arrival) and the
simulation's state as per-job arrays updated in place each round (remaining steps, attained service,
finish times, ...). :meth:`SimulationRun.run` is the loop; each step is a method:

``admit_arrivals`` → ``fail_and_repair`` → (stop?) → ``recompute`` → ``round_stages`` (selection,
packing, placement, migration minimization) → ``execute`` (realized throughputs, progress,
overheads) → ``account`` (cost, utilization, per-round rows) → ``complete`` → ``advance``;
``results`` builds the DataFrames and metrics at the end.

**Repeated rounds.** A round that changed nothing — the same selection as the round before, every job
kept its GPUs (so no restart overhead), no job finished — is kept as a :class:`_Repeat` (its per-job
increments and its round row). While the next rounds admit no arrival, recompute nothing and see no
failure, and the mechanism selects exactly that assignment again, such a round's stages (placement,
migration, throughputs, overheads) would give the same results: :meth:`SimulationRun.repeat_round`
applies the kept increments with the same floating-point operations in the same order instead, so the
run is bit-identical to one that runs every stage (``SimulationRun.repeat_rounds = False``). The
mechanism still selects (and records) every round; a round in which a job would finish runs in full.
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import InputError
from ..mechanism import Combination, RecomputeClock, RoundAssignment
from ..placement import MIGRATION_SOURCES, NoPacking, Placement, keep_types, migrated_jobs, migration_sources
from .metrics import steady_state_window
from .posing import ProblemPoser
from .stage_setup import build_stages
from .traces import TraceJob, parse_job_type

if TYPE_CHECKING:
    from .simulator import SimResult, Simulator

__all__ = ["SimulationRun", "PHASES"]

#: wall-clock phases reported in ``SimResult.timings``
PHASES = ("problem", "solve", "install", "select", "pack", "place", "migrate", "execute")
_BLOCKER = "__failed__"


def _same_placement(a: Placement, b: Placement) -> bool:
    """Whether ``a`` and ``b`` place the same jobs on the same GPUs in the same order, with the same pairs
    and the same spread jobs (:class:`Placement` does not define equality)."""
    return a.layout is b.layout and a.pairs == b.pairs and a.spread == b.spread and \
        list(a.gpus.items()) == list(b.gpus.items())


def _id_key(jid: str) -> tuple[int, Any]:
    return (0, int(jid)) if jid.isdigit() else (1, jid)


def _keeps_every_candidate(previous: Placement, plan: Placement) -> bool:
    """Whether every job of both rounds with the same worker type and GPU count holds the same GPUs in
    ``plan`` (then no relabeling keeps more of them: the job-exact minimizer's optimum is the plan)."""
    gpu_type = plan.layout.gpu_type
    old = previous.gpus
    for j, g in plan.gpus.items():
        o = old.get(j)
        if o is not None and o != g and len(o) == len(g) and gpu_type[o[0]] == gpu_type[g[0]]:
            return False
    return True


@dataclass
class _Round:
    """What one round's stages decided: the plan as placed and the placement that runs."""

    selection: RoundAssignment
    assignment: RoundAssignment
    plan: Placement
    placement: Placement


@dataclass
class _Repeat:
    """A round that changed nothing (module docstring): what it selected and what it added.

    ``J`` are the running jobs' indices, ``thr`` their throughputs and ``comp`` their compute seconds;
    the ``d_*`` arrays are the per-job increments of that round (``d_planned`` over ``A``, the active
    jobs), ``row`` / ``ent_row`` its round row without the start time."""

    selection: RoundAssignment
    J: np.ndarray
    thr: np.ndarray
    comp: np.ndarray
    progress: np.ndarray
    d_attained: np.ndarray
    work: np.ndarray
    ovh: np.ndarray
    occupied: np.ndarray
    A: np.ndarray
    d_planned: np.ndarray
    d_cost: np.ndarray
    d_available: float
    row: tuple
    ent_row: np.ndarray | None
    durations: dict[str, float]


class SimulationRun:
    """State and steps of one simulation of ``trace`` by ``sim`` (module docstring)."""

    #: apply a repeated round's kept increments instead of running its stages (bit-identical; module docstring)
    repeat_rounds = True

    def __init__(self, sim: "Simulator", trace: list[TraceJob] | tuple[TraceJob, ...]) -> None:
        cfg, tab = sim.config, sim.table
        self.sim, self.cfg, self.tab = sim, cfg, tab
        self.t_wall = time.perf_counter()
        if not trace:
            raise InputError("trace", [], "the trace has no jobs")
        jobs = sorted(trace, key=lambda j: (j.arrival, _id_key(j.id)))
        N = len(jobs)
        ids = [j.id for j in jobs]
        if len(set(ids)) != N:
            raise InputError("trace[].id", next(i for i in ids if ids.count(i) > 1), "duplicate job id")
        self.jobs, self.ids, self.N = jobs, ids, N
        self.L = L = float(cfg.round_seconds)
        self.interval = L if cfg.recompute_interval is None else float(cfg.recompute_interval)
        self.types = types = sim.types
        self.nt = nt = len(types)
        self.count_arr = np.array([sim.counts[t] for t in types], np.int64)
        self._static_arrays()
        self.entities = sim._entities(jobs)
        T_cons, fits, sf = self.T_cons, self.fits, self.sf
        # preferred worker types per job (priority policies and packing): fastest first, or cluster order
        if cfg.type_order == "fastest":
            pref_order = np.argsort(-T_cons, axis=1, kind="stable")
        else:
            pref_order = np.tile(np.arange(nt), (N, 1))
        self.prefs = [tuple(types[c] for c in row if fits[i, c]) for i, row in enumerate(pref_order)]
        # normalized throughput: steps/s over the job's best consolidated throughput on this cluster
        self.T_fast = np.where(fits, T_cons, 0.0).max(axis=1)
        self.ent_names = sorted(self.entities)
        self.ent_idx = np.array([self.ent_names.index(j.entity) if j.entity is not None else -1 for j in jobs],
                                np.int64)
        self.type_pos = {tp: k for k, tp in enumerate(types)}
        self.price_arr = np.array([sim.prices[tp] for tp in types], float)
        self._stages()
        coloc_types: tuple[Any, ...] = ()
        labels = None
        if self.alloc_mode and cfg.space_sharing:
            uniq = np.unique(self.tj)
            coloc_types = tab.problem(uniq.tolist(), sim.counts, colocated="types").colocated_types
            labels = {int(t): tab.type_label(int(t)) for t in uniq}
        self.poser = ProblemPoser(tab, types, sim.gps, sim.prices, ids, [j.entity for j in jobs], self.tj, sf,
                                  self.weight, self.slo, self.prio_flag, self.arrival, self.entities, coloc_types,
                                  labels, float(cfg.slo_margin_seconds), sim.counts)
        self._dynamic_state()

    # ------------------------------------------------------------------ setup
    def _static_arrays(self) -> None:
        """Per-job arrays of the trace: arrival, steps, scale factor, weight, SLO, priority, Gavel type,
        consolidated throughput per worker type (``T_cons``) and where each job fits (``fits``)."""
        jobs, tab, N = self.jobs, self.tab, self.N
        self.arrival = np.array([j.arrival for j in jobs], float)
        self.steps = np.array([j.steps for j in jobs], float)
        self.sf = sf = np.array([j.scale_factor for j in jobs], np.int64)
        self.weight = np.array([j.weight for j in jobs], float)
        self.slo = np.array([np.nan if j.slo_seconds is None else j.slo_seconds for j in jobs], float)
        self.prio_flag = np.array([bool(j.priority) for j in jobs])
        self.tj = tj = np.empty(N, np.int64)
        type_cache: dict[str, int] = {}
        for i, j in enumerate(jobs):
            if j.job_type not in type_cache:
                model, s = parse_job_type(j.job_type)
                try:
                    type_cache[j.job_type] = tab.type_index(model, s)
                except InputError:
                    raise InputError(f"trace[{j.id}].job_type", j.job_type, "not in the throughput data") from None
            tj[i] = type_cache[j.job_type]
        types = self.types
        self.cons = np.array([tab.configs.index(t) for t in types], np.int64)
        self.unc = np.array([tab.configs.index(f"{t}_unconsolidated") if f"{t}_unconsolidated" in tab.configs
                             else -1 for t in types], np.int64)
        self.T_cons = T_cons = tab.alone[tj][:, self.cons]  # jobs × types
        self.fits = fits = (T_cons > 0) & (sf[:, None] <= self.count_arr[None, :])
        bad = np.flatnonzero(~fits.any(axis=1))
        if bad.size:
            i = int(bad[0])
            raise InputError(f"trace[{self.ids[i]}]", {"job_type": jobs[i].job_type, "scale_factor": int(sf[i])},
                             f"fits no worker type of the cluster {self.sim.counts}")

    def _stages(self) -> None:
        """The round's stages: scheduler (mechanism or priority policy), packer, placer, migration
        (:func:`~policyopt.sim.stage_setup.build_stages`)."""
        st = build_stages(self.sim, self.L, self.tj, self.ids)
        self.scheduler: Any = st.scheduler
        self.packer, self.placer, self.migration = st.packer, st.placer, st.migration
        self.alloc_mode, self.need_rho = st.alloc_mode, st.need_rho
        self.exact_relabel, self.sticky = st.exact_relabel, st.sticky

    def _dynamic_state(self) -> None:
        """Per-job state arrays (updated in place each round) and the run's counters and rows."""
        cfg, N = self.cfg, self.N
        self.remaining = self.steps.copy()
        self.done_steps = np.zeros(N)
        self.first_start = np.full(N, np.nan)
        self.finish = np.full(N, np.nan)
        self.attained = np.zeros(N)
        self.compute_s = np.zeros(N)
        self.overhead_s = np.zeros(N)
        self.n_runs = np.zeros(N, np.int64)
        self.n_preempt = np.zeros(N, np.int64)
        self.n_migr = np.zeros(N, np.int64)
        self.planned_s = np.zeros(N)  # seconds of planned time (time fraction × time active), allocation policies
        self.held_s = np.zeros(N)  # seconds the job held GPUs (realized)
        self.cost = np.zeros(N)
        self.sources = dict.fromkeys(MIGRATION_SOURCES, 0)
        self.index = {jid: i for i, jid in enumerate(self.ids)}
        self.active: list[int] = []
        self.nxt = 0
        self.clock = RecomputeClock(self.interval)
        self.rng = np.random.default_rng(np.random.SeedSequence([int(cfg.seed), 7]))
        self.failed = np.zeros(self.nt, np.int64)
        self.repairs: list[tuple[float, int]] = []
        total_gpus = int(self.count_arr.sum())
        self.fail_rate = 0.0 if cfg.failure_mtbf_hours is None else total_gpus / (cfg.failure_mtbf_hours * 3600.0)
        self.next_failure = np.inf if self.fail_rate == 0 else \
            float(self.arrival[0] + self.rng.exponential(1.0 / self.fail_rate))
        self.capacity_changed = False
        self.last_placement: Placement | None = None
        self.last_type: dict[str, str] = {}
        self.scale_of = dict(zip(self.ids, self.sf.tolist()))  # keep_types refills freed GPUs with pending jobs
        self.prev_running: set[str] = set()
        self.timings = {p: 0.0 for p in PHASES}
        self.round_rows: list[tuple] = []
        self.ent_rows: list[np.ndarray] = []
        self.recompute_rows: list[tuple] = []
        self.run_rows: list[tuple] = []
        self.lo, self.hi = steady_state_window(N, cfg.window)
        self.t = float(self.arrival[0])
        self.t0_sim = self.t
        self.horizon = np.inf if cfg.max_seconds is None else self.t0_sim + float(cfg.max_seconds)
        self.available_gpu_seconds = 0.0
        self.stalled = False
        self.failures_total = 0
        self.repeat: _Repeat | None = None  # the last round, when it changed nothing (module docstring)
        self.repeated = 0  # rounds applied by repeat_round
        from ..placement.placers import ConsolidatingPlacer, FirstFitPlacer
        from .scheduling import AllocationScheduler as _Alloc

        # the stages are pure functions of (selection, previous placement) and the round's inputs
        self.can_repeat = (self.repeat_rounds and type(self.scheduler) is _Alloc and not self.sticky
                           and isinstance(self.packer, NoPacking)
                           and type(self.placer) in (ConsolidatingPlacer, FirstFitPlacer)
                           and self.sim.round_rates is None and not cfg.record_runs and self.fail_rate == 0)

    # ------------------------------------------------------------------ the loop
    def run(self) -> "SimResult":
        from .simulator import _progress

        self.bar = _progress(self.N, self.cfg.progress)
        try:
            while True:
                self.admit_arrivals()
                self.fail_and_repair()
                if self.done():
                    break
                if not self.active:
                    if not self.idle_until_next_arrival():
                        break
                    continue
                avail = {tp: int(self.count_arr[k] - self.failed[k]) for k, tp in enumerate(self.types)}
                selection = None
                if self.repeat is not None:
                    if not self.recompute_due():
                        s0 = time.perf_counter()
                        selection = self.scheduler.select([], avail)
                        self.timings["select"] += time.perf_counter() - s0
                        if self.repeat_round(selection):
                            if not self.advance(self.repeat.J.size):
                                break
                            continue
                    self.repeat = None
                self.recompute(avail)
                rnd = self.round_stages(avail, selection)
                s4 = time.perf_counter()
                J, fin = self.execute(rnd)
                self.complete(J, fin)
                self.timings["execute"] += time.perf_counter() - s4
                if not self.advance(J.size):
                    break
        finally:
            self.bar.close()
        from .results import build_result

        return build_result(self)

    def admit_arrivals(self) -> None:
        """1. Jobs with ``arrival ≤ t`` join the active set (a reset event for the recompute clock)."""
        while self.nxt < self.N and self.arrival[self.nxt] <= self.t:
            self.active.append(self.nxt)
            self.repeat = None
            if self.alloc_mode:
                self.clock.note("arrival", float(self.arrival[self.nxt]), self.ids[self.nxt])
            self.nxt += 1

    def fail_and_repair(self) -> None:
        """2. Worker failures up to ``t`` (a random alive type each) and the repairs that are due."""
        cfg, t = self.cfg, self.t
        while self.next_failure <= t:
            alive = self.count_arr - self.failed
            if alive.sum() > 0:
                c = int(self.rng.choice(self.nt, p=alive / alive.sum()))
                self.failed[c] += 1
                self.failures_total += 1
                self.repairs.append((self.next_failure + cfg.repair_seconds, c))
                self.capacity_changed = True
                if self.alloc_mode:
                    self.clock.note("worker_failure", max(self.next_failure, self.clock.last_recompute or -np.inf),
                                    self.types[c])
            self.next_failure += float(self.rng.exponential(1.0 / self.fail_rate))
        if self.repairs and min(r[0] for r in self.repairs) <= t:
            for r in [r for r in self.repairs if r[0] <= t]:
                self.failed[r[1]] -= 1
                self.capacity_changed = True
            self.repairs = [r for r in self.repairs if r[0] > t]

    def done(self) -> bool:
        """Stop conditions: the measured window has finished (``until="window"``), or the horizon."""
        if self.cfg.until == "window" and np.isfinite(self.finish[self.lo:self.hi]).all():
            return True
        return self.t >= self.horizon

    def idle_until_next_arrival(self) -> bool:
        """Nothing active: jump to the next arrival (``False`` when none is left)."""
        if self.nxt >= self.N:
            return False
        t, t_next = self.t, float(self.arrival[self.nxt])
        avail_now = int((self.count_arr - self.failed).sum())
        self.available_gpu_seconds += avail_now * (t_next - t)
        self.round_rows.append((t, t_next - t, 0, 0, avail_now, 0.0, 0.0, 0, 0, 0.0, 0.0))
        if self.ent_names:
            self.ent_rows.append(np.zeros(len(self.ent_names)))
        self.t = t_next
        return True

    def recompute_due(self) -> bool:
        """Whether :meth:`recompute` would solve this round (after a reset event once the interval has
        passed, or at once when the capacity changed or nothing is installed)."""
        if not self.alloc_mode:
            return False
        sched, clock = self.scheduler, self.clock
        return self.capacity_changed or not sched.installed or \
            (bool(clock.pending) and clock.due(self.t + 1e-6 * self.L))

    def recompute(self, avail: dict[str, int]) -> None:
        """3. Optimization policies: re-solve after reset events (at most once per interval), at once
        when the capacity changed or nothing is installed yet."""
        if self.recompute_due():  # (the one condition, shared with the repeated rounds' check)
            t = self.t
            self.sim._recompute(self.poser, t, self.active, self.scheduler, avail, self.remaining, self.sf,
                                self.ids, self.timings, self.recompute_rows)
            self.clock.mark_recomputed(t)
        self.capacity_changed = False

    def round_stages(self, avail: dict[str, int], selection: RoundAssignment | None = None) -> _Round:
        """4. Selection → packing → placement → migration minimization (failed GPUs held by blockers);
        ``selection``: the scheduler's selection when it was already made this round (nothing was solved
        since)."""
        cfg, sim, timings, types = self.cfg, self.sim, self.timings, self.types
        # job descriptions for priority policies and the packer (the mechanism does not read them)
        infos = []
        if not self.alloc_mode or cfg.packing:
            infos = sim._job_infos(self.active, self.t, self.ids, self.sf, self.arrival, self.attained,
                                   self.prio_flag, self.slo, self.prefs, self.T_cons, self.count_arr,
                                   self.remaining, self.steps, self.need_rho)
        s0 = time.perf_counter()
        if selection is None:
            selection = self.scheduler.select(infos, avail)
        if self.sticky and self.last_type:
            T_cons, index, type_pos = self.T_cons, self.index, self.type_pos
            selection = keep_types(selection, self.last_type, avail, self.scheduler.allows,
                                   lambda j, tp: float(T_cons[index[j], type_pos[tp]]), 0.0, self.scale_of)
        s1 = time.perf_counter()
        assignment = self.packer.pack(selection, {j.job_id: j for j in infos})
        s2 = time.perf_counter()
        blockers = tuple(Combination((f"{_BLOCKER}{types[k]}#{b}",), types[k], 1)
                         for k in range(self.nt) for b in range(int(self.failed[k])))
        last = self.last_placement
        plan = self.placer.place(sim.layout, RoundAssignment(assignment.combinations + blockers,
                                                             assignment.pending), last)
        s3 = time.perf_counter()
        # fast paths: when no job that ran last round changed GPUs, the identity labeling is already
        # optimal for every minimizer (stops and starts cost the same under any relabeling); for the
        # job-exact minimizer, when every job that could be kept (same type and GPU count) kept its GPUs
        if last is None or not migrated_jobs(last, plan) or (self.exact_relabel and _keeps_every_candidate(last, plan)):
            placement = plan
        else:
            placement = self.migration.relabel(last, plan)
        s4 = time.perf_counter()
        timings["select"] += s1 - s0
        timings["pack"] += s2 - s1
        timings["place"] += s3 - s2
        timings["migrate"] += s4 - s3
        return _Round(selection, assignment, plan, placement)

    def execute(self, rnd: _Round) -> tuple[np.ndarray, np.ndarray]:
        """5. Each running job (a pair: two entries) progresses at its realized throughput for the round
        less its preemption overhead; returns the running jobs' indices and which of them finished."""
        cfg, L, t, ids, index = self.cfg, self.L, self.t, self.ids, self.index
        last, placement = self.last_placement, rnd.placement
        why = {j: w for j, w in migration_sources(last, rnd.plan, placement).items() if not j.startswith(_BLOCKER)}
        moved = set(why)
        for w in why.values():
            self.sources[w] += 1
        combos = rnd.assignment.combinations
        sizes = np.fromiter((len(c.jobs) for c in combos), np.int64, len(combos))
        J = np.fromiter((index[j] for c in combos for j in c.jobs), np.int64, int(sizes.sum()))
        partner = np.fromiter((index[c.jobs[1 - k]] if len(c.jobs) == 2 else -1
                               for c in combos for k in range(len(c.jobs))), np.int64, J.size)
        combo_type = np.fromiter((self.type_pos[c.worker_type] for c in combos), np.int64, len(combos))
        combo_gpus = np.fromiter((c.num_gpus for c in combos), np.int64, len(combos))
        TY, G = np.repeat(combo_type, sizes), np.repeat(combo_gpus, sizes)
        spread_set = placement.spread
        spread = np.fromiter((ids[j] in spread_set for j in J.tolist()), bool, J.size)
        thr = self.sim._realized_throughput(self.tj, J, partner, TY, spread, self.cons, self.unc)
        thr = self.sim._round_rates(self.tj, J, TY, thr)
        gpus_now = placement.gpus
        prev_gpus = last.gpus if last is not None else {}
        ever = np.isfinite(self.first_start[J])
        same = np.fromiter((prev_gpus.get(ids[j]) == gpus_now[ids[j]] for j in J.tolist()), bool, J.size)
        ovh = np.where(same, 0.0, np.where(ever, cfg.checkpoint_seconds + cfg.restore_seconds, cfg.restore_seconds))
        ovh = np.minimum(ovh, L)
        comp = L - ovh
        remaining = self.remaining
        with np.errstate(divide="ignore"):
            need = np.where(thr > 0, remaining[J] / np.where(thr > 0, thr, 1.0), np.inf)
        fin = need <= comp * (1 + 1e-12)
        work = np.where(fin, need, comp)
        occupied = np.where(fin, ovh + need, L)
        progress = np.where(fin, remaining[J], thr * comp)
        if J.size:
            self.first_start[J] = np.where(np.isnan(self.first_start[J]), t, self.first_start[J])
            self.done_steps[J] += progress
            remaining[J] = np.where(fin, 0.0, remaining[J] - progress)
            self.attained[J] += G * occupied
            self.compute_s[J] += work
            self.overhead_s[J] += ovh
            self.n_runs[J] += 1
            if moved:
                self.n_migr[[index[j] for j in moved]] += 1
            self.finish[J[fin]] = t + occupied[fin]
            self.held_s[J] += occupied
        A = np.asarray(self.active, np.int64)
        d_planned = np.zeros(0)
        if self.alloc_mode:
            plan_frac = self.scheduler.planned_fractions()
            span = np.full(self.N, L)
            span[J] = np.where(fin, occupied, L)
            d_planned = span[A] * np.fromiter((plan_frac.get(ids[a], 0.0) for a in A.tolist()), float, A.size)
            self.planned_s[A] += d_planned
        d_cost = self.account(rnd, J, sizes, combo_type, combo_gpus, occupied, work, progress, len(moved))
        running_ids = {ids[j] for j in J.tolist()}
        for jid in self.prev_running - running_ids:
            i = index[jid]
            if not np.isfinite(self.finish[i]):
                self.n_preempt[i] += 1
        self.prev_running = running_ids
        if cfg.record_runs:
            for q in range(J.size):
                self.run_rows.append((t, ids[J[q]], self.types[TY[q]], int(G[q]), bool(spread[q]),
                                      ids[partner[q]] if partner[q] >= 0 else None, float(thr[q]),
                                      float(ovh[q]), float(work[q]), float(progress[q]), gpus_now[ids[J[q]]]))
        durations = {ids[j]: float(o) for j, o in zip(J.tolist(), occupied.tolist())}
        self.scheduler.record(rnd.selection, durations)
        # a round that changed nothing is kept: the next ones may repeat it (module docstring)
        if self.can_repeat and last is not None and J.size and not fin.any() and not moved and bool(same.all()) \
                and placement is rnd.plan and _same_placement(last, placement):
            self.repeat = _Repeat(rnd.selection, J, thr, comp, progress, G * occupied, work, ovh, occupied, A,
                                  d_planned, d_cost, self.round_rows[-1][4] * L, self.round_rows[-1][1:],
                                  self.ent_rows[-1] if self.ent_names else None, durations)
        else:
            self.repeat = None
        self.last_placement = placement
        self.last_type = {j: c.worker_type for c in combos for j in c.jobs}
        return J, fin

    def account(self, rnd: _Round, J: np.ndarray, sizes: np.ndarray, combo_type: np.ndarray,
                combo_gpus: np.ndarray, occupied: np.ndarray, work: np.ndarray, progress: np.ndarray,
                moved: int) -> np.ndarray:
        """GPU-seconds held per combination (a pair holds its GPUs until both are done), cost, and the
        round's row (utilization, normalized throughput, per entity); returns the cost added per job."""
        L = self.L
        if rnd.assignment.combinations:
            starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
            held = np.maximum.reduceat(occupied, starts)
            dollars = combo_gpus * held / 3600.0 * self.price_arr[combo_type]
            d_cost = np.repeat(dollars / sizes, sizes)
            self.cost[J] += d_cost
            busy = float((combo_gpus * held).sum())
            compute = float((combo_gpus * np.maximum.reduceat(work, starts)).sum())
            round_cost = float(dollars.sum())
        else:
            busy = compute = round_cost = 0.0
            d_cost = np.zeros(0)
        avail_total = int(self.count_arr.sum() - self.failed.sum())
        self.available_gpu_seconds += avail_total * L
        norm = progress / (L * self.T_fast[J]) if J.size else np.zeros(0)
        self.round_rows.append((self.t, L, len(self.active), J.size, avail_total, busy, compute,
                                int((sizes == 2).sum()), moved, round_cost, float(norm.sum())))
        if self.ent_names:
            e = self.ent_idx[J]
            self.ent_rows.append(np.bincount(e[e >= 0], weights=norm[e >= 0], minlength=len(self.ent_names)))
        return d_cost

    def repeat_round(self, selection: RoundAssignment) -> bool:
        """Apply the kept round (:attr:`repeat`) once more when ``selection`` is its selection and no running
        job would finish: the increments of :meth:`execute` and :meth:`account`, the same operations in the
        same order, and the mechanism's record; ``False`` (nothing applied) otherwise."""
        rep = self.repeat
        if rep is None or selection != rep.selection:
            return False
        s0 = time.perf_counter()
        J, thr, comp, remaining = rep.J, rep.thr, rep.comp, self.remaining
        with np.errstate(divide="ignore"):
            need = np.where(thr > 0, remaining[J] / np.where(thr > 0, thr, 1.0), np.inf)
        if (need <= comp * (1 + 1e-12)).any():  # a job finishes: the round runs in full
            return False
        self.done_steps[J] += rep.progress
        remaining[J] = remaining[J] - rep.progress
        self.attained[J] += rep.d_attained
        self.compute_s[J] += rep.work
        self.overhead_s[J] += rep.ovh
        self.n_runs[J] += 1
        self.held_s[J] += rep.occupied
        self.planned_s[rep.A] += rep.d_planned
        self.cost[J] += rep.d_cost
        self.available_gpu_seconds += rep.d_available
        self.round_rows.append((self.t, *rep.row))
        if rep.ent_row is not None:
            self.ent_rows.append(rep.ent_row.copy())
        self.scheduler.record(selection, rep.durations)
        self.repeated += 1
        self.timings["execute"] += time.perf_counter() - s0
        return True

    def complete(self, J: np.ndarray, fin: np.ndarray) -> None:
        """Jobs that finished this round leave (a reset event); their GPUs were held to the round's end."""
        done_idx = J[fin]
        if done_idx.size:
            gone = [self.ids[j] for j in done_idx.tolist()]
            self.scheduler.remove(gone)
            if self.alloc_mode:
                for j in done_idx.tolist():
                    self.clock.note("completion", float(self.finish[j]), self.ids[j])
            done_set = set(done_idx.tolist())
            self.active = [a for a in self.active if a not in done_set]
            self.bar.update(len(gone))

    def advance(self, running: int) -> bool:
        """Next round; when nothing ran and nothing can change, jump to the next event (``False``: the
        simulation stalled, no event is left)."""
        L, t = self.L, self.t
        t_next = t + L
        if running == 0 and not (self.alloc_mode and self.clock.pending):
            # nothing can run until something changes: jump to the next event
            events = ([float(self.arrival[self.nxt])] if self.nxt < self.N else []) + [r[0] for r in self.repairs]
            if not events:
                self.stalled = True
                return False
            t_next = max(t_next, min(events))
            if t_next > t + L:
                avail_total = int(self.count_arr.sum() - self.failed.sum())
                self.available_gpu_seconds += avail_total * (t_next - t - L)
                self.round_rows.append((t + L, t_next - t - L, len(self.active), 0, avail_total, 0.0, 0.0, 0, 0,
                                        0.0, 0.0))
                if self.ent_names:
                    self.ent_rows.append(np.zeros(len(self.ent_names)))
        self.t = t_next
        self.bar.set_postfix_str(f"t={(self.t - self.t0_sim) / 3600:.1f}h active={len(self.active)}", refresh=False)
        return True
