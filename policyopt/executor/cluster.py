"""The executor's cluster: worker types, their slots, and the cores or device each slot uses.

A cluster description ``cpu1=1,cpu2=1`` names worker types and how many workers of each the
executor schedules on. Worker types are what the machine really has (as for the profiler):

* ``cpuN`` — a CPU worker running each job process with ``N`` torch threads;
* a CUDA device model name (``h100``, ``a100``, …, as :func:`policyopt.jobs.profiler.cuda_worker_type_name`
  derives it) — one GPU per worker, device ``cuda:i`` for the ``i``-th worker of that type.

Each worker is a :class:`Slot`. CPU slots get cores from the process's usable cores, in order:
slot ``s`` of ``N`` threads takes the next ``N`` cores, wrapping around. With ``pin="auto"`` the
slots are pinned (``--cpu-affinity``) only when their threads fit on distinct cores
(``Σ threads ≤ usable cores``); otherwise pinning would stack them on the same cores while others
stay idle, so the OS scheduler places them. ``pin="on"`` always pins (wrapping), ``"off"`` never.
"""
from __future__ import annotations

import os
import re
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Sequence

from policyopt.cluster_counts import parse_cluster as _parse_cluster
from policyopt.errors import InputError

__all__ = ["Slot", "parse_cluster", "worker_type_kind", "build_slots", "usable_cores", "PIN_MODES"]

PIN_MODES = ("auto", "on", "off")
_CPU = re.compile(r"^cpu([1-9]\d*)$")


@dataclass(frozen=True)
class Slot:
    """One worker: ``device`` is ``cpu`` or ``cuda:i``; ``cores`` the pinned cores or ``None``."""

    index: int
    worker_id: str
    worker_type: str
    device: str
    threads: int
    cores: tuple[int, ...] | None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["cores"] = list(self.cores) if self.cores is not None else None
        return d


def parse_cluster(spec: str | Mapping[str, int]) -> dict[str, int]:
    """``"cpu1=1,cpu2=1"`` (or a mapping) → ``{"cpu1": 1, "cpu2": 1}`` (order kept):
    :func:`policyopt.cluster_counts.parse_cluster` with the executor's example."""
    return _parse_cluster(spec, example="cpu1=1,cpu2=1")


def worker_type_kind(name: str) -> tuple[str, int]:
    """``("cpu", N)`` for ``cpuN``, ``("cuda", 1)`` for any other (a CUDA device model)."""
    match = _CPU.match(name)
    if match:
        return "cpu", int(match.group(1))
    return "cuda", 1


def usable_cores() -> list[int]:
    """The cores this process may run on (``sched_getaffinity``)."""
    if hasattr(os, "sched_getaffinity"):
        return sorted(os.sched_getaffinity(0))
    return list(range(os.cpu_count() or 1))


def build_slots(counts: Mapping[str, int], pin: str = "auto", cores: Sequence[int] | None = None,
                cuda_types: Mapping[str, Sequence[int]] | None = None) -> list[Slot]:
    """One :class:`Slot` per worker, numbered type by type in ``counts`` order (the placement
    layout's GPU ids). ``cuda_types[name]`` lists the device indices of a CUDA worker type; by
    default CUDA types are checked against the devices torch sees."""
    if pin not in PIN_MODES:
        raise InputError("pin", pin, f"must be one of {', '.join(PIN_MODES)}")
    cores = list(usable_cores() if cores is None else cores)
    if not cores:
        raise InputError("cores", cores, "no usable CPU cores")
    need = sum(n * worker_type_kind(t)[1] for t, n in counts.items() if worker_type_kind(t)[0] == "cpu")
    do_pin = pin == "on" or (pin == "auto" and need <= len(cores))
    gpu_types = [t for t, n in counts.items() if worker_type_kind(t)[0] == "cuda" and n > 0]
    if gpu_types and cuda_types is None:
        cuda_types = _detect_cuda_types()
    slots: list[Slot] = []
    next_core = 0
    for wtype, n in counts.items():
        kind, threads = worker_type_kind(wtype)
        if kind == "cuda":
            devices = list((cuda_types or {}).get(wtype, []))
            if len(devices) < n:
                raise InputError(f"cluster.{wtype}", n,
                                 f"this machine has {len(devices)} CUDA device(s) of type {wtype!r} "
                                 f"(CPU worker types are cpuN)")
        for i in range(n):
            if kind == "cpu":
                chosen = tuple(cores[(next_core + k) % len(cores)] for k in range(threads))
                next_core += threads
                slots.append(Slot(len(slots), f"{wtype}-{i}", wtype, "cpu", threads,
                                  tuple(sorted(set(chosen))) if do_pin else None))
            else:
                slots.append(Slot(len(slots), f"{wtype}-{i}", wtype, f"cuda:{devices[i]}", 1, None))
    return slots


def _detect_cuda_types() -> dict[str, list[int]]:
    """CUDA worker type name → device indices (empty without torch or CUDA)."""
    try:
        import torch
    except ImportError:
        return {}
    if not torch.cuda.is_available():
        return {}
    from policyopt.jobs.profiler import cuda_worker_type_name

    out: dict[str, list[int]] = {}
    for i in range(torch.cuda.device_count()):
        out.setdefault(cuda_worker_type_name(torch.cuda.get_device_name(i)), []).append(i)
    return out
