"""The aggregated re-solve in class totals (``policyopt.aggregate_totals``): where the multiplicities
enter only bounds (max-sum throughput), a count change is answered from the kept basis's linear
maps. Every answer equals a cold HiGHS simplex solve of the whole LP, its point and multipliers pass
the general certificate of the reduced LP, and a basis that no longer fits (or a corrupted one) is
refused, then answered by HiGHS exactly."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt import (Cluster, Job, Problem, aggregate_cold, get_policy, incremental, solver_api,
                       transport_resolve, transport_route)
from policyopt._aggregate_parts import certify
from policyopt.aggregate_resolve import AggregateModel
from policyopt.aggregate_totals import ClassTotals

TYPES = ("v100", "p100", "k80")
N = 200
CLUSTER = Cluster.from_counts({t: N // 4 for t in TYPES})


def kind_job(i: int, k: int) -> Job:
    """Job ``j<i>`` of kind ``k``: its throughputs, scale factor and weight depend on ``k`` only."""
    r = np.random.default_rng(1000 + k)
    thr = {t: float(r.uniform(0.5, 10)) for t in TYPES if r.random() < 0.8 or t == "k80"}
    return Job(f"j{i}", thr, scale_factor=int(r.choice([1, 2, 4])), weight=float(r.choice([1.0, 2.0])))


def first_jobs() -> list[Job]:
    return [kind_job(i, i % 7) for i in range(N)]


def check(pol, name: str, jobs: list[Job], **opts):
    p = Problem(CLUSTER, tuple(jobs))
    got = pol.solve(p)
    ref = get_policy(name, algorithm="simplex", **opts).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)
    return got


@pytest.fixture(autouse=True)
def _kept_model_re_solves(monkeypatch: pytest.MonkeyPatch) -> None:
    """The re-solves after a class transportation LP on the kept model (the subject here), not
    from that LP's kept basis (``policyopt.transport_resolve``, tested in its own file); a first
    problem of these sizes not answered from the arrays (``transport_route.MAX_SUM_MAX_JOBS``)."""
    monkeypatch.setattr(transport_resolve, "keep", lambda *a, **k: None)
    monkeypatch.setattr(transport_route, "MAX_SUM_MAX_JOBS", solver_api.TRANSPORT_MAX_JOBS)


def _kept(pol) -> AggregateModel:
    st = incremental.state(pol)
    assert isinstance(st, AggregateModel)
    return st


@pytest.mark.parametrize("whole_lp_first", [False, True])
@pytest.mark.parametrize("opts", [{}, {"normalize": True}])
def test_max_sum_re_solves_are_answered_in_class_totals(monkeypatch: pytest.MonkeyPatch, whole_lp_first: bool,
                                                        opts: dict) -> None:
    """Arrivals and completions of known kinds: answered in class totals (no HiGHS run), each equal
    to a cold simplex solve of the whole LP; the first call by the class route or the whole LP's
    fast path (its reduced LP taken over)."""
    if whole_lp_first:
        monkeypatch.setattr(aggregate_cold, "MIN_JOBS", 2**62)
    name = "max_sum_throughput"
    pol = get_policy(name, **opts)
    jobs = first_jobs()
    check(pol, name, jobs, **opts)
    rng = np.random.default_rng(5)
    nxt = N
    for step in range(8):
        if step % 2:
            del jobs[int(rng.integers(len(jobs)))]
        else:
            jobs.insert(int(rng.integers(len(jobs) + 1)), kind_job(nxt, int(rng.integers(7))))
            nxt += 1
        check(pol, name, jobs, **opts)
    st = _kept(pol)
    assert st.bounds_only and st.totals is not None
    assert st.updates >= 8 and st.small.runs <= 2 and st.totals.answers >= 7


def test_max_min_is_not_bounds_only() -> None:
    """Max-min fairness's epigraph column ``t`` has entries in every class's rows: its multiplicities
    are not bounds of the class totals, so its basis is kept as HiGHS's factorization."""
    name = "max_min_fairness"
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, jobs)
    jobs.append(kind_job(N, 3))
    check(pol, name, jobs)
    st = _kept(pol)
    assert not st.bounds_only and st.totals is None


def _after_one_re_solve() -> tuple[AggregateModel, ClassTotals]:
    name = "max_sum_throughput"
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, jobs)
    jobs.append(kind_job(N, 2))
    check(pol, name, jobs)
    st = _kept(pol)
    assert st.totals is not None
    return st, st.totals


