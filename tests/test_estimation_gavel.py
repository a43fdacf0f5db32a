"""Estimators against Gavel's measured throughputs: held-out accuracy vs baselines, linear scaling,
filling a Problem's colocations, evaluating allocations under true throughputs, the CLI.
Skips with a clear reason when ../shared/data/gavel is missing (see conftest.py)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

import policyopt
from policyopt import InputError, Problem, UnknownNameError
from policyopt.estimation import (ColocationEstimator, ScalingModel, estimate_problem, gavel_arrays,
                                  predicted_colocations, scaling_dataset)
from policyopt.estimation.cli import main as cli_main
from policyopt.estimation.evaluation import (hide_pairs, holdout_errors, policy_online, summarize,
                                             true_objective)
from policyopt.problem import Cluster


def test_gavel_arrays_match_the_file(gavel) -> None:  # type: ignore[no-untyped-def]
    labels, wts, V, M, I, A = gavel_arrays(gavel)
    assert len(labels) == 26 and wts == ["k80", "p100", "v100"]
    a, b = labels.index("ResNet-18 (batch size 64)#1"), labels.index("ResNet-18 (batch size 16)#1")
    ia, ib = gavel.type_index("ResNet-18 (batch size 64)", 1), gavel.type_index("ResNet-18 (batch size 16)", 1)
    c = gavel.configs.index("v100")
    assert V[a, 2, b] == pytest.approx(gavel.paired[ia, ib, c, 0] / gavel.alone[ia, c])
    assert V[b, 2, a] == pytest.approx(gavel.paired[ia, ib, c, 1] / gavel.alone[ib, c])
    assert not (M & I).any() and (M == M.transpose(2, 1, 0)).all() and (I == I.transpose(2, 1, 0)).all()
    assert int(I.sum()) == 87 + 20 + 40  # zero pairs in the file (both orientations)


def test_hide_pairs_hides_whole_pairs_per_worker_type(gavel) -> None:  # type: ignore[no-untyped-def]
    _, _, _, M, I, _ = gavel_arrays(gavel)
    H = hide_pairs(M | I, 0.3, seed=0)
    assert (H == H.transpose(2, 1, 0)).all() and not (H & ~(M | I)).any()
    for w in range(3):  # ~30% of each worker type's pairs (upper triangle incl. the diagonal)
        known = np.triu((M | I)[:, w, :]).sum()
        assert abs(np.triu(H[:, w, :]).sum() - 0.3 * known) <= 1
    np.testing.assert_array_equal(H, hide_pairs(M | I, 0.3, seed=0))
    assert (H != hide_pairs(M | I, 0.3, seed=1)).any()


def test_completion_beats_row_and_column_means_on_held_out_pairs(gavel) -> None:  # type: ignore[no-untyped-def]
    r = holdout_errors(gavel, 0.3, seed=0, estimators={"als": {"method": "als"}},
                       methods=("completed", "nearest", "row_mean", "col_mean"))
    med = {m: summarize(r["errors"][("als", m)][0])["median"] for m in ("completed", "nearest", "row_mean", "col_mean")}
    assert med["completed"] < 0.6 * min(med["row_mean"], med["col_mean"])
    assert med["nearest"] < 0.6 * min(med["row_mean"], med["col_mean"])
    assert r["feasibility"][("als", "threshold")]["accuracy"] > r["feasibility"][("als", "all")]["accuracy"]


def test_linear_scaling_against_measured_multi_gpu_throughputs(gavel) -> None:  # type: ignore[no-untyped-def]
    d = scaling_dataset(gavel)
    assert d.models.size > 300 and set(np.unique(d.gpus)) == {2, 4, 8}
    unc = np.char.endswith(d.configs, "_unconsolidated")
    # spread jobs scale worse than consolidated ones, and both worse than linear
    assert np.median(d.ratio[unc]) < np.median(d.ratio[~unc]) < 1.0
    lin = ScalingModel.linear().predict(d.single, d.gpus, d.configs)
    np.testing.assert_allclose(lin, d.gpus * d.single)
    lomo = np.empty_like(lin)
    for m in np.unique(d.models):
        sel = d.models == m
        lomo[sel] = ScalingModel.fit(d, exclude_models=[m]).predict(d.single[sel], d.gpus[sel], d.configs[sel])
    rel = lambda p: np.median(np.abs(p - d.measured) / d.measured)  # noqa: E731
    assert rel(lomo) < 0.6 * rel(lin)


def hidden_problem(gavel, n: int = 32, frac: float = 0.5, seed: int = 0):  # type: ignore[no-untyped-def]
    labels, wts, V, M, I, A = gavel_arrays(gavel)
    H = hide_pairs(M | I, frac, seed)
    types = np.random.default_rng(seed).choice(gavel.types_with_scale(1), n)
    truth = gavel.problem(types, Cluster.from_counts({w: n // 4 for w in wts}), colocated="types")
    hk = {(labels[a], wts[w], labels[b]) for a, w, b in zip(*np.nonzero(H))}
    table = tuple(tc for tc in truth.colocated_types if (tc.job_types[0], tc.worker_type, tc.job_types[1]) not in hk)
    est = ColocationEstimator.from_arrays(labels, wts, V, M & ~H, I & ~H, A, seed=seed).fit()
    return truth, Problem(truth.cluster, truth.jobs, (), truth.entities, table), est


def test_estimate_problem_fills_missing_pairs(gavel) -> None:  # type: ignore[no-untyped-def]
    truth, measured, est = hidden_problem(gavel)
    filled = estimate_problem(measured, est)
    assert filled.colocated_types[: len(measured.colocated_types)] == measured.colocated_types
    added = filled.colocated_types[len(measured.colocated_types):]
    assert len(added) > 0
    true = {(tc.job_types, tc.worker_type): tc.throughputs for tc in truth.colocated_types}
    rel = [abs(p - t) / t for tc in added if (tc.job_types, tc.worker_type) in true
           for p, t in zip(tc.throughputs, true[(tc.job_types, tc.worker_type)])]
    assert len(rel) > 0.8 * len(added) * 2  # most added pairs exist in the truth (few false feasibles)
    assert np.median(rel) < 0.1
    # a margin lowers every estimate; the problem stays valid and solvable
    low = predicted_colocations(measured, est, margin=0.1)
    plain = {(tc.job_types, tc.worker_type): tc.throughputs for tc in added}
    assert 0 < len(low) <= len(added)
    for tc in low:
        assert all(x < y for x, y in zip(tc.throughputs, plain[(tc.job_types, tc.worker_type)]))
    assert policyopt.solve(filled, "max_min_fairness", space_sharing=True).ok
    # estimator learned from the problem's own table
    own = estimate_problem(measured)
    assert len(own.colocated_types) > len(measured.colocated_types)


def test_estimate_problem_bad_input(gavel) -> None:  # type: ignore[no-untyped-def]
    truth, measured, est = hidden_problem(gavel, n=8)
    jobs = list(measured.jobs)
    import dataclasses
    jobs[0] = dataclasses.replace(jobs[0], job_type="Mystery#1")
    odd = Problem(measured.cluster, tuple(jobs), (), {}, measured.colocated_types)
    with pytest.raises(UnknownNameError) as e:
        estimate_problem(odd, est)
    assert e.value.field == f"jobs[{jobs[0].id}].job_type"
    with pytest.raises(InputError) as e:
        estimate_problem(measured, est, margin=1.5)
    assert e.value.field == "margin"
    with pytest.raises(InputError) as e:
        estimate_problem(Problem(measured.cluster, measured.jobs), None)
    assert e.value.field == "colocated_types"
    with pytest.raises(UnknownNameError) as e:
        estimate_problem(measured, est, method="oracle")
    assert e.value.field == "method"


def test_scaling_fills_multi_gpu_throughputs_and_pairs(gavel) -> None:  # type: ignore[no-untyped-def]
    est = ColocationEstimator.from_gavel(gavel, rank=2, reg=0.3)
    t = gavel.type_index("ResNet-50 (batch size 64)", 2)
    p = gavel.problem([t, t], Cluster.from_counts({"v100": 4, "p100": 4}, gpus_per_server=4), colocated="types")
    jobs = tuple(policyopt.Job(j.id, {"p100": j.throughputs["p100"]}, scale_factor=2, job_type=j.job_type)
                 for j in p.jobs)
    bare = Problem(p.cluster, jobs)
    with pytest.raises(InputError):  # no table and no estimator
        estimate_problem(bare)
    filled = estimate_problem(bare, est, scaling=ScalingModel.linear(), multi_gpu_pairs=True)
    single = gavel.alone[gavel.type_index("ResNet-50 (batch size 64)", 1), gavel.configs.index("v100")]
    assert filled.jobs[0].throughputs["v100"] == pytest.approx(2 * single)
    assert filled.jobs[0].throughputs["v100_unconsolidated"] == pytest.approx(2 * single)
    assert filled.jobs[0].throughputs["p100"] == jobs[0].throughputs["p100"]  # measured kept
    pairs = {tc.worker_type: tc for tc in filled.colocated_types}
    N = est.predict_matrix()[est.index("ResNet-50 (batch size 64)#1"), :, est.index("ResNet-50 (batch size 64)#1")]
    if est.predict_feasible()[est.index("ResNet-50 (batch size 64)#1"), 2, est.index("ResNet-50 (batch size 64)#1")]:
        assert pairs["v100"].throughputs[0] == pytest.approx(N[2] * 2 * single)
    assert not any(tc.job_types[0].endswith("#2") for tc in estimate_problem(bare, est, scaling=ScalingModel.linear()
                                                                             ).colocated_types)


def test_true_objective_matches_the_solvers_objective_on_true_data(gavel) -> None:  # type: ignore[no-untyped-def]
    truth, measured, _ = hidden_problem(gavel, n=24)
    for p, opts in ((truth, {"space_sharing": True}), (truth, {}), (measured, {"space_sharing": True})):
        res = policyopt.solve(p, "max_min_fairness", **opts)
        assert true_objective(res, p) == pytest.approx(res.objective, rel=1e-6)
    # an allocation computed on a partial table is valid under the truth and no better than its optimum
    res = policyopt.solve(measured, "max_min_fairness", space_sharing=True)
    best = policyopt.solve(truth, "max_min_fairness", space_sharing=True).objective
    assert true_objective(res, truth) <= best + 1e-6


def test_online_policy_loop_recovers_from_bad_estimates(gavel) -> None:  # type: ignore[no-untyped-def]
    rounds = policy_online(gavel, 32, 0.9, seed=0, options={"method": "als", "rank": 2, "reg": 0.3}, rounds=3)
    assert rounds[0]["observed_pairs"] == 0 and rounds[-1]["observed_pairs"] > 0
    assert rounds[-1]["min"] > rounds[0]["min"] + 0.1  # measured: 0.67 → 0.95 of the true optimum
    assert rounds[-1]["min"] == pytest.approx(rounds[-1]["believed"], abs=0.05)  # packed pairs now measured


def test_cli_writes_the_completed_problem(gavel, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    _, measured, _ = hidden_problem(gavel, n=16)
    src, dst = tmp_path / "in.json", tmp_path / "out.json"
    measured.to_json(src)
    assert cli_main(["--problem", str(src), "--output", str(dst), "--reference", "gavel"]) == 0
    out = Problem.from_json(dst)
    assert len(out.colocated_types) > len(measured.colocated_types)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"cluster": {"worker_types": {"v100": 1}}, "jobs": [
        {"id": "a", "throughputs": {"v100": 1.0}, "job_type": "x#1"}]}))
    assert cli_main(["--problem", str(bad), "--output", str(dst)]) == 2
