"""The modeling operators never build a wrong model silently.

Each case here was a silent or obscure failure before: a chained comparison kept only its last half,
``Variable == value`` returned ``False``, and numpy broadcast over an expression as an opaque object
(``ndarray * expr`` gave an object array, ``ndarray <= expr`` a boolean array).
"""
from __future__ import annotations

import numpy as np
import pytest

from policyopt import IndexSet, Model, SolverOptions, get_solver
from policyopt.errors import ModelingError
from policyopt.modeling import Constraint, LinExpr


@pytest.fixture
def model_x():
    m = Model("ops")
    x = m.add_variables("x", (IndexSet("i", ["a", "b"]),), lower=-10.0, upper=10.0)
    return m, x


def _solve(m: Model):
    res = get_solver("highs").solve(m.compile(), SolverOptions())
    assert res.status.value == "optimal"
    return res


@pytest.mark.parametrize("chain", [
    lambda e: 2 <= e <= 5,
    lambda e: 5 >= e >= 2,
    lambda e: e <= 5 <= 7,
    lambda e: 0 <= e == 3,
])
def test_chained_comparison_raises(model_x, chain):
    _, x = model_x
    with pytest.raises(ModelingError, match="chained comparisons"):
        chain(x.expr())
    with pytest.raises(ModelingError, match="chained comparisons"):
        chain(x)


def test_chained_comparison_cannot_reach_the_model(model_x):
    """The measured failure: min Σx under `2 <= x <= 5` gave −20 (only x ≤ 5 kept); `between` gives 4."""
    m, x = model_x
    with pytest.raises(ModelingError):
        m.add_constraints(2 <= x.expr() <= 5, "range")
    m.add_constraints(x.expr().between(2, 5), "range")
    m.minimize(x.sum())
    assert _solve(m).objective == pytest.approx(4.0)


def test_constraint_has_no_truth_value(model_x):
    _, x = model_x
    c = x.expr() <= 1
    for use in (bool, lambda c: c and True, lambda c: not c, lambda c: 1 if c else 0):
        with pytest.raises(ModelingError):
            use(c)


@pytest.mark.parametrize("lhs", ["var", "expr"])
def test_eq_builds_a_constraint_on_variable_and_expression(model_x, lhs):
    m, x = model_x
    c = (x if lhs == "var" else x.expr()) == np.array([3.0, -2.0])
    assert isinstance(c, Constraint)
    m.add_constraints(c, "fix")
    m.minimize(x.sum())
    res = _solve(m)
    np.testing.assert_allclose(x.value(res.x), [3.0, -2.0])


def test_scalar_variable_eq_and_reflected_eq():
    m = Model()
    y = m.add_variable("y", lower=-5, upper=5)
    c = 3 == y  # reflected: int.__eq__ gives NotImplemented, then y.__eq__(3)
    assert isinstance(c, Constraint)
    m.add_constraints(c, "fix")
    m.maximize(y)
    assert _solve(m).objective == pytest.approx(3.0)


def test_ne_is_rejected(model_x):
    _, x = model_x
    with pytest.raises(ModelingError, match="!="):
        x != 3  # noqa: B015
    with pytest.raises(ModelingError, match="!="):
        x.expr() != 3  # noqa: B015


def test_variables_still_hash_by_identity(model_x):
    m, x = model_x
    y = m.add_variable("y")
    d = {x: "x", y: "y"}
    assert d[x] == "x" and d[y] == "y"


@pytest.mark.parametrize("operand", ["var", "expr"])
def test_ndarray_times_expression_equals_expression_times_ndarray(model_x, operand):
    _, x = model_x
    e = x if operand == "var" else x.expr()
    a = np.array([2.0, -3.0])
    left, right = a * e, e * a
    assert isinstance(left, LinExpr) and isinstance(right, LinExpr)
    pt = np.array([1.5, 4.0])
    np.testing.assert_allclose(left.evaluate(pt), right.evaluate(pt))
    np.testing.assert_allclose(left.evaluate(pt), [3.0, -12.0])
    s = np.float64(2.0) * e
    assert isinstance(s, LinExpr)
    np.testing.assert_allclose(s.evaluate(pt), [3.0, 8.0])


