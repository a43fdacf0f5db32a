"""Measuring the estimators against Gavel's measured throughputs (used by the benchmark and tests).

* :func:`hide_pairs` — hide a fraction of the pair measurements (both orientations of a pair, and
  pairs recorded infeasible alike) per worker type, seeded.
* :func:`holdout_errors` — fit on the rest, predict the hidden cells: absolute error of the
  normalized throughput and relative error of the raw throughput ``N̂·alone`` vs ``N·alone`` on the
  hidden *feasible* cells, plus feasibility predictions on all hidden cells.
* :func:`cold_start_errors` — new jobs: the job types are split into folds; a fold's types keep only
  a *fingerprint* (``m`` random co-runners per worker type) and the rest of their rows and columns
  is predicted.
* :func:`online_curve` — a new job observed against more and more co-runners through
  :meth:`~.colocation.ColocationEstimator.observe` (warm-started refresh): error on its remaining cells.
* :func:`policy_effect` — space-sharing ``max_min_fairness`` solved with the estimated table, its
  allocation evaluated under the *true* throughputs (:func:`true_objective`), vs the allocation
  computed from the true table (workload and hidden cells: :func:`policy_setup`).
* :func:`policy_online` — the same, closed-loop: the pairs a round's allocation packs are observed
  and folded into the estimator before the next round.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ..allocation import AllocationSpace, PairPruning
from ..errors import InputError
from ..problem import Cluster, Problem
from .colocation import ColocationEstimator, gavel_arrays, pair_groups
from .problem_fill import estimate_problem

__all__ = ["hide_pairs", "hide_new_types", "policy_setup", "holdout_errors", "cold_start_errors",
           "online_curve", "true_pair_data", "true_throughputs", "true_normalized", "true_objective",
           "infeasible_pair_time", "policy_effect", "policy_online", "summarize"]


def hide_pairs(known: np.ndarray, fraction: float, seed: int) -> np.ndarray:
    """``(K, W, K)`` bool: the cells of ``round(fraction · n_w)`` random known pairs of each worker type
    (a pair's two orientations together)."""
    if not 0 < fraction < 1:
        raise InputError("fraction", fraction, "must be in (0, 1)")
    K, W, _ = known.shape
    G = pair_groups(K, W)
    rng = np.random.default_rng(seed)
    hidden_groups = []
    for w in range(W):
        g = np.unique(G[:, w, :][known[:, w, :]])
        hidden_groups.append(rng.permutation(g)[: int(round(fraction * g.size))])
    return np.isin(G, np.concatenate(hidden_groups)) & known


def hide_new_types(known: np.ndarray, new: np.ndarray, fingerprint: int, rng: np.random.Generator) -> np.ndarray:
    """``(K, W, K)`` bool: every known cell touching a *new* job type (``new``: bool per type) except its
    fingerprint — ``fingerprint`` random non-new co-runners per worker type (both orientations kept)."""
    K, W, _ = known.shape
    refs = np.flatnonzero(~new)
    touch = new[:, None, None] | new[None, None, :]
    keep = np.zeros((K, W, K), bool)
    for j in np.flatnonzero(new):
        for w in range(W):
            pick = rng.permutation(refs[known[j, w, refs]])[:fingerprint]
            keep[j, w, pick] = keep[pick, w, j] = True
    return touch & ~keep & known


def summarize(errors: np.ndarray) -> dict[str, float]:
    """``{n, median, p90, max, mean}`` of an error sample."""
    e = np.asarray(errors, dtype=np.float64)
    if e.size == 0:
        return {"n": 0, "median": float("nan"), "p90": float("nan"), "max": float("nan"), "mean": float("nan")}
    return {"n": int(e.size), "median": float(np.median(e)), "p90": float(np.percentile(e, 90)),
            "max": float(e.max()), "mean": float(e.mean())}


def _errors(P: np.ndarray, V: np.ndarray, cells: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Absolute error of normalized throughput; relative error of raw throughput (= |N̂−N|/N)."""
    abs_err = np.abs(P - V)[cells]
    return abs_err, abs_err / V[cells]


def holdout_errors(gavel: Any, fraction: float, seed: int, estimators: Mapping[str, Mapping[str, Any]],
                   methods: Sequence[str] = ("completed", "nearest", "row_mean", "col_mean", "bias"),
                   worker_types: Sequence[str] = ("k80", "p100", "v100")) -> dict[str, Any]:
    """Per estimator configuration (``name → ColocationEstimator options``) and method: errors on the
    hidden feasible cells; ``feasibility``: accuracy / infeasible pairs caught / false alarms."""
    labels, wts, V, M, I, A = gavel_arrays(gavel, 1, worker_types)
    H = hide_pairs(M | I, fraction, seed)
    test = H & M
    out: dict[str, Any] = {"hidden_cells": int(test.sum()), "hidden_infeasible": int((H & I).sum()), "errors": {}}
    for name, opts in estimators.items():
        est = ColocationEstimator.from_arrays(labels, wts, V, M & ~H, I & ~H, A, **{"seed": seed, **opts}).fit()
        for m in methods:
            out["errors"][(name, m)] = _errors(est.predict_matrix(m), V, test)
        out.setdefault("params", {})[name] = est.params
        for rule in ("threshold", "nearest", "all"):
            F = est.predict_feasible(rule)
            out.setdefault("feasibility", {})[(name, rule)] = {
                "accuracy": float((F[H] == M[H]).mean()),
                "infeasible_caught": int((~F & I & H).sum()),
                "false_alarms": int((~F & M & H).sum())}
    return out


def cold_start_errors(gavel: Any, fingerprint: int, seed: int, options: Mapping[str, Any], folds: int = 5,
                      methods: Sequence[str] = ("completed", "nearest", "row_mean", "col_mean"),
                      worker_types: Sequence[str] = ("k80", "p100", "v100")) -> dict[str, np.ndarray]:
    """New jobs known only by a fingerprint of ``fingerprint`` co-runners per worker type (module
    docstring); errors on their other feasible cells (their rows and columns), per method."""
    labels, wts, V, M, I, A = gavel_arrays(gavel, 1, worker_types)
    K, W, _ = V.shape
    rng = np.random.default_rng(seed)
    fold_of = rng.permutation(K) % folds
    known = M | I
    errs: dict[str, list[np.ndarray]] = {m: [] for m in methods}
    for f in range(folds):
        hidden = hide_new_types(known, fold_of == f, fingerprint, rng)
        est = ColocationEstimator.from_arrays(labels, wts, V, M & ~hidden, I & ~hidden, A,
                                              **{"seed": seed, **options}).fit()
        test = hidden & M
        for m in methods:
            errs[m].append(np.abs(est.predict_matrix(m) - V)[test])
    return {m: np.concatenate(v) for m, v in errs.items()}


def online_curve(gavel: Any, seed: int, options: Mapping[str, Any], targets: int = 6,
                 steps: Sequence[int] = (2, 4, 8, 16), methods: Sequence[str] = ("completed", "nearest"),
                 worker_types: Sequence[str] = ("k80", "p100", "v100")) -> dict[str, np.ndarray]:
    """Mean absolute error on a new job's unobserved cells after ``s`` observed pairs per worker type,
    ``s`` in ``steps``; pairs arrive one at a time through ``observe`` (warm-started refresh). The
    reference fit (with validation) excludes the target entirely. Returns ``method → (steps,)`` means
    over ``targets`` random job types."""
    labels, wts, V, M, I, A = gavel_arrays(gavel, 1, worker_types)
    K, W, _ = V.shape
    rng = np.random.default_rng(seed)
    curves = {m: np.zeros(len(steps)) for m in methods}
    chosen = rng.permutation(K)[:targets]
    for j in chosen:
        touch = np.zeros((K, W, K), bool)
        touch[j] = True
        touch[:, :, j] = True
        est = ColocationEstimator.from_arrays(labels, wts, V, M & ~touch, I & ~touch, A,
                                              **{"seed": seed, **options}).fit()
        order = [rng.permutation(np.flatnonzero((M | I)[j, w])) for w in range(W)]
        seen = 0
        for si, s in enumerate(steps):
            for step in range(seen, s):
                for w in range(W):
                    if step < order[w].size:
                        k = int(order[w][step])
                        est.observe(labels[j], labels[k], wts[w], float(V[j, w, k]) if M[j, w, k] else 0.0,
                                    float(V[k, w, j]) if M[k, w, j] else 0.0)
            seen = s
            test = touch & M & ~est.measured & ~est.infeasible
            for m in methods:
                curves[m][si] += float(np.abs(est.predict_matrix(m) - V)[test].mean()) / len(chosen)
    return curves


# ---------------------------------------------------------------------- policy effect
def true_pair_data(result: Any, true_problem: Problem) -> tuple[np.ndarray, np.ndarray]:
    """``(T, Tp)`` of ``true_problem`` laid out like ``result.space`` (alone ``T[job, config]``, pair
    ``Tp[pair row, config, side]``; 0 for a pair row the true data says cannot run). Jobs must
    match by id and order."""
    space: AllocationSpace = result.space
    if space is None or result.X is None:
        raise InputError("result", result.policy, "has no allocation array (X, space)")
    if [j.id for j in true_problem.jobs] != space.jobs.labels.tolist():
        raise InputError("true_problem.jobs", len(true_problem.jobs), "must hold the result's jobs in the same order")
    truth = AllocationSpace(true_problem, space_sharing=True, pruning=PairPruning(threshold=0.0))
    if truth.configs.labels.tolist() != space.configs.labels.tolist():
        raise InputError("true_problem.configurations", truth.configs.labels.tolist(),
                         "must match the result's configurations")
    n = len(space.jobs)
    Tp = np.zeros_like(space.Tp)
    if space.num_pairs and truth.num_pairs:
        key_t = truth.pair_jobs[:, 0] * n + truth.pair_jobs[:, 1]
        order = np.argsort(key_t)
        key_s = space.pair_jobs[:, 0] * n + space.pair_jobs[:, 1]
        pos = np.clip(np.searchsorted(key_t[order], key_s), 0, key_t.size - 1)
        hit = key_t[order][pos] == key_s
        Tp[hit] = truth.Tp[order[pos[hit]]]
    return truth.T, Tp


def true_throughputs(result: Any, true_problem: Problem) -> np.ndarray:
    """Each job's ``thr(m)`` when ``result``'s allocation runs under ``true_problem``'s throughputs:
    single slots use the true alone throughputs, pair slots the true pair throughputs (0 where the
    true data says the pair cannot run)."""
    T, Tp = true_pair_data(result, true_problem)
    return result.space.throughput_values(result.X, T, Tp)


def infeasible_pair_time(result: Any, true_problem: Problem) -> float:
    """Total time fraction (summed over pair slots) the allocation gives to pairs that truly cannot run."""
    _, Tp = true_pair_data(result, true_problem)
    space = result.space
    pairs = result.X[len(space.jobs):]
    if pairs.size == 0:
        return 0.0
    bad = space.pair_mask & ((Tp[:, :, 0] <= 0) | (Tp[:, :, 1] <= 0))
    return float(pairs[bad].sum())


def true_normalized(result: Any, true_problem: Problem) -> np.ndarray:
    """``sf_m·thr(m)/(w_m·thr(m, X_equal))`` per job under the true throughputs (max-min fairness's terms)."""
    space: AllocationSpace = result.space
    thr = true_throughputs(result, true_problem)
    return thr * space.scale / (space.weights * space.equal_share_throughput(space.T))


def true_objective(result: Any, true_problem: Problem) -> float:
    """Max-min fairness objective ``min_m sf_m·thr(m)/(w_m·thr(m, X_equal))`` under the true throughputs."""
    return float(np.min(true_normalized(result, true_problem)))


def policy_setup(gavel: Any, n_jobs: int, fraction: float, seed: int, *, new_types: int = 0,
                 fingerprint: int = 3, gpus_per_type: int | None = None) -> tuple[Any, ...]:
    """The workload of :func:`policy_effect` / :func:`policy_online`: ``n_jobs`` single-GPU jobs of random
    Gavel types (seeded) on ``gpus_per_type`` (default ``n_jobs // 4``) K80, P100 and V100 GPUs, and
    the hidden cells — a ``fraction`` of the pair measurements, or with ``new_types > 0`` those of
    ``new_types`` random job types but a fingerprint of ``fingerprint`` co-runners per worker type.
    Returns ``(arrays, hidden, truth, measured)``: :func:`gavel_arrays`'s tuple, the hidden mask, the
    true problem and the problem with the hidden pairs left out of its table."""
    arrays = gavel_arrays(gavel, 1)
    labels, wts, V, M, I, A = arrays
    rng = np.random.default_rng(seed)
    if new_types:
        new = np.zeros(len(labels), bool)
        new[rng.permutation(len(labels))[:new_types]] = True
        H = hide_new_types(M | I, new, fingerprint, np.random.default_rng(seed + 1))
    else:
        H = hide_pairs(M | I, fraction, seed)
    types = rng.choice(gavel.types_with_scale(1), n_jobs)
    per = gpus_per_type or max(n_jobs // 4, 1)
    truth = gavel.problem(types, Cluster.from_counts({w: per for w in wts}), colocated="types")
    measured = _without_hidden(truth, labels, wts, H)
    return arrays, H, truth, measured


def _without_hidden(truth: Problem, labels: list[str], wts: list[str], hidden: np.ndarray) -> Problem:
    """``truth`` with the type colocations of hidden cells removed from its table."""
    lpos = {t: i for i, t in enumerate(labels)}
    wpos = {w: i for i, w in enumerate(wts)}
    table = tuple(tc for tc in truth.colocated_types
                  if tc.worker_type not in wpos or tc.job_types[0] not in lpos or tc.job_types[1] not in lpos
                  or not hidden[lpos[tc.job_types[0]], wpos[tc.worker_type], lpos[tc.job_types[1]]])
    return Problem(truth.cluster, truth.jobs, (), truth.entities, table)


def policy_effect(gavel: Any, n_jobs: int, fraction: float, seed: int, options: Mapping[str, Any],
                  variants: Sequence[tuple[str, float, float]] = (("completed", 0.0, 0.5), ("nearest", 0.0, 0.5)),
                  solver_options: Mapping[str, Any] | None = None, **setup: Any) -> dict[str, dict[str, float]]:
    """Space-sharing max-min fairness on the :func:`policy_setup` workload (``setup``: its keyword
    options). Each allocation is evaluated under the true throughputs; returned per allocation,
    relative to the allocation computed from the true table: ``min`` (the max-min objective) and
    ``mean`` (mean normalized throughput) ratios, ``believed`` (the objective the policy reported,
    relative to the true optimum) and ``infeasible_time`` (:func:`infeasible_pair_time`).
    Allocations: ``measured_only`` (hidden pairs simply missing), ``"<method>"`` /
    ``"<method>-m<margin>-p<cut-off>"`` per estimation variant ``(method, margin, infeasible_above)``
    (see :func:`~.problem_fill.estimate_problem`), and ``no_sharing``."""
    import policyopt

    (labels, wts, V, M, I, A), H, truth, measured = policy_setup(gavel, n_jobs, fraction, seed, **setup)
    est = ColocationEstimator.from_arrays(labels, wts, V, M & ~H, I & ~H, A, **{"seed": seed, **options}).fit()
    sopt = dict(solver_options or {})
    ref = policyopt.solve(truth, "max_min_fairness", space_sharing=True, **sopt)
    ref_terms = true_normalized(ref, truth)

    def score(res: Any) -> dict[str, float]:
        terms = true_normalized(res, truth)
        return {"min": float(terms.min() / ref_terms.min()), "mean": float(terms.mean() / ref_terms.mean()),
                "believed": float(res.objective) / float(ref_terms.min()),
                "infeasible_time": infeasible_pair_time(res, truth)}

    out = {"true_opt": {"min": 1.0, "mean": 1.0, "believed": 1.0, "infeasible_time": 0.0,
                        "objective": float(ref_terms.min())}}
    out["measured_only"] = score(policyopt.solve(measured, "max_min_fairness", space_sharing=True, **sopt))
    for method, margin, cut in variants:
        p = estimate_problem(measured, est, method, margin=margin, infeasible_above=cut)
        name = method if (margin, cut) == (0, 0.5) else f"{method}-m{margin:g}-p{cut:g}"
        out[name] = score(policyopt.solve(p, "max_min_fairness", space_sharing=True, **sopt))
    out["no_sharing"] = score(policyopt.solve(truth, "max_min_fairness", **sopt))
    return out


def policy_online(gavel: Any, n_jobs: int, fraction: float, seed: int, options: Mapping[str, Any],
                  method: str = "completed", margin: float = 0.0, infeasible_above: float = 0.5, rounds: int = 4,
                  solver_options: Mapping[str, Any] | None = None, **setup: Any) -> list[dict[str, float]]:
    """Estimate → schedule → observe, as a scheduler would run it: each round solves space-sharing
    max-min fairness on the estimated table, then every pair of job types the allocation packs and
    whose measurement was hidden is *observed* (its true normalized throughputs, or infeasibility,
    fed to :meth:`~.colocation.ColocationEstimator.observe`) and the table re-estimated. Returns per
    round the true objective relative to the true optimum (``min``), ``believed``,
    ``infeasible_time`` and the number of pairs observed so far (workload: :func:`policy_setup`)."""
    import policyopt

    (labels, wts, V, M, I, A), H, truth, _ = policy_setup(gavel, n_jobs, fraction, seed, **setup)
    hidden = H.copy()
    sopt = dict(solver_options or {})
    ref = true_objective(policyopt.solve(truth, "max_min_fairness", space_sharing=True, **sopt), truth)
    est = ColocationEstimator.from_arrays(labels, wts, V, M & ~H, I & ~H, A, **{"seed": seed, **options}).fit()
    lpos = {t: i for i, t in enumerate(labels)}
    job_row = np.array([lpos[j.job_type] for j in truth.jobs], np.int64)
    out = []
    observed = 0
    for r in range(rounds + 1):
        measured = _without_hidden(truth, labels, wts, hidden)
        problem = estimate_problem(measured, est, method, margin=margin, infeasible_above=infeasible_above)
        res = policyopt.solve(problem, "max_min_fairness", space_sharing=True, **sopt)
        believed = float("nan") if res.objective is None else float(res.objective)
        out.append({"round": float(r), "min": true_objective(res, truth) / ref, "believed": believed / ref,
                    "infeasible_time": infeasible_pair_time(res, truth), "observed_pairs": float(observed)})
        if r == rounds:
            break
        sp = res.space
        kk, kc = np.nonzero(res.X[len(sp.jobs):] > 1e-7)
        cfg = sp.configs.labels
        for k, c in sorted(set(zip(kk.tolist(), kc.tolist()))):
            if cfg[c] not in wts:
                continue
            a, b, w = job_row[sp.pair_jobs[k, 0]], job_row[sp.pair_jobs[k, 1]], wts.index(cfg[c])
            if hidden[a, w, b]:
                est.observe(labels[a], labels[b], wts[w], float(V[a, w, b]) if M[a, w, b] else 0.0,
                            float(V[b, w, a]) if M[b, w, a] else 0.0)
                hidden[a, w, b] = hidden[b, w, a] = False
                observed += 1
    return out
