"""The stateless solve (``POST /v1/solve``): problem → policy (optionally under POP) → result JSON.

* :func:`parse_problem` — the interchange problem, or a reconfiguration problem when it has a
  ``reconfig`` section (:func:`policyopt.problem.problem_from_any` routes on the key, as
  ``policyopt solve --input`` does); errors name the field under ``problem.``.
* :func:`wrap_pop` — ``pop(policy, k, seed, parallel=False)``: the ``k`` groups are solved one after
  another in the request's thread. Forking worker processes from the server is avoided on purpose:
  the server is multi-threaded (uvicorn's event loop, the thread pool running requests, HiGHS's
  threads), and ``fork`` copies only the calling thread, so a lock held by another thread at that
  moment stays locked in the child forever; POP's parallel phase also hands the forked workers
  their work through one module-level slot, which two concurrent requests would overwrite.

No web-framework imports: usable without the ``service`` extra.
"""
from __future__ import annotations

from typing import Any

from policyopt.errors import InputError
from policyopt.policy import Policy
from policyopt.problem import Problem, problem_from_any

from .validation import check_json_numbers, prefixed

__all__ = ["parse_problem", "wrap_pop"]


def parse_problem(raw: Any, reconfig: bool) -> Problem:
    """The problem of a request (``raw`` = its JSON object); ``reconfig``: it has a ``reconfig``
    section. The core's parser checks every number of the interchange fields against the one
    magnitude range (:data:`policyopt.schema.MAGNITUDE`); a reconfiguration problem is first walked
    for integers beyond ±2**63 (its section's own parser checks its quantities). Every error is an
    ``InputError`` whose field starts with ``problem``."""
    if reconfig:  # integers that overflow; the section's own parser checks its ranges
        check_json_numbers(raw, "problem")
    try:
        return problem_from_any(raw) if reconfig else Problem.from_dict(raw)
    except InputError as exc:
        raise prefixed(exc, "problem") from None


def wrap_pop(policy: Policy, k: int | None, seed: int | None, n_jobs: int | None = None,
             min_jobs_per_part: int = 32) -> Policy:
    """``policy`` under POP with ``k`` groups and partition seed ``seed`` (default 0), solved
    sequentially (module docstring); ``policy`` itself when ``k`` is None. A policy whose objective
    does not recombine over groups (``pop_combine`` None, e.g. ``hierarchical``) is an
    ``InputError`` on ``pop_k``; a seed without ``pop_k`` is an ``InputError`` on ``seed``; so is a
    ``k`` leaving fewer than ``min_jobs_per_part`` jobs a part (given ``n_jobs``; the server's
    ``Limits.min_jobs_per_pop_part``). The policy's
    ``time_limit`` holds for the whole request: each of the ``k`` groups, solved one after another,
    gets ``time_limit / k``."""
    if k is None:
        if seed is not None:
            raise InputError("seed", seed, "is the seed of POP's partition: give it only with pop_k")
        return policy
    if n_jobs is not None and k > 1:
        cap = max(1, n_jobs // max(1, min_jobs_per_part))
        if k > cap:
            raise InputError("pop_k", k, f"at most {cap} for {n_jobs} jobs: POP helps only with at least "
                                         f"{min_jobs_per_part} jobs a part (give pop_k <= {cap}, or leave it out)")
    from policyopt.pop import pop

    limit = policy.config.get("time_limit")
    if limit is not None and k > 1:
        from policyopt.policy import get_policy

        policy = get_policy(policy.name, **{**policy.config, "time_limit": float(limit) / k})
    try:
        return pop(policy, k=k, seed=0 if seed is None else seed, parallel=False)
    except InputError as exc:
        if exc.field == "policy":
            raise InputError("pop_k", k,
                             f"policy {policy.name!r} cannot be partitioned by POP: {exc.problem}") from None
        raise
