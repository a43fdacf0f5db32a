"""``policyopt.sim.stage_setup.build_stages``: the round stages a simulation's configuration asks for."""
from __future__ import annotations

from typing import Any

import pytest

from policyopt.data import load_gavel
from policyopt.placement import MatchingPacker, NoPacking
from policyopt.sim import SimConfig, Simulator
from policyopt.sim.loop import SimulationRun
from policyopt.sim.scheduling import AllocationScheduler, PriorityScheduler
from policyopt.sim.stage_setup import RoundStages, build_stages
from policyopt.sim.traces import gavel_trace


def _stages(**cfg: Any) -> tuple[SimulationRun, RoundStages]:
    """A run of 4 jobs of Gavel's trace on 2 GPUs of each type, and the stages built again for it."""
    table = load_gavel()
    sim = Simulator("v100=2,p100=2,k80=2", SimConfig(**cfg), table)
    run = SimulationRun(sim, gavel_trace(table, 4, 1.0, seed=0))
    return run, build_stages(sim, run.L, run.tj, run.ids)


def test_allocation_stages_with_packing_and_kept_types() -> None:
    """An allocation policy is realized by a mechanism (Gavel's type shuffle seeded with ``seed + 5`` for an
    agnostic policy); with ``keep_types`` the packer's pair bonus is ``min(2 (checkpoint + restore) / L, 2)``."""
    run, st = _stages(policy="max_min_fairness_agnostic", ordering="gavel", seed=4, packing=True,
                      keep_types=True, checkpoint_seconds=30.0, restore_seconds=60.0, round_seconds=360.0)
    assert isinstance(st.scheduler, AllocationScheduler) and st.alloc_mode and st.sticky and not st.need_rho
    assert (st.scheduler.mechanism.shuffle_types, st.scheduler.mechanism.shuffle_seed) == (True, 9)
    assert isinstance(st.packer, MatchingPacker) and st.packer.keep_bonus == pytest.approx(2 * 90 / 360)
    assert st.exact_relabel  # (migration="matching", the default)
    assert (type(run.scheduler), type(run.packer), run.sticky) == (AllocationScheduler, MatchingPacker, True)


def test_priority_stages() -> None:
    """A priority policy is its own scheduler: never sticky, no pair bonus; ``ftf`` reads the ratios."""
    _, st = _stages(policy="ftf", migration="none")
    assert isinstance(st.scheduler, PriorityScheduler) and not st.alloc_mode and not st.sticky
    assert st.need_rho and not st.exact_relabel and isinstance(st.packer, NoPacking)
