"""The T_iter formula against hand-computed values, vectorization, and bad-input errors."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from policyopt.errors import InputError, UnknownNameError
from policyopt.perfmodel import (CONFIG_COLUMNS, ModelSpec, PerfParams, Plan, Resources,
                                 breakdown, configs_frame, overlap, predict_iter_time,
                                 validate_table)
from policyopt.perfmodel.model import solve_fwd_scale

# P = 1e9, l = 10, h = 1000, s = 100, b = 64, F = 8 s, β = 2 bytes
SPEC = ModelSpec(name="m", params=1e9, layers=10, hidden=1000, seq_len=100, global_batch=64,
                 fwd_time_1gpu=8.0, bytes_per_param=2.0)
K = PerfParams(k_bwd=2.0, k_sync=2.0, k_opt=1e-9, k_opt_off=1e-8, k_off=2.0, k_swap=2.0,
               k_const=0.1)


def res(gpus: int, nodes: int = 1, cpus: int = 16) -> Resources:
    return Resources(gpus=gpus, cpus=cpus, nodes=nodes, bw_intra=1e10, bw_inter=1e9,
                     bw_pcie=1e9, gpu_mem_bytes=80e9, host_mem_bytes=1e12)


def predict_one(plan: Plan, resources: Resources) -> float:
    return float(predict_iter_time(configs_frame(SPEC, [plan], resources), K)[0])


def test_plain_dp_intra_node() -> None:
    # T_fwd = 8/4 = 2, T_bwd = 4, T_dp = 2·1e9·3/4·2 B / 1e10 B/s = 0.3, T_opt = 1e-9·1e9/1
    expected = 2.0 + math.hypot(4.0, 0.3) + 1.0 + 0.1
    assert predict_one(Plan(dp=4), res(4)) == pytest.approx(expected, rel=1e-12)


def test_ga_and_gc_inter_node() -> None:
    # a = 2, gc: T_fwd = 8/(2·2) = 2, T_bwd = (2+1)·2 = 6, T_dp = 2e9·(1/2)·2/1e9 = 2 (inter)
    expected = 2 * 2.0 + 1 * 6.0 + math.hypot(6.0, 2.0) + 1.0 + 0.1
    got = predict_one(Plan(dp=2, ga_steps=2, gc=True), res(2, nodes=2))
    assert got == pytest.approx(expected, rel=1e-12)


def test_pipeline_and_tensor_parallel() -> None:
    # d=1, t=2, p=2, m=4: T_fwd = 8/2·(4+2−1)/(4·2) = 2.5, T_bwd = 5, T_dp = 0
    # V_tp = 8·1·64·100·1000·10/2 elements → ·2 B / 1e10 = 0.0512 s
    # V_pp = 2·2·64·100·1000/2 elements  → ·2 B / 1e10 = 0.00256 s; T_opt = 1e-9·1e9/(2·2)
    expected = 2.5 + 5.0 + 0.0512 + 0.00256 + 0.25 + 0.1
    got = predict_one(Plan(dp=1, tp=2, pp=2, micro_batches=4), res(4))
    assert got == pytest.approx(expected, rel=1e-12)


def test_links_follow_tp_dp_pp_placement() -> None:
    # g = 16 on 2 nodes (8 per node), d=2, t=4, p=2, m=2: TP (4 ≤ 8) and DP (t·d = 8 ≤ 8) stay
    # on NVLink, only the pipeline boundary crosses the network.
    # T_fwd = 8/(2·4)·3/4 = 0.75, T_bwd = 1.5, T_dp = 2e9·(1/2)/(4·2)·2/1e10 = 0.025,
    # T_tp = 8·3·64·100·1000·10/8·2/1e10 = 0.0384, T_pp = 2·2·64·100·1000/8·2/1e9 = 0.0064,
    # T_opt = 1e-9·1e9/8
    f = math.hypot
    expected = 0.75 + f(1.5, 0.025) + 0.0384 + 0.0064 + 0.125 + 0.1
    got = predict_one(Plan(dp=2, tp=4, pp=2, micro_batches=2), res(16, nodes=2))
    assert got == pytest.approx(expected, rel=1e-12)
    # d=2, t=8 on 2 nodes: the TP group fills a node, the DP pair crosses the network:
    # T_fwd = 0.5, T_bwd = 1, T_dp = 2e9·(1/2)/8·2/1e9 = 0.25,
    # T_tp = 8·7·(b·s·h·l = 64e6)/16·2/1e10 = 0.0448
    expected = 0.5 + f(1.0, 0.25) + 0.0448 + 1e-9 * 1e9 / 8 + 0.1
    got = predict_one(Plan(dp=2, tp=8), res(16, nodes=2))
    assert got == pytest.approx(expected, rel=1e-12)
    # t=16 cannot sit in one 8-GPU node: TP crosses the network (10x slower link)
    t_tp = 8 * 15 * 64e6 / 16 * 2
    expected = 0.5 + 1.0 + t_tp / 1e9 + 1e-9 * 1e9 / 16 + 0.1
    assert predict_one(Plan(dp=1, tp=16), res(16, nodes=2)) == pytest.approx(expected, rel=1e-12)


def test_zero_dp_shards_optimizer_step() -> None:
    # d = 8: T_fwd = 1, T_bwd = 2, T_dp = 2e9·7/8·2/1e10 = 0.35, T_opt = 1e-9·1e9/8
    expected = 1.0 + math.hypot(2.0, 0.35) + 0.125 + 0.1
    assert predict_one(Plan(dp=8, zero="dp"), res(8)) == pytest.approx(expected, rel=1e-12)


def test_zero_offload() -> None:
    # d=2, c=16: T_fwd = 4, T_bwd = 8, T_dp = 2e9·(1/2)·2/1e10 = 0.2,
    # T_opt = 1e-8·1e9/(2·16) = 0.3125, T_off = 1e9·2 B/(2·1e9 B/s) = 1
    expected = 4.0 + math.hypot(8.0, 0.2) + math.hypot(0.2, 1.0) + math.hypot(0.3125, 1.0) + 0.1
    got = predict_one(Plan(dp=2, zero="offload"), res(2, cpus=16))
    assert got == pytest.approx(expected, rel=1e-12)


def test_overlap_limits_and_stability() -> None:
    x, y = np.array([3.0, 0.0, 1e300, 2.0]), np.array([4.0, 0.0, 1e300, 0.0])
    assert overlap(x, y, 1.0)[0] == pytest.approx(7.0)         # k = 1: no overlap (sum)
    assert overlap(x, y, 2.0)[0] == pytest.approx(5.0)
    assert overlap(x, y, 200.0)[0] == pytest.approx(4.0, rel=1e-2)  # k → ∞: max
    out = overlap(x, y, 50.0)
    assert np.all(np.isfinite(out)) and out[1] == 0.0 and out[3] == pytest.approx(2.0)


def test_vectorized_rows_equal_single_rows_and_breakdown_adds_up() -> None:
    plans = [Plan(dp=4), Plan(dp=2, ga_steps=2, gc=True), Plan(dp=1, tp=2, pp=2, micro_batches=4),
             Plan(dp=8, zero="dp"), Plan(dp=2, zero="offload")]
    resources = [res(4), res(2, nodes=2), res(4), res(8), res(2)]
    table = configs_frame(SPEC, plans, resources)
    together = predict_iter_time(table, K)
    alone = [predict_one(p, r) for p, r in zip(plans, resources)]
    np.testing.assert_allclose(together, alone, rtol=1e-12)
    parts = breakdown(table, K)
    np.testing.assert_allclose(parts["t_cc"] + parts["t_oo"] + parts["k_const"], together)


def test_one_parameter_set_per_model() -> None:
    other = ModelSpec(name="other", params=2e9, layers=10, hidden=1000, seq_len=100,
                      global_batch=64, fwd_time_1gpu=8.0)
    table = pd.concat([configs_frame(SPEC, [Plan(dp=4)], res(4)),
                       configs_frame(other, [Plan(dp=4)], res(4))], ignore_index=True)
    k2 = PerfParams(**{**K.to_dict(), "k_const": 5.0})
    got = predict_iter_time(table, {"m": K, "other": k2})
    assert got[0] == pytest.approx(predict_one(Plan(dp=4), res(4)))
    assert got[1] - got[0] > 4.0  # different k_const and twice the optimizer work
    with pytest.raises(UnknownNameError) as err:
        predict_iter_time(table, {"m": K})
    assert err.value.field == "configs[1].model"


def _table() -> pd.DataFrame:
    return configs_frame(SPEC, [Plan(dp=4), Plan(dp=2, zero="offload")], [res(4), res(2)])


@pytest.mark.parametrize("column, value, field", [
    ("dp", 3, "configs[1].dp"),                # d·t·p ≠ g
    ("params", -5.0, "configs[1].params"),     # non-positive size
    ("hidden", 0, "configs[1].hidden"),
    ("layers", "ten", "configs[1].layers"),    # not a number
    ("seq_len", 2.5, "configs[1].seq_len"),    # not an integer
    ("gc", 2, "configs[1].gc"),
    ("bw_pcie", 0.0, "configs[1].bw_pcie"),
    ("nodes", 4, "configs[1].nodes"),          # more nodes than GPUs
    ("micro_batches", 2, "configs[1].micro_batches"),  # m > 1 without a pipeline
])
def test_bad_cells_name_row_and_column(column: str, value: object, field: str) -> None:
    table = _table().astype({column: object})
    table.loc[1, column] = value
    with pytest.raises(InputError) as err:
        validate_table(table)
    assert err.value.field == field and err.value.value == value


def test_unknown_zero_and_missing_column() -> None:
    table = _table()
    table.loc[0, "zero"] = "zero3"
    with pytest.raises(UnknownNameError) as err:
        predict_iter_time(table, K)
    assert err.value.field == "configs[0].zero" and err.value.value == "zero3"
    with pytest.raises(InputError) as err2:
        validate_table(_table().drop(columns=["bw_inter"]))
    assert err2.value.field == "configs.bw_inter"
    assert list(_table().columns) == list(CONFIG_COLUMNS)


def test_dataclass_validation() -> None:
    with pytest.raises(InputError, match="model.params"):
        ModelSpec(name="x", params=0, layers=1, hidden=1, seq_len=1, global_batch=1,
                  fwd_time_1gpu=1.0)
    with pytest.raises(UnknownNameError):
        Plan(dp=1, zero="zero-3")
    with pytest.raises(InputError, match="plan.tp"):
        Plan(dp=1, tp=0)
    with pytest.raises(InputError, match="dp·tp·pp = 4 differs from gpus = 8"):
        configs_frame(SPEC, [Plan(dp=4)], res(8))
    with pytest.raises(InputError, match="params.k_sync"):
        PerfParams(**{**K.to_dict(), "k_sync": 0.5})


def test_measured_plan_forward_replaces_t_fwd() -> None:
    table = configs_frame(SPEC, [Plan(dp=4), Plan(dp=4)], res(4))
    table["fwd_time_plan"] = [3.0, np.nan]
    bd = breakdown(table, K)
    assert bd["t_fwd"].tolist() == [3.0, 2.0]
    table["fwd_time_plan"] = ["3.0", "-1"]
    with pytest.raises(InputError, match=r"configs\[1\]\.fwd_time_plan"):
        breakdown(table, K)


def test_allreduce_latency_per_ring_step() -> None:
    # α = 1e-4 s per ring step; P·β = 2e9 bytes in 25 MiB buckets: ⌈2e9/26214400⌉ = 77 buckets.
    # d = 4, t = 1: T_dp gains 2·3·77·α = 0.0462 s.
    # d = 2, t = 4, p = 2, m = 2 on 2 nodes: gradients of P/(t·p) → ⌈2e9/8/26214400⌉ = 10 buckets,
    # T_dp gains 2·1·10·α = 0.002 s; the TP all-reduces (4 per layer and micro-batch along the
    # pipeline's critical path: 4·l·a·(m+p−1)/p = 4·10·1·3/2 = 60 of 2(t−1) = 6 steps) gain 0.036 s.
    alpha = 1e-4
    table = configs_frame(SPEC, [Plan(dp=4), Plan(dp=2, tp=4, pp=2, micro_batches=2)],
                          [res(4), res(16, nodes=2)])
    base = breakdown(table, K)
    table["allreduce_latency"] = alpha
    got = breakdown(table, K)
    assert (got["t_dp"] - base["t_dp"]).tolist() == pytest.approx([2 * 3 * 77 * alpha, 2 * 1 * 10 * alpha])
    assert (got["t_tp"] - base["t_tp"]).tolist() == pytest.approx([0.0, 60 * 6 * alpha])
    table["allreduce_latency"] = [alpha, ""]  # blank: no latency (the bandwidth-only term)
    assert breakdown(table, K)["t_dp"].iloc[1] == base["t_dp"].iloc[1]
    table["allreduce_latency"] = [alpha, -1.0]
    with pytest.raises(InputError, match=r"configs\[1\]\.allreduce_latency"):
        breakdown(table, K)


def test_parallel_capacity_and_step_overhead() -> None:
    # d = 4, a = 2: T_fwd = 8/(2·4) = 1; κ = 2 ranks' worth: 8/(2·2) = 2; σ = 0.01 s per
    # micro-step, which the 4 ranks sharing 2 cores also pay at half speed: 2·σ = 0.02.
    table = configs_frame(SPEC, [Plan(dp=4, ga_steps=2), Plan(dp=1)], [res(4), res(1)])
    assert breakdown(table, K)["t_fwd"].tolist() == pytest.approx([1.0, 8.0])
    table["parallel_capacity"] = 2.0
    table["step_overhead"] = 0.01
    bd = breakdown(table, K)
    assert bd["t_fwd"].tolist() == pytest.approx([2.02, 8.01])  # κ ≥ d·t = 1: σ once
    assert bd["t_bwd"].tolist() == pytest.approx([2 * 2.02, 2 * 8.01])
    table["parallel_capacity"] = ""  # blank κ: every rank has its own core, σ once
    assert breakdown(table, K)["t_fwd"].tolist() == pytest.approx([1.01, 8.01])


def test_dp_overlap_zero_adds_the_sync_after_the_backward() -> None:
    # d = 4, a = 2: T_bwd = 2·T_fwd; with dp_overlap = 0 the last backward and the DP sync add up
    # (T_bwd + T_dp) instead of f_{k_sync}(T_bwd, T_dp) = (T_bwd² + T_dp²)^(1/2) at k_sync = 2.
    table = configs_frame(SPEC, [Plan(dp=4, ga_steps=2), Plan(dp=4, ga_steps=2)], [res(4), res(4)])
    base = breakdown(table, K)
    t_bwd, t_dp = base["t_bwd"].iloc[0], base["t_dp"].iloc[0]
    assert t_dp > 0
    table["dp_overlap"] = [0, ""]  # blank: overlapped, as without the column
    got = breakdown(table, K)
    gain = t_bwd + t_dp - math.hypot(t_bwd, t_dp)
    assert got["iter_time"].tolist() == pytest.approx([base["iter_time"].iloc[0] + gain,
                                                       base["iter_time"].iloc[1]])
    assert got["t_cc"].iloc[0] == pytest.approx(base["t_cc"].iloc[0] + gain)
    # k_sync no longer enters the serial row: the fit's information check sees that.
    from policyopt.perfmodel.fit import depends
    from policyopt.perfmodel.model import compute_terms
    from policyopt.perfmodel.params import PARAM_NAMES
    dep = depends(compute_terms(table))[:, PARAM_NAMES.index("k_sync")]
    assert dep.tolist() == [False, True]
    table["dp_overlap"] = [0, 2]
    with pytest.raises(InputError, match=r"configs\[1\]\.dp_overlap"):
        breakdown(table, K)


def test_measured_plan_forward_keeps_only_the_backward_half_of_tp_and_pp_traffic() -> None:
    # A measured forward holds its own TP all-reduces and stage-boundary sends: T_tp and T_pp
    # of that row are halved (the backward's half); a row without it keeps them whole.
    plan = Plan(dp=1, tp=4, pp=2, micro_batches=2)
    table = configs_frame(SPEC, [plan, plan], [res(8, nodes=2), res(8, nodes=2)])
    base = breakdown(table, K)
    assert (base["t_tp"] > 0).all() and (base["t_pp"] > 0).all()
    table["fwd_time_plan"] = [0.5, np.nan]
    got = breakdown(table, K)
    assert got["t_tp"].tolist() == pytest.approx([base["t_tp"].iloc[0] / 2, base["t_tp"].iloc[1]])
    assert got["t_pp"].tolist() == pytest.approx([base["t_pp"].iloc[0] / 2, base["t_pp"].iloc[1]])


def test_fwd_scale_multiplies_the_forward_compute() -> None:
    # fwd_scale η multiplies F/(a·d·t)·bubble (the compute of the forward), not the step
    # overhead σ; blank keeps η = 1; the backward follows as k_bwd·T_fwd.
    plan = Plan(dp=1, tp=4, pp=2, micro_batches=2)
    table = configs_frame(SPEC, [plan, plan], [res(8), res(8)])
    table["step_overhead"] = 0.01
    base = breakdown(table, K)
    table["fwd_scale"] = [2.5, ""]
    got = breakdown(table, K)
    compute = base["t_fwd"].iloc[0] - 0.01
    assert got["t_fwd"].tolist() == pytest.approx([2.5 * compute + 0.01, base["t_fwd"].iloc[1]])
    assert got["t_bwd"].iloc[0] == pytest.approx(K.k_bwd * got["t_fwd"].iloc[0])
    assert got["t_tp"].tolist() == pytest.approx(base["t_tp"].tolist())  # traffic unchanged
    table["fwd_scale"] = [2.5, 0.0]
    with pytest.raises(InputError, match=r"configs\[1\]\.fwd_scale.*factor"):
        breakdown(table, K)


def test_solve_fwd_scale_inverts_the_prediction() -> None:
    # The η solved from a "measured" time made with known η reproduces it, row by row.
    plans = [Plan(dp=1, tp=4, pp=2, micro_batches=2), Plan(dp=2, tp=8), Plan(dp=8)]
    table = configs_frame(SPEC, plans, [res(8), res(16, nodes=2), res(8)])
    truth = np.array([3.0, 0.8, 1.0])
    measured = predict_iter_time(table.assign(fwd_scale=truth), K)
    assert solve_fwd_scale(table, K, measured) == pytest.approx(truth, rel=1e-9)
    slow = predict_iter_time(table.assign(fwd_scale=1e3), K)
    with pytest.raises(InputError, match=r"measured\[0\].*not reachable"):
        solve_fwd_scale(table, K, slow)
    with pytest.raises(InputError, match="measured"):
        solve_fwd_scale(table, K, measured[:2])
