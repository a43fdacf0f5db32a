"""One loaded model per policy object, updated in place when only the job set changes
(``policyopt.incremental``): every answer equals a cold HiGHS simplex solve of the same problem
(objective to 1e-9 relative, allocation within every row to 1e-9), over random sequences of
arrivals, completions, throughput changes and reorderings; anything else goes to the cold path."""
from __future__ import annotations

import threading

import numpy as np
import pytest
from highs_runs import record_highs_runs
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import Cluster, Job, Problem, get_policy
from policyopt import incremental
from policyopt.warm_start import recall

# max-sum at these sizes answers by its transportation LP otherwise (no kept model): see conftest
pytestmark = pytest.mark.usefixtures("no_transport_route")

TYPES = ("v100", "p100", "k80")
POLICIES = [("max_min_fairness", {}), ("max_min_fairness", {"fill": False}), ("max_sum_throughput", {}),
            ("max_sum_throughput", {"normalize": True}), ("max_min_fairness_agnostic", {})]


def make_job(i: int, rng: np.random.Generator, kinds: int | None) -> Job:
    """Job ``j<i>``: distinct throughputs, or one of ``kinds`` kinds (identical blocks: the fast path)."""
    r = np.random.default_rng(int(rng.integers(kinds))) if kinds else rng
    thr = {t: float(r.uniform(0.5, 10)) for t in TYPES if r.random() < 0.85 or t == "k80"}
    return Job(f"j{i}", thr, scale_factor=int(r.choice([1, 1, 2, 4])), weight=float(r.choice([1.0, 2.0])))


