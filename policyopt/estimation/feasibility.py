"""Which unmeasured pairs can run together at all: a logistic *memory-threshold* model.

A pair fails (is recorded at zero throughput) mostly because the two jobs' memory footprints do not
fit one GPU together. With a latent per-job footprint score ``s_j`` and a per-worker-type offset
``θ_w`` (GPU memory differs between types)::

    P(pair (a, b) infeasible on w) = σ(s_a + s_b + θ_w),      σ(x) = 1 / (1 + e^{−x})

fitted by Newton's method with backtracking on the known cells (measured feasible = 0, measured infeasible = 1) with an
L2 penalty ``reg·(‖s‖² + ‖θ‖²)``; a pair is predicted infeasible when the probability exceeds 1/2.
The score is symmetric in ``(a, b)`` and shared by all worker types, so a new job's few profiling
runs place it on the same memory scale as every reference job.
"""
from __future__ import annotations

import numpy as np

from ..errors import InputError

__all__ = ["ThresholdModel", "fit_threshold_model"]


class ThresholdModel:
    """Fitted ``s`` (per job) and ``θ`` (per worker type); :meth:`probability` over ``(K, W, K)``."""

    def __init__(self, s: np.ndarray, theta: np.ndarray) -> None:
        self.s = s
        self.theta = theta

    def probability(self) -> np.ndarray:
        """``P(infeasible)[j, w, k] = σ(s_j + s_k + θ_w)``."""
        x = self.s[:, None, None] + self.s[None, None, :] + self.theta[None, :, None]
        return 0.5 * (1.0 + np.tanh(0.5 * x))


def fit_threshold_model(infeasible: np.ndarray, known: np.ndarray, reg: float = 0.3,
                        iters: int = 50, tol: float = 1e-8) -> ThresholdModel:
    """Fit the model on the ``known`` cells of a ``(K, W, K)`` array (``infeasible`` = label 1)."""
    Y = np.asarray(infeasible, bool)
    Kn = np.asarray(known, bool)
    if Y.ndim != 3 or Y.shape != Kn.shape or Y.shape[0] != Y.shape[2]:
        raise InputError("infeasible", Y.shape, "must be (K, W, K) like known")
    if reg <= 0 or not np.isfinite(reg):
        raise InputError("reg", reg, "must be a finite number > 0")
    K, W, _ = Y.shape
    j, w, k = np.nonzero(Kn)
    y = Y[j, w, k].astype(np.float64)
    # design matrix: one-hot(j) + one-hot(k) over K job columns, one-hot(w) over W type columns
    X = np.zeros((j.size, K + W))
    np.add.at(X, (np.arange(j.size), j), 1.0)
    np.add.at(X, (np.arange(j.size), k), 1.0)
    X[np.arange(j.size), K + w] = 1.0
    beta = np.zeros(K + W)
    if y.size:
        beta[K:] = np.log((y.mean() + 1e-3) / (1 - y.mean() + 1e-3))  # start at the base rate
    def loss(b: np.ndarray) -> float:  # penalized negative log-likelihood (stable log-sigmoid)
        z = X @ b
        return float(np.sum(np.logaddexp(0.0, z) - y * z) + reg * (b @ b))

    cur = loss(beta)
    for _ in range(iters):
        p = 0.5 * (1.0 + np.tanh(0.5 * (X @ beta)))  # σ without overflow
        grad = X.T @ (p - y) + 2 * reg * beta
        H = (X * (p * (1 - p))[:, None]).T @ X + 2 * reg * np.eye(K + W)
        step = np.linalg.solve(H, grad)
        t = 1.0
        while t > 1e-6 and loss(beta - t * step) > cur:  # backtracking keeps Newton monotone
            t *= 0.5
        beta = beta - t * step
        new = loss(beta)
        if cur - new <= tol * max(abs(cur), 1.0):
            cur = new
            break
        cur = new
    return ThresholdModel(beta[:K].copy(), beta[K:].copy())
