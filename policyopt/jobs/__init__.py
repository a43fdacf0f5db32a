"""Real PyTorch training jobs: the job zoo, the lease/checkpoint job API, the worker and the profiler.

Needs the ``torch`` extra (``torch==2.13.0``, ``scikit-learn``). Names are imported lazily so that
``import policyopt.jobs`` works without torch; touching a name that needs torch raises
ImportError then.

Public names: :class:`Lease`, :class:`TrainingSession` (``policyopt.jobs.api``);
:data:`JOB_TYPES`, :func:`get_job_type`, :func:`build_job`, :class:`JobTypeSpec` (``zoo``);
:class:`CheckpointStore`, :class:`CheckpointCorruptError` (``checkpoint``); :class:`BatchStream`
(``data``); :class:`ExecutionPlan` (``plans``).
"""
from __future__ import annotations

from .._lazy import lazy_exports

_EXPORTS = {
    "Lease": "api",
    "TrainingSession": "api",
    "JOB_TYPES": "zoo",
    "FAMILIES": "zoo",
    "JobTypeSpec": "zoo",
    "JobInstance": "zoo",
    "get_job_type": "zoo",
    "build_job": "zoo",
    "CheckpointStore": "checkpoint",
    "CheckpointError": "checkpoint",
    "CheckpointCorruptError": "checkpoint",
    "BatchStream": "data",
    "ExecutionPlan": "plans",
}

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_exports(__name__, {k: f".{v}" for k, v in _EXPORTS.items()}, globals())
