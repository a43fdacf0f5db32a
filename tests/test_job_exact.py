"""Job-exact migration minimization (policyopt.placement.job_exact): never worse than the simple rule,
Tesserae's rule or the plan as given, exact (against a MILP and brute force) when no job is spread."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt.errors import InputError
from policyopt.mechanism import Combination, RoundAssignment
from policyopt.placement import (
    MIGRATION_MINIMIZERS,
    ClusterLayout,
    MatchingMigration,
    Placement,
    SimpleRuleMigration,
    TesseraeMigration,
    consolidate,
    exact_relabeling,
    job_exact_relabeling,
    kept_weight,
    migrated_jobs,
    moved_weight,
    simple_rule_relabeling,
)
from policyopt.placement.job_exact import RelabelingModel


def random_round(rng: np.random.Generator, layout: ClusterLayout, pool: list[str], sizes: dict[str, int],
                 types: dict[str, str], pair_prob: float) -> RoundAssignment:
    """Jobs of ``pool`` (random order, each on its own type) until nothing fits; some equal-size pairs."""
    left = layout.worker_counts()
    jobs = [str(j) for j in rng.permutation(pool)]
    combos: list[Combination] = []
    used: set[str] = set()
    for i, j in enumerate(jobs):
        if j in used or rng.random() < 0.25:
            continue
        t, g = types[j], sizes[j]
        if left[t] < g:
            continue
        members: tuple[str, ...] = (j,)
        mates = [k for k in jobs[i + 1:] if k not in used and sizes[k] == g and types[k] == t]
        if mates and rng.random() < pair_prob:
            members = (j, mates[0])
        used.update(members)
        left[t] -= g
        combos.append(Combination(members, t, g))
    return RoundAssignment(tuple(combos))


def random_plans(seed: int, n_a: int, n_b: int, per: int, n_jobs: int, pair_prob: float
                 ) -> tuple[Placement, Placement]:
    rng = np.random.default_rng(seed)
    spec = {"a": (n_a, per)}
    if n_b:
        spec["b"] = (n_b, 2)
    layout = ClusterLayout.from_servers(spec)
    pool = [f"j{i}" for i in range(n_jobs)]
    types = {j: str(rng.choice(list(spec))) for j in pool}
    sizes = {j: int(rng.choice([1, 1, 2, 4] if types[j] == "a" and per >= 4 else [1, 2])) for j in pool}
    old = consolidate(layout, random_round(rng, layout, pool, sizes, types, pair_prob))
    new = consolidate(layout, random_round(rng, layout, pool, sizes, types, pair_prob), old,
                      renew=bool(rng.random() < 0.5))
    return old, new


def moved(old: Placement, new: Placement, mapping: np.ndarray) -> int:
    return len(migrated_jobs(old, new.relabel(mapping)))


# ----------------------------------------------------------------------------- properties
@settings(max_examples=120, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_a=st.integers(1, 5), n_b=st.integers(0, 3), per=st.sampled_from([2, 4]),
       n_jobs=st.integers(1, 24), pair_prob=st.sampled_from([0.0, 0.4]))
def test_never_worse_than_simple_or_plan_and_never_better_than_milp(seed: int, n_a: int, n_b: int, per: int,
                                                                     n_jobs: int, pair_prob: float) -> None:
    old, new = random_plans(seed, n_a, n_b, per, n_jobs, pair_prob)
    fast = job_exact_relabeling(old, new)
    relabeled = new.relabel(fast)  # a valid plan: same pairs, same spread jobs
    assert relabeled.pairs == new.pairs and relabeled.spread == new.spread
    n_fast = len(migrated_jobs(old, relabeled))
    assert n_fast <= moved(old, new, simple_rule_relabeling(old, new))
    assert n_fast <= len(migrated_jobs(old, new))
    exact, kept = exact_relabeling(old, new)
    assert kept == pytest.approx(kept_weight(old, new, exact))
    assert kept_weight(old, new, fast) <= kept + 1e-9
    m = RelabelingModel.build(old, new)
    assert n_fast <= moved(old, new, TesseraeMigration().mapping(old, new))  # nor than Tesserae's rule
    if m.spread_jobs().size == 0:  # exact without spread jobs
        assert kept_weight(old, new, fast) == pytest.approx(kept)


def _all_relabelings(layout: ClusterLayout) -> list[np.ndarray]:
    """Every topology-preserving relabeling of a tiny layout (server perms x GPU perms per server)."""
    key = layout.server_type * 1000 + layout.server_size
    per_class = []
    for k in np.unique(key):
        servers = np.flatnonzero(key == k)
        size = int(layout.server_size[servers[0]])
        options = []
        for sperm in itertools.permutations(servers.tolist()):
            for gperms in itertools.product(itertools.permutations(range(size)), repeat=servers.size):
                seg = []
                for b, a, gp in zip(servers.tolist(), sperm, gperms):
                    seg.append((int(layout.first_gpu[b]) + np.arange(size), int(layout.first_gpu[a]) + np.array(gp)))
                options.append(seg)
        per_class.append(options)
    out = []
    for combo in itertools.product(*per_class):
        m = np.arange(layout.num_gpus)
        for seg in combo:
            for src, dst in seg:
                m[src] = dst
        out.append(m)
    return out


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), n_jobs=st.integers(1, 10), pair_prob=st.sampled_from([0.0, 0.5]))
def test_milp_matches_brute_force(seed: int, n_jobs: int, pair_prob: float) -> None:
    """3 servers x 2 GPUs (48 relabelings) and 1 x 2: the MILP's optimum is the brute-force optimum."""
    old, new = random_plans(seed, 3, 1, 2, n_jobs, pair_prob)
    rng = np.random.default_rng(seed)
    costs = {j: float(rng.integers(1, 4)) for j in set(old.gpus) | set(new.gpus)}
    best = max(kept_weight(old, new, m, costs) for m in _all_relabelings(new.layout))
    mapping, kept = exact_relabeling(old, new, costs)
    assert kept == pytest.approx(best)
    assert kept_weight(old, new, mapping, costs) == pytest.approx(best)
    assert kept_weight(old, new, job_exact_relabeling(old, new, costs), costs) <= best + 1e-9


