"""What :mod:`policyopt.reconfig` registers with the core (:mod:`policyopt.extensions`).

* the problem kind ``"reconfig"``: a problem with a ``reconfig`` section is a
  :class:`~policyopt.reconfig.spec.ReconfigProblem` (:func:`~policyopt.reconfig.spec.problem_from_dict`);
* the result section ``sla_report``: every guaranteed job's SLA (met or not) of a result solved over
  a :class:`~policyopt.reconfig.space.MultiResourceSpace`;
* (on import of the package) the space for ``ReconfigProblem`` and the policies ``rubick_greedy``,
  ``synergy_like``, ``sia_like``, ``fluid_srpt``, ``fluid_srpt_floor``.

Discovery imports this module, which imports the package.
"""
from __future__ import annotations

from typing import Any

from policyopt.extensions import register_problem_kind, register_result_section
from policyopt.result import PolicyResult

from .spec import problem_from_dict

__all__: list[str] = []


def _sla_report(result: PolicyResult) -> list[dict[str, Any]] | None:
    report = getattr(result.space, "sla_report", None)
    return None if report is None else list(report)


register_problem_kind("reconfig", problem_from_dict)
register_result_section("sla_report", _sla_report)
