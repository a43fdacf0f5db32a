"""Plan enumeration, best plan (against brute force), sensitivity curve, upper envelope."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt.errors import InputError
from policyopt.perfmodel import (Plan, PlanSpace, best_plan, configs_frame, enumerate_plans,
                                 estimate_memory, predict_iter_time, sensitivity_curve,
                                 upper_envelope)
from policyopt.perfmodel.synthetic import NOMINAL_PARAMS, REFERENCE_CLUSTER, SHAPES

CLUSTER = REFERENCE_CLUSTER


def test_enumerated_plans_are_valid_and_distinct() -> None:
    spec = SHAPES["gpt-1.3b"]
    plans = enumerate_plans(spec, 16, gpus_per_node=8)
    assert (plans["dp"] * plans["tp"] * plans["pp"] == 16).all()
    assert not plans.duplicated().any()
    assert (plans["tp"] <= 8).all() and (spec.hidden % plans["tp"] == 0).all()
    assert (spec.global_batch % (plans["dp"] * plans["ga_steps"] * plans["micro_batches"])
            == 0).all()
    zero = plans[plans["zero"] != "none"]
    assert ((zero["tp"] == 1) & (zero["pp"] == 1)).all()
    assert ((plans["pp"] > 1) | (plans["micro_batches"] == 1)).all()
    for plan in [dict(dp=16, tp=1, pp=1, zero="none"), dict(dp=16, tp=1, pp=1, zero="offload"),
                 dict(dp=2, tp=4, pp=2, zero="none")]:
        match = np.ones(len(plans), dtype=bool)
        for k, v in plan.items():
            match &= plans[k].to_numpy() == v
        assert match.any(), plan
    small = enumerate_plans(spec, 16, PlanSpace(ga_steps=(1,), gc=(False,), zero=("none",)))
    assert len(small) < len(plans) and (small["ga_steps"] == 1).all()
    with pytest.raises(InputError, match="space.zero"):
        PlanSpace(zero=("zero3",))


@pytest.mark.parametrize("shape, gpus, cpus", [("gpt-1.3b", 8, 32), ("gpt-13b", 16, 64)])
def test_best_plan_equals_brute_force(shape: str, gpus: int, cpus: int) -> None:
    spec = SHAPES[shape]
    best = best_plan(spec, NOMINAL_PARAMS, gpus, cpus, cluster=CLUSTER)
    assert best is not None
    resources = CLUSTER.resources(gpus, cpus)
    brute: list[tuple[float, Plan]] = []
    for row in enumerate_plans(spec, gpus, gpus_per_node=CLUSTER.gpus_per_node).itertuples():
        plan = Plan(dp=row.dp, tp=row.tp, pp=row.pp, micro_batches=row.micro_batches,
                    ga_steps=row.ga_steps, gc=bool(row.gc), zero=row.zero)
        mem = estimate_memory(spec, plan)
        if mem.gpu_bytes > 0.9 * resources.gpu_mem_bytes or \
                mem.host_bytes > 0.9 * resources.host_mem_bytes:
            continue
        t = predict_iter_time(configs_frame(spec, [plan], resources), NOMINAL_PARAMS)[0]
        brute.append((spec.global_batch / t, plan))
    top = max(brute, key=lambda x: x[0])
    assert best.throughput == pytest.approx(top[0], rel=1e-12)
    assert best.plan == top[1] and best.alternatives == len(brute)
    assert best.iter_time == pytest.approx(spec.global_batch / best.throughput)


def test_sensitivity_curve_and_envelope() -> None:
    spec = SHAPES["gpt-6.7b"]
    gpus, cpus = [1, 2, 4, 8, 16, 32, 64], [8, 32, 96]
    curve = sensitivity_curve(spec, NOMINAL_PARAMS, CLUSTER, gpus, cpus)
    assert len(curve) == len(gpus) * len(cpus)
    assert list(curve[["gpus", "cpus"]].drop_duplicates().itertuples(index=False)) == \
        [(g, c) for g in gpus for c in cpus]
    feas = curve[curve["feasible"]]
    assert (feas["dp"] * feas["tp"] * feas["pp"] == feas["gpus"]).all()
    np.testing.assert_allclose(feas["throughput"], spec.global_batch / feas["iter_time"])
    assert (curve.loc[~curve["feasible"], "throughput"] == 0).all()
    # 6.7B on 1 GPU only fits with offload, whose CPU step scales with the core count
    one = curve[curve["gpus"] == 1]
    assert one["feasible"].all() and (one["zero"] == "offload").all()
    # more CPUs never hurt (they only speed up the offloaded optimizer step)
    for _, grp in curve.groupby("gpus"):
        assert np.all(np.diff(grp.sort_values("cpus")["throughput"].to_numpy()) >= -1e-12)
    # 64 GPUs beat 1 GPU by a wide margin
    assert feas[feas["gpus"] == 64]["throughput"].max() > 10 * one["throughput"].max()

    env = upper_envelope(curve)
    rows = curve[curve["feasible"]]
    kept = set(zip(env["gpus"], env["cpus"]))
    for r in rows.itertuples():
        dominated = [(o.gpus, o.cpus) for o in rows.itertuples()
                     if o.gpus <= r.gpus and o.cpus <= r.cpus and o.throughput >= r.throughput
                     and (o.gpus, o.cpus, o.throughput) != (r.gpus, r.cpus, r.throughput)]
        assert ((r.gpus, r.cpus) in kept) == (not dominated), (r.gpus, r.cpus, dominated)
    assert env["throughput"].max() == rows["throughput"].max()  # the best pair always stays
    assert (env["gpus"].min(), env["cpus"].min()) == (1, 8)      # so does the cheapest one


def test_infeasible_resources_reported() -> None:
    curve = sensitivity_curve(SHAPES["gpt-30b"], NOMINAL_PARAMS, CLUSTER, [1, 8], [8])
    one = curve[curve["gpus"] == 1].iloc[0]
    assert not one["feasible"] and one["throughput"] == 0 and one["plan"] == ""
    assert curve[curve["gpus"] == 8].iloc[0]["feasible"]
    # 200 cores do not fit on the single node touched by 8 GPUs
    with pytest.raises(InputError, match="cpus"):
        best_plan(SHAPES["gpt-86m"], NOMINAL_PARAMS, 8, 200, cluster=CLUSTER)
    placed = sensitivity_curve(SHAPES["gpt-86m"], NOMINAL_PARAMS, CLUSTER, [8], [200])
    assert not placed.iloc[0]["feasible"]
