"""Small max-sum throughput problems answered by their transportation LP (policyopt.transport_route,
policyopt.solvers.transport): every answer against HiGHS simplex on the whole LP (objective to 1e-9
relative, allocation within every row and bound to 1e-9), the certificate's invariants, the route's
conditions and its fallback."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt import Cluster, Job, Problem, get_policy, incremental, solver_api, transport_route
from policyopt.solvers import transport

TYPES = ("v100", "p100", "k80", "a100")


def _workload():  # type: ignore[no-untyped-def]
    """``benchmarks/policies_bench.workload``: Gavel's generated problems (loaded from its file)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "policies_bench.py"
    spec = importlib.util.spec_from_file_location("policies_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.workload


@pytest.fixture
def taken(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per call of ``transport.solve``: whether it answered."""
    calls: list[bool] = []
    solve = transport.solve

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        ans = solve(*a, **k)
        calls.append(ans is not None)
        return ans

    monkeypatch.setattr(transport, "solve", spy)
    return calls


def check(got, p: Problem, normalize: bool) -> None:  # type: ignore[no-untyped-def]
    ref = get_policy("max_sum_throughput", algorithm="simplex", normalize=normalize).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)
    assert got.X.min() >= 0.0
    # the objective is the allocation's own
    thr = got.space.throughput_values(got.X)
    if normalize:
        thr = thr / got.space.equal_share_throughput()
    assert float(thr.sum()) == pytest.approx(got.objective, rel=1e-9, abs=1e-12)
    assert got.solver == "highs"


def random_problem(rng: np.random.Generator, n: int, k: int, levels: int, unconsolidated: bool) -> Problem:
    types = TYPES[:k]
    counts = {t: int(rng.integers(1, 9)) for t in types}
    cl = Cluster.from_counts(counts)
    level = rng.uniform(0.5, 20.0, size=levels)  # few values: ties between jobs and types
    jobs = []
    for i in range(n):
        fits = [t for t in types if counts[t] >= 1]
        thr = {t: float(rng.choice(level)) for t in types if rng.random() < 0.8}
        if rng.random() < 0.1:
            thr = {t: 0.0 for t in thr}  # a job that runs nowhere
        thr[fits[0]] = thr.get(fits[0]) or float(rng.choice(level))
        sf = int(rng.choice([s for s in (1, 2, 4) if s <= counts[fits[0]]] or [1]))
        if unconsolidated and sf > 1:
            for t in list(thr):
                thr[f"{t}_unconsolidated"] = float(rng.choice(level))
        jobs.append(Job(f"j{i}", thr, scale_factor=sf))
    return Problem(cl, tuple(jobs))


@pytest.mark.parametrize("normalize", [False, True])
@pytest.mark.parametrize("n", [3, 16, 64, 128])
def test_gavel_workloads_match_simplex(gavel, taken: list[bool], n: int, normalize: bool) -> None:  # type: ignore[no-untyped-def]
    workload = _workload()
    for seed in (0, 1):
        try:
            p = workload(gavel, n, seed=seed)
        except ValueError:  # (a draw whose job fits no type of a tiny cluster)
            continue
        taken.clear()
        check(get_policy("max_sum_throughput", normalize=normalize).solve(p), p, normalize)
        assert taken == [True]


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), k=st.integers(1, 4), levels=st.integers(1, 6),
       unconsolidated=st.booleans(), normalize=st.booleans())
def test_random_problems_match_simplex(seed: int, n: int, k: int, levels: int, unconsolidated: bool,
                                       normalize: bool) -> None:
    p = random_problem(np.random.default_rng(seed), n, k, levels, unconsolidated)
    got = get_policy("max_sum_throughput", normalize=normalize).solve(p)
    check(got, p, normalize)


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 30), k=st.integers(1, 5), levels=st.integers(1, 5))
def test_the_certificate_holds_on_the_answer(seed: int, n: int, k: int, levels: int) -> None:
    """The transportation LP alone: optimal against HiGHS's dual simplex on the same LP, prices and
    multipliers dual feasible, the bound equal to the objective."""
    rng = np.random.default_rng(seed)
    V = rng.choice(np.concatenate([rng.uniform(-2.0, 10.0, size=levels), [-np.inf]]), size=(n, k))
    s = rng.choice([1.0, 2.0, 4.0], size=n)
    C = rng.choice([0.0, 1.0, 3.0, 8.0], size=k)
    ans = transport.solve(V, s, C)
    assert ans is not None
    assert ans.p.min() >= 0.0 and ans.y.min() >= 0.0
    finite = np.isfinite(V)
    scale = max(1.0, float(np.abs(V[finite]).max(initial=0.0)))
    assert np.all((V - s[:, None] * ans.p[None, :] - ans.y[:, None])[finite] <= 1e-9 * scale)
    assert ans.bound == pytest.approx(ans.objective, rel=1e-9, abs=1e-12)
    assert ans.x.min() >= 0.0 and ans.x.sum(axis=1).max(initial=0) <= 1 + 1e-9
    assert np.all(s @ ans.x <= C + 1e-9 * np.maximum(C, 1.0))
    # the same LP by HiGHS's dual simplex (scipy's interface to it), as a dense LP
    from scipy.optimize import linprog

    cols = np.argwhere(finite)
    if not len(cols):
        assert ans.objective == 0.0
        return
    A = np.zeros((n + k, len(cols)))
    A[cols[:, 0], np.arange(len(cols))] = 1.0
    A[n + cols[:, 1], np.arange(len(cols))] = s[cols[:, 0]]
    ref = linprog(-V[cols[:, 0], cols[:, 1]], A_ub=A, b_ub=np.concatenate([np.ones(n), C]), bounds=(0, None),
                  method="highs-ds")
    assert ref.status == 0
    assert ans.objective == pytest.approx(-ref.fun, rel=1e-9, abs=1e-12)


def test_the_certificate_can_fail() -> None:
    V = np.array([[3.0, 1.0], [2.0, 2.5]])
    s = np.array([1.0, 2.0])
    C = np.array([1.0, 2.0])
    ans = transport.solve(V, s, C)
    assert ans is not None
    ok, *_ = transport.certify(V, s, C, ans.x, ans.p)
    assert ok
    assert not transport.certify(V, s, C, ans.x * 0.5, ans.p)[0]  # feasible, not optimal
    assert not transport.certify(V, s, C, ans.x + 0.5, ans.p)[0]  # infeasible
    assert not transport.certify(V, s, C, ans.x, ans.p + 10.0)[0]  # a weaker bound


def test_the_route_is_not_taken_where_it_does_not_apply(taken: list[bool]) -> None:
    rng = np.random.default_rng(3)
    p = random_problem(rng, 20, 3, 4, False)
    get_policy("max_sum_throughput", algorithm="simplex").solve(p)
    get_policy("max_sum_throughput", space_sharing=True).solve(p)
    assert taken == []
    big = random_problem(rng, transport_route.MAX_SUM_MAX_JOBS + 1, 3, 4, False)
    get_policy("max_sum_throughput").solve(big)
    assert taken == []

    class Doubled(type(get_policy("max_sum_throughput"))):  # type: ignore[misc]
        """A subclass (may build differently): the usual path."""

    Doubled().solve(p)
    assert taken == []


def test_a_kept_model_is_re_solved_as_before(taken: list[bool]) -> None:
    """A policy object whose model is kept (from a larger problem) re-solves it; the route
    answers only where none is kept, and keeps none."""
    rng = np.random.default_rng(5)
    big = random_problem(rng, transport_route.MAX_SUM_MAX_JOBS + 8, 3, 3, False)
    pol = get_policy("max_sum_throughput")
    pol.solve(big)
    assert incremental.state(pol) is not None
    small = big.with_jobs(big.jobs[:40])
    check(pol.solve(small), small, False)
    assert taken == []
    fresh = get_policy("max_sum_throughput")
    check(fresh.solve(small), small, False)
    assert taken == [True] and incremental.state(fresh) is None


def test_a_failed_certificate_solves_the_lp_as_before(monkeypatch: pytest.MonkeyPatch, taken: list[bool]) -> None:
    rng = np.random.default_rng(7)
    p = random_problem(rng, 30, 3, 4, True)
    monkeypatch.setattr(transport, "certify", lambda V, s, C, x, p: (False, 0.0, 1.0, np.zeros(len(s))))
    got = get_policy("max_sum_throughput").solve(p)
    assert taken == [False]
    check(got, p, False)


def check_max_min(got, p: Problem, fill: bool) -> None:  # type: ignore[no-untyped-def]
    ref = get_policy("max_min_fairness", algorithm="simplex", fill=fill).solve(p)
    assert got.status.value == "optimal" and ref.status.value == "optimal"
    assert got.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert not got.space.check(got.X, tol=1e-9)
    assert got.solver == "highs"
    pol = get_policy("max_min_fairness")
    level = pol.normalizer(got.space) * got.space.throughput_values(got.X)
    assert level.min() >= got.objective * (1 - 1e-9) - 1e-9
    if fill:
        f, g = got.extra["fill"], ref.extra["fill"]
        assert f["normalized_throughput_after"] == pytest.approx(g["normalized_throughput_after"], rel=1e-7)
        assert f["normalized_throughput_before"] <= f["normalized_throughput_after"] + 1e-9
        assert f["min_level"] == pytest.approx(float(level.min()), rel=1e-12)
        # the fill total is the allocation's own
        total = got.space.throughput_values(got.X) / got.space.equal_share_throughput()
        assert float(total.sum()) == pytest.approx(f["normalized_throughput_after"], rel=1e-9)
    else:
        assert "fill" not in got.extra


@pytest.fixture
def taken_max_min(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """One entry per call of ``transport.solve_max_min``: whether it answered."""
    calls: list[bool] = []
    solve = transport.solve_max_min

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        ans = solve(*a, **k)
        calls.append(ans is not None)
        return ans

    monkeypatch.setattr(transport, "solve_max_min", spy)
    return calls


@pytest.mark.parametrize("fill", [True, False])
@pytest.mark.parametrize("n", [3, 16, 64, 128, 256, 512])
def test_max_min_gavel_workloads_match_simplex(gavel, taken_max_min: list[bool], n: int, fill: bool) -> None:  # type: ignore[no-untyped-def]
    workload = _workload()
    for seed in (0, 1):
        try:
            p = workload(gavel, n, seed=seed)
        except ValueError:  # (a draw whose job fits no type of a tiny cluster)
            continue
        taken_max_min.clear()
        check_max_min(get_policy("max_min_fairness", fill=fill).solve(p), p, fill)
        assert taken_max_min == [True]


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 40), k=st.integers(1, 4), levels=st.integers(1, 6),
       unconsolidated=st.booleans(), fill=st.booleans(), weights=st.booleans())
def test_max_min_random_problems_match_simplex(seed: int, n: int, k: int, levels: int, unconsolidated: bool,
                                               fill: bool, weights: bool) -> None:
    rng = np.random.default_rng(seed)
    p = random_problem(rng, n, k, levels, unconsolidated)
    if weights:  # (few levels: jobs of equal data, one row of the LPs per class)
        p = p.with_jobs([Job(j.id, j.throughputs, scale_factor=j.scale_factor, weight=float(rng.choice([1.0, 2.0])))
                         for j in p.jobs])
    if any(not any(v > 0 for v in j.throughputs.values()) for j in p.jobs):
        return  # (max-min fairness: a job that runs nowhere has no equal share to normalize by)
    check_max_min(get_policy("max_min_fairness", fill=fill).solve(p), p, fill)


def test_max_min_route_is_not_taken_for_the_agnostic_policy(taken_max_min: list[bool]) -> None:
    p = random_problem(np.random.default_rng(11), 20, 3, 4, False)
    p = p.with_jobs([j for j in p.jobs if any(v > 0 for v in j.throughputs.values())])
    get_policy("max_min_fairness_agnostic").solve(p)
    get_policy("max_min_fairness", algorithm="simplex").solve(p)
    assert taken_max_min == []


def test_a_fill_stage_without_an_answer_solves_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    p = random_problem(np.random.default_rng(13), 30, 3, 4, True)
    p = p.with_jobs([j for j in p.jobs if any(v > 0 for v in j.throughputs.values())])
    solve = transport.solve_max_min
    seen: list[bool] = []

    def unfilled(*a, **k):  # type: ignore[no-untyped-def]
        ans = solve(*a, **k)
        assert ans is not None
        ans.filled = False
        seen.append(True)
        return ans

    monkeypatch.setattr(transport, "solve_max_min", unfilled)
    check_max_min(get_policy("max_min_fairness").solve(p), p, True)
    assert seen == [True]


def test_a_policy_object_re_solving_larger_problems_keeps_its_model(taken_max_min: list[bool]) -> None:
    """After an answer from the arrays, the same policy object's next problems take the arrays
    only up to TRANSPORT_RESOLVE_MAX_JOBS jobs; a larger one builds its model and keeps it."""
    rng = np.random.default_rng(17)
    n = solver_api.TRANSPORT_RESOLVE_MAX_JOBS + 20
    p = random_problem(rng, n + 2, 3, 3, False)
    p = p.with_jobs([j for j in p.jobs if any(v > 0 for v in j.throughputs.values())][:n])
    small = p.with_jobs(p.jobs[:solver_api.TRANSPORT_RESOLVE_MAX_JOBS])
    pol = get_policy("max_min_fairness")
    check_max_min(pol.solve(p), p, True)
    assert taken_max_min == [True] and incremental.state(pol) is None
    check_max_min(pol.solve(small), small, True)  # a small re-solve: the arrays again
    assert taken_max_min == [True, True] and incremental.state(pol) is None
    check_max_min(pol.solve(p), p, True)  # a larger one: built, its model kept
    assert taken_max_min == [True, True] and incremental.state(pol) is not None


def _max_min_arrays(p: Problem):  # type: ignore[no-untyped-def]
    """The per-type arrays ``transport.solve_max_min`` is given for max-min fairness on ``p``
    (one row per job)."""
    pol = get_policy("max_min_fairness")
    space = pol.make_space(p)
    V, _ = transport.per_type(space.T, space.single_mask, space.config_type, len(space.worker_types))
    unit = V / space.equal_share_throughput()[:, None]
    return V, space.row_scale, space.counts, pol.normalizer(space), unit


@pytest.mark.parametrize("n", [64, 128])
def test_the_crash_basis_saves_first_lp_iterations(gavel, n: int) -> None:  # type: ignore[no-untyped-def]
    """The first LP from the crash basis: the same optimum in fewer primal simplex iterations than
    from the slack basis (Gavel's workload)."""
    workload = _workload()
    for seed in (0, 1, 2):
        V, s, C, a, unit = _max_min_arrays(workload(gavel, n, seed=seed))
        cold = transport.solve_max_min(V, s, C, a, unit, True, 1e-9, crash=False)
        warm = transport.solve_max_min(V, s, C, a, unit, True, 1e-9, crash=True)
        assert cold is not None and warm is not None
        assert warm.t == pytest.approx(cold.t, rel=1e-9)
        assert warm.after == pytest.approx(cold.after, rel=1e-9)
        assert warm.iterations < cold.iterations / 2


def test_the_crash_basis_is_declined_for_a_row_without_columns() -> None:
    Vz = np.array([[1.0, 2.0], [0.0, 0.0]])
    jj, kk = np.nonzero(Vz > 0)
    assert transport.crash_basis(Vz, np.ones(2), np.ones(2), np.ones(2), jj, kk) is None
    got = transport.crash_basis(Vz[:1], np.ones(1), np.ones(1), np.ones(2), jj, kk)
    assert got is not None
    cols, rows = got
    assert int((cols == 1).sum()) + int((rows == 1).sum()) == 2 * 1 + 2  # as many basic variables as rows
    assert (rows == 2).sum() == 1 and rows[1] == 2  # the bottleneck: type 0, the one placed on (V / p ties: the first)


@settings(max_examples=40)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(2, 40), k=st.integers(1, 4), levels=st.integers(1, 6),
       fill=st.booleans(), shape=st.sampled_from(["worst", "random"]))
def test_a_wrong_crash_basis_costs_only_iterations(seed: int, n: int, k: int, levels: int, fill: bool,
                                                   shape: str) -> None:
    """A bad start — each row on its worst type and the least loaded type as the bottleneck, or
    random statuses (possibly singular) — still gives the policy's optimum."""
    rng = np.random.default_rng(seed)
    p = random_problem(rng, n, k, levels, False)
    p = p.with_jobs([j for j in p.jobs if any(v > 0 for v in j.throughputs.values())])
    if not p.jobs:
        return

    used: list[bool] = []
    answered: list[bool] = []
    solve = transport.solve_max_min

    def spy(*a, **k):  # type: ignore[no-untyped-def]
        ans = solve(*a, **k)
        answered.append(ans is not None)
        return ans

    def bad(Vz, a, ws, C, jj, kk):  # type: ignore[no-untyped-def]
        used.append(True)
        rows_n, K = Vz.shape
        cols = np.zeros(jj.size + 1, np.int8)
        rows = np.zeros(2 * rows_n + K, np.int8)
        if shape == "worst":
            worst = np.where(Vz > 0, Vz, np.inf).argmin(axis=1)
            cols[:-1] = kk == worst[jj]
            cols[-1] = 1
            rows[:rows_n + K] = 1
            rows[rows_n + int(np.bincount(worst, minlength=K).argmin())] = 0
        else:
            pick = rng.choice(cols.size + rows.size, size=rows.size, replace=False)
            both = np.zeros(cols.size + rows.size, np.int8)
            both[pick] = 1
            cols, rows = both[:cols.size], both[cols.size:]
        return cols, rows

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(transport, "crash_basis", bad)
        mp.setattr(transport, "solve_max_min", spy)
        got = get_policy("max_min_fairness", fill=fill).solve(p)
    assert used == [True] and answered == [True]
    check_max_min(got, p, fill)


@pytest.mark.parametrize("n", [64, 128])
def test_max_min_declared_classes_give_the_spaces_own_numbers(gavel, n: int) -> None:  # type: ignore[no-untyped-def]
    """Max-min's route computes the mask rows and equal shares of its job classes only (the equal
    share from the per-type values) and declares them on the space: each job's are exactly those
    of a fresh space."""
    workload = _workload()
    for seed in (0, 1):
        p = workload(gavel, n, seed=seed)
        got = get_policy("max_min_fairness").solve(p)
        assert got.space.declared_classes() is not None
        fresh = get_policy("max_min_fairness").make_space(p)
        assert np.array_equal(got.space.equal_share_throughput(), fresh.equal_share_throughput())
        assert np.array_equal(got.space.single_mask, fresh.single_mask)
        check_max_min(got, p, True)


@pytest.mark.parametrize("fill", [True, False])
@pytest.mark.parametrize("classes", [True, False])
def test_max_min_first_problems_above_the_max_sum_limit(taken_max_min: list[bool], classes: bool,
                                                        fill: bool) -> None:
    """Max-min's first problem takes the arrays up to MAX_MIN_MAX_JOBS jobs (above TRANSPORT_MAX_JOBS),
    with jobs of equal data (one LP row per class) or all distinct, equal to a cold simplex solve of
    the whole LP (both stages); one job more goes the usual way; the same policy object's next
    problem of that size builds its model and keeps it (re-solves: TRANSPORT_RESOLVE_MAX_JOBS)."""
    assert transport_route.MAX_MIN_MAX_JOBS > solver_api.TRANSPORT_MAX_JOBS
    rng = np.random.default_rng(23 + classes)
    n = transport_route.MAX_MIN_MAX_JOBS
    p = random_problem(rng, n + 40, 4, 3 if classes else 40, False)
    jobs = [j for j in p.jobs if any(v > 0 for v in j.throughputs.values())][:n + 1]
    if not classes:  # (distinct weights: no two jobs alike)
        jobs = [Job(j.id, j.throughputs, scale_factor=j.scale_factor, weight=1.0 + 1e-3 * i)
                for i, j in enumerate(jobs)]
    assert len(jobs) == n + 1
    p = p.with_jobs(jobs[:n])
    pol = get_policy("max_min_fairness", fill=fill)
    got = pol.solve(p)
    assert taken_max_min == [True] and incremental.state(pol) is None
    assert (got.space.declared_classes() is not None) == classes
    check_max_min(got, p, fill)
    check_max_min(pol.solve(p), p, fill)  # a re-solve of this size: built, its model kept
    assert taken_max_min == [True] and incremental.state(pol) is not None
    bigger = p.with_jobs(jobs)
    check_max_min(get_policy("max_min_fairness", fill=fill).solve(bigger), bigger, fill)
    assert taken_max_min == [True]


@pytest.mark.parametrize("normalize", [False, True])
def test_max_sum_first_problems_above_the_resolve_limit(taken: list[bool], normalize: bool) -> None:
    """Max-sum's first problem takes the arrays up to MAX_SUM_MAX_JOBS jobs (above TRANSPORT_MAX_JOBS),
    equal to a cold simplex solve of the whole LP; one job more goes the usual way; the same policy
    object's next problem of that size goes the usual way too (re-solves: TRANSPORT_RESOLVE_MAX_JOBS)."""
    assert transport_route.MAX_SUM_MAX_JOBS > solver_api.TRANSPORT_MAX_JOBS
    n = transport_route.MAX_SUM_MAX_JOBS
    p = random_problem(np.random.default_rng(29 + normalize), n + 40, 3, 40, False)
    jobs = [j for j in p.jobs if any(v > 0 for v in j.throughputs.values())][:n + 1]
    assert len(jobs) == n + 1
    p = p.with_jobs(jobs[:n])
    pol = get_policy("max_sum_throughput", normalize=normalize)
    check(pol.solve(p), p, normalize)
    assert taken == [True] and incremental.state(pol) is None
    check(pol.solve(p), p, normalize)  # a re-solve of this size: the usual way
    assert taken == [True]
    bigger = p.with_jobs(jobs)
    check(get_policy("max_sum_throughput", normalize=normalize).solve(bigger), bigger, normalize)
    assert taken == [True]


def test_max_sum_after_a_class_lp_keeps_off_the_arrays(taken: list[bool], monkeypatch: pytest.MonkeyPatch) -> None:
    """A policy whose first problem (129-256 jobs of few kinds) the class LP answered does not take
    the arrays for its next problem of that size (not a first problem; its kept basis held off here,
    so the problem is built and its model kept); each answer equal to a cold simplex solve of the
    whole LP."""
    from policyopt import class_transport, transport_resolve
    from test_class_transport import kinds_problem

    monkeypatch.setattr(transport_resolve, "keep", lambda *a, **k: None)

    p = kinds_problem([60, 50, 40, 30, 20], gpus=30)
    assert solver_api.TRANSPORT_MAX_JOBS < len(p.jobs) <= transport_route.MAX_SUM_MAX_JOBS
    pol = get_policy("max_sum_throughput")
    check(pol.solve(p), p, False)
    assert class_transport.answered(pol) == 1 and taken == [True]  # (the class LP's transport solve)
    q = p.with_jobs(p.jobs[:-1])
    check(pol.solve(q), q, False)
    assert transport_route._ANSWERED not in pol.__dict__ and incremental.state(pol) is not None
