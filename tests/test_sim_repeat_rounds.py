"""Repeated rounds (``policyopt.sim.loop``'s module docstring): a round that changed nothing is applied
again from its kept increments while nothing changes, bit-identical to running every stage of it."""
from __future__ import annotations

from dataclasses import replace

import pandas as pd
import pytest

from policyopt.sim.loop import SimulationRun
from policyopt.sim.simulator import SimConfig, Simulator
from policyopt.sim.traces import TraceJob, gavel_trace

#: Gavel's simulator's semantics (the published setup's), under which quiet stretches are long
_GAVEL = dict(gpus_per_server=4, migration="none", keep_types=False, checkpoint_seconds=0.0,
              restore_seconds=0.0, recompute_interval=1920.0)


def _gapped_trace(table) -> list[TraceJob]:
    """30 single-GPU Gavel jobs in three bursts with long gaps between them (the cluster idles in each
    gap), arrivals off the round grid, shortened so that jobs finish within the bursts' runs."""
    base = gavel_trace(table, 30, rate_per_hour=3.0, seed=5)
    out = []
    for i, j in enumerate(base):
        gap = (i // 10) * 400 * 3600.0  # bursts 400 h apart
        out.append(replace(j, arrival=j.arrival + gap + 0.37 * i, steps=j.steps / 4))
    return out


def _run(table, trace, flag: bool, monkeypatch, **cfg):
    monkeypatch.setattr(SimulationRun, "repeat_rounds", flag)
    calls = {"repeated": 0}
    original = SimulationRun.repeat_round

    def counted(self, selection):
        done = original(self, selection)
        calls["repeated"] += int(done)
        return done

    monkeypatch.setattr(SimulationRun, "repeat_round", counted)
    res = Simulator("v100=4,p100=4,k80=4", SimConfig(seed=0, **cfg), table).run(trace)
    return res, calls["repeated"]


def _assert_same(a, b) -> None:
    pd.testing.assert_frame_equal(a.jobs, b.jobs, check_exact=True)
    pd.testing.assert_frame_equal(a.rounds, b.rounds, check_exact=True)
    drop = ("policy_solve_seconds", "phase_seconds", "wall_seconds")
    assert {k: v for k, v in a.metrics.items() if k not in drop} == \
        {k: v for k, v in b.metrics.items() if k not in drop}


@pytest.mark.parametrize("policy,extra", [
    ("max_min_fairness", {}),
    ("max_min_fairness_agnostic", {}),
    ("max_min_fairness", {"backfill": True}),
    ("finish_time_fairness", {"backfill": True}),
])
def test_repeated_rounds_are_bit_identical_on_a_trace_with_long_gaps(gavel, monkeypatch, policy, extra) -> None:
    """Per-job JCTs (every job column), the rounds with work (every round row) and the metrics are equal
    with and without the repeated rounds, and most rounds were repeated. Fails when a repeated round
    mis-times an arrival (admitted a round late, or a round row without it), misses a completion or
    skips a due recompute."""
    trace = _gapped_trace(gavel)
    off, n_off = _run(gavel, trace, False, monkeypatch, policy=policy, **_GAVEL, **extra)
    on, n_on = _run(gavel, trace, True, monkeypatch, policy=policy, **_GAVEL, **extra)
    assert n_off == 0
    assert off.metrics["completed"] == 30
    rounds = int((off.rounds["running_jobs"] > 0).sum())
    assert n_on > rounds // 3  # the path is taken
    _assert_same(off, on)


def test_repeated_rounds_with_arrivals_inside_quiet_stretches(gavel, monkeypatch) -> None:
    """Jobs that arrive while long jobs run quietly: each arrival lands inside a stretch of repeated
    rounds, is admitted at the next round start and is noted for the recompute as without them."""
    base = gavel_trace(gavel, 12, rate_per_hour=0.2, seed=2)
    trace = [replace(j, arrival=j.arrival + 97.5 * i) for i, j in enumerate(base)]
    off, _ = _run(gavel, trace, False, monkeypatch, policy="max_min_fairness", **_GAVEL)
    on, n_on = _run(gavel, trace, True, monkeypatch, policy="max_min_fairness", **_GAVEL)
    assert n_on > 0
    _assert_same(off, on)
    # every arrival after the first fell on a round during which others ran
    assert (on.jobs["arrival"].iloc[1:] < on.jobs["finish"].cummax().shift(1).iloc[1:]).any()


def test_default_semantics_take_no_repeated_rounds(gavel, monkeypatch) -> None:
    """Migration minimization with kept types (the default) changes the selection after the mechanism:
    no round is repeated there, and the results are those of the plain run."""
    trace = _gapped_trace(gavel)[:10]
    off, _ = _run(gavel, trace, False, monkeypatch, policy="max_min_fairness", gpus_per_server=4)
    on, n_on = _run(gavel, trace, True, monkeypatch, policy="max_min_fairness", gpus_per_server=4)
    assert n_on == 0
    _assert_same(off, on)
