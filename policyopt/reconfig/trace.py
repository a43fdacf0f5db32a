r"""The ``transformers`` trace generator, per-round problems, and a small fluid round simulation.

Generator (:func:`transformers_trace`, seeded): jobs from :data:`~.examples.CATALOGUE` with
probabilities ViT .18, RoBERTa .18, BERT .18, T5 .14, GPT-2 .14, LLaMA-2 7B .13, LLaMA 30B .05; the
requested GPUs drawn uniformly from the model's sizes (ViT {1,2,4}, RoBERTa/BERT {1,2,4,8}, T5
{2,4,8}, GPT-2 {4,8,16}, LLaMA-2 {8,16,32}, LLaMA {16,32}); cores per GPU from {4, 8, 12}; the
*initial plan drawn uniformly from the plans that fit in memory* there (so users' plans are often
not the best); tenant ``prod`` (guaranteed) with probability ``guaranteed_fraction`` else
``research`` (best effort); duration under the requested resources and plan ``60·10^U(1.5,3)`` s
w.p. 0.8 else ``60·10^U(3,4)`` s (Gavel's distribution), converted to iterations; Poisson arrivals
at ``rate_per_hour`` (or all at 0 with ``static``); checkpoint-restore ``δ = 20 s + 16·P bytes /
5 GB/s`` (weights + Adam states written and read back). Cluster (:func:`trace_problem`): nodes of
8 GPUs / 96 cores / 1.6 TB (:data:`~.examples.A100_NODE`), the ``prod`` tenant's quota a fraction
of every resource (default 50%).

:func:`simulate_fluid` runs rounds of ``round_seconds``: each round the scheduler decides one
configuration per active job (:func:`~.rounds.reconfig_round`); a job that is reconfigured (or
resumed after a pause) loses ``δ`` of the round; jobs finish mid-round at their exact time. It is the
project simulator's loop (:class:`policyopt.sim.reconfig_sim.ReconfigSimulator`, behind
``policyopt simulate --generator transformers``) with a decision every round and node moves not
charged, returning the compact :class:`SimResult`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Mapping, Sequence

import numpy as np

from policyopt.errors import InputError
from policyopt.perfmodel import Plan
from policyopt.problem import Cluster, Entity, Job, WorkerType

from .catalog import plan_rows, reference_throughputs
from .examples import A100_NODE, CATALOGUE, GPUS_PER_NODE
from .rounds import RoundDecision, reconfig_round
from .spec import CurrentConfig, NodeType, Quota, ReconfigJob, ReconfigOptions, ReconfigProblem, ReconfigSpec

if TYPE_CHECKING:  # the runtimes import each other only inside functions
    from policyopt.sim.traces import TraceJob

__all__ = ["MODEL_MIX", "transformers_trace", "JobState", "trace_problem", "SimResult", "simulate_fluid",
           "checkpoint_seconds"]

#: model → (probability, requested GPU counts)
MODEL_MIX: dict[str, tuple[float, tuple[int, ...]]] = {
    "vit-86m": (0.18, (1, 2, 4)),
    "roberta-355m": (0.18, (1, 2, 4, 8)),
    "bert-336m": (0.18, (1, 2, 4, 8)),
    "t5-1.2b": (0.14, (2, 4, 8)),
    "gpt2-1.5b": (0.14, (4, 8, 16)),
    "llama2-7b": (0.13, (8, 16, 32)),
    "llama-30b": (0.05, (16, 32)),
}
CPUS_PER_GPU_CHOICES = (4, 8, 12)
PRICE_PER_GPU_HOUR = 4.0  # assumption (on-demand A100-80G order of magnitude), for cost policies


def checkpoint_seconds(params: float) -> float:
    """``δ = 20 s + 16·P bytes / 5 GB/s``: write and read back weights and Adam states."""
    return 20.0 + 16.0 * params / 5e9


def transformers_trace(num_jobs: int, rate_per_hour: float | None = None, *, seed: int = 0,
                       static: bool = False, guaranteed_fraction: float = 0.3,
                       node: NodeType = A100_NODE, max_gpus: int | None = None) -> list[TraceJob]:
    """Seeded transformer trace (module docstring); ``extra`` holds the reconfig request.
    ``max_gpus`` drops request sizes above it (for small clusters), and with them the models none of
    whose sizes fit (the mix is renormalized over the others)."""
    from policyopt.sim.traces import TraceJob

    if num_jobs <= 0:
        raise InputError("jobs", num_jobs, "must be a positive number of jobs")
    if not static and not (rate_per_hour and rate_per_hour > 0):
        raise InputError("rate", rate_per_hour, "a positive arrival rate (jobs/hour) is required unless static")
    if not 0.0 <= guaranteed_fraction <= 1.0:
        raise InputError("guaranteed_fraction", guaranteed_fraction, "must be in [0, 1]")
    rng = np.random.default_rng(seed)
    names = list(MODEL_MIX)
    probs = np.array([MODEL_MIX[m][0] for m in names])
    if max_gpus is not None:
        fits = np.array([min(MODEL_MIX[m][1]) <= max_gpus for m in names])
        if not fits.any():
            raise InputError("max_gpus", max_gpus, f"no model of the mix fits: the smallest request is "
                             f"{min(min(v[1]) for v in MODEL_MIX.values())} GPUs")
        probs = np.where(fits, probs, 0.0)
    model_idx = rng.choice(len(names), size=num_jobs, p=probs / probs.sum())
    u_size = rng.random(num_jobs)
    cpg = rng.choice(CPUS_PER_GPU_CHOICES, size=num_jobs)
    u_plan = rng.random(num_jobs)
    guaranteed = rng.random(num_jobs) < guaranteed_fraction
    short = rng.random(num_jobs) < 0.8
    dur = 60.0 * 10.0 ** np.where(short, rng.uniform(1.5, 3.0, num_jobs), rng.uniform(3.0, 4.0, num_jobs))
    if static:
        arrivals = np.zeros(num_jobs)
    else:
        gaps = rng.exponential(3600.0 / float(rate_per_hour), num_jobs)  # type: ignore[arg-type]
        gaps[0] = 0.0
        arrivals = np.cumsum(gaps)
    opts = ReconfigOptions()
    plan_cols = ["dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "zero"]
    feasible: dict[tuple[str, int, int], list[dict[str, Any]]] = {}
    recs = []
    for i in range(num_jobs):  # one draw per job (sequential by nature of a trace)
        model = names[int(model_idx[i])]
        sizes = tuple(x for x in MODEL_MIX[model][1] if max_gpus is None or x <= max_gpus)
        g = int(sizes[int(u_size[i] * len(sizes))])
        c = int(min(g * int(cpg[i]), -(-g // GPUS_PER_NODE) * node.cpus_per_node))
        key = (model, g, c)
        if key not in feasible:  # plans that fit in memory at exactly (g, c), computed once
            rows = plan_rows(CATALOGUE[model], node, GPUS_PER_NODE, opts, g, c, -(-g // GPUS_PER_NODE))
            feasible[key] = [{"dp": int(r[0]), "tp": int(r[1]), "pp": int(r[2]), "micro_batches": int(r[3]),
                              "ga_steps": int(r[4]), "gc": bool(r[5]), "zero": str(r[6])}
                             for r in rows[plan_cols].itertuples(index=False)]
            if not feasible[key]:
                raise InputError("trace.model", model, f"no plan fits on {g} GPUs and {c} cores")
        plans = feasible[key]
        recs.append((model, g, c, plans[int(u_plan[i] * len(plans))]))
    # reference throughput of every request in one vectorized evaluation
    spec = ReconfigSpec({node.name: node}, dict(CATALOGUE),
                        {str(i): ReconfigJob(m, node.name, g, c, Plan(**p)) for i, (m, g, c, p) in enumerate(recs)})
    ref = reference_throughputs(spec, [str(i) for i in range(num_jobs)], {node.name: GPUS_PER_NODE})
    jobs = []
    for i, (model, g, c, plan) in enumerate(recs):
        steps = float(np.ceil(dur[i] * ref[i]))
        tenant = "prod" if guaranteed[i] else "research"
        extra = {"model": model, "node_type": node.name, "gpus": g, "cpus": c, "plan": plan,
                 "guaranteed": bool(guaranteed[i]),
                 "checkpoint_seconds": checkpoint_seconds(CATALOGUE[model].spec.params)}
        jobs.append(TraceJob(str(i), float(arrivals[i]), model, g, steps, 1.0, None, tenant, float(dur[i]),
                             bool(guaranteed[i]), extra))
    return jobs


@dataclass
class JobState:
    """Progress of a trace job during a simulation."""

    steps_done: float = 0.0
    run_seconds: float = 0.0  # T of the reconfiguration rule
    reconfigurations: int = 0
    current: CurrentConfig | None = None
    finish: float | None = None
    ran_last_round: bool = False


def trace_problem(jobs: Sequence[TraceJob], now: float = 0.0, *, nodes: int = 8,
                  node: NodeType = A100_NODE, states: Mapping[str, JobState] | None = None,
                  quota_fraction: float | None = 0.5, options: ReconfigOptions | None = None
                  ) -> ReconfigProblem:
    """The :class:`ReconfigProblem` of trace jobs at time ``now`` (their ``extra`` holds the request;
    ``states`` their progress and current configurations)."""
    if not jobs:
        raise InputError("jobs", [], "a problem needs at least one job")
    states = states or {}
    gpus = nodes * GPUS_PER_NODE
    cluster = Cluster((WorkerType(node.name, gpus, GPUS_PER_NODE, PRICE_PER_GPU_HOUR),))
    base_jobs, rjobs = [], {}
    for tj in jobs:
        e = tj.extra
        if int(e["gpus"]) > gpus:
            raise InputError(f"trace[{tj.id}].gpus", int(e["gpus"]),
                             f"requests more GPUs than the cluster has ({gpus}); use max_gpus or more nodes")
        st = states.get(tj.id, JobState())
        base_jobs.append(Job(id=tj.id, throughputs={node.name: 1.0}, scale_factor=int(e["gpus"]),
                             steps_remaining=max(tj.steps - st.steps_done, 0.0),
                             time_since_start=max(now - tj.arrival, 0.0), entity=tj.entity, arrival=tj.arrival))
        rjobs[tj.id] = ReconfigJob(e["model"], e["node_type"], int(e["gpus"]), int(e["cpus"]), Plan(**e["plan"]),
                                   bool(e["guaranteed"]), st.reconfigurations, st.run_seconds,
                                   float(e["checkpoint_seconds"]), st.current)
    quotas = {}
    if quota_fraction is not None:
        quotas["prod"] = Quota(gpus=quota_fraction * gpus, cpus=quota_fraction * nodes * node.cpus_per_node,
                               host_mem=quota_fraction * nodes * node.host_mem_per_node)
    models = {m: CATALOGUE[m] for m in {tj.extra["model"] for tj in jobs}}
    spec = ReconfigSpec({node.name: node}, models, rjobs, quotas, options or ReconfigOptions())
    # base throughputs: the reference steps/s (a fixed-plan view of the same problem)
    ref = reference_throughputs(spec, [j.id for j in base_jobs], {node.name: GPUS_PER_NODE})
    base_jobs = [Job(id=j.id, throughputs={node.name: float(t)}, scale_factor=j.scale_factor,
                     steps_remaining=j.steps_remaining, time_since_start=j.time_since_start,
                     entity=j.entity, arrival=j.arrival) for j, t in zip(base_jobs, ref)]
    ents = {"prod": Entity("prod"), "research": Entity("research")}
    return ReconfigProblem(cluster, tuple(base_jobs), (), ents, (), reconfig=spec)


@dataclass
class SimResult:
    """Per-job completion times and aggregate metrics of a fluid simulation."""

    jct: dict[str, float]
    guaranteed: dict[str, bool]
    reconfigurations: dict[str, int]
    makespan: float
    rounds: int
    decision_seconds: list[float] = field(default_factory=list)
    sla_misses: int = 0  # (job, round) pairs where an admitted guaranteed job ran below its reference
    unfinished: int = 0

    def metrics(self) -> dict[str, Any]:
        j = np.array(list(self.jct.values()))
        g = np.array([self.guaranteed[k] for k in self.jct])
        out = {"jobs": len(j), "avg_jct": float(j.mean()) if j.size else None,
               "p99_jct": float(np.percentile(j, 99)) if j.size else None, "makespan": self.makespan,
               "avg_jct_guaranteed": float(j[g].mean()) if g.any() else None,
               "avg_jct_best_effort": float(j[~g].mean()) if (~g).any() else None,
               "reconfigurations": int(sum(self.reconfigurations.values())), "rounds": self.rounds,
               "sla_misses": self.sla_misses, "unfinished": self.unfinished,
               "mean_decision_seconds": float(np.mean(self.decision_seconds)) if self.decision_seconds else None}
        return out


Scheduler = Callable[[ReconfigProblem, Mapping[str, float]], RoundDecision]


def policy_scheduler(policy: str, **options: Any) -> Scheduler:
    """A scheduler calling :func:`reconfig_round` with ``policy`` and its options."""
    def run(problem: ReconfigProblem, received: Mapping[str, float]) -> RoundDecision:
        return reconfig_round(problem, policy, received=received, **options)
    return run


def simulate_fluid(trace: Sequence[TraceJob], scheduler: Scheduler | str, *, nodes: int = 8,
                   round_seconds: float = 360.0, reconfigure: str = "all", quota_fraction: float | None = 0.5,
                   max_rounds: int = 100_000, amortize: bool = False, quota_mode: str = "reserve",
                   **policy_options: Any) -> SimResult:
    """Round-based simulation of ``trace`` (module docstring). ``scheduler``: a policy name (its
    ``policy_options`` passed on) or a callable ``(problem, received) -> RoundDecision``.
    ``reconfigure`` sets ``reconfig.options.reconfigure``; ``amortize`` also sets
    ``round_seconds`` there (reconfiguration cost in the objective); ``quota_mode`` sets
    ``reconfig.options.quota`` (``reserve``: idle capacity flows past the quota; ``cap``).

    The loop is the project simulator's (:class:`policyopt.sim.reconfig_sim.ReconfigSimulator`) with a
    decision every round and node moves not charged; jobs in ``(arrival, id)`` order."""
    from policyopt.sim.reconfig_sim import ReconfigSimConfig, ReconfigSimulator

    sched = policy_scheduler(scheduler, **policy_options) if isinstance(scheduler, str) else scheduler
    jobs = sorted(trace, key=lambda j: (j.arrival, j.id))
    config = ReconfigSimConfig(policy=scheduler if isinstance(scheduler, str) else "custom", nodes=nodes,
                               reconfigure=reconfigure, round_seconds=round_seconds, quota_fraction=quota_fraction,
                               quota=quota_mode, amortize=amortize, reschedule="rounds", charge_migrations=False,
                               max_rounds=max_rounds, window=(0.0, 1.0))
    res = ReconfigSimulator(config, scheduler=sched).run(jobs)
    jf = res.jobs
    fin = np.isfinite(jf["finish"].to_numpy(float))
    ids = jf["id"].tolist()
    jct = dict(zip([i for i, f in zip(ids, fin) if f], jf["jct"].to_numpy(float)[fin].tolist()))
    g = dict(zip(ids, jf["guaranteed"].tolist()))
    misses = int(res.rounds["sla_violations"].sum() + res.rounds["sla_shortfall"].sum()) if len(res.rounds) else 0
    return SimResult(jct, {k: bool(g[k]) for k in jct}, dict(zip(ids, jf["reconfigurations"].astype(int).tolist())),
                     float(jf["finish"].max()) if fin.any() else 0.0, int(res.metrics["executed_rounds"]),
                     res.recomputes["recompute_seconds"].astype(float).tolist(), misses, int((~fin).sum()))
