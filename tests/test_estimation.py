"""Colocation / scaling estimators on synthetic data: completion accuracy, determinism, nearest rows,
feasibility, online updates, linear scaling, and bad input (no Gavel data needed)."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt import InputError, UnknownNameError
from policyopt.estimation import (ColocationEstimator, ScalingData, ScalingModel, als, default_grid,
                                  fit_threshold_model, linear_scaling, power_law_predictions, select,
                                  soft_impute)


def low_rank(R: int, C: int, rank: int, seed: int, missing: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    Z = 0.5 + 0.1 * rng.standard_normal(R)[:, None] + 0.3 * rng.standard_normal((R, rank)) @ \
        rng.standard_normal((rank, C)) / np.sqrt(rank)
    return Z, rng.random((R, C)) >= missing


def synthetic_estimator_data(K: int = 24, W: int = 2, rank: int = 2, seed: int = 0
                             ) -> tuple[list[str], list[str], np.ndarray]:
    """(K, W, K) normalized throughputs in (0, 1) with a low-rank structure per worker type."""
    rng = np.random.default_rng(seed)
    U = rng.standard_normal((K, rank))
    V = np.stack([U @ rng.standard_normal((rank, rank)) for _ in range(W)], axis=1)  # (K, W, rank)
    logits = 0.3 + 0.4 * np.einsum("jr,kwr->jwk", U, V) / rank + 0.2 * rng.standard_normal(K)[:, None, None]
    vals = 1.0 / (1.0 + np.exp(-logits))
    return [f"job{i}" for i in range(K)], [f"gpu{w}" for w in range(W)], vals


# ------------------------------------------------------------------ completion
def test_als_recovers_a_low_rank_matrix() -> None:
    Z, M = low_rank(40, 50, 3, seed=1, missing=0.5)
    fit = als(Z, M, rank=3, reg=1e-3, sweeps=300)
    rmse_missing = float(np.sqrt(((fit.predict() - Z)[~M] ** 2).mean()))
    assert rmse_missing < 0.01
    # too small a rank cannot: the error is much larger
    assert np.sqrt(((als(Z, M, rank=1, reg=1e-3).predict() - Z)[~M] ** 2).mean()) > 10 * rmse_missing


def test_soft_impute_recovers_a_low_rank_matrix() -> None:
    Z, M = low_rank(40, 50, 3, seed=2, missing=0.5)
    grid = default_grid("soft_impute", Z, M)
    best, table = select(Z, M, "soft_impute", grid, seed=0)
    rmse = lambda fit: float(np.sqrt(((fit.predict() - Z)[~M] ** 2).mean()))  # noqa: E731
    err = rmse(soft_impute(Z, M, best["shrink"]))
    # soft thresholding shrinks the singular values (biased, unlike ALS at the right rank), but it
    # still removes most of the error left by the rank-0 (row + column effect) model
    assert err < 0.1 and err < 0.25 * rmse(als(Z, M, 0, 0.1))
    assert rmse(soft_impute(Z, M, best["shrink"], debias=True)) < err
    assert len(table) == len(grid) and all(np.isfinite(r["rmse"]) for r in table)


def test_validation_picks_the_true_rank() -> None:
    for seed in (3, 4, 5):  # rank 3 plus 5% noise: smaller ranks underfit, rank 5 fits the noise
        Z, M = low_rank(30, 40, 3, seed=seed, missing=0.4)
        Z = Z + 0.05 * np.random.default_rng(seed).standard_normal(Z.shape)
        best, table = select(Z, M, "als", default_grid("als", ranks=(1, 2, 3, 5), regs=(0.1,)), seed=0)
        assert best["rank"] == 3, table


def test_completion_is_deterministic_for_a_seed() -> None:
    Z, M = low_rank(20, 25, 2, seed=4, missing=0.3)
    a, b = als(Z, M, 2, 0.1, seed=7), als(Z, M, 2, 0.1, seed=7)
    np.testing.assert_array_equal(a.predict(), b.predict())
    labels, wts, V = synthetic_estimator_data(seed=5)
    M3 = np.random.default_rng(0).random(V.shape) < 0.6
    preds = [ColocationEstimator.from_arrays(labels, wts, V, M3, seed=3).fit().predict_matrix("nearest")
             for _ in range(2)]
    np.testing.assert_array_equal(preds[0], preds[1])


# ------------------------------------------------------------------ estimator
def test_estimator_beats_baselines_on_low_rank_data() -> None:
    labels, wts, V = synthetic_estimator_data(seed=6)
    M = np.random.default_rng(1).random(V.shape) < 0.6
    est = ColocationEstimator.from_arrays(labels, wts, V, M, seed=0).fit()
    err = {m: float(np.abs(est.predict_matrix(m) - V)[~M].mean()) for m in ("completed", "row_mean", "col_mean")}
    assert err["completed"] < 0.5 * min(err["row_mean"], err["col_mean"])
    assert err["completed"] < 0.03
    # measured cells are returned as measured
    np.testing.assert_array_equal(est.predict_matrix("completed")[M], V[M])


def test_nearest_row_copies_the_nearest_reference() -> None:
    """Jobs come in 4 exact prototypes: the nearest reference of a job is its twin, whose measured
    cell is the right answer exactly."""
    rng = np.random.default_rng(2)
    proto = rng.uniform(0.3, 0.9, (4, 1, 4))
    kind = np.repeat(np.arange(4), 5)  # 20 jobs, 5 per prototype
    V = proto[kind][:, :, kind]
    M = rng.random(V.shape) < 0.7
    est = ColocationEstimator.from_arrays([f"j{i}" for i in range(20)], ["gpu"], V, M, rank=1, reg=1e-3).fit()
    P = est.predict_matrix("nearest")
    assert np.abs(P - V)[~M].max() < 1e-12


def test_online_observations_improve_a_new_jobs_predictions() -> None:
    labels, wts, V = synthetic_estimator_data(K=25, seed=7)
    K = len(labels)
    ref = list(range(K - 1))
    est = ColocationEstimator.from_arrays(labels[:-1], wts, V[np.ix_(ref, [0, 1], ref)],
                                          np.ones((K - 1, 2, K - 1), bool), seed=0).fit()
    est.add_job("new")
    order = np.random.default_rng(3).permutation(K - 1)
    held = order[12:]  # never observed: the held-out cells

    def error() -> float:
        P = est.predict_matrix("completed")
        return float(np.abs(P[K - 1][:, held] - V[K - 1][:, held]).mean())

    for k in order[:1]:
        for w, wt in enumerate(wts):
            est.observe("new", labels[k], wt, V[-1, w, k], V[k, w, -1])
    before = error()
    for k in order[1:12]:
        for w, wt in enumerate(wts):
            est.observe("new", labels[k], wt, V[-1, w, k], V[k, w, -1])
    after = error()
    assert after < 0.5 * before
    assert after < 0.05


def test_zero_observation_is_infeasible_and_threshold_model_predicts_memory_limits() -> None:
    rng = np.random.default_rng(4)
    K = 30
    mem = rng.uniform(0, 1, K)
    cap = np.array([1.0, 1.3])  # two worker types with different memory
    infeasible = (mem[:, None, None] + mem[None, None, :]) > cap[None, :, None]
    known = rng.random((K, 2, K)) < 0.6
    known = known & known.transpose(2, 1, 0)
    model = fit_threshold_model(infeasible & known, known)
    pred = model.probability() > 0.5
    acc = float((pred == infeasible)[~known].mean())
    base = float((~infeasible)[~known].mean())  # "all feasible"
    assert acc > 0.93 and acc > base + 0.1
    est = ColocationEstimator(["a", "b", "c"], ["gpu"])
    est.observe("a", "b", "gpu", 0.0)
    assert est.infeasible[0, 0, 1] and est.infeasible[1, 0, 0] and not est.measured[0, 0, 1]
    est.observe("a", "c", "gpu", 0.7, 0.8)
    est.observe("b", "c", "gpu", 0.6, 0.5)
    assert not est.predict_feasible()[0, 0, 1]
    with pytest.raises(InputError) as e:
        est.predict_pair("a", "c", "gpu")
    assert e.value.field == "alone[a].gpu"


def test_raw_pair_observation_and_prediction_round_trip() -> None:
    est = ColocationEstimator(["a", "b"], ["v100"], rank=0, reg=0.1)
    est.alone[:] = np.nan
    est2 = ColocationEstimator(["a", "b"], ["v100"], rank=0, reg=0.1)
    est2.add_job("c", alone={"v100": 10.0})
    with pytest.raises(InputError) as e:
        est2.observe_pair("a", "c", "v100", (1.0, 2.0))
    assert e.value.field == "alone[a].v100"
    est3 = ColocationEstimator([], ["v100"], rank=0, reg=0.1)
    est3.add_job("a", alone={"v100": 4.0})
    est3.add_job("b", alone={"v100": 10.0})
    est3.observe_pair("a", "b", "v100", (2.0, 8.0))
    assert est3.predict("a", "b", "v100") == pytest.approx(0.5)
    assert est3.predict_pair("a", "b", "v100") == pytest.approx((2.0, 8.0))


# ------------------------------------------------------------------ scaling
def test_linear_scaling_helper() -> None:
    np.testing.assert_allclose(linear_scaling([2.0, 3.0], [4, 2]), [8.0, 6.0])
    np.testing.assert_allclose(linear_scaling(5.0, 8, 0.5), 20.0)
    rng = np.random.default_rng(0)
    single = rng.uniform(1, 10, 12)
    gpus = np.tile([2, 4, 8], 4)
    configs = np.repeat(["v100", "v100_unconsolidated"], 6)
    eff = np.where(configs == "v100", 0.9, 0.5)
    data = ScalingData(np.repeat(["m0", "m1"], 6), configs, gpus, single, gpus * eff * single)
    model = ScalingModel.fit(data)
    assert model.factor("v100", 4) == pytest.approx(0.9)
    assert model.factor("v100_unconsolidated", 8) == pytest.approx(0.5)
    assert model.factor("v100", 1) == 1.0 and model.factor("k80", 2) == 1.0  # unfitted → linear
    np.testing.assert_allclose(model.predict(single, gpus, configs), data.measured)
    assert ScalingModel.from_dict(model.to_dict()).efficiency == pytest.approx(model.efficiency)
    # an exact power law is recovered leave-one-scale-out
    pl = ScalingData(np.array(["m"] * 3), np.array(["v100"] * 3), np.array([2, 4, 8]), np.full(3, 3.0),
                     3.0 * np.array([2, 4, 8]) ** 0.8)
    np.testing.assert_allclose(power_law_predictions(pl), pl.measured)


# ------------------------------------------------------------------ bad input
@pytest.mark.parametrize("call, field", [
    (lambda: als(np.array([[np.nan, 1.0]]), np.array([[True, True]]), 1), "values[0][0]"),
    (lambda: als(np.ones((2, 2)), np.ones((2, 3), bool), 1), "mask"),
    (lambda: als(np.ones((2, 2)), np.ones((2, 2)), 1), "mask"),
    (lambda: als(np.ones(4), np.ones(4, bool), 1), "values"),
    (lambda: als(np.ones((2, 2)), np.ones((2, 2), bool), -1), "rank"),
    (lambda: soft_impute(np.ones((2, 2)), np.ones((2, 2), bool), float("nan")), "shrink"),
    (lambda: linear_scaling([1.0, float("nan")], 2), "single_gpu_throughput"),
    (lambda: linear_scaling(1.0, 0), "gpus"),
    (lambda: linear_scaling(1.0, 2, -1.0), "efficiency"),
    (lambda: ScalingModel.from_dict({"v100": {"2": float("nan")}}), "efficiency.v100.2"),
    (lambda: ColocationEstimator(["a"], ["v100"], method="svd"), "method"),
    (lambda: ColocationEstimator(["a"], ["v100"], feasibility="maybe"), "feasibility"),
    (lambda: ColocationEstimator(["a"], ["v100"], bounds=(1.0, 0.0)), "bounds"),
    (lambda: ColocationEstimator(["a", "a"], ["v100"]), "label"),
    (lambda: ColocationEstimator(["a"], []), "worker_types"),
    (lambda: ColocationEstimator.from_arrays(["a", "b"], ["v100"], np.ones((2, 2, 2)), np.ones((2, 2, 2), bool)),
     "values"),
    (lambda: ColocationEstimator.from_arrays(["a", "b"], ["v100"], np.full((2, 1, 2), np.nan),
                                             np.ones((2, 1, 2), bool)), "values[a][v100][a]"),
])
def test_bad_input_names_the_field(call, field: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(InputError) as e:
        call()
    assert e.value.field == field


def test_bad_observations_and_unknown_names() -> None:
    est = ColocationEstimator(["a", "b"], ["v100"])
    cases = [
        (lambda: est.observe("a", "b", "v100", float("nan")), "normalized_throughput", InputError),
        (lambda: est.observe("a", "b", "v100", -0.5), "normalized_throughput", InputError),
        (lambda: est.observe("a", "b", "v100", 0.5, float("inf")), "co_runner_normalized", InputError),
        (lambda: est.observe("zz", "b", "v100", 0.5), "job", UnknownNameError),
        (lambda: est.observe("a", "zz", "v100", 0.5), "co_runner", UnknownNameError),
        (lambda: est.observe("a", "b", "tpu", 0.5), "worker_type", UnknownNameError),
        (lambda: est.predict("a", "b", "v100", method="magic"), "method", UnknownNameError),
        (lambda: est.add_job("c", alone={"v100": float("nan")}), "alone.v100", InputError),
        (lambda: est.add_job("d", alone={"tpu": 1.0}), "alone", UnknownNameError),
        (lambda: est.fit(), "measured[v100]", InputError),
    ]
    for call, field, kind in cases:
        with pytest.raises(kind) as e:
            call()
        assert e.value.field == field, (field, e.value)
