"""Shared by the fast-route cross-checks (tests/test_fast_routes_fuzz.py): hostile problem
generators, the cross-check of an answer against a cold HiGHS simplex solve of the whole LP through
the generic path, and a record of which route answered each solve.

The cross-check (issue 17, point 4): the same status; the objective equal to the cold solve's to
1e-7 relative; the allocation within every row and bound of the whole LP to 1e-9, read on the space
the generic path builds (not the route's own, whose masks and equal shares a route may have
declared from its classes): ``AllocationSpace.check`` (bounds, masks, time rows, capacity rows) and,
for max-min fairness, its epigraph rows (every job's normalized throughput at least the returned
objective ``t*``, less the fill stage's own slack ``t ≥ t*(1 − 1e-9)`` where it ran); the objective
recomputed from the allocation (max-sum: its total; max-min: its smallest level), and max-min's
``fill`` stage total equal to the cold solve's to 1e-7 relative."""
from __future__ import annotations

import collections
import contextlib
import dataclasses
from typing import Any, Iterator

import numpy as np

from policyopt import Cluster, Job, PolicyResult, Problem, get_policy

REL = 1e-7  # objectives
FEAS = 1e-9  # rows and bounds
#: rows and bounds of an answer no certifying route gave (the whole LP by HiGHS, cold or warm, as the
#: reference itself): HiGHS's primal feasibility tolerance
HIGHS_FEAS = 1e-7
#: the routes that certify their answers on the whole LP (every row and bound to 1e-9)
CERTIFIED = frozenset({"arrays", "arrays max-min", "class LP", "class basis", "class LP run", "transport exact",
                       "aggregated (class totals)", "aggregated (kept factorization)", "aggregated (HiGHS)",
                       "structured", "linking prices"})
FILL_SLACK = 1e-9  # max-min's fill stage: t ≥ t*(1 − FILL_SLACK) (formulations.max_min_fairness.FILL_TOLERANCE)

TYPE_NAMES = tuple(f"w{k}" for k in range(12))


# ----------------------------------------------------------------------------------------- inputs
def kind_data(rng: np.random.Generator, K: int, mag: float, ties: bool, zeros: float, scales: tuple[int, ...],
              weighted: bool, unconsolidated: bool) -> dict[str, Any]:
    """One job kind's data on ``K`` types: throughputs ``10**mag`` times a level (``ties``: 1, 2 or
    3; else uniform in [0.5, 10]), each type missing with probability ``zeros`` (a kind may run
    nowhere), an unconsolidated variant on some types, a scale factor of ``scales``, a weight."""
    thr: dict[str, float] = {}
    for k in range(K):
        if rng.random() < zeros:
            continue
        v = float(rng.integers(1, 4)) if ties else float(rng.uniform(0.5, 10.0))
        thr[TYPE_NAMES[k]] = v * 10.0 ** mag
        if unconsolidated and rng.random() < 0.4:
            thr[f"{TYPE_NAMES[k]}_unconsolidated"] = thr[TYPE_NAMES[k]] * float(rng.choice([0.5, 1.0, 1.5]))
    if ties and rng.random() < 0.2:
        thr = {t: 0.0 for t in thr} if rng.random() < 0.5 else thr  # (explicit zeros)
    weight = float(rng.choice([0.5, 1.0, 2.0, 3.0])) if weighted else 1.0
    return {"throughputs": thr, "scale_factor": int(rng.choice(scales)), "weight": weight,
            "priority": bool(rng.random() < 0.1)}


