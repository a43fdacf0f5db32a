"""FIFO as an LP (Gavel's heterogeneity-aware form).

.. math::  \\max_X \\sum_m (M - rank_m)\\, \\frac{thr(m)}{thr(m, X_{fastest})}

``M`` = number of jobs, ``rank_m ∈ {0, …, M−1}`` the job's position in arrival order (``Job.arrival``
where given, else its position in the problem; ties keep problem order), so every job has a
positive weight ``M − rank_m`` and earlier jobs weigh more. ``thr(m, X_fastest)`` is the job alone
on its fastest allowed configuration all the time, so each term is the fraction of its best
possible throughput the job gets. One LP, never exceeding capacity (Gavel's own event-driven FIFO
could over-allocate a type).

What it optimizes, precisely: with one worker type and single-GPU jobs it is strict arrival order
(the first ``count`` jobs run); the weights are linear, not lexicographic, so with several types an
earlier job can trade part of its normalized throughput for a later job's larger gain (Gavel's
heterogeneity-aware FIFO does exactly this: it moves the early job to the type it loses least on),
and a multi-GPU job is worth its weight per job, not per GPU.

``fifo_agnostic`` (baseline): every throughput seen as 1, so ``Σ_m (M − rank_m)·(time share)``:
earlier jobs get time, on whichever type the solver picks. ``real_objective`` evaluates the aware
objective on the returned allocation.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model, Variable
from policyopt.policy import LPPolicy, register_policy
from policyopt.result import PolicyResult, SolveResult, Status, Timings

from ._common import fastest_throughput, order_by_arrival, policy_data


def fifo_weights(space: AllocationSpace, T: np.ndarray) -> np.ndarray:
    """``(M − rank_m)/thr(m, X_fastest)`` per job under the data ``T``."""
    order = order_by_arrival(space)
    n = order.size
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n)
    return (n - rank) / fastest_throughput(space, T)


@register_policy("fifo")
class Fifo(LPPolicy):
    """FIFO (heterogeneity-aware LP form): max Σ_m (M − rank_m)·thr(m)/thr(m, X_fastest)."""

    agnostic = False

    def build(self, model: Model, space: AllocationSpace, X: Variable) -> Variable | None:
        T, Tp = policy_data(space, self.agnostic)
        model.maximize((space.throughput(X, T, Tp) * fifo_weights(space, T)).sum())
        return None

    def objective_value(self, raw: SolveResult, obj_var: Variable | None) -> float | None:
        return raw.objective

    def result(self, space: AllocationSpace, X: np.ndarray, status: Status, objective: float | None,
               solver: str, timings: Timings, message: str = "", **extra: Any) -> PolicyResult:
        if self.agnostic:
            extra["real_objective"] = float(space.throughput_values(X) @ fifo_weights(space, space.T))
        return super().result(space, X, status, objective, solver, timings, message, **extra)


@register_policy("fifo_agnostic",
                 doc="Heterogeneity-agnostic FIFO: every throughput seen as 1 (time shares in arrival order).")
class FifoAgnostic(Fifo):
    """Heterogeneity-agnostic FIFO: every throughput seen as 1 (time shares in arrival order)."""

    agnostic = True
