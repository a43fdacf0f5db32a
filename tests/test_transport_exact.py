"""The transportation LP solved exactly without HiGHS (policyopt.solvers.transport_exact): every
answer against HiGHS on the same LP (objective to 1e-9 relative, the point within every row and
bound to 1e-9), its basis checked as a basis of the LP (nonsingular, its point the answer's, its
multipliers the answer's prices), kept and re-solved from by ``policyopt.transport_resolve``, and
the fallback to HiGHS where the method declines."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from policyopt import class_transport, get_policy, transport_resolve
from policyopt.errors import InputError
from policyopt.solvers import transport, transport_exact, transport_small

TOL = 1e-9


def highs(V: np.ndarray, s: np.ndarray, C: np.ndarray) -> transport.TransportAnswer:
    ref = transport.solve(V, s, C, exact=False)
    assert ref is not None
    return ref


def check_basis(V: np.ndarray, s: np.ndarray, C: np.ndarray, ans: transport.TransportAnswer) -> None:
    """``ans.basic`` is a basis of the LP (HiGHS's encoding over ``ans.cols``): ``n + K`` distinct
    columns and slacks, ``B`` nonsingular, ``B⁻¹ b`` the answer's point (its nonbasic columns 0)
    and the multipliers ``c_B B⁻¹`` the answer's ``(y, p)``."""
    n, K = V.shape
    assert ans.basic is not None and ans.cols is not None
    jj, kk = ans.cols
    assert np.array_equal(jj, np.nonzero(V > 0)[0]) and np.array_equal(kk, np.nonzero(V > 0)[1])
    basic = ans.basic
    assert basic.size == n + K and np.unique(basic).size == n + K
    B = np.zeros((n + K, n + K))
    cost = np.zeros(n + K)
    for i, v in enumerate(basic.tolist()):
        if v >= 0:
            B[jj[v], i] = 1.0
            B[n + kk[v], i] = s[jj[v]]
            cost[i] = V[jj[v], kk[v]]
        else:
            B[-1 - v, i] = 1.0
    assert abs(np.linalg.det(B / np.abs(B).max(axis=0))) > 1e-12 or np.linalg.matrix_rank(B) == n + K
    z = np.linalg.solve(B, np.concatenate([np.ones(n), C]))
    point = np.zeros(jj.size)
    isc = basic >= 0
    point[basic[isc]] = z[isc]
    scale = max(1.0, float(np.abs(z).max()))
    assert np.allclose(point, ans.x[jj, kk], atol=1e-8 * scale)
    slack = np.concatenate([1.0 - ans.x.sum(axis=1), C - s @ ans.x])
    assert np.allclose(z[~isc], slack[-1 - basic[~isc]], atol=1e-8 * scale)
    mult = np.linalg.solve(B.T, cost)
    big = max(1.0, float(np.abs(mult).max()))
    assert np.allclose(mult[n:], ans.p, atol=1e-8 * big)
    assert np.allclose(mult[:n], ans.y, atol=1e-8 * big)


def check(V: np.ndarray, s: np.ndarray, C: np.ndarray, basis: bool = True) -> transport.TransportAnswer:
    """The exact route answers, equal to HiGHS's optimum, its point feasible, certified, its basis valid."""
    got = transport_exact.solve(V, s, C)
    assert got is not None, "the exact route declined"
    ref = highs(V, s, C)
    assert got.objective == pytest.approx(ref.objective, rel=TOL, abs=1e-12)
    x = got.x
    assert x.min() >= 0.0 and x.sum(axis=1).max() <= 1.0 + TOL
    assert (s @ x <= C + TOL * np.maximum(C, 1.0)).all()
    assert not x[~(V > 0)].any()
    assert float(np.vdot(np.where(V > 0, V, 0.0), x)) == pytest.approx(got.objective, rel=1e-12, abs=1e-12)
    ok, obj, bound, _ = transport.certify(V, s, C, x, got.p)
    assert ok and bound == pytest.approx(obj, rel=TOL, abs=1e-12)
    if basis:
        check_basis(V, s, C, got)
    return got


def random_lp(rng: np.random.Generator, n: int, K: int, levels: int = 0, p_zero: float = 0.2,
              cap: float = 0.5) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``n`` jobs × ``K`` types; ``levels`` > 0: values from that many levels (ties), a share
    ``p_zero`` of entries not viable (``-inf`` or 0); capacities ``cap`` of the total scale."""
    if levels:
        V = rng.choice(rng.uniform(0.5, 20.0, levels), size=(n, K))
    else:
        V = rng.uniform(0.1, 20.0, (n, K))
    gone = rng.random((n, K)) < p_zero
    V[gone] = np.where(rng.random(int(gone.sum())) < 0.5, -np.inf, 0.0)
    s = rng.choice([1.0, 2.0, 4.0, 8.0], n)
    C = np.floor(rng.uniform(0.2, 1.8, K) * cap * s.sum() / K)
    return V, s, C


def gavel_lps(gavel: Any, sizes: tuple[int, ...], seeds: range) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The transportation LPs max-sum throughput hands to ``transport.solve`` on Gavel's workload
    (``benchmarks/policies_bench.workload``), per job below 128 jobs and over classes from 128."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "policies_bench.py"
    spec = importlib.util.spec_from_file_location("policies_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    got: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
    solve = transport.solve

    def spy(V: np.ndarray, s: np.ndarray, C: np.ndarray, threads: int | None = None,
            exact: bool = True, start: np.ndarray | None = None, basis: bool = True
            ) -> transport.TransportAnswer | None:
        got.append((V.copy(), s.copy(), C.copy()))
        return solve(V, s, C, threads, exact, start, basis)

    transport.solve = spy
    try:
        for n in sizes:
            for seed in seeds:
                try:
                    problem = module.workload(gavel, n, seed=seed)
                except InputError:  # (16 jobs: 4 GPUs per type, an 8-GPU job fits nowhere)
                    continue
                for normalize in (False, True):
                    get_policy("max_sum_throughput", normalize=normalize).solve(problem)
    finally:
        transport.solve = solve
    return got


def test_gavel_workload_16_to_512_jobs(gavel: Any) -> None:
    """Gavel's generated problems, 16–512 jobs, with and without ``normalize``: the LPs per job
    (up to 128 jobs) and over the classes (from 128), each exact."""
    lps = gavel_lps(gavel, (16, 32, 64, 128, 256, 512), range(4))
    rows = {V.shape[0] for V, _, _ in lps}
    assert len(lps) >= 36 and rows >= {16, 32, 64, 128} and rows - {16, 32, 64, 128}  # (class LPs)
    for V, s, C in lps:
        check(V, s, C)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("K", [1, 2, 3, 8, 12])
def test_random_lps(seed: int, K: int) -> None:
    """Random LPs of 1-12 types (12: admissible sets grouped by np.unique, not counted), distinct values and
    few levels (ties between jobs and types), scarce and ample capacity."""
    rng = np.random.default_rng(100 * K + seed)
    for levels, cap in ((0, 0.3), (3, 0.3), (2, 1.5), (0, 0.05)):
        check(*random_lp(rng, int(rng.integers(1, 150)), K, levels, cap=cap))


def test_degenerate_lps() -> None:
    """Identical jobs, ties between types, capacities met exactly, not binding, zero, jobs with no
    viable type, a single type."""
    rng = np.random.default_rng(3)
    cases = []
    V = np.tile([[5.0, 3.0, 1.0]], (40, 1))  # identical jobs
    cases.append((V, np.full(40, 2.0), np.array([10.0, 20.0, 30.0])))
    cases.append((np.full((30, 4), 2.0), np.ones(30), np.array([5.0, 5.0, 5.0, 5.0])))  # every type tied
    s = rng.choice([1.0, 2.0], 50)
    cases.append((rng.uniform(1, 9, (50, 3)), s, np.array([s[:10].sum(), s[10:30].sum(), s[30:].sum()])))  # met
    cases.append((rng.uniform(1, 9, (50, 3)), s, np.full(3, 1e3)))  # not binding: p = 0
    cases.append((rng.uniform(1, 9, (50, 3)), s, np.array([0.0, 7.0, 0.0])))  # zero capacities
    cases.append((rng.uniform(1, 9, (50, 3)), s, np.zeros(3)))  # nothing fits
    V = rng.uniform(1, 9, (50, 3))
    V[:20] = -np.inf  # jobs with no viable type
    V[20:30, 1:] = 0.0
    cases.append((V, s, np.array([6.0, 9.0, 12.0])))
    cases.append((np.full((5, 2), -np.inf), np.ones(5), np.ones(2)))  # no column at all
    cases.append((rng.uniform(1, 9, (60, 1)), s[:1].repeat(60), np.array([17.0])))  # a single type
    cases.append((np.tile([[4.0, 4.0], [2.0, 2.0]], (25, 1)), np.ones(50), np.array([10.0, 10.0])))
    # integral scale factors summing exactly to the capacities: ties at the idle slack
    cases.append((np.tile([[3.0, 2.0, 1.0]], (12, 1)), np.full(12, 4.0), np.array([16.0, 16.0, 16.0])))
    for V, s, C in cases:
        check(V, s, C)


@settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(1, 120), st.integers(1, 6), st.integers(0, 4), st.floats(0.0, 0.6), st.floats(0.02, 2.0),
       st.integers(0, 2**31 - 1))
def test_property_exact_equals_highs(n: int, K: int, levels: int, p_zero: float, cap: float, seed: int) -> None:
    """Any LP of the shape: the exact route answers, equal to HiGHS, with a valid basis."""
    check(*random_lp(np.random.default_rng(seed), n, K, levels, p_zero, cap))


def test_the_basis_is_kept_and_re_solved_from() -> None:
    """The class route's first answer comes from the exact route; its basis is taken by
    ``ClassBasis.take`` (a map made) and the next problems are answered from it, each equal to a
    cold solve of the whole LP."""
    from test_class_transport import check as check_whole
    from test_class_transport import kind_job, kinds_problem

    calls: list[bool] = []
    solve = transport_exact.solve

    def spy(*a: Any) -> Any:
        ans = solve(*a)
        calls.append(ans is not None)
        return ans

    transport_exact.solve = spy
    try:
        p = kinds_problem([60, 50, 40, 30, 20], gpus=30)
        pol = get_policy("max_sum_throughput")
        check_whole(pol.solve(p), p, {})
    finally:
        transport_exact.solve = solve
    assert calls == [True] and class_transport.answered(pol) == 1
    kept = transport_resolve.kept(pol)
    assert kept is not None and kept.M is not None
    jobs = list(p.jobs)
    for step in range(6):
        if step % 2:
            jobs.pop(5 * step)
        else:
            jobs.append(kind_job(len(jobs) + 100 + step, step % 5))
        q = p.with_jobs(jobs)
        check_whole(pol.solve(q), q, {})
    assert transport_resolve.answered(pol)[0] >= 1


def test_take_accepts_the_basis_of_every_class_lp(gavel: Any) -> None:
    """``ClassBasis.take`` makes its map from the exact route's basis on Gavel's class LPs, and the
    map's point at the same counts is the answer's (certified by ``answer``)."""
    lps = [lp for lp in gavel_lps(gavel, (256, 512), range(2))]
    assert lps
    for V, s, C in lps:
        ans = transport_exact.solve(V, s, C)
        assert ans is not None
        st_ = transport_resolve.ClassBasis.__new__(transport_resolve.ClassBasis)
        m = np.ones(V.shape[0])  # (the class LP as handed over: values and scale factors already per class)
        st_.V, st_.s, st_.C = V, s, C
        st_.best = np.zeros(V.shape, np.int64)
        st_._cap = C + TOL * np.maximum(C, 1.0)
        assert st_.take(ans.basic, ans.p, m, ans.cols, ans.y)
        got = st_.answer(m)
        assert got is not None
        z, obj = got
        assert obj == pytest.approx(ans.objective, rel=TOL)
        assert np.allclose(z, ans.x[st_.bg, st_.bk], atol=1e-9)


def test_declined_lps_are_answered_by_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the exact route declines (its step cap, too many types), ``transport.solve`` answers
    by HiGHS, the same optimum; non-finite data, a job with a column and no scale factor and an LP
    without jobs are declined."""
    rng = np.random.default_rng(5)
    V, s, C = random_lp(rng, 60, 3, cap=0.2)
    ref = highs(V, s, C)
    monkeypatch.setattr(transport_exact, "MAX_STEPS", 0)
    monkeypatch.setattr(transport_exact, "STEPS_PER_TYPE", 0)
    assert transport_exact.solve(V, s, C) is None
    got = transport.solve(V, s, C)
    assert got is not None and got.objective == pytest.approx(ref.objective, rel=TOL)
    monkeypatch.undo()
    V, s, C = random_lp(rng, 20, transport_exact.MAX_TYPES + 1, cap=0.2)
    assert transport_exact.solve(V, s, C) is None
    assert transport.solve(V, s, C) is not None
    V, s, C = random_lp(rng, 20, 3)
    V[0, 0] = np.nan  # (no certificate either way: HiGHS's answer is refused too)
    assert transport_exact.solve(V, s, C) is None
    s[1] = 0.0
    V[0, 0] = 1.0
    assert transport_exact.solve(V, s, C) is None  # (a job with a column and no scale factor)
    assert transport_exact.solve(np.zeros((0, 3)), np.zeros(0), np.ones(3)) is None  # (no job)


def test_a_failed_certificate_falls_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """The exact route's answer stands only where the certificate holds."""
    rng = np.random.default_rng(9)
    V, s, C = random_lp(rng, 40, 3, cap=0.3)
    certify = transport.certify
    seen: list[int] = []

    def first_refused(*a: Any) -> Any:
        seen.append(1)
        ok, obj, bound, y = certify(*a)
        return (False if len(seen) == 1 else ok), obj, bound, y

    monkeypatch.setattr(transport, "certify", first_refused)
    got = transport.solve(V, s, C)
    assert got is not None and len(seen) == 2  # (the exact answer refused, HiGHS's certified)
    assert got.objective == pytest.approx(highs(V, s, C).objective, rel=TOL)


@pytest.mark.parametrize("seed", range(6))
def test_any_start_prices(seed: int) -> None:
    """From any prices (the optimum's, scaled up or down, random, a previous LP's) the route ends at
    the same optimum, with a valid basis."""
    rng = np.random.default_rng(40 + seed)
    V, s, C = random_lp(rng, int(rng.integers(20, 120)), int(rng.integers(1, 6)), int(rng.integers(0, 3)), cap=0.3)
    ref = check(V, s, C)
    K = C.size
    other = random_lp(rng, V.shape[0], K, cap=0.3)
    for start in (ref.p, 2.0 * ref.p + 1.0, 0.5 * ref.p, rng.uniform(0, 3 * max(1.0, float(ref.p.max())), K),
                  transport_exact.solve(*other).p if transport_exact.solve(*other) else np.zeros(K),
                  np.full(K, np.nan), -np.ones(K)):
        got = transport_exact.solve(V, s, C, start)
        assert got is not None
        assert got.objective == pytest.approx(ref.objective, rel=TOL, abs=1e-12)
        check_basis(V, s, C, got)


def test_re_solves_by_the_arrays_start_from_the_last_prices(gavel: Any) -> None:
    """A policy object the arrays answered hands its last prices to the next problem's exact route
    (at this size the method on lists, transport_small; 0-1 steps after one arrival or completion
    on Gavel's workload); each answer equal to the whole LP's."""
    from test_transport_route import check as check_whole

    problem = gavel_problem(gavel, 60)
    jobs = list(problem.jobs)
    starts: list[Any] = []
    steps: list[int] = []
    solve = transport_small.solve
    assert 61 * 3 <= transport_small.MAX_CELLS

    def spy(V: np.ndarray, s: np.ndarray, C: np.ndarray, start: Any = None) -> Any:
        ans = solve(V, s, C, start)
        starts.append(start)
        steps.append(-1 if ans is None else ans.iterations)
        return ans

    transport_small.solve = spy
    try:
        pol = get_policy("max_sum_throughput")
        cur = jobs[:50]
        for i in range(8):
            q = problem.with_jobs(cur)
            check_whole(pol.solve(q), q, False)
            cur = cur + [jobs[50 + i]] if i % 2 == 0 else cur[1:]
    finally:
        transport_small.solve = solve
    assert starts[0] is None and all(st is not None for st in starts[1:])
    assert min(steps) >= 0 and sum(steps[1:]) < sum(steps[:1]) * len(steps[1:])


def gavel_problem(gavel: Any, n: int) -> Any:
    """``benchmarks/policies_bench.workload`` at ``n`` jobs (seed 3)."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "policies_bench.py"
    spec = importlib.util.spec_from_file_location("policies_bench", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.workload(gavel, n, seed=3)
