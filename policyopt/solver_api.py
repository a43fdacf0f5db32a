"""Solver protocol, capability flags, options and the ordered solver registry.

A backend (in ``policyopt.solvers``) knows only :class:`~policyopt.standard_form.StandardForm`.
It declares what it can do as :class:`Feature` flags and registers itself with
:func:`register_solver`; the registry's insertion order is the preference order, so
:func:`default_solver` is the first available backend that has every required feature.

A backend's :meth:`Solver.load` returns a :class:`LoadedModel`: the model held by the backend, which
can be re-solved after in-place updates of costs and bounds (``set_costs``, ``set_col_bounds``,
``set_row_bounds``). HiGHS applies those in place and warm-starts; backends without
``Feature.WARM_START`` rebuild from the updated standard form on the next :meth:`LoadedModel.solve`.
"""
from __future__ import annotations

import enum
import importlib
import importlib.util
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field, replace
from typing import Any, Callable, ClassVar

import numpy as np
import scipy.sparse as sp

from .errors import InputError, SolverNotAvailableError, UnknownNameError
from .standard_form import all_nonzero, any_nonzero
from .result import SolveResult, Status
from .standard_form import StandardForm

__all__ = ["Feature", "SolverOptions", "Solver", "LoadedModel", "register_solver", "get_solver",
           "available_solvers", "registered_solvers", "default_solver", "RebuildingModel", "auto_algorithm",
           "IPM_MIN_COLS", "IPM_MIN_COLS_DEGENERATE", "STRUCTURED_MIN_COLS", "STRUCTURED_MIN_COLS_DEGENERATE",
           "STRUCTURED_MIN_COLS_WARM_DEGENERATE",
           "PRIMAL_MAX_COLS", "zero_feasible"]


class Feature(enum.Flag):
    """What a backend can do."""

    LP = enum.auto()
    MILP = enum.auto()
    DUALS = enum.auto()
    WARM_START = enum.auto()  # in-place updates and warm re-solves
    TIME_LIMIT = enum.auto()


@dataclass(frozen=True)
class SolverOptions:
    """Backend-independent options.

    ``algorithm``: ``"auto"`` (backend default), ``"simplex"``, ``"ipm"`` (interior point) or
    ``"pdlp"`` (HiGHS only). ``time_limit`` in seconds. ``extra`` is passed to the backend verbatim
    (HiGHS option names, cvxpy solve keywords, PuLP solver keywords). ``degenerate``: a hint for
    ``auto`` (the policy knows its LP is a max-min epigraph: max-min fairness, finish-time fairness).
    """

    algorithm: str = "auto"
    time_limit: float | None = None
    mip_rel_gap: float = 1e-9
    verbose: bool = False
    threads: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)
    #: a hint for ``algorithm="auto"``: the LP is a max-min epigraph whose optimum ties many rows
    #: (simplex stalls on it): interior point from fewer columns (see :func:`auto_algorithm`)
    degenerate: bool = False

    def __post_init__(self) -> None:
        if self.algorithm not in ("auto", "simplex", "ipm", "pdlp"):
            raise InputError("options.algorithm", self.algorithm, "must be one of auto, simplex, ipm, pdlp")
        if self.time_limit is not None and not (self.time_limit > 0):
            raise InputError("options.time_limit", self.time_limit, "must be a positive number of seconds")
        if self.threads is not None and (isinstance(self.threads, bool) or not isinstance(self.threads, int)
                                         or self.threads < 1):
            raise InputError("options.threads", self.threads, "must be a positive integer")

    def with_(self, **kw: Any) -> "SolverOptions":
        return replace(self, **kw)


