"""Recording the options of every HiGHS run, for the tests that check which algorithm ran how."""
from __future__ import annotations

from typing import Any, Callable

import pytest


def option(h: Any, name: str) -> object:
    """HiGHS option ``name`` of ``h`` (newer highspy returns ``(status, value)``)."""
    v = h.getOptionValue(name)
    return v[1] if isinstance(v, tuple) else v


def record_highs_runs(monkeypatch: pytest.MonkeyPatch, *names: str,
                      model: Callable[[Any], object] | None = None) -> list[tuple[Any, ...]]:
    """From now on, each ``HighsModel._run_highs`` appends the tuple of the options ``names`` (after
    ``model(highs_model)``, when given) to the returned list, then runs as before."""
    from policyopt.solvers import highs

    calls: list[tuple[Any, ...]] = []
    run = highs.HighsModel._run_highs

    def recording_run(self: highs.HighsModel):  # type: ignore[no-untyped-def]
        head = () if model is None else (model(self),)
        calls.append(head + tuple(option(self.h, n) for n in names))
        return run(self)

    monkeypatch.setattr(highs.HighsModel, "_run_highs", recording_run)
    return calls