def cluster(n: int) -> Cluster:
    return Cluster.from_counts({t: max(4, n // 4) for t in TYPES})


def check_against_cold(pol, name: str, opts: dict, p: Problem) -> None:  # type: ignore[no-untyped-def]
    got = pol.solve(p)
    ref = get_policy(name, algorithm="simplex", **opts).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)
    assert list(got.space.jobs.labels) == [j.id for j in p.jobs]
    if "fill" not in opts and name.startswith("max_min"):
        assert got.extra["fill"]["normalized_throughput_after"] == pytest.approx(
            ref.extra["fill"]["normalized_throughput_after"], rel=1e-7)


def run_sequence(name: str, opts: dict, n: int, steps: list[tuple[int, int]], kinds: int | None, seed: int,
                 kept: bool | None = True) -> None:
    """Apply ``steps`` (kind 0 arrival, 1 completion, 2 throughput change, 3 reorder, 4 several
    arrivals and completions at once; with a draw) to
    an ``n``-job problem, solving each with one policy object; with ``kept``, every step must be an
    in-place update of its model, with ``kept=False`` none (``None``: either)."""
    rng = np.random.default_rng(seed)
    jobs = [make_job(i, rng, kinds) for i in range(n)]
    nxt = n
    cl = cluster(n)
    pol = get_policy(name, **opts)
    check_against_cold(pol, name, opts, Problem(cl, tuple(jobs)))
    expected = 0
    warm = 0  # steps answered by an in-place update, or by a rebuild answered from the kept prices
    for kind, draw in steps:
        before = incremental.state(pol)
        n_before = (before.updates if before is not None else 0, incremental.seeded(pol))
        if kind == 0 or len(jobs) < 3:
            jobs.insert(draw % (len(jobs) + 1), make_job(nxt, rng, kinds))
            nxt += 1
        elif kind == 1:
            jobs.pop(draw % len(jobs))
        elif kind == 2:
            k = draw % len(jobs)
            j = jobs[k]
            jobs[k] = Job(j.id, {c: v * 1.25 for c, v in j.throughputs.items()}, scale_factor=j.scale_factor,
                          weight=j.weight)
        elif kind == 3:
            jobs = jobs[draw % len(jobs):] + jobs[:draw % len(jobs)]
        else:  # several at once: two completions, three arrivals spread over the list
            del jobs[draw % len(jobs)]
            del jobs[(draw // 3) % len(jobs)]
            for k in range(3):
                jobs.insert((draw + 7 * k) % (len(jobs) + 1), make_job(nxt, rng, kinds))
                nxt += 1
        check_against_cold(pol, name, opts, Problem(cl, tuple(jobs)))
        expected += 1
        after = incremental.state(pol)
        updated = after is not None and after is before and after.updates == n_before[0] + 1
        priced = (after is not None and incremental.seeded(pol) == n_before[1] + 1
                  and not after.loaded.holds_model())  # HiGHS never held the rebuilt LP
        warm += updated or priced
    st_ = incremental.state(pol)
    if kept:
        assert warm == expected  # every step: an in-place update or the kept prices
    elif kept is not None:
        assert st_ is None or st_.updates == 0


@pytest.mark.parametrize("name,opts", POLICIES)
@pytest.mark.parametrize("seed", [0, 1])
def test_arrivals_completions_changes_reorders_match_cold(name: str, opts: dict, seed: int) -> None:
    steps = [(0, 3), (1, 5), (2, 7), (0, 0), (3, 4), (1, 0), (4, 11), (2, 2), (0, 9), (4, 5)]
    run_sequence(name, opts, 24, steps, None, seed)


@pytest.mark.parametrize("opts", [{}, {"normalize": True}])
def test_max_sum_updates_in_place_without_the_price_path(opts: dict, no_price_path: None) -> None:
    """With the linking-price path off, every step of max-sum is an in-place update (the route taken
    when the price path does not apply), equal to a cold solve."""
    steps = [(0, 3), (1, 5), (2, 7), (0, 0), (3, 4), (1, 0), (4, 11), (2, 2), (0, 9), (4, 5)]
    run_sequence("max_sum_throughput", opts, 24, steps, None, 0)
    run_sequence("max_sum_throughput", opts, 20, steps[:8], 3, 11)


@pytest.mark.parametrize("name,opts", POLICIES[:3])
def test_jobs_of_kinds_seen_before_match_cold(name: str, opts: dict) -> None:
    """Jobs of three kinds: most arrivals reuse a kept block (by job data), alone and several at once."""
    steps = [(0, 1), (4, 3), (0, 8), (1, 2), (4, 10), (2, 5), (4, 1), (0, 4)]
    run_sequence(name, opts, 20, steps, 3, 11)


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_fast_path_problems_match_cold(name: str) -> None:
    """Jobs of a few kinds, ≥ 500 columns: the structured fast path answers and HiGHS never holds the
    whole LP; each problem is re-solved on the aggregated LP where the jobs' kinds are known, else
    built afresh (tests/test_aggregate_resolve.py), and matches cold."""
    run_sequence(name, {}, 220, [(0, 1), (1, 4), (2, 3), (1, 100), (0, 50)], 12, 3, kept=None)


@settings(max_examples=50, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(range(len(POLICIES))), st.integers(4, 30),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 1000)), min_size=1, max_size=12),
       st.sampled_from([None, 3]), st.integers(0, 10_000))
def test_random_sequences_match_cold(k: int, n: int, steps: list[tuple[int, int]], kinds: int | None,
                                     seed: int) -> None:
    name, opts = POLICIES[k]
    run_sequence(name, opts, n, steps, kinds, seed)  # ≤ 38 jobs: below the fast path's 500 columns


def test_changes_other_than_the_job_set_go_cold() -> None:
    rng = np.random.default_rng(5)
    jobs = [make_job(i, rng, None) for i in range(20)]
    pol = get_policy("max_min_fairness")
    p = Problem(cluster(20), tuple(jobs))
    check_against_cold(pol, "max_min_fairness", {}, p)
    first = incremental.state(pol)
    assert first is not None
    # capacity changed: a cold build (which becomes the kept model)
    q = Problem(Cluster.from_counts({"v100": 3, "p100": 9, "k80": 5}), tuple(jobs[1:]))
    check_against_cold(pol, "max_min_fairness", {}, q)
    second = incremental.state(pol)
    assert second is not None and second is not first and second.updates == 0
    # a worker type more: other configurations
    r = Problem(Cluster.from_counts({"v100": 3, "p100": 9, "k80": 5, "a100": 2}), tuple(jobs[1:]))
    check_against_cold(pol, "max_min_fairness", {}, r)
    third = incremental.state(pol)
    assert third is not None and third is not second and third.updates == 0
    # an option changed in place
    pol.config["fill"] = False
    check_against_cold(pol, "max_min_fairness", {"fill": False}, r.with_jobs(jobs[2:]))
    fourth = incremental.state(pol)
    assert fourth is not None and fourth is not third and fourth.updates == 0
    # then a pure job-set change is an update again
    check_against_cold(pol, "max_min_fairness", {"fill": False}, r.with_jobs(jobs[3:]))
    assert incremental.state(pol) is fourth and fourth.updates == 1


@pytest.mark.parametrize("name,opts", [("max_min_fairness", {}), ("max_sum_throughput", {})])
def test_a_kept_model_reads_its_index_at_the_first_update_only(name: str, opts: dict) -> None:
    """A cold build keeps its model without reading the per-column and per-row job codes (most kept
    models are replaced by another cold build first); the first update reads them from the adopted
    model, and the answer still equals a cold solve."""
    rng = np.random.default_rng(11)
    jobs = [make_job(i, rng, None) for i in range(16)]
    pol = get_policy(name, **opts)
    cl = cluster(16)
    check_against_cold(pol, name, opts, Problem(cl, tuple(jobs[:15])))
    st = incremental.state(pol)
    assert st is not None and st.col_code.size == 0 and st.row_code.size == 0 and not st.var_dims
    model = st._model
    assert model is not None
    want_cols = incremental._codes(model, st.var_layout, True)
    check_against_cold(pol, name, opts, Problem(cl, tuple(jobs[1:15])))  # a completion: an update
    assert incremental.state(pol) is st and st.updates == 1 and st._model is None
    assert set(st.var_dims) == set(model.variables) and set(st.block_dims) == set(model.blocks)
    assert st.col_code.size == st.loaded.sf.num_cols and st.row_code.size == st.loaded.sf.num_rows
    assert st.col_code.size == want_cols[0].size - int(np.sum(want_cols[1] == 0))  # job j0's columns left
    check_against_cold(pol, name, opts, Problem(cl, tuple(jobs[1:])))  # an arrival: a second update
    assert incremental.state(pol) is st and st.updates == 2


@pytest.mark.parametrize("opts", [{"algorithm": "simplex"}, {"solver": "highs:ipm"}, {"space_sharing": True}])
def test_not_kept_outside_auto_highs_and_the_base_space(opts: dict) -> None:
    rng = np.random.default_rng(6)
    jobs = [make_job(i, rng, None) for i in range(12)]
    pol = get_policy("max_sum_throughput", **opts)
    pol.solve(Problem(cluster(12), tuple(jobs)))
    assert incremental.state(pol) is None


def test_kept_model_basis_carries_by_label_to_a_cold_build(no_price_path: None) -> None:
    """After in-place updates the basis is still recalled by labels: a cold build after a change of
    the cluster starts from it and reaches the cold optimum."""
    rng = np.random.default_rng(7)
    jobs = [make_job(i, rng, None) for i in range(30)]
    pol = get_policy("max_sum_throughput")
    pol.solve(Problem(cluster(30), tuple(jobs)))
    pol.solve(Problem(cluster(30), tuple(jobs[1:])))
    st_ = incremental.state(pol)
    assert st_ is not None and st_.updates == 1
    snap = recall(pol)
    assert snap is not None and snap.statuses() is not None
    check_against_cold(pol, "max_sum_throughput", {},
                       Problem(Cluster.from_counts({"v100": 6, "p100": 8, "k80": 8}), tuple(jobs[2:])))
    assert incremental.state(pol) is not st_


def test_concurrent_solves_of_one_policy_object_stay_exact() -> None:
    """Two threads solving with one policy object: one updates the kept model, the other builds cold."""
    rng = np.random.default_rng(8)
    jobs = [make_job(i, rng, None) for i in range(40)]
    pol = get_policy("max_min_fairness")
    cl = cluster(40)
    pol.solve(Problem(cl, tuple(jobs)))
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            for i in range(6):
                check_against_cold(pol, "max_min_fairness", {}, Problem(cl, tuple(jobs[(i + k) % 5:])))
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_update_starts_from_the_previous_basis(name: str, no_price_path: None) -> None:
    """After an arrival and after a completion the kept model's first HiGHS run needs fewer simplex
    iterations than a cold build's (the previous basis, new rows basic, is kept)."""
    import highspy

    rng = np.random.default_rng(9)
    jobs = [make_job(i, rng, None) for i in range(61)]
    cl = cluster(60)
    iters: list[int] = []
    run = highspy.Highs.run

    def counting(self):  # type: ignore[no-untyped-def]
        out = run(self)
        iters.append(int(self.getInfo().simplex_iteration_count))
        return out

    pol = get_policy(name)
    pol.solve(Problem(cl, tuple(jobs[:60])))
    for js in (jobs, jobs[1:]):  # an arrival, then a completion
        p = Problem(cl, tuple(js))
        highspy.Highs.run = counting
        try:
            iters.clear()
            pol.solve(p)
            warm = iters[0]
            iters.clear()
            get_policy(name).solve(p)
            cold = iters[0]
        finally:
            highspy.Highs.run = run
        assert warm < cold, (warm, cold)
    st_ = incremental.state(pol)
    assert st_ is not None and st_.updates == 2


@pytest.mark.parametrize("name,opts", [("max_min_fairness", {"fill": False}), ("max_sum_throughput", {})])
@pytest.mark.parametrize("stall", [False, True])
def test_updated_model_resolves_without_cost_perturbation(monkeypatch: pytest.MonkeyPatch, name: str, opts: dict,
                                                          stall: bool, no_price_path: None) -> None:
    """A kept model's re-solve after an arrival and after a completion runs HiGHS's dual simplex
    without its cost perturbation, under an iteration cap; a cold build's run keeps HiGHS's default.
    ``stall``: the cap at 0, so the arrival's unperturbed run stops at once and is repeated with the
    perturbation. Either way the answers equal a cold simplex solve's."""
    from policyopt.solvers import highs

    if stall:
        monkeypatch.setattr(highs, "_UNPERTURBED_MIN_ITERATIONS", 0)
        monkeypatch.setattr(highs, "_UNPERTURBED_DUAL_ITERATIONS_PER_ROW", 0)
    calls = record_highs_runs(monkeypatch, "solver", "simplex_strategy",
                              "dual_simplex_cost_perturbation_multiplier", "simplex_iteration_limit")
    rng = np.random.default_rng(21)
    jobs = [make_job(i, rng, None) for i in range(41)]
    cl = cluster(40)
    pol = get_policy(name, **opts)
    pol.solve(Problem(cl, tuple(jobs[:40])))
    assert calls and all(c[2] == 1.0 for c in calls), calls  # the cold build: HiGHS's defaults
    for k, js in enumerate((jobs, jobs[1:])):  # an arrival, then a completion
        calls.clear()
        check_against_cold(pol, name, opts, Problem(cl, tuple(js)))
        warm = calls[:len(calls) - 1]  # (the last run is the cold reference's)
        assert warm and warm[0][:3] == ("simplex", 1, 0.0), warm
        assert warm[0][3] < 2**31 - 1
        assert calls[-1][2] == 1.0 and calls[-1][3] == 2**31 - 1, calls  # the reference: defaults back
        if stall and k == 0:
            assert len(warm) == 2 and warm[1][2] == 1.0 and warm[1][3] == 2**31 - 1, warm
        else:
            assert len(warm) == 1 or (stall and len(warm) == 2), warm
    st_ = incremental.state(pol)
    assert st_ is not None and st_.updates == 2


def test_iteration_cap_follows_the_models_size(monkeypatch: pytest.MonkeyPatch, no_price_path: None) -> None:
    """The cap of an unperturbed re-solve is sized by the rows of the model as it is at that run:
    a kept model grown by two arrivals in a row is capped at 1,000 + 1 per row of its new size
    each time (not at the size it had when the cap was first set)."""
    from policyopt.solvers import highs

    seen = record_highs_runs(monkeypatch, "simplex_iteration_limit", "dual_simplex_cost_perturbation_multiplier",
                             model=lambda m: m.sf.num_rows)
    rng = np.random.default_rng(5)
    jobs = [make_job(i, rng, None) for i in range(46)]
    cl = cluster(40)
    pol = get_policy("max_min_fairness", fill=False)
    pol.solve(Problem(cl, tuple(jobs[:40])))
    rows = []
    for n in (43, 46):  # two arrivals of three jobs each
        seen.clear()
        pol.solve(Problem(cl, tuple(jobs[:n])))
        assert seen and seen[0][2] == 0.0, seen  # the kept model's unperturbed re-solve
        rows.append(seen[0][0])
        assert seen[0][1] == highs._UNPERTURBED_MIN_ITERATIONS + highs._UNPERTURBED_DUAL_ITERATIONS_PER_ROW * seen[0][0]
    assert rows[1] > rows[0]
    st_ = incremental.state(pol)
    assert st_ is not None and st_.updates == 2


def test_a_subclass_is_not_updated_unless_it_declares_it() -> None:
    """A subclass may build differently (here: throughputs divided by the number of jobs, which
    changes every block at each arrival), so it does not inherit ``incremental_lp``."""
    from policyopt.formulations.max_sum_throughput import MaxSumThroughput

    class PerJobCount(MaxSumThroughput):
        def build(self, model, space, X):  # type: ignore[no-untyped-def]
            model.maximize((space.throughput(X) * (1.0 / len(space.jobs))).sum())
            return None

    rng = np.random.default_rng(12)
    jobs = [make_job(i, rng, None) for i in range(12)]
    pol = PerJobCount()
    pol.solve(Problem(cluster(12), tuple(jobs)))
    got = pol.solve(Problem(cluster(12), tuple(jobs[1:])))
    assert incremental.state(pol) is None
    ref = PerJobCount(algorithm="simplex").solve(Problem(cluster(12), tuple(jobs[1:])))
    assert got.objective == pytest.approx(ref.objective, rel=1e-7)


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_completion_sets_the_kept_basis_without_completing_it(name: str, no_price_path: None) -> None:
    """A completion deletes a basic column (and for max-min a nonbasic row), so HiGHS drops its
    basis; the statuses it kept go back as a complete basis — not as an *alien* one, which HiGHS
    would factor at once to complete (a second factorization before the run's own) — and the
    answer equals a cold solve's."""
    import highspy

    rng = np.random.default_rng(21)
    jobs = [make_job(i, rng, None) for i in range(40)]
    cl = cluster(40)
    pol = get_policy(name)
    res = pol.solve(Problem(cl, tuple(jobs)))
    aliens: list[bool] = []
    set_basis = highspy.Highs.setBasis

    def recording(self, basis, *args):  # type: ignore[no-untyped-def]
        aliens.append(bool(basis.alien))
        return set_basis(self, basis, *args)

    highspy.Highs.setBasis = recording
    try:
        for _ in range(3):  # completions of the job with the largest allocation (basic columns)
            k = int(np.argmax(res.X.sum(axis=1)))
            js = jobs[:k] + jobs[k + 1:]
            res = pol.solve(Problem(cl, tuple(js)))
            check_against_cold(pol, name, {}, Problem(cl, tuple(js)))
            jobs = js
    finally:
        highspy.Highs.setBasis = set_basis
    assert aliens and not any(aliens), aliens
    st_ = incremental.state(pol)
    assert st_ is not None and st_.updates == 6  # each completion, and check_against_cold's re-solve


def test_a_basis_with_the_wrong_count_is_completed_by_highs() -> None:
    """``restore_basis``/``repair_basis`` pass HiGHS's own statuses as a complete basis; one with a
    basic variable too many (not one per row) is handed to HiGHS to complete, and the re-solve is
    still optimal."""
    import highspy

    from policyopt.solver_api import SolverOptions
    from policyopt.solvers.highs import HighsModel

    rng = np.random.default_rng(4)
    jobs = [make_job(i, rng, None) for i in range(12)]
    pol = get_policy("max_sum_throughput")
    ref = pol.solve(Problem(cluster(12), tuple(jobs)))
    st_ = incremental.state(pol)
    assert st_ is not None
    m = HighsModel(st_.loaded.sf, SolverOptions(algorithm="simplex"))
    first = m.solve()
    b = m.h.getBasis()
    cols = list(b.col_status)
    k = next(i for i, s in enumerate(cols) if s != highspy.HighsBasisStatus.kBasic)
    cols[k] = highspy.HighsBasisStatus.kBasic  # one basic variable too many
    b.col_status = cols
    m.restore_basis(b)
    assert m.h.getBasis().valid
    again = m.resolve()
    assert again.status.value == "optimal"
    assert again.objective == pytest.approx(first.objective, rel=1e-12)
    assert ref.objective is not None


def test_splice_csc_matches_a_dense_splice() -> None:
    """The CSC splice behind in-place updates (kept rows/columns renumbered in order, new entries in
    new rows or new columns) equals the same splice done on dense matrices, with sorted indices."""
    import scipy.sparse as sp

    from policyopt.solvers.highs import _splice_csc

    rng = np.random.default_rng(3)
    for _ in range(400):
        nr, nc = (int(v) for v in rng.integers(1, 25, 2))
        A = sp.random(nr, nc, density=float(rng.uniform(0, 0.6)), format="csc", random_state=int(rng.integers(1 << 30)))
        A.sort_indices()
        kc = (rng.random(nc) < rng.uniform(0.3, 1.0)) | (rng.random() < 0.3)
        kr = (rng.random(nr) < rng.uniform(0.3, 1.0)) | (rng.random() < 0.3)
        nkc, nkr = int(kc.sum()), int(kr.sum())
        n_c, n_r = nkc + int(rng.integers(0, 4)), nkr + int(rng.integers(0, 4))
        cells = ({(int(rng.integers(0, n_r)), int(c)) for c in rng.integers(0, max(n_c, 1), 10)}
                 if n_c and n_r else set())
        cells = {(r, c) for r, c in cells if r >= nkr or c >= nkc}  # no new entry in a kept row and column
        order = rng.permutation(len(cells))
        cl = sorted(cells)
        rows = np.array([cl[i][0] for i in order], np.int64)
        cols = np.array([cl[i][1] for i in order], np.int64)
        vals = rng.normal(size=rows.size)
        got = _splice_csc(A, kc, kr, rows, cols, vals, n_r, n_c)
        ref = np.zeros((n_r, n_c))
        ref[:nkr, :nkc] = A.toarray()[np.ix_(kr, kc)]
        ref[rows, cols] = vals
        assert got.shape == (n_r, n_c)
        assert np.array_equal(got.toarray(), ref)
        assert all(np.all(np.diff(got.indices[got.indptr[j]:got.indptr[j + 1]]) > 0) for j in range(n_c))


def test_updated_variables_carry_the_models_bounds() -> None:
    """The variables an update hands back (over the new job set) point into the updated model and
    carry its column bounds (0 on slots that do not exist), as arrays of the variable's shape."""
    from policyopt.modeling import Model

    rng = np.random.default_rng(11)
    jobs = [make_job(i, rng, None) for i in range(12)]
    pol = get_policy("max_min_fairness")
    pol.solve(Problem(cluster(12), tuple(jobs)))
    p2 = Problem(cluster(12), tuple(jobs[1:] + [make_job(99, rng, None)]))  # a completion and an arrival
    space = pol.make_space(p2)
    got = incremental.update(pol, space)
    assert got is not None
    st_, variables = got
    try:
        sf = st_.loaded.sf
        for var in variables.values():
            assert isinstance(var.lower, np.ndarray) and var.lower.shape == var.cols.shape == var.upper.shape
            m = var.cols >= 0
            assert np.array_equal(var.lower[m], sf.col_lower[var.cols[m]])
            assert np.array_equal(var.upper[m], sf.col_upper[var.cols[m]])
            assert not var.lower[~m].any() and not var.upper[~m].any()
        ref = Model("ref")
        X = space.add_allocation(ref)
        assert variables["X"].cols.shape == X.cols.shape and np.array_equal(variables["X"].cols >= 0, X.cols >= 0)
    finally:
        st_.lock.release()


def test_costs_of_more_columns_than_one_highs_call_takes_all_arrive() -> None:
    """``set_costs`` pushes to HiGHS in pieces of ``_COST_CHUNK``: every piece arrives, in any
    column order, and the re-solve equals a cold solve of the changed LP."""
    import scipy.sparse as sp

    from policyopt import SolverOptions
    from policyopt.solvers import highs
    from policyopt.standard_form import StandardForm

    rng = np.random.default_rng(5)
    n = 2 * highs._COST_CHUNK + 77
    A = sp.csc_matrix(np.vstack([np.ones(n), rng.uniform(0.5, 2.0, n)]))
    sf = StandardForm(sense="max", c=rng.uniform(0, 1, n), offset=0.0, col_lower=np.zeros(n),
                      col_upper=np.ones(n), integrality=np.zeros(n, np.int8), A=A,
                      row_lower=np.full(2, -np.inf), row_upper=np.array([3.0, 4.0]), row_scale=np.ones(2))
    m = highs.HighsModel(sf.copy(), SolverOptions(algorithm="simplex"))
    m.solve()
    cols = rng.permutation(n)
    new = rng.uniform(0, 1, n)
    m.set_costs(cols, new)
    c = sf.c.copy()
    c[cols] = new
    np.testing.assert_array_equal(np.asarray(m.h.getLp().col_cost_), c)
    ref = StandardForm(sense="max", c=c, offset=0.0, col_lower=sf.col_lower, col_upper=sf.col_upper,
                       integrality=sf.integrality, A=A, row_lower=sf.row_lower, row_upper=sf.row_upper,
                       row_scale=sf.row_scale)
    want = highs.HighsModel(ref, SolverOptions(algorithm="simplex")).solve().objective
    assert m.resolve().objective == pytest.approx(want, rel=1e-9)
