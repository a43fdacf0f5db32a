"""``RoundMechanism(ordering="gavel")``: Gavel's per-type walks, its priority ``X / (L/2 + r)`` (within a
type), the deficit as a tie-break only (carried unclipped), and zero-priority entries taken last.

Every expected pick below is worked by hand from Gavel's rules (``docs/mechanism.md``)."""
from __future__ import annotations

import random

import numpy as np
import pytest

from policyopt.errors import InputError
from policyopt.mechanism import Combination, RoundAssignment, RoundMechanism
from policyopt.sim import SimConfig

L = 360.0


def _picks(m: RoundMechanism) -> dict[str, str]:
    """Schedule and record one round; job -> worker type it ran on."""
    a = m.schedule_round()
    m.record_round(a)
    return {c.jobs[0]: c.worker_type for c in a.combinations}


def _sizes_124(**kw: object) -> RoundMechanism:
    """Jobs a / b / c of 1 / 2 / 4 GPUs on 4 V100 + 4 K80, each X = 0.5 on both types (3.5 GPUs a type)."""
    m = RoundMechanism({"v100": 4, "k80": 4}, round_length=L, ordering="gavel", **kw)  # type: ignore[arg-type]
    m.set_allocation({j: {"v100": 0.5, "k80": 0.5} for j in "abc"}, scale_factors={"a": 1, "b": 2, "c": 4})
    return m


def test_sizes_1_2_4_on_two_types_hand_worked() -> None:
    """Round 1: all priorities equal (nothing ran) -> job order; V100 first: a (1), b (2), c skipped (4 > 1
    left); K80: c. Round 2, with W = 3·L/2 + job-time run: V100 a, b at .5/(3L/2 / 7L/2), c at .5/(L/2 / 7L/2)
    -> c first, fills V100; K80 a, b at .5/(L/2 / 5L/2) > c -> a, b. Round 3: every job ran L on each type ->
    equal priorities -> job order again: round 1's picks (the default ordering would keep round 2's by lease
    renewal)."""
    m = _sizes_124()
    assert _picks(m) == {"a": "v100", "b": "v100", "c": "k80"}
    pr = m.priorities()
    assert pr[2, 0] > pr[0, 0] == pr[1, 0] and pr[0, 1] == pr[1, 1] > pr[2, 1]
    assert _picks(m) == {"c": "v100", "a": "k80", "b": "k80"}
    assert _picks(m) == {"a": "v100", "b": "v100", "c": "k80"}
    d = RoundMechanism({"v100": 4, "k80": 4}, round_length=L)
    d.set_allocation({j: {"v100": 0.5, "k80": 0.5} for j in "abc"}, scale_factors={"a": 1, "b": 2, "c": 4})
    assert [_picks(d) for _ in range(3)][2] == {"c": "v100", "a": "k80", "b": "k80"}


def test_shuffled_type_order_is_gavels_shuffle() -> None:
    """With ``shuffle_types`` the walk takes the types in ``random.Random(seed).shuffle`` order every round;
    when K80 comes first in round 1, a and b fill it (3 of 4) and c takes the V100s."""
    seed = next(s for s in range(100) if _shuffled(s) == [1, 0])
    m = _sizes_124(shuffle_types=True, shuffle_seed=seed)
    assert _picks(m) == {"a": "k80", "b": "k80", "c": "v100"}
    fixed = next(s for s in range(100) if _shuffled(s) == [0, 1])
    assert _picks(_sizes_124(shuffle_types=True, shuffle_seed=fixed)) == {"a": "v100", "b": "v100", "c": "k80"}


def _shuffled(seed: int) -> list[int]:
    order = [0, 1]
    random.Random(seed).shuffle(order)
    return order


def test_zero_priority_entries_take_idle_workers_last() -> None:
    """1 V100 + 1 K80; a: X = .5 on both, b: .5 on V100 only. Round 1: V100 a (job order), K80: a busy, b has
    X = 0 there but can run -> b (work-conserving). The default ordering leaves the K80 idle. Round 2: V100 b
    (.5/(L/2) > a's .5/(3L/2)), K80 a (.5/(L/2) over b's zero priority)."""
    alloc = {"a": {"v100": 0.5, "k80": 0.5}, "b": {"v100": 0.5}}
    m = RoundMechanism({"v100": 1, "k80": 1}, round_length=L, ordering="gavel")
    m.set_allocation(alloc, scale_factors={"a": 1, "b": 1}, runnable={"a": ["v100", "k80"], "b": ["v100", "k80"]})
    assert _picks(m) == {"a": "v100", "b": "k80"}
    assert _picks(m) == {"b": "v100", "a": "k80"}
    # not runnable on the K80 (e.g. zero throughput there): the K80 stays idle, as in the default ordering
    n = RoundMechanism({"v100": 1, "k80": 1}, round_length=L, ordering="gavel")
    n.set_allocation(alloc, scale_factors={"a": 1, "b": 1})
    assert _picks(n) == {"a": "v100"}
    d = RoundMechanism({"v100": 1, "k80": 1}, round_length=L)
    d.set_allocation(alloc, scale_factors={"a": 1, "b": 1})
    assert _picks(d) == {"a": "v100"}


