"""Cluster layout: servers of each worker type, GPUs per server, global GPU ids.

GPU ids are global integers ``0 .. N-1``, numbered worker type by worker type (in the order
given), server by server, so server ``s`` owns the contiguous ids
``first_gpu[s] .. first_gpu[s] + size[s] - 1``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from policyopt.errors import InputError, UnknownNameError

__all__ = ["ClusterLayout"]


def _positive_int(field: str, value: object, allow_zero: bool = False) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or int(value) < (0 if allow_zero else 1):  # type: ignore[call-overload]
        raise InputError(field, value, "must be a " + ("non-negative" if allow_zero else "positive") + " integer")
    return int(value)  # type: ignore[call-overload]


@dataclass(frozen=True, eq=False)
class ClusterLayout:
    """Servers per worker type. Build with :meth:`from_servers` or :meth:`from_counts`.

    Arrays (all read-only): ``gpu_type[g]`` type index of GPU ``g``, ``gpu_server[g]`` its global
    server index, ``server_type[s]``, ``server_size[s]`` GPUs on server ``s``, ``first_gpu[s]``.
    """

    worker_types: tuple[str, ...]
    servers: tuple[int, ...]  # per type
    gpus_per_server: tuple[int, ...]  # per type
    gpu_type: np.ndarray
    gpu_server: np.ndarray
    server_type: np.ndarray
    server_size: np.ndarray
    first_gpu: np.ndarray

    @classmethod
    def from_servers(cls, servers: Mapping[str, tuple[int, int]]) -> "ClusterLayout":
        """``servers[type] = (number of servers, GPUs per server)``."""
        if not isinstance(servers, Mapping) or not servers:
            raise InputError("servers", servers, "must be a non-empty mapping type -> (servers, gpus_per_server)")
        types, per, flat = [], [], []
        for t, spec in servers.items():
            if not isinstance(spec, (tuple, list)) or len(spec) != 2:
                raise InputError(f"servers.{t}", spec, "must be (number of servers, GPUs per server)")
            n = _positive_int(f"servers.{t}[0]", spec[0], allow_zero=True)
            types.append(str(t))
            per.append(_positive_int(f"servers.{t}[1]", spec[1]))
            flat.append([per[-1]] * n)
        return cls._build(types, per, flat)

    @classmethod
    def from_server_sizes(cls, sizes: Mapping[str, Sequence[int]]) -> "ClusterLayout":
        """``sizes[type]`` = the GPUs of each server of that type; servers of a type may differ in
        size (machines that offer different numbers of workers). ``gpus_per_server[type]`` is then
        the largest."""
        if not isinstance(sizes, Mapping) or not sizes:
            raise InputError("sizes", sizes, "must be a non-empty mapping type -> [GPUs of each server]")
        per_type = {str(t): [_positive_int(f"sizes.{t}[{i}]", v) for i, v in enumerate(spec)]
                    for t, spec in sizes.items()}
        return cls._build(list(per_type), [max(v, default=1) for v in per_type.values()], list(per_type.values()))

    @classmethod
    def _build(cls, types: list[str], per: list[int], sizes: list[list[int]]) -> "ClusterLayout":
        n_srv = [len(v) for v in sizes]
        flat = [g for v in sizes for g in v]
        server_type = np.repeat(np.arange(len(types)), n_srv)
        server_size = np.array(flat, dtype=np.int64)
        first_gpu = np.concatenate(([0], np.cumsum(server_size)[:-1])).astype(np.int64) if server_size.size \
            else np.zeros(0, dtype=np.int64)
        gpu_server = np.repeat(np.arange(server_size.size), server_size)
        gpu_type = server_type[gpu_server] if gpu_server.size else np.zeros(0, dtype=np.int64)
        arrays = [gpu_type, gpu_server, server_type, server_size, first_gpu]
        for a in arrays:
            a.setflags(write=False)
        return cls(tuple(types), tuple(n_srv), tuple(per), *arrays)

    @classmethod
    def from_counts(cls, worker_counts: Mapping[str, int], gpus_per_server: Mapping[str, int]) -> "ClusterLayout":
        """From GPU counts per type and GPUs per server; counts must be multiples of the server size."""
        spec: dict[str, tuple[int, int]] = {}
        for t, n in worker_counts.items():
            if t not in gpus_per_server:
                raise UnknownNameError("gpus_per_server", t, gpus_per_server)
            n = _positive_int(f"worker_counts.{t}", n, allow_zero=True)
            g = _positive_int(f"gpus_per_server.{t}", gpus_per_server[t])
            if n % g:
                raise InputError(f"worker_counts.{t}", n, f"not a multiple of {g} GPUs per server")
            spec[str(t)] = (n // g, g)
        return cls.from_servers(spec)

    # ------------------------------------------------------------------ queries
    @property
    def num_gpus(self) -> int:
        return int(self.gpu_type.size)

    @property
    def num_servers(self) -> int:
        return int(self.server_type.size)

    def type_index(self, worker_type: str) -> int:
        try:
            return self.worker_types.index(worker_type)
        except ValueError:
            raise UnknownNameError("worker_type", worker_type, self.worker_types) from None

    def servers_of(self, worker_type: str) -> np.ndarray:
        """Global server indices of a worker type."""
        return np.flatnonzero(self.server_type == self.type_index(worker_type))

    def gpus_of(self, worker_type: str) -> np.ndarray:
        """Global GPU ids of a worker type."""
        return np.flatnonzero(self.gpu_type == self.type_index(worker_type))

    def worker_counts(self) -> dict[str, int]:
        """Worker type -> number of GPUs."""
        counts = np.bincount(self.server_type, weights=self.server_size, minlength=len(self.worker_types))
        return {t: int(n) for t, n in zip(self.worker_types, counts.tolist())}
