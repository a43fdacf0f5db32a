"""Parts of :mod:`policyopt.aggregate_resolve`: matching jobs by id, the certificate of a reduced
LP's answer, the per-class index lists, and the per-job variables read per class."""
from __future__ import annotations

from typing import Any

import numpy as np

from .modeling import Model, Variable
from .standard_form import StandardForm, matvec, rmatvec

__all__ = ["ClassVariable", "Declined", "certify", "class_values", "common_ends", "match_slots"]

#: reduced costs and multipliers below this on an infinite side count as zero (as in ``blocks``)
_ZERO_TOL = 1e-12


class Declined(RuntimeError):
    """The aggregated re-solve gave no certified answer: the caller builds the whole LP cold."""


def _first_diff(a: np.ndarray, b: np.ndarray, last: bool = False) -> int:
    """The number of leading (``last``: trailing) positions where ``a`` and ``b`` (of equal length)
    are equal. Fixed-width strings of one dtype are compared as their 8- or 4-byte words (equal
    strings of one dtype have equal bytes; the words' comparison is ~4× the strings')."""
    n = len(a)
    if n == 0:
        return 0
    it = a.dtype.itemsize
    w = 8 if it % 8 == 0 else 4 if it % 4 == 0 else 0
    if (w and a.dtype == b.dtype and a.dtype.kind in "SU" and a.flags.c_contiguous and b.flags.c_contiguous):
        word = np.uint64 if w == 8 else np.uint32
        d = a.view(word) != b.view(word)
        if last:
            d = d[::-1]
        k = int(d.argmax())
        return k // (it // w) if d[k] else n
    d = a != b
    if last:
        d = d[::-1]
    k = int(d.argmax())
    return k if d[k] else n


def common_ends(old: np.ndarray, ids: np.ndarray) -> tuple[int, int]:
    """The lengths ``p`` and ``q`` of the longest common prefix of ``old`` and ``ids`` and of the
    longest common suffix of what follows it (``p + q ≤ min(len(old), len(ids))``)."""
    n, S = len(ids), len(old)
    m = min(n, S)
    p = _first_diff(ids[:m], old[:m])
    q_max = m - p
    return p, (_first_diff(ids[n - q_max:], old[S - q_max:], last=True) if q_max else 0)


def match_slots(old: np.ndarray, ids: np.ndarray, slot_of: dict[Any, int] | None
                ) -> tuple[np.ndarray, int, int, dict[Any, int] | None]:
    """Each job's position in ``old`` (``-1``: new), the lengths ``p`` and ``q`` of the common prefix
    and suffix (``slot[:p]`` is ``0 … p−1``, the last ``q`` are ``old``'s last ``q``), and the id →
    position table if it was built.
    The common prefix and suffix are matched by one vectorized comparison each (an arrival at the
    end, a completion); only a middle part where both sides have jobs is looked up by id."""
    n, S = len(ids), len(old)
    p, q = common_ends(old, ids)
    slot = np.full(n, -1, np.int64)
    slot[:p] = np.arange(p)
    slot[n - q:] = np.arange(S - q, S)
    if n - q > p and S - q > p:
        if slot_of is None:
            slot_of = {j: i for i, j in enumerate(old.tolist())}
        get = slot_of.get
        mid = ids[p:n - q].tolist()
        slot[p:n - q] = np.fromiter((get(j, -1) for j in mid), np.int64, len(mid))
    return slot, p, q, slot_of


def certify(sf: StandardForm, x: np.ndarray, y: np.ndarray, tol: float = 1e-9, c: np.ndarray | None = None,
            col_lower: np.ndarray | None = None) -> tuple[bool, float, float, float]:
    """``(ok, primal objective, dual bound, violation)`` of ``(x, y)`` on ``sf`` (``y``: the scaled
    rows' multipliers; ``c`` and ``col_lower`` instead of ``sf``'s where given): ``x`` within every
    row and bound to ``tol`` and the Lagrangian bound
    ``Σ_i pick(y_i l_i, y_i u_i) + Σ_j pick(d_j lo_j, d_j hi_j)``, ``d = c − Aᵀy`` (``pick`` = max
    for a maximization), valid for any ``y``, equal to ``c·x`` to ``tol`` relative — the
    certificate of :func:`policyopt.solvers.blocks.certify`, by the matrix-vector kernels."""
    c = sf.c if c is None else c
    lo_c = sf.col_lower if col_lower is None else col_lower
    primal = float(np.dot(c, x)) + float(sf.offset)
    d = c - rmatvec(sf.A, y)
    pick = np.maximum if sf.sense == "max" else np.minimum
    bound = float(sf.offset)
    with np.errstate(invalid="ignore"):
        for mult, lo, hi in ((y, sf.row_lower, sf.row_upper), (d, lo_c, sf.col_upper)):
            v = pick(mult * lo, mult * hi)
            bad = ~np.isfinite(v)
            if np.count_nonzero(bad):  # 0·∞ and round-off on a free side count as zero
                v = np.where(bad & (np.abs(mult) <= _ZERO_TOL), 0.0, v)
            bound += float(np.add.reduce(v))
    # the largest violation of a row or a column bound (as StandardForm.violation, with col_lower)
    act = matvec(sf.A, x)
    top = np.maximum.reduce
    viol = max(float(top(sf.row_lower - act, initial=0.0)), float(top(act - sf.row_upper, initial=0.0)),
               float(top(lo_c - x, initial=0.0)), float(top(x - sf.col_upper, initial=0.0)))
    ok = bool(np.isfinite(bound) and viol <= tol and abs(bound - primal) <= tol * max(1.0, abs(primal)))
    return ok, primal, bound, viol


