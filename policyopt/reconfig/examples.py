r"""A transformer job catalogue, the reference node type, and the two-job example.

Catalogue: shapes follow the published architectures; the profiled forward time of the global batch
on one GPU is ``2·P·b·s / F`` with ``F = 1.2·10^14`` FLOP/s effective (about 40% of an A100/A800's
bf16 peak, :data:`policyopt.perfmodel.synthetic.EFFECTIVE_FLOPS`); every model uses the nominal
performance-model parameters (:data:`policyopt.perfmodel.synthetic.NOMINAL_PARAMS`) — a fitted set
replaces them in practice. Where Rubick's artifact (github.com/AlibabaPAI/reconfigurable-dl-scheduler,
"the artifact" below) states a value, it is used and named; the rest are stated assumptions.

=============  ======  ======  ======  ====  =====  ==========================================
model          P       layers  hidden  seq   batch  source
=============  ======  ======  ======  ====  =====  ==========================================
vit-86m        86M     12      768     197   512    ViT-B/16 shape; batch assumed
roberta-355m   355M    24      1024    512   64     RoBERTa-large shape (512 positions); batch
                                                    64 = the artifact's RoBERTa job
                                                    (simulator/models/roberta.py, local_bsz 64)
bert-336m      336M    24      1024    512   256    BERT-large shape; batch assumed
t5-1.2b        1.2B    48      1536    512   128    assumption
t5-3b          3.34B   12      2048    2048  8      the artifact's T5-3B of the two-job example
                                                    (72_micro_benckmarks/t5_3B_config.py:
                                                    12 layers, hidden 2048, seq 2048, 8 samples
                                                    per iteration, 24 attention heads — stored
                                                    scores counted, TP 3 allowed; P from
                                                    Morphling_scheuler.py)
gpt2-1.5b      1.5B    48      1600    1024  128    GPT-2 XL shape; batch assumed
llama2-7b      6.7B    32      4096    2048  128    LLaMA-2-7B shape; batch assumed
llama-30b      32.5B   60      6656    2048  128    LLaMA-30B shape; batch assumed
=============  ======  ======  ======  ====  =====  ==========================================

Check of the compute scale against the artifact's measured A800 iteration times: RoBERTa-large,
batch 64, one GPU: 0.61 s predicted vs 0.68–0.71 s measured; T5-3B with TP 4 on 4 GPUs: 0.75 s vs
0.82 s (:func:`measured_vs_model`).

Node type ``a100`` (:data:`A100_NODE`), Rubick's testbed node (artifact README: 8 A800 80 GB GPUs,
96 vCPUs, 1,600 GB memory, 400 GB/s NVLink, 100 GB/s RDMA per node): 8 GPUs of 80 GiB, 96 cores,
1.6 TB host memory; ``bw_intra`` 150 GB/s (400 GB/s NVLink both directions = 200 GB/s per
direction, at about 75% all-reduce efficiency); ``bw_inter`` 12.5 GB/s per GPU (100 GB/s of RDMA per
node shared by its 8 GPUs); ``bw_pcie`` 12 GB/s (a PCIe 4.0 x16 uplink, about 25 GB/s, shared by the
two GPUs of a PCIe switch during offload — an estimate).

**The two-job example** (:func:`rubick_two_job_example`), after Rubick's Figure 8
(artifact/72_micro_benckmarks/Figure8.ipynb): RoBERTa and T5-3B share 4 GPUs. A job's *speedup* is
its throughput over its throughput alone on all 4 GPUs with its *original* plan (RoBERTa: DP 4 with
GA; T5-3B: TP 4 with GA) — the normalization of the published figure; the *total speedup* sums the
two. Published: 0.78 for an even split with each job's best plan, 1.44 for Rubick's split (1 GPU
RoBERTa, 3 GPUs T5-3B). :func:`published_two_job_totals` recomputes both from the artifact's measured
iteration times (:data:`RUBICK_MEASURED_ITER_S`); :func:`rubick_two_job_example` evaluates the same
question with our performance model: the even split, every GPU split (oracle), ``rubick_greedy`` and
the LP ``max_sum_throughput`` (normalized) over the multi-resource space. Run
``python -m policyopt.reconfig.examples`` for the table.

:func:`two_job_example` is the older variant (RoBERTa + T5-1.2B, 6 cores per GPU, speedup relative
to each job's *best* plan on all 4 GPUs).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np
import pandas as pd

from policyopt.perfmodel import (ModelSpec, PerfParams, Plan, best_plan, enumerate_plans,
                                 evaluate_candidates)
from policyopt.perfmodel.synthetic import EFFECTIVE_FLOPS, NOMINAL_PARAMS
from policyopt.perfmodel.table import CONFIG_COLUMNS, PLAN_COLUMNS

from .spec import GiB, ModelEntry, NodeType

if TYPE_CHECKING:
    from .spec import ReconfigProblem

__all__ = ["CATALOGUE", "A100_NODE", "GPUS_PER_NODE", "catalogue_entry", "TwoJobSplit",
           "TwoJobExample", "two_job_example", "PUBLISHED_TWO_JOB", "RUBICK_MEASURED_ITER_S",
           "RUBICK_ORIGINAL_KIND", "MeasuredTwoJob", "published_two_job_totals", "RubickTwoJob",
           "rubick_two_job_node", "rubick_two_job_problem", "rubick_two_job_example",
           "measured_vs_model", "fit_to_measured", "format_two_job"]

GPUS_PER_NODE = 8
#: The published total speedups of the two-job example (even split, sensitivity-aware split).
PUBLISHED_TWO_JOB = (0.78, 1.44)


def _spec(name: str, params: float, layers: int, hidden: int, seq: int, batch: int, heads: int = 0
          ) -> ModelSpec:
    return ModelSpec(name=name, params=params, layers=layers, hidden=hidden, seq_len=seq,
                     global_batch=batch, fwd_time_1gpu=2.0 * params * batch * seq / EFFECTIVE_FLOPS,
                     bytes_per_param=2.0, heads=heads)


#: Model name → (shape, performance-model parameters). See the module docstring for sources.
CATALOGUE: dict[str, ModelEntry] = {
    s.name: ModelEntry(s, NOMINAL_PARAMS) for s in (
        _spec("vit-86m", 86e6, 12, 768, 197, 512),
        _spec("roberta-355m", 355e6, 24, 1024, 512, 64),
        _spec("bert-336m", 336e6, 24, 1024, 512, 256),
        _spec("t5-1.2b", 1.2e9, 48, 1536, 512, 128),
        _spec("t5-3b", 3_338_423_808.0, 12, 2048, 2048, 8, heads=24),
        _spec("gpt2-1.5b", 1.5e9, 48, 1600, 1024, 128),
        _spec("llama2-7b", 6.7e9, 32, 4096, 2048, 128),
        _spec("llama-30b", 32.5e9, 60, 6656, 2048, 128),
    )
}

A100_NODE = NodeType(name="a100", cpus_per_node=96, host_mem_per_node=1.6e12, gpu_mem_bytes=80 * GiB,
                     bw_intra=150e9, bw_inter=12.5e9, bw_pcie=12e9)


def catalogue_entry(name: str, params: PerfParams | None = None) -> ModelEntry:
    """A catalogue model (optionally with other performance-model parameters)."""
    from policyopt.errors import UnknownNameError
    if name not in CATALOGUE:
        raise UnknownNameError("model", name, CATALOGUE)
    e = CATALOGUE[name]
    return e if params is None else ModelEntry(e.spec, params)


@dataclass(frozen=True)
class TwoJobSplit:
    """One split of the node: per job GPUs, cores, plan (None: not running), throughput
    (samples/s) and speedup (throughput over the normalizing throughput)."""

    gpus: tuple[int, int]
    cpus: tuple[int, int]
    plans: tuple[Plan | None, Plan | None]
    throughput: tuple[float, float]
    speedup: tuple[float, float]

    @property
    def total_speedup(self) -> float:
        return self.speedup[0] + self.speedup[1]


@dataclass(frozen=True)
class TwoJobExample:
    """Even split vs the best split (our model, best-plan normalization), and the published totals."""

    models: tuple[str, str]
    alone: tuple[float, float]  # samples/s alone on the whole node, best plan
    even: TwoJobSplit
    best: TwoJobSplit
    splits: tuple[TwoJobSplit, ...]
    published: tuple[float, float] = PUBLISHED_TWO_JOB


def two_job_example(models: tuple[str, str] = ("roberta-355m", "t5-1.2b"), gpus: int = 4,
                    cpus_per_gpu: int = 6, node: NodeType | None = None) -> TwoJobExample:
    """Evaluate every split of ``gpus`` GPUs (cores proportional, ``cpus_per_gpu`` per GPU, each
    job at least one GPU) between two catalogue jobs with per-job best plans; a job's speedup is
    relative to its *best* plan alone on all ``gpus`` GPUs (see :func:`rubick_two_job_example`
    for the published normalization)."""
    base = node or A100_NODE
    cluster = base.cluster_spec(gpus)
    cluster = type(cluster)(gpus_per_node=gpus, cpus_per_node=gpus * cpus_per_gpu,
                            bw_intra=base.bw_intra, bw_inter=base.bw_inter, bw_pcie=base.bw_pcie,
                            gpu_mem_bytes=base.gpu_mem_bytes,
                            host_mem_per_node=base.host_mem_per_node * gpus / GPUS_PER_NODE)
    entries = [catalogue_entry(m) for m in models]
    alone = []
    for e in entries:
        b = best_plan(e.spec, e.params, gpus, gpus * cpus_per_gpu, cluster=cluster)
        if b is None:
            raise ValueError(f"{e.spec.name} does not fit on {gpus} GPUs")
        alone.append(b.throughput)
    splits = []
    for g0 in range(1, gpus):
        g = (g0, gpus - g0)
        c = (g[0] * cpus_per_gpu, g[1] * cpus_per_gpu)
        if any(enumerate_plans(e.spec, gi, gpus_per_node=gpus).empty for e, gi in zip(entries, g)):
            continue  # no plan divides the global batch on this many GPUs (e.g. 3 GPUs, batch 256)
        bests = [best_plan(e.spec, e.params, gi, ci, cluster=cluster) for e, gi, ci in zip(entries, g, c)]
        if any(b is None for b in bests):
            continue
        thr = tuple(b.throughput for b in bests)  # type: ignore[union-attr]
        splits.append(TwoJobSplit(g, c, tuple(b.plan for b in bests),  # type: ignore[arg-type,union-attr]
                                  thr, (thr[0] / alone[0], thr[1] / alone[1])))  # type: ignore[arg-type]
    even = next(s for s in splits if s.gpus == (gpus // 2, gpus - gpus // 2))
    best = max(splits, key=lambda s: s.total_speedup)
    return TwoJobExample(tuple(models), (alone[0], alone[1]), even, best, tuple(splits))  # type: ignore[arg-type]


# ---------------------------------------------------------------------------------------------
# The published two-job example (Rubick, Figure 8) and our model's answer to the same question
# ---------------------------------------------------------------------------------------------

#: Measured iteration seconds on Rubick's A800 testbed, (model, plan kind, GPUs on one node) →
#: seconds, copied from the artifact's simulator/traces/roberta/placements.csv and
#: simulator/traces/t5_3B/placements.csv (the tables Figure8.ipynb reads). Plan kinds: ``ga`` =
#: data parallel + gradient accumulation, ``gc`` = data parallel + checkpointing, ``zero-dp`` =
#: ZeRO-2, ``zero-offload`` = ZeRO-Offload, ``tp+ga`` = tensor parallel over all GPUs + GA.
RUBICK_MEASURED_ITER_S: dict[tuple[str, str, int], float] = {
    ("roberta-355m", "ga", 1): 0.70537019, ("roberta-355m", "ga", 2): 0.705230264,
    ("roberta-355m", "ga", 4): 0.372841222,
    ("roberta-355m", "gc", 1): 1.760226067, ("roberta-355m", "gc", 2): 0.926074294,
    ("roberta-355m", "gc", 4): 0.5028922,
    ("roberta-355m", "zero-dp", 1): 0.68361435, ("roberta-355m", "zero-dp", 2): 0.697693418,
    ("roberta-355m", "zero-dp", 4): 0.373935671,
    ("roberta-355m", "zero-offload", 1): 1.10083175, ("roberta-355m", "zero-offload", 2): 0.920583599,
    ("roberta-355m", "zero-offload", 4): 0.544180828,
    ("t5-3b", "zero-offload", 1): 4.0345, ("t5-3b", "zero-offload", 2): 3.2757,
    ("t5-3b", "zero-offload", 4): 2.8666,
    ("t5-3b", "tp+ga", 2): 3.567, ("t5-3b", "tp+ga", 3): 0.9301, ("t5-3b", "tp+ga", 4): 0.8233,
}
#: The jobs' original (user) plan kinds on all 4 GPUs — the published normalization (Figure8.ipynb).
RUBICK_ORIGINAL_KIND: dict[str, str] = {"roberta-355m": "ga", "t5-3b": "tp+ga"}
_TWO_JOB_MODELS = ("roberta-355m", "t5-3b")
_TWO_JOB_GPUS = 4
#: Our plans for the measured kinds: per-device micro-batch 8 for RoBERTa (64 = 8 GPUs × 8 in the
#: artifact) and 4 for T5-3B (``local_bsz`` 4), the rest by gradient accumulation.
_MICRO_BATCH = {"roberta-355m": 8, "t5-3b": 4}


def _kind_plan(model: str, kind: str, gpus: int) -> Plan:
    """Our :class:`Plan` for a measured plan kind on ``gpus`` GPUs (see :data:`_MICRO_BATCH`)."""
    batch = CATALOGUE[model].spec.global_batch
    if kind == "tp+ga":
        return Plan(dp=1, tp=gpus, ga_steps=max(1, batch // _MICRO_BATCH[model]))
    ga = max(1, batch // (gpus * _MICRO_BATCH[model]))
    zero = {"ga": "none", "gc": "none", "zero-dp": "dp", "zero-offload": "offload"}[kind]
    return Plan(dp=gpus, ga_steps=ga, gc=kind == "gc", zero=zero)


@dataclass(frozen=True)
class MeasuredTwoJob:
    """The published example recomputed from measured iteration times (per job: model order)."""

    baseline_s: tuple[float, float]         # original plan on all 4 GPUs
    even: tuple[float, float]               # speedups, 2 + 2 GPUs, fastest measured plan each
    rubick: tuple[float, float]             # speedups, Rubick's split
    rubick_gpus: tuple[int, int]
    even_plans: tuple[str, str]
    rubick_plans: tuple[str, str]

    @property
    def totals(self) -> tuple[float, float]:
        return sum(self.even), sum(self.rubick)

    @property
    def totals_as_published(self) -> tuple[float, float]:
        """Per-job speedups rounded to 2 decimals, then summed (how the figure reports them)."""
        return (round(sum(round(x, 2) for x in self.even), 2),
                round(sum(round(x, 2) for x in self.rubick), 2))


def published_two_job_totals(rubick_gpus: tuple[int, int] = (1, 3)) -> MeasuredTwoJob:
    """Speedups of the published example from :data:`RUBICK_MEASURED_ITER_S`: a job's speedup is
    ``t(original plan, 4 GPUs) / t(fastest measured plan on its GPUs)``."""
    data = pd.Series(RUBICK_MEASURED_ITER_S)
    data.index.names = ["model", "kind", "gpus"]

    def fastest(model: str, g: int) -> tuple[float, str]:
        sub = data.xs((model, g), level=("model", "gpus"))
        return float(sub.min()), str(sub.idxmin())

    base = tuple(RUBICK_MEASURED_ITER_S[(m, RUBICK_ORIGINAL_KIND[m], _TWO_JOB_GPUS)]
                 for m in _TWO_JOB_MODELS)
    even = [fastest(m, _TWO_JOB_GPUS // 2) for m in _TWO_JOB_MODELS]
    rub = [fastest(m, g) for m, g in zip(_TWO_JOB_MODELS, rubick_gpus)]
    return MeasuredTwoJob(
        baseline_s=(base[0], base[1]),
        even=(base[0] / even[0][0], base[1] / even[1][0]),
        rubick=(base[0] / rub[0][0], base[1] / rub[1][0]), rubick_gpus=rubick_gpus,
        even_plans=(even[0][1], even[1][1]), rubick_plans=(rub[0][1], rub[1][1]))


def rubick_two_job_node() -> NodeType:
    """Half of a testbed node: 4 × 80 GiB GPUs, 48 cores (12 per GPU), 800 GB, A100_NODE links."""
    return NodeType(name="a800x4", cpus_per_node=_TWO_JOB_GPUS * 12,
                    host_mem_per_node=A100_NODE.host_mem_per_node * _TWO_JOB_GPUS / GPUS_PER_NODE,
                    gpu_mem_bytes=A100_NODE.gpu_mem_bytes, bw_intra=A100_NODE.bw_intra,
                    bw_inter=A100_NODE.bw_inter, bw_pcie=A100_NODE.bw_pcie)


def rubick_two_job_problem() -> "ReconfigProblem":
    """The example as a :class:`~.spec.ReconfigProblem`: one node (:func:`rubick_two_job_node`),
    jobs ``roberta`` and ``t5`` each requesting all 4 GPUs and 48 cores with its original plan
    (best effort, so normalized throughput = the published speedup); GPU counts 1–4."""
    from policyopt.problem import Cluster, Entity, Job, WorkerType

    from .spec import ReconfigJob, ReconfigOptions, ReconfigProblem, ReconfigSpec
    node = rubick_two_job_node()
    ids = ("roberta", "t5")
    rjobs = {jid: ReconfigJob(m, node.name, _TWO_JOB_GPUS, node.cpus_per_node,
                              _kind_plan(m, RUBICK_ORIGINAL_KIND[m], _TWO_JOB_GPUS))
             for jid, m in zip(ids, _TWO_JOB_MODELS)}
    spec = ReconfigSpec({node.name: node}, {m: CATALOGUE[m] for m in _TWO_JOB_MODELS}, rjobs,
                        options=ReconfigOptions(gpu_counts=tuple(range(1, _TWO_JOB_GPUS + 1))))
    cluster = Cluster((WorkerType(node.name, _TWO_JOB_GPUS, _TWO_JOB_GPUS, 4.0),))
    jobs = tuple(Job(id=jid, throughputs={node.name: 1.0}, scale_factor=_TWO_JOB_GPUS,
                     steps_remaining=1000.0, entity="research") for jid in ids)
    return ReconfigProblem(cluster, jobs, (), {"research": Entity("research")}, (), reconfig=spec)


@dataclass(frozen=True)
class RubickTwoJob:
    """Our model on the published example (speedups relative to the original plans on 4 GPUs)."""

    models: tuple[str, str]
    reference_plans: tuple[Plan, Plan]
    reference_throughput: tuple[float, float]  # samples/s, original plan, all 4 GPUs, 48 cores
    splits: tuple[TwoJobSplit, ...]            # every (g0, g1) with g0, g1 ≥ 1, g0 + g1 ≤ 4
    missing: tuple[tuple[int, int], ...]       # GPU splits where a job has no plan that fits
    even: TwoJobSplit
    best: TwoJobSplit                          # oracle: the split with the largest total
    greedy: TwoJobSplit                        # rubick_greedy over the multi-resource space
    lp: TwoJobSplit                            # max_sum_throughput (normalized), rounded + placed
    lp_bound: float                            # its fractional optimum Σ thr/r (time sharing)
    measured: MeasuredTwoJob
    published: tuple[float, float] = PUBLISHED_TWO_JOB


def _split_of(decisions: Mapping[str, object], ids: tuple[str, str], ref_steps: np.ndarray,
              batch: np.ndarray) -> TwoJobSplit:
    """A :class:`TwoJobSplit` from a round's job decisions (steps/s → samples/s and speedups)."""
    ds = [decisions[j] for j in ids]
    steps = np.array([d.throughput if d.running else 0.0 for d in ds])  # type: ignore[attr-defined]
    return TwoJobSplit((ds[0].gpus, ds[1].gpus), (ds[0].cpus, ds[1].cpus),  # type: ignore[attr-defined]
                       (ds[0].plan, ds[1].plan), tuple((steps * batch).tolist()),  # type: ignore
                       tuple((steps / ref_steps).tolist()))


