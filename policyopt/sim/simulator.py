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
   type has room (or a swap partner), gives it time and is not slower for it, and hands the GPUs a
   move frees to pending jobs the allocation gives time there; with it the packer renews last
   round's pairs (``MatchingPacker(keep_bonus=2 (checkpoint + restore) / L)``: the two
   restarts a kept pair avoids, in the packer's unit). Priority policies get neither. With
   ``backfill`` (optimization policies) workers the mechanism leaves idle go to the installed jobs
   that do not run, in job order, each on the first type where it can run alone and has room,
   whatever its ``X`` there — Gavel's simulator does this under every policy but FIFO (jobs with zero
   priority still take idle workers), which matters where the allocation leaves capacity unused.
   ``ordering="gavel"`` has the mechanism walk as Gavel's scheduler does (``docs/mechanism.md``): one
   type after another (shuffled every round, seed ``seed + 5`` as Gavel's, for ``*_agnostic``
   policies and ``isolated``), by Gavel's priority, each type's idle workers then going to the
   installed jobs that can run there with ``X = 0`` (not under FIFO policies, as in Gavel; no
   renewal credit).
5. **Execution**: each running job progresses at the throughput actually realized — the colocated
   throughput when paired, the ``<type>_unconsolidated`` throughput when the placement spread it
   over servers, else the consolidated one. A job pays a **preemption cost** out of the round when
   it starts on GPUs other than the ones it held in the previous round: ``restore_seconds`` on its
   first start, ``checkpoint_seconds + restore_seconds`` when it resumes after a preemption or
   migrates (the checkpoint of the stop is billed at the restart). A job that completes mid-round has
   its exact finish time as JCT but frees its GPUs only at the end of the round (as in Gavel).
   ``Simulator(..., round_rates=f)`` lets a caller replace the table's realized throughputs of a
   round by ones that depend on the whole round (:data:`RoundRates`: e.g. rates measured per set of
   co-running jobs, where workers share devices).

Everything is deterministic for a seed (the trace, failures, and every tie-break).
"""
from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from math import gcd
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ..data.gavel import GavelThroughputs, load_gavel
from ..cluster_counts import parse_cluster
from ..errors import InputError, UnknownNameError
from ..placement import (MIGRATION_MINIMIZERS, PLACERS, PRIORITY_POLICIES, ClusterLayout, JobInfo,
                         PairThroughputTable)
from ..mechanism.gavel_order import ORDERINGS
from ..policy import get_policy
from ..problem import Entity
from ..result import json_default
from .loop import PHASES, SimulationRun
from .posing import ProblemPoser
from .metrics import (DEFAULT_WINDOW, isolated_throughput, steady_state_window)
from .scheduling import (StaticEntitySplit,
                         resolve_policy)
from .traces import TraceJob

__all__ = ["SimConfig", "SimResult", "Simulator", "simulate", "GAVEL_PRICES", "parse_cluster", "PHASES",
           "default_renewal_credit", "RoundRates"]

#: ``round_rates(entries, rates) -> rates`` (``Simulator(..., round_rates=...)``): ``entries`` has one
#: ``(job type label "<model>#<scale factor>", worker type)`` per job running in the round (a
#: space-shared pair: two entries on the same type), ``rates`` the table's realized steps/s of each;
#: it returns the steps/s of each entry in this round (finite, ``>= 0``, same length).
RoundRates = Callable[[Sequence[tuple[str, str]], np.ndarray], np.ndarray]

#: $/GPU-hour used by Gavel's cost experiments (GCP on-demand prices).
GAVEL_PRICES: dict[str, float] = {"v100": 2.48, "p100": 1.46, "k80": 0.45}



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
    backfill: bool = False  # idle workers to installed jobs with X = 0 there (Gavel's simulator)
    ordering: str = "default"  # the mechanism's walk: default | gavel (RoundMechanism(ordering=...))
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
        if not isinstance(self.backfill, bool):
            raise InputError("backfill", self.backfill, "must be true or false")
        if self.ordering not in ORDERINGS:
            raise InputError("ordering", self.ordering, f"must be one of {list(ORDERINGS)}")
        if self.ordering == "gavel" and self.renewal_credit:
            raise InputError("renewal_credit", self.renewal_credit, "ordering='gavel' has no renewal credit (use 0)")
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
    smaller than what the switch costs. Other rules, and ``ordering="gavel"``: ``0`` (Gavel's mechanism).
    """
    if cfg.migration != "matching" or cfg.ordering == "gavel":
        return 0.0
    return max(0.5 * cfg.round_seconds, cfg.checkpoint_seconds + cfg.restore_seconds)

class Simulator:
    """Simulate ``trace`` on ``cluster`` (worker type → GPU count) under ``config``."""

    def __init__(self, cluster: str | Mapping[str, int], config: SimConfig | None = None,
                 table: GavelThroughputs | None = None, round_rates: RoundRates | None = None) -> None:
        self.config = config or SimConfig()
        self.round_rates = round_rates
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
        """Simulate ``trace`` (the steps of the module docstring, :class:`~policyopt.sim.loop.SimulationRun`)."""
        run = SimulationRun(self, list(trace))
        self._isolated = run.poser.isolated  # finish-time fairness: cumulative isolated time per job
        return run.run()

    # ------------------------------------------------------------------ pieces of a round
    def _round_rates(self, tj: np.ndarray, J: np.ndarray, TY: np.ndarray, thr: np.ndarray) -> np.ndarray:
        """The realized throughputs ``thr`` of the running jobs ``J`` (on worker types ``TY``) as
        ``round_rates`` gives them, checked."""
        if self.round_rates is None or not J.size:
            return thr
        entries = [(self.table.type_label(int(t)), self.types[int(y)]) for t, y in zip(tj[J].tolist(), TY.tolist())]
        out = np.asarray(self.round_rates(entries, thr.copy()), dtype=float)
        if out.shape != thr.shape or not bool(np.all(np.isfinite(out) & (out >= 0))):
            raise InputError("round_rates", out.tolist(), f"must return {thr.size} finite steps/s >= 0")
        return out

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