def test_ndarray_plus_minus_expression(model_x):
    _, x = model_x
    a = np.array([1.0, 2.0])
    pt = np.array([10.0, 20.0])
    add, sub = a + x.expr(), a - x
    assert isinstance(add, LinExpr) and isinstance(sub, LinExpr)
    np.testing.assert_allclose(add.evaluate(pt), [11.0, 22.0])
    np.testing.assert_allclose(sub.evaluate(pt), [-9.0, -18.0])


@pytest.mark.parametrize("op, sense", [
    (lambda a, e: a <= e, "min"),  # a ≤ e: minimizing Σe puts e at a
    (lambda a, e: a >= e, "max"),  # e ≤ a: maximizing puts e at a
    (lambda a, e: a == e, "min"),
    (lambda a, e: a == e, "max"),
])
def test_ndarray_comparison_builds_a_constraint(model_x, op, sense):
    m, x = model_x
    a = np.array([1.0, 2.0])
    c = op(a, x.expr())
    assert isinstance(c, Constraint)
    m.add_constraints(c, "c")
    (m.minimize if sense == "min" else m.maximize)(x.sum())
    np.testing.assert_allclose(x.value(_solve(m).x), a)


def test_nonlinear_operations_raise(model_x):
    _, x = model_x
    with pytest.raises(ModelingError, match="not linear"):
        x * x
    with pytest.raises(ModelingError, match="not linear"):
        np.array([1.0, 2.0]) / x.expr()
    with pytest.raises(ModelingError, match="not linear"):
        1.0 / x


def test_a_sum_keeps_its_blocks_until_read_and_compiles_the_same() -> None:
    m = Model("sum")
    idx = IndexSet("i", ["a", "b", "c"])
    x = m.add_variables("x", (idx,), 0.0, 1.0)
    y = m.add_variables("y", (idx,), 0.0, 1.0)
    e = x + 2.0 * y + x
    assert len(e.terms) == 3  # not concatenated by the sums
    m.add_constraints(e <= 1.0, "row")
    m.maximize(e)
    A = m.compile(scale_rows=False).A.toarray()
    np.testing.assert_array_equal(A, np.hstack([2.0 * np.eye(3), 2.0 * np.eye(3)]))
    np.testing.assert_array_equal(e.rows, [0, 1, 2] * 3)  # reading joins the blocks, in order
    np.testing.assert_array_equal(e.coefs, [1.0] * 3 + [2.0] * 3 + [1.0] * 3)
    assert len(e.terms) == 1
    np.testing.assert_array_equal(m.blocks["row"].cols, e.cols)
    assert (-e).coefs.tolist() == (-e.coefs).tolist()


def test_variable_bounds_can_be_tightened_in_place() -> None:
    m = Model("bounds")
    x = m.add_variables("x", (IndexSet("i", ["a", "b"]),), 0.0, 1.0)
    x.upper[...] = 0.5  # scalar bounds are the variable's own arrays
    x.lower[1] = 0.25
    sf = m.compile()
    assert sf.col_upper.tolist() == [0.5, 0.5] and sf.col_lower.tolist() == [0.0, 0.25]


