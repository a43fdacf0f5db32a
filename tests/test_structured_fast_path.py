"""The structured fast path (``policyopt.solvers.blocks``): identical per-job blocks aggregated,
the small LP solved, the answer expanded and certified. Every result is cross-checked against
HiGHS simplex on the whole LP (objective to 1e-7 relative, allocation feasible to 1e-9)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import Cluster, Job, Model, Problem, SolverOptions, get_policy, get_solver
from policyopt.modeling import IndexSet, LinExpr, Triplets
from policyopt.solvers import blocks
from policyopt.standard_form import StandardForm

TYPES = ("v100", "p100", "k80", "a100", "t4")


@pytest.fixture(autouse=True)
def structured_on_small_lps(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto`` tries the fast path from 500 columns; these tests use small LPs to stay quick."""
    from policyopt import solver_api

    monkeypatch.setattr(solver_api, "STRUCTURED_MIN_COLS", 0)


def compiled(policy: str, problem: Problem, **options: object) -> tuple[StandardForm, object, object]:
    pol = get_policy(policy, **options)
    space = pol.make_space(problem)
    model = Model(policy)
    X = space.add_allocation(model)
    pol.build(model, space, X)  # type: ignore[attr-defined]
    return model.compile(), space, X


def solve_both(sf: StandardForm) -> tuple[object, object]:
    fast = get_solver("highs").load(sf.copy(), SolverOptions()).solve()
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    return fast, ref


def check_against_simplex(sf: StandardForm, expect_fast: bool | None = None) -> object:
    fast, ref = solve_both(sf)
    assert ref.ok and fast.ok  # type: ignore[attr-defined]
    assert fast.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-9)  # type: ignore[attr-defined]
    assert sf.violation(fast.x) <= 1e-9  # type: ignore[attr-defined]
    used = str(fast.options.get("fast_path", "")).startswith("aggregated")  # type: ignore[attr-defined]
    if expect_fast is not None:
        assert used == expect_fast, fast.options  # type: ignore[attr-defined]
    if used:  # the certificate, recomputed here from the returned duals (original rows)
        ok, primal, bound, _, _ = blocks.certify(sf, fast.x, fast.row_duals / sf.row_scale)  # type: ignore
        assert ok and bound == pytest.approx(primal, rel=1e-9, abs=1e-12)
    return fast


def kinds_problem(kinds: list[tuple[dict[str, float], int, float]], copies: list[int],
                  counts: dict[str, int]) -> Problem:
    jobs = []
    for k, ((thr, sf, w), c) in enumerate(zip(kinds, copies)):
        jobs += [Job(f"k{k}_{i}", thr, scale_factor=sf, weight=w, steps_remaining=1000.0) for i in range(c)]
    return Problem(Cluster.from_counts(counts), tuple(jobs))


def test_hand_case_identical_jobs() -> None:
    """8 identical jobs on 2 GPUs of one type: each gets 1/4 of the time; t = 1/4 (X_equal = 1:
    the equal share of a one-type cluster is the whole type)."""
    p = kinds_problem([({"v100": 3.0}, 1, 1.0)], [8], {"v100": 2})
    sf, _, X = compiled("max_min_fairness", p)
    res = check_against_simplex(sf, expect_fast=True)
    x = X.value(res.x)  # type: ignore[attr-defined]
    assert np.allclose(x[:, 0], 0.25, atol=1e-12)
    assert res.objective == pytest.approx(0.25, rel=1e-12)  # type: ignore[attr-defined]


@pytest.mark.parametrize("policy,options", [("max_min_fairness", {}), ("max_sum_throughput", {}),
                                            ("max_sum_throughput", {"normalize": True}),
                                            ("max_min_fairness_agnostic", {})])
