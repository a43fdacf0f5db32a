"""The executor: real PyTorch training jobs (the job zoo) scheduled round by round by a policy.

``policyopt run`` (:mod:`policyopt.executor.cli`) and :class:`Executor` run a job list on a
cluster of worker types (``cpu1=1,cpu2=1``, or a GPU model such as ``h100=1``): each round the
policy's allocation (recomputed on arrivals and completions) is realized by the round mechanism,
placed on worker slots, and executed by real worker processes (:mod:`policyopt.jobs.worker`) that
keep running across rounds when their lease is renewed and checkpoint when preempted. State lives
in SQLite (:class:`ExecutorState`), so a killed executor resumes. See ``docs/executor.md``.

Names are imported lazily (the executor's modules import numpy, the mechanism and placement; the
worker processes need torch).
"""
from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "Executor": "executor",
    "ExecutorConfig": "executor",
    "ExecutorError": "executor",
    "run_executor": "executor",
    "ExecutorState": "state",
    "JobRecord": "state",
    "JobSpec": "spec",
    "parse_jobs": "spec",
    "load_jobs": "spec",
    "example_jobs": "spec",
    "load_throughput_table": "spec",
    "Slot": "cluster",
    "build_slots": "cluster",
    "parse_cluster": "cluster",
    "Launch": "backends",
    "ProcessHandle": "backends",
    "LocalProcessBackend": "backends",
    "RayBackend": "ray_backend",
    "build_report": "report",
    "write_report": "report",
    "fidelity_section": "fidelity",
    "simulate_run": "fidelity",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, {k: f".{v}" for k, v in _EXPORTS.items()}, globals())
