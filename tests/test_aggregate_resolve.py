"""Re-solves on the aggregated LP (``policyopt.aggregate_resolve``): jobs of a few kinds, answered
cold by the block-aggregation fast path, are re-solved after arrivals and completions by updating
the classes' multiplicities in the kept reduced LP. Every answer equals a cold HiGHS simplex solve
of the whole LP (objective to 1e-9 relative, allocation within every row to 1e-9), including a
class losing all its jobs and taking jobs again; a job of a new kind, or a failed certificate,
builds the whole LP cold."""
from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import (AllocationSpace, Cluster, Job, Policy, PolicyResult, Problem, aggregate_basis, aggregate_cold,
                       aggregate_epigraph, aggregate_resolve, aggregate_totals, get_policy, incremental)
from policyopt.aggregate_resolve import AggregateModel, ClassVariable, match_slots
from policyopt.incremental import JobSetModel
from policyopt.modeling import IndexSet, Model, Variable
from policyopt.solver_api import SolverOptions, Status
from policyopt.solvers.highs import HighsModel
from policyopt.standard_form import StandardForm

TYPES = ("v100", "p100", "k80")
# (max_min_fairness_agnostic is not here: its blocks see only where a job can run, so one group
# holds jobs of unequal data — not a class — and its re-solves are built afresh)
POLICIES = [("max_min_fairness", {}), ("max_min_fairness", {"fill": False}), ("max_sum_throughput", {}),
            ("max_sum_throughput", {"normalize": True})]
#: the first call at N jobs builds and keeps the model (max-min's too: see conftest)
pytestmark = pytest.mark.usefixtures("max_min_arrays_as_max_sum")
N = 200  # ≥ 500 columns: the cold solve takes the structured fast path

