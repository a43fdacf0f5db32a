"""Migration avoidance in the round stages: keep_types, the mechanism's renewal credit, the simulator's
migration sources and realized ÷ planned accounting, and the CLI's --multi-gpu check."""
from __future__ import annotations

import argparse

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import InputError
from policyopt.mechanism import Combination, RoundAssignment, RoundMechanism
from policyopt.placement import MIGRATION_SOURCES, keep_types
from policyopt.sim.simulator import SimConfig, default_renewal_credit, simulate
from policyopt.sim.traces import shockwave_trace

CAP = {"a": 2, "b": 2}


def _allow_all(job: str, t: str) -> bool:
    return True


def _flat(job: str, t: str) -> float:
    return 1.0


# ----------------------------------------------------------------------------- keep_types
def test_keep_types_moves_into_idle_gpus_and_swaps() -> None:
    sel = RoundAssignment((Combination(("x",), "b", 1), Combination(("y",), "a", 1)), ("z",))
    # x ran on a (which has a free GPU): back to a; y ran on b: now b has room too
    out = keep_types(sel, {"x": "a", "y": "b"}, CAP, _allow_all, _flat)
    assert {c.jobs[0]: c.worker_type for c in out.combinations} == {"x": "a", "y": "b"}
    assert out.pending == ("z",)
    # full cluster: only a swap keeps both
    full = RoundAssignment((Combination(("x",), "b", 2), Combination(("y",), "a", 2)))
    out = keep_types(full, {"x": "a", "y": "b"}, CAP, _allow_all, _flat)
    assert {c.jobs[0]: c.worker_type for c in out.combinations} == {"x": "a", "y": "b"}
    # different sizes cannot swap
    mixed = RoundAssignment((Combination(("x",), "b", 2), Combination(("y",), "a", 1)))
    out = keep_types(mixed, {"x": "a", "y": "b"}, {"a": 2, "b": 2}, _allow_all, _flat)
    assert out is mixed


def test_keep_types_respects_allocation_speed_and_pairs() -> None:
    sel = RoundAssignment((Combination(("x",), "b", 1), Combination(("p", "q"), "b", 1)))
    last = {"x": "a", "p": "a", "q": "a"}
    assert keep_types(sel, last, CAP, lambda j, t: t != "a", _flat) is sel  # no time on a
    slower = {("x", "a"): 1.0, ("x", "b"): 2.0}
    assert keep_types(sel, last, CAP, _allow_all, lambda j, t: slower.get((j, t), 1.0)) is sel
    assert keep_types(sel, last, CAP, _allow_all, lambda j, t: slower.get((j, t), 1.0), slack=0.6) is not sel
    out = keep_types(sel, last, CAP, _allow_all, _flat)
    assert [c.worker_type for c in out.combinations] == ["a", "b"]  # the pair stays where it was selected


