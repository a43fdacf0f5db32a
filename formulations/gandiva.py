"""Gandiva baseline (as Gavel reimplemented it): random packing, equal time shares.

If the jobs' total demand ``Σ_m sf_m`` fits the cluster, or no pairs are available, every job is its
own combination. Otherwise (with ``space_sharing=True``) jobs are paired at random within each
scale factor (a seeded random perfect matching of each scale-factor group); a pair is kept only if
it is a viable pair row of the allocation space — colocated throughputs given and non-zero and a
normalized combined throughput ``T_a^pair/T_a + T_b^pair/T_b`` above ``pair_threshold`` (≥ 1, so
packing never loses throughput; Gandiva drops pairs whose normalized sum falls below 1) — and
otherwise both jobs stay alone. Then the ``K`` combinations split the cluster equally: combination
``r`` gets ``count_t/(K·sf_r)`` of type ``t`` on its best placement there (for a pair: the
configuration with the largest normalized combined throughput), rows scaled down to sum to at most
1. Capacity holds by construction. Objective ``None``.

**Across calls, as Gavel's Gandiva** (``keep_pairs``, default on): the policy object remembers each
job's combination (its partner, or none) and keeps it while both jobs are present and the pair is
still a viable pair row; only jobs without a combination are paired (at random, from a generator
seeded once with ``seed`` and advanced call by call), and the rest become single combinations that
persist too. When demand fits the cluster no packing is used and the memory is left as it is. A
fresh object (``policyopt.solve``) has no memory.

Without pairs the equal split *is* the space's isolated allocation
(:meth:`~policyopt.allocation.AllocationSpace.isolated_allocation`; identical to the formula above
in the base space), so over any allocation space — e.g. execution-plan configurations with cores,
host memory, quotas and guaranteed jobs — Gandiva's equal time shares are the space's own equal
share, within every row. With pairs, a combination's share on type ``t`` is
``count_t/(K·w(r, c))``, ``w`` the workers its slot occupies
(:meth:`~policyopt.allocation.AllocationSpace.slot_workers`); should a space add rows that share
violates, the nearest allocation within every row is returned
(:func:`._common.nearest_feasible`, ``extra["projected"]``).
"""
from __future__ import annotations

import time

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings

from ._common import nearest_feasible


def random_pairs(space: AllocationSpace, rng: np.random.Generator, candidates: np.ndarray | None = None
                 ) -> np.ndarray:
    """Indices of pair rows (into ``space.pair_jobs``) chosen by a random matching per scale factor
    among ``candidates`` (a bool mask over jobs; default every job)."""
    n = len(space.jobs)
    if not space.num_pairs:
        return np.zeros(0, np.int64)
    cand = np.ones(n, bool) if candidates is None else candidates
    key_of_pair = space.pair_jobs[:, 0] * n + space.pair_jobs[:, 1]
    order = np.argsort(key_of_pair)
    chosen = []
    for sf in np.unique(space.scale):
        members = rng.permutation(np.flatnonzero((space.scale == sf) & cand))
        m = members.size // 2 * 2
        a, b = members[0:m:2], members[1:m:2]
        keys = np.minimum(a, b) * n + np.maximum(a, b)
        pos = np.searchsorted(key_of_pair[order], keys)
        pos = np.minimum(pos, order.size - 1)
        hit = key_of_pair[order[pos]] == keys
        chosen.append(order[pos[hit]])
    return np.concatenate(chosen) if chosen else np.zeros(0, np.int64)


