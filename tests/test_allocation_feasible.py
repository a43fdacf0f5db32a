"""Every allocation a policy returns meets its time and capacity rows to 1e-9 (issue 17, point 4),
also where the whole LP was solved by HiGHS, whose point meets its rows only to its primal
tolerance (1e-7): :meth:`AllocationSpace.make_feasible`, called on every result
(``Policy._package``), repairs such a point by :meth:`AllocationSpace.project` and says so in
``extra["feasibility_repair"]``; a point already within 1e-9 is returned bit-identical."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt import Cluster, Entity, Job, Problem, get_policy
from policyopt.allocation import FEASIBILITY_TOL, AllocationSpace
from policyopt.errors import InputError
from policyopt.policy import list_policies

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fast_route_checks import make_problem, with_pairs  # noqa: E402

REL = 1e-7
#: options a policy needs besides the problem
OPTIONS: dict[str, dict[str, Any]] = {"makespan_under_budget": {"budget": 50.0}}


def _excess(space: AllocationSpace, X: np.ndarray) -> tuple[float, float]:
    """Largest excess of a time row over 1 and of a capacity row over its count (relative to max(1, count))."""
    x = np.asarray(X).ravel()
    t = space.membership_matrix() @ x
    cap = space.capacity_matrix() @ x
    return float(t.max()) - 1.0, float(np.max((cap - space.counts) / np.maximum(1.0, space.counts)))


def _sharing_case() -> Problem:
    """Max-min fairness with space sharing, 40 jobs of 5 kinds on one type, pairs of every kind: a cold
    HiGHS simplex solve of its LP exceeds a job's time row by ~2e-8."""
    p0 = make_problem(24, 40, 1, 5, zeros=0.3, scales=(1, 2), weighted=True, gps=4)
    return with_pairs(p0, 24, 1.0)


