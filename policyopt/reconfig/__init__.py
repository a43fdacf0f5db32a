"""Reconfiguration-aware multi-resource allocation: execution plans as configurations.

Importing this package registers :class:`MultiResourceSpace` for :class:`ReconfigProblem` (so every
policy solves over plan × resource configurations), the baseline policies ``rubick_greedy``,
``synergy_like`` and ``sia_like``, the problem kind ``"reconfig"`` and the result section
``sla_report`` (:mod:`policyopt.reconfig._extension`; the core finds this package by discovery,
:mod:`policyopt.extensions`). See docs/reconfig.md.

Public API::

    from policyopt.reconfig import (
        ReconfigProblem, ReconfigSpec, ReconfigJob, NodeType, ModelEntry, Quota, ReconfigOptions,
        CurrentConfig, load_problem, problem_from_dict,                 # data + JSON
        MultiResourceSpace,                                             # the space
        reconfig_round, RoundDecision, JobDecision,                     # one scheduling round
        CATALOGUE, A100_NODE, two_job_example,                          # examples
        transformers_trace, trace_problem, simulate_fluid,              # traces + fluid simulation
    )
"""
from .spec import (RECONFIGURE_MODES, CurrentConfig, ModelEntry, NodeType, Quota, ReconfigJob,
                   ReconfigOptions, ReconfigProblem, ReconfigSpec, load_problem, problem_from_dict)
from .space import MultiResourceSpace
from .examples import A100_NODE, CATALOGUE, PUBLISHED_TWO_JOB, two_job_example
from .rounds import JobDecision, RoundDecision, reconfig_round
from . import _extension, baselines, policies  # noqa: F401  (register the problem kind, result section, policies)
from .trace import simulate_fluid, trace_problem, transformers_trace

__all__ = [
    "RECONFIGURE_MODES", "CurrentConfig", "ModelEntry", "NodeType", "Quota", "ReconfigJob",
    "ReconfigOptions", "ReconfigProblem", "ReconfigSpec", "load_problem", "problem_from_dict",
    "MultiResourceSpace", "A100_NODE", "CATALOGUE", "PUBLISHED_TWO_JOB", "two_job_example",
    "JobDecision", "RoundDecision", "reconfig_round", "simulate_fluid", "trace_problem",
    "transformers_trace",
]
