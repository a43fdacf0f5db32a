r"""Reconfiguration-aware round simulation: ``policyopt simulate --generator transformers``.

Jobs of the ``transformers`` trace (:func:`policyopt.reconfig.transformers_trace`) run on ``nodes``
identical nodes of 8 GPUs / 96 cores / 1.6 TB host memory
(:data:`~policyopt.reconfig.A100_NODE`); tenant ``prod`` (guaranteed jobs, with a quota of
``quota_fraction`` of every resource) and ``research`` (best effort). Time advances in rounds of
``round_seconds``; at the start of a round at time ``t``:

1. **Arrivals** with ``arrival ≤ t`` join the active set (a job arriving mid-round waits for the next
   round). With nothing active the clock jumps to the next arrival.
2. **Decision.** ``reschedule = "events"`` (default, as the main simulator's recomputation): when an
   arrival or a completion happened since the last decision, at most once every
   ``recompute_interval`` seconds (default: one round); otherwise every job keeps its configuration
   and nodes. ``reschedule = "rounds"``: every round. A decision builds the active jobs'
   :class:`~policyopt.reconfig.ReconfigProblem` (:func:`~policyopt.reconfig.trace.trace_problem`:
   requests, remaining steps, training time ``T``, reconfiguration count ``N``, ``δ``, current
   configurations, the ``prod`` quota; ``options.reconfigure`` = what may change) and calls
   :func:`~policyopt.reconfig.reconfig_round`: the policy over the
   :class:`~policyopt.reconfig.MultiResourceSpace` (LP policies rounded to one configuration per
   job; integral ones as they are), placed on nodes. The space enforces the reconfiguration rule: a
   running job with ``(T − (N+1)·δ)/T < threshold`` keeps its current configuration (or pauses).
3. **Node relabeling.** Nodes of a type are identical, so the new placement's node indices are
   permuted (a linear assignment maximizing the GPUs of continuing jobs that stay where they were).
   A job that keeps its configuration but still lands on other nodes is *migrated*.
4. **Execution.** A running job pays ``δ`` (checkpoint + restore, per job) out of the round when it is
   reconfigured (plan or resources change), migrated (``charge_migrations``), or resumed after a
   pause — not on its first start — then progresses at its placement's throughput (steps/s). A job
   that completes mid-round has its exact finish time as JCT and frees its resources at the round
   end. ``T`` grows by the seconds the job held its resources; ``N`` by one per reconfiguration.

**SLA accounting** (per round, from the deciding round's ``sla_report``): an admitted guaranteed job
whose guarantee is feasible (``met``: the least shortfall ``u* = 0``) is *violated* when it does not
run or runs below its reference throughput ``r_m``; admitted jobs whose guarantees cannot all be met
together (``u* > 0``) count as *shortfall* rounds; guaranteed jobs beyond the quota as *unadmitted*.

Metrics (``metrics.json``): those of :func:`~policyopt.sim.metrics.compute_metrics` (``avg_jct``,
``p99_jct`` over the steady-state window, ``makespan``, ``utilization`` …) plus
``guaranteed_avg_jct``, ``guaranteed_p99_jct``, ``best_effort_avg_jct``, ``best_effort_p99_jct`` (same
window), ``reconfigurations``, ``migrations``, ``resumes``, ``checkpoint_seconds_lost``,
``sla_violations``, ``sla_shortfall_rounds``, ``guaranteed_unadmitted_rounds``, ``cpu_utilization``,
``host_mem_utilization``. Finish-time fairness uses the request: ``X_iso`` = the job's requested
configuration a fraction ``min(1, G/(n̄·g_m))`` of the time (``G`` cluster GPUs, ``g_m`` requested).

This module holds the loop (:class:`ReconfigSimulator`, :func:`simulate_reconfig`); the settings are
in :mod:`.reconfig_config` (:class:`ReconfigSimConfig`), the node slices and relabeling in
:mod:`.reconfig_nodes` (:func:`relabel_nodes`), the state carried across rounds in
:mod:`.reconfig_state`. Their public names are importable from here too.
"""
from __future__ import annotations

