"""The fast routes of max-sum throughput and max-min fairness on hostile inputs, through the public API
only (``get_policy(name, ...).solve(problem)`` and re-solves on one policy object), each answer
cross-checked against a cold HiGHS simplex solve of the whole LP through the generic path
(``algorithm="simplex"``): the same status, the objective to 1e-7 relative, the allocation within
every row and bound of the whole LP to 1e-9 (:func:`fast_route_checks.check`).

Inputs: sizes on both sides of every route's threshold (64 and 128 jobs for the arrays, 512 for
max-min's first problem by them, 128 jobs and a quarter of classes for the class routes, 400/500 columns
for the structured fast path, 1,500 for the linking prices, 4,000 for interior point), one kind for all
jobs, all jobs distinct, 1–12 worker types, a type with no workers, missing and zero throughputs,
unconsolidated variants, scale factors up to 8, weights, priorities, throughputs of ~1e-8 and ~1e13
(and 2e-9 after changes), ties (throughputs of 1, 2 or 3). Re-solves: arrivals (of a kind present, of a
new kind, inserted anywhere), completions, several at once, a burst of one kind, a job's throughputs or
weight changed, a class emptied, the same problem twice, a reorder, a type's capacity set to zero and
back, problems built by ``Problem.with_jobs`` and afresh. Which
route answered is recorded (:func:`fast_route_checks.routes`) and
:func:`test_each_route_is_reached` asserts each one answers where it should. Space sharing runs in a
child process (a crash in HiGHS kills that process, not the test run). Hypothesis runs derandomized
(the ``repeatable`` profile of conftest.py)."""
from __future__ import annotations

import collections
import dataclasses
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fast_route_checks import (HIGHS_FEAS, TYPE_NAMES, certified, check, fit, kind_data, make_problem, reference,
                               routes)
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt import Cluster, Job, Problem, get_policy
from policyopt.errors import InputError

HERE = Path(__file__).resolve().parent

POLICIES = [("max_sum_throughput", {}), ("max_sum_throughput", {"normalize": True}), ("max_min_fairness", {}),
            ("max_min_fairness", {"fill": False}), ("max_min_fairness_agnostic", {})]
#: both sides of the thresholds: the arrays' 64 / 128 jobs (max-min's first problem: 512), the class
#: routes' 128 jobs
SIZES = [1, 2, 3, 17, 63, 64, 65, 127, 128, 129, 180, 512, 513]


