"""The fidelity pieces without training processes: the measurements of the busy profile cover
every (job type, scale factor, worker type) with no slot idle, the schedule pass measures the
simulator's predicted rounds as they are, and the round model reads the executor's round costs
from a report and changes the simulated run as its math says."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policyopt.errors import InputError
from policyopt.executor import ExecutorConfig
from policyopt.executor.busyprofile import busy_assignments, predicted_schedule, schedule_assignments
from policyopt.executor.cluster import build_slots
from policyopt.executor.spec import example_throughputs_path, load_throughput_table


def test_busy_assignments_of_the_multi_example() -> None:
    slots = build_slots({"cpu1": 2, "cpu2": 2}, "auto", cores=[0, 1])
    names = ["lstm-bs10", "recommendation-bs128", "resnet-bs32", "transformer-bs16"]
    pairs = [(n, 1) for n in names] + [("resnet-bs32", 2), ("transformer-bs16", 2)]
    targets = [(n, k, t) for n, k in pairs for t in ("cpu1", "cpu2")]
    plan = busy_assignments(slots, targets, names)
    assert len(plan) == 4  # 4 two-worker targets on 2 + 2 slots: two measurements; 8 one-worker: two
    # the first two measurements run two different 2-worker jobs side by side, as in a run
    assert {m[0][0][0] for m in plan[:2]} == {"resnet-bs32"} and {m[1][0][0] for m in plan[:2]} == {"transformer-bs16"}
    for m in plan:
        used = [s for _, ids in m for s in ids]
        assert sorted(used) == [0, 1, 2, 3]  # every slot busy, none twice
        for (_jt, k, wt), ids in m:
            assert len(ids) == k and all(slots[s].worker_type == wt for s in ids)


@settings(max_examples=60, deadline=None)
@given(counts=st.tuples(st.integers(0, 3), st.integers(0, 3), st.integers(1, 2)),
       ks=st.lists(st.sampled_from([1, 2, 3]), min_size=1, max_size=3))
def test_busy_assignments_cover_every_target_that_fits(counts: tuple[int, int, int], ks: list[int]) -> None:
    cluster = {t: n for t, n in zip(("cpu1", "cpu2", "cpu4"), counts) if n > 0}
    slots = build_slots(cluster, "off", cores=[0, 1])
    names = [f"job{i}" for i in range(len(ks))]
    targets = [(n, k, t) for (n, k), t in itertools.product(zip(names, ks), cluster)]
    plan = busy_assignments(slots, targets, names)
    measured = {target for m in plan for target, _ in m}
    assert measured >= {x for x in targets if x[1] <= cluster[x[2]]}
    assert not any(x[1] > cluster[x[2]] for x in measured)  # a target that cannot run is left out
    for m in plan:
        used = [s for _, ids in m for s in ids]
        assert sorted(used) == list(range(len(slots)))


def _report(rounds: list[dict], finish: dict[str, float]) -> dict:
    cfg = ExecutorConfig(cluster="cpu1=1,cpu2=1", round_seconds=3.0).to_dict()
    jobs = {jid: {"job_type": jt, "arrival": 0.0, "steps_required": 150, "jct": finish[jid], "finish": finish[jid],
                  "measured_throughputs": {}, "steps_by_type": {}}
            for jid, jt in (("a", "lstm-bs10"), ("b", "resnet-bs32"))}
    return {"config": cfg, "jobs": jobs, "rounds": rounds,
            "summary": {"mean_startup_seconds": 0.2, "mean_stop_seconds": 0.1, "makespan": max(finish.values())}}


def test_round_model_reads_the_round_costs() -> None:
    from policyopt.executor.fidelity import round_model

    def job(renewed: bool, train: float) -> dict:
        return {"renewed": renewed, "train_seconds": train, "worker_type": "cpu1", "steps": 10}

    rounds = [{"start": 0.0, "duration": 3.2, "jobs": {"a": job(False, 2.6), "b": job(False, 2.8)}},
              {"start": 3.2, "duration": 3.4, "jobs": {"a": job(True, 3.0), "b": job(False, 2.2)}},
              {"start": 6.6, "duration": 3.3, "jobs": {"a": job(False, 0.5)}},  # a ended in this round
              {"start": 9.9, "duration": 1.0, "jobs": {}}]  # waiting for an arrival: not a round that ran jobs
    m = round_model(_report(rounds, {"a": 7.5, "b": 6.6}))
    assert m["round_seconds"] == pytest.approx(3.3)
    assert m["rate_scale"] == pytest.approx(3.0 / 3.3)
    assert m["launches"] == 3 and m["launch_seconds"] == pytest.approx(np.mean([0.4, 0.2, 0.8]))
    assert m["restore_seconds"] == pytest.approx(m["launch_seconds"] * 3.3 / 3.0)
    assert round_model(_report([], {"a": 1.0, "b": 1.0}))["launch_seconds"] is None


def test_rounds_model_in_the_simulator() -> None:
    pytest.importorskip("pandas")
    from policyopt.executor.fidelity import compare, simulate_run

    table = load_throughput_table(example_throughputs_path("small"))
    rounds = [{"start": 3.5 * i, "duration": 3.5, "jobs": {"a": {"renewed": i > 0, "train_seconds": 3.0 if i else 2.5},
                                                           "b": {"renewed": i > 0, "train_seconds": 3.0 if i else 2.5}}}
              for i in range(4)]
    report = _report(rounds, {"a": 20.0, "b": 20.0})
    nominal = simulate_run(report, table, model="nominal")
    model = simulate_run(report, table, model="rounds")
    assert nominal["model"] == "nominal" and nominal["round_seconds"] == 3.0 and nominal["rate_scale"] == 1.0
    assert nominal["restore_seconds"] == 0.2 and nominal["checkpoint_seconds"] == 0.1
    assert model["model"] == "rounds" and model["round_seconds"] == pytest.approx(3.5)
    assert model["restore_seconds"] == pytest.approx(0.5 * 3.5 / 3.0) and model["checkpoint_seconds"] == 0.0
    # two jobs on two workers, each alone on its own worker type for the whole run, no switch: the
    # rounds model trains 3 s of every 3.5 s round and pays its launch once
    for jid, jt in (("a", "lstm-bs10"), ("b", "resnet-bs32")):
        rates = table["job_types"][jt]["throughputs"]
        assert min(100 / r for r in rates.values()) > 0
        lower = 150 / max(rates.values())
        assert nominal["jct"][jid] >= lower - 1e-6 and model["jct"][jid] >= lower * 3.5 / 3.0 - 1e-6
    assert compare(report, model)["model"] == "rounds"
    with pytest.raises(InputError) as info:
        simulate_run(report, table, model="exact")
    assert info.value.field == "model"


def test_schedule_assignments_measure_each_predicted_round_as_it_is() -> None:
    slots = build_slots({"cpu1": 2, "cpu2": 2}, "auto", cores=[0, 1])
    a = [("resnet-bs32", 2, "cpu1"), ("lstm-bs10", 1, "cpu2")]
    b = [("lstm-bs10", 1, "cpu1"), ("transformer-bs16", 2, "cpu2")]
    plan = schedule_assignments(slots, [a, b, list(reversed(a)), [], a])
    assert [n for n, _ in plan] == [3, 1]  # distinct rounds, most frequent first; an empty round is none
    assert plan[0][1] == [(("lstm-bs10", 1, "cpu2"), (2,)), (("resnet-bs32", 2, "cpu1"), (0, 1))]  # slot 3 idles
    assert plan[1][1] == [(("lstm-bs10", 1, "cpu1"), (0,)), (("transformer-bs16", 2, "cpu2"), (2, 3))]
    with pytest.raises(InputError) as info:
        schedule_assignments(slots, [[("resnet-bs32", 2, "cpu1"), ("lstm-bs10", 1, "cpu1")]])
    assert info.value.field == "schedule"


def test_predicted_schedule_of_the_multi_example() -> None:
    pytest.importorskip("pandas")
    from policyopt.executor.spec import EXAMPLES, parse_jobs

    jobs = parse_jobs(EXAMPLES["multi"])
    config = ExecutorConfig(cluster="cpu1=2,cpu2=2", round_seconds=3.0)
    table = load_throughput_table(example_throughputs_path("multi"))
    rounds = predicted_schedule(jobs, config, table, {"cpu1": 2, "cpu2": 2})
    assert rounds and all(rounds)
    scale = {j.job_type: j.scale_factor for j in jobs}
    for r in rounds:  # whole jobs, on slots the cluster has
        assert all(k == scale[jt] for jt, k, _ in r)
        assert all(sum(k for _, k, t in r if t == wt) <= 2 for wt in ("cpu1", "cpu2"))
    plan = schedule_assignments(build_slots({"cpu1": 2, "cpu2": 2}, "auto", cores=[0, 1]), rounds)
    assert sum(n for n, _ in plan) == len(rounds)
