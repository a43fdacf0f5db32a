"""Tests for Tesserae-style packing by maximum-weight bipartite matching."""
from __future__ import annotations

import itertools
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt.errors import InputError
from policyopt.mechanism import Combination, RoundAssignment
from policyopt.placement import JobInfo, MatchingPacker, PairThroughputTable, PlanChoice, match_pairs

GAVEL = Path(__file__).resolve().parents[1].parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def brute_force_matching(a: np.ndarray, b: np.ndarray) -> float:
    """Best total weight over all matchings (edges: both > 0 and sum > 1)."""
    w = a + b
    edge = (a > 0) & (b > 0) & (w > 1)
    n, m = w.shape
    best = 0.0
    for k in range(0, min(n, m) + 1):
        for rows in itertools.combinations(range(n), k):
            for cols in itertools.permutations(range(m), k):
                if all(edge[r, c] for r, c in zip(rows, cols)):
                    best = max(best, float(sum(w[r, c] for r, c in zip(rows, cols))))
    return best


def test_match_pairs_beats_greedy_and_handles_no_edges() -> None:
    a = np.array([[0.95, 0.9], [0.85, 0.2]])
    b = np.array([[0.95, 0.9], [0.85, 0.2]])  # (1, 1) sums to 0.4 <= 1: no edge
    rows, cols = match_pairs(a, b)
    # greedy would take (0, 0) = 1.9 and leave row 1 unmatched; optimum is 1.8 + 1.7 = 3.5
    assert sorted(zip(rows.tolist(), cols.tolist())) == [(0, 1), (1, 0)]
    r, c = match_pairs(np.zeros((3, 4)), np.ones((3, 4)))  # zero throughput: does not fit
    assert r.size == 0 and c.size == 0
    r, c = match_pairs(np.full((2, 2), 0.5), np.full((2, 2), 0.5))  # sum == 1 is not > 1
    assert r.size == 0


