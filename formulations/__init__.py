"""The policy library. Importing this package registers every policy by name.

Each module is written only against the public ``policyopt`` modeling API
(:class:`~policyopt.allocation.AllocationSpace`, :class:`~policyopt.modeling.Model`,
:class:`~policyopt.policy.LPPolicy`, :func:`~policyopt.policy.register_policy`).
"""
from . import max_min_fairness  # noqa: F401

__all__ = ["max_min_fairness"]
