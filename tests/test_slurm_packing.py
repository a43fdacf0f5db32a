"""The packable allocation (policyopt.slurm.packing) and the round choice that realizes it
(policyopt.slurm.schedule): hand-solved cases, a cross-check of the column generation against an
LP over every configuration (PuLP/CBC), and properties of the result."""
from __future__ import annotations

import itertools

import numpy as np
import pulp
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from policyopt.errors import InputError
from policyopt.slurm.packing import packable_allocation
from policyopt.slurm.schedule import choose_configuration

THR = {"a": {"v100": 3.0, "k80": 1.5}, "b": {"v100": 3.0, "k80": 1.0}}


def test_gang_conflict_hand_solved() -> None:
    # a (2 GPUs) at X=1 on v100 beside b (4 GPUs) at X=0.5 on v100: 2 + 2 = 4 GPUs on average, but b
    # fills the type whenever it runs. Best packable: a on k80 1/3, v100 2/3; b the reverse; each
    # keeps 5/6 of its throughput (a: 1.5/3 + 2 = 2.5 of 3; b: 2/3 + 1 = 5/3 of 2).
    x = {"a": {"v100": 1.0}, "b": {"k80": 0.5, "v100": 0.5}}
    out = packable_allocation(x, {"a": 2, "b": 4}, {"v100": 4, "k80": 4}, THR)
    assert out.changed and out.throughput_kept == pytest.approx(5 / 6, abs=1e-6)
    assert out.allocation["a"] == pytest.approx({"k80": 1 / 3, "v100": 2 / 3}, abs=1e-6)
    assert out.allocation["b"] == pytest.approx({"k80": 2 / 3, "v100": 1 / 3}, abs=1e-6)
    shares = dict(out.configurations)
    assert sorted(shares) == [(("a", "k80"), ("b", "v100")), (("a", "v100"), ("b", "k80"))]
    assert shares[("a", "k80"), ("b", "v100")] == pytest.approx(1 / 3, abs=1e-5)


def test_packable_allocation_is_kept() -> None:
    x = {"a": {"v100": 0.5}, "b": {"v100": 0.5, "k80": 0.5}}  # a and b never need v100 at once
    out = packable_allocation(x, {"a": 2, "b": 4}, {"v100": 4, "k80": 4}, THR)
    assert not out.changed and out.throughput_kept == pytest.approx(1.0)
    assert out.allocation["a"] == pytest.approx({"v100": 0.5}) and out.allocation["b"] == pytest.approx(x["b"])
    ones = {"a": {"v100": 0.3, "k80": 0.7}, "b": {"v100": 0.7}}  # one GPU each: packable as it is
    kept = packable_allocation(ones, {"a": 1, "b": 1}, {"v100": 1, "k80": 1}, THR).allocation
    assert kept["a"] == pytest.approx(ones["a"], abs=1e-6) and kept["b"] == pytest.approx(ones["b"], abs=1e-6)


def test_missing_scale_factor_names_the_job() -> None:
    with pytest.raises(InputError, match=r"scale_factors\.b"):
        packable_allocation({"a": {"v100": 1.0}, "b": {"k80": 1.0}}, {"a": 2}, {"v100": 4, "k80": 4}, THR)


def _all_configurations_lp(x: np.ndarray, thr: np.ndarray, scale: np.ndarray, cap: np.ndarray) -> float:
    """Stage 1 (max s) over every round configuration, enumerated, solved by PuLP/CBC."""
    n, nc = x.shape
    prob = pulp.LpProblem("s", pulp.LpMaximize)
    s = pulp.LpVariable("s", 0, 1)
    prob += s
    y = {(j, t): pulp.LpAffineExpression() for j in range(n) for t in range(nc)}
    shares = []
    for k, where in enumerate(itertools.product(range(-1, nc), repeat=n)):  # -1: the job does not run
        use = np.zeros(nc)
        for j, t in enumerate(where):
            if t >= 0:
                use[t] += scale[j]
        if (use > cap).any() or any(t >= 0 and thr[j, t] <= 0 for j, t in enumerate(where)):
            continue
        mu = pulp.LpVariable(f"mu_{k}", 0)
        shares.append(mu)
        for j, t in enumerate(where):
            if t >= 0:
                y[j, t] += mu
    prob += pulp.lpSum(shares) <= 1
    for j in range(n):
        rho = float((thr[j] * x[j]).sum())
        prob += pulp.lpSum(float(thr[j, t]) * y[j, t] for t in range(nc)) >= rho * s
    prob.solve(pulp.PULP_CBC_CMD(msg=False))
    return float(s.value())