@register_policy("gandiva")
class Gandiva(Policy):
    """Gandiva baseline: random pairing (kept if normalized sum ≥ 1) when oversubscribed, equal time shares."""

    pop_combine = "sum"  # how POP recombines sub-problem objectives

    options = (Option("seed", int, 0, "seed of the random pairing"),
               Option("keep_pairs", bool, True, "keep each job's combination (pair or single) across calls of "
                      "this policy object while it stays viable (Gavel's Gandiva)"))

    def _pairs(self, space: AllocationSpace) -> np.ndarray:
        """Pair rows for this call: the remembered combinations still viable, plus a random pairing
        of the jobs that have none (see the module docstring)."""
        if not self.config["keep_pairs"]:
            return random_pairs(space, np.random.default_rng(self.config["seed"]))
        rng = self.__dict__.setdefault("_rng", np.random.default_rng(self.config["seed"]))
        memory: dict[str, str | None] = self.__dict__.setdefault("_combos", {})
        n = len(space.jobs)
        labels = np.asarray(space.jobs.labels, dtype=str)
        a, b = space.pair_jobs[:, 0], space.pair_jobs[:, 1]
        partner_of = {str(k): v for k, v in memory.items()}
        want = np.array([partner_of.get(str(labels[i]), "") or "" for i in a.tolist()], dtype=str) \
            if space.num_pairs else np.zeros(0, dtype=str)
        kept_rows = np.flatnonzero(want == labels[b]) if space.num_pairs else np.zeros(0, np.int64)
        in_pair = np.zeros(n, bool)
        in_pair[a[kept_rows]] = in_pair[b[kept_rows]] = True
        single = np.isin(labels, np.array([k for k, v in memory.items() if v is None], dtype=str)) & ~in_pair
        fresh = ~(in_pair | single)
        new_rows = random_pairs(space, rng, fresh)
        rows = np.concatenate([kept_rows, new_rows])
        paired = np.zeros(n, bool)
        paired[space.pair_jobs[rows].ravel()] = True
        memory.clear()
        for r in rows.tolist():
            x, y = str(labels[space.pair_jobs[r, 0]]), str(labels[space.pair_jobs[r, 1]])
            memory[x], memory[y] = y, x
        memory.update({str(j): None for j in labels[~paired].tolist()})
        return rows

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        t0 = time.perf_counter()
        space = self.make_space(problem)
        n, C = len(space.jobs), len(space.configs)
        pairs = np.zeros(0, np.int64)
        if space.scale.sum() > space.counts.sum() and space.num_pairs:
            pairs = self._pairs(space)
        if pairs.size == 0:  # every job alone: the space's equal share (its isolated allocation)
            X = space.full_from_single(space.isolated_allocation())
            timings.build = time.perf_counter() - t0
            return self.result(space, X, Status.OPTIMAL, None, "none", timings, pairs_used=0)
        paired_jobs = space.pair_jobs[pairs].ravel()
        singles = np.setdiff1d(np.arange(n), paired_jobs)
        rows = np.concatenate([singles, n + pairs])
        K = rows.size
        X = np.zeros((len(space.rows), C))
        best = _best_config_per_type(space, rows)  # (K × types), -1 where the row cannot run there
        for t in range(len(space.worker_types)):
            ok = best[:, t] >= 0
            X[rows[ok], best[ok, t]] = (space.counts[t] / K) / space.slot_workers(rows[ok], best[ok, t])
        tot = X.sum(axis=1)
        over = tot > 1
        X[over] /= tot[over, None]
        timings.build = time.perf_counter() - t0
        extra: dict[str, object] = {"pairs_used": int(pairs.size)}
        status, msg = Status.OPTIMAL, ""
        if space.check(X):  # rows beyond time and capacity (none in the base space)
            X, dist, status, msg = nearest_feasible(self, space, X, timings)
            extra.update(projected=True, projection_distance=dist)
        return self.result(space, X, status, None, "none", timings, msg, **extra)


def _best_config_per_type(space: AllocationSpace, rows: np.ndarray) -> np.ndarray:
    """For each row, per physical type, the allowed configuration with the best (normalized) throughput."""
    n = len(space.jobs)
    nt = len(space.worker_types)
    score = np.zeros((rows.size, len(space.configs)))
    single = rows < n
    score[single] = np.where(space.single_mask[rows[single]], space.T[rows[single]], 0.0)
    k = rows[~single] - n
    if k.size:
        a, b = space.pair_jobs[k, 0], space.pair_jobs[k, 1]
        with np.errstate(divide="ignore", invalid="ignore"):
            norm = np.where(space.pair_mask[k], space.Tp[k, :, 0] / space.T[a] + space.Tp[k, :, 1] / space.T[b], 0.0)
        score[~single] = np.nan_to_num(norm)
    best = np.full((rows.size, nt), -1, np.int64)
    best_v = np.zeros((rows.size, nt))
    for c in range(len(space.configs)):
        t = space.config_type[c]
        better = score[:, c] > best_v[:, t]
        best[better, t] = c
        best_v[better, t] = score[better, c]
    return best
