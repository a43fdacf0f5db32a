"""The linking-price path (``policyopt.solvers.prices``): LPs with one own row per block and a few
linking rows, re-solved from the previous optimum's linking prices, with a certificate on the whole
LP. Every answer is checked against HiGHS's dual simplex on the same LP (objective to 1e-9
relative, every row and bound to 1e-9)."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from policyopt import Cluster, Job, Problem, SolverOptions, get_policy, incremental
from policyopt.solvers import blocks, highs_prices, prices
from policyopt.solvers.highs import HighsModel
from policyopt.standard_form import StandardForm

# max-sum at these sizes answers by its transportation LP otherwise (no kept model): see conftest
pytestmark = pytest.mark.usefixtures("no_transport_route")


def gub_lp(rng: np.random.Generator, blocks: int, K: int, sense: str = "max", ties: bool = False) -> StandardForm:
    """``blocks`` blocks of 1–5 columns each, one own row ``Σ g_k x_k ≤ u_m`` per block, ``K``
    capacity rows ``Σ a_ik x_k ≤ cap_i`` (positive entries, about a third of the demand), own rows
    first; ``ties``: costs on a coarse grid (many equal ratios)."""
    sizes = rng.integers(1, 6, blocks)
    N = int(sizes.sum())
    own = np.repeat(np.arange(blocks), sizes)
    g = rng.choice([1.0, 0.5, 2.0], N)
    u = rng.choice([1.0, 2.0], blocks)
    link_of = rng.integers(0, K, N)  # each column uses one resource (a worker type) ...
    a = rng.uniform(0.5, 4.0, N)
    extra = rng.random(N) < 0.2  # ... and some a second one
    link2 = (link_of + 1) % K
    c = np.round(rng.uniform(1, 10, N)) if ties else rng.uniform(0.5, 10.0, N)
    if sense == "min":
        c = -c
    rows = np.concatenate([own, blocks + link_of, blocks + link2[extra]])
    cols = np.concatenate([np.arange(N), np.arange(N), np.flatnonzero(extra)])
    vals = np.concatenate([g, a, rng.uniform(0.1, 1.0, int(extra.sum()))])
    R = blocks + K
    A = sp.csc_matrix((vals, (rows, cols)), shape=(R, N))
    demand = np.bincount(link_of, a * (u[own] / g), minlength=K)
    cap = np.maximum(demand * rng.uniform(0.15, 0.5, K), 0.5)
    return StandardForm(sense=sense, c=c, offset=0.0, col_lower=np.zeros(N), col_upper=np.full(N, np.inf),
                        integrality=np.zeros(N, np.int8), A=A,
                        row_lower=np.full(R, -np.inf), row_upper=np.concatenate([u, cap]), row_scale=np.ones(R))


def drop_block(sf: StandardForm, b: int) -> StandardForm:
    """``sf`` without block ``b`` (its own row ``b`` and its columns)."""
    A = sf.A.tocsc()
    keep_c = np.asarray(A[b].toarray().ravel() == 0)
    keep_r = np.ones(sf.num_rows, bool)
    keep_r[b] = False
    return StandardForm(sense=sf.sense, c=sf.c[keep_c], offset=0.0, col_lower=sf.col_lower[keep_c],
                        col_upper=sf.col_upper[keep_c], integrality=sf.integrality[keep_c],
                        A=sp.csc_matrix(A[keep_r][:, keep_c]), row_lower=sf.row_lower[keep_r],
                        row_upper=sf.row_upper[keep_r], row_scale=sf.row_scale[keep_r])


def simplex(sf: StandardForm) -> tuple[float, np.ndarray, np.ndarray]:
    r = HighsModel(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    assert r.ok and r.x is not None and r.row_duals is not None
    return float(r.objective), r.x, r.row_duals


def priced(sf: StandardForm, y: np.ndarray):  # type: ignore[no-untyped-def]
    m = HighsModel(sf.copy(), SolverOptions())
    m.set_dual_start(y)
    return m.solve()


def check(sf: StandardForm, res, ref: float) -> None:  # type: ignore[no-untyped-def]
    assert res.ok and res.x is not None
    assert res.objective == pytest.approx(ref, rel=1e-9, abs=1e-12)
    assert sf.objective_value(res.x) == pytest.approx(ref, rel=1e-9, abs=1e-12)
    assert sf.violation(res.x) <= 1e-9


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), blocks=st.integers(4, 120), K=st.integers(1, 6),
       change=st.sampled_from(["drop", "costs", "caps", "bad prices"]), sense=st.sampled_from(["max", "min"]),
       ties=st.booleans())
def test_price_answers_equal_dual_simplex(seed: int, blocks: int, K: int, change: str, sense: str,
                                          ties: bool) -> None:
    """Solve an LP, change it (a block dropped, costs or capacities moved, or prices made up), and
    re-solve from the old linking prices: the answer equals a cold dual simplex solve."""
    rng = np.random.default_rng(seed)
    sf = gub_lp(rng, blocks, K, sense, ties)
    _, _, y = simplex(sf)
    new = sf.copy()
    y_new = y.copy()
    if change == "drop":
        b = int(rng.integers(blocks))
        new = drop_block(sf, b)
        y_new = np.delete(y, b)
    elif change == "costs":
        new.c = sf.c * rng.uniform(0.9, 1.1, sf.num_cols)
    elif change == "caps":
        new.row_upper[blocks:] = sf.row_upper[blocks:] * rng.uniform(0.7, 1.3, K)
    else:
        y_new = rng.normal(0.0, 3.0, sf.num_rows)
    ref, _, _ = simplex(new)
    res = priced(new, y_new)
    check(new, res, ref)


def test_detect_reads_the_shape_from_the_standard_form() -> None:
    rng = np.random.default_rng(3)
    sf = gub_lp(rng, 40, 3)
    shape = prices.detect(sf)
    assert shape is not None and shape.K == 3 and shape.B == 40
    np.testing.assert_array_equal(shape.link, [40, 41, 42])
    # a column in two own rows, a positive lower bound, a column lower bound: not this shape
    two = sf.copy()
    A = two.A.tolil()
    A[0, int(np.flatnonzero(sf.A[1].toarray().ravel())[0])] = 1.0
    two.A = sp.csc_matrix(A)
    assert prices.detect(two) is None
    low = sf.copy()
    low.row_lower[5] = 0.5
    assert prices.detect(low) is None
    lb = sf.copy()
    lb.col_lower[2] = 0.1
    assert prices.detect(lb) is None
    # max-min's LP (a linking epigraph column t in every block) is not this shape
    p = Problem(Cluster.from_counts({"v100": 4, "k80": 4}),
                tuple(Job(f"j{i}", {"v100": 1.0 + i, "k80": 0.5 + i}) for i in range(12)))
    from policyopt.modeling import Model

    pol = get_policy("max_min_fairness", fill=False)
    space = pol.make_space(p)
    model = Model("m")
    pol.build(model, space, space.add_allocation(model))
    assert prices.detect(model.compile()) is None


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_detect_on_shuffled_rows_and_columns(seed: int) -> None:
    """Rows and columns in any order (linking rows between own rows, columns not sorted by their
    own row, a non-linking row without entries): each field of the shape equals its definition
    taken column by column, and the path from the old prices answers equal to dual simplex."""
    rng = np.random.default_rng(seed)
    sf = gub_lp(rng, 30, 3)
    R, N = sf.num_rows + 1, sf.num_cols  # one empty row (bounds [-inf, 1]) added last
    rp, cp = rng.permutation(R), rng.permutation(N)
    A = sp.vstack([sf.A, sp.csr_matrix((1, N))]).tocsc()
    sh = StandardForm(sense="max", c=sf.c[cp], offset=0.0, col_lower=np.zeros(N), col_upper=sf.col_upper[cp],
                      integrality=np.zeros(N, np.int8), A=sp.csc_matrix(A[rp][:, cp]),
                      row_lower=np.append(sf.row_lower, -np.inf)[rp], row_upper=np.append(sf.row_upper, 1.0)[rp],
                      row_scale=np.ones(R))
    shape = prices.detect(sh)
    assert shape is not None and shape.K == 3 and shape.B == 30
    link = np.flatnonzero(rp >= 30)[np.isin(rp[rp >= 30], [30, 31, 32])]
    np.testing.assert_array_equal(shape.link, link)
    D = sh.A.toarray()
    Dn = D.copy()
    Dn[link] = 0.0
    own = np.array([int(np.flatnonzero(Dn[:, k])[0]) for k in range(N)])
    np.testing.assert_array_equal(shape.own, own)
    np.testing.assert_array_equal(shape.g, D[own, np.arange(N)])
    rows = np.unique(own)
    np.testing.assert_array_equal(shape.rows, rows)
    np.testing.assert_array_equal(shape.block, np.searchsorted(rows, own))
    np.testing.assert_array_equal(shape.start, np.append(0, np.cumsum([np.count_nonzero(own == r) for r in rows])))
    assert shape.order is not None
    np.testing.assert_array_equal(shape.order, np.argsort(own, kind="stable"))
    lnum = np.full(R, -1)
    lnum[link] = np.arange(3)
    np.testing.assert_array_equal(shape.lnum, lnum)
    _, _, y = simplex(sh)
    new = sh.copy()
    new.c = sh.c * rng.uniform(0.9, 1.1, N)
    ref, _, _ = simplex(new)
    res = priced(new, y)
    assert res.options.get("fast_path", "").startswith("linking prices")
    check(new, res, ref)


def test_a_wrong_sized_dual_start_is_refused() -> None:
    sf = gub_lp(np.random.default_rng(4), 10, 2)
    m = HighsModel(sf, SolverOptions())
    with pytest.raises(ValueError, match="row_duals has shape"):
        m.set_dual_start(np.zeros(sf.num_rows + 1))


def test_prices_that_certify_answer_without_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    """From the optimal prices of the same LP (and after a small change of the capacities, which
    keeps the basis) the path answers at once: the tied blocks share their rows at the same prices,
    no small LP is solved and HiGHS never holds the whole LP; the answer's duals certify it."""
    def no_small_lp(*_: object) -> None:
        raise AssertionError("a small LP was solved")

    monkeypatch.setattr(highs_prices, "solve_small_lp", no_small_lp)
    sf = gub_lp(np.random.default_rng(5), 300, 3)
    ref, _, y = simplex(sf)
    moved = sf.copy()
    moved.row_upper[300:] *= 1.0 + 1e-6
    for lp in (sf, moved):
        m = HighsModel(lp.copy(), SolverOptions())
        m.set_dual_start(y)
        res = m.solve()
        check(lp, res, simplex(lp)[0])
        assert res.options["fast_path"].startswith("linking prices: the same prices")
        assert not m.holds_model()
        assert res.row_duals is not None and res.col_duals is not None
        ok, primal, bound, _, _ = blocks.certify(lp, res.x, res.row_duals / lp.row_scale)
        assert ok and bound == pytest.approx(primal, rel=1e-9)


