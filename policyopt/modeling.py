"""Declarative modeling layer: index sets, labelled variables, linear expressions, constraints.

Everything is stored as arrays, never as per-element Python objects:

* an :class:`IndexSet` is a named, ordered array of labels (``jobs``, ``worker_types``, ...);
* a :class:`Variable` is an array of *column ids* over a tuple of index sets (``-1`` marks a masked
  slot that does not exist in the LP), with lower/upper bound arrays;
* a :class:`LinExpr` over dims ``D`` is the triplet block ``(row, col, coef)`` plus a constant
  array of shape ``D``: entry ``r`` (flat index into ``D``) equals ``Σ coef·x[col] + const[r]``;
* a :class:`Constraint` is ``lower ≤ expr ≤ upper`` element-wise (two-sided rows).

Operations are numpy operations on those arrays. Operands that share a dimension name must carry
*identical* labels; otherwise :class:`~policyopt.errors.AlignmentError` is raised (no silent
realignment).

A :class:`Model` owns the columns and the constraint blocks and compiles them in one vectorized
pass to a :class:`~policyopt.standard_form.StandardForm`. Rewrites are explicit and invertible:
:meth:`Model.maximize_min` adds the epigraph variable ``t`` and rows ``expr_i - t ≥ 0`` and
:meth:`Model.minimize_max` the mirror image; the solution of ``t`` is the max-min value.
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass
from typing import Any, Callable, Sequence, Union

import numpy as np
import scipy.sparse as sp

from .errors import ModelingError
from .modeling_arrays import ConstraintBlock, IndexSet, TermBlocks, Terms, Triplets, _check_dims, _full, _shape
from .modeling_compile import compile_model
from .standard_form import StandardForm, all_nonzero, any_nonzero

__all__ = ["IndexSet", "Variable", "LinExpr", "Constraint", "Model", "ConstraintBlock", "Triplets"]

ArrayLike = Union[float, int, np.ndarray, Sequence[float]]


class LinExpr(TermBlocks):
    """A linear expression over dims (array of affine functions), stored as triplet blocks.

    A sum of expressions keeps its operands' blocks (``terms``) and joins them only when the
    triplets are read (``rows``/``cols``/``coefs``: element index in C order over ``dims``, model
    column, coefficient; duplicates add up) — a constraint block passes them on to
    :meth:`Model.compile`, which stacks every block in one pass, so a sum is never copied twice."""

    __slots__ = ("dims", "const")  # (and ``terms``, TermBlocks's)

    #: numpy defers to our reflected operators (``ndarray * expr`` → ``expr.__rmul__``, ``ndarray <=
    #: expr`` → ``expr.__ge__``) instead of broadcasting over the expression as an opaque object
    __array_ufunc__ = None

    def __init__(self, dims: tuple[IndexSet, ...], rows: ArrayLike, cols: ArrayLike, coefs: ArrayLike,
                 const: ArrayLike = 0.0) -> None:
        self.dims = tuple(dims)
        self.terms: Terms = ((np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64),
                               np.asarray(coefs, dtype=np.float64)),)
        c = np.asarray(const, dtype=np.float64)
        shape = _shape(self.dims)
        self.const = c if c.shape == shape else _full(c, shape)

    @classmethod
    def _of_terms(cls, dims: tuple[IndexSet, ...], terms: Terms, const: np.ndarray) -> "LinExpr":
        """An expression from triplet blocks already typed (``const`` already of the dims' shape)."""
        e = object.__new__(cls)
        e.dims, e.terms, e.const = dims, terms, const
        return e

    # ------------------------------------------------------------------ construction
    @classmethod
    def from_matrix(cls, matrix: "sp.spmatrix | np.ndarray | Triplets", var: "Variable",
                    dims: tuple[IndexSet, ...], const: np.ndarray | float = 0.0) -> "LinExpr":
        """``expr = M @ vec(var) + const``: ``M`` has one row per element of ``dims`` and one column
        per element of ``var`` (C order); a scipy/dense matrix or :class:`Triplets`. Masked variable
        slots are dropped with their coefficients."""
        return cls(dims, *_matrix_terms(matrix, var, dims), const)

    @property
    def shape(self) -> tuple[int, ...]:
        return _shape(self.dims)

    @property
    def size(self) -> int:
        return math.prod(self.shape)

    def __repr__(self) -> str:
        return f"LinExpr(dims={[d.name for d in self.dims]}, shape={self.shape}, nnz={self.coefs.size})"

    # ------------------------------------------------------------------ arithmetic
    def _factor(self, other: ArrayLike) -> np.ndarray:
        arr = np.asarray(other, dtype=np.float64)
        if not all_nonzero(np.isfinite(arr)):
            raise ModelingError("coefficient data contains NaN or infinity")
        shape = self.shape
        if arr.shape == shape:
            return arr
        try:
            return np.broadcast_to(arr, shape)
        except ValueError:
            raise ModelingError(f"data of shape {arr.shape} does not broadcast to expression shape {self.shape} "
                                f"(dims {[d.name for d in self.dims]})") from None

    def __mul__(self, other: ArrayLike) -> "LinExpr":
        if isinstance(other, (LinExpr, Variable)):
            raise ModelingError("the product of two expressions is not linear")
        f = self._factor(other)
        coefs = np.take(f.ravel(), self.rows)
        np.multiply(coefs, self.coefs, out=coefs)  # one new array per product
        return LinExpr(self.dims, self.rows, self.cols, coefs, self.const * f)

    __rmul__ = __mul__

    def __truediv__(self, other: ArrayLike) -> "LinExpr":
        arr = np.asarray(other, dtype=np.float64)
        if (arr == 0).any():
            raise ModelingError("division of an expression by zero")
        return self * (1.0 / arr)

    def __rtruediv__(self, other: Any) -> "LinExpr":
        raise ModelingError("division by an expression is not linear")

    def __neg__(self) -> "LinExpr":
        return LinExpr._of_terms(self.dims, tuple((r, c, -v) for r, c, v in self.terms), -self.const)

    def __add__(self, other: Any) -> "LinExpr":
        if isinstance(other, Variable):
            other = other.expr()
        if isinstance(other, LinExpr):
            if other.dims == () and self.dims != ():  # broadcast a scalar expression
                other = other.broadcast(self.dims)
            elif self.dims == () and other.dims != ():
                return self.broadcast(other.dims) + other
            _check_dims(self.dims, other.dims)
            return LinExpr._of_terms(self.dims, self.terms + other.terms, self.const + other.const)
        if type(other) is float or type(other) is int:  # a plain number: no array to broadcast
            return LinExpr._of_terms(self.dims, self.terms, self.const + _finite(other))
        return LinExpr._of_terms(self.dims, self.terms, self.const + self._factor(other))

    __radd__ = __add__

    def __sub__(self, other: Any) -> "LinExpr":
        if isinstance(other, (LinExpr, Variable)):
            return self + (-other)
        if type(other) is float or type(other) is int:
            return LinExpr._of_terms(self.dims, self.terms, self.const - _finite(other))
        return self + (-np.asarray(other, dtype=np.float64))

    def __rsub__(self, other: Any) -> "LinExpr":
        return (-self) + other

    def broadcast(self, dims: tuple[IndexSet, ...]) -> "LinExpr":
        """Repeat a scalar expression (dims ``()``) over ``dims``."""
        if self.dims != ():
            raise ModelingError("only a scalar expression can be broadcast")
        n = math.prod(_shape(dims))
        r, c, v = self._flat()
        if r.size == 1:  # one term (e.g. the epigraph's ``t``): no repeat and tile (numpy's Python-level helpers)
            return LinExpr(dims, np.arange(n, dtype=np.int64), np.full(n, c[0]), np.full(n, v[0]),
                           np.full(_shape(dims), float(self.const)))
        rows = np.repeat(np.arange(n, dtype=np.int64), r.size)
        return LinExpr(dims, rows, np.tile(c, n), np.tile(v, n), np.full(_shape(dims), float(self.const)))

    # ------------------------------------------------------------------ reductions / selection
    def _axis(self, dim: str) -> int:
        for i, d in enumerate(self.dims):
            if d.name == dim:
                return i
        raise ModelingError(f"expression has no dimension {dim!r} (dims {[d.name for d in self.dims]})")

    def sum(self, dim: str | None = None) -> "LinExpr":
        """Sum over one dimension (or all, giving a scalar expression)."""
        if dim is None:
            return LinExpr((), np.zeros(self.rows.size, np.int64), self.cols, self.coefs, self.const.sum())
        ax = self._axis(dim)
        idx = np.unravel_index(self.rows, self.shape)
        new_dims = self.dims[:ax] + self.dims[ax + 1:]
        new_shape = _shape(new_dims)
        rest = tuple(idx[i] for i in range(len(self.dims)) if i != ax)
        rows = np.ravel_multi_index(rest, new_shape) if new_dims else np.zeros(self.rows.size, np.int64)
        return LinExpr(new_dims, rows, self.cols, self.coefs, self.const.sum(axis=ax))

    def dot(self, data: ArrayLike, dim: str) -> "LinExpr":
        """``Σ_dim data·expr`` (e.g. ``X.dot(T, "configs")`` = effective throughput per job)."""
        return (self * data).sum(dim)

    def select(self, dim: str, positions: np.ndarray | Sequence[int]) -> "LinExpr":
        """The sub-expression at ``positions`` along ``dim`` (a new index set of those labels)."""
        ax = self._axis(dim)
        pos = np.asarray(positions, dtype=np.int64)
        old = self.dims[ax]
        new_set = IndexSet(old.name, old.labels[pos])
        remap = np.full(len(old), -1, np.int64)
        remap[pos] = np.arange(pos.size)
        idx = list(np.unravel_index(self.rows, self.shape))
        new_ax = remap[idx[ax]]
        keep = new_ax >= 0
        idx = [i[keep] for i in idx]
        idx[ax] = new_ax[keep]
        new_dims = self.dims[:ax] + (new_set,) + self.dims[ax + 1:]
        rows = np.ravel_multi_index(tuple(idx), _shape(new_dims))
        return LinExpr(new_dims, rows, self.cols[keep], self.coefs[keep], np.take(self.const, pos, axis=ax))

    # ------------------------------------------------------------------ comparisons → constraints
    def __le__(self, rhs: ArrayLike) -> "Constraint":
        return Constraint(self - rhs, upper=0.0)

    def __ge__(self, rhs: ArrayLike) -> "Constraint":
        return Constraint(self - rhs, lower=0.0)

    def __eq__(self, rhs: Any) -> "Constraint":  # type: ignore[override]
        return Constraint(self - rhs, lower=0.0, upper=0.0)

    def __ne__(self, rhs: Any) -> "Constraint":  # type: ignore[override]
        raise ModelingError("'!=' is not a linear constraint; use <=, >= or ==")

    def between(self, lower: ArrayLike, upper: ArrayLike) -> "Constraint":
        return Constraint(self, lower=lower, upper=upper)

    __hash__ = None  # type: ignore[assignment]

    # ------------------------------------------------------------------ evaluation
    def evaluate(self, x: np.ndarray) -> np.ndarray:
        """Value of every element at the column vector ``x``."""
        out = np.bincount(self.rows, weights=self.coefs * x[self.cols], minlength=self.size)
        return out.reshape(self.shape) + self.const


def _matrix_terms(matrix: "sp.spmatrix | np.ndarray | Triplets", var: "Variable", dims: tuple[IndexSet, ...]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The triplets ``(element, model column, coefficient)`` of ``M @ vec(var)`` (see
    :meth:`LinExpr.from_matrix`): masked slots and zero coefficients dropped."""
    m = matrix if isinstance(matrix, Triplets) else Triplets.from_matrix(matrix)
    n = math.prod(_shape(dims))
    if m.shape != (n, var.cols.size):
        raise ModelingError(f"matrix shape {m.shape} does not match ({n}, {var.cols.size}) for "
                            f"dims {[d.name for d in dims]} x variable {var.name!r}")
    cols, all_exist = var._columns_at(m.cols)
    if all_exist and all_nonzero(m.vals):
        return m.rows, cols, m.vals
    keep = (cols >= 0) & (m.vals != 0)
    return m.rows[keep], cols[keep], m.vals[keep]


def _read_only(a: np.ndarray) -> np.ndarray:
    a.flags.writeable = False
    return a


#: the triplets of an expression without terms (shared: empty and read-only)
_NO_TERMS: Terms = ((_read_only(np.zeros(0, np.int64)), _read_only(np.zeros(0, np.int64)), _read_only(np.zeros(0))),)


def _no_model() -> None:
    """The model of a variable whose model was gone when it was pickled or copied."""
    return None


def _finite(value: float) -> float:
    """``value`` as a float, refused (as :meth:`LinExpr._factor` refuses data) when NaN or infinite."""
    v = float(value)
    if not math.isfinite(v):
        raise ModelingError("coefficient data contains NaN or infinity")
    return v


@dataclass(eq=False)
class Constraint:
    """``lower ≤ expr ≤ upper`` element-wise (either side may be infinite).

    A constraint has no truth value: ``bool(constraint)`` raises :class:`ModelingError`. This is what
    makes a chained comparison such as ``2 <= e <= 5`` (which Python evaluates as ``(2 <= e) and
    (e <= 5)``) fail loudly instead of keeping only its last half; write ``e.between(2, 5)``.
    """

    expr: LinExpr
    lower: ArrayLike = -np.inf
    upper: ArrayLike = np.inf

    def __bool__(self) -> bool:
        raise ModelingError("a constraint has no truth value: chained comparisons such as `2 <= e <= 5` "
                            "are not supported (write e.between(2, 5) or two constraints), and a "
                            "constraint cannot be used in `if`, `and`, `or` or `in`")


class Variable:
    """A block of LP columns over index sets; ``cols[i...] = -1`` where the slot is masked.

    Arithmetic and comparisons delegate to :meth:`expr` (``x == 3`` is a constraint, as on a
    :class:`LinExpr`); variables hash by identity.
    """

    __array_ufunc__ = None  # numpy defers to the reflected operators (see LinExpr)
    #: the existing slots' columns are ``first, first + 1, …`` in C order (as
    #: :meth:`Model.add_variables` numbers them), or ``None`` (unknown: read from ``cols``; the
    #: class default, for subclasses that set their own columns)
    first: int | None = None

    def __init__(self, model: "Model", name: str, dims: tuple[IndexSet, ...], cols: np.ndarray,
                 lower: np.ndarray, upper: np.ndarray, integer: bool, first: int | None = None) -> None:
        self._model_ref: Callable[[], Model | None] = weakref.ref(model)
        self.name = name
        self.dims = dims
        self.cols = cols
        self.lower = lower
        self.upper = upper
        self.integer = integer
        self.first = first
        self._at: dict[int, tuple[np.ndarray, np.ndarray, bool]] = {}

    def _columns_at(self, positions: np.ndarray) -> tuple[np.ndarray, bool]:
        """``(cols.ravel()[positions], whether every one exists)``. Kept per read-only ``positions``
        array (an allocation space's slot indices, shared by its membership, capacity and throughput
        matrices), so a build gathers each variable's columns once."""
        hit = self._at.get(id(positions))
        if hit is not None and hit[0] is positions:
            return hit[1], hit[2]
        cols = self.cols.ravel()[positions]
        exist = all_nonzero(cols >= 0)
        if not positions.flags.writeable:
            cols.flags.writeable = False
            self._at[id(positions)] = (positions, cols, exist)
        return cols, exist

    @property
    def shape(self) -> tuple[int, ...]:
        return _shape(self.dims)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled and deep-copied with its model held strongly (a weak reference has no pickle;
        copied as is, a deep copy's variables would name the original model)."""
        state = self.__dict__.copy()
        ref = state.pop("_model_ref", None)
        if ref is not None:
            state["_model_held"] = ref()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        held = "_model_held" in state
        model = state.pop("_model_held", None)
        self.__dict__.update(state)
        if held:
            self._model_ref = _no_model if model is None else weakref.ref(model)

    @property
    def model(self) -> "Model | None":
        """The model that made this variable, while it exists. Held by a weak reference: the model
        holds its variables, so a strong one would be a reference cycle, and the model with every
        array it holds (triplets, compiled form) would wait for the cyclic garbage collector instead
        of being freed when its last user lets go."""
        return self._model_ref()

    @property
    def mask(self) -> np.ndarray:
        """True where the variable exists."""
        return self.cols >= 0

    def __repr__(self) -> str:
        return f"Variable({self.name!r}, dims={[d.name for d in self.dims]}, shape={self.shape})"

    def expr(self) -> LinExpr:
        flat = self.cols.ravel()
        rows = np.flatnonzero(flat >= 0)
        return LinExpr(self.dims, rows, flat[rows], np.ones(rows.size))

    # delegate arithmetic to the expression
    def __mul__(self, other: ArrayLike) -> LinExpr:
        return self.expr() * other

    __rmul__ = __mul__

    def __neg__(self) -> LinExpr:
        return -self.expr()

    def __add__(self, other: Any) -> LinExpr:
        return self.expr() + other

    __radd__ = __add__

    def __sub__(self, other: Any) -> LinExpr:
        return self.expr() - other

    def __rsub__(self, other: Any) -> LinExpr:
        return (-self.expr()) + other

    def __le__(self, rhs: ArrayLike) -> Constraint:
        return self.expr() <= rhs

    def __ge__(self, rhs: ArrayLike) -> Constraint:
        return self.expr() >= rhs

    def __eq__(self, rhs: Any) -> Constraint:  # type: ignore[override]
        return self.expr() == rhs

    def __ne__(self, rhs: Any) -> Constraint:  # type: ignore[override]
        return self.expr() != rhs

    def __truediv__(self, other: ArrayLike) -> LinExpr:
        return self.expr() / other

    def __rtruediv__(self, other: Any) -> LinExpr:
        return other / self.expr()

    __hash__ = object.__hash__

    def sum(self, dim: str | None = None) -> LinExpr:
        return self.expr().sum(dim)

    def dot(self, data: ArrayLike, dim: str) -> LinExpr:
        return self.expr().dot(data, dim)

    def value(self, x: np.ndarray, fill: float = 0.0) -> np.ndarray:
        """This variable's values from a solution column vector (``fill`` in masked slots)."""
        out = np.full(self.shape, fill, dtype=np.float64)
        m = self.mask
        if self.first is not None:  # consecutive columns: a slice of x, no gather of columns
            out[m] = x[self.first:self.first + int(np.count_nonzero(m))]
        else:
            out[m] = x[self.cols[m]]
        return out


class Model:
    """Variables, constraint blocks and one linear objective; compiles to a :class:`StandardForm`."""

    def __init__(self, name: str = "model") -> None:
        self.name = name
        self.variables: dict[str, Variable] = {}
        self.blocks: dict[str, ConstraintBlock] = {}
        self.num_cols = 0
        self.num_rows = 0
        self.sense = "min"
        self.objective: LinExpr = LinExpr._of_terms((), _NO_TERMS, np.zeros(()))
        self._compiled: StandardForm | None = None

    def __repr__(self) -> str:
        return f"Model({self.name!r}, cols={self.num_cols}, rows={self.num_rows})"

    # ------------------------------------------------------------------ variables
    def add_variables(self, name: str, dims: Sequence[IndexSet] = (), lower: ArrayLike = 0.0,
                      upper: ArrayLike = np.inf, integer: bool = False,
                      mask: np.ndarray | None = None) -> Variable:
        """Add a variable block; ``mask`` (bool, shape of dims) says which slots exist."""
        if name in self.variables:
            raise ModelingError(f"variable {name!r} already exists in model {self.name!r}")
        dims = tuple(dims)
        shape = _shape(dims)
        m = np.ones(shape, bool) if mask is None else np.asarray(mask, bool)
        if m.shape != shape:
            raise ModelingError(f"mask shape {m.shape} does not match variable shape {shape}")
        lo_in, hi_in = np.asarray(lower, np.float64), np.asarray(upper, np.float64)
        scalar = lo_in.ndim == hi_in.ndim == 0
        if (math.isnan(lo_in) or math.isnan(hi_in)) if scalar else (any_nonzero(np.isnan(lo_in))
                                                                     or any_nonzero(np.isnan(hi_in))):
            raise ModelingError(f"variable {name!r}: NaN bound")
        # bounds are the variable's own writable arrays (callers tighten them in place: X.upper[...] = 0.5)
        lo = _full(lo_in, shape)
        hi = _full(hi_in, shape)
        n = int(np.count_nonzero(m))
        if (bool(lo_in > hi_in) and n > 0) if scalar else any_nonzero(lo[m] > hi[m]):
            raise ModelingError(f"variable {name!r}: lower bound above upper bound")
        if n == m.size:
            cols = np.arange(self.num_cols, self.num_cols + n, dtype=np.int64).reshape(shape)
        else:
            cols = np.full(shape, -1, np.int64)
            cols[m] = np.arange(self.num_cols, self.num_cols + n)
        self.num_cols += n
        var = Variable(self, name, dims, cols, lo, hi, integer, first=self.num_cols - n)
        self.variables[name] = var
        self._compiled = None
        return var

    def add_variable(self, name: str, lower: float = -np.inf, upper: float = np.inf,
                     integer: bool = False) -> Variable:
        """A scalar variable."""
        return self.add_variables(name, (), lower, upper, integer)

    # ------------------------------------------------------------------ constraints
    def add_constraints(self, constraint: Constraint, name: str) -> ConstraintBlock:
        """Add ``lower ≤ expr ≤ upper`` (element-wise) as a block of rows named ``name``."""
        if name in self.blocks:
            raise ModelingError(f"constraint block {name!r} already exists in model {self.name!r}")
        e = constraint.expr
        shape = e.shape
        # new arrays of the expression's shape (``const`` has it): the bounds less the constant
        lo = np.subtract(np.asarray(constraint.lower, np.float64), e.const)
        hi = np.subtract(np.asarray(constraint.upper, np.float64), e.const)
        if lo.shape != shape:
            lo = _full(lo, shape)
        if hi.shape != shape:
            hi = _full(hi, shape)
        n = lo.size
        block = ConstraintBlock(name, e.dims, self.num_rows, self.num_rows + n, e.terms, lo.ravel(), hi.ravel())
        self.num_rows += n
        self.blocks[name] = block
        self._compiled = None
        return block

    def add_matrix_rows(self, matrix: "sp.spmatrix | np.ndarray | Triplets", var: Variable,
                        dims: tuple[IndexSet, ...], upper: float | np.ndarray, name: str) -> ConstraintBlock:
        """Add ``M @ vec(var) ≤ upper`` over ``dims`` as a block of rows named ``name``: what
        ``add_constraints(LinExpr.from_matrix(M, var, dims) <= upper, name)`` adds (the same
        triplets, lower bounds ``−inf``, upper bounds ``upper`` broadcast), without the expression
        and the constraint in between (a space's time and capacity rows, at every build)."""
        if name in self.blocks:
            raise ModelingError(f"constraint block {name!r} already exists in model {self.name!r}")
        rows, cols, vals = _matrix_terms(matrix, var, dims)
        shape = _shape(dims)
        hi = np.asarray(upper, np.float64)
        if not all_nonzero(np.isfinite(hi)):  # (as LinExpr._factor refuses the data of ``expr − upper``)
            raise ModelingError("coefficient data contains NaN or infinity")
        hi = _full(hi, shape)
        n = hi.size
        terms = ((np.asarray(rows, np.int64), np.asarray(cols, np.int64), np.asarray(vals, np.float64)),)
        block = ConstraintBlock(name, tuple(dims), self.num_rows, self.num_rows + n, terms,
                                np.full(n, -np.inf), hi.ravel())
        self.num_rows += n
        self.blocks[name] = block
        self._compiled = None
        return block

    # ------------------------------------------------------------------ objectives
    def maximize(self, expr: LinExpr | Variable) -> None:
        self._set_objective(expr, "max")

    def minimize(self, expr: LinExpr | Variable) -> None:
        self._set_objective(expr, "min")

    def _set_objective(self, expr: LinExpr | Variable, sense: str) -> None:
        e = expr.expr() if isinstance(expr, Variable) else expr
        if e.dims != ():
            e = e.sum()
        self.objective = e
        self.sense = sense
        self._compiled = None

    def maximize_min(self, expr: LinExpr, name: str = "t", bound: float | None = None) -> Variable:
        """Epigraph rewrite of ``max min_i expr_i``: new free ``t``, rows ``expr_i − t ≥ 0``, max ``t``.

        Inverse: the optimal ``t`` is the max-min value. ``bound`` caps ``t`` from above, which keeps
        the LP bounded when ``expr`` is empty or unbounded.
        """
        t = self.add_variable(name, lower=-np.inf, upper=np.inf if bound is None else bound)
        self._add_epigraph(expr, t, 0.0, np.inf, f"{name}_epigraph")
        self.maximize(t)
        return t

    def minimize_max(self, expr: LinExpr, name: str = "t", bound: float | None = None) -> Variable:
        """Epigraph rewrite of ``min max_i expr_i``: new ``t``, rows ``expr_i − t ≤ 0``, min ``t``."""
        t = self.add_variable(name, lower=-np.inf if bound is None else bound, upper=np.inf)
        self._add_epigraph(expr, t, -np.inf, 0.0, f"{name}_epigraph")
        self.minimize(t)
        return t

    def _add_epigraph(self, expr: LinExpr | Variable, t: Variable, lower: float, upper: float,
                      name: str) -> ConstraintBlock:
        """The rows ``lower ≤ expr_i − t ≤ upper``: what ``add_constraints((expr − t.expr()) >= 0)``
        (or ``<= 0``) adds — the same triplets in the same order, ``t``'s term (coefficient −1) on
        every element after ``expr``'s, and the same bounds less the constant — without the
        intermediate expressions."""
        if isinstance(expr, Variable):
            expr = expr.expr()
        if not isinstance(expr, LinExpr):
            return self.add_constraints(((expr - t.expr()) >= 0.0) if upper == np.inf else
                                        ((expr - t.expr()) <= 0.0), name)
        n = math.prod(expr.shape)
        col = t.cols.ravel()
        own = (np.arange(n, dtype=np.int64), np.full(n, col[0], np.int64), np.full(n, -1.0))
        const = expr.const - 0.0  # (−0.0 stays −0.0, as in ``expr − t − 0``)
        return self.add_constraints(Constraint(LinExpr._of_terms(expr.dims, expr.terms + (own,), const),
                                               lower=lower, upper=upper), name)

    # ------------------------------------------------------------------ compilation
    def compile(self, scale_rows: bool = True) -> StandardForm:
        """One vectorized pass: bounds concatenated, all triplets stacked into one CSC matrix
        (:func:`policyopt.modeling_compile.compile_model`); kept until the model changes.

        With ``scale_rows`` each row is multiplied by a power of two close to ``1/max|a_ij|`` so rows
        of very different magnitude (steps of 10^6 against fractions) reach the solver balanced;
        the factors are kept so row activities and duals are mapped back exactly.
        """
        if self._compiled is not None and self._compiled.row_scale_applied == scale_rows:
            return self._compiled
        self._compiled = compile_model(self, scale_rows)
        return self._compiled

    @property
    def is_mip(self) -> bool:
        return any(v.integer for v in self.variables.values())