@settings(max_examples=60, deadline=None, derandomize=True)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 4), m=st.integers(1, 4))
def test_match_pairs_is_maximum_weight(seed: int, n: int, m: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.uniform(0, 1, (n, m)) * (rng.random((n, m)) < 0.8)
    b = rng.uniform(0, 1, (n, m))
    rows, cols = match_pairs(a, b)
    assert len(set(rows.tolist())) == rows.size and len(set(cols.tolist())) == cols.size
    assert np.all(a[rows, cols] > 0) and np.all(b[rows, cols] > 0) and np.all(a[rows, cols] + b[rows, cols] > 1)
    assert float((a + b)[rows, cols].sum()) == pytest.approx(brute_force_matching(a, b))


def small_table() -> PairThroughputTable:
    alone = {"v100": {"m1": 10.0, "m2": 4.0, "m3": 8.0}}
    packed = {"v100": {("m1", "m2"): (8.0, 2.0), ("m1", "m1"): (6.0, 6.0), ("m1", "m3"): (9.0, 0.0),
                       ("m2", "m3"): (3.0, 6.0)}}
    return PairThroughputTable({"p": "m1", "q": "m2", "r": "m3", "s": "m1", "t": "m2"}, alone, packed)


def test_table_normalization_and_symmetric_fill() -> None:
    tab = small_table()
    a, b = tab.normalized(["p", "q"], ["t", "r", "s"], "v100")
    assert a[0].tolist() == pytest.approx([0.8, 0.9, 0.6])
    assert b[0].tolist() == pytest.approx([0.5, 0.0, 0.6])
    assert a[1].tolist() == pytest.approx([0.0, 0.75, 0.5])  # (m2, m1) filled from (m1, m2)
    assert b[1].tolist() == pytest.approx([0.0, 0.75, 0.8])


def test_packer_pairs_same_size_and_respects_no_packing() -> None:
    jobs = {
        "p": JobInfo("p", 1), "q": JobInfo("q", 1), "r": JobInfo("r", 1),
        "s": JobInfo("s", 2), "t": JobInfo("t", 1, high_priority=True),
    }
    tab = PairThroughputTable({"p": "m1", "q": "m2", "r": "m3", "s": "m1", "t": "m2"},
                              {"v100": {"m1": 10.0, "m2": 4.0, "m3": 8.0}},
                              {"v100": {("m1", "m2"): (8.0, 2.0), ("m1", "m1"): (6.0, 6.0),
                                        ("m2", "m3"): (3.0, 6.0)}})
    sel = RoundAssignment((Combination(("p",), "v100", 1),), pending=("t", "s", "q", "r"))
    out = MatchingPacker(tab).pack(sel, jobs)
    # t is high priority (no edges), s needs 2 GPUs, r does not fit with p: q (0.8 + 0.5 = 1.3) wins
    assert [c.jobs for c in out.combinations] == [("p", "q")]
    assert out.pending == ("t", "s", "r")
    hp = MatchingPacker(tab).pack(RoundAssignment((Combination(("t",), "v100", 1),), pending=("p", "q")),
                                  {**jobs, "t": JobInfo("t", 1, deadline=100.0)})
    assert [c.jobs for c in hp.combinations] == [("t",)]


def test_best_plan_callback_sets_weights() -> None:
    jobs = {j: JobInfo(j, 1) for j in "pqr"}
    calls: list[tuple[str, str, str]] = []

    def best(placed: str, pending: str, wt: str) -> PlanChoice | None:
        calls.append((placed, pending, wt))
        return PlanChoice(0.7, 0.6, plan=f"tp2-{pending}") if pending == "r" else None

    packer = MatchingPacker(small_table(), best_plan=best)
    out = packer.pack(RoundAssignment((Combination(("p",), "v100", 1),), pending=("q", "r")), jobs)
    assert [c.jobs for c in out.combinations] == [("p", "r")]  # table says p+r cannot pack; plan says it can
    assert packer.last_plans == {("p", "r"): "tp2-r"} and len(calls) == 2


def test_gavel_table_matches_raw_data() -> None:
    if not GAVEL.exists():
        pytest.skip(f"Gavel throughput data missing: expected {GAVEL}")
    raw = json.loads(GAVEL.read_text())
    a, b = "('ResNet-18 (batch size 16)', 1)", "('ResNet-50 (batch size 16)', 1)"
    tab = PairThroughputTable.from_gavel(raw, {"x": a, "y": b})
    na, nb = tab.normalized(["x"], ["y"], "v100")
    ta, tb = raw["v100"][a][b]
    assert na[0, 0] == pytest.approx(ta / raw["v100"][a]["null"])
    assert nb[0, 0] == pytest.approx(tb / raw["v100"][b]["null"])


def test_keep_bonus_renews_last_rounds_pair_only_among_valid_edges() -> None:
    # p (m1) placed; q (m2: 0.8 + 0.5 = 1.3) and s (m1: 0.6 + 0.6 = 1.2) pending; r (m3) does not fit with p
    jobs = {j: JobInfo(j, 1) for j in "pqrs"}
    sel = RoundAssignment((Combination(("p",), "v100", 1),), pending=("q", "s", "r"))
    packer = MatchingPacker(small_table(), keep_bonus=0.5)
    packer.last_partner = {"p": "s", "s": "p"}
    assert [c.jobs for c in packer.pack(sel, jobs).combinations] == [("p", "s")]  # 1.2 + 0.5 > 1.3
    assert packer.last_partner == {"p": "s", "s": "p"}
    plain = MatchingPacker(small_table())
    plain.last_partner = {"p": "s", "s": "p"}
    assert [c.jobs for c in plain.pack(sel, jobs).combinations] == [("p", "q")]  # no bonus: throughput decides
    small = MatchingPacker(small_table(), keep_bonus=0.05)
    small.last_partner = {"p": "s", "s": "p"}
    assert [c.jobs for c in small.pack(sel, jobs).combinations] == [("p", "q")]  # 1.25 < 1.3
    # the bonus never creates an edge: r does not fit next to p
    packer.last_partner = {"p": "r", "r": "p"}
    assert [c.jobs for c in packer.pack(sel, jobs).combinations] == [("p", "q")]
    # the host may be last round's guest (placed and pending swap roles)
    packer.last_partner = {"s": "p", "p": "s"}
    swapped = RoundAssignment((Combination(("s",), "v100", 1),), pending=("q", "p"))
    assert [c.jobs for c in packer.pack(swapped, jobs).combinations] == [("s", "p")]
    for bad in (-1.0, float("nan"), "1", True):
        with pytest.raises(InputError, match="keep_bonus"):
            MatchingPacker(small_table(), keep_bonus=bad)  # type: ignore[arg-type]
