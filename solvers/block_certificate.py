"""The certificate of the block-aggregation fast path (:mod:`policyopt.solvers.blocks`), on the whole
LP: the Lagrangian bound of row multipliers and the primal point's feasibility.
"""
from __future__ import annotations

import math

import numpy as np

from policyopt.standard_form import StandardForm, rmatvec

__all__ = ["certify", "lagrangian_bound"]


def lagrangian_bound(sf: StandardForm, y: np.ndarray, zero_tol: float = 1e-12) -> tuple[float, np.ndarray]:
    """The bound on the optimal objective given by row multipliers ``y`` of the scaled rows (an
    upper bound for ``max``, a lower bound for ``min``), and the reduced costs ``d = c − Aᵀy``."""
    d = sf.c - rmatvec(sf.A, y)
    maximize = sf.sense == "max"

    def side(mult: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> float:
        # ``pick(mult·lo, mult·hi)`` term by term, in three passes instead of ten: the bound a
        # multiplier takes (max: ``hi`` for a positive one, ``lo`` for a negative one; min the other
        # way; rounding is monotone, so the same product), multiplied where the multiplier is not 0
        # (a zero one: 0, as 0·bound or 0·∞ replaced below); a term that is not finite (an
        # infinite side) counts as 0 where its multiplier is round-off (``≤ zero_tol``)
        v = np.zeros(mult.size)
        np.multiply(mult, np.where(mult > 0, hi, lo) if maximize else np.where(mult > 0, lo, hi), out=v,
                    where=mult != 0)
        total = float(v.sum())
        if math.isfinite(total):
            return total
        bad = np.flatnonzero(~np.isfinite(v))
        v[bad[np.abs(mult[bad]) <= zero_tol]] = 0.0
        return float(v.sum())

    return side(y, sf.row_lower, sf.row_upper) + side(d, sf.col_lower, sf.col_upper) + float(sf.offset), d


def certify(sf: StandardForm, x: np.ndarray, y: np.ndarray, feas_tol: float = 1e-9,
            gap_tol: float = 1e-9) -> tuple[bool, float, float, float, np.ndarray]:
    """``(ok, primal objective, dual bound, violation, reduced costs)`` of ``(x, y)`` on ``sf``."""
    primal = float(np.sum(sf.c * x)) + float(sf.offset)
    bound, d = lagrangian_bound(sf, y)
    viol = sf.violation(x)
    gap = abs(bound - primal)
    ok = bool(np.isfinite(bound) and viol <= feas_tol and gap <= gap_tol * max(1.0, abs(primal)))
    return ok, primal, bound, viol, d
