"""Result types shared by every backend and every policy.

:class:`Status` is the documented outcome enum; :class:`SolveResult` is what a backend returns for
one :class:`~policyopt.standard_form.StandardForm`; :class:`PolicyResult` is what a policy returns
(the result JSON of the CLI and the HTTP service).
"""
from __future__ import annotations

import enum
import json
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import numpy as np

from .extensions import result_sections

if TYPE_CHECKING:
    import pandas as pd

__all__ = ["Status", "Timings", "SolveResult", "PolicyResult", "json_default"]


class Status(str, enum.Enum):
    """Outcome of a solve.

    * ``optimal`` — a proven optimum (within the solver's tolerances) was found.
    * ``optimal_inaccurate`` — the backend stopped at a point it calls optimal only within relaxed
      tolerances (cvxpy's ``optimal_inaccurate``); optimality is not proven, so ``ok`` is false and
      policies treat it like ``time_limit``: they return the point if it satisfies every allocation
      constraint, else their documented fallback, with this status and a ``message``.
    * ``infeasible`` — no point satisfies the constraints (also used for "infeasible or
      unbounded" when a backend cannot tell them apart on a problem whose variables are bounded).
    * ``unbounded`` — the objective can be improved without limit.
    * ``time_limit`` — the time limit was hit; ``x`` holds the best feasible point if the backend
      reported one, else ``None``. Policies then return their documented safe fallback.
    * ``error`` — the backend failed; ``message`` says why.
    * ``stopped`` — the method's own stopping rule or work budget (e.g. a MILP node limit) ended it
      without a certificate of optimality; the allocation is feasible and ``message`` says why.
    """

    OPTIMAL = "optimal"
    OPTIMAL_INACCURATE = "optimal_inaccurate"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    TIME_LIMIT = "time_limit"
    ERROR = "error"
    STOPPED = "stopped"

    def __str__(self) -> str:
        return self.value


@dataclass
class Timings:
    """Seconds per phase: ``build`` (user model), ``compile`` (standard form), ``solve`` (backend
    load + run), ``extract`` (mapping the solution back). Iterative policies add up their phases."""

    build: float = 0.0
    compile: float = 0.0
    solve: float = 0.0
    extract: float = 0.0

    @property
    def total(self) -> float:
        return self.build + self.compile + self.solve + self.extract

    def add(self, other: "Timings") -> None:
        self.build += other.build
        self.compile += other.compile
        self.solve += other.solve
        self.extract += other.extract

    def to_dict(self) -> dict[str, float]:
        return {"build": self.build, "compile": self.compile, "solve": self.solve, "extract": self.extract,
                "total": self.total}


@dataclass
class SolveResult:
    """A backend's answer for one standard form (original row scale; duals where available)."""

    status: Status
    objective: float | None
    x: np.ndarray | None
    row_duals: np.ndarray | None = None
    col_duals: np.ndarray | None = None
    solver: str = ""
    options: dict[str, Any] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    message: str = ""
    iterations: int | None = None

    @property
    def ok(self) -> bool:
        return self.status is Status.OPTIMAL


