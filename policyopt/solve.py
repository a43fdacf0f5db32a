"""``solve(problem, policy, **options)``: the one-call entry point."""
from __future__ import annotations

from typing import Any

from .policy import Policy, get_policy
from .problem import Problem, problem_from_any
from .result import PolicyResult

__all__ = ["solve"]


def solve(problem: Problem | dict[str, Any] | str, policy: str | Policy = "max_min_fairness",
          **options: Any) -> PolicyResult:
    """Solve ``problem`` (a :class:`Problem`, an interchange dict, or a JSON string/path) with the
    registered policy ``policy`` (or a policy instance) and its ``options``::

        result = policyopt.solve(problem, "max_min_fairness", space_sharing=True, solver="highs")
        result.allocation["0"]["v100"]

    Solver settings are policy options too and reach the backend unchanged: ``time_limit``,
    ``algorithm``, ``verbose`` (the backend's own log) and ``threads``.
    """
    if isinstance(problem, dict):
        problem = problem_from_any(problem)
    elif isinstance(problem, str):
        problem = Problem.from_json(problem)
    return get_policy(policy, **options).solve(problem)
