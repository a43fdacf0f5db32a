"""The controller's throughput table: job type -> GPU type -> steps/s.

Two file formats are read (the format is recognised from the top level):

* the profiler's ``throughputs.json`` (``{"job_types": {NAME: {"throughputs": {TYPE: steps/s}}},
  "worker_types": {...}}``, docs/jobs.md); a worker type is a Slurm GPU GRES type. A job type
  may also give ``"startup_seconds": S`` (seconds each start of the job costs before its first
  step: interpreter, imports, model build, checkpoint load), read by :func:`load_startup_seconds`
  as the controller's first estimate of its start cost;
* Gavel's throughput table (``{TYPE: {"('MODEL', SCALE)": {"null": steps/s, ...}}}``, as in
  Gavel's ``simulation_throughputs.json``): job type ``MODEL`` with its single-GPU throughputs
  (``"('ResNet-18 (batch size 64)', 1)"`` is job type ``ResNet-18 (batch size 64)``), and
  ``MODEL#SCALE`` for every entry (``ResNet-18 (batch size 64)#4`` is the 4-GPU measurement).
  ``*_unconsolidated`` worker types are left out: Slurm decides node spread, not the controller.
"""
from __future__ import annotations

import ast
import json
import math
from pathlib import Path
from typing import Any, Mapping

from policyopt.errors import InputError

__all__ = ["ThroughputTable", "load_startup_seconds", "load_throughputs"]

ThroughputTable = dict[str, dict[str, float]]


def _number(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(field, value, "must be a number >= 0 (steps/s)")
    return float(value)


def _from_profiler(raw: Mapping[str, Any]) -> ThroughputTable:
    table: ThroughputTable = {}
    for name, entry in raw["job_types"].items():
        thr = entry.get("throughputs") if isinstance(entry, Mapping) else None
        if not isinstance(thr, Mapping):
            raise InputError(f"throughputs.job_types.{name}.throughputs", thr, "must be an object {TYPE: steps/s}")
        table[str(name)] = {str(t): _number(f"throughputs.job_types.{name}.throughputs.{t}", v)
                            for t, v in thr.items()}
    return table


def _from_gavel(raw: Mapping[str, Any]) -> ThroughputTable:
    table: ThroughputTable = {}
    for worker_type, entries in raw.items():
        if worker_type.endswith("_unconsolidated"):
            continue
        if not isinstance(entries, Mapping):
            raise InputError(f"throughputs.{worker_type}", entries, "must be an object of job types")
        for key, entry in entries.items():
            try:
                model, scale = ast.literal_eval(key)
                scale = int(scale)
            except (ValueError, SyntaxError, TypeError):
                raise InputError(f"throughputs.{worker_type}", key,
                                 "a Gavel job key looks like \"('MODEL', 1)\"") from None
            if not isinstance(entry, Mapping) or "null" not in entry:
                raise InputError(f"throughputs.{worker_type}.{key}", entry, "needs the alone throughput under \"null\"")
            value = _number(f"throughputs.{worker_type}.{key}.null", entry["null"])
            table.setdefault(f"{model}#{scale}", {})[worker_type] = value
            if scale == 1:
                table.setdefault(str(model), {})[worker_type] = value
    return table


def _read(path: Path) -> Any:
    try:
        raw = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError("--throughputs", str(path), "file not found") from None
    except json.JSONDecodeError as exc:
        raise InputError("--throughputs", str(path), f"malformed JSON at line {exc.lineno}: {exc.msg}") from None
    if not isinstance(raw, Mapping) or not raw:
        raise InputError("--throughputs", str(path), "must be a non-empty JSON object")
    return raw


def load_throughputs(path: str | Path) -> ThroughputTable:
    """Read a profiler ``throughputs.json`` or a Gavel throughput table (see the module docstring)."""
    path = Path(path)
    raw = _read(path)
    table = _from_profiler(raw) if isinstance(raw.get("job_types"), Mapping) else _from_gavel(raw)
    if not table:
        raise InputError("--throughputs", str(path), "no job types in the table")
    return table


def load_startup_seconds(path: str | Path) -> dict[str, float]:
    """Job type -> ``startup_seconds`` of the profiler-format table at ``path`` (the job types that
    give one; a Gavel table gives none)."""
    raw = _read(Path(path))
    if not isinstance(raw.get("job_types"), Mapping):
        return {}
    return {str(name): _seconds(f"throughputs.job_types.{name}.startup_seconds", entry["startup_seconds"])
            for name, entry in raw["job_types"].items()
            if isinstance(entry, Mapping) and entry.get("startup_seconds") is not None}


def _seconds(field: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise InputError(field, value, "must be a number of seconds >= 0")
    return float(value)
