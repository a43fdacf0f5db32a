"""Tests for the Gavel-style round mechanism (policyopt.mechanism)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt.errors import InputError, UnknownNameError
from policyopt.mechanism import (
    RecomputeClock,
    RoundMechanism,
    format_tracking_table,
    recompute_due,
    track_allocation,
)

# ----------------------------------------------------------------------------- generators


def saturating_allocation(rng: np.random.Generator, n: int, counts: dict[str, int]) -> dict[str, dict[str, float]]:
    """Single-GPU jobs; X with column sums = worker counts and equal row sums <= 1 (IPF)."""
    types = list(counts)
    cap = np.array([counts[t] for t in types], dtype=float)
    w = rng.random((n, len(types))) + 0.05
    row = min(1.0, cap.sum() / n)
    for _ in range(2000):
        w *= (row / w.sum(axis=1))[:, None]
        w *= (cap / w.sum(axis=0))[None, :]
    w *= 1 - 1e-9  # stay inside the tolerance of the sum checks
    return {f"j{i}": {t: float(w[i, c]) for c, t in enumerate(types)} for i in range(n)}


def mixture_allocation(
    rng: np.random.Generator, n: int, counts: dict[str, int], configs: int, pair_tries: int
) -> tuple[dict[str, dict[str, float]], list[dict[str, Any]], dict[str, int]]:
    """A realizable allocation: the average of ``configs`` random feasible rounds (jobs of 1, 2, 4
    GPUs and pairs of equal size), so some round schedule achieves it exactly."""
    types = list(counts)
    sf = {f"j{i}": int(rng.choice([1, 1, 2, 4])) for i in range(n)}
    jobs = list(sf)
    pairs: set[tuple[str, str]] = set()
    for _ in range(pair_tries):
        a, b = sorted(rng.choice(jobs, size=2, replace=False).tolist())
        if sf[a] == sf[b]:
            pairs.add((a, b))
    combos: list[tuple[str, ...]] = [(j,) for j in jobs] + sorted(pairs)
    x: dict[tuple[tuple[str, ...], str], float] = {}
    for _ in range(configs):
        left, busy = dict(counts), set()
        for k in rng.permutation(len(combos)).tolist():
            comb, t = combos[k], types[int(rng.integers(len(types)))]
            if busy & set(comb) or left[t] < sf[comb[0]]:
                continue
            left[t] -= sf[comb[0]]
            busy |= set(comb)
            x[(comb, t)] = x.get((comb, t), 0.0) + 1.0 / configs
    alloc: dict[str, dict[str, float]] = {j: {} for j in jobs}
    col: list[dict[str, Any]] = []
    for (comb, t), f in x.items():
        if len(comb) == 1:
            alloc[comb[0]][t] = f
        else:
            col.append({"jobs": list(comb), "worker_type": t, "fraction": f})
    return alloc, col, sf


# ----------------------------------------------------------------------------- validation


def test_invalid_allocations_raise_with_field() -> None:
    mech = RoundMechanism({"v100": 2, "k80": 1})
    with pytest.raises(InputError) as e:
        mech.set_allocation({"a": {"v100": 1.5}}, [], {"a": 1})
    assert e.value.field == "allocation.a.v100"
    with pytest.raises(InputError, match="sum to more than 1"):
        mech.set_allocation({"a": {"v100": 0.7, "k80": 0.7}}, [], {"a": 1})
    with pytest.raises(InputError, match="exceeds the 1 workers"):
        mech.set_allocation({"a": {"k80": 1.0}, "b": {"k80": 0.5}}, [], {"a": 1, "b": 1})
    with pytest.raises(UnknownNameError):
        mech.set_allocation({"a": {"p100": 0.5}}, [], {"a": 1})
    with pytest.raises(InputError, match="missing scale factor"):
        RoundMechanism({"v100": 2}).set_allocation({"a": {"v100": 0.5}}, [], {})
    with pytest.raises(InputError, match="different scale factors"):
        mech.set_allocation({"a": {}, "b": {}}, [{"jobs": ["a", "b"], "worker_type": "v100", "fraction": 0.5}],
                            {"a": 1, "b": 2})
    with pytest.raises(InputError, match="twice"):
        pair = {"jobs": ["a", "b"], "worker_type": "v100", "fraction": 0.2}
        mech.set_allocation({"a": {}, "b": {}}, [pair, dict(pair)], {"a": 1, "b": 1})
    with pytest.raises(InputError, match="set_allocation first"):
        RoundMechanism({"v100": 1}).schedule_round()
    with pytest.raises(InputError):
        RoundMechanism({"v100": -1})


# ----------------------------------------------------------------------------- invariants


@settings(max_examples=100, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 14), c1=st.integers(1, 6), c2=st.integers(0, 5),
       work_conserving=st.booleans())
def test_round_invariants(seed: int, n: int, c1: int, c2: int, work_conserving: bool) -> None:
    """Per round: a job runs at most once, a type never over-subscribed, every combination gets
    exactly its scale factor, X = 0 entries never run, only declared pairs share workers."""
    rng = np.random.default_rng(seed)
    counts = {"v100": c1, "k80": c2}
    alloc, col, sf = mixture_allocation(rng, n, counts, configs=int(rng.integers(1, 6)), pair_tries=n)
    mech = RoundMechanism(counts, work_conserving=work_conserving)
    mech.set_allocation(alloc, col, sf)
    x = mech.arrays.x
    index = {c: k for k, c in enumerate(mech.arrays.combos)}
    for _ in range(25):
        a = mech.schedule_round()
        seen: list[str] = [j for comb in a.combinations for j in comb.jobs]
        assert len(seen) == len(set(seen))
        for t, used in a.gpus_used().items():
            assert used <= counts[t]
        for comb in a.combinations:
            assert comb.num_gpus == sf[comb.jobs[0]]
            assert all(sf[j] == comb.num_gpus for j in comb.jobs)
            k = index[tuple(sorted(comb.jobs))]  # KeyError = an undeclared pair
            assert x[k, mech.worker_types.index(comb.worker_type)] > 0
        assert not set(a.pending) & set(seen)
        mech.record_round(a)


# ----------------------------------------------------------------------------- tracking


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_realized_fractions_converge_single_gpu(seed: int) -> None:
    rng = np.random.default_rng(seed)
    counts = {"v100": 3, "p100": 2, "k80": 4}
    alloc = saturating_allocation(rng, 14, counts)
    rows = track_allocation(alloc, [], {j: 1 for j in alloc}, counts, 200, checkpoints=[10, 200])
    assert rows[0].max_abs_error > rows[1].max_abs_error
    assert rows[1].max_abs_error < 0.02


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_realized_fractions_converge_multi_gpu_and_pairs(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    counts = {"v100": 8, "p100": 4, "k80": 2}
    alloc, col, sf = mixture_allocation(rng, 16, counts, configs=7, pair_tries=8)
    assert col, "the scenario should contain pairs"
    rows = track_allocation(alloc, col, sf, counts, 400, checkpoints=[400], work_conserving=False)
    assert rows[-1].max_abs_error < 0.02


def test_non_work_conserving_never_overshoots_by_more_than_half_a_round() -> None:
    counts = {"v100": 4}
    alloc = {"a": {"v100": 0.3}, "b": {"v100": 0.25}, "c": {"v100": 0.1}}
    mech = RoundMechanism(counts, work_conserving=False)
    mech.set_allocation(alloc, [], {"a": 1, "b": 1, "c": 1})
    for _ in range(100):
        mech.record_round(mech.schedule_round())
        over = mech.received - mech.arrays.x * mech.elapsed
        assert over.max() <= 0.5 * mech.round_length + 1e-9
    assert np.abs(mech.realized_fractions() - mech.arrays.x).max() < 0.01
    # work conserving: the idle workers go to the jobs anyway (all run every round)
    wc = track_allocation(alloc, [], {"a": 1, "b": 1, "c": 1}, counts, 50, checkpoints=[50])
    assert wc[0].max_abs_error == pytest.approx(0.9)


def test_tracking_table_format() -> None:
    rows = track_allocation({"a": {"v100": 0.5}, "b": {"v100": 0.5}}, [], {"a": 1, "b": 1}, {"v100": 1}, 8)
    assert [r.rounds for r in rows] == [1, 2, 4, 8]
    assert rows[-1].max_abs_error == pytest.approx(0.0)
    table = format_tracking_table(rows)
    assert table.splitlines()[0].split()[0] == "rounds" and len(table.splitlines()) == 5


# ----------------------------------------------------------------------------- deficits, renewal


def _two_jobs_one_worker(cap: float | None) -> RoundMechanism:
    mech = RoundMechanism({"v100": 1}, deficit_cap=cap)
    mech.set_allocation({"a": {"v100": 0.5}, "b": {"v100": 0.5}}, [], {"a": 1, "b": 1})
    first = mech.schedule_round()
    assert [c.jobs for c in first.combinations] == [("a",)]  # tie -> index order
    mech.record_round(first)
    mech.set_allocation({"a": {"v100": 0.5}, "b": {"v100": 0.5}}, [])  # reset
    return mech


def test_deficit_carried_across_reset() -> None:
    mech = _two_jobs_one_worker(None)
    assert mech.deficits[:, 0].tolist() == pytest.approx([-180.0, 180.0])
    assert [c.jobs for c in mech.schedule_round().combinations] == [("b",)]
    # with no carry, the reset forgets that b was short-changed
    mech0 = _two_jobs_one_worker(0.0)
    assert [c.jobs for c in mech0.schedule_round().combinations] == [("a",)]


def test_deficit_dropped_where_new_allocation_gives_no_time() -> None:
    mech = RoundMechanism({"v100": 1, "k80": 1})
    mech.set_allocation({"a": {"v100": 1.0}, "b": {"k80": 0.5}}, [], {"a": 1, "b": 1})
    mech.record_round(mech.schedule_round())
    mech.set_allocation({"a": {"k80": 0.5}, "b": {"v100": 0.5}}, [])
    assert np.all(mech.deficits[mech.arrays.x <= 0] == 0)


def test_lease_renewal_flag_and_remove_jobs() -> None:
    mech = RoundMechanism({"v100": 2})
    mech.set_allocation({"a": {"v100": 1.0}, "b": {"v100": 1.0}}, [], {"a": 1, "b": 1})
    r1 = mech.schedule_round()
    assert not any(c.renewed for c in r1.combinations)
    mech.record_round(r1)
    r2 = mech.schedule_round()
    assert all(c.renewed for c in r2.combinations) and len(r2.combinations) == 2
    mech.record_round(r2)
    mech.remove_jobs(["a"])
    assert mech.schedule_round().running_jobs() == {"b"}
    with pytest.raises(UnknownNameError):
        mech.remove_jobs(["zz"])


def test_record_round_durations_and_unknown_combination() -> None:
    mech = RoundMechanism({"v100": 2}, round_length=100.0)
    mech.set_allocation({"a": {"v100": 0.25}, "b": {"v100": 0.25}},
                        [{"jobs": ["a", "b"], "worker_type": "v100", "fraction": 0.5}], {"a": 2, "b": 2})
    a = mech.schedule_round()
    assert [c.jobs for c in a.combinations] == [("a", "b")]
    mech.record_round(a, durations={j: 40.0 for j in a.running_jobs()})
    assert mech.received.sum() == pytest.approx(40.0) and mech.elapsed == pytest.approx(100.0)
    with pytest.raises(InputError, match="length"):
        mech.record_round(a, durations={j: 400.0 for j in a.running_jobs()})
    # a round cut short: T advances by its length, and no job can have run longer
    mech.record_round(a, durations={j: 20.0 for j in a.running_jobs()}, length=30.0)
    assert mech.received.sum() == pytest.approx(60.0) and mech.elapsed == pytest.approx(130.0)
    with pytest.raises(InputError, match="length"):
        mech.record_round(a, durations={j: 40.0 for j in a.running_jobs()}, length=30.0)
    for bad in (0.0, -1.0, 101.0, float("nan")):
        with pytest.raises(InputError, match="length"):
            mech.record_round(a, length=bad)
    assert mech.elapsed == pytest.approx(130.0)
    with pytest.raises(InputError, match="no duration"):
        mech.record_round(a, durations={})
    from policyopt.mechanism import Combination, RoundAssignment

    with pytest.raises(UnknownNameError):
        mech.record_round(RoundAssignment((Combination(("a", "zz"), "v100", 2),)))


def test_pending_ordered_by_priority() -> None:
    mech = RoundMechanism({"v100": 1})
    mech.set_allocation({"a": {"v100": 0.2}, "b": {"v100": 0.5}, "c": {"v100": 0.3}}, [], {"a": 1, "b": 1, "c": 1})
    a = mech.schedule_round()  # all never ran: ordered by X
    assert [c.jobs for c in a.combinations] == [("b",)] and a.pending == ("c", "a")


# ----------------------------------------------------------------------------- recompute


def test_recompute_due_function() -> None:
    assert not recompute_due([], 0.0, 1000.0, 360.0)
    assert not recompute_due([10.0], 0.0, 100.0, 360.0)
    assert recompute_due([10.0], 0.0, 400.0, 360.0)
    assert recompute_due([10.0], None, 11.0, 360.0)
    assert not recompute_due([10.0], 20.0, 1000.0, 360.0)  # event before the last recompute
    with pytest.raises(InputError):
        recompute_due([1.0], 0.0, 2.0, -1.0)


def test_recompute_clock() -> None:
    clock = RecomputeClock(min_interval=360.0)
    assert not clock.due(0.0)
    clock.note("arrival", 5.0, "j1")
    assert clock.due(5.0)
    assert [e.subject for e in clock.mark_recomputed(5.0)] == ["j1"]
    clock.note("completion", 100.0, "j1")
    clock.note("worker_failure", 200.0, "v100-3")
    assert not clock.due(300.0) and clock.due(365.0)
    assert len(clock.mark_recomputed(365.0)) == 2 and not clock.due(10_000.0)
    with pytest.raises(UnknownNameError):
        clock.note("reboot", 400.0)
    with pytest.raises(InputError):
        clock.note("arrival", 1.0)


# ----------------------------------------------------------------------------- CLI


def test_cli_track(tmp_path: Any, capsys: Any) -> None:
    import argparse
    import json

    from policyopt.mechanism.cli import add_subparser

    path = tmp_path / "alloc.json"
    path.write_text(json.dumps({"allocation": {"a": {"v100": 0.5}, "b": {"v100": 0.5}},
                                "scale_factors": {"a": 1, "b": 1}, "worker_counts": {"v100": 1}}))
    parser = argparse.ArgumentParser()
    add_subparser(parser.add_subparsers())
    args = parser.parse_args(["track-allocation", str(path), "--rounds", "4"])
    assert args.func(args) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and lines[-1].split()[0] == "4" and float(lines[-1].split()[2]) == 0.0
    path.write_text("{}")
    with pytest.raises(InputError, match="missing"):
        args.func(args)


def test_state_round_trip_schedules_identically() -> None:
    """to_state/from_state: the restored mechanism picks the same rounds as the original."""
    from policyopt.mechanism import RoundMechanism

    alloc = {"a": {"v100": 0.5, "k80": 0.5}, "b": {"v100": 0.5}, "c": {"k80": 0.5}, "d": {"v100": 0.25}}
    m = RoundMechanism({"v100": 2, "k80": 1}, round_length=60.0, scale_factors=dict.fromkeys(alloc, 1))
    m.set_allocation(alloc)
    for _ in range(3):
        m.record_round(m.schedule_round())
    r = RoundMechanism.from_state(m.to_state())
    for _ in range(20):
        a1, a2 = m.schedule_round(), r.schedule_round()
        assert a1 == a2
        m.record_round(a1)
        r.record_round(a2)