def test_gavel_priority_lets_a_large_share_run_before_a_job_that_has_not_run() -> None:
    """One V100; a: X = .9, b: X = .1. Gavel ranks .9/(L/2 + r_a) against .1/(L/2): a runs while
    L/2 + r_a < 9·L/2, i.e. rounds 1-4. The default ordering ranks b (never ran: +inf) first in round 2."""
    alloc = {"a": {"v100": 0.9}, "b": {"v100": 0.1}}
    m = RoundMechanism({"v100": 1}, round_length=L, ordering="gavel")
    m.set_allocation(alloc, scale_factors={"a": 1, "b": 1})
    assert [_picks(m) for _ in range(4)] == [{"a": "v100"}] * 4
    d = RoundMechanism({"v100": 1}, round_length=L)
    d.set_allocation(alloc, scale_factors={"a": 1, "b": 1})
    assert [_picks(d) for _ in range(2)] == [{"a": "v100"}, {"b": "v100"}]


def test_deficit_unclipped_kept_where_x_is_zero_and_only_a_tie_break() -> None:
    """One V100, a and b at X = .5; a runs four rounds alone: b is owed .5·4L = 2L, a is 2L ahead. After the
    reset Gavel keeps ±2L (the default caps at one round), also on a type where b's new X is 0; with equal
    priorities (r = 0) the deficit breaks the tie: b first."""
    alloc = {"a": {"v100": 0.5, "k80": 0.5}, "b": {"v100": 0.5, "k80": 0.5}}
    for ordering, cap in (("gavel", 2 * L), ("default", L)):
        m = RoundMechanism({"v100": 1, "k80": 1}, round_length=L, ordering=ordering)
        m.set_allocation(alloc, scale_factors={"a": 1, "b": 1})
        for _ in range(4):
            m.record_round(RoundAssignment((Combination(("a",), "v100", 1),)))
        m.set_allocation({"a": {"v100": 0.5, "k80": 0.5}, "b": {"v100": 0.5}})
        assert m.deficits[:, 0].tolist() == [-cap, cap]
        assert m.deficits[1, 1] == (0.5 * 4 * L if ordering == "gavel" else 0.0)
    after = _gavel_after_reset()
    assert after.priorities()[0, 0] == after.priorities()[1, 0] > 0
    assert _picks(after) == {"b": "v100", "a": "k80"}


def _gavel_after_reset() -> RoundMechanism:
    m = RoundMechanism({"v100": 1, "k80": 1}, round_length=L, ordering="gavel")
    m.set_allocation({"a": {"v100": 0.5}, "b": {"v100": 0.5}}, scale_factors={"a": 1, "b": 1})
    for _ in range(4):
        m.record_round(RoundAssignment((Combination(("a",), "v100", 1),)))
    m.set_allocation({"a": {"v100": 0.5, "k80": 0.5}, "b": {"v100": 0.5}})
    return m


def test_state_round_trip_keeps_the_ordering_the_shuffle_and_runnable() -> None:
    m = _sizes_124(shuffle_types=True, shuffle_seed=3)
    m.set_allocation({"a": {"v100": 0.5}, "b": {"k80": 0.5}, "c": {"v100": 0.5}},
                     runnable={j: ["v100", "k80"] for j in "abc"})
    for _ in range(3):
        m.record_round(m.schedule_round())
    r = RoundMechanism.from_state(m.to_state())
    assert (r.ordering, r.shuffle_types, r.shuffle_seed, r.deficit_cap) == ("gavel", True, 3, float("inf"))
    for _ in range(20):
        a1, a2 = m.schedule_round(), r.schedule_round()
        assert a1 == a2
        m.record_round(a1)
        r.record_round(a2)


def test_invalid_ordering_options_name_the_field() -> None:
    with pytest.raises(InputError, match="ordering.*'global'"):
        RoundMechanism({"v100": 1}, ordering="global")
    with pytest.raises(InputError, match="shuffle_types"):
        RoundMechanism({"v100": 1}, shuffle_types=True)
    with pytest.raises(InputError, match="work_conserving"):
        RoundMechanism({"v100": 1}, ordering="gavel", work_conserving=False)
    with pytest.raises(InputError, match="renewal_credit"):
        RoundMechanism({"v100": 1}, ordering="gavel", renewal_credit=10.0)
    m = RoundMechanism({"v100": 1}, ordering="gavel")
    with pytest.raises(InputError, match="runnable"):
        m.set_allocation({"a": {"v100": 1.0}}, scale_factors={"a": 1}, runnable={"zz": ["v100"]})
    with pytest.raises(InputError, match="ordering.*'fast'"):
        SimConfig(ordering="fast")
    with pytest.raises(InputError, match="renewal_credit"):
        SimConfig(ordering="gavel", renewal_credit=60.0)


