"""Execution plans on one machine: data parallelism (DP), gradient accumulation (GA), gradient
checkpointing (GC), with the global batch ``B`` held constant.

With ``d`` data-parallel ranks and ``a`` accumulation steps, rank ``r`` takes the contiguous shard
``r`` of ``d`` of the global batch and splits it into ``a`` micro-batches of ``B/(d·a)`` samples.
Each micro-batch's mean loss is scaled by ``1/a`` before ``backward``; DDP averages the gradients
over the ``d`` ranks (gloo on CPU, NCCL on CUDA), so the update uses

    g = (1/d) Σ_r (1/a) Σ_i ∇ mean(L_{r,i}) = ∇ mean(L over the global batch)

(exactly, up to floating-point summation order), i.e. every plan trains the same model as
``d = a = 1``. GC recomputes each block's activations in the backward pass instead of storing them.
The reported loss is the global-batch mean (an all-reduce of the per-rank means when ``d > 1``).
"""
from __future__ import annotations

import contextlib
import socket
import time
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from policyopt.errors import InputError

from .data import Batch, split_batch
from .zoo import JobInstance

__all__ = ["ExecutionPlan", "DistContext", "free_port", "init_distributed", "train_step", "enable_gc"]


@dataclass(frozen=True)
class ExecutionPlan:
    """``dp`` data-parallel processes × ``ga`` accumulation steps, ``gc`` gradient checkpointing."""

    dp: int = 1
    ga: int = 1
    gc: bool = False

    def __post_init__(self) -> None:
        for name in ("dp", "ga"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InputError(f"plan.{name}", value, "must be an integer >= 1")

    def micro_batch(self, global_batch: int) -> int:
        """``B / (dp·ga)``; raises :class:`InputError` when it is not a whole number."""
        parts = self.dp * self.ga
        if global_batch % parts != 0:
            raise InputError("plan", self.label(), f"global batch {global_batch} is not divisible by dp*ga = {parts}")
        return global_batch // parts

    def label(self) -> str:
        return f"dp{self.dp}-ga{self.ga}-gc{int(self.gc)}"


@dataclass
class DistContext:
    """This process's place in a data-parallel group (``world == 1``: no group)."""

    rank: int = 0
    world: int = 1
    device: torch.device = torch.device("cpu")

    @property
    def active(self) -> bool:
        return self.world > 1

    def agree(self, stop: bool) -> bool:
        """Collective OR of the ranks' stop flags (all ranks leave the loop at the same step)."""
        if not self.active:
            return stop
        flag = torch.tensor([1 if stop else 0], dtype=torch.int32, device=self.device)
        dist.all_reduce(flag, op=dist.ReduceOp.MAX)
        return bool(flag.item())

    def mean(self, value: torch.Tensor) -> torch.Tensor:
        if not self.active:
            return value
        value = value.clone()
        dist.all_reduce(value, op=dist.ReduceOp.SUM)
        return value / self.world


def free_port() -> int:
    """A TCP port that was free on 127.0.0.1 a moment ago (for the rendezvous of DP ranks)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def init_distributed(rank: int, world: int, port: int, device: torch.device, timeout_s: float = 120.0,
                     addr: str = "127.0.0.1") -> DistContext:
    """Join the process group over TCP at ``addr:port``, rank 0's machine (gloo for CPU, NCCL for CUDA)."""
    if world > 1:
        backend = "nccl" if device.type == "cuda" else "gloo"
        dist.init_process_group(backend, init_method=f"tcp://{addr}:{port}", rank=rank, world_size=world,
                                timeout=timedelta(seconds=timeout_s))
    return DistContext(rank, world, device)


def enable_gc(model: nn.Module, on: bool) -> None:
    """Switch gradient checkpointing of a zoo model's repeated blocks."""
    if not hasattr(model, "gradient_checkpointing"):
        raise InputError("plan.gc", on, f"{type(model).__name__} does not support gradient checkpointing")
    model.gradient_checkpointing = on  # type: ignore[assignment]


def wrap_model(model: nn.Module, ctx: DistContext) -> nn.Module:
    """DistributedDataParallel around ``model`` when ``ctx.world > 1`` (broadcasts rank 0's weights)."""
    if not ctx.active:
        return model
    device_ids = [ctx.device.index] if ctx.device.type == "cuda" else None
    return nn.parallel.DistributedDataParallel(model, device_ids=device_ids)


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_step(job: JobInstance, model: nn.Module, batch: Batch, plan: ExecutionPlan, ctx: DistContext,
               measure_forward: bool = False) -> tuple[float, float]:
    """One optimizer step of ``plan`` on the global ``batch``; returns (global mean loss, forward seconds).

    Forward seconds (only when ``measure_forward``; synchronizes CUDA) sum the forward passes of
    this rank's micro-batches.
    """
    shard = split_batch(batch, ctx.rank, plan.dp)
    micro = [job.to_device(split_batch(shard, i, plan.ga)) for i in range(plan.ga)]
    job.optimizer.zero_grad(set_to_none=True)
    total = torch.zeros((), device=job.device)
    forward_s = 0.0
    for i, mb in enumerate(micro):
        last = i == plan.ga - 1
        no_sync: Any = model.no_sync() if ctx.active and not last else contextlib.nullcontext()  # type: ignore[operator]
        with no_sync:
            if measure_forward:
                _sync(job.device)
                t0 = time.perf_counter()
            loss = job.loss_fn(model, mb)
            if measure_forward:
                _sync(job.device)
                forward_s += time.perf_counter() - t0
            (loss / plan.ga).backward()
        total += loss.detach()
    job.optimizer.step()
    return float(ctx.mean(total / plan.ga).item()), forward_s