CLUSTER = Cluster.from_counts({t: N // 4 for t in TYPES})


@pytest.fixture(autouse=True)
def _whole_lp_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests re-solve a model whose first answer came from the whole LP's fast path (its
    reduced LP taken over by ``from_kept``): the class route of a first call (``aggregate_cold``,
    tested in test_aggregate_cold.py) is held off."""
    monkeypatch.setattr(aggregate_cold, "MIN_JOBS", 2**62)


def kind_job(i: int, k: int) -> Job:
    """Job ``j<i>`` of kind ``k``: its throughputs, scale factor and weight depend on ``k`` only."""
    r = np.random.default_rng(1000 + k)
    thr = {t: float(r.uniform(0.5, 10)) for t in TYPES if r.random() < 0.8 or t == "k80"}
    return Job(f"j{i}", thr, scale_factor=int(r.choice([1, 2, 4])), weight=float(r.choice([1.0, 2.0])))


def first_jobs() -> list[Job]:
    """``N`` jobs of kinds 0–6, two of kind 7 (the class that empties)."""
    kinds = [i % 7 for i in range(N - 2)] + [7, 7]
    return [kind_job(i, k) for i, k in enumerate(kinds)]


def check(pol: Policy, name: str, opts: dict[str, Any], jobs: list[Job], p: Problem | None = None) -> PolicyResult:
    """Solve with ``pol`` (the problem of ``jobs``, or ``p``); the answer must equal a cold simplex
    solve of the whole LP."""
    if p is None:
        p = Problem(CLUSTER, tuple(jobs))
    jobs = list(p.jobs)
    got = pol.solve(p)
    ref = get_policy(name, algorithm="simplex", **opts).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)
    assert list(got.space.jobs.labels) == [j.id for j in jobs]
    # (an aggregated re-solve declares the space's classes: its mask and equal shares, computed per
    # class, are those of every job)
    sp_ = got.space
    assert np.array_equal(sp_.single_mask, sp_.single_mask_of(sp_.T, sp_.scale))
    w = sp_.counts / sp_.counts.sum()
    assert np.array_equal(sp_.equal_share_throughput(), sp_._best_placement(sp_.T, sp_.single_mask) @ w)
    if name.startswith("max_min") and "fill" not in opts:
        fill = got.extra["fill"]
        assert fill["normalized_throughput_after"] == pytest.approx(
            ref.extra["fill"]["normalized_throughput_after"], rel=1e-7)
        # (an aggregated re-solve's fill stage, levels and result are computed per class: they
        # must be those of the returned allocation, job by job)
        level = get_policy(name).normalizer(sp_) * sp_.throughput_values(got.X)
        assert fill["min_level"] == pytest.approx(float(level.min()), rel=1e-12)
        per_slot = np.divide(sp_.T, sp_.equal_share_throughput()[:, None], out=np.zeros(sp_.T.shape),
                             where=sp_.single_mask)
        assert fill["normalized_throughput_after"] == pytest.approx(float((per_slot * got.X).sum()), rel=1e-9)
    return got


def updates(pol: Policy) -> int:
    s = incremental.state(pol)
    return s.updates if isinstance(s, AggregateModel) else -1


@pytest.mark.parametrize("name,opts", POLICIES)
def test_arrivals_and_completions_update_the_classes(name: str, opts: dict) -> None:
    """Arrivals and completions of known kinds are answered by the aggregated re-solve (counted),
    a class that loses its last job and takes one again included; a new kind goes cold, and the
    next change is aggregated again."""
    pol = get_policy(name, **opts)
    jobs = first_jobs()
    check(pol, name, opts, jobs)
    nxt = N
    steps = 0

    def arrive(k: int, at: int | None = None) -> None:
        nonlocal nxt
        jobs.insert(len(jobs) if at is None else at, kind_job(nxt, k))
        nxt += 1

    arrive(3)  # an arrival at the end
    check(pol, name, opts, jobs)
    steps += 1
    assert updates(pol) == steps
    del jobs[N // 2]  # a completion in the middle
    check(pol, name, opts, jobs)
    steps += 1
    assert updates(pol) == steps
    for _ in range(2):  # kind 7 completes: its class is left without jobs
        jobs.pop(next(i for i, j in enumerate(jobs) if j.throughputs == kind_job(0, 7).throughputs))
        check(pol, name, opts, jobs)
        steps += 1
    assert updates(pol) == steps
    st_ = incremental.state(pol)
    assert isinstance(st_, AggregateModel) and st_.classes_emptied == 1
    arrive(7, 5)  # the class takes a job again
    check(pol, name, opts, jobs)
    steps += 1
    assert updates(pol) == steps
    del jobs[3], jobs[40]  # several at once
    arrive(1, 0)
    arrive(6, 17)
    arrive(7)
    got = check(pol, name, opts, jobs)
    steps += 1
    assert updates(pol) == steps
    # some of these answers came from the kept factorization of the last basis, without a HiGHS run
    st_ = incremental.state(pol)
    assert isinstance(st_, AggregateModel) and st_.factor_answers >= 1
    if name == "max_min_fairness" and "fill" not in opts:  # (fill: from the basis it last ended with)
        assert got.extra["fill"]["steps"] == 0
    arrive(11)  # a new kind: the whole LP, cold (and kept again)
    check(pol, name, opts, jobs)
    assert isinstance(incremental.state(pol), JobSetModel)
    arrive(11, 2)  # known now
    check(pol, name, opts, jobs)
    assert updates(pol) == 1


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_the_first_re_solve_runs_no_highs(name: str) -> None:
    """The first re-solve after a cold solve is answered from the factorization the fast path's
    last HiGHS run left: max-sum's of its LP; max-min's of its ``fill`` stage, the max-min stage's
    basis (kept when ``fill`` re-solved the reduced LP) solved on it and ``fill`` from its own last
    basis — no HiGHS run, no simplex step."""
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    jobs.append(kind_job(N, 2))
    got = check(pol, name, {}, jobs)
    st_ = incremental.state(pol)
    assert isinstance(st_, AggregateModel) and st_.updates == 1
    assert st_.factor_answers == 1 and st_.small.runs == (2 if name == "max_min_fairness" else 1)
    if name == "max_min_fairness":
        assert got.extra["fill"]["steps"] == 0


def test_a_changed_job_joins_the_class_of_its_new_data() -> None:
    """A kept job whose data changed to another known kind moves class; reordering is matched by id."""
    name = "max_min_fairness"
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    k2 = kind_job(0, 2)
    jobs[10] = Job(jobs[10].id, k2.throughputs, scale_factor=k2.scale_factor, weight=k2.weight)
    check(pol, name, {}, jobs)
    jobs = jobs[50:] + jobs[:50]
    check(pol, name, {}, jobs)
    assert updates(pol) == 2


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_a_failed_certificate_builds_the_whole_lp(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """Where the reduced LP's answer does not certify (from the kept factorization where one is
    kept, then by HiGHS warm, then cold), the policy solves the whole LP cold and keeps that model
    instead. The first re-solve has the fast path's last basis (three answers refused): max-sum's
    as class totals (:mod:`policyopt.aggregate_totals`, its own certificate), max-min's
    factorization of its ``fill`` stage with the max-min stage's basis solved on it (after its class
    totals, :mod:`policyopt.aggregate_epigraph`, refused too)."""
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    calls = []

    def refuse(sf: StandardForm, x: np.ndarray, y: np.ndarray, tol: float = 1e-9
               ) -> tuple[bool, float, float, float]:
        calls.append(1)
        return False, 0.0, 1.0, 0.0

    def refuse_totals(self: aggregate_totals.ClassTotals, mult: np.ndarray, tol: float = 1e-9) -> None:
        calls.append(1)
        return None

    epigraph: list[int] = []

    def refuse_epigraph(self: aggregate_epigraph.EpigraphTotals, mult: np.ndarray, t_lower: float,
                        tol: float = 1e-9, duals: bool = True) -> None:
        epigraph.append(1)
        return None

    monkeypatch.setattr(aggregate_resolve, "certify", refuse)
    monkeypatch.setattr(aggregate_totals.ClassTotals, "answer", refuse_totals)
    monkeypatch.setattr(aggregate_epigraph.EpigraphTotals, "answer", refuse_epigraph)
    jobs.append(kind_job(N, 4))
    check(pol, name, {}, jobs)
    assert len(calls) == 3, len(calls)
    assert len(epigraph) == (name == "max_min_fairness")  # (max-min's class totals tried first, refused)
    assert isinstance(incremental.state(pol), JobSetModel)


@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(["max_min_fairness", "max_sum_throughput"]),
       st.lists(st.tuples(st.integers(0, 2), st.integers(0, 10_000)), min_size=1, max_size=6))
def test_random_changes_match_cold(name: str, steps: list[tuple[int, int]]) -> None:
    """Random arrivals (of kinds 0–7), completions and whole classes leaving, each equal to cold."""
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    nxt = N
    for op, draw in steps:
        if op == 0:
            jobs.insert(draw % (len(jobs) + 1), kind_job(nxt, draw % 8))
            nxt += 1
        elif op == 1:
            jobs.pop(draw % len(jobs))
        else:  # every job of one kind leaves (kinds 0–6 hold ~28 jobs each)
            kind = kind_job(0, draw % 8).throughputs
            jobs = [j for j in jobs if j.throughputs != kind]
        check(pol, name, {}, jobs)
    assert updates(pol) == len(steps)


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_kept_factor_solves_with_the_current_entries(name: str) -> None:
    """A basis on the kept factorization solves with the basis matrix of the current entries (other
    multiplicities than HiGHS factored) and of other basic variables (one position swapped), as a
    dense solve does; its point and multipliers on an unchanged LP are HiGHS's."""
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    jobs.append(kind_job(N, 2))
    check(pol, name, {}, jobs)
    st_ = incremental.state(pol)
    assert isinstance(st_, AggregateModel)
    small = st_.small
    st_.sync()
    x, y = small.run_point()  # (HiGHS's run: its factorization is current)
    st_.keep_start(x)  # (the next update keeps HiGHS's basis)
    fac = aggregate_basis.KeptFactor.take(small, x, st_.lin_pos, st_.link_rows)
    assert fac is not None and fac.base is not None
    pt = fac.base.point()
    assert pt is not None and np.allclose(pt[0], x, atol=1e-9) and np.allclose(pt[1], y, atol=1e-9)
    mult = st_.mult.copy()
    mult[:3] += np.array([5, -3, 9])  # other multiplicities: other linking entries
    st_.loaded.touched = True
    st_._restore(mult)
    fac.stale = True
    sf = small.sf
    n, m = sf.num_cols, sf.num_rows
    full = np.hstack([sf.A.toarray(), np.eye(m)])  # columns, then the logicals' e_i
    rng = np.random.default_rng(3)
    nonbasic = np.setdiff1d(np.arange(n + m), fac.var0)
    tried = 0
    for var in [fac.var0] + [np.where(np.arange(m) == rng.integers(m), j, fac.var0) for j in rng.permutation(nonbasic)]:
        B = full[:, var]
        if np.linalg.cond(B) > 1e8:
            continue
        b = aggregate_basis.Basis(fac, var, fac.base.kind)
        assert b.form()
        r = rng.standard_normal(m)
        assert np.allclose(b.solve(r), np.linalg.solve(B, r), atol=1e-8)
        assert np.allclose(b.transpose_solve(r), np.linalg.solve(B.T, r), atol=1e-8)
        tried += 1
        if tried == 4:
            break
    assert tried == 4


