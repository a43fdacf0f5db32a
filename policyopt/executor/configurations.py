"""Throughputs per configuration: a job's rate given the other jobs that train beside it.

Where slots share devices (``cpu1=2,cpu2=2`` is six torch threads on the two cores of the
development machine), a job's steps/s depends on which other slots train in the same round, up to
2× on that machine. A profiler table has one rate per ``(job type, K, worker type)``. The busy and
schedule profiles (:mod:`policyopt.executor.busyprofile`) measure whole configurations, so their
tables also carry the rate of each job *in* each measured configuration, as the table's optional
``configurations`` list::

    "configurations": [
      {"jobs": [["lstm-bs10", 1, "cpu1"], ["transformer-bs16", 2, "cpu2"]],
       "throughputs": [13.0, 10.4], "throughputs_std": [1.5, 1.3], "samples": 2},
      ...]

One item is one configuration: the ``(job type, scale factor K, worker type)`` of every job that
trains at once (every other slot idle), sorted, and each job's mean steps/s over ``samples``
measurements (``throughputs_std``: their sample standard deviation, optional). :func:`parse_configurations`
validates the list (an error names the field and the value).

:class:`ConfigurationRates` gives the simulator (``Simulator(..., round_rates=...)``) the rate of
each running job ``e`` of a round ``R``:

1. **exact**: a configuration equal to ``R`` (as a multiset of ``(job type, K, worker type)``) was
   measured: ``e``'s rate there (the mean over the members equal to ``e``);
2. **shared**: else, if ``e`` runs on a CPU worker type and was measured in some configurations,
   processor sharing: the threads of a configuration share ``P`` cores with ``E`` runnable threads
   of other processes, so a thread gets ``P / max(P, T + E)`` of a core, where ``T(C) = Σ_{f ∈ C}
   K_f · threads(type_f)`` over its CPU members (``threads`` from the table's ``worker_types``).
   ``e``'s rate is the mean over the configurations ``C`` that contain it of
   ``rate(e, C) · max(P, T(C) + E) / max(P, T(R) + E)``;
3. **table**: else the table's own rate (what the simulator had).

Every rate from 1 or 2 is multiplied by ``scale`` (the round model's ``L / D``, as the table's).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from policyopt.errors import InputError

__all__ = ["Configuration", "parse_configurations", "configurations_from_samples", "ConfigurationRates"]

#: ``(job type, scale factor K, worker type)``
Member = tuple[str, int, str]


@dataclass(frozen=True)
class Configuration:
    """One measured configuration: ``jobs`` sorted, ``throughputs[i]`` the steps/s of ``jobs[i]``."""

    jobs: tuple[Member, ...]
    throughputs: tuple[float, ...]
    samples: int


def _number(value: Any, field: str, positive: bool = False) -> float:
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) \
        and (value > 0 if positive else value >= 0)
    if not ok:
        raise InputError(field, value, "must be a finite number " + ("> 0" if positive else ">= 0"))
    return float(value)


def parse_configurations(table: Mapping[str, Any], field: str = "throughputs") -> list[Configuration]:
    """The table's ``configurations`` (module docstring), validated; ``[]`` when it has none. A
    job type must be in the table's ``job_types`` and a worker type in its ``worker_types`` (where
    the table lists them)."""
    raw = table.get("configurations")
    if raw is None:
        return []
    where = f"{field}.configurations"
    if not isinstance(raw, list):
        raise InputError(where, raw, "must be a list of {jobs, throughputs, samples} objects")
    job_types = table.get("job_types") or {}
    worker_types = table.get("worker_types")
    out = []
    for i, item in enumerate(raw):
        at = f"{where}[{i}]"
        if not isinstance(item, Mapping):
            raise InputError(at, item, "must be an object with jobs, throughputs and samples")
        jobs, thr = item.get("jobs"), item.get("throughputs")
        if not isinstance(jobs, list) or not jobs:
            raise InputError(f"{at}.jobs", jobs, "must be a non-empty list of [job type, K, worker type]")
        if not isinstance(thr, list) or len(thr) != len(jobs):
            raise InputError(f"{at}.throughputs", thr, f"must be a list of {len(jobs)} steps/s, one per job")
        members = []
        for j, m in enumerate(jobs):
            ok = isinstance(m, (list, tuple)) and len(m) == 3 and isinstance(m[0], str) and isinstance(m[2], str) \
                and isinstance(m[1], int) and not isinstance(m[1], bool) and m[1] >= 1
            if not ok:
                raise InputError(f"{at}.jobs[{j}]", m, "must be [job type, scale factor >= 1, worker type]")
            if m[0] not in job_types:
                raise InputError(f"{at}.jobs[{j}]", m, "job type not in the table's job_types")
            if isinstance(worker_types, Mapping) and m[2] not in worker_types:
                raise InputError(f"{at}.jobs[{j}]", m, "worker type not in the table's worker_types")
            members.append((m[0], int(m[1]), m[2]))
        rates = [_number(v, f"{at}.throughputs[{j}]") for j, v in enumerate(thr)]
        n = item.get("samples", 1)
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise InputError(f"{at}.samples", n, "must be an integer >= 1")
        order = sorted(range(len(members)), key=lambda q: (members[q], rates[q]))
        out.append(Configuration(tuple(members[q] for q in order), tuple(rates[q] for q in order), n))
    return out


def configurations_from_samples(samples: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The ``configurations`` list of a busy or schedule profile's samples (``meta.under_load.samples``:
    one per process, with ``pass``, ``measurement``, ``repeat``, ``job_type``, ``scale_factor``,
    ``worker_type``, ``slots`` and ``rate``): the processes of one repeat of one measurement form a
    configuration; the same configuration measured again (another repeat or pass) adds samples. A
    member's throughput is the mean of its samples (members equal as ``(job type, K, worker type)``
    are pooled), ``throughputs_std`` their sample standard deviation (``ddof = 1``; 0 for one)."""
    runs: dict[tuple[str, int, int], list[tuple[Member, float]]] = {}
    for s in samples:
        key = (str(s["pass"]), int(s["measurement"]), int(s["repeat"]))
        runs.setdefault(key, []).append(((str(s["job_type"]), int(s["scale_factor"]), str(s["worker_type"])),
                                         float(s["rate"])))
    pooled: dict[tuple[Member, ...], dict[Member, list[float]]] = {}
    counts: dict[tuple[Member, ...], int] = {}
    for run in runs.values():
        members = tuple(sorted(m for m, _ in run))
        acc = pooled.setdefault(members, {})
        for m, rate in run:
            acc.setdefault(m, []).append(rate)
        counts[members] = counts.get(members, 0) + 1
    out = []
    for members in sorted(pooled):
        acc = pooled[members]
        out.append({"jobs": [list(m) for m in members],
                    "throughputs": [float(np.mean(acc[m])) for m in members],
                    "throughputs_std": [float(np.std(acc[m], ddof=1)) if len(acc[m]) > 1 else 0.0
                                        for m in members],
                    "samples": counts[members]})
    return out


