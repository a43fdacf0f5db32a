"""The one compiled form every solver backend accepts.

``sense`` ∈ {"min", "max"} of ``c·x + offset`` subject to
``row_lower ≤ A x ≤ row_upper`` and ``col_lower ≤ x ≤ col_upper``, ``x_j`` integer where
``integrality[j] = 1``. ``A`` is CSC (the layout of HiGHS's ``passModel``). Rows may have been scaled
by ``row_scale`` (a positive factor per row): the scaled row ``i`` is ``row_scale[i]·(original row
i)``; :meth:`StandardForm.unscale_duals` maps duals of the scaled rows back to the original rows.
Solvers know only this module — nothing about jobs or policies.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

import numpy as np
import scipy.sparse as sp

__all__ = ["StandardForm", "all_nonzero", "any_nonzero", "csc_of_arrays", "matvec", "rmatvec"]


@dataclass
class StandardForm:
    sense: str
    c: np.ndarray
    offset: float
    col_lower: np.ndarray
    col_upper: np.ndarray
    integrality: np.ndarray
    A: sp.csc_matrix
    row_lower: np.ndarray
    row_upper: np.ndarray
    row_scale: np.ndarray
    col_blocks: dict[str, tuple[int, int]] = field(default_factory=dict)
    row_blocks: dict[str, tuple[int, int]] = field(default_factory=dict)
    row_scale_applied: bool = False

    @property
    def num_cols(self) -> int:
        return int(self.c.size)

    @property
    def num_rows(self) -> int:
        return int(self.row_lower.size)

    @property
    def nnz(self) -> int:
        return int(self.A.nnz)

    @property
    def is_mip(self) -> bool:
        """Whether any column is integer; kept while ``integrality`` is the same read-only array (a
        compiled form's is: a solve asks ~8 times)."""
        ia = self.integrality
        hit = self.__dict__.get("_is_mip")
        if hit is not None and hit[0] is ia and not ia.flags.writeable:  # (a copy or unpickled: writable)
            return hit[1]
        mip = bool(np.count_nonzero(ia))  # (a C call: ndarray.any's wrappers cost ~10×)
        if not ia.flags.writeable:
            self.__dict__["_is_mip"] = (ia, mip)
        return mip

    def copy(self) -> "StandardForm":
        return replace(self, c=self.c.copy(), col_lower=self.col_lower.copy(), col_upper=self.col_upper.copy(),
                       integrality=self.integrality.copy(), A=self.A.copy(), row_lower=self.row_lower.copy(),
                       row_upper=self.row_upper.copy(), row_scale=self.row_scale.copy())

    def append_rows(self, A_rows: "sp.spmatrix", lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Append unscaled rows ``lower ≤ A_rows x ≤ upper`` (``row_scale`` 1); returns their indices."""
        A_rows = sp.csc_matrix(A_rows, dtype=np.float64)
        if A_rows.shape[1] != self.num_cols:
            raise ValueError(f"appended rows have {A_rows.shape[1]} columns, the form has {self.num_cols}")
        k = A_rows.shape[0]
        start = self.num_rows
        self.A = sp.vstack([self.A, A_rows], format="csc")
        lo = np.broadcast_to(np.asarray(lower, np.float64), (k,))
        hi = np.broadcast_to(np.asarray(upper, np.float64), (k,))
        self.row_lower = np.concatenate([self.row_lower, lo])
        self.row_upper = np.concatenate([self.row_upper, hi])
        self.row_scale = np.concatenate([self.row_scale, np.ones(k)])
        return np.arange(start, start + k, dtype=np.int64)

    def row_activity(self, x: np.ndarray) -> np.ndarray:
        """Activities ``A x`` of the *original* (unscaled) rows."""
        return matvec(self.A, x) / self.row_scale

    def unscale_duals(self, duals: np.ndarray) -> np.ndarray:
        """Duals of the scaled rows → duals of the original rows (``y_orig = y_scaled · s``)."""
        return duals * self.row_scale

    def original_row_bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return self.row_lower / self.row_scale, self.row_upper / self.row_scale

    def violation(self, x: np.ndarray) -> float:
        """Largest violation of any row or column bound at ``x``, rows measured in the scaled form
        (each row's largest coefficient ≈ 1, so the number is relative to the row's magnitude)."""
        act = matvec(self.A, x)
        lo, hi = self.row_lower, self.row_upper
        v = 0.0
        if act.size:  # max(0, ·) through ``initial``: one pass less per side
            v = max(v, float(np.max(lo - act, initial=0.0)), float(np.max(act - hi, initial=0.0)))
        if x.size:
            v = max(v, float(np.max(self.col_lower - x, initial=0.0)), float(np.max(x - self.col_upper, initial=0.0)))
        return v

    def objective_value(self, x: np.ndarray) -> float:
        return float(self.c @ x + self.offset)


def any_nonzero(a: np.ndarray) -> bool:
    """``bool(a.any())`` by ``np.count_nonzero`` (a C call; ``ndarray.any`` goes through numpy's
    Python-level reduction wrappers: ~10× the cost on small arrays, ~2 µs each)."""
    return bool(np.count_nonzero(a))


def all_nonzero(a: np.ndarray) -> bool:
    """``bool(a.all())`` by ``np.count_nonzero`` (see :func:`any_nonzero`)."""
    return bool(np.count_nonzero(a) == np.size(a))


def _trusted_csc(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csc_matrix:
    """scipy's CSC matrix holding these arrays as they are, without its constructor's checks."""
    A = sp.csc_matrix.__new__(sp.csc_matrix)
    _data_matrix.__init__(A, None)
    A.data, A.indices, A.indptr, A._shape = data, indices, indptr, shape
    A._has_sorted_indices = True
    A._has_canonical_format = True
    return A


def _trusted_csc_works() -> bool:
    """Whether :func:`_trusted_csc` gives what the constructor gives in this scipy (it sets scipy's
    own attributes: checked once, on a small matrix with an empty column)."""
    data, indices, indptr = np.array([1.0, 2.0, 3.0]), np.array([0, 2, 1], np.int32), np.array([0, 2, 2, 3], np.int32)
    try:
        a = sp.csc_matrix((data, indices, indptr), shape=(3, 3))
        b = _trusted_csc(data, indices, indptr, (3, 3))
        ok = (b.shape == a.shape and b.nnz == a.nnz and b.has_sorted_indices and b.has_canonical_format
              and bool((b.toarray() == a.toarray()).all()) and bool(((b @ np.ones(3)) == (a @ np.ones(3))).all())
              and bool((b.tocsr().toarray() == a.toarray()).all()) and (b + a).nnz == 3)
    except Exception:  # noqa: BLE001 - any failure of scipy's internals here means: use the constructor
        return False
    return ok


try:
    from scipy.sparse._data import _data_matrix
    _TRUSTED_CSC = _trusted_csc_works()
except ImportError:  # another scipy layout: the public constructor
    _TRUSTED_CSC = False


def transpose_csc(A: sp.csc_matrix) -> sp.csr_matrix:
    """``A.T`` of a CSC matrix: the CSR matrix (of shape ``(n, m)``) on the same three arrays. Where
    they hold exactly its entries (int32 indices and pointers, float64 data, no room after the last
    entry) scipy's constructor would take them as they are after its checks (~0.1–0.3 ms at 2,048
    jobs); here they are taken directly. Otherwise ``A.T``."""
    if not (_TRUSTED_CSC and A.indices.dtype == np.int32 and A.indptr.dtype == np.int32
            and A.data.dtype == np.float64 and A.data.size == A.indices.size == int(A.indptr[-1])):
        return A.T
    T = sp.csr_matrix.__new__(sp.csr_matrix)
    _data_matrix.__init__(T, None)
    T.data, T.indices, T.indptr, T._shape = A.data, A.indices, A.indptr, (A.shape[1], A.shape[0])
    return T


def csc_of_arrays(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csc_matrix:
    """``sp.csc_matrix((data, indices, indptr), shape=shape)`` for arrays already in canonical form
    (int32 ``indices`` sorted within each column, no duplicates, ``indptr`` of ``shape[1] + 1``
    int32 entries from 0 to ``data.size``, float64 ``data``): scipy's constructor checks them again
    (~10 µs on a 64-job LP, dtype and content scans); here they are taken as they are, where this
    scipy's attributes are known to work (checked once at import), else by the constructor."""
    if _TRUSTED_CSC:
        return _trusted_csc(data, indices, indptr, shape)
    return sp.csc_matrix((data, indices, indptr), shape=shape)


try:
    from scipy.sparse._sparsetools import csc_matvec as _csc_matvec
    from scipy.sparse._sparsetools import csr_matvec as _csr_matvec
except ImportError:  # another scipy layout: the public operator
    _csc_matvec = _csr_matvec = None


def _kernel_fits(A: sp.csc_matrix, v: np.ndarray, n: int) -> bool:
    """Whether scipy's matvec kernels take ``A`` (CSC, float64, one index type) and ``v`` (a
    contiguous float64 vector of ``n`` entries) as they are."""
    return (_csc_matvec is not None and A.format == "csc" and A.data.dtype == np.float64
            and A.indices.dtype == A.indptr.dtype and A.indptr.dtype in (np.int32, np.int64)
            and isinstance(v, np.ndarray) and v.dtype == np.float64 and v.shape == (n,) and v.flags.c_contiguous)


def matvec(A: sp.csc_matrix, x: np.ndarray) -> np.ndarray:
    """``A @ x`` of a CSC matrix and a vector: scipy's own kernel (``csc_matvec``, which ``A @ x``
    calls after its Python dispatch, ~20 µs a call) where it takes them as they are, else ``A @ x``;
    the same numbers either way."""
    if not _kernel_fits(A, x, A.shape[1]):
        return A @ x
    out = np.zeros(A.shape[0])
    _csc_matvec(A.shape[0], A.shape[1], A.indptr, A.indices, A.data, x, out)
    return out


def rmatvec(A: sp.csc_matrix, y: np.ndarray) -> np.ndarray:
    """``Aᵀ @ y`` of a CSC matrix and a vector: scipy's CSR kernel on ``A``'s own arrays (what
    ``A.T @ y`` calls after building the transposed matrix and its dispatch), else ``A.T @ y``; the
    same numbers either way."""
    if not _kernel_fits(A, y, A.shape[0]):
        return A.T @ y
    out = np.zeros(A.shape[1])
    _csr_matvec(A.shape[1], A.shape[0], A.indptr, A.indices, A.data, y, out)
    return out