def _no_repair(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(AllocationSpace, "make_feasible", lambda self, X, tol=FEASIBILITY_TOL: (X, None))


# ------------------------------------------------------------------------------ the generic path
def test_whole_lp_by_highs_is_repaired_to_1e9(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cold simplex solve's own point exceeds a row by more than 1e-9 (read with the repair off);
    the returned allocation meets every row to 1e-9, the repair is reported, it moved ``X`` by about
    HiGHS's tolerance, and the reported objective (the solver's) is the repaired allocation's to 1e-7."""
    opts = {"space_sharing": True, "pair_top_k": 8, "algorithm": "simplex"}
    p = _sharing_case()
    res = get_policy("max_min_fairness", **opts).solve(p)
    assert res.ok
    rep = res.extra.get("feasibility_repair")
    assert rep is not None, "no repair reported"
    sp = res.space
    assert sp.check(np.asarray(res.X), tol=FEASIBILITY_TOL) == []
    te, ce = _excess(sp, res.X)
    assert te <= FEASIBILITY_TOL and ce <= FEASIBILITY_TOL
    assert max(rep["time_excess"], rep["capacity_excess"]) > FEASIBILITY_TOL
    assert 0 < rep["max_change"] <= 1e-6
    # the objective (the solver's t*) against the repaired allocation's smallest normalized level
    pol = get_policy("max_min_fairness", **opts)
    T, Tp = pol.data(sp)
    lev = pol.normalizer(sp) * sp.throughput_values(np.asarray(res.X), T, Tp)
    assert abs(lev.min() - res.objective) <= REL * abs(res.objective)
    # the same solve without the repair: the point HiGHS returned exceeds a row beyond 1e-9
    with monkeypatch.context() as m:
        _no_repair(m)
        raw = get_policy("max_min_fairness", **opts).solve(p)
    te_raw, ce_raw = _excess(sp, raw.X)
    assert max(te_raw, ce_raw) > FEASIBILITY_TOL
    assert (te_raw, ce_raw) == pytest.approx((rep["time_excess"], rep["capacity_excess"]), abs=1e-15)
    assert raw.objective == res.objective


@pytest.mark.parametrize("name, opts, make", [
    ("max_sum_throughput", {}, lambda: make_problem(3, 30, 3, 30)),
    ("max_min_fairness", {}, lambda: make_problem(4, 30, 3, 6)),
    ("max_min_fairness", {"algorithm": "simplex"}, lambda: make_problem(5, 20, 2, 20)),
    ("max_sum_throughput", {"space_sharing": True}, lambda: with_pairs(make_problem(6, 20, 2, 4), 6)),
    ("finish_time_fairness", {}, lambda: make_problem(7, 16, 3, 16)),
])
def test_normal_path_is_bit_identical(monkeypatch: pytest.MonkeyPatch, name: str, opts: dict[str, Any],
                                      make: Any) -> None:
    """Where no row is exceeded beyond 1e-9, the answer is the same bits with and without the check."""
    p = make()
    res = get_policy(name, **opts).solve(p)
    assert "feasibility_repair" not in res.extra
    with monkeypatch.context() as m:
        _no_repair(m)
        raw = get_policy(name, **opts).solve(p)
    assert np.asarray(res.X).tobytes() == np.asarray(raw.X).tobytes()
    assert res.objective == raw.objective


# ------------------------------------------------------------------------------ make_feasible itself
def _space(sharing: bool = False) -> AllocationSpace:
    p = make_problem(11, 12, 2, 3, zeros=0.0, scales=(1, 2))
    if sharing:
        p = with_pairs(p, 11, 1.0)
    return AllocationSpace(p, space_sharing=sharing)


def _feasible(sp: AllocationSpace) -> np.ndarray:
    X = sp.full_from_single(sp.isolated_allocation())
    return np.where(sp.mask, X, 0.0)


def test_within_tolerance_returns_the_same_array() -> None:
    sp = _space()
    X = np.zeros(sp.mask.shape)
    cfgs = np.flatnonzero(sp.mask[0])
    assert cfgs.size >= 2
    X[0, cfgs] = (1 + 0.5 * FEASIBILITY_TOL) / cfgs.size  # job 0's time row within the tolerance above 1
    assert 0 < _excess(sp, X)[0] <= FEASIBILITY_TOL
    Y, rep = sp.make_feasible(X)
    assert Y is X and rep is None


def test_time_row_exceeded_is_scaled_into_place() -> None:
    sp = _space()
    X = _feasible(sp)
    X[1] *= (1 + 1e-8) / X[1].sum()
    before = X.copy()
    Y, rep = sp.make_feasible(X)
    assert rep is not None and rep["time_excess"] == pytest.approx(1e-8, rel=1e-6)
    assert np.array_equal(X, before), "the input was changed"
    assert sp.check(Y, tol=0.0) == [] or max(_excess(sp, Y)) <= 1e-15
    assert np.all(Y <= X) and rep["max_change"] == pytest.approx(np.max(X - Y))


def test_capacity_row_exceeded_is_scaled_into_place() -> None:
    sp = _space()
    X = np.zeros(sp.mask.shape)
    c = int(np.flatnonzero(sp.mask.any(axis=0))[0])
    t = int(sp.config_type[c])
    rows = np.flatnonzero(sp.mask[:, c])
    # every job that can use c gets the same share, summing to count_t·(1 + 1e-8) workers
    X[rows, c] = min(1.0, sp.counts[t] * (1 + 1e-8) / sp.row_scale[rows].sum())
    _, ce = _excess(sp, X)
    assert ce > FEASIBILITY_TOL, "the case does not exceed its capacity (more workers than jobs can use)"
    Y, rep = sp.make_feasible(X)
    assert rep is not None and rep["capacity_excess"] == pytest.approx(ce)
    assert max(_excess(sp, Y)) <= 1e-15


def test_pair_rows_count_for_both_jobs() -> None:
    sp = _space(sharing=True)
    assert sp.num_pairs
    X = np.zeros(sp.mask.shape)
    k = 0
    a, b = sp.pair_jobs[k]
    c = int(np.flatnonzero(sp.pair_mask[k])[0])
    ca = int(np.flatnonzero(sp.mask[a])[0])
    X[len(sp.jobs) + k, c] = 0.5
    X[a, ca] = 0.5 + 2e-9  # job a: 0.5 alone + 0.5 in the pair
    Y, rep = sp.make_feasible(X)
    assert rep is not None and rep["time_excess"] == pytest.approx(2e-9, rel=1e-3)
    assert max(_excess(sp, Y)) <= 1e-15
    assert Y[b].sum() == 0.0


def test_spaces_with_their_own_rows_are_left_alone() -> None:
    """A subclass that adds rows (e.g. ``≥`` guarantees) is not repaired by scaling down."""

    class Guaranteed(AllocationSpace):
        def add_allocation(self, model: Any, name: str = "X") -> Any:
            return super().add_allocation(model, name)

    p = make_problem(11, 12, 2, 3, zeros=0.0, scales=(1, 2))
    sp = Guaranteed(p)
    assert not sp.rows_repairable() and _space().rows_repairable()
    X = _feasible(sp)
    X[1] *= (1 + 1e-8) / X[1].sum()
    Y, rep = sp.make_feasible(X)
    assert Y is X and rep is None


# ------------------------------------------------------------------------------ every policy
def _policies() -> list[str]:
    """Every registered policy over the base allocation space (the extensions' own problem kinds,
    e.g. reconfigurable jobs, are not posed here)."""
    return sorted(d["name"] for d in list_policies())


def _problem(seed: int, n: int, K: int, sharing: bool) -> Problem:
    rng = np.random.default_rng(seed)
    names = [f"w{k}" for k in range(K)]
    cluster = Cluster.from_counts({w: int(rng.integers(2, 6)) for w in names}, gpus_per_server=2,
                                  prices={w: float(rng.uniform(0.5, 3.0)) for w in names})
    jobs = []
    for i in range(n):
        thr = {w: float(rng.uniform(0.1, 10.0)) for w in names if rng.random() < 0.8} or {names[0]: 1.0}
        jobs.append(Job(f"j{i}", thr, scale_factor=int(rng.choice([1, 1, 2])), weight=float(rng.choice([1.0, 2.0])),
                        steps_remaining=float(rng.uniform(1e3, 1e5)), time_since_start=float(rng.uniform(0, 1e4)),
                        entity=f"e{i % 2}", slo_seconds=float(rng.uniform(1e4, 1e6))))
    ents = {"e0": Entity("e0", 1.0, "fifo"), "e1": Entity("e1", 2.0, "fairness")}
    if not sharing:
        return Problem(cluster, tuple(jobs), entities=ents)
    q = with_pairs(Problem(cluster, tuple(jobs)), seed, 0.5)
    return Problem(cluster, q.jobs, colocated_types=q.colocated_types, entities=ents)


@settings(max_examples=10)
@given(seed=st.integers(0, 2**31 - 1), n=st.integers(1, 10), K=st.integers(1, 3), sharing=st.booleans())
def test_every_policy_meets_its_rows_to_1e9(seed: int, n: int, K: int, sharing: bool) -> None:
    p = _problem(seed, n, K, sharing)
    solved = 0
    for name in _policies():
        try:
            pol = get_policy(name, space_sharing=sharing, **OPTIONS.get(name, {}))
            res = pol.solve(p)
        except (InputError, NotImplementedError):  # (a policy that needs other inputs or refuses sharing)
            continue
        if res.X is None or not isinstance(res.space, AllocationSpace):
            continue
        solved += 1
        X = np.asarray(res.X)
        assert res.space.check(X, tol=FEASIBILITY_TOL) == [], f"{name}: {res.space.check(X, tol=FEASIBILITY_TOL)}"
    assert solved >= 20  # (of 24: the reconfiguration policies need their own problems; one refuses sharing)


def test_certified_transport_routes_skip_the_check_and_still_meet_the_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """Max-sum throughput's certified routes (the arrays route, the class LP, the class basis's
    re-solve) hand their answers over as certified: make_feasible is not called for them, and their
    allocations still meet every time and capacity row to 1e-9; a whole-LP answer is still checked."""
    calls: list[int] = []
    real = AllocationSpace.make_feasible

    def counting(self: AllocationSpace, X: np.ndarray, tol: float = FEASIBILITY_TOL) -> Any:
        calls.append(1)
        return real(self, X, tol)

    monkeypatch.setattr(AllocationSpace, "make_feasible", counting)
    small = make_problem(3, 40, 3, 40)  # every job its own kind: the arrays route
    many = make_problem(4, 600, 3, 12)  # 12 kinds: the class LP, then its kept basis
    pol = get_policy("max_sum_throughput")
    for problem in (small, many, many.with_jobs(many.jobs[:-1])):
        res = get_policy("max_sum_throughput").solve(problem) if problem is small else pol.solve(problem)
        assert res.status.value == "optimal"
        t_ex, c_ex = _excess(res.space, res.X)
        assert t_ex <= FEASIBILITY_TOL and c_ex <= FEASIBILITY_TOL
    assert calls == []
    get_policy("max_sum_throughput", algorithm="simplex").solve(small)  # the whole LP: checked
    assert calls == [1]
