"""policyopt: cluster-scheduling policies for deep-learning training as optimization problems.

The stable public surface::

    from policyopt import Problem, Cluster, Job, Colocation, Entity   # data model
    from policyopt import solve, get_policy, list_policies, register_policy, LPPolicy, Policy
    from policyopt import Model, IndexSet, AllocationSpace             # declarative layer
    from policyopt import Status, PolicyResult, SolverOptions, get_solver

``solve(problem, "max_min_fairness")`` returns a :class:`PolicyResult` whose
``allocation[job_id][worker_type]`` is the fraction of time the job spends there.
"""
from ._layout import check_installed_layout
from ._lazy import lazy_exports
from .allocation import AllocationSpace, PairPruning
from .errors import (AlignmentError, InfeasibleError, InputError, ModelingError, PolicyOptError, SolverError,
                     SolverNotAvailableError, UnknownNameError)
from .modeling import Constraint, IndexSet, LinExpr, Model, Variable
from .policy import LPPolicy, Option, Policy, get_policy, list_policies, register_policy, register_space
from .pop import pop  # eager (light): a lazy `pop` would be shadowed by the submodule once it is imported
from .problem import Cluster, Colocation, Entity, Job, Problem, TypeColocation, WorkerType
from .result import PolicyResult, SolveResult, Status, Timings
from .solve import solve
from .solver_api import Feature, SolverOptions, available_solvers, get_solver, register_solver
from .standard_form import StandardForm

__version__ = "0.1.0"

check_installed_layout(__name__, __path__)

# Heavier parts load on first use, so ``import policyopt`` stays light.
_LAZY = {  # name: the module that defines it
    "RoundMechanism": "policyopt.mechanism",
    "RoundPipeline": "policyopt.placement",
    "simulate": "policyopt.sim",
    "SimConfig": "policyopt.sim",
    "load_gavel": "policyopt.data",
    "load_example": "policyopt.examples",
    "load_plugins": "policyopt.policy",
}
__getattr__, __dir__ = lazy_exports(__name__, _LAZY, globals())

__all__ = [
    "AllocationSpace", "PairPruning",
    "AlignmentError", "InfeasibleError", "InputError", "ModelingError", "PolicyOptError", "SolverError",
    "SolverNotAvailableError", "UnknownNameError",
    "Constraint", "IndexSet", "LinExpr", "Model", "Variable",
    "LPPolicy", "Option", "Policy", "get_policy", "list_policies", "register_policy",
    "Cluster", "Colocation", "Entity", "Job", "Problem", "TypeColocation", "WorkerType",
    "PolicyResult", "SolveResult", "Status", "Timings",
    "solve", "Feature", "SolverOptions", "available_solvers", "get_solver", "register_solver", "StandardForm",
    "register_space", "pop", *_LAZY,
]