@dataclass
class PolicyResult:
    """The result of a policy: the CLI's / service's result JSON (see ``docs/schema.md``).

    ``allocation[job][config]`` = fraction of time job ``job`` spends alone on configuration
    ``config``; ``colocated_allocation`` lists pairs sharing workers; ``effective_throughputs[job]``
    = ``thr(m)`` in steps/s under this allocation.
    """

    policy: str
    solver: str
    status: Status
    objective: float | None
    allocation: dict[str, dict[str, float]]
    colocated_allocation: list[dict[str, Any]] = field(default_factory=list)
    effective_throughputs: dict[str, float] = field(default_factory=dict)
    timings: Timings = field(default_factory=Timings)
    message: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    #: the allocation as an array (rows × configs) and the AllocationSpace it indexes (not serialized)
    X: Any = field(default=None, repr=False, compare=False)
    space: Any = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return self.status is Status.OPTIMAL

    def defer(self, **builders: Callable[[], Any]) -> "PolicyResult":
        """Build the named fields (``allocation``, ``colocated_allocation``,
        ``effective_throughputs``) on first access instead of now: ``builders[name]()`` gives the
        value. Callers that read only ``X`` (the simulator, the mechanism) never pay for the
        dictionaries; equality, ``repr``, ``to_dict``, copying and pickling build them. Returns self."""
        unknown = set(builders) - set(_LAZY_FIELDS)
        if unknown:
            raise ValueError(f"cannot defer {sorted(unknown)}: only {', '.join(_LAZY_FIELDS)}")
        pending = self.__dict__.setdefault("_pending", {})
        for name, build in builders.items():
            self.__dict__.pop(f"_{name}", None)
            pending[name] = build
        return self

    @classmethod
    def deferred(cls, policy: str, solver: str, status: Status, objective: float | None, timings: Timings,
                 message: str, extra: dict[str, Any], builders: dict[str, Callable[[], Any]],
                 X: Any = None, space: Any = None) -> "PolicyResult":
        """``PolicyResult(...)`` whose three lazy fields (``allocation``, ``colocated_allocation``,
        ``effective_throughputs``) are all built by ``builders`` on first access: the result of the
        constructor followed by :meth:`defer`, with the fields set at once (a policy's every solve
        ends here). ``extra`` is taken as given (not copied)."""
        if set(builders) != set(_LAZY_FIELDS):
            raise ValueError(f"deferred needs a builder for each of {', '.join(_LAZY_FIELDS)}")
        res = object.__new__(cls)
        res.__dict__.update(policy=policy, solver=solver, status=status, objective=objective, timings=timings,
                            message=message, extra=extra, X=X, space=space, _pending=builders)
        return res

    def is_built(self, name: str) -> bool:
        """Whether field ``name`` holds its value (not a deferred builder, :meth:`defer`)."""
        return name not in self.__dict__.get("_pending", {})

    def __getstate__(self) -> dict[str, Any]:
        for name in list(self.__dict__.get("_pending", {})):  # builders are closures: build first
            getattr(self, name)
        return {k: v for k, v in self.__dict__.items() if k != "_pending"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "policy": self.policy,
            "solver": self.solver,
            "status": self.status.value,
            "objective": _finite_or_none(self.objective),
            "allocation": self.allocation,
            "colocated_allocation": self.colocated_allocation,
            "effective_throughputs": self.effective_throughputs,
            "timings": self.timings.to_dict(),
        }
        if self.message:
            out["message"] = self.message
        out.update(self.extra)
        for name, section in result_sections().items():  # sections registered by extensions
            if name not in out:
                value = section(self)
                if value is not None:
                    out[name] = value
        return out

    def to_frame(self) -> "pd.DataFrame":
        """The allocation as a pandas DataFrame: one row per job (index ``job``, in result order), one
        column per configuration (the space's column order when known), each entry the fraction of
        time the job spends alone there (0 where it has none). Colocated pairs are in
        ``colocated_allocation``. pandas is imported on the first call."""
        import pandas as pd

        columns: list[str] = []
        configs = getattr(getattr(self.space, "configs", None), "labels", None)
        if configs is not None:
            columns = [str(c) for c in configs.tolist()]
        seen = set(columns)
        for row in self.allocation.values():
            for c in row:
                if c not in seen:
                    seen.add(c)
                    columns.append(c)
        frame = pd.DataFrame.from_dict(self.allocation, orient="index", columns=columns, dtype=float)
        frame = frame.reindex(index=list(self.allocation), columns=columns).fillna(0.0)
        frame.index.name = "job"
        frame.columns.name = "configuration"
        return frame

    def to_json(self, indent: int | None = 2) -> str:
        return json.dumps(self.to_dict(), indent=indent, default=json_default)


_LAZY_FIELDS = ("allocation", "colocated_allocation", "effective_throughputs")


def _lazy_field(name: str) -> property:
    """A dataclass field stored as ``_name`` whose value may be a deferred builder (:meth:`PolicyResult.defer`)."""
    slot = f"_{name}"

    def get(self: PolicyResult) -> Any:
        d = self.__dict__
        if slot not in d:
            d[slot] = d["_pending"].pop(name)()
        return d[slot]

    def put(self: PolicyResult, value: Any) -> None:
        self.__dict__[slot] = value
        self.__dict__.get("_pending", {}).pop(name, None)

    return property(get, put, doc=f"``{name}`` (built on first access when deferred)")


for _name in _LAZY_FIELDS:  # after @dataclass: its __init__ assigns through the properties
    setattr(PolicyResult, _name, _lazy_field(_name))


def _finite_or_none(v: float | None) -> float | None:
    if v is None:
        return None
    v = float(v)
    return v if np.isfinite(v) else None


def json_default(o: Any) -> Any:
    """The ``default=`` of ``json.dumps`` for the project's results: numpy scalars and arrays as
    Python numbers and lists, enums (e.g. :class:`Status`) as their values."""
    if isinstance(o, np.generic):
        return o.item()
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, enum.Enum):
        return o.value
    raise TypeError(f"not JSON serializable: {type(o).__name__}")
