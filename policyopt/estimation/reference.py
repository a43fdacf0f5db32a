"""Reference-model matching: Gavel's throughput estimator, beside our matrix completion.

Gavel (``num_reference_models``, ``profiling_percentage``) keeps a set of *reference* job types whose
normalized colocation throughputs with each other are measured offline. A new job is profiled
against a random fraction ``p`` of the (worker type, reference type) pairs — its *fingerprint* —
the matrix ``[reference rows; the new row]`` is completed (low rank), and the new job is matched to
the reference type whose row is closest in cosine distance:

.. math::  \\mathrm{ref}(j) = \\arg\\min_r \\Big(1 - \\frac{\\langle \\hat N_j, N_r\\rangle}
           {\\lVert \\hat N_j \\rVert\\,\\lVert N_r \\rVert}\\Big)

Every later estimate for the job is the reference type's measured value:
``N[j, w, k] ≈ N[ref(j), w, ref(k)]`` (a reference type is its own reference). Normalized throughputs
``N[j, w, k]`` = job ``j``'s throughput when paired with ``k`` on worker type ``w`` over its
throughput alone there (0 where the pair cannot run), as in :mod:`.colocation`.

:func:`reference_matching_errors` measures it on held-out data next to :class:`ColocationEstimator`
given the same information (the reference block and the new types' fingerprints).
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from policyopt.errors import InputError

from .colocation import ColocationEstimator, gavel_arrays
from .completion import als

__all__ = ["ReferenceMatcher", "reference_matching_errors"]


def _cosine_distance(rows: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``1 − cos`` between each row of ``rows`` and ``x`` (distance 1 to a zero row)."""
    den = np.linalg.norm(rows, axis=1) * np.linalg.norm(x)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(den > 0, 1.0 - rows @ x / den, 1.0)


class ReferenceMatcher:
    """Match job types to reference types from fingerprints (module docstring).

    ``values``: ``(K, W, K)`` normalized throughputs, read only on the reference block
    ``reference × W × reference``; ``rank``/``reg`` of the per-job completion (Gavel: rank 10,
    ``μ = 1e-2``)."""

    def __init__(self, values: np.ndarray, reference: Sequence[int] | np.ndarray, *, rank: int = 10, reg: float = 1e-2,
                 seed: int = 0) -> None:
        values = np.asarray(values, float)
        if values.ndim != 3 or values.shape[0] != values.shape[2]:
            raise InputError("values", list(values.shape), "must have shape (K, W, K)")
        ref = np.unique(np.asarray(reference, np.int64))
        if ref.size < 2 or ref.min() < 0 or ref.max() >= values.shape[0]:
            raise InputError("reference", list(map(int, reference)), "needs at least two valid job-type indices")
        self.values, self.ref, self.rank, self.reg, self.seed = values, ref, rank, reg, seed
        self.block = values[np.ix_(ref, np.arange(values.shape[1]), ref)]  # (R, W, R)

    def match(self, fingerprint: np.ndarray, mask: np.ndarray) -> int:
        """The reference type (an index into the job types) for a job known by ``fingerprint``
        ``(W, R)`` on the cells where ``mask`` is true (against the reference types, in order)."""
        R, W = self.ref.size, self.values.shape[1]
        rows = self.block.reshape(R, W * R)
        x = np.where(mask, fingerprint, 0.0).reshape(W * R)
        m = np.asarray(mask, bool).reshape(W * R)
        if not m.all():
            Z = np.vstack([rows, x[None, :]])
            M = np.vstack([np.ones_like(rows, bool), m[None, :]])
            fit = als(Z, M, min(self.rank, R), self.reg, seed=self.seed)
            x = np.where(m, x, np.clip(fit.predict()[-1], 0.0, 1.0))
        return int(self.ref[int(np.argmin(_cosine_distance(rows, x)))])

    def predict(self, ref_of: np.ndarray) -> np.ndarray:
        """``(K, W, K)`` estimates ``N[ref(j), w, ref(k)]`` for the matches ``ref_of`` (per type)."""
        ref_of = np.asarray(ref_of, np.int64)
        return self.values[np.ix_(ref_of, np.arange(self.values.shape[1]), ref_of)]


def reference_matching_errors(gavel: Any, num_reference_models: int, profiling_percentage: float, seed: int,
                              worker_types: Sequence[str] = ("k80", "p100", "v100"),
                              completion_options: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
    """Held-out absolute errors of reference matching and of matrix completion on Gavel's data.

    ``num_reference_models`` job types (seeded draw) are references; every other type is new and known
    only by its fingerprint (each (worker type, reference) cell with probability
    ``profiling_percentage``, both orientations of a profiled pair, as a colocation run measures
    both jobs). Test cells: every measured cell touching a new type outside its fingerprint. Both
    methods see exactly the reference block and the fingerprints."""
    if not 0 < profiling_percentage <= 1:
        raise InputError("profiling_percentage", profiling_percentage, "must be in (0, 1]")
    labels, wts, V, M, I, A = gavel_arrays(gavel, 1, worker_types)
    K, W, _ = V.shape
    if not 2 <= num_reference_models < K:
        raise InputError("num_reference_models", num_reference_models, f"must be in [2, {K - 1}]")
    rng = np.random.default_rng(seed)
    ref = np.sort(rng.choice(K, num_reference_models, replace=False))
    is_ref = np.zeros(K, bool)
    is_ref[ref] = True
    known = np.zeros((K, W, K), bool)
    known[np.ix_(ref, np.arange(W), ref)] = True
    matcher = ReferenceMatcher(V, ref, seed=seed)
    ref_of = np.arange(K)
    for j in np.flatnonzero(~is_ref):
        prof = rng.random((W, ref.size)) <= profiling_percentage
        known[j][:, ref] |= prof       # j's throughput beside each profiled reference
        known[ref, :, j] |= prof.T     # and the reference's, measured in the same run
        ref_of[j] = matcher.match(V[j][:, ref], prof)
    test = M & ~known & (~is_ref[:, None, None] | ~is_ref[None, None, :])
    est = ColocationEstimator.from_arrays(labels, wts, V, M & known, I & known, A,
                                          **{"seed": seed, **(completion_options or {})}).fit()
    return {"reference matching": np.abs(matcher.predict(ref_of) - V)[test],
            "matrix completion": np.abs(est.predict_matrix("completed") - V)[test]}
