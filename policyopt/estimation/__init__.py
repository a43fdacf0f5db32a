"""Throughput estimation: colocation (space-sharing) throughputs and multi-GPU scaling.

Public API::

    from policyopt.estimation import (
        ColocationEstimator,                 # low-rank completion of normalized pair throughputs
        estimate_problem, predicted_colocations,   # fill a Problem's colocated_types from estimates
        ScalingModel, linear_scaling, scaling_dataset,  # g-GPU throughput from single-GPU throughput
        als, soft_impute,                    # the completion algorithms
    )

See docs/estimation.md for the method, the math and measured errors.
"""
from .colocation import FEASIBILITY, METHODS, ColocationEstimator, gavel_arrays, pair_groups
from .completion import CompletionFit, als, default_grid, fit_completion, select, soft_impute
from .feasibility import ThresholdModel, fit_threshold_model
from .problem_fill import estimate_problem, predicted_colocations, split_label
from .scaling import ScalingData, ScalingModel, linear_scaling, power_law_predictions, scaling_dataset

__all__ = [
    "ColocationEstimator", "METHODS", "FEASIBILITY", "gavel_arrays", "pair_groups",
    "CompletionFit", "als", "soft_impute", "fit_completion", "select", "default_grid",
    "ThresholdModel", "fit_threshold_model",
    "estimate_problem", "predicted_colocations", "split_label",
    "ScalingModel", "ScalingData", "linear_scaling", "scaling_dataset", "power_law_predictions",
]
