"""Gavel's reference-model matching: matches by cosine distance after completion, predicts with the
reference's measured row, and is measured against matrix completion on the same information."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt.errors import InputError
from policyopt.estimation.reference import ReferenceMatcher, reference_matching_errors


def synthetic(seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    V = rng.uniform(0.2, 1.0, (6, 2, 6))
    V[5] = 0.9 * V[2]  # type 5 behaves like type 2 (scaled: cosine distance 0 to it)
    return V


def test_full_fingerprint_matches_the_proportional_reference() -> None:
    V = synthetic()
    ref = np.array([0, 1, 2, 3])
    m = ReferenceMatcher(V, ref)
    assert m.match(V[5][:, ref], np.ones((2, 4), bool)) == 2


def test_partial_fingerprint_completes_then_matches() -> None:
    V = synthetic(1)
    ref = np.array([0, 1, 2, 3])
    mask = np.array([[True, False, True, True], [True, True, False, True]])
    assert ReferenceMatcher(V, ref).match(V[5][:, ref], mask) == 2


def test_predictions_use_the_references_measured_values() -> None:
    V = synthetic()
    m = ReferenceMatcher(V, [0, 1, 2, 3])
    ref_of = np.array([0, 1, 2, 3, 1, 2])
    P = m.predict(ref_of)
    assert P[5, 1, 4] == V[2, 1, 1] and P[0, 0, 3] == V[0, 0, 3]


def test_bad_reference_sets_are_refused() -> None:
    with pytest.raises(InputError, match="reference"):
        ReferenceMatcher(synthetic(), [7])


def test_held_out_errors_on_gavel(gavel) -> None:
    out = reference_matching_errors(gavel, 13, 0.6, seed=0)
    a, b = out["reference matching"], out["matrix completion"]
    assert a.size == b.size > 100
    assert np.all(np.isfinite(a)) and np.all((a >= 0) & (a <= 1)) and np.all(b >= 0)
    with pytest.raises(InputError, match="profiling_percentage"):
        reference_matching_errors(gavel, 13, 0.0, seed=0)
    with pytest.raises(InputError, match="num_reference_models"):
        reference_matching_errors(gavel, num_reference_models=1, profiling_percentage=0.5, seed=0)
