"""The fixed cost of a solve, cut without changing any answer: result dictionaries built on first
access (``PolicyResult.defer``), the warm-start basis read only when a next solve uses it, and
``Highs`` objects reused."""
from __future__ import annotations

import copy
import pickle

import numpy as np
import pytest

from policyopt import Cluster, Job, Problem, SolverOptions, get_policy
from policyopt.result import PolicyResult, Status
from policyopt.warm_start import recall

# max-sum at these sizes answers by its transportation LP otherwise (no kept model): see conftest
pytestmark = pytest.mark.usefixtures("no_transport_route")


def problem(n: int, seed: int) -> Problem:
    rng = np.random.default_rng(seed)
    types = ("v100", "p100", "k80")
    jobs = tuple(Job(f"j{i}", {t: float(rng.uniform(0.5, 10)) for t in types if rng.random() < 0.8 or t == "k80"},
                     scale_factor=int(rng.choice([1, 1, 2])), weight=float(rng.choice([1.0, 2.0])))
                 for i in range(n))
    return Problem(Cluster.from_counts({t: max(2, n // 4) for t in types},
                                       prices={"v100": 3.06, "p100": 1.46, "k80": 0.90}), jobs)


@pytest.mark.parametrize("name", ["max_min_fairness", "max_sum_throughput", "makespan"])
@pytest.mark.parametrize("space_sharing", [False, True])
def test_deferred_dictionaries_equal_the_eager_ones(gavel, name: str, space_sharing: bool) -> None:
    p = gavel.problem(list(range(0, len(gavel.job_types), 4)), {"v100": 8, "p100": 8, "k80": 8},
                      colocated="types" if space_sharing else False)
    res = get_policy(name, space_sharing=space_sharing).solve(p)
    assert not space_sharing or res.space.num_pairs > 0
    space, X = res.space, res.X
    for field in ("allocation", "colocated_allocation", "effective_throughputs"):
        assert not res.is_built(field)
    assert res.allocation == space.allocation_dict(X)
    assert res.colocated_allocation == space.colocated_list(X)
    thr = space.throughput_values(X)
    assert res.effective_throughputs == dict(zip(space.jobs.labels.tolist(), thr.tolist()))
    assert res.is_built("allocation") and res.is_built("effective_throughputs")


def test_deferred_result_pickles_copies_and_serializes() -> None:
    res = get_policy("max_sum_throughput").solve(problem(10, 1))
    ref = copy.copy(res.space.allocation_dict(res.X))
    clone = pickle.loads(pickle.dumps(res))  # builders are closures: built before pickling
    assert clone.allocation == ref and clone.effective_throughputs == res.effective_throughputs
    res2 = get_policy("max_sum_throughput").solve(problem(10, 1))
    assert copy.deepcopy(res2).allocation == ref
    res3 = get_policy("max_sum_throughput").solve(problem(10, 1))
    assert res3.to_dict()["allocation"] == ref
    res3.allocation = {"x": {}}  # assigning replaces a pending builder
    assert res3.allocation == {"x": {}} and res3.is_built("allocation")
    with pytest.raises(ValueError, match="cannot defer"):
        PolicyResult("p", "s", Status.OPTIMAL, 0.0, {}).defer(timings=dict)


def test_mechanism_arrays_same_from_deferred_and_built_dictionaries() -> None:
    from policyopt.sim.scheduling import mechanism_arrays

    p = problem(16, 5)
    scale = {j.id: j.scale_factor for j in p.jobs}
    counts = {"v100": 4, "p100": 2, "k80": 4}
    lazy = get_policy("max_min_fairness").solve(p)
    eager = get_policy("max_min_fairness").solve(p)
    _ = eager.allocation, eager.colocated_allocation  # built
    a = mechanism_arrays(lazy, tuple(counts), counts, scale)
    b = mechanism_arrays(eager, tuple(counts), counts, scale)
    assert a is not None and b is not None and not lazy.is_built("allocation")
    np.testing.assert_array_equal(a.x, b.x)
    assert a.job_ids == b.job_ids and a.combos == b.combos


def test_warm_basis_is_read_only_when_the_next_solve_uses_it(no_price_path: None) -> None:
    pol = get_policy("max_sum_throughput")
    p = problem(30, 2)
    pol.solve(p)
    snap = recall(pol)
    assert snap is not None and snap._source is not None  # not read yet
    q = p.with_jobs(list(p.jobs)[:-1])
    pol.solve(q)  # a job less: the kept model is updated in place (policyopt.incremental), nothing read
    assert snap._source is not None
    snap = recall(pol)
    assert snap is not None and snap._source is not None
    # another cluster is not a change of the job set: a cold build, which reads and carries the basis
    pol.solve(q.with_jobs(q.jobs, cluster=Cluster.from_counts({"v100": 9, "p100": 7, "k80": 7})))
    assert snap._source is None and snap.statuses() is not None


def test_reused_highs_object_starts_clean() -> None:
    """A ``Highs`` object handed back by a collected model is reused with HiGHS's default options
    and no model, basis or solution left from before."""
    import gc

    from policyopt.solvers import highs as hb

    forms = []

    class Recording(hb.HighsSolver):
        def load(self, sf, options):  # type: ignore[no-untyped-def]
            forms.append(sf.copy())
            return super().load(sf, options)

    pol = get_policy("max_sum_throughput")
    pol.config["solver"] = Recording()
    pol.solve(problem(20, 4))
    sf = forms[0]
    first = hb.HighsSolver().load(sf.copy(), SolverOptions(time_limit=5.0, extra={"presolve": "off"}))
    r1 = first.solve()
    h = first.h
    del first
    gc.collect()
    second = hb.HighsSolver().load(sf.copy(), SolverOptions())
    assert second._h is h  # reused
    assert h.getOptionValue("time_limit")[1] == float("inf")  # (status, value)
    assert h.getOptionValue("presolve")[1] == "choose"
    assert h.getNumCol() == 0  # no model until the solve passes it
    r2 = second.solve()
    assert r2.ok and r2.objective == pytest.approx(r1.objective, rel=1e-12) and r2.iterations and r2.iterations > 0


def test_time_limit_is_per_run_on_reused_and_re_solved_highs_objects() -> None:
    """HiGHS compares ``time_limit`` with a ``Highs`` object's run time summed over all its runs
    (``clearModel`` and ``resetOptions`` keep it): a reused object that had run longer than the limit
    stopped a small LP at once with status ``time_limit``, and so did a model re-solved until its runs
    added up to the limit. Each run now gets the limit on its own (HiGHS's limit is wall-clock: the
    LPs here solve in milliseconds, far below it)."""
    import gc

    from policyopt.solvers import highs as hb
    from policyopt.solvers.highs_support import _POOL

    limit = 0.2
    big = problem(256, 8)
    pol = get_policy("max_min_fairness", algorithm="simplex", fill=False)
    for _ in range(400):  # a pooled object with more than `limit` of run time behind it
        pol.solve(big)
        gc.collect()
        free = _POOL.__dict__.get("free", [])
        if free and max(h.getRunTime() for h in free) > 2 * limit:
            break
    free = _POOL.__dict__.get("free", [])
    assert free and max(h.getRunTime() for h in free) > 2 * limit
    free.sort(key=lambda h: h.getRunTime())  # the most used one is handed out next
    small = problem(12, 3)
    res = get_policy("max_sum_throughput", time_limit=limit).solve(small)
    assert res.status.value == "optimal", res.message
    assert res.objective == pytest.approx(get_policy("max_sum_throughput").solve(small).objective, rel=1e-9)
    # one model re-solved cold until its runs add up to more than the limit
    forms = []

    class Recording(hb.HighsSolver):
        def load(self, sf, options):  # type: ignore[no-untyped-def]
            forms.append(sf.copy())
            return super().load(sf, options)

    rec = get_policy("max_min_fairness", fill=False)
    rec.config["solver"] = Recording()
    rec.solve(problem(48, 5))
    _POOL.__dict__["free"] = []  # a new Highs object: only this model's runs count
    loaded = hb.HighsSolver().load(forms[0], SolverOptions(algorithm="simplex", time_limit=limit))
    solves = 0
    while loaded.h.getRunTime() <= 2 * limit and solves < 5000:
        loaded.clear_warm_start()
        r = loaded.solve()
        assert r.status.value == "optimal", (solves, r.message)
        solves += 1
    assert loaded.h.getRunTime() > 2 * limit


@pytest.mark.parametrize("lo, hi", [(0.25, 0.75), (-np.inf, 0.5), (0.3, np.inf), (float("nan"), 1.0), (0.9, 0.95)])
def test_one_column_bounds_equal_the_array_path(lo: float, hi: float) -> None:
    """``HighsModel.set_col_bounds`` of one column (in Python floats) leaves the standard form, HiGHS's
    model, the kept-solution check and the next answer exactly as the array path does."""
    from policyopt.modeling import IndexSet, Model
    from policyopt.solver_api import get_solver

    def build() -> tuple:
        m = Model("one")
        x = m.add_variables("x", (IndexSet("i", ["a", "b", "c"]),), 0.0, 1.0)
        m.add_constraints(x.sum() <= 1.5, "cap")
        m.maximize((x * np.array([1.0, 2.0, 3.0])).sum())
        loaded = get_solver("highs").load(m.compile(), SolverOptions(degenerate=True))
        assert loaded.solve().status is Status.OPTIMAL
        return loaded

    one, many = build(), build()
    one.set_col_bounds(np.array([2]), np.array([lo]), np.array([hi]))
    # the array path (two columns; column 0 keeps its bounds)
    many.set_col_bounds(np.array([0, 2]), np.array([0.0, lo]), np.array([1.0, hi]))
    for a, b in ((one.sf.col_lower, many.sf.col_lower), (one.sf.col_upper, many.sf.col_upper)):
        assert np.array_equal(a, b, equal_nan=True)
    assert (one._last is None) == (many._last is None)
    lp1, lp2 = one.h.getLp(), many.h.getLp()
    assert np.array_equal(lp1.col_lower_, lp2.col_lower_) and np.array_equal(lp1.col_upper_, lp2.col_upper_)
    r1, r2 = one.solve(), many.solve()
    assert r1.status is r2.status and (r1.objective == r2.objective or (r1.objective is None and r2.objective is None))


def test_deferred_constructor_equals_constructor_then_defer() -> None:
    from policyopt.result import Timings

    builders = {"allocation": lambda: {"a": {"v100": 0.5}}, "colocated_allocation": list,
                "effective_throughputs": lambda: {"a": 1.0}}
    fast = PolicyResult.deferred("p", "highs", Status.OPTIMAL, 2.0, Timings(solve=1.0), "m", {"k": 1}, dict(builders),
                                 np.ones((1, 1)), None)
    slow = PolicyResult("p", "highs", Status.OPTIMAL, 2.0, {}, timings=Timings(solve=1.0), message="m",
                        extra={"k": 1}, X=np.ones((1, 1))).defer(**builders)
    for field in ("allocation", "colocated_allocation", "effective_throughputs"):
        assert not fast.is_built(field)
    assert fast == slow and fast.to_dict() == slow.to_dict() and repr(fast) == repr(slow)
    assert pickle.loads(pickle.dumps(fast)) == slow
    with pytest.raises(ValueError, match="deferred needs a builder"):
        PolicyResult.deferred("p", "s", Status.OPTIMAL, 0.0, Timings(), "", {}, {"allocation": dict})


def _mask_by_pairs(space) -> np.ndarray:  # type: ignore[no-untyped-def]
    """The single-job mask written out per (unconsolidated, consolidated) configuration pair."""
    counts_c = space.counts[space.config_type]
    mask = (space.T > 0) & (space.scale[:, None] <= counts_c[None, :])
    labels = space.configs.labels.tolist()
    for cu, name in enumerate(labels):
        if not name.endswith("_unconsolidated"):
            continue
        t = space.config_type[cu]
        same = [c for c, other in enumerate(labels)
                if space.config_type[c] == t and not other.endswith("_unconsolidated")]
        if same:
            cp = same[0]
            spread = (space.scale > space.gpus_per_server[t]) & (space.T[:, cu] > 0)
            mask[spread, cp] = False
    return mask


@pytest.mark.parametrize("seed", range(6))
def test_single_mask_equals_the_per_pair_rule(seed: int) -> None:
    from policyopt.allocation import AllocationSpace

    rng = np.random.default_rng(seed)
    types = ("v100", "p100", "k80")
    gps = {t: int(rng.choice([1, 2, 4])) for t in types}
    counts = {t: int(rng.integers(2, 9)) for t in types}
    counts["k80"] = 8  # every job fits there
    cluster = Cluster.from_counts(counts, gpus_per_server=gps)
    configs = [*types, "v100_unconsolidated", *(f"{t}_unconsolidated" for t in types[1:] if rng.random() < 0.7)]
    jobs = []
    for i in range(30):
        thr = {c: float(rng.uniform(0.5, 5)) for c in configs if rng.random() < 0.75}
        thr.setdefault("k80", 1.0)
        jobs.append(Job(f"j{i}", thr, scale_factor=int(rng.choice([1, 2, 4, 8]))))
    space = AllocationSpace(Problem(cluster, tuple(jobs)))
    np.testing.assert_array_equal(space.single_mask, _mask_by_pairs(space))


@pytest.mark.parametrize("space_sharing", [False, True])
def test_allocation_rows_equal_the_operator_rows(gavel, space_sharing: bool) -> None:
    """A space's time and capacity rows (Model.add_matrix_rows) compile to what the expression
    operators give, bit for bit."""
    from policyopt.allocation import AllocationSpace
    from policyopt.modeling import LinExpr, Model

    p = gavel.problem(list(range(0, len(gavel.job_types), 3)), {"v100": 6, "p100": 8, "k80": 5},
                      colocated="types" if space_sharing else False)
    space = AllocationSpace(p, space_sharing=space_sharing)
    assert not space_sharing or space.num_pairs > 0
    fast = Model()
    space.add_allocation(fast)
    ref = Model()
    X = ref.add_variables("X", (space.rows, space.configs), 0.0, 1.0, mask=space.mask)
    ref.add_constraints(LinExpr.from_matrix(space.membership_matrix(), X, (space.jobs,)) <= 1.0, "X_job_time")
    ref.add_constraints(LinExpr.from_matrix(space.capacity_matrix(), X, (space.worker_types,)) <= space.counts,
                        "X_capacity")
    a, b = fast.compile(), ref.compile()
    for arr in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(a.A, arr), getattr(b.A, arr))
    for field in ("row_lower", "row_upper", "row_scale", "col_lower", "col_upper"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
    assert a.row_blocks == b.row_blocks


def test_matrix_rows_refuse_non_finite_bounds() -> None:
    from policyopt.errors import ModelingError
    from policyopt.modeling import IndexSet, Model

    m = Model()
    d = IndexSet("a", ["x", "y"])
    x = m.add_variables("x", (d,))
    for bad in (np.inf, np.nan, np.array([1.0, np.nan])):
        with pytest.raises(ModelingError, match="NaN or infinity"):
            m.add_matrix_rows(np.eye(2), x, (d,), bad, f"r{m.num_rows}")
    m.add_matrix_rows(np.eye(2), x, (d,), 2.0, "r")
    with pytest.raises(ModelingError, match="already exists"):
        m.add_matrix_rows(np.eye(2), x, (d,), 2.0, "r")


@pytest.mark.parametrize("seed", range(5))
def test_throughput_values_and_normalized_costs_equal_the_matrix_route(seed: int) -> None:
    """Without pair rows, thr(m) and the normalized-throughput costs are computed without the
    throughput matrix: bit for bit what the matrix gives (signs of zero included)."""
    from policyopt.allocation import AllocationSpace
    from policyopt.formulations.makespan import normalized_throughput_costs
    from policyopt.modeling import Model

    rng = np.random.default_rng(seed)
    p = problem(int(rng.integers(3, 40)), seed)
    space = AllocationSpace(p)
    X = rng.random(space.mask.shape) * (rng.random(space.mask.shape) < 0.6)
    X[0, :] = -0.0  # a job whose sum is of negative zeros
    X[~space.mask] = rng.random(int((~space.mask).sum()))  # ignored: not slots
    T_agn, _ = space.agnostic_throughputs()
    for T in (None, T_agn):
        assert space._thr_matrix is None
        fast = space.throughput_values(X, T)
        M = space.throughput_matrix(T)
        space._thr_matrix = None
        ref = M @ X.ravel()
        assert np.array_equal(fast, ref) and np.array_equal(np.signbit(fast), np.signbit(ref))
        m = Model()
        var = space.add_allocation(m)
        cols, costs = normalized_throughput_costs(space, var, T)
        per_slot = np.bincount(M.cols, weights=M.vals / space.equal_share_throughput(T)[M.rows],
                               minlength=M.shape[1])
        flat = var.cols.ravel()
        np.testing.assert_array_equal(cols, flat[flat >= 0])
        np.testing.assert_array_equal(costs, per_slot[flat >= 0])
    assert np.array_equal(space.throughput_values(X), space.throughput_matrix() @ X.ravel())  # matrix kept now


def test_is_mip_follows_the_integrality_array() -> None:
    from policyopt.modeling import IndexSet, Model

    m = Model()
    x = m.add_variables("x", (IndexSet("a", ["p", "q"]),), 0.0, 4.0)
    m.maximize(x.sum())
    sf = m.compile()
    assert not sf.is_mip and not sf.integrality.flags.writeable  # kept: the array cannot change in place
    with pytest.raises(ValueError):
        sf.integrality[0] = 1
    sf.integrality = np.array([0, 1], np.int8)  # a new array (writable): asked again every time
    assert sf.is_mip
    sf.integrality[1] = 0
    assert not sf.is_mip
    assert m.add_variables("y", (), integer=True) is not None and m.compile().is_mip
    sf2 = m.compile()
    clone = pickle.loads(pickle.dumps(sf2))  # its integrality arrives writable: asked again
    clone.integrality[:] = 0
    assert sf2.is_mip and not clone.is_mip


def test_cluster_arrays_follow_the_configurations_of_one_cluster_object() -> None:
    from policyopt.allocation import AllocationSpace

    cluster = Cluster.from_counts({"v100": 8, "k80": 8}, gpus_per_server=4)
    plain = Problem(cluster, (Job("a", {"v100": 2.0, "k80": 1.0}, scale_factor=8),))
    spread = Problem(cluster, (Job("a", {"v100": 2.0, "v100_unconsolidated": 1.5, "k80": 1.0}, scale_factor=8),))
    for _ in range(2):  # asked in turn: each space gets its own configurations' arrays
        s1, s2 = AllocationSpace(plain), AllocationSpace(spread)
        assert s1.configs.labels.tolist() == ["v100", "k80"] and not s1.config_unconsolidated.any()
        assert s2.configs.labels.tolist() == ["v100", "k80", "v100_unconsolidated"]
        assert s2.config_unconsolidated.tolist() == [False, False, True]
        assert s1.single_mask.tolist() == [[True, True]]
        assert s2.single_mask.tolist() == [[False, True, True]]  # spread over servers: the variant only