def test_a_group_of_jobs_of_unequal_data_is_not_taken() -> None:
    """The fast path groups blocks by a 64-bit hash; a group whose jobs do not all hold the same data
    (what a hash collision would make: blocks of unequal data in one group) is not taken as a class:
    the kept model stays a whole-LP one and the re-solve is built cold, exactly."""
    name = "max_sum_throughput"
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    st_ = incremental.state(pol)
    assert isinstance(st_, JobSetModel)
    # job 7 (kind 0) stands, in the kept model's records, for data of another kind, as if its block
    # had been hashed into kind 0's group
    st_.T = st_.T.copy()
    st_.T[7] = st_.T[1]
    assert aggregate_resolve.from_kept(st_) is None
    jobs.append(kind_job(N, 2))
    check(pol, name, {}, jobs)
    assert not isinstance(incremental.state(pol), AggregateModel)


def test_small_inverse_equals_numpy() -> None:
    """The Woodbury capacitance matrix's inverse (3 × 3 by its adjugate, up to 8 × 8 by bordering it
    or, a leading block singular, by Gauss–Jordan, else numpy's) inverts it; a singular matrix has
    none."""
    rng = np.random.default_rng(11)
    swap = np.array([[0.0, 1, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1], [0, 0, 1, 0]])  # (leading 3 × 3 singular)
    assert aggregate_basis._bordered(swap.tolist()) is None
    got = aggregate_basis._inverse(swap)
    assert got is not None and np.allclose(got @ swap, np.eye(4), atol=1e-12)
    for r in (1, 2, 3, 4, 5, 8, 10):
        for _ in range(20):
            C = np.eye(r) + 0.5 * rng.standard_normal((r, r))
            got = aggregate_basis._inverse(C)
            assert got is not None and np.allclose(got @ C, np.eye(r), atol=1e-10)
    assert aggregate_basis._inverse(np.ones((3, 3))) is None
    assert aggregate_basis._inverse(np.zeros((2, 2))) is None
    assert aggregate_basis._inverse(np.zeros((5, 5))) is None
    assert aggregate_basis._inverse(np.zeros((10, 10))) is None