#: ``algorithm="auto"``, the one rule (:func:`auto_algorithm`), with thresholds measured by
#: benchmarks/solve_vs_gavel.py, benchmarks/policies_bench.py and benchmarks/water_filling_bench.py
#: on Gavel-generated problems:
#: LPs with at least STRUCTURED_MIN_COLS columns try the structured fast path first (identical
#: per-job blocks aggregated; below ~500 columns — about 128 jobs — HiGHS's simplex on the whole LP
#: is as fast as the detection); a cold max-min epigraph LP (``degenerate``) with at least
#: IPM_MIN_COLS_DEGENERATE columns is solved by interior point + crossover (finish-time fairness at
#: 4,096 jobs: 1.4 s against 5.7 s for dual simplex; max-min fairness with distinct jobs at 2,048:
#: 0.16 s against 0.7 s), any other cold LP from IPM_MIN_COLS (makespan, FIFO and makespan under a
#: budget at 2,048–4,096 jobs are faster by simplex; hierarchical all-FIFO at 2,048 jobs took 49.6 s
#: with an interior-point start against 37.8 s with simplex); below IPM_MIN_COLS_DEGENERATE a cold
#: degenerate LP by primal simplex without presolve (finish-time fairness at 1,024 jobs: 44 ms
#: against 157 ms for dual simplex with presolve; max-min fairness at 64 jobs: 1.1 ms against
#: 2.0–2.7 ms), other cold LPs by dual simplex (makespan at 1,024 jobs: 19 ms against 35 ms for
#: primal); warm re-solves by dual simplex, except a degenerate one whose last solution the updates
#: kept feasible (primal simplex; see :func:`auto_algorithm`).
STRUCTURED_MIN_COLS = 500
#: a max-min epigraph LP (``degenerate``) tries the fast path from fewer columns: its whole LP is
#: the slow one (primal simplex through a degenerate optimum); max-min fairness at 128 jobs (493
#: columns), whole ``policy.solve`` in CPU: 3.2 ms by the fast path against 4.0 ms without, while at
#: 96 jobs (361 columns; the aggregation declines, too few blocks repeat) 3.6 against 3.0 ms
STRUCTURED_MIN_COLS_DEGENERATE = 400
#: a *warm* degenerate LP (the backend holds a basis of it: a kept model updated in place for the
#: next job set, or a basis set before the solve) tries the fast path only from this many columns:
#: below, HiGHS's warm run from that basis costs less than aggregating (max-min fairness, Gavel's
#: workload, a kept model re-solved after one arrival / one completion, CPU ms: 128 jobs 2.4 / 1.3
#: warm against 4.3 / 3.3 by the fast path, 512 jobs 3.8 / 3.0 against 6.1 / 5.0, 1,024 jobs
#: 6.8 / 6.0 against 7.3 / 6.3, while at 2,048 jobs 13.5 / 13.0 against 9.4 / 8.7)
STRUCTURED_MIN_COLS_WARM_DEGENERATE = 4000
IPM_MIN_COLS_DEGENERATE = 4000
IPM_MIN_COLS = 20000
#: a cold LP below this many columns whose zero point (clipped to the bounds) is feasible goes by
#: primal simplex without presolve: it starts feasible, and on Gavel-generated LPs of 16–128 jobs
#: HiGHS alone takes 0.4–0.7× the time of dual simplex with presolve (max-sum throughput at 64 jobs:
#: 0.23 against 0.46 ms; makespan 0.42 against 0.67; FIFO 0.25 against 0.58; min-cost 0.28 against
#: 0.60); an LP infeasible at zero (min-cost with SLO rows) keeps dual simplex with presolve, which
#: finds its infeasibility 2–4× faster
PRIMAL_MAX_COLS = 500
#: max-sum throughput and heterogeneity-aware max-min fairness (the policies' own classes,
#: ``algorithm="auto"``, HiGHS, no ``threads``, ``time_limit`` or ``verbose``, the plain allocation
#: space without pair rows) with at most this many jobs and no kept model are solved from the
#: space's arrays (max-sum as its transportation LP, max-min as its epigraph LP and ``fill`` stage on
#: per-type columns), handed to HiGHS directly, without the modeling layer, compile, the backend's
#: load and the kept model for re-solves (:mod:`policyopt.transport_route`); larger ones go the
#: usual way (max-sum's first problem of repeated jobs: :mod:`policyopt.class_transport`; the class
#: space, the structured fast path, re-solves on the kept model); the first problems of max-sum
#: throughput and max-min fairness have their own limits (``transport_route.MAX_SUM_MAX_JOBS``,
#: ``transport_route.MAX_MIN_MAX_JOBS``)
TRANSPORT_MAX_JOBS = 128
#: a policy object that solved before (re-solving after arrivals and completions) takes the arrays
#: route only up to this many jobs: above, its kept model re-solves faster (max-min fairness at
#: ~120 jobs, median CPU per re-solve: 0.59 ms on the kept model against 1.59 ms by the arrays;
#: at 64 jobs 2.47 against 1.41; max-sum throughput 0.94 against 0.84 at ~120 jobs and 0.87 against
#: 0.63 at 64: one threshold for both; docs/solvers.md, `algorithm="auto"`: one rule)
TRANSPORT_RESOLVE_MAX_JOBS = 64


