"""Execution-plan performance model (Rubick-style): iteration time, memory, fit, sensitivity.

Public API::

    from policyopt.perfmodel import (
        ModelSpec, Plan, Resources, ClusterSpec, PerfParams,          # descriptions
        predict_iter_time, breakdown,                                 # T_iter formula
        estimate_memory, memory_table,                                # GPU / host bytes
        fit_model, fit_all, OnlineRefitter,                           # fitting
        best_plan, sensitivity_curve, upper_envelope, PlanSpace,      # plan search
    )

See docs/perf-model.md for the formulas and the CSV columns.
"""
from .design import design_samples, log_sensitivities
from .fit import FitResult, OnlineRefitter, RefitEvent, fit_all, fit_model, parameter_bounds
from .io import read_configs, read_samples, write_predictions
from .memory import MemoryEstimate, estimate_memory, fits_memory, memory_table
from .model import breakdown, compute_terms, iter_time_from_terms, overlap, predict_iter_time
from .params import PARAM_NAMES, PerfParams, load_params, save_params
from .plans import ZERO_MODES, ClusterSpec, ModelSpec, Plan, Resources, check_plan_fits
from .sensitivity import (BestPlan, PlanSpace, best_plan, candidate_table, enumerate_plans,
                          evaluate_candidates, sensitivity_curve, upper_envelope)
from .table import CONFIG_COLUMNS, SAMPLE_COLUMNS, configs_frame, validate_table

__all__ = [
    "ModelSpec", "Plan", "Resources", "ClusterSpec", "ZERO_MODES", "check_plan_fits",
    "PerfParams", "PARAM_NAMES", "load_params", "save_params",
    "CONFIG_COLUMNS", "SAMPLE_COLUMNS", "configs_frame", "validate_table",
    "compute_terms", "overlap", "iter_time_from_terms", "predict_iter_time", "breakdown",
    "MemoryEstimate", "estimate_memory", "memory_table", "fits_memory",
    "FitResult", "fit_model", "fit_all", "parameter_bounds", "OnlineRefitter", "RefitEvent",
    "design_samples", "log_sensitivities",
    "PlanSpace", "BestPlan", "enumerate_plans", "candidate_table", "evaluate_candidates",
    "best_plan", "sensitivity_curve", "upper_envelope",
    "read_samples", "read_configs", "write_predictions",
]
