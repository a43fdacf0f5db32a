"""Input checks shared by the stateless and stateful endpoints (all raise ``InputError``).

* :func:`check_json_numbers` — integers beyond ``±2**63`` anywhere in a request part are refused
  (they overflow when converted to float and would otherwise surface as server errors), and so
  are non-zero numbers whose magnitude lies outside :data:`policyopt.schema.MAGNITUDE` (the one
  range of the interchange format: a throughput of ``1e-320`` makes the normalizer
  ``1/thr(m, X_equal)`` infinite; ``1e300`` overflows sums).
* :func:`make_policy` — a policy instance from a name and options, with the server's time-limit
  rule: ``time_limit`` defaults to ``default_time_limit`` and may not exceed ``max_time_limit``;
  the solver named in the options must be registered and installed, and a sub-solver name
  (``pulp:CBC``) must solve a one-job problem (checked once per name).
* :func:`solve_checked` — a solve whose model cannot be built from the request's numbers is the
  request's fault (``InputError``, 422); a backend that fails raises ``SolverError`` (HTTP 502) and
  one that is not installed ``SolverNotAvailableError`` (503), never a bare server error.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

from policyopt.errors import InputError, ModelingError, PolicyOptError, SolverNotAvailableError
from policyopt.policy import Policy, get_policy
from policyopt.schema import MAGNITUDE

__all__ = ["check_json_numbers", "finite_number", "make_policy", "prefixed", "solve_checked"]

_INT_LIMIT = 2 ** 63


def check_json_numbers(obj: Any, path: str, magnitudes: bool = False) -> None:
    """Raise ``InputError(path…)`` at the first integer out of ``±2**63`` in ``obj`` (iterative
    walk); with ``magnitudes``, also at a finite non-zero number outside :data:`MAGNITUDE`."""
    lo, hi = MAGNITUDE
    stack: list[tuple[Any, str]] = [(obj, path)]
    while stack:
        value, p = stack.pop()
        if isinstance(value, bool):
            continue
        if isinstance(value, int):
            if abs(value) >= _INT_LIMIT:
                raise InputError(p, value, "integer out of range (|n| < 2**63)")
            if magnitudes and value and abs(value) > hi:
                raise InputError(p, value, f"magnitude outside [{lo:g}, {hi:g}]")
        elif isinstance(value, float):
            if magnitudes and value and math.isfinite(value) and not lo <= abs(value) <= hi:
                raise InputError(p, value, f"magnitude outside [{lo:g}, {hi:g}]")
        elif isinstance(value, Mapping):
            stack.extend((v, f"{p}.{k}" if p else str(k)) for k, v in value.items())
        elif isinstance(value, (list, tuple)):
            stack.extend((v, f"{p}[{i}]") for i, v in enumerate(value))


def prefixed(exc: InputError, prefix: str) -> InputError:
    """The same error with ``prefix.`` in front of its field path (``problem.jobs[0]...``)."""
    exc.field = f"{prefix}.{exc.field}" if exc.field else prefix
    exc.args = (f"{exc.field}: {exc.problem}",)
    return exc


class _SubSolverError(Exception):
    """A sub-solver name that does not work (turned into an ``InputError`` on ``options.solver``)."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


_GOOD_SOLVERS: set[str] = set()


def make_policy(name: str, options: Mapping[str, Any], *, default_time_limit: float | None,
                max_time_limit: float | None) -> tuple[Policy, dict[str, Any]]:
    """A validated policy instance and the effective options (with the time limit applied)."""
    if not isinstance(name, str) or not name:
        raise InputError("policy", name, "must be a non-empty policy name")
    check_json_numbers(options, "options")
    opts = dict(options)
    for key, value in opts.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise InputError(f"options.{key}", value, "must be finite")
    if opts.get("time_limit") is None and default_time_limit is not None:
        opts["time_limit"] = default_time_limit
    try:
        policy = get_policy(name, **opts)
        limit = policy.config.get("time_limit")
        if max_time_limit is not None and limit is not None and limit > max_time_limit:
            raise InputError("options.time_limit", limit, f"exceeds this server's maximum of {max_time_limit:g} s")
        policy.solver_options()  # validates algorithm / time_limit
        policy.get_solver(None)  # the solver must exist and be installed
        _check_sub_solver(policy.config.get("solver"))
    except OverflowError:
        raise InputError("options", dict(options), "a number is out of range") from None
    except _SubSolverError as exc:
        raise InputError("options.solver", opts.get("solver"), exc.problem) from None
    except SolverNotAvailableError as exc:
        raise InputError("options.solver", opts.get("solver"), str(exc)) from None
    except InputError as exc:
        if exc.field == "solver":
            raise prefixed(exc, "options") from None
        raise
    except PolicyOptError as exc:  # any other construction-time problem is the caller's input
        raise InputError("options", dict(options), str(exc)) from None
    return policy, opts


def _check_sub_solver(name: Any) -> None:
    """A backend's sub-solver (``pulp:CBC``, ``cvxpy:CLARABEL``) is only resolved when it solves:
    solve a one-job problem once per name so that a bad name is an input error, not a crash."""
    if not isinstance(name, str) or ":" not in name or name in _GOOD_SOLVERS:
        return
    from policyopt.problem import Problem
    from policyopt.result import Status

    tiny = Problem.from_dict({"cluster": {"worker_types": {"g": {"count": 1}}},
                              "jobs": [{"id": "j", "throughputs": {"g": 1.0}}]})
    try:
        res = get_policy("max_min_fairness", solver=name).solve(tiny)
    except Exception as exc:  # noqa: BLE001 - whatever the backend raises, the name is unusable
        raise _SubSolverError(f"the solver fails on a one-job problem: {type(exc).__name__}: {exc}"[:300]) from None
    if res.status is not Status.OPTIMAL:
        raise _SubSolverError(f"the solver does not solve a one-job problem ({res.status.value}: {res.message})"[:300])
    _GOOD_SOLVERS.add(name)


def solve_checked(policy: Policy, problem: Any, field: str = "problem") -> Any:
    """``policy.solve(problem)``; a model that cannot be built from the problem's numbers
    (:class:`ModelingError`) is reported as an ``InputError`` on ``field`` (the request's data caused
    it). A backend failure stays a :class:`SolverError` (502 over HTTP: the solver, not the request
    or the service, failed)."""
    try:
        return policy.solve(problem)
    except ModelingError as exc:
        raise InputError(field, None, f"the model cannot be built from these numbers: {exc}") from None


def finite_number(field: str, value: Any, *, low: float | None = None, strict: bool = False,
            high: float | None = None) -> float:
    """``value`` as a float: a finite number (not a bool), ``>= low`` (``> low`` with ``strict``) and
    ``<= high`` where given; otherwise :class:`InputError` naming ``field``."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise InputError(field, value, "must be a number")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(field, value, "must be finite")
    if low is not None and (v <= low if strict else v < low):
        raise InputError(field, value, f"must be {'>' if strict else '>='} {low:g}")
    if high is not None and v > high:
        raise InputError(field, value, f"must be <= {high:g}")
    return v