@settings(max_examples=80, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12))
def test_keep_types_keeps_who_runs_and_capacity(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    cap = {"a": 8, "b": 4, "c": 4}
    left = dict(cap)
    combos = []
    for i in range(n):
        t, g = str(rng.choice(list(cap))), int(rng.choice([1, 2, 4]))
        if left[t] >= g:
            left[t] -= g
            combos.append(Combination((f"j{i}",), t, g))
    sel = RoundAssignment(tuple(combos))
    last = {f"j{i}": str(rng.choice(list(cap))) for i in range(n) if rng.random() < 0.8}
    thr = {(f"j{i}", t): float(rng.uniform(1, 2)) for i in range(n) for t in cap}
    allowed = {(f"j{i}", t): bool(rng.random() < 0.7) for i in range(n) for t in cap}
    out = keep_types(sel, last, cap, lambda j, t: allowed[(j, t)], lambda j, t: thr[(j, t)], 0.1)
    assert sorted(c.jobs for c in out.combinations) == sorted(c.jobs for c in sel.combinations)
    used = out.gpus_used()
    assert all(used.get(t, 0) <= cap[t] for t in cap)
    before = {c.jobs[0]: c.worker_type for c in sel.combinations}
    after = {c.jobs[0]: c.worker_type for c in out.combinations}
    for j, t in after.items():
        if t != before[j]:  # a move only ever goes back to last round's type, allowed and not slower
            assert t == last[j] and allowed[(j, t)] and thr[(j, t)] >= 0.9 * thr[(j, before[j])]
    kept = sum(after[j] == last.get(j) for j in after)
    assert kept >= sum(before[j] == last.get(j) for j in before)


def test_keep_types_refills_the_gpus_a_move_frees() -> None:
    # "big" (8 GPUs) was selected on p100, where "small" (1 GPU, time only on p100) waits; big goes
    # back to v100 (its last type, idle there); without a refill p100 would idle and small starve
    cap = {"v100": 16, "p100": 8}
    sel = RoundAssignment((Combination(("big",), "p100", 8), Combination(("x",), "v100", 1)), pending=("small",))
    last = {"big": "v100", "x": "v100", "small": "p100"}
    allowed = {("big", "v100"), ("big", "p100"), ("x", "v100"), ("small", "p100")}
    thr = {"v100": 2.0, "p100": 1.0}

    def run(scale: dict[str, int] | None) -> RoundAssignment:
        return keep_types(sel, last, cap, lambda j, t: (j, t) in allowed, lambda j, t: thr[t], 0.0, scale)

    plain = run(None)
    assert plain.by_job()["big"].worker_type == "v100" and plain.pending == ("small",)
    out = run({"big": 8, "x": 1, "small": 1})
    assert out.by_job()["big"].worker_type == "v100" and out.pending == ()
    assert out.by_job()["small"] == Combination(("small",), "p100", 1, renewed=True)
    # only freed GPUs are refilled, and only on a type the allocation gives the pending job
    assert run({"big": 8, "x": 1, "small": 16}).pending == ("small",)
    allowed.discard(("small", "p100"))
    assert run({"big": 8, "x": 1, "small": 1}).pending == ("small",)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 12))
def test_keep_types_refill_stays_within_capacity_and_the_allocation(seed: int, n: int) -> None:
    rng = np.random.default_rng(seed)
    cap = {"a": 8, "b": 4, "c": 4}
    left = dict(cap)
    combos, pending, scale = [], [], {}
    for i in range(n):
        t, g = str(rng.choice(list(cap))), int(rng.choice([1, 2, 4]))
        scale[f"j{i}"] = g
        if left[t] >= g and rng.random() < 0.7:
            left[t] -= g
            combos.append(Combination((f"j{i}",), t, g))
        else:
            pending.append(f"j{i}")
    sel = RoundAssignment(tuple(combos), tuple(pending))
    last = {f"j{i}": str(rng.choice(list(cap))) for i in range(n) if rng.random() < 0.8}
    allowed = {(f"j{i}", t): bool(rng.random() < 0.7) for i in range(n) for t in cap}
    out = keep_types(sel, last, cap, lambda j, t: allowed[(j, t)], lambda j, t: 1.0, 0.0, scale)
    used = out.gpus_used()
    assert all(used.get(t, 0) <= cap[t] for t in cap)
    started = {c.jobs[0] for c in out.combinations} - {c.jobs[0] for c in sel.combinations}
    assert started <= set(pending) and not started & set(out.pending)
    assert sorted(started | set(out.pending)) == sorted(pending)
    for c in out.combinations:
        if c.jobs[0] in started:
            assert allowed[(c.jobs[0], c.worker_type)] and c.num_gpus == scale[c.jobs[0]]
    # GPUs taken by started jobs never exceed what the moves freed on that type
    idle_before = {t: cap[t] - sel.gpus_used().get(t, 0) for t in cap}
    idle_moves = {t: cap[t] - sum(c.num_gpus for c in out.combinations
                                  if c.worker_type == t and c.jobs[0] not in started) for t in cap}
    for t in cap:
        took = sum(c.num_gpus for c in out.combinations if c.jobs[0] in started and c.worker_type == t)
        assert took <= max(idle_moves[t] - idle_before[t], 0)


# ----------------------------------------------------------------------------- renewal credit
def _switches(credit: float, rounds: int = 24, xa: float = 0.5) -> tuple[int, np.ndarray]:
    m = RoundMechanism({"a": 1, "b": 1}, renewal_credit=credit)
    m.set_allocation({"j": {"a": xa, "b": 1 - xa}, "k": {"a": 1 - xa, "b": xa}}, (), {"j": 1, "k": 1})
    types = []
    for _ in range(rounds):
        sel = m.schedule_round()
        m.record_round(sel)
        types.append(sel.by_job()["j"].worker_type)
    return sum(x != y for x, y in zip(types, types[1:])), m.realized_fractions()