def test_allocation_scheduler_passes_where_jobs_can_run() -> None:
    """v100 = 2, k80 = 1; X gives ``a`` one V100 and nothing else (``b`` cannot run on a V100, ``c`` needs
    two GPUs). V100 walk: a, then the zero-priority tail in job order: b cannot run there, c does not fit
    the one V100 left, d takes it; K80: b. The default ordering runs ``a`` alone."""
    import policyopt
    from policyopt.policy import get_policy
    from policyopt.result import Status, Timings
    from policyopt.sim.scheduling import AllocationScheduler

    problem = policyopt.Problem.from_dict({
        "cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 1}}},
        "jobs": [{"id": "a", "throughputs": {"v100": 2.0, "k80": 1.0}},
                 {"id": "b", "throughputs": {"v100": 0.0, "k80": 1.0}},
                 {"id": "c", "throughputs": {"v100": 3.0, "k80": 1.0}, "scale_factor": 2},
                 {"id": "d", "throughputs": {"v100": 1.0, "k80": 1.0}}]})
    policy = get_policy("max_min_fairness")
    space = policy.make_space(problem)
    X = np.zeros(space.mask.shape)
    X[space.jobs.labels.tolist().index("a"), space.configs.labels.tolist().index("v100")] = 1.0
    result = policy.result(space, X, Status.OPTIMAL, None, "given", Timings())
    counts = {"v100": 2, "k80": 1}
    picks = {}
    for ordering in ("gavel", "default"):
        sched = AllocationScheduler(policy, counts, L, ordering=ordering)
        sched.install(result, {"a": 1, "b": 1, "c": 2, "d": 1}, counts)
        picks[ordering] = {c.jobs[0]: c.worker_type for c in sched.select([], counts).combinations}
    assert picks == {"gavel": {"a": "v100", "d": "v100", "b": "k80"}, "default": {"a": "v100"}}


def test_gavel_rules_follow_gavels_policy_names() -> None:
    """Gavel shuffles the types for every policy whose name has neither ``Perf`` nor ``Packing`` (the
    agnostic ones and ``Isolated``), and skips zero-priority entries for its FIFO policies only."""
    from policyopt.mechanism.gavel_order import gavel_rules

    shuffled = {n for n in ("max_min_fairness", "max_min_fairness_agnostic", "finish_time_fairness",
                            "finish_time_fairness_agnostic", "fifo", "fifo_agnostic", "isolated", "gandiva",
                            "max_sum_throughput") if gavel_rules("gavel", n)["shuffle_types"]}
    assert shuffled == {"max_min_fairness_agnostic", "finish_time_fairness_agnostic", "fifo_agnostic", "isolated"}
    assert not gavel_rules("default", "isolated")["shuffle_types"]
    assert [gavel_rules("gavel", n)["zero_priority"] for n in ("fifo", "fifo_agnostic", "isolated",
                                                                 "max_min_fairness")] == [False, False, True, True]


@pytest.mark.parametrize("policy,shuffle,zero", [("isolated", True, True), ("fifo_agnostic", True, False),
                                                  ("fifo", False, False), ("max_min_fairness", False, True)])
def test_the_simulator_passes_gavels_rules(policy: str, shuffle: bool, zero: bool) -> None:
    from policyopt.data import load_gavel
    from policyopt.sim import Simulator
    from policyopt.sim.loop import SimulationRun
    from policyopt.sim.traces import gavel_trace

    table = load_gavel()
    sim = Simulator("v100=2,p100=2,k80=2", SimConfig(policy=policy, ordering="gavel", seed=4), table)
    run = SimulationRun(sim, gavel_trace(table, 4, 1.0, seed=0))
    assert (run.scheduler.mechanism.shuffle_types, run.scheduler.zero_priority) == (shuffle, zero)
    assert run.scheduler.mechanism.shuffle_seed == 9


