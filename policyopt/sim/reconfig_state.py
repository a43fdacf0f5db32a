"""What a reconfiguration-aware simulation carries from round to round, and one round's execution.

:class:`_State` holds per-job data and counters (simulator index = arrival order: steps done,
training time ``T`` = seconds holding resources, reconfigurations ``N``, migrations, resumes,
preemptions, first start and finish times, overhead and compute seconds, attained GPU-seconds,
cost), the running placement (``held``), the recompute clock, the clock ``t`` and the rows of the
result tables (``rounds``, ``runs``, ``placements``, ``decisions``). :class:`_Executed` is one
round's execution (step 4 of a round, :mod:`policyopt.sim.reconfig_sim`), as arrays aligned over
the running jobs ``R``: who paid ``δ`` and why, the compute seconds, the seconds holding resources,
the steps done and who finished. :data:`PHASES` names the timed phases of a run.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..mechanism import RecomputeClock
from .reconfig_nodes import _Run
from .traces import TraceJob

if TYPE_CHECKING:  # the runtimes import each other only inside functions (tests/test_import_graph.py)
    from ..reconfig.spec import CurrentConfig

__all__ = ["PHASES"]

PHASES = ("problem", "decide", "relabel", "execute")


@dataclass
class _State:
    """What a run of :class:`~policyopt.sim.reconfig_sim.ReconfigSimulator` carries from round to
    round: per-job data and counters (simulator index = arrival order), the running placement, the
    clock and the tables."""

    jobs: list[TraceJob]
    ids: list[str]
    arrival: np.ndarray
    steps: np.ndarray
    delta: np.ndarray  # checkpoint + restore seconds
    req_gpus: np.ndarray
    guaranteed: np.ndarray
    ref: np.ndarray  # r_m: steps/s of the requested configuration
    cap: np.ndarray  # GPUs, cores, host bytes of the cluster
    node_gpus: list[np.ndarray]
    clock: RecomputeClock
    t: float
    t0: float
    horizon: float
    window: tuple[int, int]
    space_mode: str
    t_wall: float
    index: dict[str, int] = field(init=False)
    held: dict[int, _Run] = field(default_factory=dict)  # what each running job runs
    sla: list[tuple[int, float, bool, bool]] = field(default_factory=list)  # (job, required, admitted, met)
    active: list[int] = field(default_factory=list)
    nxt: int = 0  # the next job to arrive
    rounds: int = 0
    stalled: bool = False
    timings: dict[str, float] = field(default_factory=lambda: {p: 0.0 for p in PHASES})
    round_rows: list[tuple[Any, ...]] = field(default_factory=list)
    run_rows: list[tuple[Any, ...]] = field(default_factory=list)
    place_rows: list[tuple[Any, ...]] = field(default_factory=list)
    decision_rows: list[tuple[Any, ...]] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.jobs)
        self.index = {jid: i for i, jid in enumerate(self.ids)}
        self.done, self.run_s = np.zeros(n), np.zeros(n)  # steps done; T: seconds holding resources
        self.n_rec, self.n_mig, self.n_res, self.n_pre, self.n_runs = (np.zeros(n, np.int64) for _ in range(5))
        self.first, self.finish = np.full(n, np.nan), np.full(n, np.nan)
        self.overhead, self.compute, self.attained, self.cost = np.zeros(n), np.zeros(n), np.zeros(n), np.zeros(n)
        self.ran_last = np.zeros(n, bool)
        self.current: list[CurrentConfig | None] = [None] * n

    def idle_round(self, start: float, length: float) -> None:
        """A ``rounds`` row for a stretch with nothing running."""
        self.round_rows.append((start, length, len(self.active), 0, False, *([0.0] * 5), *([0] * 6), 0.0))


@dataclass(frozen=True)
class _Executed:
    """One round's execution, per running job ``R`` (aligned arrays)."""

    R: np.ndarray
    gpus: np.ndarray
    cpus: np.ndarray
    host: np.ndarray
    rec: np.ndarray  # reconfigured
    mig: np.ndarray  # migrated (charged)
    res: np.ndarray  # resumed after a pause
    pay: np.ndarray  # δ paid out of the round
    need: np.ndarray  # compute seconds
    occupied: np.ndarray  # seconds holding resources
    progress: np.ndarray  # steps
    fin: np.ndarray  # finished this round
    T_before: np.ndarray
    N_before: np.ndarray
