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

__all__ = ["IndexSet", "Triplets", "Terms", "ConstraintBlock"]


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


def any_nonzero(a: np.ndarray) -> bool:
    """``bool(a.any())`` by ``np.count_nonzero`` (a C call; ``ndarray.any`` goes through numpy's
    Python-level reduction wrappers: ~10× the cost on small arrays, ~2 µs each)."""
    return bool(np.count_nonzero(a))


def all_nonzero(a: np.ndarray) -> bool:
    """``bool(a.all())`` by ``np.count_nonzero`` (see :func:`any_nonzero`)."""
    return bool(np.count_nonzero(a) == np.size(a))


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


@dataclass
class ConstraintBlock:
    """A family of rows added by one :meth:`Model.add_constraints` call."""

    name: str
    dims: tuple[IndexSet, ...]
    start: int
    stop: int
    #: the expression's triplet blocks (:attr:`LinExpr.terms`), row indices relative to ``start``
    terms: Terms = field(repr=False)
    lower: np.ndarray = field(repr=False)
    upper: np.ndarray = field(repr=False)

    def _flat(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if len(self.terms) > 1:
            self.terms = (_concat_terms(self.terms),)
        return self.terms[0]

    @property
    def rows(self) -> np.ndarray:
        return self._flat()[0]

    @property
    def cols(self) -> np.ndarray:
        return self._flat()[1]

    @property
    def coefs(self) -> np.ndarray:
        return self._flat()[2]

    @property
    def shape(self) -> tuple[int, ...]:
        return _shape(self.dims)

    def value(self, row_values: np.ndarray) -> np.ndarray:
        return row_values[self.start:self.stop].reshape(self.shape)


#: up to this many triplets :func:`_csc` sorts them itself; above, scipy's COO conversion (a counting
#: sort) is faster
_SMALL_NNZ = 4096


def _csc(rows: np.ndarray, cols: np.ndarray, vals: np.ndarray, shape: tuple[int, int]) -> sp.csc_matrix:
    """The CSC matrix of triplets (duplicates summed, explicit zeros kept, row indices sorted): what
    ``sp.csc_matrix((vals, (rows, cols)))`` gives. Up to :data:`_SMALL_NNZ` triplets by one sort of
    the keys ``col·R + row`` (scipy's COO path spends ~50 µs in Python checks on a 64-job LP)."""
    R, N = shape
    if vals.size > _SMALL_NNZ or R == 0 or N == 0:
        return sp.csc_matrix((vals, (rows, cols)), shape=shape)
    key = cols * R + rows
    order = np.argsort(key, kind="stable")
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
    np.cumsum(np.bincount(c, minlength=N), out=ptr[1:])
    return csc_of_arrays(vals, r.astype(np.int32), ptr, shape)


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


def csc_of_arrays(data: np.ndarray, indices: np.ndarray, indptr: np.ndarray, shape: tuple[int, int]) -> sp.csc_matrix:
    """``sp.csc_matrix((data, indices, indptr), shape=shape)`` for arrays already in canonical form
    (int32 ``indices`` sorted within each column, no duplicates, ``indptr`` of ``shape[1] + 1``
    int32 entries from 0 to ``data.size``, float64 ``data``): scipy's constructor checks them again
    (~10 µs on a 64-job LP, dtype and content scans); here they are taken as they are, where this
    scipy's attributes are known to work (checked once at import), else by the constructor."""
    if _TRUSTED_CSC:
        return _trusted_csc(data, indices, indptr, shape)
    return sp.csc_matrix((data, indices, indptr), shape=shape)
