"""Max-sum throughput's re-solves after its class transportation LP (``policyopt.transport_resolve``):
answered from the kept basis in class totals, every answer equal to a cold HiGHS simplex solve of
the whole LP (objective to 1e-9 relative, every row and bound of the whole LP to 1e-9); a basis
whose point no longer fits, new classes and a corrupted basis go to a HiGHS run on the class LP;
changed options or cluster drop the route (the policy solves as before)."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_class_transport import OPTS, TYPES, check, kind_job, kinds_problem

from policyopt import Cluster, Job, Problem, class_transport, get_policy, incremental, transport_resolve
from policyopt.solvers import transport


def _first(opts: dict, copies: list[int] | None = None, gpus: int = 30, seed: int = 0) -> tuple[Any, Any]:
    p = kinds_problem(copies or [60, 50, 40, 30], gpus=gpus, seed=seed)
    pol = get_policy("max_sum_throughput", **opts)
    check(pol.solve(p), p, opts)
    assert class_transport.answered(pol) == 1 and transport_resolve.kept(pol) is not None
    return pol, p


@pytest.mark.parametrize("opts", OPTS)
def test_arrivals_and_completions_from_the_kept_basis(opts: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    """A few arrivals (of known kinds) and completions: each answered from the kept basis — no
    HiGHS run (``transport.solve`` refused), no kept model — and equal to a cold solve."""
    pol, p = _first(opts, gpus=80)  # (ample GPUs: every job fits whole, the basis stays feasible)
    real = transport.solve

    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("HiGHS ran on a re-solve the kept basis answers")

    jobs, nxt = list(p.jobs), len(p.jobs)
    for step in range(6):
        if step % 2:
            jobs.pop(5 * step)
        else:
            jobs.insert(7 * step, kind_job(nxt, step % 4))
            nxt += 1
        q = p.with_jobs(jobs)
        monkeypatch.setattr(transport, "solve", refuse)
        got = pol.solve(q)
        monkeypatch.setattr(transport, "solve", real)
        check(got, q, opts)
        assert transport_resolve.answered(pol) == (step + 1, 0) and incremental.state(pol) is None


def test_the_kept_basis_is_what_answers() -> None:
    """A corrupted kept basis (its inverse scaled) is not answered from: the certificate refuses
    it, HiGHS solves the class LP and its basis is taken again (the answer exact)."""
    pol, p = _first({})
    q = p.with_jobs(list(p.jobs)[:-1])
    check(pol.solve(q), q, {})
    assert transport_resolve.answered(pol) == (1, 0)
    st_ = transport_resolve.kept(pol)
    assert st_ is not None and st_.M is not None
    st_.M = st_.M * 1.01
    q = p.with_jobs(list(p.jobs)[:-2])
    check(pol.solve(q), q, {})
    assert transport_resolve.answered(pol) == (1, 1)
    q = p.with_jobs(list(p.jobs)[1:-2])
    check(pol.solve(q), q, {})
    assert transport_resolve.answered(pol) == (2, 1)


@pytest.mark.parametrize("opts", OPTS)
def test_new_classes_and_scarce_gpus(opts: dict) -> None:
    """Jobs of kinds no class has (new classes appended), whole kinds leaving and coming back, a
    basis that no longer fits under scarce GPUs: answered by a HiGHS run on the class LP where
    the kept basis does not, always equal to a cold solve."""
    pol, p = _first(opts, gpus=12)
    jobs = list(p.jobs)
    seq = [jobs + [kind_job(900, 7), kind_job(901, 7), kind_job(902, 8)],
           [j for j in jobs if j.throughputs != jobs[0].throughputs],
           jobs[:100] + jobs[150:],
           jobs[::-1],
           jobs]
    for jl in seq:
        q = p.with_jobs(jl)
        check(pol.solve(q), q, opts)
    a, r = transport_resolve.answered(pol)
    assert a + r == len(seq) and r >= 1 and incremental.state(pol) is None


def test_changed_options_or_cluster_drop_the_route() -> None:
    """Another option value or another cluster: the kept classes are dropped and the policy solves
    as before (its kept model built), exactly."""
    pol, p = _first({})
    pol.config["threads"] = 1
    q = p.with_jobs(list(p.jobs)[:-1])
    check(pol.solve(q), q, {})
    assert transport_resolve.kept(pol) is None and incremental.state(pol) is not None
    pol, p = _first({})
    q = type(p)(Cluster.from_counts({t: 31 for t in TYPES}), tuple(p.jobs))
    check(pol.solve(q), q, {})
    assert transport_resolve.kept(pol) is None


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(OPTS), st.lists(st.integers(30, 80), min_size=2, max_size=6), st.integers(4, 80),
       st.integers(0, 3), st.lists(st.tuples(st.booleans(), st.integers(0, 10 ** 6), st.integers(0, 9)),
                                   min_size=1, max_size=5))
def test_generated_changes_equal_cold(opts: dict, copies: list[int], gpus: int, seed: int,
                                      changes: list[tuple[bool, int, int]]) -> None:
    """Generated problems and sequences of arrivals (of known or new kinds) and completions at
    generated places: every re-solve equals the whole LP's cold simplex solve."""
    p = kinds_problem(copies, gpus=gpus, seed=seed)
    pol = get_policy("max_sum_throughput", **opts)
    check(pol.solve(p), p, opts)
    jobs, nxt = list(p.jobs), len(p.jobs)
    for arrive, at, kind in changes:
        if arrive or len(jobs) < 140:
            jobs.insert(at % (len(jobs) + 1), kind_job(nxt, kind, seed))
            nxt += 1
        else:
            jobs.pop(at % len(jobs))
        q = p.with_jobs(jobs)
        check(pol.solve(q), q, opts)
    if class_transport.answered(pol):
        assert sum(transport_resolve.answered(pol)) == len(changes)


