"""Trace-driven round simulator of a heterogeneous GPU cluster.

Time advances in rounds of ``round_seconds`` (360 s by default, as in Gavel). At the start of a
round at time ``t``:

1. **Arrivals** with ``arrival ≤ t`` join the active set (a job never runs before it arrives; a job
   arriving mid-round waits for the next round, as in Gavel's simulator). If nothing is active the
   clock jumps to the next arrival.
2. **Worker failures / repairs** (optional, seeded): each GPU fails at rate ``1/mtbf``; a failed GPU
   is unavailable until repaired ``repair_seconds`` later. A failure takes effect at the next round
   boundary (work done in the current round is kept).
3. **Recompute** (optimization policies only): after reset events (arrival, completion, failure,
   repair) the policy re-solves the problem built from the active jobs, at most once every
   ``recompute_interval`` seconds (default: one round), via :class:`~policyopt.mechanism.RecomputeClock`;
   a change of available capacity forces an immediate recompute (the old allocation may not fit).
   The problem has one job per active job: throughputs from the Gavel table (``<type>`` and, for
   multi-GPU jobs, ``<type>_unconsolidated``), ``steps_remaining``, ``time_since_start = t − arrival``,
   weight, priority, entity, ``slo_seconds = arrival + SLO − t − slo_margin_seconds`` (at least 1 s;
   omitted once the deadline passed),
   ``job_type`` labels and the type-level space-sharing table when space sharing is on.
4. **Round stages**: selection (the mechanism realizing the allocation, or a priority policy) →
   packing (optional, Tesserae) → placement (consolidating, lease renewal) → migration minimization
   (``matching`` / ``tesserae`` / ``simple`` / ``none``). Failed GPUs are held by placeholder jobs so
   nothing is placed on them. With ``migration="matching"`` (unless ``keep_types`` /
   ``renewal_credit`` say otherwise) the mechanism gives the combination that ran last round a
   credit of half a round, at least ``checkpoint_seconds + restore_seconds`` (what a switch costs;
   :func:`default_renewal_credit`, ``RoundMechanism(renewal_credit=...)``);
   :func:`~policyopt.placement.keep_types` moves a running job back to last round's type when that
   type has room (or a swap partner), gives it time and is not slower for it; with it the packer
   renews last round's pairs (``MatchingPacker(keep_bonus=2 (checkpoint + restore) / L)``: the two
   restarts a kept pair avoids, in the packer's unit). Priority policies get neither.
5. **Execution**: each running job progresses at the throughput actually realized — the colocated
   throughput when paired, the ``<type>_unconsolidated`` throughput when the placement spread it
   over servers, else the consolidated one. A job pays a **preemption cost** out of the round when
   it starts on GPUs other than the ones it held in the previous round: ``restore_seconds`` on its
   first start, ``checkpoint_seconds + restore_seconds`` when it resumes after a preemption or
   migrates (the checkpoint of the stop is billed at the restart). A job that completes mid-round has
   its exact finish time as JCT but frees its GPUs only at the end of the round (as in Gavel).

Everything is deterministic for a seed (the trace, failures, and every tie-break).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from math import gcd
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from ..data.gavel import GavelThroughputs, load_gavel
from ..cluster_counts import parse_cluster
from ..errors import InputError, UnknownNameError
from ..mechanism import Combination, RecomputeClock, RoundAssignment
from ..placement import (MIGRATION_MINIMIZERS, MIGRATION_SOURCES, PLACERS, PRIORITY_POLICIES, ClusterLayout, JobInfo,
                         MatchingPacker, NoPacking, PairThroughputTable, Placement, keep_types, migrated_jobs,
                         migration_sources)
from ..policy import get_policy
from ..problem import Entity
from ..result import json_default
from .posing import ProblemPoser
from .metrics import (DEFAULT_WINDOW, average_contention, compute_metrics, isolated_throughput, realized_over_planned,
                      steady_state_window)
from .scheduling import (AllocationScheduler, PartitionedScheduler, PriorityScheduler, StaticEntitySplit,
                         resolve_policy)
from .traces import TraceJob, parse_job_type

__all__ = ["SimConfig", "SimResult", "Simulator", "simulate", "GAVEL_PRICES", "parse_cluster", "PHASES",
           "default_renewal_credit"]

#: $/GPU-hour used by Gavel's cost experiments (GCP on-demand prices).
GAVEL_PRICES: dict[str, float] = {"v100": 2.48, "p100": 1.46, "k80": 0.45}
#: wall-clock phases reported in ``SimResult.timings``
PHASES = ("problem", "solve", "install", "select", "pack", "place", "migrate", "execute")
_BLOCKER = "__failed__"



@dataclass
class SimConfig:
    """Simulation settings (see the module docstring for the semantics)."""

    policy: str = "max_min_fairness"
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    space_sharing: bool = False
    packing: bool = False
    migration: str = "matching"
    placer: str = "consolidate"
    renew_leases: bool = True
    keep_types: bool | None = None  # None: on with migration="matching" (placement.sticky.keep_types)
    renewal_credit: float | None = None  # seconds; None: default_renewal_credit (0 unless migration="matching")
    round_seconds: float = 360.0
    recompute_interval: float | None = None  # None: one round
    checkpoint_seconds: float = 10.0
    restore_seconds: float = 10.0
    gpus_per_server: int | Mapping[str, int] | None = None  # None: 4, or gcd(count, 4)
    prices: Mapping[str, float] | None = None  # None: GAVEL_PRICES
    entities: Mapping[str, float | Entity] | None = None
    slo_margin_seconds: float = 0.0  # subtracted from the time left to a deadline when posing the problem
    type_order: str = "fastest"  # priority policies: fastest | cluster
    failure_mtbf_hours: float | None = None
    repair_seconds: float = 3600.0
    seed: int = 0
    window: tuple[float, float] = DEFAULT_WINDOW
    until: str = "all"  # all | window
    max_seconds: float | None = None
    progress: bool = False
    record_runs: bool = False

    def __post_init__(self) -> None:
        def positive(name: str, v: Any, allow_zero: bool = False) -> None:
            ok = isinstance(v, (int, float)) and not isinstance(v, bool) and bool(np.isfinite(v)) \
                and (v >= 0 if allow_zero else v > 0)
            if not ok:
                raise InputError(name, v, "must be a " + ("non-negative" if allow_zero else "positive") + " number")

        positive("round_seconds", self.round_seconds)
        positive("checkpoint_seconds", self.checkpoint_seconds, True)
        positive("restore_seconds", self.restore_seconds, True)
        positive("repair_seconds", self.repair_seconds)
        positive("slo_margin_seconds", self.slo_margin_seconds, True)
        if self.recompute_interval is not None:
            positive("recompute_interval", self.recompute_interval, True)
        if self.renewal_credit is not None:
            positive("renewal_credit", self.renewal_credit, True)
        if self.keep_types is not None and not isinstance(self.keep_types, bool):
            raise InputError("keep_types", self.keep_types,
                             "must be true, false or null (on with migration='matching')")
        if self.failure_mtbf_hours is not None:
            positive("failure_mtbf_hours", self.failure_mtbf_hours)
        if self.max_seconds is not None:
            positive("max_seconds", self.max_seconds)
        if self.until not in ("all", "window"):
            raise InputError("until", self.until, "must be 'all' or 'window'")
        if self.type_order not in ("fastest", "cluster"):
            raise InputError("type_order", self.type_order, "must be 'fastest' or 'cluster'")
        if self.migration not in MIGRATION_MINIMIZERS.names():
            raise UnknownNameError("migration", self.migration, MIGRATION_MINIMIZERS.names())
        if self.placer not in PLACERS.names():
            raise UnknownNameError("placer", self.placer, PLACERS.names())
        steady_state_window(10, self.window)
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise InputError("seed", self.seed, "must be an integer")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["entities"] = None if self.entities is None else {
            k: (asdict(v) if isinstance(v, Entity) else v) for k, v in self.entities.items()}
        return d


@dataclass
class SimResult:
    """Per-job / per-round / per-recompute DataFrames, the metrics dict and phase timings."""

    config: SimConfig
    cluster: dict[str, int]
    jobs: Any
    rounds: Any
    recomputes: Any
    metrics: dict[str, Any]
    timings: dict[str, float]
    runs: Any = None
    tables: dict[str, Any] = field(default_factory=dict)  # more per-run DataFrames, written as NAME.csv

    def write(self, directory: str | Path, figures: bool = True) -> dict[str, Path]:
        """``metrics.json``, ``jobs.csv``, ``rounds.csv``, ``recomputes.csv``, ``runs.csv`` (when recorded),
        one ``NAME.csv`` per entry of ``tables`` (+ figures: ``jct_cdf.png``, ``utilization.png``, and
        ``resources.png`` when the rounds carry CPU / host-memory utilization) in ``directory``."""
        import json

        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        out = {"metrics": d / "metrics.json", "jobs": d / "jobs.csv", "rounds": d / "rounds.csv",
               "recomputes": d / "recomputes.csv"}
        out["metrics"].write_text(json.dumps(self.metrics, indent=2, default=json_default))
        self.jobs.to_csv(out["jobs"], index=False)
        self.rounds.to_csv(out["rounds"], index=False)
        self.recomputes.to_csv(out["recomputes"], index=False)
        if self.runs is not None:
            out["runs"] = d / "runs.csv"
            self.runs.to_csv(out["runs"], index=False)
        for name, table in self.tables.items():
            out[name] = d / f"{name}.csv"
            table.to_csv(out[name], index=False)
        if figures:
            from .plots import jct_cdf_figure, resources_figure, utilization_figure

            out["jct_cdf"] = jct_cdf_figure({self.metrics["policy"]: self}, d / "jct_cdf.png")
            out["utilization"] = utilization_figure({self.metrics["policy"]: self}, d / "utilization.png")
            if "cpu_utilization" in self.rounds:
                out["resources"] = resources_figure(self, d / "resources.png")
        return out



def _gpus_per_server(counts: Mapping[str, int], spec: int | Mapping[str, int] | None) -> dict[str, int]:
    out = {}
    for t, c in counts.items():
        if spec is None:
            out[t] = gcd(c, 4) if c else 1
        else:
            g = spec.get(t) if isinstance(spec, Mapping) else spec
            if g is None or isinstance(g, bool) or not isinstance(g, (int, np.integer)) or g < 1:
                raise InputError(f"gpus_per_server.{t}", g, "must be a positive integer")
            if c % g:
                raise InputError(f"gpus_per_server.{t}", g, f"does not divide the {c} GPUs of type {t}")
            out[t] = int(g)
    return out



def default_renewal_credit(cfg: SimConfig) -> float:
    """The mechanism's renewal credit ``H`` (seconds) when ``cfg.renewal_credit`` is ``None``.

    With ``migration="matching"``: ``H = max(L / 2, checkpoint + restore)`` for rounds of ``L``
    seconds. A combination that keeps its type then switches only once it is about half a round
    ahead of its share there -- within the rounding the mechanism makes anyway (it hands out whole
    rounds, so a fraction is met only to within about half a round) -- and never for a gain
    smaller than what the switch costs. Other rules: ``0`` (Gavel's mechanism).
    """
    if cfg.migration != "matching":
        return 0.0
    return max(0.5 * cfg.round_seconds, cfg.checkpoint_seconds + cfg.restore_seconds)

class Simulator:
    """Simulate ``trace`` on ``cluster`` (worker type → GPU count) under ``config``."""

    def __init__(self, cluster: str | Mapping[str, int], config: SimConfig | None = None,
                 table: GavelThroughputs | None = None) -> None:
        self.config = config or SimConfig()
        self.table = table if table is not None else load_gavel()
        self.counts = parse_cluster(cluster)
        for t in self.counts:
            if t not in self.table.worker_types:
                raise UnknownNameError("cluster", t, self.table.worker_types)
        self.types = list(self.counts)
        self.gps = _gpus_per_server(self.counts, self.config.gpus_per_server)
        present = {t: c for t, c in self.counts.items() if c > 0}
        self.layout = ClusterLayout.from_counts(present, {t: self.gps[t] for t in present})
        prices = dict(GAVEL_PRICES if self.config.prices is None else self.config.prices)
        for t in self.types:
            if t not in prices or not np.isfinite(prices[t]) or prices[t] < 0:
                raise InputError(f"prices.{t}", prices.get(t), "every worker type needs a price >= 0 ($/GPU-hour)")
        self.prices = prices
        self.resolved = resolve_policy(self.config.policy)
        if self.resolved.kind == "priority" and self.config.space_sharing:
            raise InputError("space_sharing", True, "round-stage priority policies share GPUs through packing "
                                                    "(--packing), not through the allocation")

    # ------------------------------------------------------------------ setup helpers
    def _policy_object(self) -> Any:
        opts = dict(self.config.policy_options)
        if self.resolved.kind == "priority":
            return PRIORITY_POLICIES.create(self.resolved.name, **opts)
        if self.config.space_sharing:
            opts["space_sharing"] = True
        if self.resolved.kind == "static_split":
            return StaticEntitySplit(self.resolved.name, **opts)
        return get_policy(self.resolved.name, **opts)

    def _entities(self, trace: Sequence[TraceJob]) -> dict[str, Entity]:
        names = sorted({j.entity for j in trace if j.entity is not None})
        if self.config.entities is None:
            return {n: Entity(n) for n in names}
        ents = {k: (v if isinstance(v, Entity) else Entity(k, float(v))) for k, v in self.config.entities.items()}
        missing = [n for n in names if n not in ents]
        if missing:
            raise UnknownNameError("trace[].entity", missing[0], ents)
        return ents

    # ------------------------------------------------------------------ main loop
    def run(self, trace: Sequence[TraceJob]) -> "SimResult":
        import pandas as pd

        cfg, tab = self.config, self.table
        t_wall = time.perf_counter()
        if not trace:
            raise InputError("trace", [], "the trace has no jobs")
        jobs = sorted(trace, key=lambda j: (j.arrival, _id_key(j.id)))
        N = len(jobs)
        ids = [j.id for j in jobs]
        if len(set(ids)) != N:
            raise InputError("trace[].id", next(i for i in ids if ids.count(i) > 1), "duplicate job id")
        L = float(cfg.round_seconds)
        interval = L if cfg.recompute_interval is None else float(cfg.recompute_interval)
        types, nt = self.types, len(self.types)
        count_arr = np.array([self.counts[t] for t in types], np.int64)

        # ---- per-job static arrays
        arrival = np.array([j.arrival for j in jobs], float)
        steps = np.array([j.steps for j in jobs], float)
        sf = np.array([j.scale_factor for j in jobs], np.int64)
        weight = np.array([j.weight for j in jobs], float)
        slo = np.array([np.nan if j.slo_seconds is None else j.slo_seconds for j in jobs], float)
        prio_flag = np.array([bool(j.priority) for j in jobs])
        tj = np.empty(N, np.int64)
        type_cache: dict[str, int] = {}
        for i, j in enumerate(jobs):
            if j.job_type not in type_cache:
                model, s = parse_job_type(j.job_type)
                try:
                    type_cache[j.job_type] = tab.type_index(model, s)
                except InputError:
                    raise InputError(f"trace[{j.id}].job_type", j.job_type, "not in the throughput data") from None
            tj[i] = type_cache[j.job_type]
        cons = np.array([tab.configs.index(t) for t in types], np.int64)
        unc = np.array([tab.configs.index(f"{t}_unconsolidated") if f"{t}_unconsolidated" in tab.configs else -1
                        for t in types], np.int64)
        T_cons = tab.alone[tj][:, cons]  # jobs × types
        fits = (T_cons > 0) & (sf[:, None] <= count_arr[None, :])
        bad = np.flatnonzero(~fits.any(axis=1))
        if bad.size:
            i = int(bad[0])
            raise InputError(f"trace[{ids[i]}]", {"job_type": jobs[i].job_type, "scale_factor": int(sf[i])},
                             f"fits no worker type of the cluster {self.counts}")
        entities = self._entities(jobs)
        # preferred worker types per job (priority policies and packing): fastest first, or cluster order
        if cfg.type_order == "fastest":
            pref_order = np.argsort(-T_cons, axis=1, kind="stable")
        else:
            pref_order = np.tile(np.arange(nt), (N, 1))
        prefs = [tuple(types[c] for c in row if fits[i, c]) for i, row in enumerate(pref_order)]
        # normalized throughput: steps/s over the job's best consolidated throughput on this cluster
        T_fast = np.where(fits, T_cons, 0.0).max(axis=1)
        ent_names = sorted(entities)
        ent_idx = np.array([ent_names.index(j.entity) if j.entity is not None else -1 for j in jobs], np.int64)

        type_pos = {tp: k for k, tp in enumerate(types)}
        price_arr = np.array([self.prices[tp] for tp in types], float)
        # ---- stages
        policy = self._policy_object()
        alloc_mode = self.resolved.kind in ("allocation", "static_split")
        need_rho = self.resolved.kind == "priority" and self.resolved.name == "ftf"
        credit = default_renewal_credit(cfg) if cfg.renewal_credit is None else cfg.renewal_credit
        if self.resolved.kind == "static_split":
            scheduler: Any = PartitionedScheduler(policy, L, credit)
        elif alloc_mode:
            scheduler = AllocationScheduler(policy, self.counts, L, credit)
        else:
            scheduler = PriorityScheduler(policy)
        placer = PLACERS.create(cfg.placer, renew=cfg.renew_leases)
        migration = MIGRATION_MINIMIZERS.create(cfg.migration)
        sticky = alloc_mode and (cfg.migration == "matching" if cfg.keep_types is None else bool(cfg.keep_types))
        # pair renewal in the packer (with keep_types): the two restarts a kept pair avoids, in the matching's
        # unit (one job's throughput for one round)
        keep_bonus = min(2.0 * (cfg.checkpoint_seconds + cfg.restore_seconds) / L, 2.0) if sticky else 0.0
        packer = MatchingPacker(self._pair_table(tj, ids), keep_bonus=keep_bonus) if cfg.packing else NoPacking()
        slack = 0.0
        last_type: dict[str, str] = {}
        coloc_types: tuple[Any, ...] = ()
        labels = None
        if alloc_mode and cfg.space_sharing:
            uniq = np.unique(tj)
            coloc_types = tab.problem(uniq.tolist(), self.counts, colocated="types").colocated_types
            labels = {int(t): tab.type_label(int(t)) for t in uniq}
        poser = ProblemPoser(tab, types, self.gps, self.prices, ids, [j.entity for j in jobs], tj, sf, weight, slo,
                             prio_flag, arrival, entities, coloc_types, labels, float(cfg.slo_margin_seconds))
        self._isolated = poser.isolated

        # ---- dynamic state
        remaining = steps.copy()
        done_steps = np.zeros(N)
        first_start = np.full(N, np.nan)
        finish = np.full(N, np.nan)
        attained = np.zeros(N)
        compute_s = np.zeros(N)
        overhead_s = np.zeros(N)
        n_runs = np.zeros(N, np.int64)
        n_preempt = np.zeros(N, np.int64)
        n_migr = np.zeros(N, np.int64)
        planned_s = np.zeros(N)  # seconds of planned time (time fraction × time active), allocation policies
        held_s = np.zeros(N)  # seconds the job held GPUs (realized)
        sources = dict.fromkeys(MIGRATION_SOURCES, 0)
        cost = np.zeros(N)
        index = {jid: i for i, jid in enumerate(ids)}
        active: list[int] = []
        nxt = 0
        clock = RecomputeClock(interval)
        rng = np.random.default_rng(np.random.SeedSequence([int(cfg.seed), 7]))
        failed = np.zeros(nt, np.int64)
        repairs: list[tuple[float, int]] = []
        total_gpus = int(count_arr.sum())
        fail_rate = 0.0 if cfg.failure_mtbf_hours is None else total_gpus / (cfg.failure_mtbf_hours * 3600.0)
        next_failure = np.inf if fail_rate == 0 else float(arrival[0] + rng.exponential(1.0 / fail_rate))
        capacity_changed = False
        last_placement: Placement | None = None
        prev_running: set[str] = set()
        timings = {p: 0.0 for p in PHASES}
        round_rows: list[tuple] = []
        ent_rows: list[np.ndarray] = []
        recompute_rows: list[tuple] = []
        run_rows: list[tuple] = []
        lo, hi = steady_state_window(N, cfg.window)
        t = float(arrival[0])
        t0_sim = t
        horizon = np.inf if cfg.max_seconds is None else t0_sim + float(cfg.max_seconds)
        available_gpu_seconds = 0.0
        stalled = False
        failures_total = 0
        bar = _progress(N, cfg.progress)
        try:
            while True:
                # 1. arrivals
                while nxt < N and arrival[nxt] <= t:
                    active.append(nxt)
                    if alloc_mode:
                        clock.note("arrival", float(arrival[nxt]), ids[nxt])
                    nxt += 1
                # 2. failures and repairs
                while next_failure <= t:
                    alive = count_arr - failed
                    if alive.sum() > 0:
                        c = int(rng.choice(nt, p=alive / alive.sum()))
                        failed[c] += 1
                        failures_total += 1
                        repairs.append((next_failure + cfg.repair_seconds, c))
                        capacity_changed = True
                        if alloc_mode:
                            clock.note("worker_failure", max(next_failure, clock.last_recompute or -np.inf), types[c])
                    next_failure += float(rng.exponential(1.0 / fail_rate))
                if repairs and min(r[0] for r in repairs) <= t:
                    for r in [r for r in repairs if r[0] <= t]:
                        failed[r[1]] -= 1
                        capacity_changed = True
                    repairs = [r for r in repairs if r[0] > t]
                # stop conditions
                if cfg.until == "window" and np.isfinite(finish[lo:hi]).all():
                    break
                if t >= horizon:
                    break
                if not active:
                    if nxt >= N:
                        break
                    t_next = float(arrival[nxt])
                    avail_now = int((count_arr - failed).sum())
                    available_gpu_seconds += avail_now * (t_next - t)
                    round_rows.append((t, t_next - t, 0, 0, avail_now, 0.0, 0.0, 0, 0, 0.0, 0.0))
                    if ent_names:
                        ent_rows.append(np.zeros(len(ent_names)))
                    t = t_next
                    continue
                avail = {tp: int(count_arr[k] - failed[k]) for k, tp in enumerate(types)}
                # 3. recompute
                if alloc_mode and (clock.due(t + 1e-6 * L) or capacity_changed or not scheduler.installed):
                    if clock.pending or capacity_changed or not scheduler.installed:
                        self._recompute(poser, t, active, scheduler, avail, remaining, sf, ids, timings,
                                        recompute_rows)
                        clock.mark_recomputed(t)
                capacity_changed = False
                # 4. round stages
                # job descriptions for priority policies and the packer (the mechanism does not read them)
                infos = []
                if not alloc_mode or cfg.packing:
                    infos = self._job_infos(active, t, ids, sf, arrival, attained, prio_flag, slo, prefs, T_cons,
                                            count_arr, remaining, steps, need_rho)
                s0 = time.perf_counter()
                selection = scheduler.select(infos, avail)
                if sticky and last_type:
                    selection = keep_types(selection, last_type, avail, scheduler.allows,
                                           lambda j, tp: float(T_cons[index[j], type_pos[tp]]), slack)
                s1 = time.perf_counter()
                assignment = packer.pack(selection, {j.job_id: j for j in infos})
                s2 = time.perf_counter()
                blockers = tuple(Combination((f"{_BLOCKER}{types[k]}#{b}",), types[k], 1)
                                 for k in range(nt) for b in range(int(failed[k])))
                plan = placer.place(self.layout, RoundAssignment(assignment.combinations + blockers,
                                                                 assignment.pending), last_placement)
                s3 = time.perf_counter()
                # fast path: when no job that ran last round changed GPUs, the identity labeling is already
                # optimal for every minimizer (stops and starts cost the same under any relabeling)
                if last_placement is None or not migrated_jobs(last_placement, plan):
                    placement = plan
                else:
                    placement = migration.relabel(last_placement, plan)
                s4 = time.perf_counter()
                timings["select"] += s1 - s0
                timings["pack"] += s2 - s1
                timings["place"] += s3 - s2
                timings["migrate"] += s4 - s3
                # 5. execution (one entry per running job; a pair contributes two entries)
                why = {j: w for j, w in migration_sources(last_placement, plan, placement).items()
                       if not j.startswith(_BLOCKER)}
                moved = set(why)
                for w in why.values():
                    sources[w] += 1
                combos = assignment.combinations
                sizes = np.fromiter((len(c.jobs) for c in combos), np.int64, len(combos))
                J = np.fromiter((index[j] for c in combos for j in c.jobs), np.int64, int(sizes.sum()))
                partner = np.fromiter((index[c.jobs[1 - k]] if len(c.jobs) == 2 else -1
                                       for c in combos for k in range(len(c.jobs))), np.int64, J.size)
                combo_type = np.fromiter((type_pos[c.worker_type] for c in combos), np.int64, len(combos))
                combo_gpus = np.fromiter((c.num_gpus for c in combos), np.int64, len(combos))
                TY, G = np.repeat(combo_type, sizes), np.repeat(combo_gpus, sizes)
                spread_set = placement.spread
                spread = np.fromiter((ids[j] in spread_set for j in J.tolist()), bool, J.size)
                thr = self._realized_throughput(tj, J, partner, TY, spread, cons, unc)
                gpus_now = placement.gpus
                prev_gpus = last_placement.gpus if last_placement is not None else {}
                ever = np.isfinite(first_start[J])
                same = np.fromiter((prev_gpus.get(ids[j]) == gpus_now[ids[j]] for j in J.tolist()), bool, J.size)
                ovh = np.where(same, 0.0, np.where(ever, cfg.checkpoint_seconds + cfg.restore_seconds,
                                                   cfg.restore_seconds))
                ovh = np.minimum(ovh, L)
                comp = L - ovh
                with np.errstate(divide="ignore"):
                    need = np.where(thr > 0, remaining[J] / np.where(thr > 0, thr, 1.0), np.inf)
                fin = need <= comp * (1 + 1e-12)
                work = np.where(fin, need, comp)
                occupied = np.where(fin, ovh + need, L)
                progress = np.where(fin, remaining[J], thr * comp)
                if J.size:
                    first_start[J] = np.where(np.isnan(first_start[J]), t, first_start[J])
                    done_steps[J] += progress
                    remaining[J] = np.where(fin, 0.0, remaining[J] - progress)
                    attained[J] += G * occupied
                    compute_s[J] += work
                    overhead_s[J] += ovh
                    n_runs[J] += 1
                    if moved:
                        n_migr[[index[j] for j in moved]] += 1
                    finish[J[fin]] = t + occupied[fin]
                    held_s[J] += occupied
                if alloc_mode:
                    plan_frac = scheduler.planned_fractions()
                    A = np.asarray(active, np.int64)
                    span = np.full(N, L)
                    span[J] = np.where(fin, occupied, L)
                    planned_s[A] += span[A] * np.fromiter((plan_frac.get(ids[a], 0.0) for a in A.tolist()),
                                                          float, A.size)
                # GPU-seconds held per combination (a pair holds its GPUs until both are done)
                if combos:
                    starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))
                    held = np.maximum.reduceat(occupied, starts)
                    dollars = combo_gpus * held / 3600.0 * price_arr[combo_type]
                    cost[J] += np.repeat(dollars / sizes, sizes)
                    busy = float((combo_gpus * held).sum())
                    compute = float((combo_gpus * np.maximum.reduceat(work, starts)).sum())
                    round_cost = float(dollars.sum())
                else:
                    busy = compute = round_cost = 0.0
                running_ids = {ids[j] for j in J.tolist()}
                for jid in prev_running - running_ids:
                    i = index[jid]
                    if not np.isfinite(finish[i]):
                        n_preempt[i] += 1
                prev_running = running_ids
                if cfg.record_runs:
                    for q in range(J.size):
                        run_rows.append((t, ids[J[q]], types[TY[q]], int(G[q]), bool(spread[q]),
                                         ids[partner[q]] if partner[q] >= 0 else None, float(thr[q]),
                                         float(ovh[q]), float(work[q]), float(progress[q]), gpus_now[ids[J[q]]]))
                avail_total = int(sum(avail.values()))
                available_gpu_seconds += avail_total * L
                norm = progress / (L * T_fast[J]) if J.size else np.zeros(0)
                round_rows.append((t, L, len(active), J.size, avail_total, busy, compute,
                                   int((sizes == 2).sum()), len(moved), round_cost,
                                   float(norm.sum())))
                if ent_names:
                    ent_rows.append(np.bincount(ent_idx[J][ent_idx[J] >= 0], weights=norm[ent_idx[J] >= 0],
                                                minlength=len(ent_names)))
                scheduler.record(selection, {ids[j]: float(o) for j, o in zip(J.tolist(), occupied.tolist())})
                last_placement = placement
                last_type = {j: c.worker_type for c in combos for j in c.jobs}
                # completions
                done_idx = J[fin]
                if done_idx.size:
                    gone = [ids[j] for j in done_idx.tolist()]
                    scheduler.remove(gone)
                    if alloc_mode:
                        for j in done_idx.tolist():
                            clock.note("completion", float(finish[j]), ids[j])
                    done_set = set(done_idx.tolist())
                    active = [a for a in active if a not in done_set]
                    bar.update(len(gone))
                timings["execute"] += time.perf_counter() - s4
                t_next = t + L
                if J.size == 0 and not (alloc_mode and clock.pending):
                    # nothing can run until something changes: jump to the next event
                    events = ([float(arrival[nxt])] if nxt < N else []) + [r[0] for r in repairs]
                    if not events:
                        stalled = True
                        break
                    t_next = max(t_next, min(events))
                    if t_next > t + L:
                        avail_total = int(sum(avail.values()))
                        available_gpu_seconds += avail_total * (t_next - t - L)
                        round_rows.append((t + L, t_next - t - L, len(active), 0, avail_total, 0.0, 0.0, 0, 0, 0.0,
                                           0.0))
                        if ent_names:
                            ent_rows.append(np.zeros(len(ent_names)))
                t = t_next
                bar.set_postfix_str(f"t={(t - t0_sim) / 3600:.1f}h active={len(active)}", refresh=False)
        finally:
            bar.close()

        # ---- results
        jct = finish - arrival
        Tc = T_cons
        nbar = average_contention(arrival, finish)
        thr_iso = isolated_throughput(Tc, sf.astype(float), count_arr.astype(float), np.nan_to_num(nbar, nan=1.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            rho = np.where(np.isfinite(jct) & (thr_iso > 0), jct / (steps / thr_iso), np.nan)
        job_df = pd.DataFrame({
            "id": ids, "arrival": arrival, "job_type": [j.job_type for j in jobs], "scale_factor": sf,
            "steps": steps, "steps_done": done_steps, "weight": weight, "priority": prio_flag,
            "slo_seconds": slo, "entity": [j.entity for j in jobs],
            "duration_v100": [np.nan if j.duration_v100 is None else j.duration_v100 for j in jobs],
            "first_start": first_start, "finish": finish,
            "jct": jct, "rounds_run": n_runs, "compute_seconds": compute_s, "overhead_seconds": overhead_s,
            "attained_gpu_seconds": attained, "preemptions": n_preempt, "migrations": n_migr, "cost": cost,
            "planned_seconds": planned_s if alloc_mode else np.nan, "held_seconds": held_s,
            "avg_contention": nbar, "isolated_jct": steps / np.where(thr_iso > 0, thr_iso, np.nan), "rho": rho,
            "in_window": (np.arange(N) >= lo) & (np.arange(N) < hi)})
        rounds_df = pd.DataFrame(round_rows, columns=["start", "length", "active_jobs", "running_jobs",
                                                      "available_gpus", "busy_gpu_seconds", "compute_gpu_seconds",
                                                      "pairs", "migrations", "cost", "norm_throughput"])
        rounds_df["utilization"] = rounds_df["busy_gpu_seconds"] / (rounds_df["available_gpus"] * rounds_df["length"])
        for k, name in enumerate(ent_names):
            rounds_df[f"norm_throughput[{name}]"] = [r[k] for r in ent_rows]
        rec_df = pd.DataFrame(recompute_rows, columns=["time", "jobs", "status", "problem_seconds",
                                                       "recompute_seconds", "policy_seconds", "pairs", "objective"])
        runs_df = None
        if cfg.record_runs:
            runs_df = pd.DataFrame(run_rows, columns=["round_start", "job", "worker_type", "num_gpus", "spread",
                                                      "partner", "throughput", "overhead_seconds",
                                                      "compute_seconds", "steps", "gpus"])
        wall = time.perf_counter() - t_wall
        timings["total"] = wall
        timings["other"] = wall - sum(timings[p] for p in PHASES)
        extra = {"policy": cfg.policy, "policy_kind": self.resolved.kind, "cluster": dict(self.counts),
                 "round_seconds": L, "recompute_interval": interval, "space_sharing": cfg.space_sharing,
                 "packing": cfg.packing, "migration": cfg.migration, "seed": int(cfg.seed),
                 "stalled": stalled, "simulated_seconds": t - t0_sim, "worker_failures": failures_total,
                 "wall_seconds": wall, "phase_seconds": dict(timings), "migration_sources": sources,
                 "realized_over_planned": realized_over_planned(planned_s, held_s, L) if alloc_mode else None}
        metrics = compute_metrics(job_df, rounds_df, rec_df, window=cfg.window,
                                  available_gpu_seconds=available_gpu_seconds, extra=extra)
        return SimResult(cfg, dict(self.counts), job_df, rounds_df, rec_df, metrics, timings, runs_df)

    # ------------------------------------------------------------------ pieces of a round
    def _pair_table(self, tj: np.ndarray, ids: Sequence[str]) -> PairThroughputTable:
        """Packing weights from the Gavel table: models are job-type labels."""
        tab = self.table
        present = np.unique(tj)
        lab = {int(t): tab.type_label(int(t)) for t in present}
        alone: dict[str, dict[str, float]] = {}
        packed: dict[str, dict[tuple[str, str], tuple[float, float]]] = {}
        for wt in self.types:
            c = tab.configs.index(wt)
            alone[wt] = {lab[t]: float(tab.alone[t, c]) for t in lab if tab.alone[t, c] > 0}
            sub = tab.paired[np.ix_(present, present, np.array([c]))][:, :, 0, :]
            a, b = np.nonzero((sub[..., 0] > 0) & (sub[..., 1] > 0))
            packed[wt] = {(lab[int(present[x])], lab[int(present[y])]): (float(sub[x, y, 0]), float(sub[x, y, 1]))
                          for x, y in zip(a.tolist(), b.tolist())}
        return PairThroughputTable({jid: lab[int(t)] for jid, t in zip(ids, tj.tolist())}, alone, packed)

    def _realized_throughput(self, tj: np.ndarray, J: np.ndarray, partner: np.ndarray, TY: np.ndarray,
                             spread: np.ndarray, cons: np.ndarray, unc: np.ndarray) -> np.ndarray:
        """Steps/s of each running job: paired / unconsolidated / consolidated as realized."""
        if not J.size:
            return np.zeros(0)
        tab = self.table
        a = tj[J]
        c_cons = cons[TY]
        c_unc = unc[TY]
        alone_cons = tab.alone[a, c_cons]
        alone_unc = np.where(c_unc >= 0, tab.alone[a, np.maximum(c_unc, 0)], 0.0)
        use_unc = spread & (alone_unc > 0)
        alone = np.where(use_unc, alone_unc, alone_cons)
        b = tj[np.maximum(partner, 0)]
        pair_cons = tab.paired[a, b, c_cons, 0]
        pair_unc = np.where(c_unc >= 0, tab.paired[a, b, np.maximum(c_unc, 0), 0], 0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            scaled = np.where(alone_cons > 0, pair_cons * alone_unc / alone_cons, 0.0)
        pair = np.where(use_unc, np.where(pair_unc > 0, pair_unc, scaled), pair_cons)
        return np.where(partner >= 0, pair, alone)

    def _job_infos(self, active: Sequence[int], t: float, ids: Sequence[str], sf: np.ndarray, arrival: np.ndarray,
                   attained: np.ndarray, prio_flag: np.ndarray, slo: np.ndarray, prefs: Sequence[tuple[str, ...]],
                   T_cons: np.ndarray, count_arr: np.ndarray, remaining: np.ndarray, steps: np.ndarray,
                   need_rho: bool) -> list[JobInfo]:
        A = np.asarray(active, np.int64)
        rho = np.ones(A.size)
        if need_rho:
            # finish-time-fairness estimate for the ``ftf`` heuristic: (elapsed + remaining at the isolated
            # share) / (whole job at the isolated share), with the current number of active jobs
            iso = isolated_throughput(T_cons[A], sf[A].astype(float), count_arr.astype(float), float(A.size))
            with np.errstate(divide="ignore", invalid="ignore"):
                rho = np.where(iso > 0, ((t - arrival[A]) + remaining[A] / iso) / (steps[A] / iso), 1.0)
        return [JobInfo(ids[i], int(sf[i]), float(arrival[i]), float(attained[i]), float(r), bool(prio_flag[i]),
                        None if np.isnan(slo[i]) else float(arrival[i] + slo[i]), prefs[i])
                for i, r in zip(A.tolist(), rho.tolist())]

    def _recompute(self, poser: ProblemPoser, t: float, active: Sequence[int], scheduler: Any,
                   avail: Mapping[str, int], remaining: np.ndarray, sf: np.ndarray, ids: Sequence[str],
                   timings: dict[str, float], rows: list[tuple]) -> None:
        r0 = time.perf_counter()
        problem = poser.pose(t, active, avail, remaining)
        if problem is None:
            return
        members = problem.jobs
        r1 = time.perf_counter()
        result = scheduler.recompute(problem, {ids[i]: int(sf[i]) for i in active}, avail)
        poser.isolated.observe({m.id: m.steps_remaining for m in members}, result)
        r2 = time.perf_counter()
        timings["problem"] += r1 - r0
        # solve = the policy's own phases; install = the rest of the recompute (mechanism reset)
        timings["solve"] += result.timings.total
        timings["install"] += max(0.0, (r2 - r1) - result.timings.total)
        rows.append((t, len(members), str(result.status), r1 - r0, r2 - r1, result.timings.total,
                     len(result.colocated_allocation), result.objective))


def _id_key(jid: str) -> tuple[int, Any]:
    return (0, int(jid)) if jid.isdigit() else (1, jid)


class _NoBar:
    def update(self, n: int) -> None: ...

    def set_postfix_str(self, s: str, refresh: bool = True) -> None: ...

    def close(self) -> None: ...


def _progress(total: int, enabled: bool) -> Any:
    if not enabled:
        return _NoBar()
    from tqdm import tqdm

    return tqdm(total=total, unit="job", desc="simulating", mininterval=1.0)


def simulate(trace: Sequence[TraceJob], cluster: str | Mapping[str, int], config: SimConfig | None = None,
             table: GavelThroughputs | None = None, **overrides: Any) -> SimResult:
    """Run one simulation: ``simulate(trace, "v100=12,p100=12,k80=12", policy="max_min_fairness", seed=0)``."""
    if config is None:
        config = SimConfig(**overrides)
    elif overrides:
        from dataclasses import replace

        config = replace(config, **overrides)
    return Simulator(cluster, config, table).run(trace)