def test_fifo_leaves_zero_priority_entries_idle() -> None:
    """The scheduler of ``test_allocation_scheduler_passes_where_jobs_can_run`` without zero-priority
    entries (Gavel's FIFO policies): only ``a`` runs."""
    import policyopt
    from policyopt.policy import get_policy
    from policyopt.result import Status, Timings
    from policyopt.sim.scheduling import AllocationScheduler

    problem = policyopt.Problem.from_dict({
        "cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 1}}},
        "jobs": [{"id": "a", "throughputs": {"v100": 2.0, "k80": 1.0}},
                 {"id": "d", "throughputs": {"v100": 1.0, "k80": 1.0}}]})
    policy = get_policy("max_min_fairness")
    space = policy.make_space(problem)
    X = np.zeros(space.mask.shape)
    X[0, space.configs.labels.tolist().index("v100")] = 1.0
    result = policy.result(space, X, Status.OPTIMAL, None, "given", Timings())
    counts = {"v100": 2, "k80": 1}
    picks = {}
    for zero in (True, False):
        sched = AllocationScheduler(policy, counts, L, ordering="gavel", zero_priority=zero)
        sched.install(result, {"a": 1, "d": 1}, counts)
        picks[zero] = {c.jobs[0]: c.worker_type for c in sched.select([], counts).combinations}
    assert picks == {True: {"a": "v100", "d": "v100"}, False: {"a": "v100"}}


def test_types_walked_in_gavels_order_whatever_the_counts_order() -> None:
    """Gavel lists its types as v100, p100, k80 (those with workers) before any shuffle: with the counts
    given K80 first, round 1 still fills the V100 first (a, by job order), then the K80 (b)."""
    from policyopt.mechanism.gavel_order import gavel_type_base

    assert gavel_type_base([0, 2, 3, 1], ["p100", "k80", "v100", "a100"]) == [2, 1, 3]
    m = RoundMechanism({"k80": 1, "v100": 1}, round_length=L, ordering="gavel")
    m.set_allocation({j: {"v100": 0.5, "k80": 0.5} for j in "ab"}, scale_factors={"a": 1, "b": 1})
    assert _picks(m) == {"a": "v100", "b": "k80"}


def test_scheduler_keeps_the_type_shuffle_across_a_count_change(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gavel seeds its type shuffler once: when the worker counts change (and the scheduler rebuilds its
    mechanism) the per-round type orders go on as one uninterrupted ``random.Random(seed)`` sequence."""
    import policyopt
    from policyopt.mechanism import rounds
    from policyopt.policy import get_policy
    from policyopt.sim.scheduling import AllocationScheduler

    seen: list[list[int]] = []
    shuffle = rounds.shuffled_type_order

    def recorded(rng: random.Random, base: list[int]) -> list[int]:
        seen.append(shuffle(rng, base))
        return seen[-1]

    monkeypatch.setattr(rounds, "shuffled_type_order", recorded)
    policy = get_policy("max_min_fairness_agnostic")
    sched = AllocationScheduler(policy, {"v100": 2, "p100": 2, "k80": 2}, L, ordering="gavel",
                                shuffle_types=True, shuffle_seed=11)
    for counts in ({"v100": 2, "p100": 2, "k80": 2}, {"v100": 1, "p100": 2, "k80": 1}):
        problem = policyopt.Problem.from_dict({
            "cluster": {"worker_types": {t: {"count": n} for t, n in counts.items()}},
            "jobs": [{"id": j, "throughputs": {"v100": 2.0, "p100": 1.5, "k80": 1.0}} for j in "ab"]})
        sched.recompute(problem, {"a": 1, "b": 1}, counts)
        for _ in range(6):
            sched.mechanism.record_round(sched.select([], counts))
    ref = random.Random(11)
    expected = []
    for _ in range(12):
        order = [0, 1, 2]
        ref.shuffle(order)
        expected.append(order)
    assert len(seen) == 12 and seen == expected


def test_runnable_names_become_the_mask_and_unknown_names_are_named() -> None:
    """``set_allocation(runnable=...)`` marks exactly the named (job, type) entries; an unknown job or type
    is refused with the field and the value."""
    m = RoundMechanism({"v100": 2, "p100": 1, "k80": 2}, ordering="gavel")
    alloc = {"a": {"v100": 0.5}, "b": {"k80": 1.0}, "c": {"p100": 0.25}}
    m.set_allocation(alloc, scale_factors={"a": 1, "b": 1, "c": 1},
                     runnable={"a": ["k80", "v100"], "c": iter(["v100"]), "b": []})
    state = m._state  # noqa: SLF001 - the installed mask is not public
    assert state is not None and state.runnable is not None
    row = {j: i for i, j in enumerate(state.arrays.job_ids)}
    expected = np.zeros((3, 3), dtype=bool)
    expected[row["a"], [0, 2]] = True
    expected[row["c"], 0] = True
    np.testing.assert_array_equal(state.runnable, expected)
    m.set_allocation(alloc, runnable={})
    assert m._state is not None and not m._state.runnable.any()  # noqa: SLF001
    with pytest.raises(InputError, match=r"runnable\.c.*'t4'"):
        m.set_allocation(alloc, runnable={"a": ["v100"], "c": ["k80", "t4"]})
    with pytest.raises(InputError, match=r"runnable.*'zz'"):
        m.set_allocation(alloc, runnable={"a": ["v100"], "zz": ["k80"]})
