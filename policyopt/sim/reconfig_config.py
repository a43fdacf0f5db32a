"""Settings of a reconfiguration-aware simulation: :class:`ReconfigSimConfig`, checked on creation.

What each setting means for the simulation (rounds, decisions, reconfiguration rule, SLA
accounting) is described in :mod:`policyopt.sim.reconfig_sim`. Every bad value raises an
:class:`~policyopt.errors.InputError` (or :class:`~policyopt.errors.UnknownNameError`) naming the
field and the value.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping

import numpy as np

from ..errors import InputError, UnknownNameError
from .metrics import DEFAULT_WINDOW, steady_state_window

if TYPE_CHECKING:  # the runtimes import each other only inside functions (tests/test_import_graph.py)
    from ..reconfig.spec import ReconfigOptions

__all__ = ["ReconfigSimConfig", "RESCHEDULE_MODES", "REQUIRED_EXTRA"]

#: when a decision is taken: on arrival / completion events (rate-limited), or every round
RESCHEDULE_MODES: tuple[str, ...] = ("events", "rounds")
#: fields a trace job's ``extra`` must hold (what :func:`~policyopt.reconfig.transformers_trace` writes)
REQUIRED_EXTRA: tuple[str, ...] = ("model", "node_type", "gpus", "cpus", "plan", "guaranteed", "checkpoint_seconds")


def _positive(name: str, v: Any, allow_zero: bool = False) -> None:
    ok = isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and \
        bool(np.isfinite(v)) and (v >= 0 if allow_zero else v > 0)
    if not ok:
        raise InputError(name, v, "must be a " + ("non-negative" if allow_zero else "positive") + " number")


@dataclass
class ReconfigSimConfig:
    """Settings of a reconfiguration-aware simulation (:mod:`policyopt.sim.reconfig_sim` for the semantics).

    ``checkpoint_seconds``: ``δ`` for every job (None: each job's own, ``20 s + 16·P bytes / 5 GB/s``
    from the trace). ``amortize``: also put ``δ`` in the objective (``options.round_seconds``).
    """

    policy: str = "rubick_greedy"
    policy_options: Mapping[str, Any] = field(default_factory=dict)
    nodes: int = 4
    reconfigure: str = "all"
    threshold: float = 0.97
    round_seconds: float = 360.0
    checkpoint_seconds: float | None = None
    quota_fraction: float | None = 0.5
    quota: str = "reserve"  # reserve | cap (reconfig.options.quota: quotas that reserve let idle capacity flow on)
    amortize: bool = False
    reschedule: str = "events"
    recompute_interval: float | None = None  # None: one round
    charge_migrations: bool = True
    seed: int = 0
    window: tuple[float, float] = DEFAULT_WINDOW
    until: str = "all"  # all | window
    max_seconds: float | None = None
    max_rounds: int | None = None
    progress: bool = False

    def __post_init__(self) -> None:
        from ..reconfig.spec import QUOTA_MODES, RECONFIGURE_MODES

        if isinstance(self.nodes, bool) or not isinstance(self.nodes, (int, np.integer)) or self.nodes < 1:
            raise InputError("nodes", self.nodes, "must be a positive integer (nodes of 8 GPUs)")
        if self.reconfigure not in RECONFIGURE_MODES:
            raise UnknownNameError("reconfigure", self.reconfigure, RECONFIGURE_MODES)
        if self.quota not in QUOTA_MODES:
            raise UnknownNameError("quota", self.quota, QUOTA_MODES)
        _positive("threshold", self.threshold, True)
        if self.threshold > 1:
            raise InputError("threshold", self.threshold, "must be in [0, 1]")
        _positive("round_seconds", self.round_seconds)
        if self.checkpoint_seconds is not None:
            _positive("checkpoint_seconds", self.checkpoint_seconds, True)
        if self.quota_fraction is not None:
            _positive("quota_fraction", self.quota_fraction, True)
            if self.quota_fraction > 1:
                raise InputError("quota_fraction", self.quota_fraction, "must be in [0, 1]")
        if self.reschedule not in RESCHEDULE_MODES:
            raise UnknownNameError("reschedule", self.reschedule, RESCHEDULE_MODES)
        if self.recompute_interval is not None:
            _positive("recompute_interval", self.recompute_interval, True)
        if "reconfigure" in self.policy_options:
            raise InputError("policy_options.reconfigure", self.policy_options["reconfigure"],
                             "set what may change with reconfigure (--reconfigure), not as a policy option")
        steady_state_window(10, self.window)
        if self.until not in ("all", "window"):
            raise InputError("until", self.until, "must be 'all' or 'window'")
        if self.max_seconds is not None:
            _positive("max_seconds", self.max_seconds)
        if self.max_rounds is not None and (isinstance(self.max_rounds, bool) or
                                            not isinstance(self.max_rounds, (int, np.integer)) or self.max_rounds < 1):
            raise InputError("max_rounds", self.max_rounds, "must be a positive integer")
        if isinstance(self.seed, bool) or not isinstance(self.seed, (int, np.integer)):
            raise InputError("seed", self.seed, "must be an integer")

    @property
    def options(self) -> ReconfigOptions:
        """The ``reconfig.options`` of every round's problem."""
        from ..reconfig.spec import ReconfigOptions

        return ReconfigOptions(reconfigure=self.reconfigure, threshold=float(self.threshold),
                               round_seconds=float(self.round_seconds) if self.amortize else None,
                               quota=self.quota)

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)