@st.composite
def _instances(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(2, 5))
    nc = draw(st.integers(1, 3))
    cap = np.array(draw(st.lists(st.sampled_from([2, 4, 6]), min_size=nc, max_size=nc)))
    scale = np.array(draw(st.lists(st.sampled_from([1, 2, 4]), min_size=n, max_size=n)))
    thr = np.array(draw(st.lists(st.lists(st.sampled_from([0.0, 1.0, 2.0, 3.0]), min_size=nc, max_size=nc),
                                 min_size=n, max_size=n)), dtype=float)
    raw = np.array(draw(st.lists(st.lists(st.floats(0, 1), min_size=nc, max_size=nc), min_size=n, max_size=n)))
    x = np.where((thr > 0) & (raw > 1e-3), raw, 0.0)
    x /= np.maximum(x.sum(axis=1, keepdims=True), 1.0)  # each job at most 1 in all
    load = (x * scale[:, None]).sum(axis=0)
    x *= np.minimum(1.0, cap / np.maximum(load, 1e-12))[None, :]  # each type within its GPUs on average
    return x, thr, scale, cap


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_instances())
# found by hypothesis: an entry of Y below EPS (dropped) took 2e-6 of j1's throughput below s
@example((np.array([[0, 0, 4 / 7], [0.5, 0, 2 / 7], [0, 0, 0], [0, 0, 4 / 7]]),
          np.array([[0.0, 0, 1], [2, 0, 3], [0, 0, 0], [1, 0, 2]]), np.array([4, 4, 1, 1]), np.array([4, 2, 4])))
# found by hypothesis: j2 kept 1.6e-6 less than the reported fraction allows (the fraction is now
# measured on the delivered Y)
@example((np.array([[0.8, 0], [0, 1], [0.8, 0]]), np.array([[1.0, 0], [1, 1], [2, 3]]), np.array([1, 4, 4]),
          np.array([4, 4])))
