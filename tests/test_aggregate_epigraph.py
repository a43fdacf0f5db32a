"""Max-min fairness's aggregated re-solve in class totals (``policyopt.aggregate_epigraph``): its
epigraph column ``t`` has an entry in each class's rows, so a count change is a rank-one change of
``t``'s column (the max-min stage) or of the right-hand side (the ``fill`` stage, ``t`` at its lower
bound). Every answer equals a cold HiGHS simplex solve of the whole LP; for other counts an answer's
point and multipliers pass the reduced LP's own certificate and HiGHS from scratch finds its
objective; a basis that no longer fits, or a corrupted one, is refused and the re-solve answered
from the kept factorization or by HiGHS, exactly."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from policyopt import Cluster, Job, Problem, aggregate_cold, aggregate_epigraph, get_policy, incremental
from policyopt._aggregate_parts import certify
from policyopt.aggregate_epigraph import EpigraphTotals, cross_column
from policyopt.aggregate_resolve import AggregateModel

TYPES = ("v100", "p100", "k80")
#: the first call at N jobs builds and keeps the model (max-min's too: see conftest)
pytestmark = pytest.mark.usefixtures("max_min_arrays_as_max_sum")
N = 300

CLUSTER = Cluster.from_counts({t: N // 4 for t in TYPES})
NAME = "max_min_fairness"
KINDS = 12  # (on this cluster every re-solve below keeps its bases: with fewer kinds some bases change)


def kind_job(i: int, k: int) -> Job:
    """Job ``j<i>`` of kind ``k``: its throughputs, scale factor and weight depend on ``k`` only."""
    r = np.random.default_rng(1000 + k)
    thr = {t: float(r.uniform(0.5, 10)) for t in TYPES if r.random() < 0.8 or t == "k80"}
    return Job(f"j{i}", thr, scale_factor=int(r.choice([1, 2, 4])), weight=float(r.choice([1.0, 2.0])))


def first_jobs() -> list[Job]:
    return [kind_job(i, i % KINDS) for i in range(N)]


def check(pol, jobs: list[Job], **opts):
    """Solve with ``pol``: the answer equals a cold simplex solve of the whole LP (objective to 1e-9
    relative, the allocation feasible to 1e-9; with ``fill``, its normalized throughput total to 1e-7)."""
    p = Problem(CLUSTER, tuple(jobs))
    got = pol.solve(p)
    ref = get_policy(NAME, algorithm="simplex", **opts).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)
    if opts.get("fill", True):
        a, b = got.extra["fill"]["normalized_throughput_after"], ref.extra["fill"]["normalized_throughput_after"]
        assert a == pytest.approx(b, rel=1e-7)
    return got


def _kept(pol) -> AggregateModel:
    st = incremental.state(pol)
    assert isinstance(st, AggregateModel)
    return st


@pytest.mark.usefixtures("no_transport_route")  # (the first call keeps the model: see conftest)
@pytest.mark.parametrize("whole_lp_first", [False, True])
@pytest.mark.parametrize("fill", [True, False])
def test_re_solves_are_answered_in_class_totals(monkeypatch: pytest.MonkeyPatch, whole_lp_first: bool,
                                                fill: bool) -> None:
    """Arrivals and completions of known kinds: both stages answered in class totals (no HiGHS run,
    no simplex step), each equal to a cold simplex solve of the whole LP; the first call by the class
    route or by the whole LP's fast path (its reduced LP taken over)."""
    if whole_lp_first:
        monkeypatch.setattr(aggregate_cold, "MIN_JOBS", 2**62)
    opts = {} if fill else {"fill": False}
    pol = get_policy(NAME, **opts)
    jobs = first_jobs()
    check(pol, jobs, **opts)
    rng = np.random.default_rng(5)
    nxt = N
    for step in range(8):
        if step % 2:
            del jobs[int(rng.integers(len(jobs)))]
        else:
            jobs.insert(int(rng.integers(len(jobs) + 1)), kind_job(nxt, int(rng.integers(KINDS))))
            nxt += 1
        got = check(pol, jobs, **opts)
        if fill:
            assert got.extra["fill"]["steps"] == 0
    st = _kept(pol)
    assert st.cross is not None and st.epi is not None and st.epi.t_basic
    assert st.epi.answers >= 7 and st.updates >= 8 and st.small.runs <= 2
    if fill:
        assert st.epi_fill is not None and not st.epi_fill[0].t_basic and st.epi_fill[0].answers >= 7


