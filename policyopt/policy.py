"""Policies as objects, a by-name registry, and the standard LP pipeline.

A policy is a class with a ``name``, documented options, and ``solve(problem) -> PolicyResult``.
Most policies are :class:`LPPolicy` subclasses that only implement :meth:`LPPolicy.build` (add an
objective and extra rows to a model that already holds ``X`` with its time and capacity rows);
the pipeline (space → model → compile → solve → extract → fallback) is shared, with per-phase
timings. Register a policy with the :func:`register_policy` decorator; the runtime (CLI, mechanism,
simulator, executor, service) looks policies up by name with :func:`get_policy`. Policies of
extensions (e.g. ``rubick_greedy`` of ``policyopt.reconfig``) are found by discovery
(:mod:`policyopt.extensions`) the first time a name is not registered yet.

Safe fallback: when the backend does not return an optimum (time limit, numerical error), the
result keeps that status and carries, in this order of preference, the backend's best point if it
satisfies every allocation constraint and is not dominated by the isolated allocation ``X_iso``
(no job faster under the point, some job slower: an interrupted solver's early iterate, such as
all zeros, wastes capacity), else ``X_iso`` (always feasible); ``message`` says which was used.
"""
from __future__ import annotations

import importlib
import threading
import time
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, TypeVar

import numpy as np

from .allocation import AllocationSpace, PairPruning
from .errors import InputError, UnknownNameError
from .extensions import discover
from .modeling import Model, Variable
from .problem import Problem
from .result import PolicyResult, SolveResult, Status, Timings
from .solver_api import Feature, Solver, SolverOptions, get_solver
from . import incremental
from ._aggregate_parts import class_values
from .aggregate_resolve import Declined
from .warm_start import BasisSnapshot, carry_basis, recall, remember

__all__ = ["Option", "Policy", "LPPolicy", "register_policy", "get_policy", "list_policies",
           "policy_class", "COMMON_OPTIONS", "register_space", "load_plugins"]


@dataclass(frozen=True)
class Option:
    """A documented policy option (listed by ``GET /v1/policies`` and ``policyopt policies``)."""

    name: str
    type: type
    default: Any
    doc: str
    choices: tuple[Any, ...] | None = None

    def coerce(self, value: Any, field_: str) -> Any:
        if value is None:
            return None
        try:
            if self.type is bool and isinstance(value, str):
                if value.lower() not in ("true", "false", "1", "0", "yes", "no"):
                    raise ValueError
                v: Any = value.lower() in ("true", "1", "yes")
            elif self.type is bool and not isinstance(value, bool):
                raise ValueError
            elif self.type in (int, float) and isinstance(value, bool):
                raise ValueError
            else:
                v = self.type(value)
        except (TypeError, ValueError, OverflowError):
            raise InputError(field_, value, f"must be of type {self.type.__name__} (and finite)") from None
        if isinstance(v, float) and not np.isfinite(v):
            raise InputError(field_, value, "must be finite")
        if self.choices is not None and v not in self.choices:
            raise InputError(field_, value, f"must be one of {', '.join(map(str, self.choices))}")
        return v


COMMON_OPTIONS: tuple[Option, ...] = (
    Option("space_sharing", bool, False, "add rows for pairs of jobs sharing workers (needs `colocated`)"),
    Option("pair_threshold", float, 1.0,
           "keep a pair slot only if its normalized combined throughput exceeds this (1.0 is exact)"),
    Option("pair_top_k", int, None, "keep at most k best pairs per job (lossy pruning)"),
    Option("solver", str, None, "backend: highs (default), cvxpy[:SOLVER], pulp[:CBC|HiGHS]"),
    Option("algorithm", str, "auto", "LP algorithm (HiGHS): auto, simplex, ipm, pdlp",
           ("auto", "simplex", "ipm", "pdlp")),
    Option("time_limit", float, None, "seconds per solver call; on expiry the documented fallback is returned"),
    Option("verbose", bool, False, "the backend's own log output (e.g. HiGHS's iteration log)"),
    Option("threads", int, None, "threads the backend may use (backend default when unset)"),
)