def test_gavel_problems_match_simplex(gavel, policy: str, options: dict) -> None:  # type: ignore[no-untyped-def]
    from policyopt.sim.traces import gavel_trace, parse_job_type

    trace = gavel_trace(gavel, 300, static=True, multi_gpu=True, seed=3)
    types = [gavel.type_index(*parse_job_type(j.job_type)) for j in trace]
    p = gavel.problem(types, Cluster.from_counts({t: 75 for t in ("v100", "p100", "k80")}, gpus_per_server=4))
    sf, space, X = compiled(policy, p, **options)
    res = check_against_simplex(sf, expect_fast=True)
    assert not space.check(X.value(res.x), tol=1e-9)  # type: ignore[attr-defined]
    # and through the policy: same objective as the simplex run of the whole pipeline
    a = get_policy(policy, **options).solve(p)
    b = get_policy(policy, **options, algorithm="simplex").solve(p)
    assert a.objective == pytest.approx(b.objective, rel=1e-7)
    assert not a.space.check(a.X, tol=1e-9)


def test_distinct_jobs_fall_back_to_whole_lp() -> None:
    rng = np.random.default_rng(1)
    kinds = [({t: float(rng.uniform(1, 10)) for t in TYPES[:3]}, 1, 1.0) for _ in range(40)]
    p = kinds_problem(kinds, [1] * 40, {t: 10 for t in TYPES[:3]})
    sf, _, _ = compiled("max_min_fairness", p)
    assert blocks.aggregate(sf) is None
    check_against_simplex(sf, expect_fast=False)


def test_certificate_failure_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    p = kinds_problem([({"v100": 3.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "k80": 1.5}, 2, 1.0)], [20, 20],
                      {"v100": 8, "k80": 8})
    sf, _, _ = compiled("max_min_fairness", p)
    real = blocks.certify
    monkeypatch.setattr(blocks, "certify", lambda *a, **k: (False, *real(*a, **k)[1:]))
    fast, ref = solve_both(sf)
    assert "certificate failed" in fast.options["fast_path"]  # type: ignore[attr-defined]
    assert fast.objective == pytest.approx(ref.objective, rel=1e-9)  # type: ignore[attr-defined]


def test_in_place_changes_and_second_stage() -> None:
    """The loaded model re-checks the shape at every solve: a cost changed for one job (symmetry
    broken), a second stage (t fixed at its optimum, maximize total normalized throughput), and a
    row added for one job all give the whole LP's optimum."""
    kinds = [({"v100": 4.0, "p100": 2.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "p100": 1.8, "k80": 1.0}, 2, 1.0),
             ({"v100": 1.0, "k80": 0.5}, 4, 2.0)]
    p = kinds_problem(kinds, [12, 10, 8], {"v100": 8, "p100": 8, "k80": 12})
    pol = get_policy("max_min_fairness")
    space = pol.make_space(p)
    model = Model("mmf")
    X = space.add_allocation(model)
    t = pol.build(model, space, X)
    sf = model.compile()
    fast = get_solver("highs").load(sf.copy(), SolverOptions())
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex"))
    a, b = fast.solve(), ref.solve()
    assert a.objective == pytest.approx(b.objective, rel=1e-9) and "aggregated" in a.options["fast_path"]
    # second stage: t ≥ t*, maximize Σ normalized throughput (objective changed in place)
    tcol = t.cols.ravel()
    xcols = X.cols.ravel()[X.cols.ravel() >= 0]
    cost = np.zeros(sf.num_cols)
    M = space.throughput_matrix()
    np.add.at(cost, X.cols.ravel()[M.cols], M.vals * pol.normalizer(space)[M.rows])
    for m in (fast, ref):
        m.set_col_bounds(tcol, np.array([a.objective * (1 - 1e-9)]), np.array([np.inf]))
        m.set_costs(np.arange(sf.num_cols), cost)
    a2, b2 = fast.solve(), ref.solve()
    assert a2.objective == pytest.approx(b2.objective, rel=1e-7) and "aggregated" in a2.options["fast_path"]
    assert fast.sf.violation(a2.x) <= 1e-9
    # one job's cost changed: its block no longer matches its kind
    for m in (fast, ref):
        m.set_costs(xcols[:1], np.array([cost[xcols[0]] * 3.0]))
    a3, b3 = fast.solve(), ref.solve()
    assert a3.objective == pytest.approx(b3.objective, rel=1e-7)
    assert fast.sf.violation(a3.x) <= 1e-9
    # a row added for one job (new model): still exact
    R, C = len(space.rows), len(space.configs)
    first = Triplets(np.zeros(C, np.int64), np.arange(C), np.ones(C), (1, R * C))
    model.add_constraints(LinExpr.from_matrix(first, X, (IndexSet("first", ["k0_0"]),)) <= 0.3, "cap_first")
    check_against_simplex(model.compile())


