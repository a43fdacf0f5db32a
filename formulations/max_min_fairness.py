"""Heterogeneity-aware max-min fairness (Gavel's LAS).

.. math::  \\max_X \\min_m \\frac{sf_m \\cdot thr(m)}{w_m \\cdot thr(m, X_{equal})}

with ``thr(m) = Σ_c T[m,c]·X[m,c] (+ pair rows)`` and ``X_equal[m,c] = count_c/Σ count``. Written as
an epigraph LP: new free ``t``, rows ``sf_m·thr(m)/(w_m·thr(m,X_equal)) − t ≥ 0``, maximize ``t``.
The objective reported is ``t``, the smallest weighted normalized throughput.

``max_min_fairness_agnostic`` is the heterogeneity-agnostic baseline: the policy sees every
throughput as 1 (pairs as their packed/alone ratios), so it shares time, not speed; the reported
effective throughputs use the real data.
"""
from __future__ import annotations

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model, Variable
from policyopt.policy import LPPolicy, register_policy


@register_policy("max_min_fairness")
class MaxMinFairness(LPPolicy):
    """Max-min fairness (LAS): max min_m sf_m·thr(m)/(w_m·thr(m, X_equal)), heterogeneity-aware."""

    pop_combine = "min"  # how POP recombines sub-problem objectives

    agnostic = False

    def data(self, space: AllocationSpace) -> tuple[np.ndarray, np.ndarray]:
        return space.agnostic_throughputs() if self.agnostic else (space.T, space.Tp)

    def normalizer(self, space: AllocationSpace) -> np.ndarray:
        """``sf_m / (w_m·thr(m, X_equal))`` under the data this policy sees."""
        T, _ = self.data(space)
        return space.scale / (space.weights * space.equal_share_throughput(T))

    def build(self, model: Model, space: AllocationSpace, X: Variable) -> Variable:
        T, Tp = self.data(space)
        return model.maximize_min(space.throughput(X, T, Tp) * self.normalizer(space), "t")


@register_policy("max_min_fairness_agnostic")
class MaxMinFairnessAgnostic(MaxMinFairness):
    """Heterogeneity-agnostic max-min fairness: every throughput seen as 1 (baseline)."""

    agnostic = True
