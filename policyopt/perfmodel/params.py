"""The seven fitted parameters of the performance model and their JSON form.

======== ============================================================ ===============
name     role                                                          unit
======== ============================================================ ===============
k_bwd    T_bwd = k_bwd·T_fwd                                           -
k_sync   overlap exponent of backward with the data-parallel sync      -
k_opt    GPU optimizer step: T_opt = k_opt·P/x                          s / parameter
k_opt_off CPU optimizer step (offload): T_opt = k_opt_off·P/(d·c)      s·core / param
k_off    overlap exponent of the DP sync with the GPU->CPU offload      -
k_swap   overlap exponent of the CPU optimizer with the swap traffic    -
k_const  constant per-iteration overhead                               s
======== ============================================================ ===============

PARAMS.json layout::

    {"format": "policyopt.perfmodel.params/1",
     "models": {"<model>": {"params": {"k_bwd": ..., ...}, "fit": {...diagnostics...}}}}
"""
from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Mapping

import numpy as np

from policyopt.errors import InputError

__all__ = ["PARAM_NAMES", "PARAMS_FORMAT", "PerfParams", "save_params", "load_params"]

PARAM_NAMES: tuple[str, ...] = ("k_bwd", "k_sync", "k_opt", "k_opt_off", "k_off", "k_swap",
                                "k_const")
PARAMS_FORMAT = "policyopt.perfmodel.params/1"
#: Overlap exponents must be >= 1 so f_k(x, y) lies between max(x, y) and x + y.
_EXPONENTS = ("k_sync", "k_off", "k_swap")


@dataclass(frozen=True)
class PerfParams:
    """The seven parameters of one model (see the module docstring for units)."""

    k_bwd: float
    k_sync: float
    k_opt: float
    k_opt_off: float
    k_off: float
    k_swap: float
    k_const: float

    def __post_init__(self) -> None:
        for name in PARAM_NAMES:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float, np.floating)):
                raise InputError(f"params.{name}", value, "must be a number")
            if not math.isfinite(value) or value < 0:
                raise InputError(f"params.{name}", value, "must be a finite number >= 0")
        for name in _EXPONENTS:
            if getattr(self, name) < 1:
                raise InputError(f"params.{name}", getattr(self, name),
                                 "overlap exponent must be >= 1")

    def as_array(self) -> np.ndarray:
        """The parameters in :data:`PARAM_NAMES` order."""
        return np.array([getattr(self, n) for n in PARAM_NAMES], dtype=float)

    @classmethod
    def from_array(cls, values: np.ndarray | list[float]) -> "PerfParams":
        """Inverse of :meth:`as_array`."""
        arr = np.asarray(values, dtype=float).ravel()
        if arr.size != len(PARAM_NAMES):
            raise InputError("params", arr.tolist(), f"need {len(PARAM_NAMES)} values")
        return cls(**{n: float(v) for n, v in zip(PARAM_NAMES, arr)})

    def to_dict(self) -> dict[str, float]:
        """Plain dict keyed by parameter name."""
        return {k: float(v) for k, v in asdict(self).items()}

    @classmethod
    def from_dict(cls, data: Any, field: str = "params") -> "PerfParams":
        """Build from a dict; every one of the seven names is required, no extra keys."""
        if not isinstance(data, Mapping):
            raise InputError(field, data, "must be an object of the seven k_* parameters")
        missing = [n for n in PARAM_NAMES if n not in data]
        if missing:
            raise InputError(f"{field}.{missing[0]}", None, "missing parameter")
        extra = sorted(set(data) - set(PARAM_NAMES))
        if extra:
            raise InputError(f"{field}.{extra[0]}", data[extra[0]], "unknown parameter")
        try:
            return cls(**{n: data[n] for n in PARAM_NAMES})
        except InputError as err:  # re-root the field path at the caller's location
            raise InputError(err.field.replace("params", field, 1), err.value,
                             err.problem) from None


def save_params(path: str | Path, params: Mapping[str, PerfParams],
                fit_info: Mapping[str, Mapping[str, Any]] | None = None) -> None:
    """Write one parameter set per model to ``path`` (see the module docstring for the layout)."""
    models: dict[str, Any] = {}
    for name, p in params.items():
        entry: dict[str, Any] = {"params": p.to_dict()}
        if fit_info and name in fit_info:
            entry["fit"] = dict(fit_info[name])
        models[str(name)] = entry
    Path(path).write_text(json.dumps({"format": PARAMS_FORMAT, "models": models}, indent=2) + "\n")


def load_params(path: str | Path) -> dict[str, PerfParams]:
    """Read a PARAMS.json written by :func:`save_params`."""
    p = Path(path)
    if not p.is_file():
        raise InputError("params_file", str(p), "file not found")
    try:
        data = json.loads(p.read_text())
    except json.JSONDecodeError as err:
        raise InputError("params_file", str(p), f"not valid JSON ({err.msg}, line {err.lineno})") from None
    if not isinstance(data, dict) or data.get("format") != PARAMS_FORMAT:
        raise InputError("params_file.format", data.get("format") if isinstance(data, dict)
                         else data, f"expected {PARAMS_FORMAT!r}")
    models = data.get("models")
    if not isinstance(models, dict) or not models:
        raise InputError("params_file.models", models, "must be a non-empty object")
    return {name: PerfParams.from_dict(entry.get("params") if isinstance(entry, dict) else entry,
                                       f"params_file.models.{name}.params")
            for name, entry in models.items()}