def test_renewal_credit_switches_less_and_realizes_the_fractions() -> None:
    plain, f0 = _switches(0.0)
    credit, f1 = _switches(360.0)
    assert credit <= plain // 2
    assert np.allclose(f0[:2], 0.5) and np.allclose(f1[:2], 0.5, atol=1.0 / 24)
    with pytest.raises(InputError, match="renewal_credit"):
        RoundMechanism({"a": 1}, renewal_credit=-1.0)


def test_default_renewal_credit_is_half_a_round_with_matching() -> None:
    assert default_renewal_credit(SimConfig()) == 180.0  # 360 s rounds
    assert default_renewal_credit(SimConfig(round_seconds=30.0)) == 20.0  # at least checkpoint + restore
    assert default_renewal_credit(SimConfig(round_seconds=30.0, checkpoint_seconds=5.0, restore_seconds=5.0)) == 15.0
    for rule in ("simple", "tesserae", "none"):
        assert default_renewal_credit(SimConfig(migration=rule)) == 0.0
    # j: 60 % on a, 40 % on b (k the converse): half a round of credit switches about half as often
    # as a credit of what the switch costs, at the same realized fractions (within one round of 24)
    cheap, f0 = _switches(20.0, xa=0.6)
    half, f1 = _switches(180.0, xa=0.6)
    assert half <= cheap * 0.6 and np.allclose(f1[:2], [[0.6, 0.4], [0.4, 0.6]], atol=1.0 / 24)
    assert np.allclose(f0[:2], f1[:2], atol=1.0 / 24)


def test_renewal_credit_survives_state_round_trip() -> None:
    m = RoundMechanism({"a": 1, "b": 1}, renewal_credit=120.0)
    m.set_allocation({"j": {"a": 0.5, "b": 0.5}}, (), {"j": 1})
    m.record_round(m.schedule_round())
    back = RoundMechanism.from_state(m.to_state())
    assert back.renewal_credit == 120.0
    assert back.schedule_round() == m.schedule_round()


# ----------------------------------------------------------------------------- simulator
def test_simulator_reports_sources_and_realized_over_planned(gavel) -> None:
    trace = [t for t in shockwave_trace(gavel, 30, rate_per_hour=40.0, seed=1)]
    trace = [type(t)(**{**t.__dict__, "steps": t.steps / 10}) for t in trace]
    runs = {}
    for rule in ("matching", "tesserae", "simple"):
        res = simulate(trace, "v100=8,p100=4,k80=4", table=gavel, policy="max_min_fairness", seed=1,
                       migration=rule, space_sharing=True)
        m = res.metrics
        assert set(m["migration_sources"]) == set(MIGRATION_SOURCES)
        assert sum(m["migration_sources"].values()) == m["migrations"]
        rp = m["realized_over_planned"]
        assert rp["jobs"] > 0 and 0 < rp["worst"] <= rp["p10"] <= rp["mean"]
        held = res.jobs["held_seconds"].to_numpy()
        assert np.all(held <= res.jobs["jct"].to_numpy() + 1e-6)
        runs[rule] = m
    assert runs["simple"]["migration_sources"]["relabeling"] >= 0
    with pytest.raises(InputError, match="keep_types"):
        SimConfig(keep_types="yes")  # type: ignore[arg-type]
    with pytest.raises(InputError, match="renewal_credit"):
        SimConfig(renewal_credit=-5.0)


def test_cli_rejects_multi_gpu_with_shockwave(tmp_path) -> None:
    from policyopt.sim.cli import add_subparser

    parser = argparse.ArgumentParser()
    add_subparser(parser.add_subparsers())
    args = parser.parse_args(["simulate", "--policy", "max_min_fairness", "--cluster", "v100=8",
                              "--generator", "shockwave", "--jobs", "5", "--multi-gpu", "--seed", "0",
                              "--output", str(tmp_path)])
    with pytest.raises(InputError, match="--multi-gpu"):
        args.func(args)