#: per thread, the policies inside a ``solve`` call (so nested parent calls skip ``after_solve``)
_SOLVING = threading.local()


def _empty_problem_guard(solve: Callable[[Any, Problem], PolicyResult]) -> Callable[[Any, Problem], PolicyResult]:
    """``solve`` that answers a problem with zero jobs by :meth:`Policy.empty_result`, and hands
    a result over an allocation space to the space's :meth:`~AllocationSpace.after_solve` stage
    (once: a subclass's ``solve`` calling its parent's runs it at the outermost call only)."""
    import functools

    @functools.wraps(solve)
    def guarded(self: Any, problem: Problem) -> PolicyResult:
        if isinstance(problem, Problem) and not problem.jobs:
            return self.empty_result(problem)
        active = _SOLVING.__dict__.setdefault("ids", set())
        outer = id(self) not in active
        active.add(id(self))
        try:
            res = solve(self, problem)
        finally:
            if outer:
                active.discard(id(self))
        space = getattr(res, "space", None)
        if outer and isinstance(space, AllocationSpace):
            res = space.after_solve(self, res)
        return res

    return guarded


class Policy(ABC):
    """Base class of all policies. Subclasses set ``name``, ``doc`` and extra ``options``."""

    name: ClassVar[str] = ""
    doc: ClassVar[str] = ""
    options: ClassVar[tuple[Option, ...]] = ()
    objective_sense: ClassVar[str] = "max"  # how to compare objectives (for tests/benchmarks)
    pop_combine: ClassVar[str | None] = None  # how POP recombines sub-objectives: sum|min|max|None
    #: the policy's LPs are max-min epigraphs whose optimum ties many rows (a hint for algorithm=auto)
    degenerate_lp: ClassVar[bool] = False
    #: the policy's LP is job-separable: each job's columns, rows, bounds and costs depend only on that
    #: job's data (throughputs, scale factor, weight) and the cluster, never on the other jobs — so a
    #: policy object updates its loaded model in place when only the job set changes
    #: (:mod:`policyopt.incremental`); a policy that normalizes over the job set must leave it False.
    #: Read from the class's own body only: a subclass (which may build differently) declares it again
    incremental_lp: ClassVar[bool] = False
    #: the policy's objective and rows stay met when a job runs faster on capacity the allocation left
    #: idle (a space's work-conserving stage may apply); False for cost objectives and budgets
    idle_capacity_helps: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "solve" in cls.__dict__:  # every policy answers a problem without jobs the same way
            cls.solve = _empty_problem_guard(cls.__dict__["solve"])  # type: ignore[method-assign, assignment]

    def empty_result(self, problem: Problem) -> PolicyResult:
        """The answer to a problem without jobs: the empty allocation, status optimal (nothing to
        allocate; every constraint holds), objective null (the policy's objective has no jobs to
        measure). No model is built or solved."""
        return PolicyResult(policy=self.name, solver=str(self.config.get("solver") or "none"),
                            status=Status.OPTIMAL, objective=None, allocation={},
                            message="the problem has no jobs: the empty allocation")

    def __init__(self, **options: Any) -> None:
        specs = {o.name: o for o in self.all_options()}
        unknown = sorted(set(options) - set(specs))
        if unknown:
            raise UnknownNameError(f"options.{unknown[0]}", unknown[0], specs)
        self.config: dict[str, Any] = {n: o.default for n, o in specs.items()}
        for k, v in options.items():
            self.config[k] = specs[k].coerce(v, f"options.{k}")

    @classmethod
    def all_options(cls) -> tuple[Option, ...]:
        seen: dict[str, Option] = {o.name: o for o in COMMON_OPTIONS}
        for o in cls.options:
            seen[o.name] = o
        return tuple(seen.values())

    def __getattr__(self, item: str) -> Any:
        cfg = self.__dict__.get("config")
        if cfg is not None and item in cfg:
            return cfg[item]
        raise AttributeError(item)

    def __repr__(self) -> str:
        non_default = {k: v for k, v in self.config.items()
                       if v != {o.name: o.default for o in self.all_options()}.get(k)}
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in non_default.items())})"

    # ------------------------------------------------------------------ helpers for subclasses
    def solver_options(self, sf: Any | None = None) -> SolverOptions:
        """Options for the backend. ``algorithm="auto"`` is passed on: the backend decides per solve
        (one rule, :func:`policyopt.solver_api.auto_algorithm`, after the structured fast path)."""
        return SolverOptions(algorithm=self.config["algorithm"], time_limit=self.config["time_limit"],
                             verbose=bool(self.config["verbose"]), threads=self.config["threads"],
                             degenerate=self.degenerate_lp)

    def get_solver(self, require: Feature | None = Feature.LP) -> Solver:
        return get_solver(self.config["solver"], require)

    def make_space(self, problem: Problem) -> AllocationSpace:
        """The allocation space for ``problem``: the first registered space factory whose predicate
        accepts the problem (e.g. execution-plan configurations), else :class:`AllocationSpace`."""
        cfg = self.config
        pruning = self.__dict__.get("_pruning")
        if pruning is None or pruning.threshold != cfg["pair_threshold"] or pruning.top_k != cfg["pair_top_k"]:
            pruning = self.__dict__["_pruning"] = PairPruning(cfg["pair_threshold"], cfg["pair_top_k"])
        kwargs: dict[str, Any] = dict(space_sharing=bool(cfg["space_sharing"]), pruning=pruning)
        for accepts, factory in _SPACE_FACTORIES:
            if accepts(problem):
                return factory(problem, **kwargs)
        return AllocationSpace(problem, **kwargs)

    @abstractmethod
    def solve(self, problem: Problem) -> PolicyResult:
        """Compute an allocation for ``problem``."""

    def result(self, space: AllocationSpace, X: np.ndarray, status: Status, objective: float | None,
               solver: str, timings: Timings, message: str = "", **extra: Any) -> PolicyResult:
        """Package an allocation array (rows × configs) as a :class:`PolicyResult`. Its dictionaries
        (``allocation``, ``colocated_allocation``, ``effective_throughputs``) are built from ``res.X``
        on first access (:meth:`PolicyResult.defer`): the simulator and the mechanism read the array."""
        t0 = time.perf_counter()
        X = _clip_masked(X, space.mask)
        return self._package(space, X, status, objective, solver, timings, message, extra, t0)

    def certified_result(self, space: AllocationSpace, X: np.ndarray, status: Status, objective: float | None,
                         solver: str, timings: Timings) -> PolicyResult:
        """:meth:`result` of an answer certified to meet the space's time and capacity rows to 1e-9
        (a fast route's certificate): the row check of :meth:`_package` is not repeated. A policy
        with its own :meth:`result` gets the allocation there (checked)."""
        if type(self).result is not Policy.result:
            return self.result(space, X, status, objective, solver, timings)
        t0 = time.perf_counter()
        X = _clip_masked(X, space.mask)
        return self._package(space, X, status, objective, solver, timings, "", {}, t0, certified=True)

    def class_result(self, space: AllocationSpace, Xc: np.ndarray, status: Status, objective: float | None,
                     solver: str, timings: Timings, message: str = "", clipped: bool = False,
                     certified: bool = False, **extra: Any) -> PolicyResult:
        """:meth:`result` of the allocation ``Xc[group]``, where ``Xc`` holds one row per class of
        jobs of equal data declared on the space (:meth:`AllocationSpace.declare_classes`: job ``j``
        is of class ``group[j]``): clipped and masked per class (each job's mask row is its
        class's), then gathered once — the same numbers as clipping and masking ``Xc[group]``.
        ``clipped``: the caller's ``Xc`` already is (every entry in [0, 1], no NaN or −0.0, 0 where
        its class's mask row is False), so it is gathered as it is. ``certified``: as in
        :meth:`certified_result`. A policy with its own :meth:`result` gets ``Xc[group]`` there (checked)."""
        cls = space.declared_classes()
        if cls is None:
            raise ValueError("class_result needs the space's classes (AllocationSpace.declare_classes)")
        if type(self).result is not Policy.result:
            return self.result(space, Xc.take(cls[0], axis=0), status, objective, solver, timings, message, **extra)
        t0 = time.perf_counter()
        X = (Xc if clipped else _clip_masked(Xc, cls[1])).take(cls[0], axis=0)  # (take: ~4× fancy indexing's)
        return self._package(space, X, status, objective, solver, timings, message, extra, t0, certified)

    def _package(self, space: AllocationSpace, X: np.ndarray, status: Status, objective: float | None,
                 solver: str, timings: Timings, message: str, extra: dict[str, Any], t0: float,
                 certified: bool = False) -> PolicyResult:
        """The :class:`PolicyResult` of the clipped and masked allocation ``X``, made exactly feasible
        where a row is exceeded beyond 1e-9 (:meth:`AllocationSpace.make_feasible`; reported in
        ``extra["feasibility_repair"]``, the objective left as the solver's); not checked where the
        answer is ``certified`` to 1e-9 already."""
        if not certified:
            X, repair = space.make_feasible(X)
            if repair is not None:
                extra["feasibility_repair"] = repair
        res = PolicyResult.deferred(
            self.name, solver, status, objective, timings, message, extra,
            {"allocation": lambda: space.allocation_dict(X), "colocated_allocation": lambda: space.colocated_list(X),
             "effective_throughputs": lambda: dict(zip(space.jobs.labels.tolist(),
                                                       space.throughput_values(X).tolist()))},
            X, space)
        timings.extract += time.perf_counter() - t0
        return res

    def fallback(self, space: AllocationSpace, raw: SolveResult | None, X_var: Variable | None
                 ) -> tuple[np.ndarray, str]:
        """The documented safe fallback for a non-optimal solve (see module docstring)."""
        iso = space.full_from_single(space.isolated_allocation())
        status = raw.status.value if raw else "error"
        if raw is not None and raw.x is not None and X_var is not None:
            X = X_var.value(raw.x)
            if not space.check(X):
                thr, thr_iso = space.throughput_values(X), space.throughput_values(iso)
                tol = 1e-9 * np.maximum(1.0, thr_iso)
                if not (np.all(thr <= thr_iso + tol) and np.any(thr < thr_iso - tol)):
                    return X, f"{status}: returning the solver's best feasible point"
                return iso, (f"{status}: the solver's best point is feasible but no job is faster under it than "
                             "under the isolated allocation; returning the isolated allocation (fallback)")
        return iso, f"{status}: returning the isolated allocation (fallback)"