def make_cluster(rng: np.random.Generator, K: int, n: int, scarce: bool, zero_type: bool,
                 gps: int | None) -> Cluster:
    """``K`` types; each ``~n/K`` workers (``scarce``: ``~n/(4K)``), at least one worker in all;
    ``zero_type``: the first type has none."""
    base = max(1, n // (4 * K) if scarce else n // K)
    counts = {TYPE_NAMES[k]: int(rng.integers(max(1, base // 2), 2 * base + 1)) for k in range(K)}
    if zero_type and K > 1:
        counts[TYPE_NAMES[0]] = 0
    return Cluster.from_counts(counts, gpus_per_server=gps)


def make_problem(seed: int, n: int, K: int, kinds: int, *, mag: float = 0.0, ties: bool = False,
                 zeros: float = 0.2, scales: tuple[int, ...] = (1, 2, 4), weighted: bool = False,
                 scarce: bool = False, zero_type: bool = False, gps: int | None = None,
                 unconsolidated: bool = False) -> Problem:
    """``n`` jobs of ``min(kinds, n)`` kinds (shuffled; ``kinds >= n``: every job its own kind) on a
    cluster of ``K`` types (:func:`kind_data`, :func:`make_cluster`)."""
    rng = np.random.default_rng(seed)
    cluster = make_cluster(rng, K, n, scarce, zero_type, gps)
    kinds = max(1, min(kinds, n))
    data = [fit(kind_data(rng, K, mag, ties, zeros, scales, weighted, unconsolidated), cluster, mag)
            for _ in range(kinds)]
    of = np.arange(n) % kinds
    rng.shuffle(of)
    jobs = tuple(Job(f"j{i}", **data[int(g)]) for i, g in enumerate(of))
    return Problem(cluster, jobs)


def fit(data: dict[str, Any], cluster: Cluster, mag: float = 0.0) -> dict[str, Any]:
    """``data`` made a job that fits some worker type (a problem refuses one that fits none): a
    throughput on the largest type, and a scale factor that type holds."""
    counts = cluster.counts
    if any(v > 0 and counts.get(t, 0) >= data["scale_factor"] for t, v in data["throughputs"].items()):
        return data
    big = max(counts, key=lambda t: counts[t])
    thr = dict(data["throughputs"])
    thr[big] = max(thr.get(big, 0.0), 10.0 ** mag)
    sf = data["scale_factor"]
    while sf > counts[big]:
        sf //= 2
    return {**data, "throughputs": thr, "scale_factor": max(sf, 1)}


def with_pairs(p: Problem, seed: int, share: float = 0.5) -> Problem:
    """``p`` with space-sharing throughputs by job type: each job's type is its kind (its data), and
    about ``share`` of the pairs of kinds (a kind with itself included) share each worker type both
    run on, each at 0.2–0.9 of its own throughput there (pairs worth more than one job alone, and
    less)."""
    from policyopt.problem_records import TypeColocation

    rng = np.random.default_rng(seed)
    kinds: dict[Any, str] = {}
    jobs = []
    for j in p.jobs:
        key = (tuple(sorted(j.throughputs.items())), j.scale_factor, j.weight, j.priority)
        jobs.append(dataclasses.replace(j, job_type=kinds.setdefault(key, f"k{len(kinds)}")))
    data = {name: dict(key[0]) for key, name in kinds.items()}
    names = list(data)
    table = []
    for a in range(len(names)):
        for b in range(a, len(names)):
            if rng.random() >= share:
                continue
            ta, tb = data[names[a]], data[names[b]]
            for w in p.cluster.names:
                if ta.get(w, 0.0) > 0 and tb.get(w, 0.0) > 0:
                    fa, fb = rng.uniform(0.2, 0.9, 2)
                    table.append(TypeColocation((names[a], names[b]), w, (ta[w] * fa, tb[w] * fb)))
    return Problem(p.cluster, tuple(jobs), colocated_types=tuple(table))


# ---------------------------------------------------------------------------------- cross-check
def reference(name: str, problem: Problem, **opts: Any) -> PolicyResult:
    """A cold HiGHS simplex solve of the whole LP through the generic path (no route, no kept model)."""
    return get_policy(name, algorithm="simplex", **opts).solve(problem)


def _levels(name: str, opts: dict[str, Any], res: PolicyResult, X: np.ndarray) -> np.ndarray:
    """Max-min fairness: each job's normalized throughput under ``X`` on ``res``'s space."""
    pol = get_policy(name, **opts)
    sp = res.space
    T, Tp = pol.data(sp)
    return np.asarray(pol.normalizer(sp) * sp.throughput_values(X, T, Tp) if sp.num_pairs else
                      pol.normalizer(sp) * sp.throughput_values(X, T))


def certified(before: collections.Counter, after: collections.Counter) -> bool:
    """Whether a certifying route (:data:`CERTIFIED`) answered between two readings of :func:`routes`."""
    return any(after[k] > before[k] for k in CERTIFIED)


def check(got: PolicyResult, ref: PolicyResult, name: str, opts: dict[str, Any], what: str = "",
          feas: float = FEAS) -> None:
    """``got`` (any route) against ``ref`` (:func:`reference` on the same problem); see the module
    docstring. ``what`` names the case in failure messages; ``feas``: the rows' tolerance
    (:data:`HIGHS_FEAS` for an answer of the whole LP by HiGHS)."""
    assert got.status == ref.status, f"{what}: status {got.status} against {ref.status}"
    assert [str(j) for j in got.space.jobs.labels] == [str(j) for j in ref.space.jobs.labels], what
    if not ref.ok:
        return
    sp = ref.space
    X = np.asarray(got.X)
    assert X.shape == ref.X.shape, f"{what}: allocation shape {X.shape} against {ref.X.shape}"
    viol = sp.check(X, tol=feas)
    assert not viol, f"{what}: allocation infeasible on the whole LP: {viol}"
    assert got.objective is not None and ref.objective is not None, what
    obj, r = float(got.objective), float(ref.objective)
    scale = max(abs(r), _magnitude(sp))
    assert abs(obj - r) <= REL * max(abs(r), 1e-300) or abs(obj - r) <= 1e-12 * scale, \
        f"{what}: objective {obj!r} against the whole LP's {r!r} (rel {abs(obj - r) / max(abs(r), 1e-300):.3g})"
    if name.startswith("max_min_fairness"):
        lev = _levels(name, opts, ref, X)
        if lev.size:  # (the fill stage holds t at t*(1 - FILL_SLACK): its rows, to 1e-9)
            slack = FILL_SLACK * abs(obj) if opts.get("fill", True) else 0.0
            assert lev.min() >= obj - slack - feas * max(1.0, abs(obj)), \
                f"{what}: an epigraph row violated: smallest level {lev.min()!r} < objective {obj!r}"
            assert lev.min() <= obj * (1 + REL) + 1e-12, f"{what}: smallest level {lev.min()!r} > objective {obj!r}"
        f_got, f_ref = (got.extra or {}).get("fill"), (ref.extra or {}).get("fill")
        if f_ref is not None and opts.get("fill", True):
            assert f_got is not None, f"{what}: no fill stage"
            a, b = _fill_total(name, opts, ref, X), _fill_total(name, opts, ref, np.asarray(ref.X))
            assert abs(a - b) <= REL * max(abs(b), 1e-12), f"{what}: fill total {a!r} against {b!r}"
    elif name == "max_sum_throughput":
        thr = sp.throughput_values(X)
        if opts.get("normalize"):
            thr = thr / sp.equal_share_throughput()
        tot = float(np.sum(thr))
        assert abs(tot - obj) <= REL * max(abs(obj), 1e-300) or abs(tot - obj) <= 1e-12 * scale, \
            f"{what}: objective {obj!r} is not the allocation's total {tot!r}"


def _fill_total(name: str, opts: dict[str, Any], res: PolicyResult, X: np.ndarray) -> float:
    """Max-min's fill objective: the total normalized throughput ``Σ thr(m)/thr(m, X_equal)``."""
    sp = res.space
    pol = get_policy(name, **opts)
    T, Tp = pol.data(sp)
    thr = sp.throughput_values(X, T, Tp) if sp.num_pairs else sp.throughput_values(X, T)
    return float(np.sum(thr / sp.equal_share_throughput(T)))


def _magnitude(sp: Any) -> float:
    T = np.asarray(sp.T)
    return float(np.abs(T[np.isfinite(T)]).max()) * max(1, len(sp.jobs)) if T.size else 1.0


# ------------------------------------------------------------------------------------- routes
@contextlib.contextmanager
def routes(setattr_: Any | None = None) -> Iterator[collections.Counter]:
    """Count which route answered each solve while inside: the keys are the routes of
    docs/solvers-fast-paths.md and the re-solve pages (``arrays``, ``arrays max-min``, ``class LP``,
    ``class basis``, ``class LP run``, ``transport exact``, ``class space``, ``aggregated (…)``,
    ``structured``, ``linking prices``, ``kept model``, ``seeded prices``, ``ipm``). ``setattr_``:
    pytest's ``monkeypatch.setattr`` (else patched here and restored on exit)."""
    from policyopt import (aggregate_cold, aggregate_resolve, class_transport, incremental, transport_resolve,
                           transport_route)
    from policyopt.solvers import blocks, highs, prices, transport, transport_exact

    seen: collections.Counter = collections.Counter()
    undo: list[tuple[Any, str, Any]] = []

    def patch(obj: Any, attr: str, new: Any) -> None:
        if setattr_ is not None:
            setattr_(obj, attr, new)
        else:
            undo.append((obj, attr, getattr(obj, attr)))
            setattr(obj, attr, new)

    def on_result(obj: Any, attr: str, key: str, hit: Any = lambda r: r is not None) -> None:
        f = getattr(obj, attr)

        def spy(*a: Any, **k: Any) -> Any:
            r = f(*a, **k)
            if hit(r):
                seen[key] += 1
            return r

        patch(obj, attr, spy)

    on_result(transport_route, "solve", "arrays")
    on_result(transport_route, "solve_max_min", "arrays max-min")
    on_result(class_transport, "solve", "class LP")
    on_result(transport_exact, "solve", "transport exact")
    on_result(aggregate_cold, "build", "class space")
    on_result(blocks, "certify", "structured", lambda r: bool(r[0]))
    on_result(prices, "solve", "linking prices", lambda r: r[0] is not None)
    on_result(incremental, "seed_prices", "seeded prices", bool)
    on_result(incremental.JobSetModel, "update", "kept model")
    f_res = transport_resolve.solve

    def resolve_spy(policy: Any, problem: Any) -> Any:
        before = transport_resolve.answered(policy)
        r = f_res(policy, problem)
        after = transport_resolve.answered(policy)
        if after[0] > before[0]:
            seen["class basis"] += 1
        elif after[1] > before[1]:
            seen["class LP run"] += 1
        return r

    patch(transport_resolve, "solve", resolve_spy)
    f_agg = aggregate_resolve._Loaded._result

    def agg_spy(self: Any, *a: Any) -> Any:
        if a[5] != "class totals":  # (counted where the totals answer: below)
            seen[f"aggregated ({a[5]})"] += 1
        return f_agg(self, *a)

    patch(aggregate_resolve._Loaded, "_result", agg_spy)
    # (the class totals' answers: through resolve, or taken by max-min fairness's solve directly)
    on_result(aggregate_resolve._Loaded, "totals_answer", "aggregated (class totals)")
    f_run = highs.HighsModel._run

    def run_spy(self: Any) -> Any:
        v = self.h.getOptionValue("solver")
        if (v[1] if isinstance(v, tuple) else v) == "ipm":
            seen["ipm"] += 1
        return f_run(self)

    patch(highs.HighsModel, "_run", run_spy)
    _ = transport  # (transport.solve calls transport_exact.solve through the module: spied above)
    try:
        yield seen
    finally:
        for obj, attr, old in reversed(undo):
            setattr(obj, attr, old)