def test_an_answer_passes_the_reduced_lps_own_certificate() -> None:
    """For other multiplicities (a few classes up or down by a few jobs), the class totals' point and
    row multipliers are those of the reduced LP as it stands: its general certificate
    (``certify``: feasible, Lagrangian bound of the multipliers equal to the objective) passes with
    the same objective and bound, and HiGHS from scratch finds the same objective."""
    st, tot = _after_one_re_solve()
    rng = np.random.default_rng(7)
    answered = 0
    for _ in range(12):
        mult = st.mult.copy()
        pick = rng.choice(mult.size, size=2, replace=False)
        mult[pick] = np.maximum(1, mult[pick] + rng.integers(-3, 4, size=2))
        st._restore(mult)  # (the reduced LP's standard form at these multiplicities)
        st.mult = mult
        got = tot.answer(mult)
        if got is None:
            continue
        x, y, primal, bound, viol = got
        ok, primal2, bound2, viol2 = certify(st.small.sf, x, y)
        assert ok and primal2 == pytest.approx(primal, rel=1e-12) and bound2 == pytest.approx(bound, rel=1e-9)
        st.sync()
        st.small.clear_warm_start()
        x3, _ = st.small.run_point()
        assert x3 is not None
        assert float(st.small.sf.c @ x3) == pytest.approx(primal, rel=1e-9)
        answered += 1
    assert answered >= 8


def test_a_basis_that_no_longer_fits_is_refused() -> None:
    """Multiplicities far from the basis's (one class 10 times smaller or larger, ...) leave its
    point infeasible for some classes: refused; every other answer passes the general certificate.
    A corrupted bound or point is refused too."""
    st, tot = _after_one_re_solve()
    base = st.mult.copy()
    assert tot.answer(base) is not None
    refused = 0
    for g in range(base.size):
        for f in (0.1, 0.3, 3.0, 10.0, 50.0):
            mult = base.copy()
            mult[g] = max(1, int(mult[g] * f))
            got = tot.answer(mult)
            if got is None:
                refused += 1
                continue
            st._restore(mult)
            st.mult = mult
            assert certify(st.small.sf, got[0], got[1])[0]
    assert refused >= 2
    st._restore(base)
    st.mult = base
    assert tot.answer(base) is not None
    beta = tot.beta.copy()
    tot.beta[0] += 1e-3 * max(1.0, abs(float(beta[0])))
    assert tot.answer(base) is None
    tot.beta[:] = beta
    # (a basic column's value)
    p = 0
    V = tot.V.copy()
    tot.V[p] += 0.5
    assert tot.answer(base) is None
    tot.V[:] = V
    assert tot.answer(base) is not None


@pytest.mark.usefixtures("no_transport_route")  # (the first call keeps the model: see conftest)
def test_a_refused_basis_is_answered_by_highs_and_taken_again() -> None:
    """Where the class totals refuse a change (most jobs of one kind leave or many arrive at once),
    HiGHS re-solves from the kept basis, exactly, and its new basis is taken as class totals: the
    next small change is answered from them without a HiGHS run."""
    name = "max_sum_throughput"
    pol = get_policy(name)
    jobs = first_jobs()
    check(pol, name, jobs)
    st = _kept(pol)
    nxt = N
    for k in range(7):
        for change in ("leave", "arrive"):
            old, runs = st.totals, st.small.runs
            if change == "leave":
                mine = [j for j in jobs if j.id in {f"j{i}" for i in range(N) if i % 7 == k}]
                drop = {j.id for j in mine[: len(mine) - 1]}
                jobs = [j for j in jobs if j.id not in drop]
            else:
                jobs += [kind_job(nxt + i, k) for i in range(300)]
                nxt += 300
            check(pol, name, jobs)
            assert _kept(pol) is st
            if st.small.runs > runs:
                break
        else:
            continue
        break
    assert st.small.runs > runs and st.totals is not None and st.totals is not old
    runs, taken = st.small.runs, st.totals
    jobs.append(kind_job(nxt, 1))
    check(pol, name, jobs)
    assert st.small.runs == runs and st.totals is taken and taken.answers == 1


def test_activities_by_the_dense_matrix_equal_the_sparse_kernels() -> None:
    """Where scipy's CSC kernel is not taken, the rows' activities come from the dense matrix: the
    same answer."""
    st, tot = _after_one_re_solve()
    got = tot.answer(st.mult)
    assert got is not None and tot._csc is not None
    tot._csc = None
    again = tot.answer(st.mult)
    assert again is not None
    assert np.allclose(again[0], got[0], rtol=0, atol=1e-12) and np.allclose(again[1], got[1], rtol=0, atol=1e-12)
    assert again[2] == pytest.approx(got[2], rel=1e-14)
