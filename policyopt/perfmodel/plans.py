"""Model, execution-plan and resource descriptions for the performance model.

Three frozen dataclasses describe one configuration of a training job:

* :class:`ModelSpec`  - what is trained (parameter count ``P``, layers ``l``, hidden ``h``,
  sequence ``s``, global batch ``b``, profiled forward time of the global batch on one GPU).
* :class:`Plan`       - how it is trained: ``dp·tp·pp = g`` GPUs, ``micro_batches`` ``m`` (PP only),
  ``ga_steps`` ``a``, gradient checkpointing ``gc`` and the ``zero`` mode
  (``none`` / ``dp`` = ZeRO-2 / ``offload`` = ZeRO-Offload).
* :class:`Resources`  - what it runs on: GPUs, CPU cores, nodes, bandwidths (bytes/s) and
  memory capacities (bytes).

:class:`ClusterSpec` turns a (GPU count, CPU count) pair into :class:`Resources` (consolidated
placement: ``nodes = ceil(gpus / gpus_per_node)``); the sensitivity curve and ``best_plan`` use it.

Every constructor validates its fields and raises :class:`~policyopt.errors.InputError` naming the
field (``plan.dp``, ``model.layers``, ...) and the value; nothing is silently corrected.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from policyopt.errors import InputError, UnknownNameError

__all__ = ["ZERO_MODES", "ModelSpec", "Plan", "Resources", "ClusterSpec", "check_plan_fits"]

#: Allowed values of ``Plan.zero`` / the ``zero`` column.
ZERO_MODES: tuple[str, ...] = ("none", "dp", "offload")


def _positive_number(field: str, value: Any) -> float:
    """Return ``value`` as a float if it is a finite number > 0, else raise InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(field, value, "must be a number")
    if not math.isfinite(value) or value <= 0:
        raise InputError(field, value, "must be a finite number > 0")
    return float(value)