def test_a_lost_factorization_is_answered_by_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where HiGHS dropped the factorization behind the kept model's back (a basis set), the next
    re-solve is answered by HiGHS instead, exactly. (Max-min fairness without ``fill``: max-sum
    keeps its basis as class totals, which need no factorization of HiGHS; max-min's class totals,
    ``policyopt.aggregate_epigraph``, are dropped here for the same reason.)"""
    name, opts = "max_min_fairness", {"fill": False}
    pol = get_policy(name, **opts)
    jobs = first_jobs()
    check(pol, name, opts, jobs)
    jobs.append(kind_job(N, 2))
    check(pol, name, opts, jobs)
    st_ = incremental.state(pol)
    assert isinstance(st_, AggregateModel) and st_.factor is not None
    answered = st_.factor_answers
    st_.epi = None
    monkeypatch.setattr(AggregateModel, "epigraph_totals", lambda *a, **k: None)
    st_.small.restore_basis(st_.small.basis_object())  # (HiGHS factors it again at its next run only)
    jobs.append(kind_job(N + 1, 3))
    check(pol, name, opts, jobs)
    assert updates(pol) == 2 and st_.factor_answers == answered


def _lp() -> StandardForm:
    A = sp.csc_matrix(np.array([[1.0, 2.0, 0.0], [3.0, 0.0, 1.0], [0.0, 1.0, 1.0]]))
    return StandardForm(sense="max", c=np.array([1.0, 1.0, 2.0]), offset=0.0, col_lower=np.zeros(3),
                        col_upper=np.full(3, np.inf), integrality=np.zeros(3, np.int32), A=A,
                        row_lower=np.full(3, -np.inf), row_upper=np.array([4.0, 6.0, 3.0]),
                        row_scale=np.ones(3), row_scale_applied=True)


def test_set_entries_equals_a_fresh_model() -> None:
    """Entries changed in place (one to 0 and back) give the answer of a model loaded afresh."""
    m = HighsModel(_lp(), SolverOptions(algorithm="simplex"))
    assert m.solve().status is Status.OPTIMAL
    for pos, vals in (([1, 4], [2.5, 0.5]), ([4], [0.0]), ([4, 0], [1.5, 0.25])):
        m.set_entries(np.array(pos), np.array(vals))
        got = m.resolve()
        sf = _lp()
        sf.A.data[:] = m.sf.A.data
        ref = HighsModel(sf, SolverOptions(algorithm="simplex")).solve()
        assert got.status is Status.OPTIMAL and got.objective == pytest.approx(ref.objective, rel=1e-12)
        assert np.allclose(got.x, ref.x, atol=1e-9)


@settings(max_examples=60, deadline=None, derandomize=True)
@given(st.lists(st.integers(0, 30), max_size=25, unique=True), st.lists(st.integers(0, 30), max_size=25, unique=True))
def test_match_slots_is_a_lookup_by_id(old: list[int], new: list[int]) -> None:
    """Ids as objects, as strings of one width (compared as 8- or 4-byte words), of their own widths
    and as integers: the slots are a lookup by id, the prefix and suffix the longest common ones."""
    for dtype in (object, "U8", "U3", "S4", "S3", None, np.int64):
        if dtype is np.int64:
            o, n = np.array(old, np.int64), np.array(new, np.int64)
        else:
            o, n = np.array([f"j{i}" for i in old], dtype), np.array([f"j{i}" for i in new], dtype)
        slot, p, q, _ = match_slots(o, n, None)
        where = {j: i for i, j in enumerate(o.tolist())}
        assert slot.tolist() == [where.get(j, -1) for j in n.tolist()]
        assert slot[:p].tolist() == list(range(p)) and slot[len(n) - q:].tolist() == list(range(len(o) - q, len(o)))
        m = min(len(o), len(n))
        pre = next((k for k in range(m) if o[k] != n[k]), m)
        suf = next((k for k in range(m - pre) if o[len(o) - 1 - k] != n[len(n) - 1 - k]), m - pre)
        assert (p, q) == (pre, suf), dtype


def _aggregated_after_one_arrival(name: str) -> tuple[AggregateModel, np.ndarray]:
    """Policy ``name`` after a cold solve of :func:`first_jobs` and one arrival answered by the
    aggregated model: that model and the class columns of its ``X`` (one per job)."""
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    jobs.append(kind_job(N, 2))
    got = check(pol, name, {}, jobs)
    st_ = incremental.state(pol)
    assert isinstance(st_, AggregateModel)
    X = st_._variables(got.space)["X"]
    return st_, X.cols[X.cols >= 0]


def test_unequal_costs_within_a_class_column_are_refused() -> None:
    """Costs (or bounds) set per job must agree within a class column: the reduced LP sums them."""
    st_, cols = _aggregated_after_one_arrival("max_sum_throughput")
    st_.loaded.set_costs(cols, np.ones(cols.size))  # equal: accepted, summed per column
    assert st_.small.sf.c[cols[0]] == float(np.count_nonzero(cols == cols[0]))
    costs = np.ones(cols.size)
    costs[np.flatnonzero(cols == cols[0])[-1]] = 2.0
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.set_costs(cols, costs)
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.set_col_bounds(cols, np.zeros(cols.size), costs)


def test_class_variable_reads_like_a_variable() -> None:
    """A class variable's gathered columns and bounds, and its values, equal those of a plain
    variable with the same (gathered) arrays."""
    rng = np.random.default_rng(5)
    G, n, w = 4, 9, 3
    cls_cols = rng.integers(-1, 12, (G, w))
    lo, hi = rng.uniform(0, 1, (G, w)), rng.uniform(1, 2, (G, w))
    group = rng.integers(0, G, n)
    dims = (IndexSet("jobs", [f"j{i}" for i in range(n)]), IndexSet("configs", ["a", "b", "c"]))
    v = ClassVariable("X", dims, cls_cols, lo, hi, group)
    x = rng.uniform(0, 1, 12)
    ref = Variable(Model("X"), "X", dims, cls_cols[group], lo[group], hi[group], False)
    assert np.array_equal(v.value(x, fill=-3.0), ref.value(x, fill=-3.0))
    assert np.array_equal(v.cols, ref.cols) and np.array_equal(v.lower, ref.lower)
    assert np.array_equal(v.upper, ref.upper)
    assert np.array_equal(v.value(x), ref.value(x)) and v.shape == (n, w) and np.array_equal(v.mask, ref.mask)


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput"])
def test_concurrent_solves_of_one_policy_object_stay_exact(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Three threads solving with one policy object (each problem from the kept model's first one,
    several kinds removed or added): one at a time re-solves on the aggregated LP (or turns the
    kept model into one), the others build cold; every answer equals cold. The first solve to try
    the kept model finds it free, so at least one answer is an aggregated re-solve."""
    jobs = first_jobs()
    pol = get_policy(name)
    check(pol, name, {}, jobs)
    errors: list[BaseException] = []
    answered: list[int] = []
    update = AggregateModel.update

    def counted(self: AggregateModel, policy: Any, space: AllocationSpace) -> dict[str, Variable] | None:
        got = update(self, policy, space)
        if got is not None:
            answered.append(1)
        return got

    monkeypatch.setattr(AggregateModel, "update", counted)

    def work(k: int) -> None:
        try:
            for i in range(5):
                cut = (3 * i + k) % 7
                check(pol, name, {}, jobs[cut:] + [kind_job(N + 10 * k + i, (i + k) % 8)])
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert answered