# ----------------------------------------------------------------------------- hand-solved cases
def test_hand_solved_two_servers() -> None:
    lay = ClusterLayout.from_servers({"v100": (2, 4)})
    old = Placement.build(lay, {"big": [0, 1, 2, 3], "x": [4], "y": [5]})
    new = Placement.build(lay, {"big": [4, 5, 6, 7], "x": [0], "y": [1]})  # servers swapped
    for rule in (MatchingMigration(), TesseraeMigration(), SimpleRuleMigration()):
        assert migrated_jobs(old, rule.relabel(old, new)) == set()
    # big is spread now (3 + 1 GPUs): it must move; a shares server 0 with big's three GPUs, b and c
    # are on server 1 as before: keeping b and c beats keeping a
    old = Placement.build(lay, {"big": [0, 1, 2, 3], "a": [4], "b": [5], "c": [6]})
    new = Placement.build(lay, {"big": [0, 1, 2, 4], "a": [3], "b": [5], "c": [6]})
    assert migrated_jobs(old, MatchingMigration().relabel(old, new)) == {"big", "a"}
    assert exact_relabeling(old, new)[1] == 2.0


def test_spread_job_kept_only_when_every_server_maps_onto_its_server() -> None:
    lay = ClusterLayout.from_servers({"v100": (3, 2)})
    old = Placement.build(lay, {"s": [1, 2], "p": [0], "q": [3], "r": [4, 5]})
    new = Placement.build(lay, {"s": [3, 4], "p": [2], "q": [5], "r": [0, 1]})
    mapping, kept = exact_relabeling(old, new)
    assert kept == 4.0
    fast = job_exact_relabeling(old, new)
    assert migrated_jobs(old, new.relabel(fast)) == set()


def test_costs_weigh_jobs_by_restore_seconds() -> None:
    """Two jobs want the same old server; the one with the larger restore time wins it."""
    lay = ClusterLayout.from_servers({"v100": (2, 2)})
    old = Placement.build(lay, {"a": [0], "b": [1]})
    new = Placement.build(lay, {"a": [0], "b": [2]})  # a and b now on different servers
    for heavy in ("a", "b"):
        costs = {"a": 1.0, "b": 1.0, heavy: 30.0}
        out = MatchingMigration(costs).relabel(old, new)
        assert heavy not in migrated_jobs(old, out)
        assert moved_weight(old, out, costs) == pytest.approx(1.0)


def test_registry_names_and_bad_costs() -> None:
    assert {"matching", "tesserae", "simple", "none"} <= set(MIGRATION_MINIMIZERS.names())
    assert isinstance(MIGRATION_MINIMIZERS.create("tesserae"), TesseraeMigration)
    lay = ClusterLayout.from_servers({"v100": (1, 2)})
    old = Placement.build(lay, {"a": [0]})
    new = Placement.build(lay, {"a": [1]})
    with pytest.raises(InputError, match="costs.a"):
        MatchingMigration({"a": -1.0}).relabel(old, new)
    assert SimpleRuleMigration().relabel(None, new) is new


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.integers(1, 9), st.integers(1, 9))
def test_sparse_server_matching_equals_the_dense_assignment(seed: int, n_rows: int, n_cols: int) -> None:
    """The server-level matching (sparse, LAPJVsp with private dummy columns) reaches the same total
    value as scipy's dense Hungarian on random graphs (ties included), and is a matching."""
    from scipy.optimize import linear_sum_assignment

    from policyopt.placement.job_exact import _sparse_max_matching

    rng = np.random.default_rng(seed)
    flat = rng.choice(n_rows * n_cols, int(rng.integers(0, n_rows * n_cols + 1)), replace=False)
    rows, cols = flat // n_cols, flat % n_cols
    w = rng.choice(np.array([0.5, 1.0, 1.0, 2.0, rng.random() + 0.01]), flat.size)
    W = np.zeros((n_rows, n_cols))
    W[rows, cols] = w
    r, c = linear_sum_assignment(W, maximize=True)
    sr, sc = _sparse_max_matching(rows, cols, w, n_rows, n_cols)
    assert len(set(sr.tolist())) == sr.size and len(set(sc.tolist())) == sc.size
    assert np.all(W[sr, sc] > 0)
    assert W[sr, sc].sum() == pytest.approx(W[r, c].sum(), abs=1e-9)


def test_server_assignment_memory_is_linear_in_the_shared_pairs() -> None:
    """One connected component of 5,000 old and 5,000 new servers (a chain: new server ``i`` shares
    jobs with old servers ``i`` and ``i - 1``): the assignment stays within a few MB of traced
    memory, where a dense servers x servers matrix alone takes 200 MB; it keeps the optimum (every
    new server on the old server it shares the heavier edge with, but one)."""
    import tracemalloc

    from policyopt.placement.job_exact import _server_assignment

    S = 5000
    a = np.r_[np.arange(S), np.arange(S - 1)]
    b = np.r_[np.arange(S), np.arange(1, S)]
    V = np.r_[np.ones(S), np.full(S - 1, 1.5)]
    tracemalloc.start()
    try:
        old_of = _server_assignment(S, a, b, V)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 32 * 2**20, f"{peak / 2**20:.1f} MiB"
    assert np.array_equal(old_of[1:], np.arange(S - 1)) and old_of[0] == -1  # value 1.5·(S-1), the optimum
