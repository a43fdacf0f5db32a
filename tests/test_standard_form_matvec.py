"""``standard_form.matvec`` / ``rmatvec``: scipy's matvec kernels called directly give the same
numbers, bit for bit, as ``A @ x`` and ``A.T @ y``; inputs the kernels do not take as they are go
through scipy's operators."""
from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from policyopt import standard_form
from policyopt.standard_form import matvec, rmatvec


def random_csc(rng: np.random.Generator, m: int, n: int, density: float) -> sp.csc_matrix:
    A = sp.random(m, n, density=density, format="csc", random_state=rng)
    A.data = rng.normal(size=A.data.size) * 10.0 ** rng.integers(-8, 8, A.data.size)
    return A


@pytest.mark.parametrize("seed", range(6))
def test_same_bits_as_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(1, 300)), int(rng.integers(1, 300))
    A = random_csc(rng, m, n, float(rng.uniform(0.0, 0.2)))
    x, y = rng.normal(size=n), rng.normal(size=m)
    assert matvec(A, x).tobytes() == (A @ x).tobytes()
    assert rmatvec(A, y).tobytes() == (A.T @ y).tobytes()


def test_the_kernels_are_called(monkeypatch: pytest.MonkeyPatch) -> None:
    """Canonical float64 CSC and a contiguous float64 vector: no scipy operator is involved."""
    if standard_form._csc_matvec is None:
        pytest.skip("scipy without its private matvec kernels here")
    rng = np.random.default_rng(7)
    A = random_csc(rng, 40, 30, 0.2)
    x, y = rng.normal(size=30), rng.normal(size=40)
    want, want_t = A @ x, A.T @ y

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("scipy's operator was used")

    monkeypatch.setattr(sp.csc_matrix, "__matmul__", refuse)
    monkeypatch.setattr(sp.csc_matrix, "transpose", refuse)
    assert matvec(A, x).tobytes() == want.tobytes()
    assert rmatvec(A, y).tobytes() == want_t.tobytes()


def test_other_inputs_go_through_scipy() -> None:
    rng = np.random.default_rng(3)
    A = random_csc(rng, 25, 20, 0.3)
    x, y = rng.normal(size=20), rng.normal(size=25)
    # a strided vector, float32 values, mixed index types, a CSR matrix, a wrong length
    assert np.array_equal(matvec(A, np.repeat(x, 2)[::2]), A @ x)
    assert np.array_equal(matvec(A, x.astype(np.float32)), A @ x.astype(np.float32))
    B = A.copy()
    B.indptr = B.indptr.astype(np.int64)
    assert np.array_equal(matvec(B, x), A @ x) and np.array_equal(rmatvec(B, y), A.T @ y)
    C = A.astype(np.float32)
    assert np.array_equal(rmatvec(C, y), C.T @ y)
    R = A.tocsr()
    assert np.array_equal(matvec(R, x), A @ x) and np.array_equal(rmatvec(R, y), A.T @ y)
    with pytest.raises(ValueError):
        matvec(A, np.ones(21))
    with pytest.raises(ValueError):
        rmatvec(A, np.ones(24))