def test_costs_or_bounds_given_to_part_of_a_class_are_refused() -> None:
    """A class column stands for every job of its class: a cost or bound given to some of those jobs
    only (or to one job twice, or a linking column twice) is no change of the reduced LP, and row
    bounds or rows of the whole LP have no rows there — all end the aggregated model."""
    st_, cols = _aggregated_after_one_arrival("max_min_fairness")
    c0 = cols[0]
    m0 = int(np.count_nonzero(cols == c0))
    assert m0 > 1
    one = np.flatnonzero(cols == c0)[:1]  # one job's entry of a class column of m0 jobs
    before = float(st_.small.sf.c[c0])
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.set_costs(cols[one], np.ones(1))
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.set_costs(np.concatenate([cols, cols[one]]), np.ones(cols.size + 1))
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.set_col_bounds(cols[one], np.zeros(1), np.zeros(1))
    assert float(st_.small.sf.c[c0]) == before and float(st_.small.sf.col_upper[c0]) != 0.0
    link = int(np.flatnonzero(st_.col_group < 0)[0])
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.set_costs(np.array([link, link]), np.ones(2))
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.set_row_bounds(np.array([0]), np.zeros(1), np.ones(1))
    with pytest.raises(aggregate_resolve.Declined):
        st_.loaded.add_rows(sp.csr_matrix((1, st_.small.sf.num_cols)), np.zeros(1), np.ones(1))
    st_.loaded.set_costs(cols, np.ones(cols.size))  # every job of every class once: accepted
    assert float(st_.small.sf.c[c0]) == float(m0)


