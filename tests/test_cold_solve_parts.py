"""Parts of a cold solve that take shortcuts (consecutive variable columns, the Lagrangian bound in
few passes): each is checked against the general computation it replaces."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from policyopt import Model
from policyopt.modeling import IndexSet
from policyopt.solvers import blocks
from policyopt.standard_form import StandardForm


def _reference_bound(sf: StandardForm, y: np.ndarray, zero_tol: float = 1e-12) -> float:
    """The Lagrangian bound term by term: ``Σ pick(y·l, y·u) + Σ pick(d·lo, d·hi)`` with
    ``d = c − Aᵀy`` (``pick`` = max for a maximization, min for a minimization), a non-finite term
    counted as 0 where its multiplier is at most ``zero_tol`` in size."""
    d = sf.c - sf.A.T @ y
    pick = np.maximum if sf.sense == "max" else np.minimum

    def side(mult: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
        with np.errstate(invalid="ignore"):
            v = pick(mult * lo, mult * hi)
        v = np.where((np.abs(mult) <= zero_tol) & ~np.isfinite(v), 0.0, v)
        return float(v.sum())

    return side(y, sf.row_lower, sf.row_upper) + side(d, sf.col_lower, sf.col_upper) + float(sf.offset)


@pytest.mark.parametrize("sense", ["max", "min"])
@pytest.mark.parametrize("seed", range(6))
def test_lagrangian_bound_equals_the_term_by_term_sum(sense: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = 40, 60
    A = sp.random(m, n, density=0.2, random_state=seed, format="csc")
    lo = rng.normal(size=n) - 1.0
    hi = lo + rng.random(n)
    lo[rng.random(n) < 0.2] = -np.inf
    hi[rng.random(n) < 0.2] = np.inf
    rlo = rng.normal(size=m) - 1.0
    rhi = rlo + rng.random(m)
    rlo[rng.random(m) < 0.3] = -np.inf
    rhi[rng.random(m) < 0.3] = np.inf
    sf = StandardForm(sense=sense, c=rng.normal(size=n), offset=0.5, col_lower=lo, col_upper=hi,
                      integrality=np.zeros(n, np.int32), A=A, row_lower=rlo, row_upper=rhi,
                      row_scale=np.ones(m), row_scale_applied=True)
    y = rng.normal(size=m)
    y[rng.random(m) < 0.3] = 0.0       # zero multipliers on infinite sides: 0·∞ counts as 0
    y[rng.random(m) < 0.1] = 1e-14     # round-off on an infinite side: counts as 0
    y[rng.random(m) < 0.1] = -0.0
    got, d = blocks.lagrangian_bound(sf, y)
    want = _reference_bound(sf, y)
    assert np.array_equal(d, sf.c - sf.A.T @ y)
    assert got == want or (np.isnan(got) and np.isnan(want)), (got, want)
    # finite case: only finite sides where multipliers are non-zero
    sf2 = sf.copy()
    sf2.col_lower, sf2.col_upper = np.where(np.isfinite(lo), lo, -5.0), np.where(np.isfinite(hi), hi, 5.0)
    sf2.row_lower, sf2.row_upper = np.where(np.isfinite(rlo), rlo, -5.0), np.where(np.isfinite(rhi), rhi, 5.0)
    assert blocks.lagrangian_bound(sf2, y)[0] == _reference_bound(sf2, y)


def test_compile_with_consecutive_columns_equals_the_general_path() -> None:
    """Variables of ``Model.add_variables`` number their existing slots consecutively; compiling
    (and reading values) by slices gives what the general gathers give."""
    rng = np.random.default_rng(3)
    jobs, cfg = IndexSet("jobs", [f"j{i}" for i in range(30)]), IndexSet("configs", ["a", "b", "c", "d"])

    def build() -> tuple[Model, object, object]:
        model = Model("m")
        s = model.add_variable("s", lower=-2.0, upper=3.0)
        X = model.add_variables("X", (jobs, cfg), 0.0, 1.0, mask=rng_mask)
        Z = model.add_variables("Z", (cfg,), -1.0, np.inf, integer=True)
        X.upper[0, :] = 0.5  # a caller tightening bounds in place
        model.add_constraints(X.sum("configs") + s <= 1.0, "time")
        model.add_constraints(X.sum("jobs") - Z <= 4.0, "cap")
        model.maximize(X.sum() + s + Z.sum())
        return model, X, Z

    rng_mask = rng.random((30, 4)) < 0.6
    model, X, Z = build()
    assert X.first is not None and Z.first is not None
    fast = model.compile()
    for v in model.variables.values():
        v.first = None
    model._compiled = None
    general = model.compile()
    for k in ("c", "col_lower", "col_upper", "integrality", "row_lower", "row_upper", "row_scale"):
        assert np.array_equal(getattr(fast, k), getattr(general, k)), k
    assert (fast.A != general.A).nnz == 0
    assert fast.col_blocks == general.col_blocks
    x = rng.random(model.num_cols)
    model2, X2, Z2 = build()
    assert np.array_equal(X2.value(x), X.value(x)) and np.array_equal(Z2.value(x), Z.value(x))


def _reference_ranks(owner: np.ndarray, B: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Items with ``owner ≥ 0`` stably sorted by owner, each owner's start, each item's rank."""
    idx = np.flatnonzero(owner >= 0)
    idx = idx[np.argsort(owner[idx], kind="stable")]
    start = np.zeros(B + 1, np.int64)
    np.cumsum(np.bincount(owner[idx], minlength=B), out=start[1:])
    rank = np.full(owner.size, -1, np.int64)
    rank[idx] = np.arange(idx.size) - start[owner[idx]]
    return idx, start, rank


