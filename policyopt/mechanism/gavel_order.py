"""The per-round walk order of Gavel's scheduler (``RoundMechanism(ordering="gavel")``).

Gavel's ``_schedule_jobs_on_workers`` (``enable_global_queue=False``, its default) walks the worker
types one after another; within type ``c`` its entries are sorted by ``(priority, deficit, X)``,
largest first, ties in job order. With ``r[k, c]`` the seconds combination ``k`` ran on ``c`` since the
reset, ``L`` the round length and ``K`` the number of combinations at the reset:

    job_time[k, c]  = L / 2 + r[k, c]                  # every job restarts at L/2 at a reset
    worker_time[c]  = K * L / 2 + sum_k r[k, c]        # all job-time run on c since the reset
    fraction[k, c]  = job_time[k, c] / worker_time[c]  # k's share of the job-time on c
    p[k, c] = X[k, c] / fraction[k, c]   if X > 0      (X * 1e9 if the fraction is 0)
            = 0                          if X = 0      (zero priority: taken last, if it can run there)

Within a type only ``X / (L/2 + r)`` matters (``worker_time`` is common to its entries); the
``L / 2`` start makes a job that has not run yet since the reset rank by its ``X`` alone. The
deficit ``D`` (carried across resets, unclipped) breaks ties only. Entries of zero priority are
the type's *work-conserving* tail: idle workers go to jobs the allocation gives no time there.
"""
from __future__ import annotations

import random
from typing import Sequence

import numpy as np

__all__ = ["GAVEL_TYPE_ORDER", "ORDERINGS", "gavel_priorities", "gavel_rules", "gavel_type_base", "gavel_walk_order",
           "shuffled_type_order"]

#: values of ``RoundMechanism(ordering=...)``
ORDERINGS = ("default", "gavel")


def gavel_priorities(x: np.ndarray, received: np.ndarray, round_length: float) -> np.ndarray:
    """``p[k, c]`` as in the module docstring (``x`` already masked to the active combinations)."""
    half = 0.5 * float(round_length)
    worker_time = x.shape[0] * half + received.sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = (half + received) / worker_time[None, :]
        prio = np.where(fraction > 0, x / np.where(fraction > 0, fraction, 1.0), x * 1e9)
    prio[x <= 0] = 0.0
    return prio


def gavel_walk_order(eligible: np.ndarray, prio: np.ndarray, deficit: np.ndarray, x: np.ndarray,
                     type_order: Sequence[int]) -> np.ndarray:
    """Flat indices ``k * C + c`` of the eligible entries in walk order: the types in ``type_order``
    (types not in it last), one after another; within a type by priority, then deficit, then ``X``
    (largest first), then ``k``.

    One ``numpy.lexsort`` over the eligible entries (the type's position is the primary key)."""
    nc = eligible.shape[1]
    order = np.asarray(type_order, dtype=np.int64)
    rank = np.full(nc, order.size, dtype=np.int64)
    rank[order] = np.arange(order.size)
    flat = np.flatnonzero(eligible.ravel())
    ks, cs = np.divmod(flat, nc)
    return flat[np.lexsort((ks, -x.ravel()[flat], -deficit.ravel()[flat], -prio.ravel()[flat], rank[cs]))]


#: the worker types of Gavel's scheduler, in the order it lists them before a shuffle
GAVEL_TYPE_ORDER = ("v100", "p100", "k80")


def gavel_type_base(counts: Sequence[int], names: Sequence[str]) -> list[int]:
    """The types Gavel's scheduler walks (``_schedule_jobs_on_workers``), in its order before a shuffle:
    only those with workers (it drops the others before shuffling, which changes the shuffle), Gavel's
    ``v100, p100, k80`` first in that order, then any other type in ``names`` order."""
    known = {t: i for i, t in enumerate(GAVEL_TYPE_ORDER)}
    have = [c for c in range(len(names)) if counts[c] > 0]
    return sorted(have, key=lambda c: (known.get(names[c], len(known)), c))


def shuffled_type_order(rng: random.Random, base: Sequence[int]) -> list[int]:
    """A fresh copy of ``base`` shuffled by ``rng``, as Gavel shuffles its list of worker types every
    round for heterogeneity-agnostic policies (``random.Random(seed + 5)``, its ``_worker_type_shuffler``)."""
    order = list(base)
    rng.shuffle(order)
    return order


def gavel_rules(ordering: str, policy: str) -> dict[str, bool]:
    """The walk options Gavel's scheduler takes under the policy named ``policy`` here, with
    ``ordering="gavel"`` (else both off / on as the default ordering has them):

    - ``shuffle_types``: Gavel shuffles its worker types every round for every policy whose own name
      has neither ``Perf`` nor ``Packing`` (``_schedule_jobs_on_workers``): the heterogeneity-agnostic
      ones (``*_agnostic``) and ``isolated`` (Gavel's ``Isolated``);
    - ``zero_priority``: its walk skips entries of zero priority for FIFO policies (``FIFO``,
      ``FIFO_Perf``: ``fifo``, ``fifo_agnostic`` here), so installed jobs run where their ``X`` is 0
      under every other policy only."""
    gavel = ordering == "gavel"
    return {"shuffle_types": gavel and ("agnostic" in policy or policy == "isolated"),
            "zero_priority": not policy.startswith("fifo")}