@pytest.mark.parametrize("seed", range(4))
def test_small_compile_matrix_equals_scipys_coo_conversion(seed: int) -> None:
    """``compile`` sorts up to ``_SMALL_NNZ`` triplets itself: the same CSC matrix as scipy's COO
    conversion (duplicates summed, explicit zeros kept, sorted row indices, same index types)."""
    import scipy.sparse as sp

    from policyopt.modeling_arrays import _SMALL_NNZ, _csc

    rng = np.random.default_rng(seed)
    for _ in range(200):
        R, N = (int(v) for v in rng.integers(1, 40, 2))
        k = int(rng.integers(0, min(400, _SMALL_NNZ)))
        rows, cols = rng.integers(0, R, k), rng.integers(0, N, k)
        vals = rng.choice([0.0, 1.0, -1.0, 2.5, 1e-3, 7.0], k)
        want, got = sp.csc_matrix((vals, (rows, cols)), shape=(R, N)), _csc(rows, cols, vals, (R, N))
        assert got.shape == want.shape and got.has_canonical_format
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert got.indptr.dtype == want.indptr.dtype and got.indices.dtype == want.indices.dtype
        assert np.allclose(got.data, want.data, rtol=1e-14, atol=1e-14)  # sums in another order
        # the matrix is taken without scipy's constructor checks: it must behave as scipy's own
        x = rng.standard_normal(N)
        assert np.allclose(got @ x, want @ x, rtol=1e-12, atol=1e-12)
        assert np.allclose(got.tocsr().toarray(), want.toarray()) and np.allclose(got.T.toarray(), want.T.toarray())
        assert np.allclose((got - want).toarray(), 0.0, atol=1e-12) and got.copy().nnz == got.nnz


@pytest.mark.parametrize("number", [2.5, 3, -1.0, 0, True])
def test_plain_number_arithmetic_equals_the_array_path(model_x, number) -> None:
    """``expr ± number`` and ``expr <= number`` take a shortcut for plain numbers: the same
    constants and bounds as with the number given as an array."""
    m, x = model_x
    e = x * 2.0 + 1.0
    arr = np.asarray(number, dtype=np.float64)
    for got, want in ((e + number, e + arr), (e - number, e - arr), (number - e, arr - e), (number + e, arr + e)):
        assert np.array_equal(np.asarray(got.const), np.asarray(want.const))
        assert np.array_equal(got.cols, want.cols) and np.array_equal(got.coefs, want.coefs)
    c1, c2 = e <= number, e <= arr
    assert np.array_equal(np.asarray(c1.expr.const), np.asarray(c2.expr.const))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf")])
def test_plain_number_that_is_not_finite_is_refused(model_x, bad) -> None:
    m, x = model_x
    e = x * 2.0
    for op in (lambda: e + bad, lambda: e - bad, lambda: e <= bad, lambda: e >= bad, lambda: bad - e):
        with pytest.raises(ModelingError, match="NaN or infinity"):
            op()


def _epigraph_by_operators(m: Model, expr: LinExpr, name: str, upper: bool) -> None:
    """The epigraph rows written with the expression operators (the reference)."""
    t = m.add_variable(name, lower=-np.inf, upper=np.inf)
    m.add_constraints(((expr - t.expr()) <= 0.0) if upper else ((expr - t.expr()) >= 0.0), f"{name}_epigraph")
    (m.minimize if upper else m.maximize)(t)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("upper", [False, True])
def test_epigraph_rows_equal_the_operator_rows(seed: int, upper: bool) -> None:
    rng = np.random.default_rng(seed)
    shape = (int(rng.integers(1, 6)), int(rng.integers(1, 4)))
    mask = rng.random(shape) < 0.8
    forms = []
    for fast in (True, False):
        m = Model()
        dims = (IndexSet("a", [f"a{i}" for i in range(shape[0])]), IndexSet("b", [f"b{i}" for i in range(shape[1])]))
        x = m.add_variables("x", dims, 0.0, 1.0, mask=mask)
        r = np.random.default_rng(seed + 10)  # the same data both times
        const = r.normal(size=shape)
        const[0, 0] = -0.0
        expr = x * r.uniform(0.5, 2.0, size=shape) + x.sum() + const
        if seed % 2:
            expr = expr.sum("b")  # one dimension
        if fast:
            (m.minimize_max if upper else m.maximize_min)(expr, "t")
        else:
            _epigraph_by_operators(m, expr, "t", upper)
        forms.append(m.compile())
    a, b = forms
    assert a.A.shape == b.A.shape
    for arr in ("data", "indices", "indptr"):
        np.testing.assert_array_equal(getattr(a.A, arr), getattr(b.A, arr))
    for field in ("c", "col_lower", "col_upper", "row_lower", "row_upper", "row_scale"):
        np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        assert np.array_equal(np.signbit(getattr(a, field)), np.signbit(getattr(b, field)))
    assert a.sense == b.sense and a.row_blocks == b.row_blocks