@st.composite
def hostile(draw: Any, sizes: list[int] = SIZES) -> tuple[int, int, int, dict[str, Any]]:
    """``(n, K, kinds, make_problem's keywords)``."""
    n = draw(st.sampled_from(sizes))
    K = draw(st.integers(1, 12))
    kinds = draw(st.sampled_from([1, 2, 5, max(1, n // 5), max(1, n // 3), n]))
    kw = dict(mag=draw(st.sampled_from([0.0, 0.0, -7.5, -5.0, 6.0, 12.0])), ties=draw(st.booleans()),
              zeros=draw(st.sampled_from([0.0, 0.2, 0.6])), scales=draw(st.sampled_from([(1,), (1, 2, 4), (2, 8)])),
              weighted=draw(st.booleans()), scarce=draw(st.booleans()), zero_type=draw(st.booleans()),
              gps=draw(st.sampled_from([None, 1, 4])), unconsolidated=draw(st.booleans()))
    return n, K, kinds, kw


def solve_checked(pol: Any, name: str, opts: dict[str, Any], p: Problem, seen: collections.Counter,
                  what: str) -> Any:
    """``pol.solve(p)`` cross-checked against the whole LP; to 1e-9 where a certifying route answered."""
    before = seen.copy()
    got = pol.solve(p)
    feas = 1e-9 if certified(before, seen) else HIGHS_FEAS
    check(got, reference(name, p, **opts), name, opts, what, feas)
    return got


@settings(max_examples=60)
@given(st.sampled_from(POLICIES), hostile(), st.integers(0, 2**16))
def test_first_problems_equal_the_whole_lp(policy: tuple[str, dict], case: Any, seed: int) -> None:
    """A policy object's first problem."""
    name, opts = policy
    n, K, kinds, kw = case
    p = make_problem(seed, n, K, kinds, **kw)
    with routes() as seen:
        solve_checked(get_policy(name, **opts), name, opts, p, seen, f"{name} {opts} {n} jobs {kinds} kinds {kw}")


def change(rng: np.random.Generator, op: int, jobs: list[Job], cl: Cluster, kw: dict[str, Any], tag: str
           ) -> tuple[list[Job], Cluster]:
    """One change of the job set (or cluster) — see the module docstring; ``op`` picks it."""
    jobs = list(jobs)
    K = len(cl.names)
    if op == 0 and jobs:  # a completion
        jobs.pop(int(rng.integers(len(jobs))))
    elif op == 1 and jobs:  # an arrival of a kind present, anywhere in the list
        src = jobs[int(rng.integers(len(jobs)))]
        jobs.insert(int(rng.integers(len(jobs) + 1)), dataclasses.replace(src, id=f"a{tag}"))
    elif op == 2 and jobs:  # a job's throughputs changed
        i = int(rng.integers(len(jobs)))
        f = float(rng.choice([0.8, 1.5, 2.0]))
        jobs[i] = dataclasses.replace(jobs[i], throughputs={c: v * f for c, v in jobs[i].throughputs.items()})
    elif op == 3:  # an arrival of a new kind
        d = kind_data(rng, K, kw["mag"], kw["ties"], kw["zeros"], kw["scales"], kw["weighted"], kw["unconsolidated"])
        jobs.append(Job(f"n{tag}", **fit(d, cl, kw["mag"])))
    elif op == 4 and jobs:  # a class emptied
        j0 = jobs[int(rng.integers(len(jobs)))]
        jobs = [j for j in jobs if (j.throughputs, j.scale_factor, j.weight) != (j0.throughputs, j0.scale_factor,
                                                                                 j0.weight)]
    elif op == 6 and K > 1:  # a type's capacity to zero, or back
        counts = dict(cl.counts)
        k = TYPE_NAMES[int(rng.integers(K))]
        counts[k] = 0 if counts[k] else 3
        if sum(counts.values()):
            other = Cluster.from_counts(counts, gpus_per_server=cl.worker_types[0].gpus_per_server)
            try:
                Problem(other, tuple(jobs))
                cl = other
            except InputError:  # (a job that fits no type left: the cluster stays)
                pass
    elif op == 7:  # a reorder
        rng.shuffle(jobs)  # type: ignore[arg-type]
    elif op == 8 and len(jobs) > 3:  # several completions and arrivals at once
        for _ in range(3):
            jobs.pop(int(rng.integers(len(jobs))))
        for i in range(3):
            jobs.append(dataclasses.replace(jobs[int(rng.integers(len(jobs)))], id=f"m{tag}_{i}"))
    elif op == 9 and jobs:  # a job's weight changed
        i = int(rng.integers(len(jobs)))
        jobs[i] = dataclasses.replace(jobs[i], weight=jobs[i].weight * 2)
    elif op == 10 and jobs:  # a burst of arrivals of one kind (past a capacity its class left slack)
        src = jobs[int(rng.integers(len(jobs)))]
        jobs += [dataclasses.replace(src, id=f"b{tag}_{i}") for i in range(int(rng.integers(5, 40)))]
    return jobs, cl  # (op 5: the same problem again)


@settings(max_examples=30)
@given(st.sampled_from(POLICIES), hostile([3, 40, 63, 64, 65, 127, 128, 129, 160, 256]),
       st.lists(st.integers(0, 10), min_size=3, max_size=6), st.integers(0, 2**16))
def test_resolve_sequences_equal_the_whole_lp(policy: tuple[str, dict], case: Any, ops: list[int],
                                              seed: int) -> None:
    """One policy object re-solving after each change of ``ops`` (see :func:`change`)."""
    name, opts = policy
    n, K, kinds, kw = case
    p = make_problem(seed, n, K, kinds, **kw)
    rng = np.random.default_rng(seed)
    pol = get_policy(name, **opts)
    with routes() as seen:
        what = f"{name} {opts} {n} jobs {kinds} kinds {kw}"
        solve_checked(pol, name, opts, p, seen, what)
        jobs, cl, q = list(p.jobs), p.cluster, p
        for i, op in enumerate(ops):
            jobs, cl = change(rng, op, jobs, cl, kw, f"{seed}_{i}")
            if not jobs:
                return
            if op != 5:
                q = p.with_jobs(jobs, cluster=cl) if rng.random() < 0.5 else Problem(cl, tuple(jobs))
            solve_checked(pol, name, opts, q, seen, f"{what} after {ops[:i + 1]}")


OTHER = ["finish_time_fairness", "finish_time_fairness_agnostic", "makespan", "fifo"]


@settings(max_examples=20)
@given(st.sampled_from(OTHER), hostile([2, 40, 150, 260]), st.integers(0, 2**16))
def test_other_policies_equal_the_whole_lp(name: str, case: Any, seed: int) -> None:
    """Other LP policies (the structured fast path where jobs repeat): status, objective and the
    allocation's rows against the whole LP."""
    n, K, kinds, kw = case
    p = make_problem(seed, n, K, kinds, **kw)
    with routes() as seen:
        solve_checked(get_policy(name), name, {}, p, seen, f"{name} {n} jobs {kinds} kinds {kw}")


@settings(max_examples=25)
@given(st.sampled_from([{}, {"normalize": True}]), st.integers(128, 300), st.integers(1, 6), st.integers(1, 12),
       st.booleans(), st.lists(st.sampled_from([10, 10, 10, 0, 1, 3, 8]), min_size=2, max_size=5),
       st.integers(0, 2**16))
def test_class_routes_after_bursts_equal_the_whole_lp(opts: dict, n: int, K: int, kinds: int, scarce: bool,
                                                      ops: list[int], seed: int) -> None:
    """Max-sum throughput's class routes (its first problem by the class transportation LP, the next
    ones from its kept basis or a HiGHS run on it) after arrivals, bursts of one kind, new kinds and
    completions: a class whose type's capacity was slack (price 0) may overflow it."""
    name = "max_sum_throughput"
    kw: dict[str, Any] = dict(mag=0.0, ties=seed % 2 == 0, zeros=0.3, scales=(1, 2, 4), weighted=False,
                              unconsolidated=False)
    p = make_problem(seed, n, K, kinds, scarce=scarce, **kw)
    rng = np.random.default_rng(seed)
    pol = get_policy(name, **opts)
    with routes() as seen:
        what = f"{name} {opts} {n} jobs {kinds} kinds scarce={scarce}"
        solve_checked(pol, name, opts, p, seen, what)
        jobs, cl = list(p.jobs), p.cluster
        for i, op in enumerate(ops):
            jobs, cl = change(rng, op, jobs, cl, kw, f"{seed}_{i}")
            solve_checked(pol, name, opts, p.with_jobs(jobs), seen, f"{what} after {ops[:i + 1]}")


# ------------------------------------------------------------------------------ each route reached
def _arrive(p: Problem, kind_of: int = 0, new: bool = False) -> Problem:
    src = p.jobs[kind_of]
    job = (dataclasses.replace(src, id="arrived", throughputs={c: v * 1.37 for c, v in src.throughputs.items()})
           if new else dataclasses.replace(src, id="arrived"))
    return p.with_jobs(list(p.jobs) + [job])


def _complete(p: Problem, i: int = 1) -> Problem:
    return p.with_jobs(p.jobs[:i] + p.jobs[i + 1:])


def _emptied(p: Problem) -> Problem:
    """``p`` without the class of its first job (every job of its data)."""
    key = (p.jobs[0].throughputs, p.jobs[0].scale_factor, p.jobs[0].weight)
    return p.with_jobs([j for j in p.jobs if (j.throughputs, j.scale_factor, j.weight) != key])


# (route, policy, options, the problems one policy object solves in turn)
ROUTE_CASES: list[tuple[str, str, dict[str, Any], Any]] = [
    ("arrays", "max_sum_throughput", {}, lambda: [make_problem(1, 40, 4, 40)]),
    ("arrays max-min", "max_min_fairness", {}, lambda: [make_problem(2, 128, 3, 30)]),
    ("arrays max-min", "max_min_fairness", {"fill": False}, lambda: [make_problem(15, 400, 3, 30)]),
    ("transport exact", "max_sum_throughput", {}, lambda: [make_problem(3, 100, 5, 100, ties=True)]),
    ("class LP", "max_sum_throughput", {"normalize": True}, lambda: [make_problem(4, 256, 3, 8)]),
    ("class basis", "max_sum_throughput", {}, lambda: (lambda p: [p, _arrive(p), _complete(p)])(
        make_problem(5, 256, 3, 8))),
    ("class LP run", "max_sum_throughput", {}, lambda: (lambda p: [p, _arrive(p, new=True)])(
        make_problem(6, 256, 3, 8))),
    ("class space", "max_min_fairness", {}, lambda: [make_problem(7, 256, 3, 8)]),
    ("aggregated (class totals)", "max_min_fairness", {}, lambda: (lambda p: [p, _arrive(p), _complete(p, 3)])(
        make_problem(8, 256, 3, 8))),
    ("aggregated (HiGHS)", "max_min_fairness", {"fill": False},
     lambda: (lambda p: [p, _arrive(p), _complete(p, 3)])(make_problem(9, 300, 4, 12, scarce=True))),
    ("aggregated (kept factorization)", "max_min_fairness", {"fill": False},
     lambda: (lambda p: [p, _emptied(p), _emptied(p)])(make_problem(0, 129, 4, 25, weighted=True, scarce=True, gps=1))),
    ("structured", "max_min_fairness", {}, lambda: [make_problem(11, 200, 3, 70)]),
    ("kept model", "max_sum_throughput", {}, lambda: (lambda p: [p, _arrive(p, new=True)])(
        make_problem(12, 200, 3, 200))),
    ("linking prices", "max_sum_throughput", {}, lambda: (lambda p: [p, _complete(p, 7), _arrive(p, new=True)])(
        make_problem(13, 520, 3, 520, zeros=0.0))),
    ("ipm", "max_min_fairness", {"fill": False}, lambda: [make_problem(14, 1000, 4, 1000, zeros=0.0)]),
]


@pytest.mark.parametrize("route,name,opts,problems", ROUTE_CASES, ids=[c[0] for c in ROUTE_CASES])
def test_each_route_is_reached(route: str, name: str, opts: dict[str, Any], problems: Any,
                               request: pytest.FixtureRequest) -> None:
    """Each route answers at least once on inputs chosen for it, every answer cross-checked (max-min's
    kept-model routes, and max-sum's, from a first problem above ``TRANSPORT_MAX_JOBS`` jobs: the
    arrays routes held to that limit, see conftest)."""
    if (name == "max_min_fairness" and not route.startswith("arrays")) or route == "kept model":
        request.getfixturevalue("max_min_arrays_as_max_sum")
    pol = get_policy(name, **opts)
    with routes() as seen:
        for i, p in enumerate(problems()):
            solve_checked(pol, name, opts, p, seen, f"{route}: problem {i}")
    assert seen[route] > 0, f"{route} not reached: {dict(seen)}"


# ------------------------------------------------------------------------- space sharing, isolated
_SPACE_SHARING = textwrap.dedent("""
    import sys
    sys.path.insert(0, sys.argv[1])
    import numpy as np
    from fast_route_checks import make_problem, reference, check, with_pairs
    from policyopt import get_policy

    CASES = [  # (policy, options, jobs, types, kinds, pairs' share, seed)
        ("max_min_fairness", {}, 40, 3, 5, 0.6, 1),
        ("max_min_fairness", {"pair_top_k": 4}, 100, 2, 12, 1.0, 2),
        ("max_min_fairness", {"fill": False}, 60, 4, 60, 0.3, 3),
        ("max_min_fairness_agnostic", {}, 40, 3, 8, 0.6, 4),
        ("max_sum_throughput", {}, 80, 3, 10, 0.6, 5),
        ("max_sum_throughput", {"normalize": True, "pair_top_k": 1}, 50, 5, 50, 1.0, 6),
        ("max_min_fairness", {}, 2, 1, 1, 1.0, 7),
        ("max_min_fairness", {"pair_top_k": 8}, 150, 3, 20, 0.5, 8),
    ]
    for name, opts, n, K, kinds, share, seed in CASES:
        opts = {"space_sharing": True, **opts}
        p = with_pairs(make_problem(seed, n, K, kinds, scarce=seed % 2 == 0, weighted=seed % 3 == 0), seed, share)
        pol = get_policy(name, **opts)
        for q in (p, p.with_jobs(p.jobs[1:] + p.jobs[:1]), p.with_jobs(p.jobs[: max(1, n - 3)])):
            check(pol.solve(q), reference(name, q, **opts), name, opts, f"{name} {opts} {n} jobs", 1e-7)
    print("ok", len(CASES))
""")


def test_space_sharing_in_a_child_process() -> None:
    """Max-min fairness (with and without ``fill``, agnostic) and max-sum throughput with space sharing:
    the first problem, a reorder and three completions, each against the whole LP (rows to HiGHS's
    1e-7: these LPs are solved whole). In a child process: a crash fails this test only."""
    out = subprocess.run([sys.executable, "-c", _SPACE_SHARING, str(HERE)], capture_output=True, text=True,
                         timeout=600, cwd=HERE.parent)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-3000:]}"
    assert out.stdout.split()[-2:] == ["ok", "8"]


@pytest.mark.parametrize("seed", range(6))
def test_class_basis_after_arrivals_past_a_slack_capacity(seed: int) -> None:
    """Max-sum's kept class basis where a few jobs of one kind hold a type no other job can use, its
    capacity slack (price 0): a burst of that kind overflows it, and only the capacity rows' check
    tells (the Lagrangian bound of the kept prices still equals the point's objective)."""
    rng = np.random.default_rng(seed)
    K = int(rng.integers(2, 5))
    p = make_problem(seed, int(rng.integers(128, 260)), K, int(rng.integers(2, 10)), zeros=0.3)
    counts = {**p.cluster.counts, "w0": int(rng.integers(6, 20))}
    fast = {"w0": 50.0, "w1": 1.0}
    others = [dataclasses.replace(j, throughputs={c: v for c, v in j.throughputs.items() if not c.startswith("w0")}
                                  or {"w1": 1.0}) for j in p.jobs]
    first = [Job(f"f{i}", fast) for i in range(int(rng.integers(1, 5)))]
    q = Problem(Cluster.from_counts(counts), tuple(first + others))
    name = "max_sum_throughput"
    pol = get_policy(name)
    with routes() as seen:
        solve_checked(pol, name, {}, q, seen, f"seed {seed}")
        burst = q.with_jobs(list(q.jobs) + [Job(f"g{i}", fast) for i in range(int(rng.integers(5, 30)))])
        solve_checked(pol, name, {}, burst, seen, f"seed {seed}: a burst")
    assert seen["class LP"] == 1 and seen["class basis"] + seen["class LP run"] == 1
