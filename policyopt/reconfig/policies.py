r"""An LP policy aimed at job completion times, usable over any allocation space.

``fluid_srpt`` — maximize the total rate at which jobs finish their remaining work:

.. math::  \max_X \sum_m w_m \cdot \frac{thr(m)}{s_m}

(``s_m`` remaining steps, ``w_m`` weights; finished jobs take no part), subject to the space's rows
(over :class:`~.space.MultiResourceSpace`: GPUs, cores, host memory, quotas, SLAs, the
reconfiguration rule). ``thr(m)/s_m`` is the fraction of job ``m``'s remaining work done per second,
so the LP favours jobs that are close to finishing and jobs that use resources efficiently — the
fluid analogue of shortest-remaining-processing-time, re-solved every round. Rows are scaled by the
solver layer (``τ/s_m`` with ``τ`` the median of ``s_m/thr(m, X_equal)`` keeps coefficients near 1).
The reported objective is the optimal ``Σ w_m·thr(m)/s_m`` (1/s).
"""
from __future__ import annotations

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model, Variable
from policyopt.policy import LPPolicy, register_policy

__all__ = ["FluidSRPT"]


@register_policy("fluid_srpt")
class FluidSRPT(LPPolicy):
    """Fluid SRPT: max Σ_m w_m·thr(m)/s_m (rate of finishing remaining work), one LP."""

    pop_combine = "sum"

    def build(self, model: Model, space: AllocationSpace, X: Variable) -> Variable | None:
        steps = np.asarray(space.steps, float)
        active = steps > 0
        ref = space.equal_share_throughput()
        tau = float(np.median(steps[active] / np.maximum(ref[active], 1e-300))) if active.any() else 1.0
        coef = np.where(active, space.weights * tau / np.where(active, steps, 1.0), 0.0)
        model.maximize((space.throughput(X) * coef).sum())
        self._tau = tau
        return None

    def objective_value(self, raw, obj_var):  # type: ignore[no-untyped-def]
        v = super().objective_value(raw, obj_var)
        return None if v is None else v / self._tau