@st.composite
def kind_problems(draw: st.DrawFn) -> Problem:
    K = draw(st.integers(1, 5))
    types = TYPES[:K]
    counts = {t: draw(st.integers(1, 12)) for t in types}
    n_kinds = draw(st.integers(1, 6))
    level = st.sampled_from([0.0, 0.5, 1.0, 2.0, 3.0, 7.25])  # few values: ties and degenerate optima
    kinds = []
    for _ in range(n_kinds):
        thr = {t: draw(level) for t in types}
        sf = draw(st.sampled_from([1, 1, 2, 4]))
        ok = [t for t in types if thr[t] > 0 and sf <= counts[t]]
        if not ok:
            thr[types[0]], counts[types[0]], sf = 1.0, max(counts[types[0]], 1), 1
        kinds.append(({t: v for t, v in thr.items() if v > 0}, sf, draw(st.sampled_from([1.0, 2.0]))))
    copies = [draw(st.integers(2, 9)) for _ in kinds]
    return kinds_problem(kinds, copies, counts)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind_problems(), st.sampled_from(["max_min_fairness", "max_sum_throughput"]))
def test_random_kind_problems_match_simplex(p: Problem, policy: str) -> None:
    sf, space, X = compiled(policy, p)
    res = check_against_simplex(sf)
    assert not space.check(X.value(res.x), tol=1e-9)  # type: ignore[attr-defined]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kind_problems(), st.lists(st.sampled_from([0.5, 1.0, 2.0, 3.0]), min_size=6, max_size=6),
       st.booleans(), st.sampled_from([0.0, 0.5, 1.0]))
def test_reduced_lp_re_solved_warm_matches_simplex(p: Problem, factors: list[float], per_kind: bool,
                                                   hold: float) -> None:
    """Re-solves after cost and bound updates that keep every group of identical blocks (per-kind
    costs; ``t`` held at a fraction of its optimum, as max-min fairness's second stage does) reuse the
    block structure and the loaded reduced LP (warm); each answer equals HiGHS simplex on the whole
    LP, and a change that splits a group rebuilds the reduced LP (still exact)."""
    pol = get_policy("max_min_fairness")
    space = pol.make_space(p)
    model = Model("mmf")
    X = space.add_allocation(model)
    t = pol.build(model, space, X)
    sf = model.compile()
    fast = get_solver("highs").load(sf.copy(), SolverOptions())
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex"))
    a, b = fast.solve(), ref.solve()
    assert a.ok and b.ok and a.objective == pytest.approx(b.objective, rel=1e-7, abs=1e-9)
    if not str(a.options.get("fast_path", "")).startswith("aggregated"):
        return
    structure, small = fast._structure, fast._small  # type: ignore[attr-defined]
    factors = factors if per_kind else [1.0] * len(factors)
    # per-kind costs: job m's slots get factors[kind(m)] × its normalized throughput
    kind = np.array([int(str(lab).split("_")[0][1:]) for lab in space.jobs.labels])
    M = space.throughput_matrix()
    cost = np.zeros(sf.num_cols)
    np.add.at(cost, X.cols.ravel()[M.cols], M.vals * pol.normalizer(space)[M.rows] * np.array(factors)[kind[M.rows]])
    tcol = t.cols.ravel()
    for m in (fast, ref):
        m.set_col_bounds(tcol, np.array([a.objective * hold]), np.array([np.inf]))
        m.set_costs(np.arange(sf.num_cols), cost)
    a2, b2 = fast.resolve(), ref.resolve()
    assert a2.ok and b2.ok and a2.objective == pytest.approx(b2.objective, rel=1e-7, abs=1e-9)
    assert fast.sf.violation(a2.x) <= 1e-9
    if str(a2.options.get("fast_path", "")).startswith("aggregated"):
        assert fast._structure is structure  # type: ignore[attr-defined]
        ok, primal, bound, _, _ = blocks.certify(fast.sf, a2.x, a2.row_duals / sf.row_scale)  # type: ignore
        assert ok and bound == pytest.approx(primal, rel=1e-9, abs=1e-12)
        if not per_kind:  # the same groups: the loaded reduced LP re-solved in place
            assert fast._small is small  # type: ignore[attr-defined]
    # one job's costs scaled: its group splits, the reduced LP is rebuilt
    xcols = X.cols.ravel()[X.cols.ravel() >= 0]
    for m in (fast, ref):
        m.set_costs(xcols[:1], np.array([cost[xcols[0]] * 1.5]))
    a3, b3 = fast.resolve(), ref.resolve()
    assert a3.ok and b3.ok and a3.objective == pytest.approx(b3.objective, rel=1e-7, abs=1e-9)
    assert fast.sf.violation(a3.x) <= 1e-9