@pytest.mark.parametrize("seed", range(3))
def test_small_distinct_triplets_by_kernels_bit_for_bit(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Distinct triplets below ``_SMALL_NNZ`` (a small LP's) go through scipy's kernels, without its
    constructor: the same arrays bit for bit as scipy's COO conversion; with a duplicate added,
    the sort path sums it."""
    import types

    import scipy.sparse as sp

    import policyopt.modeling_arrays as ma

    rng = np.random.default_rng(seed)
    for _ in range(50):
        R, N = (int(v) for v in rng.integers(1, 60, 2))
        k = int(rng.integers(1, min(R * N, 800) + 1))
        key = rng.choice(R * N, k, replace=False)
        rows, cols = key % R, key // R
        vals = rng.choice([0.0, -0.0, 1.0, -1.0, 2.5, 1e-3], k) * rng.uniform(0.5, 2.0, k)
        want = sp.csc_matrix((vals, (rows, cols)), shape=(R, N))
        monkeypatch.setattr(ma, "sp", types.SimpleNamespace(csc_matrix=None))  # (a constructor call fails)
        got = ma._csc(rows, cols, vals, (R, N))
        monkeypatch.setattr(ma, "sp", sp)
        for a in ("indptr", "indices", "data"):
            assert getattr(got, a).dtype == getattr(want, a).dtype
            assert getattr(got, a).tobytes() == getattr(want, a).tobytes()
        d_rows, d_cols, d_vals = np.append(rows, rows[0]), np.append(cols, cols[0]), np.append(vals, 1.0)
        dup = ma._csc(d_rows, d_cols, d_vals, (R, N))
        assert dup.nnz == k and np.allclose(dup.toarray(), want.toarray() + (np.arange(R)[:, None] == rows[0])
                                            * (np.arange(N)[None, :] == cols[0]))


@pytest.mark.parametrize("seed", range(3))
def test_large_compile_matrix_is_scipys_bit_for_bit(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """Above ``_SMALL_NNZ`` triplets ``_csc`` runs scipy's counting-sort kernel itself: canonical
    triplets (distinct, any order) give scipy's COO conversion bit for bit without its constructor;
    duplicates go to the constructor; explicit zeros are kept; out-of-range indices are refused."""
    import types

    import scipy.sparse as sp

    import policyopt.modeling_arrays as ma
    from policyopt.errors import ModelingError

    rng = np.random.default_rng(seed)
    R, N = 3000, 5000
    k = ma._SMALL_NNZ + 3000
    key = rng.choice(R * N, k, replace=False)  # distinct (row, col) pairs in random order
    rows, cols = key % R, key // R
    vals = rng.standard_normal(k)
    vals[::97] = 0.0  # explicit zeros are kept
    want = sp.csc_matrix((vals, (rows, cols)), shape=(R, N))

    def refuse(*a: object, **kw: object) -> sp.csc_matrix:
        raise AssertionError("took scipy's COO constructor")

    monkeypatch.setattr(ma, "sp", types.SimpleNamespace(csc_matrix=refuse))
    got = ma._csc(rows, cols, vals, (R, N))
    monkeypatch.setattr(ma, "sp", sp)
    assert got.shape == want.shape and got.has_canonical_format and got.nnz == k
    for a in ("indptr", "indices", "data"):
        assert getattr(got, a).dtype == getattr(want, a).dtype
        assert getattr(got, a).tobytes() == getattr(want, a).tobytes()
    # duplicates: summed as scipy sums them
    d_rows, d_cols = np.concatenate([rows, rows[:50]]), np.concatenate([cols, cols[:50]])
    d_vals = np.concatenate([vals, vals[:50] * 0.5])
    dup, want_d = ma._csc(d_rows, d_cols, d_vals, (R, N)), sp.csc_matrix((d_vals, (d_rows, d_cols)), shape=(R, N))
    assert dup.nnz == k and dup.data.tobytes() == want_d.data.tobytes()
    assert dup.indices.tobytes() == want_d.indices.tobytes()
    with pytest.raises(ModelingError, match="outside the matrix shape"):
        ma._csc(np.where(np.arange(k) == 7, R, rows), cols, vals, (R, N))


def test_max_sum_compile_matrix_is_scipys_bit_for_bit(monkeypatch: pytest.MonkeyPatch) -> None:
    """The compiled matrix of a max-sum LP at 2,048 jobs (above ``_SMALL_NNZ`` triplets) is the one
    scipy's COO conversion builds from the same triplets, bit for bit."""
    import scipy.sparse as sp

    import policyopt.modeling_compile as modeling_compile
    from policyopt import Cluster, Job, Problem, get_policy

    seen: list[tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int], sp.csc_matrix]] = []
    real = modeling_compile._csc

    def spy(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> sp.csc_matrix:
        A = real(rows, cols, vals, shape)
        seen.append((rows.copy(), cols.copy(), vals.copy(), shape, A))
        return A

    monkeypatch.setattr(modeling_compile, "_csc", spy)
    rng = np.random.default_rng(5)
    n = 2048
    cluster = Cluster.from_counts({"v100": n // 4, "p100": n // 4, "k80": n // 4})
    jobs = tuple(Job(f"j{i}", {"v100": float(rng.uniform(2, 10)), "p100": float(rng.uniform(1, 6)),
                               "k80": float(rng.uniform(0.5, 3))}, scale_factor=int(rng.choice([1, 1, 2])))
                 for i in range(n))
    get_policy("max_sum_throughput").solve(Problem(cluster, jobs))
    big = [s for s in seen if s[2].size > modeling_arrays_small()]
    assert big
    for rows, cols, vals, shape, A in big:
        want = sp.csc_matrix((vals, (rows, cols)), shape=shape)
        for a in ("indptr", "indices", "data"):
            assert getattr(A, a).dtype == getattr(want, a).dtype
            assert getattr(A, a).tobytes() == getattr(want, a).tobytes()


def modeling_arrays_small() -> int:
    from policyopt.modeling_arrays import _SMALL_NNZ

    return _SMALL_NNZ


@pytest.mark.parametrize("seed", range(3))
def test_transpose_csc_is_scipys_transpose(seed: int) -> None:
    """``transpose_csc`` gives the CSR matrix scipy's ``A.T`` gives (same arrays, shape and products),
    without its constructor; matrices with spare room or other index types go to ``A.T``."""
    import scipy.sparse as sp

    from policyopt.standard_form import transpose_csc

    rng = np.random.default_rng(seed)
    A = sp.random(300, 500, density=0.02, format="csc", random_state=seed)
    A.indices, A.indptr = A.indices.astype(np.int32), A.indptr.astype(np.int32)
    got, want = transpose_csc(A), A.T
    assert type(got) is type(want) and got.format == "csr" and got.shape == want.shape == (500, 300)
    for a in ("indptr", "indices", "data"):
        assert getattr(got, a).dtype == getattr(want, a).dtype
        assert getattr(got, a).tobytes() == getattr(want, a).tobytes()
    y = rng.standard_normal(300)
    assert (got @ y).tobytes() == (want @ y).tobytes()
    assert got.has_sorted_indices == want.has_sorted_indices
    assert np.array_equal(got.toarray(), want.toarray()) and np.array_equal(got.tocsc().toarray(), want.toarray())
    assert (got.T != A).nnz == 0 and (got + want).nnz == want.nnz
    # spare room after the last entry: left to scipy (its constructor prunes it)
    B = sp.csc_matrix((np.append(A.data, 9.0), np.append(A.indices, 0).astype(np.int32), A.indptr), shape=A.shape)
    assert np.array_equal(transpose_csc(B).toarray(), A.T.toarray())
    C = sp.csc_matrix((A.data, A.indices.astype(np.int64), A.indptr.astype(np.int64)), shape=A.shape)
    assert np.array_equal(transpose_csc(C).toarray(), A.T.toarray())