def _positive_int(field: str, value: Any) -> int:
    """Return ``value`` as an int if it is an integer (Python or numpy) >= 1, else raise."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(field, value, "must be an integer")
    if value < 1:
        raise InputError(field, value, "must be an integer >= 1")
    return int(value)


def _set_ints(obj: object, prefix: str, names: tuple[str, ...]) -> None:
    """Validate integer fields of a frozen dataclass and store them as Python ints."""
    for name in names:
        object.__setattr__(obj, name, _positive_int(f"{prefix}.{name}", getattr(obj, name)))


def _set_floats(obj: object, prefix: str, names: tuple[str, ...]) -> None:
    """Validate positive number fields of a frozen dataclass and store them as floats."""
    for name in names:
        object.__setattr__(obj, name, _positive_number(f"{prefix}.{name}", getattr(obj, name)))


@dataclass(frozen=True)
class ModelSpec:
    """A model to train.

    ``params`` is the parameter count P, ``fwd_time_1gpu`` the measured seconds of one forward
    pass of the *global* batch on one GPU (the base every T_fwd scales from), and
    ``bytes_per_param`` the size of one communicated / offloaded element (2 for fp16/bf16).
    ``heads`` is the attention head count a when the attention scores are stored for the
    backward pass (their memory grows as a·s², see :mod:`.memory`); 0 (default) means they are
    not stored (flash attention recomputes them).
    """

    name: str
    params: float
    layers: int
    hidden: int
    seq_len: int
    global_batch: int
    fwd_time_1gpu: float
    bytes_per_param: float = 2.0
    heads: int = 0

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name.strip():
            raise InputError("model.name", self.name, "must be a non-empty string")
        _set_floats(self, "model", ("params", "fwd_time_1gpu", "bytes_per_param"))
        _set_ints(self, "model", ("layers", "hidden", "seq_len", "global_batch"))
        if isinstance(self.heads, bool) or not isinstance(self.heads, numbers.Integral) \
                or self.heads < 0:
            raise InputError("model.heads", self.heads, "must be an integer >= 0")
        object.__setattr__(self, "heads", int(self.heads))

    def to_row(self) -> dict[str, Any]:
        """The spec as CSV columns (``name`` becomes ``model``; ``heads`` only when > 0)."""
        row = asdict(self)
        row["model"] = row.pop("name")
        if not row["heads"]:
            del row["heads"]
        return row


@dataclass(frozen=True)
class Plan:
    """An execution plan: ``dp``·``tp``·``pp`` GPUs, micro-batches, GA steps, GC and ZeRO mode.

    ``micro_batches`` is the number of pipeline micro-batches m per GA step and must be 1 when
    ``pp`` = 1 (sequential micro-batches without a pipeline are gradient accumulation: use
    ``ga_steps``).
    """

    dp: int
    tp: int = 1
    pp: int = 1
    micro_batches: int = 1
    ga_steps: int = 1
    gc: bool = False
    zero: str = "none"

    def __post_init__(self) -> None:
        _set_ints(self, "plan", ("dp", "tp", "pp", "micro_batches", "ga_steps"))
        if not isinstance(self.gc, (bool, np.bool_)):
            raise InputError("plan.gc", self.gc, "must be a bool")
        object.__setattr__(self, "gc", bool(self.gc))
        if self.zero not in ZERO_MODES:
            raise UnknownNameError("plan.zero", self.zero, ZERO_MODES)
        if self.pp == 1 and self.micro_batches != 1:
            raise InputError(
                "plan.micro_batches", self.micro_batches,
                "must be 1 when pp = 1 (use ga_steps for sequential micro-batches)",
            )

    @property
    def gpus(self) -> int:
        """g = dp·tp·pp."""
        return self.dp * self.tp * self.pp

    @property
    def label(self) -> str:
        """Short human-readable name, e.g. ``dp4.tp2.pp1.m1.a2.gc.zero-dp``."""
        gc = ".gc" if self.gc else ""
        return (f"dp{self.dp}.tp{self.tp}.pp{self.pp}.m{self.micro_batches}.a{self.ga_steps}"
                f"{gc}.zero-{self.zero}")

    def to_row(self) -> dict[str, Any]:
        """The plan as CSV columns (``gc`` as 0/1)."""
        row = asdict(self)
        row["gc"] = int(self.gc)
        return row


@dataclass(frozen=True)
class Resources:
    """Resources given to one job.

    ``bw_intra`` / ``bw_inter`` / ``bw_pcie`` are bytes/s; a TP, DP or PP group communicates over
    ``bw_intra`` while it fits in one node, else over ``bw_inter`` (see
    :mod:`policyopt.perfmodel.model`). ``gpu_mem_bytes`` is the capacity of *one* GPU and
    ``host_mem_bytes`` the host memory available to the whole job (all its nodes).
    """

    gpus: int
    cpus: int
    nodes: int
    bw_intra: float
    bw_inter: float
    bw_pcie: float
    gpu_mem_bytes: float
    host_mem_bytes: float

    def __post_init__(self) -> None:
        _set_ints(self, "resources", ("gpus", "cpus", "nodes"))
        if self.nodes > self.gpus:
            raise InputError("resources.nodes", self.nodes,
                             f"more nodes than GPUs ({self.gpus})")
        _set_floats(self, "resources",
                    ("bw_intra", "bw_inter", "bw_pcie", "gpu_mem_bytes", "host_mem_bytes"))

    def to_row(self) -> dict[str, Any]:
        """The communication-relevant fields as CSV columns (memory capacities are not columns)."""
        return {name: getattr(self, name)
                for name in ("gpus", "cpus", "nodes", "bw_intra", "bw_inter", "bw_pcie")}


@dataclass(frozen=True)
class ClusterSpec:
    """Homogeneous nodes from which :class:`Resources` are cut.

    ``resources(g, c)`` places g GPUs on ``ceil(g / gpus_per_node)`` nodes (consolidated) and
    gives the job ``host_mem_per_node`` bytes of host memory per node it touches.
    """

    gpus_per_node: int
    cpus_per_node: int
    bw_intra: float
    bw_inter: float
    bw_pcie: float
    gpu_mem_bytes: float
    host_mem_per_node: float

    def __post_init__(self) -> None:
        _set_ints(self, "cluster", ("gpus_per_node", "cpus_per_node"))
        _set_floats(self, "cluster",
                    ("bw_intra", "bw_inter", "bw_pcie", "gpu_mem_bytes", "host_mem_per_node"))

    def nodes_for(self, gpus: int) -> int:
        """Nodes touched by ``gpus`` GPUs under consolidated placement."""
        return -(-_positive_int("gpus", gpus) // self.gpus_per_node)

    def resources(self, gpus: int, cpus: int) -> Resources:
        """Resources for ``gpus`` GPUs and ``cpus`` CPU cores (cores must fit on the nodes)."""
        nodes = self.nodes_for(gpus)
        if _positive_int("cpus", cpus) > nodes * self.cpus_per_node:
            raise InputError("cpus", cpus,
                             f"more than the {nodes * self.cpus_per_node} cores of {nodes} node(s)")
        return Resources(gpus=gpus, cpus=cpus, nodes=nodes, bw_intra=self.bw_intra,
                         bw_inter=self.bw_inter, bw_pcie=self.bw_pcie,
                         gpu_mem_bytes=self.gpu_mem_bytes,
                         host_mem_bytes=nodes * self.host_mem_per_node)


def check_plan_fits(spec: ModelSpec, plan: Plan, resources: Resources) -> None:
    """Raise InputError unless ``plan`` is well-formed for ``spec`` on ``resources``.

    Checks d·t·p = g, pp <= layers and d·a·m <= global batch (at least one sample per
    micro-batch).
    """
    if plan.gpus != resources.gpus:
        raise InputError("plan.dp", (plan.dp, plan.tp, plan.pp),
                         f"dp·tp·pp = {plan.gpus} differs from gpus = {resources.gpus}")
    if plan.pp > spec.layers:
        raise InputError("plan.pp", plan.pp, f"more pipeline stages than layers ({spec.layers})")
    per_step = plan.dp * plan.ga_steps * plan.micro_batches
    if per_step > spec.global_batch:
        raise InputError("plan.ga_steps", plan.ga_steps,
                         f"dp·ga_steps·micro_batches = {per_step} exceeds the global batch "
                         f"{spec.global_batch} (less than one sample per micro-batch)")
