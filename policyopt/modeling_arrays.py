"""Array building blocks of the modeling layer (:mod:`policyopt.modeling`): named index sets,
triplet blocks and their compilation to CSC, and the record of one block of constraint rows.

None of them knows a variable or an expression; :mod:`policyopt.modeling` builds on them.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable

import numpy as np
import scipy.sparse as sp

from .errors import AlignmentError, ModelingError, UnknownNameError
from .standard_form import all_nonzero, csc_of_arrays

__all__ = ["IndexSet", "Triplets", "Terms", "TermBlocks", "ConstraintBlock"]


class IndexSet:
    """A named, ordered set of labels, e.g. ``IndexSet("jobs", ["0", "1", "2"])``."""

    __slots__ = ("name", "labels", "_pos")

    def __init__(self, name: str, labels: Iterable[Any]) -> None:
        self.name = name
        self.labels = np.asarray(list(labels) if not isinstance(labels, np.ndarray) else labels)
        self._pos: dict[Any, int] | None = None

    def __len__(self) -> int:
        return len(self.labels)

    def __repr__(self) -> str:
        return f"IndexSet({self.name!r}, n={len(self)})"

    def same_as(self, other: "IndexSet") -> bool:
        return self is other or (
            self.name == other.name and len(self) == len(other) and bool(np.array_equal(self.labels, other.labels))
        )

    def position(self, label: Any) -> int:
        if self._pos is None:
            self._pos = {lab: i for i, lab in enumerate(self.labels.tolist())}
        try:
            return self._pos[label]
        except KeyError:
            raise UnknownNameError(self.name, label, [str(x) for x in self.labels.tolist()]) from None

    def positions(self, labels: Iterable[Any]) -> np.ndarray:
        return np.fromiter((self.position(lab) for lab in labels), dtype=np.int64)


def _check_dims(a: tuple[IndexSet, ...], b: tuple[IndexSet, ...]) -> None:
    if len(a) != len(b):
        raise ModelingError(f"dimension mismatch: {[d.name for d in a]} vs {[d.name for d in b]}")
    for x, y in zip(a, b):
        if x.name != y.name:
            raise ModelingError(f"dimension mismatch: {[d.name for d in a]} vs {[d.name for d in b]}")
        if not x.same_as(y):
            raise AlignmentError(x.name, x.labels.tolist(), y.labels.tolist())


def _shape(dims: tuple[IndexSet, ...]) -> tuple[int, ...]:
    return tuple([len(d.labels) for d in dims])


def _full(value: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """A new array of ``shape`` holding ``value`` broadcast (``np.full`` for a scalar: ~4× cheaper
    than ``broadcast_to(...).copy()`` on small arrays)."""
    if value.ndim == 0:
        return np.full(shape, value, np.float64)
    return np.broadcast_to(value, shape).copy()


@dataclass(frozen=True)
class Triplets:
    """A sparse matrix as ``(rows, cols, vals)`` arrays plus its shape (duplicates are summed)."""

    rows: np.ndarray
    cols: np.ndarray
    vals: np.ndarray
    shape: tuple[int, int]

    @classmethod
    def from_matrix(cls, matrix: "sp.spmatrix | np.ndarray") -> "Triplets":
        m = sp.coo_matrix(matrix)
        return cls(m.row.astype(np.int64), m.col.astype(np.int64), m.data.astype(np.float64), m.shape)

    def tocsr(self) -> sp.csr_matrix:
        return sp.csr_matrix((self.vals, (self.rows, self.cols)), shape=self.shape)

    def __matmul__(self, x: np.ndarray) -> np.ndarray:
        return np.bincount(self.rows, weights=self.vals * x[self.cols], minlength=self.shape[0])


Terms = tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...]


def _concat_terms(terms: Terms) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One ``(rows, cols, coefs)`` triplet block from several (in order)."""
    if len(terms) == 1:
        return terms[0]
    return (np.concatenate([t[0] for t in terms]), np.concatenate([t[1] for t in terms]),
            np.concatenate([t[2] for t in terms]))


class TermBlocks:
    """Triplet blocks ``terms`` (``(rows, cols, coefs)`` each) read as one block: joined at the
    first read of ``rows``/``cols``/``coefs`` and kept joined. The base of an expression
    (:class:`policyopt.modeling.LinExpr`) and of a block of constraint rows, which hold their
    operands' blocks until then."""

    __slots__ = ("terms",)
    terms: Terms

    def _flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if len(self.terms) > 1:
            self.terms = (_concat_terms(self.terms),)
        return self.terms[0]

    @property
    def rows(self) -> np.ndarray:
        """Element (row) index of each triplet."""
        return self._flat()[0]

    @property
    def cols(self) -> np.ndarray:
        """Model column of each triplet."""
        return self._flat()[1]

    @property
    def coefs(self) -> np.ndarray:
        """Coefficient of each triplet (duplicates add up)."""
        return self._flat()[2]