def test_a_class_without_jobs_reads_zero() -> None:
    """Every job of a class completes: its count 0, its row's bound 0; later jobs of it come back."""
    pol, p = _first({}, gpus=80)
    jobs = list(p.jobs)
    gone = [j for j in jobs if j.throughputs == jobs[0].throughputs]
    rest = [j for j in jobs if j.throughputs != jobs[0].throughputs]
    for jl in (rest, rest + gone[:3]):
        q = p.with_jobs(jl)
        check(pol.solve(q), q, {})
    st_ = transport_resolve.kept(pol)
    assert st_ is not None and np.count_nonzero(st_.m) == st_.V.shape[0]
    assert sum(transport_resolve.answered(pol)) == 2


def test_a_nan_in_the_kept_map_is_refused() -> None:
    """A NaN in the kept map fails the certificate (no comparison with a NaN passes): HiGHS answers."""
    pol, p = _first({})
    q = p.with_jobs(list(p.jobs)[:-1])
    check(pol.solve(q), q, {})
    st_ = transport_resolve.kept(pol)
    assert st_ is not None and st_.M is not None
    st_.M[0, :] = np.nan
    q = p.with_jobs(list(p.jobs)[:-2])
    check(pol.solve(q), q, {})
    assert transport_resolve.answered(pol) == (1, 1)


def test_small_inverse() -> None:
    """The small block's inverse (Python Gauss–Jordan up to 8 rows, LAPACK above) against numpy's,
    with row swaps needed; singular blocks give ``None``."""
    from policyopt.transport_resolve import _inverse

    rng = np.random.default_rng(3)
    for r in (2, 5, 8, 9, 12):
        A = rng.random((r, r)) + np.eye(r)
        A[0, 0] = 0.0  # (a zero pivot: the rows must be swapped)
        W = _inverse(A)
        assert W is not None and np.allclose(W, np.linalg.inv(A), rtol=1e-10, atol=1e-12)
    assert _inverse(np.array([[1.0, 2.0], [2.0, 4.0]])) is None
    assert _inverse(np.zeros((3, 3))) is None
    assert _inverse(np.zeros((9, 9))) is None