def _re_solved_once() -> tuple[Any, list[Job], AggregateModel]:
    """A policy object after a first call and one re-solve (an arrival), its jobs and kept model
    (both stages' class totals taken)."""
    pol = get_policy(NAME)
    jobs = first_jobs()
    check(pol, jobs)
    jobs.append(kind_job(N, 2))
    check(pol, jobs)
    st = _kept(pol)
    assert st.epi is not None and st.epi_fill is not None
    return pol, jobs, st


def _after_one_re_solve() -> AggregateModel:
    return _re_solved_once()[2]


def _at(st: AggregateModel, mult: np.ndarray) -> None:
    """The reduced LP's standard form at the multiplicities ``mult`` (compiled costs and bounds)."""
    st._restore(mult)
    st.mult = mult


def _fill_lp(st: AggregateModel, t_low: float) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The ``fill`` stage's columns, costs (``m_g`` times the kept unit costs), full cost vector and
    column lower bounds (``t ≥ t_low``) in the reduced LP at its current multiplicities."""
    assert st.epi_fill is not None and st.cross is not None
    _, cols, unit = st.epi_fill
    s = np.append(st.mult, 1).astype(np.float64)[st.col_group[cols]]
    costs = unit * s
    sf = st.small.sf
    c = np.zeros(sf.num_cols)
    c[cols] = costs
    lower = sf.col_lower.copy()
    lower[st.cross[0]] = t_low
    return cols, costs, c, lower


def test_an_answer_passes_the_reduced_lps_own_certificate() -> None:
    """For other multiplicities (two classes up or down by a few jobs), both stages' answers are the
    reduced LP's as it stands: its general certificate (``certify``: feasible, the Lagrangian bound of
    the multipliers equal to the objective) passes with the same objective and bound, and HiGHS from
    scratch finds the same objective."""
    st = _after_one_re_solve()
    epi, (fill, _, _) = st.epi, st.epi_fill  # type: ignore[misc]
    assert epi is not None
    sf, small = st.small.sf, st.small
    rng = np.random.default_rng(7)
    answered = 0
    for _ in range(12):
        mult = st.mult.copy()
        pick = rng.choice(mult.size, size=2, replace=False)
        mult[pick] = np.maximum(1, mult[pick] + rng.integers(-3, 4, size=2))
        _at(st, mult)
        got = epi.answer(mult, -np.inf)
        if got is None:
            continue
        x, y, primal, bound, _ = got
        ok, primal2, bound2, _ = certify(sf, x, y)
        assert ok and primal2 == pytest.approx(primal, rel=1e-12) and bound2 == pytest.approx(bound, rel=1e-9)
        st.sync()
        small.clear_warm_start()
        x3, _ = small.run_point()
        assert x3 is not None and float(sf.c @ x3) == pytest.approx(primal, rel=1e-9)
        # the fill stage at t ≥ t*(1 − 1e-9)
        t_low = primal - 1e-9 * abs(primal)
        cols, costs, c, lower = _fill_lp(st, t_low)
        got2 = fill.answer(mult, t_low)
        assert got2 is not None
        x2, y2, primal2, bound2, _ = got2
        ok, p2, b2, _ = certify(sf, x2, y2, c=c, col_lower=lower)
        assert ok and p2 == pytest.approx(primal2, rel=1e-12) and b2 == pytest.approx(bound2, rel=1e-9)
        small.set_costs(np.arange(sf.num_cols), c)
        small.set_col_bounds(np.arange(sf.num_cols), lower, sf.col_upper)
        small.clear_warm_start()
        x4, _ = small.run_point()
        assert x4 is not None and float(c @ x4) == pytest.approx(p2, rel=1e-9)
        st.loaded.touched = True  # (costs and bounds changed in HiGHS: the next _restore compares all)
        st._held = (sf.A.data[st.lin_pos].copy(), c.copy(), lower.copy(), sf.col_upper.copy(),
                    sf.row_lower.copy(), sf.row_upper.copy())
        answered += 1
    assert answered >= 8


def test_a_basis_that_no_longer_fits_or_a_corrupted_one_is_refused() -> None:
    """Multiplicities far from the basis's (one class 10–50 times larger or smaller) leave its point
    infeasible for some classes: refused; every other answer passes the general certificate. A
    corrupted bound term, right-hand side or reduced cost of ``t`` is refused."""
    st = _after_one_re_solve()
    epi = st.epi
    assert epi is not None
    base = st.mult.copy()
    assert epi.answer(base, -np.inf) is not None
    refused = 0
    for g in range(base.size):
        for f in (0.05, 0.3, 3.0, 10.0, 50.0):
            mult = base.copy()
            mult[g] = max(1, int(mult[g] * f))
            got = epi.answer(mult, -np.inf)
            if got is None:
                refused += 1
                continue
            _at(st, mult)
            assert certify(st.small.sf, got[0], got[1])[0]
    assert refused >= 2
    _at(st, base)
    assert epi.answer(base, -np.inf) is not None
    # the bound's terms, a right-hand side of the point, t's reduced cost's coefficients
    for name, k in (("beta", 0), ("P", int(np.flatnonzero(epi.P)[0])), ("g0", int(np.flatnonzero(epi.g0)[0]))):
        arr = getattr(epi, name)
        keep = arr.copy()
        arr.flat[k] += 1e-3 * max(1.0, abs(float(arr.flat[k])))
        assert epi.answer(base, -np.inf) is None, name
        arr[...] = keep
    assert epi.answer(base, -np.inf) is not None


@pytest.mark.usefixtures("no_transport_route")
def test_a_refused_answer_falls_back_and_the_basis_is_taken_again() -> None:
    """Where the class totals refuse (here: corrupted), the kept factorization answers, exactly, and
    the class totals are taken again from the kept basis at the next re-solve, which they answer."""
    pol, jobs, st = _re_solved_once()
    old, old_fill = st.epi, st.epi_fill
    assert old is not None and old_fill is not None
    old.beta[0] += 1.0  # (its bound no longer the objective: refused)
    old_fill[0].beta[0] += 1.0
    answered, runs = st.factor_answers, st.small.runs
    jobs.append(kind_job(N + 1, 4))
    check(pol, jobs)
    assert st.factor_answers == answered + 1 and st.small.runs == runs  # (the kept factorization's answer)
    assert st.epi is None and st.epi_fill is None
    del jobs[3]
    check(pol, jobs)
    assert st.epi is not None and st.epi is not old and st.epi.answers == 1
    assert st.epi_fill is not None and st.epi_fill is not old_fill and st.epi_fill[0].answers == 1
    assert st.small.runs == runs


def test_the_first_re_solve_after_a_class_route_first_call_runs_no_highs(no_transport_route: None) -> None:
    """A first call takes no class totals (a process that solves once never reads them); the first
    re-solve takes both stages' from the bases the first call kept and is answered from them."""
    pol = get_policy(NAME)
    jobs = first_jobs()
    check(pol, jobs)
    st = _kept(pol)
    runs = st.small.runs
    assert st.epi is None and st.epi_fill is None
    jobs.append(kind_job(N, 5))
    got = check(pol, jobs)
    assert st.small.runs == runs and st.epi is not None and st.epi_fill is not None
    assert st.epi.answers == 1 and st.epi_fill[0].answers == 1
    assert got.extra["fill"]["steps"] == 0