@dataclass
class ConstraintBlock(TermBlocks):
    """A family of rows added by one :meth:`Model.add_constraints` call."""

    name: str
    dims: tuple[IndexSet, ...]
    start: int
    stop: int
    #: the expression's triplet blocks (:attr:`LinExpr.terms`), row indices relative to ``start``
    terms: Terms = field(repr=False)
    lower: np.ndarray = field(repr=False)
    upper: np.ndarray = field(repr=False)

    @property
    def shape(self) -> tuple[int, ...]:
        return _shape(self.dims)

    def value(self, row_values: np.ndarray) -> np.ndarray:
        return row_values[self.start:self.stop].reshape(self.shape)


#: with duplicate triplets, up to this many :func:`_csc` sorts and sums them itself; above, scipy's
#: COO conversion (a counting sort) is faster
_SMALL_NNZ = 4096

try:  # scipy's own kernels, the ones its COO → CSC conversion calls
    from scipy.sparse._sparsetools import coo_tocsr as _coo_tocsr
    from scipy.sparse._sparsetools import csr_has_canonical_format as _has_canonical
    from scipy.sparse._sparsetools import csr_has_sorted_indices as _has_sorted
    from scipy.sparse._sparsetools import csr_sort_indices as _sort_indices
except ImportError:  # another scipy layout: its public constructor
    _coo_tocsr = _has_canonical = _has_sorted = _sort_indices = None

_I32 = np.iinfo(np.int32).max


def _csc_kernels(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]
                 ) -> sp.csc_matrix | None:
    """The CSC matrix of distinct triplets by scipy's own kernels called directly, in the order its
    constructor calls them: the counting sort by column (``coo_tocsr`` on the transposed triplets),
    then, if the row indices are not sorted in each column, ``csr_sort_indices``. Where the result
    has no duplicates (row indices strictly increasing in each column) it is exactly what
    ``sp.csc_matrix((vals, (rows, cols)))`` builds, since that constructor then finds nothing to
    sum or prune; its Python-level COO checks and wrappers (~0.3–0.5 ms at 2,048 jobs, ~50 µs at
    64) are replaced by four bound reductions. ``None`` where the kernels do not apply (other
    dtypes, 64-bit sizes, no triplets) or the triplets hold duplicates."""
    R, N = shape
    nnz = vals.size
    if (_coo_tocsr is None or nnz == 0 or vals.dtype != np.float64 or rows.dtype.kind not in "iu"
            or cols.dtype.kind not in "iu" or max(R, N, nnz) >= _I32 or rows.size != nnz or cols.size != nnz):
        return None
    if int(rows.min()) < 0 or int(cols.min()) < 0 or int(rows.max()) >= R or int(cols.max()) >= N:
        raise ModelingError(f"compile: a triplet index lies outside the matrix shape {shape}")
    indptr = np.empty(N + 1, np.int32)
    indices = np.empty(nnz, np.int32)
    data = np.empty(nnz, np.float64)
    _coo_tocsr(N, R, nnz, cols.astype(np.int32), rows.astype(np.int32), vals, indptr, indices, data)
    if not _has_sorted(N, indptr, indices):
        _sort_indices(N, indptr, indices, data)
    if not _has_canonical(N, indptr, indices):
        return None
    return csc_of_arrays(data, indices, indptr, shape)


def _csc(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> sp.csc_matrix:
    """The CSC matrix of triplets (duplicates summed, explicit zeros kept, row indices sorted): what
    ``sp.csc_matrix((vals, (rows, cols)))`` gives. Distinct triplets by scipy's kernels called
    directly (:func:`_csc_kernels`); with duplicates, up to :data:`_SMALL_NNZ` triplets by one sort
    of the keys ``col·R + row`` and sums of equal keys (scipy's COO path spends ~50 µs in Python
    checks on a 64-job LP), above by scipy's constructor."""
    R, N = shape
    if R == 0 or N == 0:
        return sp.csc_matrix((vals, (rows, cols)), shape=shape)
    A = _csc_kernels(rows, cols, vals, shape)
    if A is not None:
        return A
    if vals.size > _SMALL_NNZ:
        return sp.csc_matrix((vals, (rows, cols)), shape=shape)
    key = cols * R + rows
    order = key.argsort(kind="stable")  # (the method: no Python-level wrapper)
    key, vals = key[order], vals[order]
    if key.size > 1:
        first = np.empty(key.size, bool)
        first[0] = True
        np.not_equal(key[1:], key[:-1], out=first[1:])
        if not all_nonzero(first):
            starts = np.flatnonzero(first)
            vals, key = np.add.reduceat(vals, starts), key[starts]
    c, r = np.divmod(key, R)
    ptr = np.zeros(N + 1, np.int32)
    np.bincount(c, minlength=N).cumsum(out=ptr[1:])
    return csc_of_arrays(vals, r.astype(np.int32), ptr, shape)