class ConfigurationRates:
    """``round_rates`` for :class:`policyopt.sim.simulator.Simulator` from measured configurations
    (module docstring: exact, else shared by threads, else the table's rate) on ``cores`` cores with
    ``other_threads`` runnable threads of other processes; ``worker_types`` (the table's) gives each
    type's ``device`` (``cpu`` where absent) and ``threads``; every measured rate times ``scale``.
    ``used`` counts the entries each rule priced."""

    def __init__(self, configurations: Sequence[Configuration], worker_types: Mapping[str, Any] | None = None,
                 scale: float = 1.0, cores: int = 1, other_threads: float = 0.0) -> None:
        self.scale = _number(scale, "scale", positive=True)
        self.cores = _number(cores, "cores", positive=True)
        self.other = _number(other_threads, "other_threads")
        self.threads: dict[str, int] = {}
        for t, v in (worker_types or {}).items():
            info = v if isinstance(v, Mapping) else {}
            self.threads[str(t)] = int(info.get("threads") or 1) if info.get("device", "cpu") == "cpu" else 0
        self.exact: dict[tuple[Member, ...], dict[Member, float]] = {}
        shared: dict[Member, list[tuple[float, float]]] = {}
        for c in configurations:
            acc: dict[Member, list[float]] = {}
            for m, r in zip(c.jobs, c.throughputs):
                acc.setdefault(m, []).append(r)
            self.exact[c.jobs] = {m: float(np.mean(v)) for m, v in acc.items()}
            busy = self._busy(c.jobs)
            for m, r in zip(c.jobs, c.throughputs):
                if self._width(m) > 0:
                    shared.setdefault(m, []).append((busy, r))
        self.shared = {m: (np.array([b for b, _ in v]), np.array([r for _, r in v])) for m, v in shared.items()}
        self.used = {"exact": 0, "shared": 0, "table": 0}

    def _width(self, m: Member) -> int:
        return m[1] * self.threads.get(m[2], 1)

    def _busy(self, members: Sequence[Member]) -> float:
        """``max(P, T + E)``: the threads that share the cores, at least the cores."""
        return max(self.cores, sum(self._width(m) for m in members) + self.other)

    def __call__(self, entries: Sequence[tuple[str, str]], rates: np.ndarray) -> np.ndarray:
        members = []
        for label, wt in entries:
            name, _, k = label.rpartition("#")
            members.append((name, int(k), wt))
        out = np.asarray(rates, dtype=float).copy()
        exact = self.exact.get(tuple(sorted(members)))
        busy = self._busy(members)
        for q, m in enumerate(members):
            if exact is not None:
                out[q] = exact[m] * self.scale
                self.used["exact"] += 1
            elif m in self.shared:
                b, r = self.shared[m]
                out[q] = float(np.mean(r * b / busy)) * self.scale
                self.used["shared"] += 1
            else:
                self.used["table"] += 1
        return out
