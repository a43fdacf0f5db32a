"""policyopt: cluster-scheduling policies for deep-learning training as optimization problems.

The stable public surface::

    from policyopt import Problem, Cluster, Job, Colocation, Entity   # data model
    from policyopt import solve, get_policy, list_policies, register_policy, LPPolicy, Policy
    from policyopt import Model, IndexSet, AllocationSpace             # declarative layer
    from policyopt import Status, PolicyResult, SolverOptions, get_solver

``solve(problem, "max_min_fairness")`` returns a :class:`PolicyResult` whose
``allocation[job_id][worker_type]`` is the fraction of time the job spends there.
"""
from .allocation import AllocationSpace, PairPruning
from .errors import (AlignmentError, InfeasibleError, InputError, ModelingError, PolicyOptError, SolverError,
                     SolverNotAvailableError, UnknownNameError)
from .modeling import Constraint, IndexSet, LinExpr, Model, Variable
from .policy import LPPolicy, Option, Policy, get_policy, list_policies, register_policy, register_space
from .problem import Cluster, Colocation, Entity, Job, Problem, TypeColocation, WorkerType
from .result import PolicyResult, SolveResult, Status, Timings
from .solve import solve
from .solver_api import Feature, SolverOptions, available_solvers, get_solver, register_solver
from .standard_form import StandardForm

__version__ = "0.1.0"

# Heavier parts load on first use, so ``import policyopt`` stays light.
_LAZY = {
    "pop": ("policyopt.pop", "pop"),
    "RoundMechanism": ("policyopt.mechanism", "RoundMechanism"),
    "RoundPipeline": ("policyopt.placement", "RoundPipeline"),
    "simulate": ("policyopt.sim", "simulate"),
    "SimConfig": ("policyopt.sim", "SimConfig"),
    "load_gavel": ("policyopt.data", "load_gavel"),
    "load_example": ("policyopt.examples", "load_example"),
    "load_plugins": ("policyopt.policy", "load_plugins"),
}


def __getattr__(name: str) -> object:
    if name in _LAZY:
        import importlib

        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'policyopt' has no attribute {name!r}")

__all__ = [
    "AllocationSpace", "PairPruning",
    "AlignmentError", "InfeasibleError", "InputError", "ModelingError", "PolicyOptError", "SolverError",
    "SolverNotAvailableError", "UnknownNameError",
    "Constraint", "IndexSet", "LinExpr", "Model", "Variable",
    "LPPolicy", "Option", "Policy", "get_policy", "list_policies", "register_policy",
    "Cluster", "Colocation", "Entity", "Job", "Problem", "TypeColocation", "WorkerType",
    "PolicyResult", "SolveResult", "Status", "Timings",
    "solve", "Feature", "SolverOptions", "available_solvers", "get_solver", "register_solver", "StandardForm",
    "register_space", *_LAZY,
]