def _older_gstrf(N: int, nnz: int, nzvals: Any, colind: Any, rowptr: Any, ilu: int = 0,
                 options: Any = None) -> Any:
    """SuperLU's private call as older scipy declares it (no ``csc_construct_func``)."""
    raise AssertionError("not reached: the call with csc_construct_func fails before")


@pytest.mark.parametrize("mode", ["own call", "splu", "older signature"])
def test_the_kernel_factored_by_superlus_own_call_answers_as_by_splu(monkeypatch: pytest.MonkeyPatch,
                                                                     mode: str) -> None:
    """The totals' kernel ``M₀`` factored by SuperLU's call on its CSC arrays (or by ``splu`` where
    scipy does not expose that call, or exposes it with other arguments): both stages' totals, taken
    afresh from the kept bases, answer other multiplicities with points the reduced LP's general
    certificate passes, objectives equal to HiGHS's from scratch (1e-7 relative), and the same points
    and objectives either way."""
    st = _after_one_re_solve()
    if mode == "splu":
        monkeypatch.setattr(aggregate_epigraph, "_gstrf", None)
    elif mode == "older signature":  # (TypeError at the call: splu from then on)
        monkeypatch.setattr(aggregate_epigraph, "_gstrf", _older_gstrf)
    fac = st.kept_factor()
    assert fac is not None and fac.base is not None and st.second_basis is not None and st.epi_fill is not None
    first = st.epigraph_totals(fac.base)
    assert (aggregate_epigraph._gstrf is None) == (mode != "own call")  # (the older call given up for splu)
    _, cols, unit = st.epi_fill
    c = np.zeros(st.small.sf.num_cols)
    c[cols] = unit
    fill = first.swapped(st.second_basis, c, st.small.sf.sense, float(st.small.sf.offset)) if first else None
    assert first is not None and fill is not None
    kept = st.epi  # (taken by the re-solve, by SuperLU's own call)
    assert kept is not None and kept is not first
    sf, small = st.small.sf, st.small
    rng = np.random.default_rng(5)
    answered = 0
    for _ in range(8):
        mult = st.mult.copy()
        pick = rng.choice(mult.size, size=2, replace=False)
        mult[pick] = np.maximum(1, mult[pick] + rng.integers(-3, 4, size=2))
        got, ref = first.answer(mult, -np.inf), kept.answer(mult, -np.inf)
        if got is None:
            assert ref is None
            continue
        assert ref is not None and got[2] == pytest.approx(ref[2], rel=1e-12)
        assert np.allclose(got[0], ref[0], rtol=0, atol=1e-9)
        _at(st, mult)
        ok, primal, _, viol = certify(sf, got[0], got[1])
        assert ok and viol <= 1e-9 and primal == pytest.approx(got[2], rel=1e-12)
        st.sync()
        small.clear_warm_start()
        x3, _ = small.run_point()
        assert x3 is not None and float(sf.c @ x3) == pytest.approx(primal, rel=1e-7)
        t_low = primal - 1e-9 * abs(primal)
        _, _, cf, lower = _fill_lp(st, t_low)
        got2 = fill.answer(mult, t_low)
        assert got2 is not None
        ok, p2, _, viol = certify(sf, got2[0], got2[1], c=cf, col_lower=lower)
        assert ok and viol <= 1e-9 and p2 == pytest.approx(got2[2], rel=1e-12)
        answered += 1
    assert answered >= 5