def _uniform(cols: np.ndarray, vals: np.ndarray, n: int, what: str) -> np.ndarray:
    """Each of the ``n`` columns' value in ``vals`` (0 where not given); :exc:`Declined` unless
    every column in ``cols`` is given one value."""
    first = np.zeros(n)
    first[cols] = vals  # (one of each column's values: the rest must equal it)
    if np.count_nonzero(first[cols] != vals):
        raise Declined(f"{what} differ between jobs of one class column")
    return first


class _PerClass:
    """For each class ``g`` of ``0 … G−1``, the positions ``i`` with ``owner[i] == g`` (``[g]``;
    found at the first use of each class and kept: an update touches the few classes whose count
    changed)."""

    def __init__(self, owner: np.ndarray, G: int) -> None:
        self.owner, self.G = owner, G
        self._of: dict[int, np.ndarray] = {}

    def __getitem__(self, g: int) -> np.ndarray:
        got = self._of.get(g)
        if got is None:
            got = self._of[g] = (self.owner == g).nonzero()[0]
        return got


class ClassVariable(Variable):
    """A per-job variable whose job ``j`` has the columns (and bounds) of its class ``group[j]``:
    ``cols``, ``lower`` and ``upper`` are gathered from the class arrays when first read, and
    :meth:`value` reads the answer per class, then gathers (the same numbers as
    :meth:`Variable.value`)."""

    def __init__(self, name: str, dims: tuple[Any, ...], cls_cols: np.ndarray, cls_lower: np.ndarray,
                 cls_upper: np.ndarray, group: np.ndarray) -> None:
        self.name = name
        self.dims = dims
        self.integer = False
        self._at = {}
        self._cls = (cls_cols, cls_lower, cls_upper)
        self._group = group
        self._full: list[np.ndarray | None] = [None, None, None]
        self._cols_given = False  # (cols set from outside: value() reads them)
        self._model: Model | None = None

    def _gather(self, k: int) -> np.ndarray:
        a = self._full[k]
        if a is None:
            a = self._full[k] = self._cls[k].take(self._group, axis=0).reshape(self.shape)
        return a

    @property
    def cols(self) -> np.ndarray:
        return self._gather(0)

    @cols.setter
    def cols(self, value: np.ndarray) -> None:
        self._full[0] = value
        self._cols_given = True

    @property
    def lower(self) -> np.ndarray:
        return self._gather(1)

    @lower.setter
    def lower(self, value: np.ndarray) -> None:
        self._full[1] = value

    @property
    def upper(self) -> np.ndarray:
        return self._gather(2)

    @upper.setter
    def upper(self, value: np.ndarray) -> None:
        self._full[2] = value

    @property
    def model(self) -> Model:
        if self._model is None:
            self._model = Model(self.name)
        return self._model

    @model.setter
    def model(self, value: Model) -> None:
        self._model = value

    def value(self, x: np.ndarray, fill: float = 0.0) -> np.ndarray:
        if self._cols_given:
            return super().value(x, fill)
        return self.class_value(x, fill).take(self._group, axis=0).reshape(self.shape)

    @property
    def class_cols(self) -> np.ndarray:
        """Each class's columns (classes × the variable's other dimensions; ``-1``: no column)."""
        return self._cls[0]

    def class_value(self, x: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """The answer per class (classes × the variable's other dimensions): :meth:`value` is its
        row ``group[j]`` for job ``j`` (unless columns were set from outside since)."""
        cc = self._cls[0]
        return np.where(cc >= 0, x.take(cc), fill)  # (column -1 reads x's last entry, replaced)


def class_values(var: Variable, space: Any, x: np.ndarray) -> np.ndarray | None:
    """``var``'s answer per class when it is a :class:`ClassVariable` over the classes declared on
    ``space`` (:meth:`~policyopt.allocation.AllocationSpace.declared_classes`, the same ``group``)
    and its columns were not set from outside; else ``None`` (read it per job, :meth:`Variable.value`)."""
    if not isinstance(var, ClassVariable) or var._cols_given:
        return None
    cls = space.declared_classes()
    if cls is None or cls[0] is not var._group:
        return None
    return var.class_value(x)