def test_packable_allocation_properties(inst: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
    x, thr, scale, cap = inst
    jobs = [f"j{i}" for i in range(len(x))]
    types = [f"t{i}" for i in range(len(cap))]
    out = packable_allocation({j: dict(zip(types, row)) for j, row in zip(jobs, x.tolist())},
                              dict(zip(jobs, scale.tolist())), dict(zip(types, cap.tolist())),
                              {j: dict(zip(types, row)) for j, row in zip(jobs, thr.tolist())})
    y = np.array([[out.allocation[j].get(t, 0.0) for t in types] for j in jobs])
    assert (y.sum(axis=1) <= 1 + 1e-6).all()
    assert (y[thr == 0] == 0).all()
    # every job keeps the fraction s of its throughput under X
    assert ((thr * y).sum(axis=1) >= out.throughput_kept * (thr * x).sum(axis=1) - 1e-6).all()
    # the configurations fit (each job once, each type within its GPUs) and add up to Y
    rebuilt = np.zeros_like(y)
    assert sum(share for _, share in out.configurations) == pytest.approx(1.0, abs=1e-6)
    for conf, share in out.configurations:
        members = [jobs.index(j) for j, _ in conf]
        assert len(set(members)) == len(members)
        for ti, t in enumerate(types):
            assert sum(scale[jobs.index(j)] for j, tt in conf if tt == t) <= cap[ti]
        for j, t in conf:
            rebuilt[jobs.index(j), types.index(t)] += share
    assert np.allclose(rebuilt, y, atol=1e-5)
    if not out.changed:
        assert np.allclose(y, x, atol=1e-6)
    # the column generation reaches the optimum of the LP over every configuration
    assert out.throughput_kept == pytest.approx(_all_configurations_lp(x, thr, scale, cap), abs=1e-5)
    # with fill: every job keeps at least what it had, only on entries X or Y used, and still fits
    filled = packable_allocation({j: dict(zip(types, row)) for j, row in zip(jobs, x.tolist())},
                                 dict(zip(jobs, scale.tolist())), dict(zip(types, cap.tolist())),
                                 {j: dict(zip(types, row)) for j, row in zip(jobs, thr.tolist())}, fill=True)
    yf = np.array([[filled.allocation[j].get(t, 0.0) for t in types] for j in jobs])
    assert (yf >= y - 1e-6).all() and (yf[(x == 0) & (y == 0)] == 0).all()
    assert ((yf * scale[:, None]).sum(axis=0) <= cap + 1e-6).all()


@given(st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_mixture_of_rounds_is_returned_unchanged(seed: int) -> None:
    # X built as a mixture of rounds that fit is packable: kept exactly
    rng = np.random.default_rng(seed)
    n, cap = 4, {"v100": 4, "k80": 4}
    scale = rng.choice([1, 2, 4], size=n)
    x = np.zeros((n, 2))
    weights = rng.dirichlet(np.ones(3))
    for w in weights:
        left = np.array([4, 4])
        for j in rng.permutation(n):
            t = int(rng.integers(0, 3))  # 2: not running in this round
            if t < 2 and scale[j] <= left[t]:
                x[j, t] += w
                left[t] -= scale[j]
    jobs = [f"j{i}" for i in range(n)]
    thr = {j: {"v100": 2.0, "k80": 1.0} for j in jobs}
    out = packable_allocation({j: {"v100": r[0], "k80": r[1]} for j, r in zip(jobs, x.tolist())},
                              dict(zip(jobs, scale.tolist())), cap, thr)
    assert out.throughput_kept == pytest.approx(1.0, abs=1e-6)
    y = np.array([[out.allocation[j].get("v100", 0.0), out.allocation[j].get("k80", 0.0)] for j in jobs])
    assert np.allclose(y, x, atol=1e-5)


def test_fill_hands_idle_gpus_to_jobs() -> None:
    # X leaves two v100s idle half the time; with fill the jobs keep all they had and get more
    x = {"a": {"v100": 0.5}, "b": {"v100": 0.5}}
    plain = packable_allocation(x, {"a": 2, "b": 2}, {"v100": 4}, THR)
    filled = packable_allocation(x, {"a": 2, "b": 2}, {"v100": 4}, THR, fill=True)
    for j in "ab":
        assert plain.allocation[j] == pytest.approx({"v100": 0.5}, abs=1e-6)
        assert filled.allocation[j] == pytest.approx({"v100": 1.0}, abs=1e-6)


def _realize(configurations: list, y: dict, rounds: int) -> float:
    """Run ``rounds`` rounds of choose_configuration; the largest |received - Y·T| (rounds)."""
    got = {e: 0.0 for e in y}
    worst = 0.0
    for k in range(rounds):
        owed = {e: y[e] * (k + 1) - got[e] for e in y}
        pick = choose_configuration([c for c, _ in configurations], owed, 1.0)
        for e in configurations[pick][0]:
            got[e] += 1.0
        worst = max(worst, max(abs(got[e] - y[e] * (k + 1)) for e in y))
    return worst


def test_round_choice_realizes_the_demo_allocation_within_a_round() -> None:
    # the demo workload's first max-min allocation (3 K80s free), made packable, over 40 rounds
    x = {"2": {"k80": 0.05, "v100": 0.95}, "3": {"k80": 0.26, "v100": 0.74}, "4": {"k80": 1.0},
         "5": {"v100": 0.16}, "6": {"k80": 0.05, "v100": 0.95}, "7": {"k80": 0.26, "v100": 0.74}}
    gpus = {"2": 1, "3": 1, "4": 2, "5": 4, "6": 1, "7": 1}
    thr = {"2": {"v100": 4.0, "k80": 3.0}, "3": {"v100": 4.0, "k80": 2.0}, "4": {"v100": 3.0, "k80": 1.5},
           "5": {"v100": 3.0, "k80": 1.0}, "6": {"v100": 4.0, "k80": 3.0}, "7": {"v100": 3.0, "k80": 1.5}}
    out = packable_allocation(x, gpus, {"k80": 3, "v100": 4}, thr)
    y = {(j, t): v for j, row in out.allocation.items() for t, v in row.items()}
    assert _realize(out.configurations, y, 40) <= 1.0 + 1e-9


@given(_instances())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_round_choice_stays_near_the_allocation(inst: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]) -> None:
    x, thr, scale, cap = inst
    jobs = [f"j{i}" for i in range(len(x))]
    types = [f"t{i}" for i in range(len(cap))]
    out = packable_allocation({j: dict(zip(types, row)) for j, row in zip(jobs, x.tolist())},
                              dict(zip(jobs, scale.tolist())), dict(zip(types, cap.tolist())),
                              {j: dict(zip(types, row)) for j, row in zip(jobs, thr.tolist())})
    y = {(j, t): v for j, row in out.allocation.items() for t, v in row.items()}
    if y:
        assert _realize(out.configurations, y, 30) <= 2.0


def test_round_choice_prefers_fewer_moves_on_ties() -> None:
    confs = [[("a", "v100")], [("b", "v100")]]
    assert choose_configuration(confs, {("a", "v100"): 0.5, ("b", "v100"): 0.5}, 1.0, {"b": "v100"}) == 1
    assert choose_configuration(confs, {("a", "v100"): 0.5, ("b", "v100"): 0.5}, 1.0, {"a": "v100"}) == 0
    assert choose_configuration([], {}, 1.0) == -1
    # a job ahead on both types: moving it would cost a start; it stays (with or without the cost)
    both = [[("a", "v100")], [("a", "k80")]]
    owed = {("a", "v100"): 0.1, ("a", "k80"): 0.1}
    assert choose_configuration(both, owed, 1.0, {"a": "v100"}, start_cost=0.5) == 0
    # a start cost outweighs a slightly larger debt elsewhere
    owed = {("a", "v100"): 0.5, ("a", "k80"): 0.6}
    assert choose_configuration(both, owed, 1.0, {"a": "v100"}) == 1
    assert choose_configuration(both, owed, 1.0, {"a": "v100"}, start_cost=0.3) == 0


def test_round_choice_compares_every_rank_hand_solved() -> None:
    # a must run on v100 in either configuration and sets the largest deviation (|-2.5 + 1| = 1.5);
    # b runs on v100 now. Deviations after the round (L = 1), largest first:
    #   c0 (b stays on v100): a 1.5, b/v100 |-0.2 + 1| = 0.8, b/k80 |-0.8| = 0.8  -> (1.5, 0.8, 0.8)
    #   c1 (b moves to k80):  a 1.5, b/v100 |-0.2| = 0.2,     b/k80 |-0.8 + 1| = 0.2 -> (1.5, 0.2, 0.2)
    # Compared on the largest alone the two tie and the fewest-moves rule keeps b on v100 for ever;
    # compared at every rank c1 wins unless the slack covers b's 0.6 at every rank.
    confs = [[("a", "v100"), ("b", "v100")], [("a", "v100"), ("b", "k80")]]
    owed = {("a", "v100"): 2.5, ("b", "v100"): 0.2, ("b", "k80"): 0.8}
    running = {"a": "v100", "b": "v100"}
    assert choose_configuration(confs, owed, 1.0, running) == 1
    assert choose_configuration(confs, owed, 1.0, running, slack=0.5) == 1
    assert choose_configuration(confs, owed, 1.0, running, slack=0.6) == 0
    # with a start cost of 0.3 b's start on k80 counts 0.2 + 0.3: c1 = (1.5, 0.5, 0.2); a slack of
    # 0.3 covers rank 2 (0.8 <= 0.5 + 0.3) but not rank 3 (0.8 > 0.2 + 0.3)
    assert choose_configuration(confs, owed, 1.0, running, start_cost=0.3, slack=0.3) == 1
    assert choose_configuration(confs, owed, 1.0, running, start_cost=0.3, slack=0.6) == 0
    # the scale is the round: the same case in seconds (L = 10) chooses the same
    assert choose_configuration(confs, {e: 10 * v for e, v in owed.items()}, 10.0, running) == 1


def _realize_with_starts(configurations: list, y: dict, rounds: int, start_cost: float) -> dict[str, float]:
    """``rounds`` rounds of choose_configuration as the controller runs it (running jobs, start
    cost ``δ`` rounds lost at each start, slack ``δ/2``): per job, the largest amount by which it
    was ahead of ``Y·T``, or behind it by more than its own starts cost (rounds)."""
    got = {e: 0.0 for e in y}
    lost = {e: 0.0 for e in y}
    running: dict[str, str] = {}
    worst: dict[str, float] = {}
    for k in range(rounds):
        owed = {e: y[e] * (k + 1) - got[e] for e in y}
        conf = configurations[choose_configuration([c for c, _ in configurations], owed, 1.0, running,
                                                   start_cost=start_cost, slack=start_cost / 2)][0]
        for j, t in conf:
            started = running.get(j) != t
            got[j, t] += 1.0 - start_cost * started
            lost[j, t] += start_cost * started
        running = dict(conf)
        for (j, t), v in y.items():
            dev = max(got[j, t] - v * (k + 1), v * (k + 1) - lost[j, t] - got[j, t], 0.0)
            worst[j] = max(worst.get(j, 0.0), dev)
    return worst


def test_round_choice_keeps_a_job_below_the_largest_deviation_within_a_round() -> None:
    # two 1-GPU jobs on two GPU types, starts costing a fifth of a round, 30 rounds. Compared on the
    # largest deviation alone (then fewest moves), b is left where it runs while a's deviation is
    # the largest and drifts 1.24 rounds from its allocation (a: 0.75); compared at every rank both
    # stay within 0.8 rounds
    confs = [((("a", "v100"), ("b", "v100")), 0.55), ((("b", "v100"),), 0.05), ((("a", "k80"), ("b", "k80")), 0.31),
             ((("a", "k80"), ("b", "v100")), 0.05), ((), 0.04)]
    y = {("a", "v100"): 0.55, ("a", "k80"): 0.36, ("b", "v100"): 0.65, ("b", "k80"): 0.31}
    worst = _realize_with_starts(confs, y, 30, 0.2)
    assert max(worst.values()) <= 0.85, worst