@pytest.mark.parametrize("by_splu", [False, True])
def test_a_singular_kernel_is_not_factored(monkeypatch: pytest.MonkeyPatch, by_splu: bool) -> None:
    """A singular ``M₀`` (a zero column, or two equal columns) gives no factors, either way."""
    if by_splu:
        monkeypatch.setattr(aggregate_epigraph, "_gstrf", None)
    ptr = np.array([0, 1, 1, 2], np.intc)  # (column 1 empty)
    assert aggregate_epigraph._factor(np.array([1.0, 2.0]), np.array([0, 2], np.intc), ptr, 3) is None
    ptr = np.array([0, 2, 4], np.intc)  # (two equal columns)
    assert aggregate_epigraph._factor(np.array([1.0, 3.0, 1.0, 3.0]), np.array([0, 1, 0, 1], np.intc), ptr, 2) is None
    ptr = np.array([0, 2, 4], np.intc)
    lu = aggregate_epigraph._factor(np.array([1.0, 3.0, 2.0, 1.0]), np.array([0, 1, 0, 1], np.intc), ptr, 2)
    assert lu is not None and np.allclose(lu.solve(np.array([3.0, 4.0])), [1.0, 1.0])


@pytest.mark.usefixtures("no_transport_route")
def test_totals_not_taken_for_a_singular_kernel_fall_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kernel gives no factors (here: every factorization refused) no class totals are
    taken: the first re-solve is answered by the kept factorization, equal to a cold simplex solve
    of the whole LP, and with factors again the next re-solve takes and answers from them."""
    pol = get_policy(NAME)
    jobs = first_jobs()
    check(pol, jobs)
    st = _kept(pol)
    monkeypatch.setattr(aggregate_epigraph, "_factor", lambda *args: None)
    answered = st.factor_answers
    jobs.append(kind_job(N, 5))
    check(pol, jobs)
    assert st.epi is None and st.epi_fill is None and st.factor_answers == answered + 1
    monkeypatch.undo()
    runs = st.small.runs
    del jobs[4]
    check(pol, jobs)
    assert st.epi is not None and st.epi.answers == 1 and st.small.runs == runs


def test_cross_column_finds_the_one_linking_column_in_class_rows() -> None:
    """``cross_column``: the one linking column with entries in classes' rows and those entries;
    ``None`` with none (max-sum's layout) or with two such columns."""
    import scipy.sparse as sp

    # rows: class 0, class 1, linking; columns: class 0, class 1, linking t, linking z
    A = sp.csc_matrix(np.array([[1.0, 0.0, -1.0, 0.0], [0.0, 2.0, -3.0, 0.0], [1.0, 1.0, 0.0, 1.0]]))
    row_group, col_group = np.array([0, 1, -1]), np.array([0, 1, -1, -1])
    ent_col = np.repeat(np.arange(4), np.diff(A.indptr))
    got = cross_column(row_group, col_group, A, ent_col)
    assert got is not None
    t, pos, rows, rgrp, val = got
    assert t == 2 and rows.tolist() == [0, 1] and rgrp.tolist() == [0, 1] and val.tolist() == [-1.0, -3.0]
    assert np.array_equal(A.data[pos], val)
    assert cross_column(row_group, np.array([0, 1, -1, -1]), sp.csc_matrix(A.toarray() * [1, 1, 0, 1]),
                        np.repeat(np.arange(4), np.diff(sp.csc_matrix(A.toarray() * [1, 1, 0, 1]).indptr))) is None
    B = A.toarray()
    B[0, 3] = 5.0  # (z in class 0's row too: two such columns)
    Bs = sp.csc_matrix(B)
    assert cross_column(row_group, col_group, Bs, np.repeat(np.arange(4), np.diff(Bs.indptr))) is None


def test_a_basis_with_t_basic_and_other_costs_is_not_taken() -> None:
    """With ``t`` basic the multipliers only scale when ``t`` alone has a cost (the max-min stage):
    a basis with ``t`` basic under other costs is not taken."""
    st = _after_one_re_solve()
    fac = st.kept_factor()
    assert fac is not None and fac.base is not None  # (the max-min stage's basis)
    c = st.base[0].copy()
    c[int(st.col_group.argmax())] = 1.0
    assert st.epigraph_totals(fac.base, c) is None
    assert isinstance(st.epigraph_totals(fac.base), EpigraphTotals)


def test_the_fill_stages_totals_from_the_first_stages_with_one_swap() -> None:
    """The ``fill`` stage's basis is the max-min stage's with ``t`` swapped for one variable: its
    totals come from the first stage's factors with one more rank-one correction
    (``EpigraphTotals.swapped``), and answer as totals taken afresh from that basis do, at other
    multiplicities too."""
    st = _after_one_re_solve()
    assert st.epi is not None and st.epi_fill is not None and st.second_basis is not None
    swapped, cols, unit = st.epi_fill
    assert swapped.swap is not None and swapped.lu is st.epi.lu
    c = np.zeros(st.small.sf.num_cols)
    c[cols] = unit
    fresh = st.epigraph_totals(st.second_basis, c)
    assert fresh is not None and fresh.swap is None
    n = st.small.sf.num_cols
    for tot in (swapped, fresh):  # (a basic row's multiplier is 0 exactly, not round-off)
        assert not np.count_nonzero(tot.pi[tot.kind[n:] < 0])
    epi = st.epi
    rng = np.random.default_rng(11)
    compared = 0
    for _ in range(10):
        mult = st.mult.copy()
        pick = rng.choice(mult.size, size=2, replace=False)
        mult[pick] = np.maximum(1, mult[pick] + rng.integers(-3, 4, size=2))
        first = epi.answer(mult, -np.inf)
        if first is None:
            continue
        t_low = first[2] - 1e-9 * abs(first[2])
        a, b = swapped.answer(mult, t_low), fresh.answer(mult, t_low)
        assert a is not None and b is not None
        assert np.allclose(a[0], b[0], rtol=0, atol=1e-9) and np.allclose(a[1], b[1], rtol=0, atol=1e-9)
        assert a[2] == pytest.approx(b[2], rel=1e-12) and a[3] == pytest.approx(b[3], rel=1e-9)
        compared += 1
    assert compared >= 6


@pytest.mark.usefixtures("no_transport_route")
def test_re_solves_in_class_totals_skip_the_loaded_lp_wrappers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the class totals answer both stages, the policy reads them directly
    (``MaxMinFairness._class_totals_resolve``): no ``LoadedLP`` wrapper is made, and each answer
    equals a cold simplex solve of the whole LP."""
    from policyopt.formulations import _common

    pol, jobs, st = _re_solved_once()

    def no_wrapper(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("LoadedLP.of called on a re-solve the class totals answer")

    monkeypatch.setattr(_common.LoadedLP, "of", classmethod(no_wrapper))
    answered, runs = st.factor_answers, st.small.runs
    rng = np.random.default_rng(9)
    for step in range(6):
        if step % 2:
            del jobs[int(rng.integers(len(jobs)))]
        else:
            jobs.insert(int(rng.integers(len(jobs) + 1)), kind_job(N + 10 + step, int(rng.integers(KINDS))))
        got = check(pol, jobs)
        assert got.extra["fill"]["steps"] == 0 and got.timings.solve > 0.0
    assert st.factor_answers == answered + 6 and st.small.runs == runs


@pytest.mark.usefixtures("no_transport_route")
def test_a_fill_stage_the_totals_do_not_answer_runs_from_the_first_stages_answer(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The max-min stage answered in class totals, its ``fill`` stage given no steps (here: the kept
    model's steps turned off): HiGHS runs the ``fill`` stage from that answer, and the result equals
    a cold simplex solve of the whole LP; the next re-solves are answered again."""
    pol, jobs, st = _re_solved_once()
    monkeypatch.setattr(st.loaded, "reoptimize_costs", lambda *args, **kwargs: None)
    answered, runs = st.factor_answers, st.small.runs
    jobs.append(kind_job(N + 1, 6))
    got = check(pol, jobs)
    assert st.factor_answers == answered + 1  # (the max-min stage: from the class totals)
    assert st.small.runs == runs + 1 and got.extra["fill"]["steps"] is None  # (fill: by HiGHS)
    monkeypatch.undo()
    del jobs[7]
    check(pol, jobs)
    jobs.append(kind_job(N + 2, 1))
    got = check(pol, jobs)
    assert _kept(pol) is st and st.epi is not None and got.extra["fill"]["steps"] == 0


@pytest.mark.usefixtures("no_transport_route")
def test_a_class_emptied_refilled_and_a_new_kind_in_a_sequence() -> None:
    """A sequence of arrivals and completions in which a class loses all its jobs (answered without
    its class totals: the kept factorization or HiGHS), takes a job again (answered from class
    totals again), and a job of a kind no class has arrives (the whole LP built cold, then
    aggregated again): every answer equals a cold simplex solve of the whole LP."""
    pol, jobs, st = _re_solved_once()
    gone = 7
    emptied = st.classes_emptied
    jobs = [j for j in jobs if j.id != "j7"]
    check(pol, jobs)
    keep = [j for j in jobs if kind_of(j) != gone]
    last = [j for j in jobs if kind_of(j) == gone]
    jobs = keep + last[:1]
    check(pol, jobs)
    assert _kept(pol) is st
    jobs = keep
    check(pol, jobs)  # (the class's last job left)
    assert _kept(pol) is st and st.n_dead == 1 and st.classes_emptied == emptied + 1
    jobs.insert(5, kind_job(N + 1, 3))
    check(pol, jobs)
    jobs.append(kind_job(N + 2, gone))  # (the emptied class takes a job again)
    check(pol, jobs)
    assert _kept(pol) is st and st.n_dead == 0
    answered = st.factor_answers
    jobs.append(kind_job(N + 3, 2))
    got = check(pol, jobs)
    assert st.factor_answers >= answered + 1 and got.extra["fill"]["steps"] == 0
    jobs.append(kind_job(N + 4, KINDS + 5))  # (a kind no class has: the whole LP, cold)
    check(pol, jobs)
    assert incremental.state(pol) is not st
    for step in range(3):
        if step % 2:
            del jobs[11]
        else:
            jobs.append(kind_job(N + 5 + step, KINDS + 5))
        check(pol, jobs)
    assert _kept(pol).updates >= 2


def kind_of(job: Job) -> int:
    """The kind of a job made by :func:`kind_job` (its data's) among the first ``KINDS + 8``."""
    for k in range(KINDS + 8):
        ref = kind_job(0, k)
        if ref.throughputs == job.throughputs and ref.scale_factor == job.scale_factor and ref.weight == job.weight:
            return k
    raise ValueError(f"job {job.id}: no kind of its data")