@pytest.mark.parametrize("runs", [1, 2, 3, 20])
@pytest.mark.parametrize("unowned", [False, True])
def test_local_ranks_by_counting_equal_a_stable_sort(runs: int, unowned: bool) -> None:
    """Owners laid out as a few runs of increasing blocks (max-min fairness's rows: every job's time
    row, then every job's epigraph row) are ranked by counting; many runs by a sort; both give the
    stable sort's order, starts and ranks."""
    rng = np.random.default_rng(runs)
    B = 50
    parts = [np.sort(rng.choice(B, size=int(rng.integers(10, B)), replace=False)) for _ in range(runs)]
    owner = np.concatenate(parts).astype(np.int64)
    if unowned:
        owner = np.insert(owner, rng.integers(0, owner.size, 5), -1)
    order, start, rank, in_order = blocks._local_ranks(owner, B)
    want = _reference_ranks(owner, B)
    assert np.array_equal(order, want[0]) and np.array_equal(start, want[1]) and np.array_equal(rank, want[2])
    assert in_order == (runs == 1)


def test_a_model_is_freed_without_the_cyclic_collector() -> None:
    """A model and its variables form no reference cycle (a variable holds its model weakly): the
    model, with every array it holds (its triplets, its compiled form), is freed as soon as its last
    user lets go, not at the cyclic collector's next run, so the memory is reused at once."""
    import gc
    import weakref

    gc.collect()
    gc.disable()
    try:
        m = Model("m")
        jobs = IndexSet("jobs", [f"j{i}" for i in range(5)])
        x = m.add_variables("x", (jobs,), 0.0, 1.0)
        m.add_constraints(x.sum() <= 2.0, "cap")
        m.maximize(x.sum())
        assert x.model is m
        sf = m.compile()
        refs = [weakref.ref(m), weakref.ref(sf), weakref.ref(sf.A)]
        del m, sf  # (the variable alone does not keep its model)
        assert [r() for r in refs] == [None, None, None]
        assert x.model is None
    finally:
        gc.enable()