def zero_feasible(sf: StandardForm, tol: float = 1e-9) -> bool:
    """Whether ``x₀ = clip(0, col_lower, col_upper)`` meets every row of ``sf`` (to ``tol``,
    relative above 1): a primal simplex from the slack basis then needs no phase 1."""
    x0 = np.minimum(np.maximum(sf.col_lower, 0.0), sf.col_upper)  # clip(0, lower, upper)
    if not any_nonzero(x0):  # x₀ = 0: every row's activity is 0
        return all_nonzero(sf.row_lower <= tol) and all_nonzero(sf.row_upper >= -tol)
    act = sf.A @ x0
    slack = tol * np.maximum(1.0, np.abs(act))
    return all_nonzero(act >= sf.row_lower - slack) and all_nonzero(act <= sf.row_upper + slack)


def auto_algorithm(sf: StandardForm, warm: bool = False, structured: bool = True, degenerate: bool = False,
                   feasible: bool = False, small_primal: bool = False) -> str:
    """The one rule behind ``algorithm="auto"`` for backends that offer several LP algorithms:
    ``"structured"`` (the block-aggregation fast path, ``policyopt.solvers.blocks``; only when
    ``structured`` — a backend asks again with ``structured=False`` when the fast path does not
    apply) for LPs of at least :data:`STRUCTURED_MIN_COLS` columns (:data:`STRUCTURED_MIN_COLS_DEGENERATE`
    for a ``degenerate`` max-min epigraph LP, :data:`STRUCTURED_MIN_COLS_WARM_DEGENERATE` for one
    re-solved ``warm``); else ``"ipm"`` for a cold LP of
    at least :data:`IPM_MIN_COLS` columns (:data:`IPM_MIN_COLS_DEGENERATE` for a ``degenerate``
    max-min epigraph LP); below that ``"primal"`` (primal simplex, no presolve) for a cold
    ``degenerate`` LP and — when the caller can run it without presolve and check its point
    (``small_primal``: the HiGHS backend) — for a cold LP of fewer than :data:`PRIMAL_MAX_COLS`
    columns that is feasible at zero (:func:`zero_feasible`), ``"simplex"`` (dual simplex) otherwise; a warm
    re-solve of a ``degenerate`` LP by ``"primal"`` when the last solution is still ``feasible``
    after the updates (costs changed, bounds it meets: max-min fairness's second stage), every other
    warm re-solve by
    ``"simplex"``; ``"auto"`` (the backend's own choice) for MILPs. Backends without the primal/dual
    choice read ``"primal"`` as ``"simplex"``."""
    if sf.is_mip:
        return "auto"
    if structured and sf.num_cols >= (STRUCTURED_MIN_COLS_WARM_DEGENERATE if degenerate and warm else
                                      min(STRUCTURED_MIN_COLS, STRUCTURED_MIN_COLS_DEGENERATE) if degenerate
                                      else STRUCTURED_MIN_COLS):
        return "structured"
    ipm_from = IPM_MIN_COLS_DEGENERATE if degenerate else IPM_MIN_COLS
    if not warm and sf.num_cols >= ipm_from:
        return "ipm"
    if small_primal and not warm and not degenerate and sf.num_cols < PRIMAL_MAX_COLS and zero_feasible(sf):
        return "primal"
    return "primal" if degenerate and (not warm or feasible) else "simplex"


