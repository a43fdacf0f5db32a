"""Typed errors.

Every error a user can trigger with bad input names the offending *field* (a dotted path such as
``jobs[3].throughputs.v100``) and the *value*, so a one-line message is enough to fix the input.

Hierarchy::

    PolicyOptError
    ├── InputError            bad user data (field + value)
    │   └── UnknownNameError  an unknown policy / solver / worker type / job id
    ├── ModelingError         a mis-built model (shapes, labels)
    │   └── AlignmentError    operands over the same dimension with different labels
    ├── SolverError           a backend failed (names the call and the option)
    │   └── SolverNotAvailableError
    └── InfeasibleError       a problem with no feasible point, where the caller asked to raise
"""
from __future__ import annotations

from typing import Any, Iterable

__all__ = [
    "PolicyOptError",
    "InputError",
    "UnknownNameError",
    "ModelingError",
    "AlignmentError",
    "SolverError",
    "SolverNotAvailableError",
    "InfeasibleError",
]


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class PolicyOptError(Exception):
    """Base class of every error raised by policyopt."""


class InputError(PolicyOptError, ValueError):
    """Bad input data. ``field`` is a dotted path into the input, ``value`` the offending value."""

    def __init__(self, field: str, value: Any, problem: str) -> None:
        self.field = field
        self.value = value
        self.problem = problem
        super().__init__(f"{field}: {problem} (got {_short(value)})")

    def __reduce__(self) -> tuple[Any, ...]:  # picklable: errors cross process boundaries (POP, executor)
        return (InputError, (self.field, self.value, self.problem))


class UnknownNameError(InputError, KeyError):
    """A name (policy, solver, worker type, job id, ...) that is not known."""

    def __init__(self, field: str, value: Any, known: Iterable[str]) -> None:
        known_list = sorted(str(k) for k in known)
        shown = ", ".join(known_list[:20]) + (" ..." if len(known_list) > 20 else "")
        super().__init__(field, value, f"unknown name; known: {shown or '(none)'}")
        self.known = known_list

    def __reduce__(self) -> tuple[Any, ...]:
        return (UnknownNameError, (self.field, self.value, self.known))

    def __str__(self) -> str:  # KeyError would otherwise quote the message
        return Exception.__str__(self)


class ModelingError(PolicyOptError, ValueError):
    """A model built inconsistently (shapes, dimensions, labels)."""


class AlignmentError(ModelingError):
    """Two operands share a dimension name but carry different labels; nothing is realigned."""

    def __init__(self, dim: str, left: Iterable[Any], right: Iterable[Any]) -> None:
        lhs, rhs = list(left), list(right)
        self._args = (dim, lhs, rhs)
        super().__init__(
            f"dimension {dim!r} has different labels on the two operands: "
            f"{_short(lhs)} vs {_short(rhs)}; reindex explicitly before combining"
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (AlignmentError, self._args)


class SolverError(PolicyOptError, RuntimeError):
    """A solver backend failed; the message names the backend call and option involved."""


class SolverNotAvailableError(SolverError):
    """The requested solver backend is not installed."""


class InfeasibleError(PolicyOptError):
    """The optimization problem has no feasible point (raised only where the caller asks)."""