def rubick_two_job_example() -> RubickTwoJob:
    """Our performance model on Rubick's two-job example (module docstring).

    ``splits``: for every GPU split ``(g0, g1)`` (idle GPUs allowed), each job on ``12·g`` cores
    with its fastest plan that fits in memory there. ``greedy`` and ``lp`` are what
    ``rubick_greedy`` and ``max_sum_throughput(normalize=True)`` allocate (GPUs, cores and plans)
    over :func:`rubick_two_job_problem`'s space; ``lp_bound`` is the LP's fractional optimum.
    """
    from .catalog import plan_rows, reference_steps_per_second
    from .rounds import reconfig_round
    problem = rubick_two_job_problem()
    spec = problem.reconfig
    assert spec is not None  # a ReconfigProblem always carries its section
    node = spec.node_types["a800x4"]
    ids = ("roberta", "t5")
    entries = [CATALOGUE[m] for m in _TWO_JOB_MODELS]
    batch = np.array([e.spec.global_batch for e in entries], float)
    ref_steps = np.array([reference_steps_per_second(spec, j, _TWO_JOB_GPUS) for j in ids])

    def fastest(e: ModelEntry, g: int) -> tuple[Plan, float] | None:
        rows = plan_rows(e, node, _TWO_JOB_GPUS, spec.options, g, 12 * g, 1)
        if rows.empty:
            return None
        r = rows.loc[rows["iter_time"].idxmin()]
        fields: dict[str, Any] = {c: (bool(r[c]) if c == "gc" else str(r[c]) if c == "zero" else int(r[c]))
                                  for c in PLAN_COLUMNS}
        return Plan(**fields), float(r["iter_time"])

    splits, missing = [], []
    for g0 in range(1, _TWO_JOB_GPUS):
        for g1 in range(1, _TWO_JOB_GPUS - g0 + 1):
            got = [fastest(e, g) for e, g in zip(entries, (g0, g1))]
            if got[0] is None or got[1] is None:
                missing.append((g0, g1))
                continue
            steps = np.array([1.0 / got[0][1], 1.0 / got[1][1]])
            splits.append(TwoJobSplit((g0, g1), (12 * g0, 12 * g1), (got[0][0], got[1][0]),
                                      tuple((steps * batch).tolist()),
                                      tuple((steps / ref_steps).tolist())))
    even = next(s for s in splits if s.gpus == (_TWO_JOB_GPUS // 2, _TWO_JOB_GPUS // 2))
    best = max(splits, key=lambda s: s.total_speedup)
    greedy = reconfig_round(problem, "rubick_greedy")
    lp = reconfig_round(problem, "max_sum_throughput", normalize=True)
    return RubickTwoJob(
        models=_TWO_JOB_MODELS,
        reference_plans=tuple(spec.jobs[j].plan for j in ids),  # type: ignore[arg-type]
        reference_throughput=tuple((ref_steps * batch).tolist()),
        splits=tuple(splits), missing=tuple(missing), even=even, best=best,
        greedy=_split_of(greedy.jobs, ids, ref_steps, batch),
        lp=_split_of(lp.jobs, ids, ref_steps, batch),
        lp_bound=float("nan") if lp.result.objective is None else float(lp.result.objective),
        measured=published_two_job_totals())


def measured_vs_model() -> pd.DataFrame:
    """Every measured point of :data:`RUBICK_MEASURED_ITER_S` beside our model's prediction for the
    corresponding plan (12 cores per GPU, one node), with our memory model's verdict.

    Columns: ``model, kind, gpus, plan, measured_s, model_s, ratio`` (model / measured),
    ``gpu_gib`` (our per-GPU estimate) and ``fits`` (within 90% of 80 GiB and of host memory).
    A TP degree that does not divide the model's heads (or, without a head count, its hidden
    size) is outside our plan space; such a row is evaluated by the formula anyway and flagged
    ``in_plan_space = False``.
    """
    node = rubick_two_job_node()
    keys = list(RUBICK_MEASURED_ITER_S)
    plans = [_kind_plan(m, k, g) for m, k, g in keys]
    rows = pd.DataFrame([{**CATALOGUE[m].spec.to_row(), **p.to_row(), "gpus": g, "cpus": 12 * g,
                          "nodes": 1} for (m, _, g), p in zip(keys, plans)])
    rows["bw_intra"], rows["bw_inter"], rows["bw_pcie"] = node.bw_intra, node.bw_inter, node.bw_pcie
    rows["gpu_mem_bytes"], rows["host_mem_bytes"] = node.gpu_mem_bytes, node.host_mem_per_node
    rows["placeable"] = True
    rows["heads"] = [CATALOGUE[m].spec.heads for m, _, _ in keys]
    ev = evaluate_candidates(rows[list(CONFIG_COLUMNS) + ["heads", "gpu_mem_bytes", "host_mem_bytes",
                                                          "placeable"]],
                             {m: CATALOGUE[m].params for m in _TWO_JOB_MODELS})
    hidden = rows["hidden"].to_numpy()
    heads = np.array([CATALOGUE[m].spec.heads for m, _, _ in keys])
    tp = rows["tp"].to_numpy()
    measured = np.array([RUBICK_MEASURED_ITER_S[k] for k in keys])
    return pd.DataFrame({
        "model": [k[0] for k in keys], "kind": [k[1] for k in keys], "gpus": [k[2] for k in keys],
        "plan": [p.label for p in plans], "measured_s": measured,
        "model_s": ev["iter_time"].to_numpy(), "ratio": ev["iter_time"].to_numpy() / measured,
        "gpu_gib": ev["gpu_bytes"].to_numpy() / GiB, "fits": ev["feasible"].to_numpy(),
        "in_plan_space": np.where(heads > 0, heads % tp == 0, hidden % tp == 0)})


def fit_to_measured(n_starts: int = 8, seed: int = 0) -> dict[str, tuple[PerfParams, float]]:
    """Fit our seven parameters per model to :data:`RUBICK_MEASURED_ITER_S` (bounded RMSLE least
    squares, :func:`~policyopt.perfmodel.fit_model`; T5-3B has 6 points for 7 parameters, so its
    ``k_bwd`` is held at 2). Returns model → (fitted parameters, RMSLE): how well the formula *can*
    express the measured curves at our bandwidths, not a model used elsewhere."""
    from policyopt.perfmodel import fit_model
    v = measured_vs_model()
    node = rubick_two_job_node()
    keys = list(RUBICK_MEASURED_ITER_S)
    rows = pd.DataFrame([{**CATALOGUE[m].spec.to_row(), **_kind_plan(m, k, g).to_row(), "gpus": g,
                          "cpus": 12 * g, "nodes": 1} for m, k, g in keys])
    rows["bw_intra"], rows["bw_inter"], rows["bw_pcie"] = node.bw_intra, node.bw_inter, node.bw_pcie
    rows["iter_time"] = v["measured_s"].to_numpy()
    out = {}
    for m in _TWO_JOB_MODELS:
        sub = rows[rows["model"] == m].reset_index(drop=True)
        fixed = {"k_bwd": 2.0} if len(sub) < 7 else None
        f = fit_model(sub[list(CONFIG_COLUMNS) + ["iter_time"]], n_starts=n_starts, seed=seed,
                      fixed=fixed)
        out[m] = (f.params, f.rmsle)
    return out


def _fmt_split(s: TwoJobSplit) -> str:
    plans = " / ".join(p.label if p is not None else "paused" for p in s.plans)
    return (f"| {s.gpus[0]} + {s.gpus[1]} | {s.cpus[0]} + {s.cpus[1]} | {plans} | "
            f"{s.speedup[0]:.2f} + {s.speedup[1]:.2f} | **{s.total_speedup:.2f}** |")


def format_two_job(ex: RubickTwoJob, validation: pd.DataFrame | None = None,
                   fits: Mapping[str, tuple[PerfParams, float]] | None = None) -> str:
    """The example as markdown tables (our model beside the published numbers)."""
    m = ex.measured
    head = "| allocation | GPUs (RoBERTa + T5-3B) | cores | plans | speedups | total |"
    sep = "|---|---|---|---|---|---|"
    out = ["## Two-job example: RoBERTa (355M) + T5-3B on 4 GPUs", "",
           "Speedup = throughput / throughput alone on all 4 GPUs with the original plan "
           f"(RoBERTa {ex.reference_plans[0].label}, T5-3B {ex.reference_plans[1].label}).", "",
           "### Published (Rubick Fig. 8), recomputed from the artifact's measured iteration times", "",
           "| allocation | GPUs | plans | speedups | total (as published) |", "|---|---|---|---|---|",
           f"| even split, best plans | 2 + 2 | {' / '.join(m.even_plans)} | "
           f"{m.even[0]:.3f} + {m.even[1]:.3f} | **{m.totals[0]:.3f}** ({m.totals_as_published[0]:.2f}; "
           f"published {ex.published[0]}) |",
           f"| Rubick | {m.rubick_gpus[0]} + {m.rubick_gpus[1]} | {' / '.join(m.rubick_plans)} | "
           f"{m.rubick[0]:.3f} + {m.rubick[1]:.3f} | **{m.totals[1]:.3f}** "
           f"({m.totals_as_published[1]:.2f}; published {ex.published[1]}) |", "",
           "### Our performance model", "", head, sep,
           "| even split, best plans " + _fmt_split(ex.even),
           "| best GPU split (oracle) " + _fmt_split(ex.best),
           "| `rubick_greedy` " + _fmt_split(ex.greedy),
           "| LP `max_sum_throughput` (normalized), rounded " + _fmt_split(ex.lp),
           f"| LP fractional optimum (time sharing) | | | | | **{ex.lp_bound:.2f}** |", "",
           "Every GPU split (12 cores per GPU, fastest plan that fits):", "", head, sep]
    out += ["| split " + _fmt_split(s) for s in ex.splits]
    out += [f"| split | {a} + {b} | | no plan fits / divides the batch | | — |" for a, b in ex.missing]
    if validation is not None:
        out += ["", "### Model vs measured iteration times (A800, artifact traces)", "",
                "| model | kind | GPUs | our plan | measured s | model s | model/measured | "
                "our GPU GiB | fits (our memory model) |", "|---|---|---|---|---|---|---|---|---|"]
        for r in validation.itertuples(index=False):
            note = "" if r.in_plan_space else " (TP 3: outside our plan space)"
            out.append(f"| {r.model} | {r.kind} | {r.gpus} | {r.plan}{note} | {r.measured_s:.3f} | "
                       f"{r.model_s:.3f} | {r.ratio:.2f} | {r.gpu_gib:.1f} | {'yes' if r.fits else 'no'} |")
    if fits:
        out += ["", "Our seven parameters fitted to those measured points (RMSLE = root mean squared "
                "log error): " + "; ".join(f"{m} {r:.2f}" for m, (_, r) in fits.items())]
    return "\n".join(out)


def main() -> int:
    """``python -m policyopt.reconfig.examples``: print the two-job tables."""
    from policyopt.reconfig import examples as ex_mod  # the package's module objects, not __main__'s
    print(ex_mod.format_two_job(ex_mod.rubick_two_job_example(), ex_mod.measured_vs_model(),
                                ex_mod.fit_to_measured()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