def _clip_masked(X: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """``X`` clipped to [0, 1] (a new array; NaN stays NaN, as ``np.clip`` keeps it, and −0.0 reads
    0.0) and 0 where ``mask`` is False."""
    X = np.maximum(X, 0.0)
    np.minimum(X, 1.0, out=X)
    X += 0.0  # turns -0.0 into 0.0
    X[~mask] = 0.0
    return X


class LPPolicy(Policy):
    """A policy that is one LP/MILP over the allocation space: implement :meth:`build`."""

    @abstractmethod
    def build(self, model: Model, space: AllocationSpace, X: Variable) -> Variable | None:
        """Add the objective (and extra rows). May return a variable whose value is the objective
        in the policy's own terms (e.g. the epigraph ``t``)."""

    def objective_value(self, raw: SolveResult, obj_var: Variable | None) -> float | None:
        if raw.x is None:
            return None
        if obj_var is not None:
            return float(obj_var.value(raw.x).ravel()[0])
        return raw.objective

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        kept = incremental.update(self, space) if self.incremental_lp else None
        if kept is not None:  # the previous problem's model, updated in place to this job set
            st, variables = kept
            try:
                t1 = time.perf_counter()
                raw = st.loaded.resolve()
                st.keep_start(raw.x if raw.status is Status.OPTIMAL else None)
                remember(self, st.snapshot(space, variables) if st.loaded.has_basis() else None)
                timings.build = t1 - t0
                timings.solve = time.perf_counter() - t1 - raw.timings.extract
                timings.extract = raw.timings.extract
                return self._lp_result(space, raw, variables["X"], variables.get(st.obj_name or ""), timings)
            except Declined:  # the aggregated re-solve gave no certified answer: the whole LP, cold
                incremental.forget(self)
            finally:
                st.lock.release()
        model = Model(self.name)
        X = space.add_allocation(model)
        obj_var = self.build(model, space, X)
        t1 = time.perf_counter()
        sf = model.compile()
        t2 = time.perf_counter()
        solver = self.get_solver(Feature.MILP if model.is_mip else Feature.LP)
        loaded = solver.load(sf, self.solver_options(sf))
        loaded.return_duals = False  # the result is read from the point (and the objective) only
        prev = recall(self)
        # the linking rows' prices a kept model left (max-sum throughput's capacity rows): the
        # backend's price path starts from them; when it fails, the whole LP is solved cold
        priced = self.incremental_lp and not model.is_mip and incremental.seed_prices(self, model, loaded)
        if prev is not None and not priced and not model.is_mip and self.config["algorithm"] == "auto" \
                and prev.statuses() is not None:
            # warm start: the previous problem's optimal basis, carried over by labels (a job more
            # or less after an arrival or completion); a failed warm solve is checked cold (resolve)
            loaded.set_basis(*carry_basis(prev, model))
            raw = loaded.resolve()
        else:
            raw = loaded.solve()
        snapshot = None
        if self.config["algorithm"] == "auto" and loaded.has_basis():
            # the backend's basis, turned into arrays only if a next solve starts from it
            snapshot = BasisSnapshot(model, source=loaded.basis_reader())
        remember(self, snapshot)
        if self.incremental_lp:
            adopted = incremental.adopt(self, space, model, loaded, obj_var)
            if adopted is not None:
                adopted.keep_start(raw.x if raw.status is Status.OPTIMAL else None)
                adopted.lock.release()
        timings.build, timings.compile = t1 - t0, t2 - t1
        timings.solve = time.perf_counter() - t2 - raw.timings.extract
        timings.extract = raw.timings.extract
        return self._lp_result(space, raw, X, obj_var, timings)

    def _lp_result(self, space: AllocationSpace, raw: SolveResult, X: Variable, obj_var: Variable | None,
                   timings: Timings) -> PolicyResult:
        if raw.status is Status.OPTIMAL and raw.x is not None:
            Xc = class_values(X, space, raw.x)  # (the aggregated re-solve: per class, gathered once)
            if Xc is not None:
                return self.class_result(space, Xc, raw.status, self.objective_value(raw, obj_var), raw.solver,
                                         timings)
            return self.result(space, X.value(raw.x), raw.status, self.objective_value(raw, obj_var),
                               raw.solver, timings)
        Xf, msg = self.fallback(space, raw, X)
        return self.result(space, Xf, raw.status, None, raw.solver, timings, msg)


# ---------------------------------------------------------------------------------------- registries
_SPACE_FACTORIES: list[tuple[Callable[[Problem], bool], Callable[..., AllocationSpace]]] = []


def register_space(accepts: Callable[[Problem], bool], factory: Callable[..., AllocationSpace]) -> None:
    """Register an allocation-space factory (an :class:`AllocationSpace` subclass, called as
    ``factory(problem, space_sharing=..., pruning=...)``) for problems where ``accepts(problem)``;
    earlier registrations win. Every policy then works over that space unchanged."""
    _SPACE_FACTORIES.append((accepts, factory))


_POLICIES: dict[str, type[Policy]] = {}
P = TypeVar("P", bound=type[Policy])


def register_policy(name: str | None = None, *, doc: str | None = None) -> Callable[[P], P]:
    """Class decorator registering a policy under ``name`` (defaults to ``cls.name``)::

        @register_policy("my_policy", doc="max-min fairness over cost-normalized throughput")
        class MyPolicy(LPPolicy):
            def build(self, model, space, X): ...
    """

    def deco(cls: P) -> P:
        key = name or cls.name
        if not key:
            raise ValueError("a policy needs a name")
        cls.name = key
        if doc is not None:
            cls.doc = doc
        elif "doc" not in cls.__dict__ or not cls.__dict__["doc"]:
            # the class's own docstring, not one inherited from a parent policy
            cls.doc = (cls.__dict__.get("__doc__") or "").strip().split("\n\n")[0]
        _POLICIES[key] = cls
        return cls

    return deco


_PLUGINS_LOADED: set[str] = set()
_ENTRY_POINTS_SCANNED = False


def load_plugins(modules: Iterable[str] = (), rescan: bool = False) -> list[str]:
    """Import policy plugins so their ``@register_policy`` decorators run: the given modules (a
    dotted name, or a ``.py`` file path imported as a module named after the file), the
    comma-separated ``POLICYOPT_PLUGINS`` environment variable, and the ``policyopt.policies``
    entry-point group of installed packages — scanned once per process (the scan reads every
    installed distribution's metadata: milliseconds), again with ``rescan`` (``get_policy`` rescans
    when a name is not registered). A module that fails to import raises ``InputError``."""
    global _ENTRY_POINTS_SCANNED
    import os
    from importlib import metadata

    names = [m for m in modules if m]
    names += [m.strip() for m in os.environ.get("POLICYOPT_PLUGINS", "").split(",") if m.strip()]
    loaded = []
    for name in names:
        if name in _PLUGINS_LOADED:
            continue
        if name.endswith(".py") or os.sep in name:
            _import_file(name)
        else:
            try:
                importlib.import_module(name)
            except ImportError as exc:
                raise InputError("plugin", name, f"cannot import policy plugin module: {exc}") from None
        _PLUGINS_LOADED.add(name)
        loaded.append(name)
    if _ENTRY_POINTS_SCANNED and not rescan:
        return loaded
    for ep in metadata.entry_points(group="policyopt.policies"):
        if ep.value not in _PLUGINS_LOADED:
            ep.load()
            _PLUGINS_LOADED.add(ep.value)
            loaded.append(ep.value)
    _ENTRY_POINTS_SCANNED = True
    return loaded


def _import_file(path: str) -> None:
    """Import the plugin file ``path`` as module ``<file stem>`` (so that its classes pickle, and a
    child process given the same path imports it under the same name)."""
    import importlib.util
    import sys
    from pathlib import Path

    file = Path(path).expanduser().resolve()
    if not file.is_file():
        raise InputError("plugin", path, "no such plugin file")
    name = file.stem
    known = sys.modules.get(name)
    if known is not None:
        if Path(getattr(known, "__file__", "") or "").resolve() == file:
            return
        raise InputError("plugin", path, f"a module named {name!r} is already imported from elsewhere; "
                                         "rename the plugin file")
    spec = importlib.util.spec_from_file_location(name, file)
    if spec is None or spec.loader is None:
        raise InputError("plugin", path, "cannot import a module from this file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - any error of the plugin file is reported as its own, one line
        del sys.modules[name]
        raise InputError("plugin", path, f"importing the plugin file failed: {type(exc).__name__}: {exc}") from None


def _ensure_loaded(name: str | None = None) -> None:
    """The policy library and plugins; the extensions (:func:`policyopt.extensions.discover`) only
    when ``name`` is not registered yet or every policy is wanted (``name`` None)."""
    importlib.import_module("policyopt.formulations")
    load_plugins(rescan=name is not None and name not in _POLICIES)
    if name is None or name not in _POLICIES:
        discover()


def policy_class(name: str) -> type[Policy]:
    _ensure_loaded(name)
    try:
        return _POLICIES[name]
    except KeyError:
        raise UnknownNameError("policy", name, _POLICIES) from None


def get_policy(name: str | Policy, **options: Any) -> Policy:
    """A policy instance by registered name (``options`` validated against its documented options)."""
    if isinstance(name, Policy):
        if options:
            raise InputError("options", options, "options cannot be given with a policy instance")
        return name
    return policy_class(name)(**options)


def list_policies() -> list[dict[str, Any]]:
    """Name, doc and options of every registered policy."""
    _ensure_loaded()
    out = []
    for n, cls in _POLICIES.items():
        out.append({"name": n, "doc": cls.doc, "class": f"{cls.__module__}.{cls.__qualname__}",
                    "options": [{"name": o.name, "type": o.type.__name__, "default": o.default, "doc": o.doc,
                                 **({"choices": list(o.choices)} if o.choices else {})}
                                for o in cls.all_options()]})
    return out