def test_a_model_pickles_and_deep_copies_with_its_variables() -> None:
    """A model round-trips through pickle and ``copy.deepcopy``: the copy's variables name the copy
    (not the original), and it compiles to the same standard form."""
    import copy
    import pickle

    m = Model("m")
    jobs = IndexSet("jobs", [f"j{i}" for i in range(5)])
    x = m.add_variables("x", (jobs,), 0.0, 1.0)
    m.add_constraints(x.sum() <= 2.0, "cap")
    m.maximize(x.sum())
    for m2 in (pickle.loads(pickle.dumps(m)), copy.deepcopy(m)):
        x2 = m2.variables["x"]
        assert x2.model is m2 and x.model is m
        a, b = m.compile(), m2.compile()
        assert np.array_equal(a.c, b.c) and (a.A != b.A).nnz == 0
        assert np.array_equal(a.row_upper, b.row_upper)
    lone = pickle.loads(pickle.dumps(x))  # (a variable alone does not keep its model alive)
    assert lone.name == "x" and np.array_equal(lone.cols, x.cols)


@pytest.mark.parametrize("policy", ["max_sum_throughput", "max_min_fairness"])
def test_a_policy_solve_leaves_no_cyclic_garbage(policy: str) -> None:
    """A solve's model, compiled form and loaded solver are freed by reference counting: the cyclic
    collector finds nothing of theirs afterwards."""
    import gc

    from policyopt import Cluster, Job, Problem, get_policy

    jobs = tuple(Job(f"j{i}", {"v100": 1.0 + i % 3, "k80": 0.5}, steps_remaining=100.0) for i in range(12))
    problem = Problem(Cluster.from_counts({"v100": 4, "k80": 4}), jobs)
    get_policy(policy).solve(problem)  # (first solves of a process fill caches)
    gc.collect()
    gc.disable()
    try:
        res = get_policy(policy).solve(problem)
        assert res.ok
        del res
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        left = [type(o).__qualname__ for o in gc.garbage if type(o).__module__.startswith("policyopt")]
        assert left == []
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


def _reference_single_mask(T: np.ndarray, scale: np.ndarray, variants: tuple) -> np.ndarray:  # type: ignore[type-arg]
    """A job's slot exists where it has a throughput and fits the type's count, except a consolidated
    slot of a job wider than a server whose unconsolidated throughput is given (element by element)."""
    counts_c, c_u, c_p, gps_p, _ = variants
    n, C = T.shape
    mask = np.zeros((n, C), bool)
    for m in range(n):
        for c in range(C):
            mask[m, c] = T[m, c] > 0 and scale[m] <= counts_c[c]
        for k in range(c_u.size):
            if scale[m] > gps_p[k] and T[m, c_u[k]] > 0:
                mask[m, c_p[k]] = False
    return mask


@pytest.mark.parametrize("distinct", [True, False])
def test_single_mask_equals_the_element_by_element_rule(gavel, distinct: bool) -> None:  # type: ignore[no-untyped-def]
    from policyopt import Cluster
    from policyopt.allocation import AllocationSpace
    from policyopt.sim.traces import gavel_trace, parse_job_type

    trace = gavel_trace(gavel, 200, static=True, multi_gpu=True, seed=5)
    types = [gavel.type_index(*parse_job_type(j.job_type)) for j in trace]
    p = gavel.problem(types, Cluster.from_counts({"v100": 8, "p100": 4, "k80": 16}, gpus_per_server=4))
    space = AllocationSpace(p)
    variants = space._variants
    assert variants[1].size and np.count_nonzero(space.scale > 4)  # unconsolidated data; jobs wider than a server
    if not distinct:  # two unconsolidated configurations backing one consolidated one
        counts_c, c_u, c_p, gps_p, _ = variants
        variants = (counts_c, c_u, np.full_like(c_p, c_p[0]), gps_p * np.arange(1, c_p.size + 1), False)
        space._variants = variants
    got = space._single_mask()
    assert got.flags.c_contiguous and got.shape == space.T.shape
    np.testing.assert_array_equal(got, _reference_single_mask(space.T, space.scale, variants))
