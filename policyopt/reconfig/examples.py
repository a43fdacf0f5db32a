r"""A transformer job catalogue, the reference node type, and the two-job example.

Catalogue (assumptions, not measurements): shapes follow the published architectures; the global
batch and sequence length are typical fine-tuning / pre-training settings; the profiled forward
time of the global batch on one GPU is ``2·P·b·s / F`` with ``F = 1.2·10^14`` FLOP/s effective
(about 40% of an A100's bf16 peak, :data:`policyopt.perfmodel.synthetic.EFFECTIVE_FLOPS`); every
model uses the nominal performance-model parameters
(:data:`policyopt.perfmodel.synthetic.NOMINAL_PARAMS`) — a fitted set replaces them in practice.

=============  ======  ======  ======  ====  =====
model          P       layers  hidden  seq   batch
=============  ======  ======  ======  ====  =====
vit-86m        86M     12      768     197   512
roberta-355m   355M    24      1024    512   256
bert-336m      336M    24      1024    512   256
t5-1.2b        1.2B    48      1536    512   128
gpt2-1.5b      1.5B    48      1600    1024  128
llama2-7b      6.7B    32      4096    2048  128
llama-30b      32.5B   60      6656    2048  128
=============  ======  ======  ======  ====  =====

Node type ``a100`` (:data:`A100_NODE`): 8 GPUs of 80 GiB, 96 cores and 1.6 TB host memory per node,
150 GB/s intra-node, 12.5 GB/s (100 Gb/s) inter-node, 12 GB/s PCIe.

The two-job example (:func:`two_job_example`): a RoBERTa and a T5 job share one node of 4 GPUs
(24 cores at the same 12 cores/GPU, 800 GB host memory). *Even split*: 2 GPUs and 12 cores each,
each with its best plan. *Sensitivity-aware*: every split of GPUs (and cores) between the two, each
job with its best plan there, keeping the split with the largest total speedup. A job's speedup is
its throughput over its throughput alone on all 4 GPUs and 24 cores with its best plan (our
normalization; the published 0.78 → 1.44 is quoted beside our numbers, the hardware differs).
"""
from __future__ import annotations

from dataclasses import dataclass

from policyopt.perfmodel import ModelSpec, PerfParams, Plan, best_plan, enumerate_plans
from policyopt.perfmodel.synthetic import EFFECTIVE_FLOPS, NOMINAL_PARAMS

from .spec import GiB, ModelEntry, NodeType

__all__ = ["CATALOGUE", "A100_NODE", "GPUS_PER_NODE", "catalogue_entry", "TwoJobSplit",
           "TwoJobExample", "two_job_example", "PUBLISHED_TWO_JOB"]

GPUS_PER_NODE = 8
#: The published total speedups of the two-job example (even split, sensitivity-aware split).
PUBLISHED_TWO_JOB = (0.78, 1.44)


def _spec(name: str, params: float, layers: int, hidden: int, seq: int, batch: int) -> ModelSpec:
    return ModelSpec(name=name, params=params, layers=layers, hidden=hidden, seq_len=seq,
                     global_batch=batch, fwd_time_1gpu=2.0 * params * batch * seq / EFFECTIVE_FLOPS,
                     bytes_per_param=2.0)


#: Model name → (shape, performance-model parameters). See the module docstring.
CATALOGUE: dict[str, ModelEntry] = {
    s.name: ModelEntry(s, NOMINAL_PARAMS) for s in (
        _spec("vit-86m", 86e6, 12, 768, 197, 512),
        _spec("roberta-355m", 355e6, 24, 1024, 512, 256),
        _spec("bert-336m", 336e6, 24, 1024, 512, 256),
        _spec("t5-1.2b", 1.2e9, 48, 1536, 512, 128),
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
    """One split of the 4-GPU node: per job GPUs, cores, plan, throughput (samples/s), speedup."""

    gpus: tuple[int, int]
    cpus: tuple[int, int]
    plans: tuple[Plan, Plan]
    throughput: tuple[float, float]
    speedup: tuple[float, float]

    @property
    def total_speedup(self) -> float:
        return self.speedup[0] + self.speedup[1]


@dataclass(frozen=True)
class TwoJobExample:
    """Even split vs the best split (our model), and the published totals."""

    models: tuple[str, str]
    alone: tuple[float, float]  # samples/s alone on the whole node, best plan
    even: TwoJobSplit
    best: TwoJobSplit
    splits: tuple[TwoJobSplit, ...]
    published: tuple[float, float] = PUBLISHED_TWO_JOB


def two_job_example(models: tuple[str, str] = ("roberta-355m", "t5-1.2b"), gpus: int = 4,
                    cpus_per_gpu: int = 6, node: NodeType | None = None) -> TwoJobExample:
    """Evaluate every split of ``gpus`` GPUs (cores proportional, ``cpus_per_gpu`` per GPU, each
    job at least one GPU) between two catalogue jobs with per-job best plans."""
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