class LoadedModel(ABC):
    """A standard form loaded into a backend; can be updated in place and re-solved."""

    #: whether results carry row and column duals; a caller that reads only the point may turn it
    #: off (a backend that reads its duals separately then skips them; others may still set them)
    return_duals: bool = True
    #: runs without the backend's perturbation, under an iteration cap, that stopped without an
    #: answer (a stall on a degenerate vertex at the cap) and were repeated with the perturbation
    #: (see :meth:`use_warm_primal`; backends without such runs: always 0)
    stall_retries: int = 0

    def __init__(self, sf: StandardForm, options: SolverOptions) -> None:
        self.sf = sf
        self.options = options
        self.cold_retries = 0  # re-solves checked by a cold solve (see resolve)

    @abstractmethod
    def solve(self) -> SolveResult:
        """Solve (or re-solve after updates) and return the result in the original row scale."""

    def set_costs(self, cols: np.ndarray, costs: np.ndarray) -> None:
        self.sf.c[cols] = costs

    def set_col_bounds(self, cols: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        self.sf.col_lower[cols] = lower
        self.sf.col_upper[cols] = upper

    def set_row_bounds(self, rows: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> None:
        """Bounds of original (unscaled) rows ``rows``."""
        s = self.sf.row_scale[rows]
        self.sf.row_lower[rows] = np.asarray(lower, float) * s
        self.sf.row_upper[rows] = np.asarray(upper, float) * s

    def set_sense(self, sense: str) -> None:
        self.sf.sense = sense

    def add_rows(self, A_rows: "sp.spmatrix", lower: np.ndarray, upper: np.ndarray) -> np.ndarray:
        """Append rows ``lower ≤ A_rows x ≤ upper`` (original scale, ``A_rows`` of shape
        ``k × num_cols``) for the next solves (e.g. cutting planes); the basis is kept where the
        backend has one. Returns the new rows' indices."""
        return self.sf.append_rows(A_rows, lower, upper)

    def set_algorithm(self, algorithm: str) -> None:
        """Switch the LP algorithm for the next solve (e.g. interior point cold, simplex warm)."""
        self.options = self.options.with_(algorithm=algorithm)

    def use_warm_primal(self) -> bool:
        """From the next solve on, re-solve by simplex for a sequence whose every update keeps the last
        solution feasible (costs changed, bounds relaxed or set at what it delivers). A backend with
        the mode (HiGHS) runs *primal* simplex from the warm basis without its bound perturbation,
        under an iteration cap of ``1000 + 10 (rows + columns)`` sized at each run; a run that stops
        at the cap is repeated with the perturbation (counted in :attr:`stall_retries`). Returns
        whether the backend has the mode; otherwise this is ``set_algorithm("simplex")``. A later
        :meth:`set_algorithm` ends it."""
        self.set_algorithm("simplex")
        return False

    def clear_warm_start(self) -> None:
        """Forget the basis / solution kept from the last solve, so the next solve starts cold
        (backends that always solve from scratch: nothing to do)."""

    def set_presolve(self, enabled: bool) -> None:
        """Turn the backend's presolve on or off for the next solves (backends without one: nothing
        to do)."""

    def get_basis(self) -> tuple[np.ndarray, np.ndarray] | None:
        """``(col_status, row_status)`` of the last solve's optimal basis (HiGHS codes: 0 lower,
        1 basic, 2 upper, 3 zero), or ``None`` (no basis: backends without one, or a solve that did
        not produce one)."""
        return None

    def basis_reader(self) -> Callable[[], tuple[np.ndarray, np.ndarray] | None]:
        """The current basis, to be read later: a callable that returns what :meth:`get_basis`
        returns now, even after the model is updated and re-solved (here: read at once; HiGHS keeps a
        copy of its basis and converts it only when called)."""
        basis = self.get_basis()
        return lambda: basis

    def has_basis(self) -> bool:
        """Whether :meth:`get_basis` may return a basis (cheap; ``False`` only when it surely does not)."""
        return True

    def set_basis(self, col_status: np.ndarray, row_status: np.ndarray) -> None:
        """Start the next solve from this basis (possibly *alien*: the wrong number of basic
        variables, completed by the backend). Backends without warm starts: nothing to do."""

    def answer_duals(self) -> np.ndarray | None:
        """The row multipliers (original row scale) of the last optimal answer, or ``None`` (not
        kept: backends without them)."""
        return None

    def set_dual_start(self, row_duals: np.ndarray) -> bool:
        """Row multipliers (original row scale, one per row; 0 where unknown) to start the next
        solve from — a guess only. Whether the backend uses them (here: ignored)."""
        return False

    def prefers_rebuild(self) -> bool:
        """Whether a fresh build of the next problem, started from :meth:`answer_duals`
        (:meth:`set_dual_start`), is expected to answer faster than updating this model in place."""
        return False

    def resolve(self) -> SolveResult:
        """Re-solve after in-place updates. An ``INFEASIBLE`` or ``ERROR`` answer is checked by one
        cold solve without presolve: a warm basis can stall the simplex (HiGHS: model status
        'Unknown'), and presolve's tolerances can reject bounds set at what the previous solution
        delivered. A truly infeasible LP stays infeasible. ``cold_retries`` counts the checks."""
        res = self.solve()
        if res.status in (Status.INFEASIBLE, Status.ERROR):
            self.clear_warm_start()
            self.set_presolve(False)
            res = self.solve()
            self.set_presolve(True)
            self.cold_retries += 1
        return res


class RebuildingModel(LoadedModel):
    """For backends without in-place updates: keep a private copy of the standard form, apply
    updates to it, and hand the whole form to ``solve_fn`` on each solve."""

    def __init__(self, sf: StandardForm, options: SolverOptions,
                 solve_fn: Callable[[StandardForm, SolverOptions], SolveResult]) -> None:
        super().__init__(sf.copy(), options)
        self._solve_fn = solve_fn

    def solve(self) -> SolveResult:
        return self._solve_fn(self.sf, self.options)


_AVAILABLE: dict[type, bool] = {}


class Solver(ABC):
    """A backend. Subclasses set ``name``, ``features``, ``required_modules`` and implement ``load``."""

    name: ClassVar[str]
    features: ClassVar[Feature]
    required_modules: ClassVar[tuple[str, ...]] = ()
    doc: ClassVar[str] = ""

    @classmethod
    def is_available(cls) -> bool:
        """Probe with ``importlib.util.find_spec`` (the backend is not imported); the answer is kept
        per class (a policy looks its backend up at every solve)."""
        found = _AVAILABLE.get(cls)
        if found is None:
            found = _AVAILABLE[cls] = all(importlib.util.find_spec(m) is not None for m in cls.required_modules)
        return found

    @abstractmethod
    def load(self, sf: StandardForm, options: SolverOptions) -> LoadedModel:
        """Hand the standard form to the backend (the ``solve`` phase's build step)."""

    def solve(self, sf: StandardForm, options: SolverOptions | None = None) -> SolveResult:
        """Load and solve once."""
        opts = options or SolverOptions()
        t0 = time.perf_counter()
        loaded = self.load(sf, opts)
        res = loaded.solve()
        res.timings.solve = time.perf_counter() - t0
        return res

    def supports(self, feature: Feature) -> bool:
        return (self.features & feature) == feature


_REGISTRY: dict[str, type[Solver]] = {}
#: the preferred available backend class per required features: ``get_solver(None, ...)`` runs at
#: every solve, and Flag arithmetic over the registry costs ~10 µs (a registration clears it;
#: availability is kept per class anyway, :meth:`Solver.is_available`)
_PREFERRED: dict[Feature | None, type[Solver]] = {}


def register_solver(cls: type[Solver]) -> type[Solver]:
    """Class decorator: add a backend to the ordered registry (first registered = preferred)."""
    _REGISTRY[cls.name] = cls
    _PREFERRED.clear()
    return cls


_LOADED = False


def _ensure_loaded() -> None:
    global _LOADED
    if not _LOADED:  # (import_module's own lookup costs ~2 µs: a policy looks its backend up per solve)
        importlib.import_module("policyopt.solvers")
        _LOADED = True


def registered_solvers() -> list[str]:
    _ensure_loaded()
    return list(_REGISTRY)


def available_solvers(feature: Feature | None = None) -> list[str]:
    """Installed backends in preference order, optionally only those with ``feature``."""
    _ensure_loaded()
    return [n for n, c in _REGISTRY.items()
            if c.is_available() and (feature is None or (c.features & feature) == feature)]


def get_solver(name: str | Solver | None = None, require: Feature | None = None) -> Solver:
    """A backend instance by name (``highs``, ``cvxpy``, ``cvxpy:CLARABEL``, ``pulp``, ``pulp:HiGHS``);
    ``None`` gives the preferred available backend with ``require``; an instance is passed through."""
    if isinstance(name, Solver):
        return name
    _ensure_loaded()
    if name is None:  # the first available backend in preference order (later ones are not probed)
        pick = _PREFERRED.get(require)
        if pick is None:
            for cls in _REGISTRY.values():
                if (require is None or (cls.features & require) == require) and cls.is_available():
                    pick = _PREFERRED[require] = cls
                    break
            else:
                raise SolverNotAvailableError(f"no installed solver backend supports {require}")
        return pick()
    base, _, sub = str(name).partition(":")
    if base not in _REGISTRY:
        raise UnknownNameError("solver", name, _REGISTRY)
    cls = _REGISTRY[base]
    if not cls.is_available():
        why = getattr(cls, "unavailable_reason", None)  # a backend may say more than "not installed"
        if callable(why) and why():
            raise SolverNotAvailableError(f"solver {base!r} is not available here: {why()}")
        raise SolverNotAvailableError(
            f"solver {base!r} is not installed (modules {', '.join(cls.required_modules)}); "
            f"install it with: pip install 'policyopt[{base}]'; installed: {', '.join(available_solvers()) or 'none'}")
    inst = cls(sub) if sub else cls()  # type: ignore[call-arg]
    if require is not None and not inst.supports(require):
        raise SolverNotAvailableError(f"solver {name!r} does not support {require}")
    return inst


def default_solver(require: Feature | None = None) -> Solver:
    return get_solver(None, require)