def _remembered(name: str) -> tuple[Any, list[Any]]:
    """A policy after a cold solve and two aggregated re-solves (the second matches the remembered
    signature), and its job list."""
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, {}, jobs)
    for k in (1, 2):
        jobs.append(kind_job(N + k, k))
        check(pol, name, {}, jobs)
    assert updates(pol) == 2
    return pol, jobs


def test_another_signature_builds_cold() -> None:
    """A kept aggregated model answers only problems of its signature: after a change of an option or
    of the cluster (a remembered match must not hide either) the whole LP is built cold, and the
    next change of the job set is aggregated again."""
    name = "max_sum_throughput"
    pol, jobs = _remembered(name)
    pol.config["time_limit"] = 100.0
    jobs.append(kind_job(N + 3, 3))
    check(pol, name, {}, jobs)
    assert isinstance(incremental.state(pol), JobSetModel)
    jobs.append(kind_job(N + 4, 4))
    check(pol, name, {}, jobs)
    assert updates(pol) == 1
    other = Cluster.from_counts({t: N // 4 + 1 for t in TYPES})
    got = pol.solve(Problem(other, tuple(jobs)))
    ref = get_policy(name, algorithm="simplex").solve(Problem(other, tuple(jobs)))
    assert got.objective == pytest.approx(ref.objective, rel=1e-9)
    assert isinstance(incremental.state(pol), JobSetModel)


@pytest.mark.parametrize("key,value", [("normalize", 0), ("pair_threshold", True), ("pair_threshold", 1)])
def test_a_remembered_signature_compares_like_the_signature(key: str, value: Any) -> None:
    """The remembered signature match holds only where the signature (the options' reprs) does: an option
    set to a value equal by ``==`` but of another type (``False == 0``, ``1.0 == True == 1``) is another
    signature, and the whole LP is built cold."""
    name = "max_sum_throughput"
    pol, jobs = _remembered(name)
    assert pol.config[key] == value and repr(pol.config[key]) != repr(value)
    pol.config[key] = value
    jobs.append(kind_job(N + 3, 3))
    check(pol, name, {}, jobs)
    assert isinstance(incremental.state(pol), JobSetModel)


@pytest.mark.parametrize("name,opts", POLICIES[:2])
def test_problems_made_by_with_jobs_are_matched_from_their_records(monkeypatch: pytest.MonkeyPatch, name: str,
                                                                   opts: dict) -> None:
    """Problems made by ``Problem.with_jobs`` record which jobs they share with the problem they were
    made from (``Problem.job_changes``): an update reads its common ends there, without comparing
    ids or data (the comparison made to raise), from a problem made from the kept one or from the
    same problem as the kept one; a job replaced by one of another kind under the same id is a
    change there. Each answer equals a cold simplex solve of the whole LP and is aggregated."""
    pol = get_policy(name, **opts)
    jobs = first_jobs()
    base = Problem(CLUSTER, tuple(jobs))
    check(pol, name, opts, jobs, base)
    prob = base.with_jobs(jobs + [kind_job(N, 3)])
    check(pol, name, opts, [], prob)  # (the kept model made here: its jobs matched by ids)
    done = updates(pol)
    assert done >= 1

    def no_comparison(*args: Any) -> None:
        raise AssertionError("kept jobs compared though the problems' records give them")

    monkeypatch.setattr(aggregate_resolve, "common_ends", no_comparison)
    prob = prob.with_jobs(prob.jobs[:10] + prob.jobs[11:])  # (a completion)
    check(pol, name, opts, [], prob)
    changed = list(prob.jobs)
    i20 = int(changed[20].id[1:])
    changed[20] = kind_job(i20, (i20 % 7 + 1) % 7)  # (the same id, another kind's data)
    assert changed[20] != prob.jobs[20]
    prob = prob.with_jobs(changed)
    check(pol, name, opts, [], prob)
    src = prob
    check(pol, name, opts, [], src.with_jobs(src.jobs + (kind_job(N + 1, 5),)))
    src = src.with_jobs(src.jobs[:-1])
    check(pol, name, opts, [], src)
    for sibling in (src.with_jobs(src.jobs[:30] + src.jobs[31:]), src.with_jobs(src.jobs[:40] + src.jobs[41:])):
        check(pol, name, opts, [], sibling)  # (the second made from the kept problem's source)
    assert updates(pol) == done + 6