@pytest.mark.parametrize("policy,permuted", [("max_sum_throughput", False), ("max_min_fairness", False),
                                             ("max_min_fairness", True)])
def test_detected_blocks_are_the_components_of_the_inner_graph(policy: str, permuted: bool,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Max-sum's blocks (one time row and its columns: labelled without a graph search), max-min's
    (time and epigraph rows: labelled by one row per column, checked consistent) and max-min's with
    its columns shuffled (labels out of order: the graph search) are exactly the connected
    components of the non-linking rows and columns, with local ranks by index inside each block."""
    import dataclasses

    import scipy.sparse as sp
    from scipy.sparse.csgraph import connected_components

    kinds = [({"v100": 3.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "p100": 1.5}, 2, 1.0),
             ({"p100": 1.0, "k80": 0.5}, 4, 2.0)]
    p = kinds_problem(kinds, [7, 5, 9], {"v100": 4, "p100": 4, "k80": 4})
    sf, _, _ = compiled(policy, p)
    if permuted:
        perm = np.random.default_rng(0).permutation(sf.num_cols)
        sf = dataclasses.replace(sf, c=sf.c[perm], col_lower=sf.col_lower[perm], col_upper=sf.col_upper[perm],
                                 integrality=sf.integrality[perm], A=sp.csc_matrix(sf.A[:, perm]))
    searched: list[bool] = []
    real = blocks.connected_components

    def spy(*a: object, **k: object) -> object:
        searched.append(True)
        return real(*a, **k)

    monkeypatch.setattr(blocks, "connected_components", spy)
    st = blocks.detect(sf)
    assert bool(searched) == permuted  # the graph is searched only when the labels are out of order
    assert st is not None and st.B == 21
    bc, br = np.flatnonzero(st.cb >= 0), np.flatnonzero(st.rb >= 0)
    sub = sp.csc_matrix(sf.A)[br][:, bc]
    n = bc.size + br.size
    g = sp.bmat([[None, sub.T], [sub, None]]).tocsr()
    k, label = connected_components(g, directed=False)
    assert k == st.B and n == st.col_start[-1] + st.row_start[-1]
    # the same partition: block ids and component labels determine each other
    ids = np.concatenate([st.cb[bc], st.rb[br]])
    pairs = np.unique(np.stack([ids, label]), axis=1)
    assert pairs.shape[1] == k
    for owner, order, start, local in ((st.cb, st.col_order, st.col_start, st.lc),
                                       (st.rb, st.row_order, st.row_start, st.lr)):
        idx = np.flatnonzero(owner >= 0)
        assert np.array_equal(order, idx[np.argsort(owner[idx], kind="stable")])
        assert np.array_equal(local[order], np.arange(order.size) - start[owner[order]])
        assert np.all(local[owner < 0] == -1)


@pytest.mark.parametrize("policy,permuted", [("max_sum_throughput", False), ("max_min_fairness", False),
                                             ("max_min_fairness", True)])
def test_block_hashes_are_sums_over_each_blocks_entries(policy: str, permuted: bool) -> None:
    """Each block's matrix hash is the wrapping sum, over the entries of its columns and rows, of
    the entry hashes (an entry in a block column or row belongs to that block; linking row ×
    linking column to none) — summed here entry by entry with ``np.add.at``, whichever way detect
    sums them (block by block when the block columns lie in order, else by bincounts)."""
    import dataclasses

    import scipy.sparse as sp

    kinds = [({"v100": 3.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "p100": 1.5}, 2, 1.0),
             ({"p100": 1.0, "k80": 0.5}, 4, 2.0)]
    p = kinds_problem(kinds, [7, 5, 9], {"v100": 4, "p100": 4, "k80": 4})
    sf, _, _ = compiled(policy, p)
    if permuted:
        perm = np.random.default_rng(1).permutation(sf.num_cols)
        sf = dataclasses.replace(sf, c=sf.c[perm], col_lower=sf.col_lower[perm], col_upper=sf.col_upper[perm],
                                 integrality=sf.integrality[perm], A=sp.csc_matrix(sf.A[:, perm]))
    st = blocks.detect(sf)
    assert st is not None and st.cols_in_order == (not permuted)
    A = sf.A
    rows, vals = A.indices, A.data
    cols = np.repeat(np.arange(sf.num_cols), np.diff(A.indptr))
    key = (blocks._codes(st.rb, st.lr)[rows] << np.uint64(32)) | blocks._codes(st.cb, st.lc)[cols]
    ent = np.maximum(st.cb[cols], st.rb[rows])
    h = np.zeros(st.B, np.uint64)
    np.add.at(h, ent[ent >= 0], blocks._value_hash(key, vals)[ent >= 0])
    assert np.array_equal(st.h_mat, h)
    assert np.array_equal(st.n_mat, np.bincount(ent[ent >= 0], minlength=st.B))


def test_segment_sums_and_groups() -> None:
    """``_segment_sum``: wrapping uint64 sums over ranges, empty ones 0; ``_groups``: the partition
    ``np.unique(..., return_index=True, return_inverse=True)`` gives, groups numbered by their first
    block — also when signatures share the bits the hash table looks at (retried, then sorted)."""
    v = np.array([1, 2**64 - 1, 5, 7, 9], np.uint64)
    assert blocks._segment_sum(v, np.array([0, 0, 2, 2, 5])).tolist() == [0, 0, 0, 21]
    assert blocks._segment_sum(v, np.array([0, 2, 5, 5])).tolist() == [0, 21, 0]  # 1 + (2⁶⁴ − 1) wraps to 0
    rng = np.random.default_rng(0)
    same = np.uint64(0x5555)  # equal in the low 63 bits: only the top bit tells them apart
    cases = [rng.integers(0, 2**64, 7, dtype=np.uint64)[rng.integers(0, 7, 300)],
             rng.integers(0, 2**64, 300, dtype=np.uint64),
             np.array([same, same | np.uint64(1 << 63), same, np.uint64(3), same | np.uint64(1 << 63)] * 9, np.uint64),
             np.zeros(1, np.uint64)]
    for sig in cases:
        group, first = blocks._groups(sig)
        _, idx, inv = np.unique(sig, return_index=True, return_inverse=True)
        order = np.argsort(idx)
        relabel = np.empty_like(order)
        relabel[order] = np.arange(order.size)
        assert np.array_equal(group, relabel[inv.ravel()]) and np.array_equal(first, idx[order])


def test_degenerate_lps_try_the_fast_path_from_fewer_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    """``auto``: the fast path from STRUCTURED_MIN_COLS columns, from STRUCTURED_MIN_COLS_DEGENERATE
    for a max-min epigraph LP (``degenerate``); max-min fairness at 128 jobs (~490 columns) takes it."""
    from policyopt import solver_api

    monkeypatch.setattr(solver_api, "STRUCTURED_MIN_COLS", 500)
    sf = StandardForm("max", np.zeros(450), 0.0, np.zeros(450), np.ones(450), np.zeros(450, np.int8),
                      Triplets(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), (0, 450)).tocsr().tocsc(),
                      np.zeros(0), np.zeros(0), np.ones(0))
    assert solver_api.auto_algorithm(sf, degenerate=True) == "structured"
    assert solver_api.auto_algorithm(sf) != "structured"
    kinds = [({"v100": 3.0, "p100": 2.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "p100": 1.5, "k80": 0.7}, 2, 1.0),
             ({"v100": 1.2, "p100": 1.0, "k80": 0.5}, 4, 2.0), ({"v100": 4.0, "p100": 3.0, "k80": 2.0}, 1, 1.0)]
    p = kinds_problem(kinds, [40, 35, 35, 30], {"v100": 32, "p100": 32, "k80": 32})
    sf, _, _ = compiled("max_min_fairness", p)
    assert solver_api.STRUCTURED_MIN_COLS_DEGENERATE <= sf.num_cols < 500
    fast = get_solver("highs").load(sf.copy(), SolverOptions(degenerate=True)).solve()
    assert str(fast.options.get("fast_path", "")).startswith("aggregated"), fast.options
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    assert fast.objective == pytest.approx(ref.objective, rel=1e-7)
    plain = get_solver("highs").load(sf.copy(), SolverOptions()).solve()  # not degenerate: whole LP
    assert "fast_path" not in plain.options or not str(plain.options["fast_path"]).startswith("aggregated")


def test_aggregation_after_cost_updates_reuses_maps_only_for_the_same_groups() -> None:
    """``aggregate(sf, st, previous)``: after in-place cost updates that keep every group (max-min's
    fill stage: the same cost for identical jobs) the maps and reduced matrix of ``previous`` are
    reused and the reduced costs and bounds equal a fresh aggregation's; a cost that tells two jobs
    of one kind apart gives new groups, built afresh."""
    kinds = [({"v100": 3.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "p100": 1.5}, 2, 1.0),
             ({"p100": 1.0, "k80": 0.5}, 4, 2.0)]
    p = kinds_problem(kinds, [7, 5, 9], {"v100": 4, "p100": 4, "k80": 4})
    sf, _, X = compiled("max_min_fairness", p)
    st = blocks.detect(sf)
    first = blocks.aggregate(sf, st)
    assert st is not None and first is not None
    cols = X.cols.ravel()  # type: ignore[attr-defined]
    cols = cols[cols >= 0]
    sf.c[cols] = 1.0  # the same cost on every allocation column: identical jobs stay identical
    sf.col_upper[cols[:2]] = 0.9  # …but the first job's bounds differ from its kind's others: a new group
    again = blocks.aggregate(sf, st, first)
    fresh = blocks.aggregate(sf, st)
    assert again is not None and fresh is not None and again.groups == first.groups + 1
    assert again.col_src is not first.col_src and np.array_equal(again.col_src, fresh.col_src)
    sf.col_upper[cols[:2]] = 1.0  # back: the groups of `first`, with new costs
    same = blocks.aggregate(sf, st, first)
    fresh = blocks.aggregate(sf, st)
    assert same is not None and fresh is not None
    assert same.col_src is first.col_src and same.reduced.A is first.reduced.A and same.same_reduction(first)
    for f in ("c", "col_lower", "col_upper", "row_lower", "row_upper"):
        assert np.array_equal(getattr(same.reduced, f), getattr(fresh.reduced, f)), f
    assert (same.reduced.A != fresh.reduced.A).nnz == 0
    for f in ("keep_cols", "keep_rows", "col_src", "row_src", "row_div", "group"):
        assert np.array_equal(getattr(same, f), getattr(fresh, f)), f


@pytest.mark.usefixtures("no_transport_route")  # (the modeling-layer path at this size)
def test_warm_degenerate_lps_go_to_highs_below_the_warm_threshold(monkeypatch: pytest.MonkeyPatch) -> None:
    """A warm degenerate LP (the backend holds its basis) tries the fast path only from
    STRUCTURED_MIN_COLS_WARM_DEGENERATE columns; cold, from STRUCTURED_MIN_COLS_DEGENERATE. A kept
    max-min model that grew past 400 columns by arrivals is re-solved by HiGHS warm (no aggregation)
    and its answers equal a cold solve's (objective to 1e-9 relative)."""
    from policyopt import solver_api

    monkeypatch.setattr(solver_api, "STRUCTURED_MIN_COLS", 500)  # (the defaults, not this file's fixture)
    from policyopt import aggregate_cold

    monkeypatch.setattr(aggregate_cold, "MIN_JOBS", 2**62)  # (the whole LP first, not the class route)

    def form(n: int) -> StandardForm:
        return StandardForm("max", np.zeros(n), 0.0, np.zeros(n), np.ones(n), np.zeros(n, np.int8),
                            Triplets(np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0), (0, n)).tocsr().tocsc(),
                            np.zeros(0), np.zeros(0), np.ones(0))

    w = solver_api.STRUCTURED_MIN_COLS_WARM_DEGENERATE
    small, large = form(w - 1), form(w)
    assert solver_api.auto_algorithm(small, degenerate=True) == "structured"
    assert solver_api.auto_algorithm(small, warm=True, degenerate=True) != "structured"
    assert solver_api.auto_algorithm(large, warm=True, degenerate=True) == "structured"
    assert solver_api.auto_algorithm(large, warm=True) == "structured"  # (not degenerate: as before)
    from policyopt.solvers.highs import HighsModel

    kinds = [({"v100": 3.0, "p100": 2.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "p100": 1.5, "k80": 0.7}, 2, 1.0),
             ({"v100": 1.2, "p100": 1.0, "k80": 0.5}, 4, 2.0), ({"v100": 4.0, "p100": 3.0, "k80": 2.0}, 1, 1.0)]
    full = kinds_problem(kinds, [40, 35, 35, 30], {"v100": 32, "p100": 32, "k80": 32})
    jobs = list(full.jobs)
    tried: list[int] = []
    real = HighsModel._solve_structured

    def spy(self: HighsModel) -> tuple[object, str]:
        tried.append(self.sf.num_cols)
        return real(self)

    monkeypatch.setattr(HighsModel, "_solve_structured", spy)
    pol = get_policy("max_min_fairness")
    pol.solve(full.with_jobs(jobs[:120]))  # 361 columns: the whole LP by HiGHS, kept
    assert tried == []
    for k in (134, 137, 140):  # arrivals: the kept model grows past 400 columns, re-solved warm
        r = pol.solve(full.with_jobs(jobs[:k]))
        assert tried == [], tried
        cold = get_policy("max_min_fairness").solve(full.with_jobs(jobs[:k]))
        assert tried and min(tried) >= 400  # (a cold build of it tries the fast path)
        tried.clear()
        assert r.objective == pytest.approx(cold.objective, rel=1e-9)


def test_reduced_lp_feasible_at_zero_runs_primal_without_perturbation() -> None:
    """A reduced LP by primal simplex from its feasible slack basis runs without the bound
    perturbation (as a small cold LP does); a degenerate (max-min epigraph) one keeps it. Both
    answers are certified on the whole LP."""
    p = kinds_problem([({"v100": 3.0, "k80": 1.0}, 1, 1.0), ({"v100": 2.0, "k80": 1.5}, 1, 1.0)], [20, 30],
                      {"v100": 8, "k80": 8})
    for policy, unperturbed in (("max_sum_throughput", True), ("max_min_fairness", False)):
        sf, _, _ = compiled(policy, p)
        degenerate = policy == "max_min_fairness"
        model = get_solver("highs").load(sf.copy(), SolverOptions(degenerate=degenerate))
        res = model.solve()
        assert str(res.options.get("fast_path", "")).startswith("aggregated"), res.options
        small = model._small  # type: ignore[attr-defined]
        mult = small.h.getOptionValue("primal_simplex_bound_perturbation_multiplier")[1]
        assert (mult == 0.0) == unperturbed, (policy, mult)
        ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
        assert res.objective == pytest.approx(ref.objective, rel=1e-7)
