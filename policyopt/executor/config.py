"""Settings of an executor run (:class:`ExecutorConfig`), the fields a resumed run must keep
(:data:`COMPATIBLE_FIELDS`) and the executor's error (:class:`ExecutorError`)."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any, Mapping

from policyopt.errors import InputError, PolicyOptError

from .cluster import PIN_MODES, parse_cluster
from .state import JobRecord

__all__ = ["ExecutorConfig", "ExecutorError", "COMPATIBLE_FIELDS", "scale_of"]


class ExecutorError(PolicyOptError):
    """The executor cannot go on (e.g. a backend failure)."""


def scale_of(rec: JobRecord) -> int:
    """The job's scale factor: workers (data-parallel ranks) it trains on."""
    return int(rec.spec.get("scale_factor", 1))


#: config fields that must match when a run resumes from its state file
COMPATIBLE_FIELDS = ("cluster", "policy", "policy_options", "round_seconds", "space_sharing")


@dataclass
class ExecutorConfig:
    """Settings of a run (see the module docstring).

    ``checkpoint_interval`` defaults to half a round, so with the two checkpoints the store keeps, a
    corrupt newest checkpoint still leaves one at most a round old. ``renewal_wait``: how long a
    worker waits at the end of its lease for the next decision. ``settle_seconds``: how long the
    executor waits after the deadline for workers to report their final step of the round.
    ``time_limit``: stop (checkpointing everything) when the executor clock passes it.
    """

    cluster: dict[str, int]
    policy: str = "max_min_fairness"
    policy_options: dict[str, Any] = field(default_factory=dict)
    round_seconds: float = 3.0
    recompute_interval: float | None = None
    max_restarts: int = 3
    checkpoint_interval: float | None = None
    renewal_wait: float = 30.0
    settle_seconds: float = 3.0
    placer: str = "consolidate"
    migration: str = "matching"
    pin: str = "auto"
    launcher: str = "fork"
    online_throughputs: bool = False
    space_sharing: bool = False
    time_limit: float | None = None

    def __post_init__(self) -> None:
        self.cluster = parse_cluster(self.cluster)
        for name in ("round_seconds", "renewal_wait", "settle_seconds"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value <= 0:
                raise InputError(name, value, "must be a positive number of seconds")
        for name in ("recompute_interval", "checkpoint_interval", "time_limit"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                      or not math.isfinite(value) or value <= 0):
                raise InputError(name, value, "must be a positive number of seconds or null")
        if isinstance(self.max_restarts, bool) or not isinstance(self.max_restarts, int) or self.max_restarts < 0:
            raise InputError("max_restarts", self.max_restarts, "must be an integer >= 0")
        if self.pin not in PIN_MODES:
            raise InputError("pin", self.pin, f"must be one of {', '.join(PIN_MODES)}")
        if not isinstance(self.policy_options, Mapping):
            raise InputError("policy_options", self.policy_options, "must be an object")
        from policyopt.policy import get_policy

        get_policy(self.policy, **self._solver_options())  # unknown names/options fail now, not mid-run

    @property
    def interval(self) -> float:
        return float(self.recompute_interval if self.recompute_interval is not None else self.round_seconds)

    @property
    def checkpoint_every(self) -> float:
        return float(self.checkpoint_interval if self.checkpoint_interval is not None else self.round_seconds / 2)

    def _solver_options(self) -> dict[str, Any]:
        opts = dict(self.policy_options)
        if self.space_sharing:
            opts.setdefault("space_sharing", True)
        return opts

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ExecutorConfig":
        names = {f.name for f in fields(cls)}
        unknown = set(data) - names
        if unknown:
            key = sorted(unknown)[0]
            raise InputError(f"config.{key}", data[key], "unknown executor setting")
        return cls(**dict(data))