def test_the_solves_columns_and_multipliers_give_the_map() -> None:
    """The basis taken from the solve's columns and multipliers (``u_g = y_g / m_g``) is the one
    recomputed from ``V`` and ``p``; multipliers that are not the solve's fail the certificate."""
    pol, p = _first({})
    st_ = transport_resolve.kept(pol)
    assert st_ is not None and st_.M is not None
    ans = transport.solve(st_.V * st_.m[:, None], st_.s * st_.m, st_.C)
    assert ans is not None and ans.cols is not None
    assert st_.take(ans.basic, ans.p, st_.m)
    M, u = st_.M.copy(), st_.u.copy()
    assert st_.take(ans.basic, ans.p, st_.m, ans.cols, ans.y)
    assert np.array_equal(st_.M, M) and np.allclose(st_.u, u, rtol=1e-14, atol=0.0)
    assert st_.answer(st_.m) is not None
    assert st_.take(ans.basic, ans.p, st_.m, ans.cols, ans.y * 1.01)
    assert st_.answer(st_.m) is None


@pytest.mark.parametrize("gpus", [6, 12, 80])
def test_answers_given_as_clipped_are(gpus: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every allocation the route hands over as already clipped and masked (``class_result(...,
    clipped=True)``) is: equal to its clipped and masked copy, bit for bit (no −0.0), under scarce and
    ample GPUs, through arrivals, completions and a kind emptied."""
    from policyopt.policy import Policy, _clip_masked

    real = Policy.class_result
    seen = []

    def spy(self: Any, space: Any, Xc: np.ndarray, *a: Any, clipped: bool = False, **k: Any) -> Any:
        if clipped:
            mask = space.declared_classes()[1]
            assert np.array_equal(Xc, _clip_masked(Xc, mask)) and not np.signbit(Xc).any()
            seen.append(1)
        return real(self, space, Xc, *a, clipped=clipped, **k)

    monkeypatch.setattr(Policy, "class_result", spy)
    pol, p = _first({}, gpus=gpus)
    jobs = list(p.jobs)
    seq = [jobs[:-1], jobs[:-1] + [kind_job(2000, 1)], [j for j in jobs if j.throughputs != jobs[0].throughputs],
           jobs[3:] + [kind_job(2001, 0), kind_job(2002, 3)]]
    for jl in seq:
        q = p.with_jobs(jl)
        check(pol.solve(q), q, {})
    assert len(seen) == len(seq)


@pytest.mark.parametrize("gpus", [6, 12, 20])
def test_the_map_solves_the_tight_rows(gpus: int) -> None:
    """Under scarce GPUs (tight capacity rows: the small block is not empty), the kept map's point
    ``z = Z (m, 1)`` meets every tight row of the basis with equality at any counts ``m``: a tight
    class row ``Σ_k y_gk = m_g``, a tight capacity row ``Σ_g s_g y_gk = C_k``."""
    pol, p = _first({}, gpus=gpus)
    st_ = transport_resolve.kept(pol)
    assert st_ is not None and st_.M is not None
    ans = transport.solve(st_.V * st_.m[:, None], st_.s * st_.m, st_.C)
    assert ans is not None and ans.basic is not None
    G, K = st_.V.shape
    tight = np.ones(G + K, bool)
    tight[-1 - ans.basic[ans.basic < 0]] = False
    assert tight[G:].any()
    rng = np.random.default_rng(gpus)
    for _ in range(5):
        m = st_.m + rng.integers(-2, 3, G)
        z = st_.M @ np.append(m, 1.0)
        rows = np.bincount(st_.bg, z, G)
        caps = np.bincount(st_.bk, z * st_.s[st_.bg], K)
        assert np.allclose(rows[tight[:G]], m[tight[:G]], rtol=1e-12, atol=1e-9)
        assert np.allclose(caps[tight[G:]], st_.C[tight[G:]], rtol=1e-12, atol=1e-9)


def test_an_emptied_class_without_a_type_keeps_the_route() -> None:
    # every job of a class that cannot run on P100 or K80 (V = -inf there) completes, then jobs of a
    # new kind arrive: the class LP's HiGHS run at a zero count must stay certified (no -inf * 0)
    cl = Cluster.from_counts({"v100": 20, "p100": 20, "k80": 20})
    a = [Job(f"a{i}", {"v100": 5.0}) for i in range(40)]
    b = [Job(f"b{i}", {"v100": 1.0, "p100": 3.0, "k80": 2.0}) for i in range(150)]
    p = Problem(cl, tuple(a + b))
    pol = get_policy("max_sum_throughput")
    check(pol.solve(p), p, {})
    q = p.with_jobs(b)
    check(pol.solve(q), q, {})
    r = p.with_jobs(b + [Job("c0", {"p100": 4.0, "k80": 4.0})])
    check(pol.solve(r), r, {})
    assert transport_resolve.kept(pol) is not None
    assert transport_resolve.answered(pol)[1] >= 1


@pytest.mark.parametrize("change", ["append", "drop last", "complete in the middle", "arrive in the middle"])
def test_the_same_job_objects_skip_the_data_compare(change: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Jobs appended to the kept ones, the last ones gone, or one block of jobs completed or arrived
    in the middle, with the kept ``Job`` objects: matched by the job tuples alone (no id or data
    array compared) and answered from the kept basis, equal to a cold solve; where a kept job is
    another object of the same id but other data, the data decide its class (matched by ids, the
    answer is that data's)."""
    from policyopt import _aggregate_parts

    pol, p = _first({}, gpus=12)
    jobs = list(p.jobs)
    nxt = {"append": jobs + [kind_job(3000, 1), kind_job(3001, 2)], "drop last": jobs[:-3],
           "complete in the middle": jobs[:90] + jobs[93:],
           "arrive in the middle": jobs[:90] + [kind_job(3000, 1), kind_job(3001, 2)] + jobs[90:]}[change]

    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("the ids were compared")

    monkeypatch.setattr(transport_resolve, "common_ends", refuse)
    q = Problem(p.cluster, nxt)  # (made without with_jobs: no record of its changes)
    check(pol.solve(q), q, {})
    assert transport_resolve.answered(pol) == (1, 0)
    monkeypatch.setattr(transport_resolve, "common_ends", _aggregate_parts.common_ends)
    # the last kept job (the same id) of another kind's data, with and without one more arrival
    last = {"append": len(jobs) - 1, "drop last": len(nxt) - 1}.get(change, 40)
    odd = dataclasses.replace(nxt[last], throughputs={"v100": 97.0, "k80": 0.5}, scale_factor=1)
    for jl in (nxt[:last] + [odd] + nxt[last + 1:], nxt[:last] + [odd] + nxt[last + 1:] + [kind_job(3002, 0)]):
        q = Problem(p.cluster, jl)
        check(pol.solve(q), q, {})
    assert sum(transport_resolve.answered(pol)) == 3


def _no_matching(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make the job lists' comparison (identity ends, ids) raise: only a recorded change answers."""
    def refuse(*a: Any, **k: Any) -> None:
        raise AssertionError("the job lists were compared")

    monkeypatch.setattr(transport_resolve, "_same_job_ends", refuse)
    monkeypatch.setattr(transport_resolve, "common_ends", refuse)


@pytest.mark.parametrize("change", ["append", "drop last", "complete in the middle", "arrive in the middle",
                                    "unchanged", "from the same source: arrival",
                                    "from the same source: completion", "from the same source: unchanged"])
@pytest.mark.parametrize("opts", OPTS)
def test_recorded_changes_answer_without_comparing_the_jobs(change: str, opts: dict,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """A problem made by ``with_jobs`` from the kept one, or from the same problem as the kept one
    (a scheduler's problems made from one list): its recorded common ends (``Problem.job_changes``)
    give the changed jobs, no job list is compared, and a second change after it (the kept record
    then the re-solved problem's) too; every answer equal to a cold solve."""
    pol, p = _first(opts, gpus=12)
    jobs = list(p.jobs)
    a, b = kind_job(3000, 1), kind_job(3001, 2)
    if change.startswith("from the same source"):
        base = p.with_jobs(jobs + [a])  # (the list both are made from: not solved by the policy)
        kept, nxt = {"arrival": (jobs, jobs + [a]), "completion": (jobs + [a], jobs[:50] + jobs[51:] + [a]),
                     "unchanged": (jobs + [a], jobs + [a])}[change.split(": ")[1]]
        pol2 = get_policy("max_sum_throughput", **opts)
        q0 = base.with_jobs(kept)
        check(pol2.solve(q0), q0, opts)
        pol, src = pol2, base
    else:
        nxt = {"append": jobs + [a, b], "drop last": jobs[:-3], "complete in the middle": jobs[:90] + jobs[93:],
               "arrive in the middle": jobs[:90] + [a, b] + jobs[90:], "unchanged": jobs}[change]
        src = p
    _no_matching(monkeypatch)
    q = src.with_jobs(nxt)
    check(pol.solve(q), q, opts)
    r = q.with_jobs(nxt[:20] + [kind_job(3002, 3)] + nxt[21:])  # (made from the re-solved problem)
    check(pol.solve(r), r, opts)
    s = q.with_jobs(nxt[:30] + nxt[31:])  # (made from q, as r was: the same source)
    check(pol.solve(s), s, opts)
    assert transport_resolve.answered(pol)[0] == 3 and incremental.state(pol) is None


def test_records_not_of_these_jobs_fall_back_to_matching(monkeypatch: pytest.MonkeyPatch) -> None:
    """A record that does not describe the problem's jobs is not read: a problem copied with other
    jobs (``dataclasses.replace``: the record dropped), one holding another problem's record, and
    one made from an unrelated problem — each with a kept job replaced by an object of the same id
    and another kind's data, which a trusted record would leave in its old class. The jobs are
    matched by comparing the lists instead, and each answer equals a cold solve."""
    pol, p = _first({}, gpus=12)
    jobs = list(p.jobs)
    odd = dataclasses.replace(jobs[10], throughputs={"v100": 97.0, "k80": 0.5}, scale_factor=1)
    edited = jobs[:10] + [odd] + jobs[11:-1]
    calls = []
    real = transport_resolve.common_ends

    def counted(*a: Any) -> Any:
        calls.append(1)
        return real(*a)

    monkeypatch.setattr(transport_resolve, "common_ends", counted)
    made = p.with_jobs(jobs[:-1])  # (its record: the first len(jobs) − 1 jobs are the kept ones)
    q = dataclasses.replace(made, jobs=tuple(edited))
    assert q.job_changes is None
    check(pol.solve(q), q, {})
    foreign = Problem(p.cluster, jobs[:-2] + [jobs[-2]])  # (to be solved next, kept)
    check(pol.solve(foreign), foreign, {})
    q2 = Problem(p.cluster, edited)
    object.__setattr__(q2, "_changes", foreign.with_jobs(jobs[:-1]).job_changes)  # (another problem's)
    check(pol.solve(q2), q2, {})
    other = Problem(p.cluster, [dataclasses.replace(j) for j in jobs])  # (equal data, other objects)
    q3 = other.with_jobs(list(other.jobs)[:10] + [odd] + list(other.jobs)[11:])
    check(pol.solve(q3), q3, {})
    assert len(calls) >= 3 and sum(transport_resolve.answered(pol)) == 4


@pytest.mark.parametrize("gpus", [6, 30])
def test_a_class_lp_run_starts_from_the_kept_prices(gpus: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Where the kept basis cannot answer (a job of a new kind: a new class), the class LP is solved
    at the new counts from the kept capacity prices (the exact route's start), then again from the
    prices that run kept; each answer equals a cold solve."""
    pol, p = _first({}, gpus=gpus)
    st_ = transport_resolve.kept(pol)
    assert st_ is not None
    seen: list[Any] = []
    real = transport.solve

    def spy(V: np.ndarray, s: np.ndarray, C: np.ndarray, threads: int | None = None, exact: bool = True,
            start: np.ndarray | None = None) -> Any:
        seen.append(None if start is None else start.copy())
        return real(V, s, C, threads, exact, start)

    monkeypatch.setattr(transport, "solve", spy)
    jobs = list(p.jobs)
    for k, extra in enumerate(([kind_job(5000, 7)], [kind_job(5000, 7), kind_job(5001, 8)])):
        prices = st_.p.copy()
        q = p.with_jobs(jobs + extra)
        check(pol.solve(q), q, {})
        assert len(seen) == k + 1 and seen[k] is not None and np.array_equal(seen[k], prices)
    assert transport_resolve.answered(pol) == (0, 2) and transport_resolve.kept(pol) is st_