import time
from dataclasses import replace
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from ..errors import InputError
from ..mechanism import RecomputeClock
from .metrics import average_contention, compute_metrics, isolated_throughput, steady_state_window
from .reconfig_config import RESCHEDULE_MODES, REQUIRED_EXTRA, ReconfigSimConfig
from .reconfig_nodes import _renamed, _Run, relabel_nodes
from .reconfig_state import PHASES, _Executed, _State
from .simulator import SimResult, _progress
from .traces import TraceJob

if TYPE_CHECKING:  # the runtimes import each other only inside functions (tests/test_import_graph.py)
    from ..reconfig.rounds import RoundDecision
    from ..reconfig.spec import NodeType, ReconfigProblem

__all__ = ["ReconfigSimConfig", "ReconfigSimulator", "simulate_reconfig", "relabel_nodes", "RESCHEDULE_MODES",
           "REQUIRED_EXTRA", "Scheduler"]

#: ``(problem, received share of time) -> RoundDecision``
Scheduler = Callable[["ReconfigProblem", Mapping[str, float]], "RoundDecision"]


class ReconfigSimulator:
    """Simulate a transformers trace under ``config`` (module docstring). ``scheduler`` overrides the
    decision (default: :func:`~policyopt.reconfig.reconfig_round` with ``config.policy``)."""

    def __init__(self, config: ReconfigSimConfig | None = None, *, scheduler: Scheduler | None = None,
                 node: NodeType | None = None) -> None:
        """``node``: the node type of the cluster (default :data:`~policyopt.reconfig.A100_NODE`)."""
        import policyopt.reconfig  # noqa: F401  (registers rubick_greedy, synergy_like, sia_like, fluid_srpt)
        from ..policy import get_policy
        from ..reconfig.examples import A100_NODE
        from ..reconfig.rounds import reconfig_round

        self.config = config or ReconfigSimConfig()
        self.node = A100_NODE if node is None else node
        if scheduler is None:
            policy = get_policy(self.config.policy, **dict(self.config.policy_options))

            def scheduler(problem: ReconfigProblem, received: Mapping[str, float]) -> RoundDecision:
                return reconfig_round(problem, policy, received=received)
        self.scheduler = scheduler

    # ------------------------------------------------------------------ checks
    def _prepare(self, trace: Sequence[TraceJob]) -> list[TraceJob]:
        from ..reconfig.examples import GPUS_PER_NODE

        cfg = self.config
        if not trace:
            raise InputError("trace", [], "the trace has no jobs")
        for j in trace:
            missing = [k for k in REQUIRED_EXTRA if k not in j.extra]
            if missing:
                raise InputError(f"trace[{j.id}].extra.{missing[0]}", None,
                                 "not a transformers-trace job (see policyopt.reconfig.transformers_trace)")
        ids = [j.id for j in trace]
        if len(set(ids)) != len(ids):
            raise InputError("trace[].id", next(i for i in ids if ids.count(i) > 1), "duplicate job id")
        jobs = sorted(trace, key=lambda j: j.arrival)  # stable: ties keep the trace order
        if cfg.checkpoint_seconds is not None:
            jobs = [replace(j, extra={**j.extra, "checkpoint_seconds": float(cfg.checkpoint_seconds)}) for j in jobs]
        total = cfg.nodes * GPUS_PER_NODE
        for j in jobs:
            if int(j.extra["gpus"]) > total:
                raise InputError(f"trace[{j.id}].gpus", int(j.extra["gpus"]),
                                 f"requests more GPUs than the {cfg.nodes} nodes have ({total}); use more nodes")
        delta = np.array([float(j.extra["checkpoint_seconds"]) for j in jobs])
        if delta.max() >= cfg.round_seconds:
            k = int(np.argmax(delta))
            raise InputError("round_seconds", cfg.round_seconds,
                             f"must exceed every job's checkpoint-restore time (job {jobs[k].id}: {delta[k]:.0f} s)")
        return jobs

    # ------------------------------------------------------------------ main loop
    def run(self, trace: Sequence[TraceJob]) -> SimResult:
        """Simulate ``trace``; per-job / per-round / per-decision DataFrames, metrics, and the
        per-round ``runs`` and per-node ``placements`` tables. One round: arrivals, a decision (or
        the last one kept), execution, completions (the module docstring's steps)."""
        t_wall = time.perf_counter()
        s = self._start(self._prepare(trace), t_wall)
        bar = _progress(len(s.jobs), self.config.progress)
        try:
            while self._round(s, bar):
                bar.set_postfix_str(f"t={(s.t - s.t0) / 3600:.1f}h active={len(s.active)}", refresh=False)
        finally:
            bar.close()
        return self._result(s)

    def _start(self, jobs: list[TraceJob], t_wall: float) -> "_State":
        """The state before the first round: per-job data, the cluster's capacity, the clock at the
        first arrival, each job's reference throughput ``r_m`` (its request, steps/s)."""
        from ..reconfig.examples import GPUS_PER_NODE
        from ..reconfig.trace import trace_problem

        cfg, node = self.config, self.node
        G = cfg.nodes * GPUS_PER_NODE
        p0 = trace_problem(jobs, 0.0, nodes=cfg.nodes, node=node, quota_fraction=cfg.quota_fraction,
                           options=cfg.options)
        arrival = np.array([j.arrival for j in jobs], float)
        t0 = float(arrival[0])
        return _State(
            jobs=jobs, ids=[j.id for j in jobs], arrival=arrival, steps=np.array([j.steps for j in jobs], float),
            delta=np.array([float(j.extra["checkpoint_seconds"]) for j in jobs]),
            req_gpus=np.array([int(j.extra["gpus"]) for j in jobs], np.int64),
            guaranteed=np.array([bool(j.extra["guaranteed"]) for j in jobs]),
            ref=np.array([jb.throughputs[node.name] for jb in p0.jobs], float),
            cap=np.array([G, cfg.nodes * node.cpus_per_node, cfg.nodes * node.host_mem_per_node], float),
            node_gpus=[np.full(cfg.nodes, GPUS_PER_NODE, np.int64)],
            clock=RecomputeClock(float(cfg.round_seconds) if cfg.recompute_interval is None
                                 else float(cfg.recompute_interval)),
            t=t0, t0=t0, horizon=np.inf if cfg.max_seconds is None else t0 + float(cfg.max_seconds),
            window=steady_state_window(len(jobs), cfg.window), space_mode=cfg.reconfigure, t_wall=t_wall)

    def _round(self, s: "_State", bar: Any) -> bool:
        """One round at ``s.t`` (or a jump to the next arrival when nothing is active); ``False``
        when the run is over."""
        cfg = self.config
        L = float(cfg.round_seconds)
        self._admit_arrivals(s)
        if self._over(s):
            return False
        if not s.active:
            if s.nxt >= len(s.jobs):
                return False
            s.idle_round(s.t, float(s.arrival[s.nxt]) - s.t)
            s.t = float(s.arrival[s.nxt])
            return True
        decided = cfg.reschedule == "rounds" or not s.held or s.clock.due(s.t + 1e-6 * L)
        migrated = self._decide(s) if decided else set()
        e0 = time.perf_counter()
        rnd = self._execute(s, decided, migrated)
        self._record(s, decided, rnd)
        self._complete(s, rnd, bar)
        s.timings["execute"] += time.perf_counter() - e0
        s.rounds += 1
        return self._advance(s, decided, rnd.R)

    @staticmethod
    def _admit_arrivals(s: "_State") -> None:
        """Jobs with ``arrival ≤ t`` join the active set (each noted on the recompute clock)."""
        while s.nxt < len(s.jobs) and s.arrival[s.nxt] <= s.t + 1e-9:
            s.active.append(s.nxt)
            s.clock.note("arrival", float(s.arrival[s.nxt]), s.ids[s.nxt])
            s.nxt += 1

    def _over(self, s: "_State") -> bool:
        """The stopping rules: the steady-state window finished (``until="window"``), the horizon
        (``max_seconds``) or ``max_rounds`` reached."""
        cfg = self.config
        lo, hi = s.window
        if cfg.until == "window" and np.isfinite(s.finish[lo:hi]).all():
            return True
        return s.t >= s.horizon or (cfg.max_rounds is not None and s.rounds >= cfg.max_rounds)

    def _decide(self, s: "_State") -> set[int]:
        """A decision at ``s.t``: the active jobs' problem, the scheduler's placement, nodes relabeled
        to keep continuing jobs where they were (step 3). Returns the jobs that kept their
        configuration but moved (migrated)."""
        from ..reconfig.trace import JobState, trace_problem

        cfg = self.config
        L = float(cfg.round_seconds)
        t, active = s.t, s.active
        r0 = time.perf_counter()
        states = {s.ids[i]: JobState(float(s.done[i]), float(s.run_s[i]), int(s.n_rec[i]), s.current[i])
                  for i in active}
        problem = trace_problem([s.jobs[i] for i in active], t, nodes=cfg.nodes, node=self.node, states=states,
                                quota_fraction=cfg.quota_fraction, options=cfg.options)
        received = {s.ids[i]: float(s.run_s[i] / max(t - s.arrival[i], L)) for i in active}
        r1 = time.perf_counter()
        dec = self.scheduler(problem, received)
        r2 = time.perf_counter()
        new = self._runs(dec, s.index)
        held = s.held
        keep = [k for k in new if k in held and s.ran_last[k] and not new[k].reconfigured]
        perms = relabel_nodes({k: held[k].slices for k in keep}, {k: r.slices for k, r in new.items()},
                              keep, s.node_gpus)
        new = {k: _renamed(r, perms) for k, r in new.items()}
        migrated = {k for k in keep if new[k].where() != held[k].where()}
        r3 = time.perf_counter()
        s.clock.mark_recomputed(t)
        s.held = new
        s.sla = [(s.index[e["job"]], float(e["required"]), bool(e["admitted"]), bool(e["met"]))
                 for e in dec.sla_report]
        s.space_mode = str(getattr(dec.space, "reconfigure", s.space_mode))
        s.decision_rows.append((t, len(active), str(dec.result.status), r1 - r0, r2 - r1,
                                float(dec.result.timings.total), dec.result.objective, len(new), r3 - r2))
        s.timings["problem"] += r1 - r0
        s.timings["decide"] += r2 - r1
        s.timings["relabel"] += r3 - r2
        return migrated

    def _execute(self, s: "_State", decided: bool, migrated: set[int]) -> "_Executed":
        """Step 4 for the running jobs ``R``: who pays ``δ`` (reconfigured, migrated, resumed), the
        steps done in ``L − δ`` (or the exact finish), and every per-job counter advanced."""
        from ..reconfig.trace import PRICE_PER_GPU_HOUR

        cfg = self.config
        L = float(cfg.round_seconds)
        held, t = s.held, s.t
        R = np.array(sorted(held), np.int64)
        runs = [held[k] for k in R.tolist()]
        thr = np.array([r.thr for r in runs], float)
        gpus = np.array([r.gpus for r in runs], float)
        rec = np.array([decided and r.reconfigured for r in runs], bool)
        mig = np.isin(R, list(migrated)) & bool(cfg.charge_migrations)
        res = (s.run_s[R] > 0) & ~s.ran_last[R]
        pay = np.minimum(np.where(rec | mig | res, s.delta[R], 0.0), L)
        usable = L - pay
        left = s.steps[R] - s.done[R]
        fin = (thr > 0) & (left <= thr * usable)
        need = np.where(fin, left / np.where(thr > 0, thr, 1.0), usable)
        occupied = np.where(fin, pay + need, L)
        progress = np.where(fin, left, thr * usable)
        out = _Executed(R, gpus, np.array([r.cpus for r in runs], float), np.array([r.host for r in runs], float),
                        rec, mig, res, pay, need, occupied, progress, fin, s.run_s[R].copy(), s.n_rec[R].copy())
        s.first[R] = np.where(np.isnan(s.first[R]), t, s.first[R])
        s.done[R] = np.where(fin, s.steps[R], s.done[R] + progress)
        s.finish[R[fin]] = t + pay[fin] + need[fin]
        s.run_s[R] += occupied
        s.n_rec[R] += rec
        s.n_mig[R] += mig
        s.n_res[R] += res
        s.n_runs[R] += 1
        s.overhead[R] += pay
        s.compute[R] += need
        s.attained[R] += gpus * occupied
        s.cost[R] += gpus * occupied / 3600.0 * PRICE_PER_GPU_HOUR
        A = np.array(s.active, np.int64)
        stopped = A[s.ran_last[A] & ~np.isin(A, R)]
        s.n_pre[stopped] += 1
        s.ran_last[A] = np.isin(A, R)
        for i in A.tolist():
            s.current[i] = held[i].current if i in held else None
        return out

    @staticmethod
    def _sla_counts(s: "_State") -> tuple[int, int, int]:
        """This round's SLA accounting from the deciding round's report (module docstring):
        violated, shortfall and unadmitted guaranteed jobs still running or waiting."""
        viol = short = unadm = 0
        for m, required, admitted, met in s.sla:
            if not np.isnan(s.finish[m]) and s.finish[m] <= s.t:
                continue  # finished in an earlier round
            below = m not in s.held or s.held[m].thr < required * (1 - 1e-6)
            viol += admitted and met and below
            short += admitted and not met and below
            unadm += not admitted
        return viol, short, unadm

    def _record(self, s: "_State", decided: bool, x: "_Executed") -> None:
        """The round's rows: one per running job (``runs``), one per node slice (``placements``) and
        the round's totals (``rounds``)."""
        L = float(self.config.round_seconds)
        viol, short, unadm = self._sla_counts(s)
        t = s.t
        for q, k in enumerate(x.R.tolist()):
            r = s.held[k]
            s.run_rows.append((t, s.ids[k], decided, r.node_type, r.config, r.plan, r.gpus, r.cpus, r.host,
                               ";".join(str(sl[1]) for sl in r.slices), r.thr, float(s.ref[k]), bool(x.rec[q]),
                               bool(x.mig[q]), bool(x.res[q]), float(x.pay[q]), float(x.need[q]),
                               float(x.progress[q]), float(x.T_before[q]), int(x.N_before[q]), float(s.delta[k])))
            s.place_rows.extend((t, s.ids[k], r.node_type, sl[1], sl[2], sl[3], sl[4]) for sl in r.slices)
        s.round_rows.append((t, L, len(s.active), int(x.R.size), decided, float((x.gpus * x.occupied).sum()),
                             float((x.gpus * x.need).sum()), float((x.cpus * x.occupied).sum()),
                             float((x.host * x.occupied).sum()), float(np.sum(x.progress / (L * s.ref[x.R]))),
                             int(x.rec.sum()), int(x.mig.sum()), int(x.res.sum()), int(viol), int(short), int(unadm),
                             float(x.pay.sum())))

    @staticmethod
    def _complete(s: "_State", x: "_Executed", bar: Any) -> None:
        """Jobs that finished this round leave (noted on the recompute clock)."""
        gone = x.R[x.fin]
        for k in gone.tolist():
            s.clock.note("completion", float(s.finish[k]), s.ids[k])
            del s.held[k]
        if gone.size:
            done = set(gone.tolist())
            s.active = [a for a in s.active if a not in done]
            bar.update(int(gone.size))

    def _advance(self, s: "_State", decided: bool, R: np.ndarray) -> bool:
        """The clock moves one round; when the policy ran nothing, to the next arrival (only an
        arrival can change that), and with none left the run has stalled (``False``)."""
        L = float(self.config.round_seconds)
        t_next = s.t + L
        if decided and R.size == 0:
            if s.nxt >= len(s.jobs):
                s.stalled = True
                s.t = t_next
                return False
            t_next = max(t_next, float(s.arrival[s.nxt]))
            s.held = {}
            if t_next > s.t + L:
                s.idle_round(s.t + L, t_next - s.t - L)
        s.t = t_next
        return True

    # ------------------------------------------------------------------ pieces
    @staticmethod
    def _runs(dec: RoundDecision, index: Mapping[str, int]) -> dict[int, _Run]:
        """Per running job (simulator index): configuration, throughput and per-node slices."""
        space = dec.space
        labels = space.jobs.labels.tolist()
        cfg_labels = space.configs.labels
        types = space.worker_types.labels
        out: dict[int, _Run] = {}
        for m, p in dec.assignment.placements.items():
            jid = str(labels[m])
            d = dec.jobs[jid]
            if not d.running or d.plan is None:
                continue
            slices = tuple((int(p.node_type), int(nd), int(g), float(c), float(h))
                           for nd, g, c, h in zip(p.nodes, p.gpus, p.cpus, p.host))
            out[index[jid]] = _Run(str(types[p.node_type]), str(cfg_labels[p.col]) + ("|spread" if p.spread else ""),
                                   d.plan.label, int(d.gpus), float(sum(p.cpus)), float(sum(p.host)),
                                   float(d.throughput), bool(d.reconfigured), d.current(), slices)
        return out

    def _result(self, s: "_State") -> SimResult:
        """The run's DataFrames (jobs, rounds, decisions, runs, placements) and metrics."""
        import pandas as pd

        from ..reconfig.examples import GPUS_PER_NODE

        cfg = self.config
        jobs, ref, req_gpus, guaranteed, delta, steps = s.jobs, s.ref, s.req_gpus, s.guaranteed, s.delta, s.steps
        arrival, finish, cap, timings, n_rec, overhead = s.arrival, s.finish, s.cap, s.timings, s.n_rec, s.overhead
        N = len(jobs)
        lo, hi = s.window
        jct = finish - arrival
        nbar = average_contention(arrival, finish)
        thr_iso = isolated_throughput(ref[:, None], req_gpus.astype(float), np.array([cap[0]]),
                                      np.nan_to_num(nbar, nan=1.0))
        with np.errstate(divide="ignore", invalid="ignore"):
            iso_jct = steps / np.where(thr_iso > 0, thr_iso, np.nan)
            rho = np.where(np.isfinite(jct), jct / iso_jct, np.nan)
        e = [j.extra for j in jobs]
        job_df = pd.DataFrame({
            "id": [j.id for j in jobs], "arrival": arrival, "job_type": [x["model"] for x in e],
            "scale_factor": req_gpus, "model": [x["model"] for x in e], "entity": [j.entity for j in jobs],
            "guaranteed": guaranteed, "gpus": req_gpus, "cpus": [int(x["cpus"]) for x in e],
            "plan": [_plan_label(x["plan"]) for x in e], "reference_throughput": ref, "steps": steps,
            "steps_done": s.done, "weight": [j.weight for j in jobs], "slo_seconds": np.full(N, np.nan),
            "checkpoint_seconds": delta, "first_start": s.first, "finish": finish, "jct": jct,
            "rounds_run": s.n_runs, "compute_seconds": s.compute, "overhead_seconds": overhead,
            "attained_gpu_seconds": s.attained, "reconfigurations": n_rec, "migrations": s.n_mig,
            "preemptions": s.n_pre, "resumes": s.n_res, "cost": s.cost,
            "avg_contention": nbar, "isolated_jct": iso_jct, "rho": rho,
            "in_window": (np.arange(N) >= lo) & (np.arange(N) < hi)})
        rounds_df = pd.DataFrame(s.round_rows, columns=[
            "start", "length", "active_jobs", "running_jobs", "decided", "busy_gpu_seconds", "compute_gpu_seconds",
            "busy_cpu_seconds", "busy_host_byte_seconds", "norm_throughput", "reconfigurations", "migrations",
            "resumes", "sla_violations", "sla_shortfall", "guaranteed_unadmitted", "checkpoint_seconds"])
        rounds_df["available_gpus"] = int(cap[0])
        length = rounds_df["length"].to_numpy(float)
        rounds_df["utilization"] = rounds_df["busy_gpu_seconds"] / (cap[0] * length)
        rounds_df["cpu_utilization"] = rounds_df["busy_cpu_seconds"] / (cap[1] * length)
        rounds_df["host_mem_utilization"] = rounds_df["busy_host_byte_seconds"] / (cap[2] * length)
        rec_df = pd.DataFrame(s.decision_rows, columns=[
            "time", "jobs", "status", "problem_seconds", "recompute_seconds", "policy_seconds", "objective", "running",
            "relabel_seconds"])
        runs_df = pd.DataFrame(s.run_rows, columns=[
            "round_start", "job", "decided", "node_type", "config", "plan", "gpus", "cpus", "host_bytes", "nodes",
            "throughput", "reference_throughput", "reconfigured", "migrated", "resumed", "overhead_seconds",
            "compute_seconds", "steps", "trained_seconds_before", "reconfigurations_before", "checkpoint_seconds"])
        place_df = pd.DataFrame(s.place_rows, columns=["round_start", "job", "node_type", "node", "gpus", "cpus",
                                                     "host_bytes"])
        wall = time.perf_counter() - s.t_wall
        timings["total"] = wall
        timings["other"] = wall - sum(timings[p] for p in PHASES)
        span = float(length.sum())
        win = np.zeros(N, bool)
        win[lo:hi] = True

        def stats(mask: np.ndarray) -> tuple[float | None, float | None]:
            x = jct[mask & win & np.isfinite(jct)]
            return (float(x.mean()), float(np.percentile(x, 99))) if x.size else (None, None)

        g_avg, g_p99 = stats(guaranteed)
        b_avg, b_p99 = stats(~guaranteed)
        extra = {
            "policy": cfg.policy, "policy_kind": "reconfig", "generator": "transformers",
            "cluster": {self.node.name: int(cap[0])}, "nodes": cfg.nodes,
            "node": {"gpus": GPUS_PER_NODE, "cpus": self.node.cpus_per_node,
                     "host_mem_bytes": self.node.host_mem_per_node},
            "reconfigure": cfg.reconfigure, "space_mode": s.space_mode, "threshold": cfg.threshold,
            "round_seconds": cfg.round_seconds, "reschedule": cfg.reschedule,
            "recompute_interval": cfg.round_seconds if cfg.recompute_interval is None else cfg.recompute_interval,
            "checkpoint_seconds": cfg.checkpoint_seconds, "quota_fraction": cfg.quota_fraction,
            "seed": int(cfg.seed), "stalled": s.stalled, "simulated_seconds": s.t - s.t0, "wall_seconds": wall,
            "phase_seconds": dict(timings), "decisions": len(rec_df), "executed_rounds": s.rounds,
            "num_guaranteed": int(guaranteed.sum()), "num_best_effort": int((~guaranteed).sum()),
            "guaranteed_avg_jct": g_avg, "guaranteed_p99_jct": g_p99,
            "best_effort_avg_jct": b_avg, "best_effort_p99_jct": b_p99,
            "reconfigurations": int(n_rec.sum()), "resumes": int(s.n_res.sum()),
            "checkpoint_seconds_lost": float(overhead.sum()),
            "sla_violations": int(rounds_df["sla_violations"].sum()),
            "sla_shortfall_rounds": int(rounds_df["sla_shortfall"].sum()),
            "guaranteed_unadmitted_rounds": int(rounds_df["guaranteed_unadmitted"].sum()),
            "cpu_utilization": float(rounds_df["busy_cpu_seconds"].sum() / (cap[1] * span)) if span > 0 else None,
            "host_mem_utilization": (float(rounds_df["busy_host_byte_seconds"].sum() / (cap[2] * span))
                                     if span > 0 else None),
        }
        metrics = compute_metrics(job_df, rounds_df, rec_df, window=cfg.window,
                                  available_gpu_seconds=float(cap[0] * span), extra=extra)
        cluster = {self.node.name: int(cap[0])}
        return SimResult(cfg, cluster, job_df, rounds_df, rec_df, metrics, timings, runs_df,  # type: ignore[arg-type]
                         tables={"placements": place_df})


def _plan_label(plan: Mapping[str, Any]) -> str:
    from ..perfmodel import Plan

    return Plan(**dict(plan)).label


def simulate_reconfig(trace: Sequence[TraceJob], config: ReconfigSimConfig | None = None,
                      **overrides: Any) -> SimResult:
    """Run one simulation: ``simulate_reconfig(transformers_trace(20, 4.0, seed=1), policy="fluid_srpt",
    nodes=2, reconfigure="all")``."""
    if config is None:
        config = ReconfigSimConfig(**overrides)
    elif overrides:
        config = replace(config, **overrides)
    return ReconfigSimulator(config).run(trace)
