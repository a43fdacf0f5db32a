"""The policy library. Importing this package registers every policy by name.

Every module in this package is imported (sorted by name, so registration order is stable); each
registers its policies with :func:`policyopt.policy.register_policy`. Modules are written only
against the public ``policyopt`` modeling API (:class:`~policyopt.allocation.AllocationSpace`,
:class:`~policyopt.modeling.Model`, :class:`~policyopt.policy.LPPolicy`).
"""
from __future__ import annotations

import importlib
import pkgutil

__all__: list[str] = []

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
        __all__.append(_info.name)
