"""Warm starts across problems: the previous optimal basis carried to the next model by labels.

A scheduler re-solves after every arrival and completion: the new LP has the same variables and
constraint blocks over slightly different index sets (a job more, a job less). :func:`carry_basis`
maps the previous model's basis onto the new one by *labels* — a column of variable ``v`` at
labels ``(job, config)`` takes the status its namesake had; a row of block ``b`` at labels
``(job,)`` likewise. Columns without a namesake start nonbasic at their lower bound (at zero when
free), rows without one start basic (their slack in the basis). The result may have too many or
too few basic variables (a job left with basic columns): backends treat it as an *alien* basis and
complete it (HiGHS). Statuses use HiGHS's codes: 0 lower, 1 basic, 2 upper, 3 zero (free).
Only the public modeling API is used.
"""
from __future__ import annotations

import weakref
from typing import Any, Callable

import numpy as np

from .modeling import IndexSet, Model

__all__ = ["BASIC", "LOWER", "UPPER", "ZERO", "BasisSnapshot", "carry_basis", "recall", "remember"]

LOWER, BASIC, UPPER, ZERO = 0, 1, 2, 3


class BasisSnapshot:
    """A solved model's optimal basis, kept with the model (its variables' and blocks' labels).

    Either the statuses themselves, or ``source``: a callable that returns them (or ``None``), e.g.
    :meth:`~policyopt.solver_api.LoadedModel.basis_reader`, called at the first use
    (:meth:`statuses`) — most snapshots are never used (a policy object solved once), and turning a
    backend's basis into arrays costs about as much as a small LP's extraction."""

    def __init__(self, model: Model, col_status: np.ndarray | None = None, row_status: np.ndarray | None = None,
                 source: Callable[[], tuple[np.ndarray, np.ndarray] | None] | None = None) -> None:
        self.model = model
        self._col, self._row = col_status, row_status
        self._source = source  # dropped once read

    def statuses(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(col_status, row_status)``, or ``None`` when the source had no basis."""
        if self._source is not None:
            basis = self._source()
            self._source = None
            if basis is not None:
                self._col, self._row = basis
        return None if self._col is None or self._row is None else (self._col, self._row)

    @property
    def col_status(self) -> np.ndarray:
        """The columns' basis statuses (:data:`LOWER`, :data:`BASIC`, ...); ``ValueError`` without a basis."""
        s = self.statuses()
        if s is None:
            raise ValueError("the snapshot holds no basis")
        return s[0]

    @property
    def row_status(self) -> np.ndarray:
        """The rows' basis statuses; ``ValueError`` without a basis."""
        s = self.statuses()
        if s is None:
            raise ValueError("the snapshot holds no basis")
        return s[1]


#: the last basis of each owner (a policy object), kept beside it rather than in it: a policy stays
#: picklable (POP's worker processes) and copies do not share it
_LAST: "weakref.WeakKeyDictionary[Any, BasisSnapshot]" = weakref.WeakKeyDictionary()


def remember(owner: Any, snapshot: BasisSnapshot | None) -> None:
    """Keep ``snapshot`` as ``owner``'s last basis (``None`` forgets it)."""
    if snapshot is None:
        _LAST.pop(owner, None)
    else:
        _LAST[owner] = snapshot


def recall(owner: Any) -> BasisSnapshot | None:
    """``owner``'s last basis, if any."""
    return _LAST.get(owner)


def _positions(old: IndexSet, new: IndexSet) -> np.ndarray:
    """For each label of ``new``: its position in ``old`` (``-1`` where absent)."""
    if old.labels.shape == new.labels.shape and np.array_equal(old.labels, new.labels):
        return np.arange(len(new))
    pos = {lab: i for i, lab in enumerate(old.labels.tolist())}
    return np.fromiter((pos.get(lab, -1) for lab in new.labels.tolist()), np.int64, len(new))


def _old_index(old_dims: tuple[IndexSet, ...], new_dims: tuple[IndexSet, ...]) -> np.ndarray | None:
    """Per cell of ``new_dims`` (C order, that shape): the flat index of the cell with the same
    labels in ``old_dims``, ``-1`` where any label is absent; ``None`` when the dims differ."""
    if len(old_dims) != len(new_dims) or any(o.name != n.name for o, n in zip(old_dims, new_dims)):
        return None
    if not new_dims:
        return np.zeros((), np.int64)
    flat = np.zeros([1] * len(new_dims), np.int64)
    ok = np.ones([1] * len(new_dims), bool)
    stride = 1
    for axis in range(len(new_dims) - 1, -1, -1):
        p = _positions(old_dims[axis], new_dims[axis])
        shape = [1] * len(new_dims)
        shape[axis] = p.size
        p = p.reshape(shape)
        flat = flat + np.maximum(p, 0) * stride
        ok = ok & (p >= 0)
        stride *= len(old_dims[axis])
    return np.where(ok, flat, -1)


def carry_basis(prev: BasisSnapshot, model: Model) -> tuple[np.ndarray, np.ndarray]:
    """``(col_status, row_status)`` for ``model`` (compiled) from ``prev`` (see the module docstring).
    ``prev.model`` needs ``variables`` and ``blocks`` by name (a block with ``dims`` and ``start``, or
    ``row_ids``: e.g. :meth:`policyopt.incremental.JobSetModel.snapshot`)."""
    sf = model.compile()
    col = np.where(np.isfinite(sf.col_lower), LOWER, np.where(np.isfinite(sf.col_upper), UPPER, ZERO))
    row = np.full(sf.num_rows, BASIC)
    for name, v in model.variables.items():
        ov = prev.model.variables.get(name)
        idx = None if ov is None else _old_index(ov.dims, v.dims)
        if idx is None or ov is None:
            continue
        new_cols = np.broadcast_to(v.cols, idx.shape).ravel()
        old_cols = np.where(idx.ravel() >= 0, ov.cols.ravel()[np.maximum(idx.ravel(), 0)], -1)
        take = (new_cols >= 0) & (old_cols >= 0)
        col[new_cols[take]] = prev.col_status[old_cols[take]]
    for name, b in model.blocks.items():
        ob = prev.model.blocks.get(name)
        idx = None if ob is None else _old_index(ob.dims, b.dims)
        if idx is None or ob is None:
            continue
        flat = idx.ravel()
        take = flat >= 0
        # a block's rows: ``start`` onwards, or ``row_ids`` (one row per cell) where not contiguous
        old_rows = getattr(ob, "row_ids", None)
        old_rows = ob.start + flat[take] if old_rows is None else old_rows[flat[take]]
        row[b.start + np.flatnonzero(take)] = prev.row_status[old_rows]
    return col, row