@pytest.mark.parametrize("pivots", [0, prices.PIVOTS])
def test_every_route_answers_exactly(pivots: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Over 30 random LPs with one block dropped: some re-solves are answered at the same prices
    (the basis held), some after dual simplex steps on the prices (with steps allowed), the rest by
    a small LP; every answer equal to dual simplex."""
    monkeypatch.setattr(prices, "PIVOTS", pivots)
    routes = {"same": 0, "steps": 0, "small": 0}
    for seed in range(30):
        rng = np.random.default_rng(300 + seed)
        blocks_ = int(rng.integers(40, 200))
        sf = gub_lp(rng, blocks_, int(rng.integers(1, 5)), str(rng.choice(["max", "min"])))
        _, _, y = simplex(sf)
        b = int(rng.integers(blocks_))
        new = drop_block(sf, b)
        res = priced(new, np.delete(y, b))
        check(new, res, simplex(new)[0])
        note = str(res.options.get("fast_path", ""))
        routes["same"] += "the same prices" in note
        routes["steps"] += "dual simplex step" in note
        routes["small"] += "round(s)" in note and "whole LP" not in note
    assert routes["same"] >= 3, routes
    if pivots:
        assert routes["steps"] >= 3, routes
    else:
        assert routes["small"] >= 3 and routes["steps"] == 0, routes


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**31 - 1), blocks_=st.integers(16, 80), K=st.integers(1, 5),
       sense=st.sampled_from(["max", "min"]), point=st.sampled_from(["optimal", "random", "infeasible"]))
def test_structured_certificate_equals_the_generic_one(seed: int, blocks_: int, K: int, sense: str,
                                                       point: str) -> None:
    """``prices._certify`` (reduced costs from the ratios) gives the objective, the dual bound, the
    violation, the multipliers and the reduced costs of ``blocks.certify`` on the whole LP, and the
    same verdict, for optimal, random and infeasible points under the optimal or random prices."""
    rng = np.random.default_rng(seed)
    sf = gub_lp(rng, blocks_, K, sense)
    _, x_opt, y_opt = simplex(sf)
    shape = prices.detect(sf)
    assume(shape is not None)  # (a few linking rows may not stand out on a small LP)
    assert shape is not None
    sign = 1.0 if sense == "max" else -1.0
    p = y_opt[shape.link] if point == "optimal" else rng.uniform(-1.0, 5.0, K)
    x = x_opt if point == "optimal" else rng.uniform(0.0, 0.3, sf.num_cols)
    if point == "infeasible":
        x = x * 50.0
    red, _, best = prices._ratios(shape, sign * sf.c, sign * p)
    ok, primal, bound, viol, y, d = prices._certify(sf, shape, sign, x, sign * p, red, best, 1e-9, 1e-9)
    ok2, primal2, bound2, viol2, d2 = blocks.certify(sf, x, y)
    assert (primal, viol) == (pytest.approx(primal2, rel=1e-12, abs=1e-12), pytest.approx(viol2, rel=1e-12, abs=1e-12))
    assert bound == pytest.approx(bound2, rel=1e-9, abs=1e-9)
    np.testing.assert_allclose(d, d2, rtol=1e-9, atol=1e-9)
    assert ok == ok2 and (point != "optimal" or ok) and (point != "infeasible" or not ok)


def distinct_jobs(n: int, seed: int) -> list[Job]:
    rng = np.random.default_rng(seed)
    return [Job(f"j{i}", {t: float(rng.uniform(0.5, 10)) for t in ("v100", "p100", "k80")},
                scale_factor=int(rng.choice([1, 1, 2, 4]))) for i in range(n)]


@pytest.mark.parametrize("normalize", [False, True])
def test_max_sum_re_solves_start_from_the_kept_prices(normalize: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    """Max-sum throughput after arrivals and completions (from 1,500 columns), each re-solve equal to
    a cold dual simplex solve and answered by the price path (HiGHS never holds the LP): after an
    arrival, a fresh build started from the kept model's capacity prices; after completions only,
    the kept model with the jobs that left held at 0 — no build and no detection of the shape
    (before, every completion was a fresh build and a detection)."""
    detected = []
    detect = prices.detect
    monkeypatch.setattr(prices, "detect", lambda sf: detected.append(1) or detect(sf))
    jobs = distinct_jobs(520, 1)
    cl = Cluster.from_counts({"v100": 100, "p100": 100, "k80": 100})
    pol = get_policy("max_sum_throughput", normalize=normalize)
    pol.solve(Problem(cl, tuple(jobs[:510])))  # 1,530 columns: from prices.PRICE_MIN_COLS
    seqs = [(jobs[:511], "arrival"), (jobs[1:511], "completion"), (jobs[1:512], "arrival"),
            (jobs[1:300] + jobs[301:512], "completion"), (jobs[2:300] + jobs[301:512], "completion"),
            (jobs[2:300] + jobs[301:400] + jobs[402:512], "completion"), (jobs[2:513], "arrival"),
            (jobs[2:514], "arrival")]
    for js, change in seqs:
        before, seeded, n_detect = incremental.state(pol), incremental.seeded(pol), len(detected)
        updates = before.updates if before is not None else 0
        p = Problem(cl, tuple(js))
        got = pol.solve(p)
        ref = get_policy("max_sum_throughput", algorithm="simplex", normalize=normalize).solve(p)
        assert got.objective == pytest.approx(ref.objective, rel=1e-9)
        assert not got.space.check(got.X, tol=1e-9)
        st_ = incremental.state(pol)
        assert st_ is not None and not st_.loaded.holds_model()
        if change == "completion":
            assert st_ is before and st_.updates == updates + 1 and incremental.seeded(pol) == seeded
            assert len(detected) == n_detect
        else:
            assert st_ is not before and incremental.seeded(pol) == seeded + 1


def test_a_job_back_with_the_id_of_one_that_left_is_new(monkeypatch: pytest.MonkeyPatch) -> None:
    """A job that left is held at 0 in the kept model; a job with its id arriving later (other
    throughputs) is a new job, not the held one — whether the next step builds afresh or (forced
    here: the held model solved by HiGHS, then no price path) splices the kept model, deleting the
    held job. Every answer equals a cold dual simplex solve."""
    jobs = distinct_jobs(520, 4)
    cl = Cluster.from_counts({"v100": 100, "p100": 100, "k80": 100})
    back = Job(jobs[3].id, {t: 2.0 * v for t, v in jobs[3].throughputs.items()})
    steps = [jobs[:3] + jobs[4:515], jobs[:3] + jobs[4:515] + [back], jobs[:3] + jobs[5:515] + [back]]
    for splice in (False, True):
        pol = get_policy("max_sum_throughput")
        pol.solve(Problem(cl, tuple(jobs[:515])))
        first = incremental.state(pol)
        for k, js in enumerate(steps):
            if splice and k == 0:  # the held model solved whole by HiGHS (which then holds it)
                monkeypatch.setattr(prices, "solve", lambda *a, **kw: (None, "forced"))
            if splice and k == 1:  # no price path: the kept model is spliced
                monkeypatch.undo()
                monkeypatch.setattr(prices, "PRICE_MIN_COLS", 10**9)
            p = Problem(cl, tuple(js))
            got = pol.solve(p)
            ref = get_policy("max_sum_throughput", algorithm="simplex").solve(p)
            assert got.objective == pytest.approx(ref.objective, rel=1e-9)
            assert not got.space.check(got.X, tol=1e-9)
            st_ = incremental.state(pol)
            assert st_ is not None
            if k == 0:
                assert st_ is first and int(st_.dead.sum()) == 1
            if splice and k >= 1:  # spliced in place: the held job deleted, the one back added
                assert st_ is first and st_.updates == k + 1 and not st_.dead.any()
                assert len(st_.ids) == len(js)
        monkeypatch.undo()


def test_most_re_solves_after_a_change_are_answered_by_prices() -> None:
    """Over 30 random LPs (40–200 blocks, 2–4 linking rows) with one block dropped, the path answers
    at least 80 % from the old prices (the rest: HiGHS), every answer exact."""
    answered = 0
    for seed in range(30):
        rng = np.random.default_rng(100 + seed)
        blocks = int(rng.integers(40, 200))
        sf = gub_lp(rng, blocks, int(rng.integers(2, 5)))
        _, _, y = simplex(sf)
        b = int(rng.integers(blocks))
        new = drop_block(sf, b)
        res = priced(new, np.delete(y, b))
        check(new, res, simplex(new)[0])
        answered += str(res.options.get("fast_path", "")).startswith("linking prices: ") and \
            "whole LP" not in res.options["fast_path"]
    assert answered >= 24, answered


@pytest.mark.parametrize("cheap_test", [True, False])
def test_a_wrong_guess_of_the_shape_costs_one_cold_build(monkeypatch: pytest.MonkeyPatch, cheap_test: bool) -> None:
    """When the cheap test on the kept model says the shape may fit but the fresh build's full test
    says it does not (forced here), that step is a cold build started from the carried basis, and
    the next ones are in-place updates again; answers stay exact."""
    monkeypatch.setattr(prices, "detect", lambda sf: None)
    monkeypatch.setattr(prices, "plausible", lambda sf: True)
    monkeypatch.setattr(prices, "PRICE_MIN_COLS", 0)  # (a small LP here)
    if not cheap_test:  # a large LP: the kept model's layout alone decides the guess
        monkeypatch.setattr(prices, "PLAUSIBLE_MAX_NNZ", 0)
    jobs = distinct_jobs(41, 2)
    cl = Cluster.from_counts({"v100": 8, "p100": 8, "k80": 8})
    pol = get_policy("max_sum_throughput")
    pol.solve(Problem(cl, tuple(jobs[:40])))
    first = incremental.state(pol)
    for js in (jobs, jobs[1:], jobs[2:]):
        p = Problem(cl, tuple(js))
        got = pol.solve(p)
        ref = get_policy("max_sum_throughput", algorithm="simplex").solve(p)
        assert got.objective == pytest.approx(ref.objective, rel=1e-9)
    st_ = incremental.state(pol)
    assert st_ is not None and st_ is not first and st_.updates == 2 and incremental.seeded(pol) == 0


def test_a_policy_whose_solve_ignores_the_prices_keeps_updating(monkeypatch: pytest.MonkeyPatch) -> None:
    """Max-min fairness with ``fill`` solves through its own stages, which do not start from left
    prices: if the kept model's guess says rebuild (forced here), one step is built afresh and the
    later ones are in-place updates again."""
    monkeypatch.setattr(incremental.JobSetModel, "prefers_rebuild", lambda self: self.rebuild_ok)
    jobs = distinct_jobs(41, 3)
    cl = Cluster.from_counts({"v100": 8, "p100": 8, "k80": 8})
    pol = get_policy("max_min_fairness")
    pol.solve(Problem(cl, tuple(jobs[:40])))
    for js in (jobs, jobs[1:], jobs[2:]):
        p = Problem(cl, tuple(js))
        got = pol.solve(p)
        ref = get_policy("max_min_fairness", algorithm="simplex").solve(p)
        assert got.objective == pytest.approx(ref.objective, rel=1e-9)
    st_ = incremental.state(pol)
    assert st_ is not None and st_.updates == 2 and not st_.rebuild_ok


def test_small_kept_models_are_updated_in_place() -> None:
    """Below ``prices.PRICE_MIN_COLS`` columns an update in place with a warm HiGHS run is cheaper:
    a small max-sum model is updated, not rebuilt from its prices."""
    jobs = distinct_jobs(62, 4)
    cl = Cluster.from_counts({"v100": 12, "p100": 12, "k80": 12})
    pol = get_policy("max_sum_throughput")
    pol.solve(Problem(cl, tuple(jobs[:60])))
    for js in (jobs[:61], jobs[1:61], jobs[1:62]):
        p = Problem(cl, tuple(js))
        assert pol.solve(p).objective == pytest.approx(
            get_policy("max_sum_throughput", algorithm="simplex").solve(p).objective, rel=1e-9)
    st_ = incremental.state(pol)
    assert st_ is not None and st_.updates == 3 and incremental.seeded(pol) == 0


def test_a_held_models_basis_labels_read_from_the_adopted_model() -> None:
    """After completions answered on the adopted model (its codes never read), the basis snapshot's
    labelled rows are read from that model when used: they equal those read from the codes, and a
    cold build after another change (the cluster) starts from them and is exact."""
    from policyopt import warm_start

    jobs = distinct_jobs(520, 5)
    cl = Cluster.from_counts({"v100": 100, "p100": 100, "k80": 100})
    pol = get_policy("max_sum_throughput")
    pol.solve(Problem(cl, tuple(jobs[:515])))
    pol.solve(Problem(cl, tuple(jobs[:7] + jobs[8:515])))
    pol.solve(Problem(cl, tuple(jobs[:7] + jobs[8:300] + jobs[301:515])))
    st_ = incremental.state(pol)
    snap = warm_start.recall(pol)
    assert st_ is not None and st_._model is not None and snap is not None and int(st_.dead.sum()) == 2
    lazy = {k: b.row_ids.copy() for k, b in snap.model.blocks.items()}
    st_._index()  # the codes, read now: the same rows by label
    space = pol.make_space(Problem(cl, tuple(jobs[:7] + jobs[8:300] + jobs[301:515])))
    eager = st_.snapshot(space, snap.model.variables)
    assert lazy.keys() == eager.model.blocks.keys()
    for k in lazy:
        np.testing.assert_array_equal(lazy[k], eager.model.blocks[k].row_ids)
        assert (lazy[k] >= 0).sum() > 0
    other = Problem(Cluster.from_counts({"v100": 90, "p100": 100, "k80": 110}),
                    tuple(jobs[:7] + jobs[8:300] + jobs[301:515]))
    got = pol.solve(other)
    ref = get_policy("max_sum_throughput", algorithm="simplex").solve(other)
    assert got.objective == pytest.approx(ref.objective, rel=1e-9)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 8, 9, 12])
def test_small_square_solves_equal_lapack(n: int) -> None:
    """``_solve_square`` (Python floats up to ``SMALL_SOLVE`` unknowns, LAPACK above) equals
    ``np.linalg.solve``: on random sparse systems, on one whose diagonal starts at 0 (a row exchange
    needed), and gives ``None`` for a singular one."""
    rng = np.random.default_rng(n)
    for _ in range(20):
        M = rng.uniform(-4.0, 4.0, (n, n)) * (rng.random((n, n)) < 0.5) + np.diag(rng.uniform(0.5, 2.0, n))
        rhs = rng.uniform(-3.0, 3.0, n)
        z = prices._solve_square(M, rhs)
        assert z is not None
        np.testing.assert_allclose(z, np.linalg.solve(M, rhs), rtol=1e-9, atol=1e-9)
    P = np.eye(n)[np.roll(np.arange(n), 1)] * rng.uniform(1.0, 2.0, n)  # a scaled cyclic permutation
    z = prices._solve_square(P, np.arange(1.0, n + 1))
    assert z is not None
    np.testing.assert_allclose(P @ z, np.arange(1.0, n + 1), rtol=1e-12)
    S = rng.uniform(1.0, 2.0, (n, n))
    S[:, n // 2] = 0.0
    assert prices._solve_square(S, np.ones(n)) is None
