"""Executor pieces without training: cluster slots, job lists, config, state, allocation clipping,
problem building, report arithmetic and the simulator bridge (fast; no worker processes)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from policyopt.errors import InputError, UnknownNameError
from policyopt.executor.cluster import build_slots, parse_cluster
from policyopt.executor.executor import Executor, ExecutorConfig
from policyopt.executor.planning import RoundPlacer, build_problem, mechanism_allocation
from policyopt.executor.spec import EXAMPLES, check_table, example_throughputs_path, load_throughput_table, parse_jobs
from policyopt.executor.state import ExecutorState, JobRecord
from policyopt.mechanism import RoundMechanism


def test_parse_cluster_and_errors() -> None:
    assert parse_cluster("cpu1=1, cpu2=2") == {"cpu1": 1, "cpu2": 2}
    assert list(parse_cluster({"h100": 1, "cpu1": 0})) == ["h100", "cpu1"]
    for bad, field in [("cpu1", "cluster"), ("cpu1=x", "cluster.cpu1"), ("cpu1=1,cpu1=2", "cluster.cpu1"),
                       ("CPU1=1", "cluster.CPU1"), ("cpu1=0", "cluster")]:
        with pytest.raises(InputError) as info:
            parse_cluster(bad)
        assert info.value.field == field


def test_slots_pin_only_when_threads_fit() -> None:
    fit = build_slots({"cpu1": 2, "cpu2": 1}, "auto", cores=[0, 1, 2, 3])
    assert [s.cores for s in fit] == [(0,), (1,), (2, 3)]
    assert [s.worker_id for s in fit] == ["cpu1-0", "cpu1-1", "cpu2-0"]
    assert [s.threads for s in fit] == [1, 1, 2]
    over = build_slots({"cpu1": 1, "cpu2": 1}, "auto", cores=[0, 1])  # 3 threads on 2 cores
    assert all(s.cores is None for s in over)
    forced = build_slots({"cpu1": 1, "cpu2": 1}, "on", cores=[0, 1])
    assert [s.cores for s in forced] == [(0,), (0, 1)]
    gpu = build_slots({"h100": 2, "cpu1": 1}, "auto", cores=[0, 1], cuda_types={"h100": [0, 1]})
    assert [s.device for s in gpu] == ["cuda:0", "cuda:1", "cpu"]
    with pytest.raises(InputError) as info:
        build_slots({"a100": 1}, cuda_types={})
    assert info.value.field == "cluster.a100"


def test_parse_jobs_errors_name_the_field() -> None:
    jobs = parse_jobs({"jobs": [{"id": 1, "job_type": "lstm-bs10", "steps": 10, "arrival": 2}]})
    assert jobs[0].id == "1" and jobs[0].arrival == 2.0 and jobs[0].seed == 0
    cases = [
        ([{"id": "a", "job_type": "lstm-bs10", "steps": 0}], "jobs[0].steps"),
        ([{"id": "a", "job_type": "lstm-bs10", "steps": 5}, {"id": "a", "job_type": "lstm-bs10", "steps": 5}],
         "jobs[1].id"),
        ([{"id": "a", "job_type": "lstm-bs10", "steps": 5, "arrival": -1}], "jobs[0].arrival"),
        ([{"id": "a", "job_type": "lstm-bs10", "steps": 5, "colour": 1}], "jobs[0].colour"),
        ([{"id": "a", "steps": 5}], "jobs[0].job_type"),
        ([], "jobs"),
    ]
    for data, field in cases:
        with pytest.raises(InputError) as info:
            parse_jobs(data)
        assert info.value.field == field
    with pytest.raises(UnknownNameError) as unknown:
        parse_jobs([{"id": "a", "job_type": "vgg-bs1", "steps": 5}])
    assert unknown.value.field == "jobs[0].job_type"


def test_shipped_table_covers_the_small_example() -> None:
    table = load_throughput_table(example_throughputs_path("small"))
    jobs = parse_jobs(EXAMPLES["small"])
    check_table(table, jobs, ["cpu1", "cpu2"])
    assert 3 <= len(jobs) <= 4
    assert table["meta"]["repeats"] >= 2  # noise recorded
    with pytest.raises(InputError) as info:
        check_table(table, jobs, ["cpu1", "h100"])
    assert info.value.field.endswith(".throughputs.h100")


def test_config_validation() -> None:
    cfg = ExecutorConfig(cluster="cpu1=1,cpu2=1", round_seconds=2)
    assert cfg.interval == 2 and cfg.checkpoint_every == 1.0
    for kwargs, field in [({"round_seconds": 0}, "round_seconds"), ({"max_restarts": -1}, "max_restarts"),
                          ({"pin": "maybe"}, "pin"), ({"checkpoint_interval": float("nan")}, "checkpoint_interval")]:
        with pytest.raises(InputError) as info:
            ExecutorConfig(cluster="cpu1=1", **kwargs)
        assert info.value.field == field
    with pytest.raises(UnknownNameError):
        ExecutorConfig(cluster="cpu1=1", policy="no_such_policy")
    assert ExecutorConfig.from_dict(cfg.to_dict()) == cfg


def test_mechanism_allocation_clips_rows_and_columns() -> None:
    alloc = {"a": {"cpu1": 0.7, "cpu2": 0.4}, "b": {"cpu1": 0.6, "cpu2_unconsolidated": 0.1}, "c": {}}
    pairs = [{"jobs": ["c", "b"], "worker_type": "cpu2", "fraction": 0.5}]
    x, coloc = mechanism_allocation(alloc, pairs, {"cpu1": 1, "cpu2": 1}, {"a": 1, "b": 1, "c": 1})
    rows = {j: sum(r.values()) for j, r in x.items()}
    rows["b"] += coloc[0]["fraction"]
    rows["c"] += coloc[0]["fraction"]
    assert all(v <= 1 + 1e-12 for v in rows.values())
    assert x["a"]["cpu1"] + x["b"]["cpu1"] <= 1 + 1e-12
    assert x["a"]["cpu2"] + x["b"]["cpu2"] + coloc[0]["fraction"] <= 1 + 1e-12
    assert x["b"]["cpu2"] > 0  # the unconsolidated variant was folded into cpu2
    mech = RoundMechanism({"cpu1": 1, "cpu2": 1}, round_length=2.0)
    mech.set_allocation(x, coloc, {"a": 1, "b": 1, "c": 1})  # accepted


def test_problem_and_placement_on_slots() -> None:
    table = load_throughput_table(example_throughputs_path("small"))
    jobs = [{"id": f"j{i}", "job_type": t, "weight": 1.0, "steps_remaining": 100, "time_since_start": 0.0,
             "arrival": 0.0, "throughputs": table["job_types"][t]["throughputs"]}
            for i, t in enumerate(["lstm-bs10", "resnet-bs32", "lstm-bs10"])]
    problem = build_problem({"cpu1": 1, "cpu2": 1}, jobs, table, space_sharing=True)
    assert len(problem.jobs) == 3
    assert len(problem.colocated) == 3 * 2  # every pair of the three jobs on both worker types
    from policyopt.policy import get_policy

    result = get_policy("max_min_fairness").solve(build_problem({"cpu1": 1, "cpu2": 1}, jobs, table))
    x, coloc = mechanism_allocation(result.allocation, result.colocated_allocation, {"cpu1": 1, "cpu2": 1},
                                    {j["id"]: 1 for j in jobs})
    mech = RoundMechanism({"cpu1": 1, "cpu2": 1}, round_length=2.0)
    mech.set_allocation(x, coloc, {j["id"]: 1 for j in jobs})
    placer = RoundPlacer({"cpu1": [[0]], "cpu2": [[1]]})
    first = placer.place(mech, {}, [])
    assert len(first.assignment) == 2 and sorted(g for gs in first.assignment.values() for g in gs) == [0, 1]
    mech.record_round(first.selection)
    second = placer.place(mech, first.assignment, first.pairs)
    kept = [j for j in second.assignment if j in first.assignment]
    assert all(second.assignment[j] == first.assignment[j] or j in second.migrated for j in kept)


def test_state_round_trip_and_resume_checks(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    state = ExecutorState(path)
    assert state.is_new()
    table = load_throughput_table(example_throughputs_path("small"))
    jobs = parse_jobs(EXAMPLES["small"])
    cfg = ExecutorConfig(cluster="cpu1=1,cpu2=1", round_seconds=2.0)
    ex = Executor(state, jobs, cfg, table, tmp_path / "run")
    assert not state.is_new() and ex.round_index == 0 and ex.time == 0.0
    rec = state.jobs()["lstm"]
    assert isinstance(rec, JobRecord) and rec.steps_required == 240 and rec.status == "pending"
    rec.steps_done, rec.initial_loss, rec.process = 17, 4.0, {"pid": 1, "workers": ["cpu1-0"]}
    state.save_jobs([rec])
    state.put("time", 12.5)
    state.event(1.0, "crash", "lstm", {"code": -9})
    state.close()
    again = ExecutorState(path)
    back = again.jobs()["lstm"]
    assert (back.steps_done, back.initial_loss, back.process) == (17, 4.0, {"pid": 1, "workers": ["cpu1-0"]})
    assert again.get("time") == 12.5 and again.events("crash")[0]["detail"] == {"code": -9}
    with pytest.raises(InputError) as info:
        Executor(again, jobs, ExecutorConfig(cluster="cpu1=1,cpu2=1", round_seconds=3.0), table, tmp_path / "run")
    assert info.value.field == "round_seconds"
    with pytest.raises(InputError) as info:
        Executor(again, jobs[:2], cfg, table, tmp_path / "run")
    assert info.value.field == "jobs"
    resumed = Executor(again, jobs, cfg)  # same settings: resumes
    assert resumed.time == 12.5 and resumed.jobs["lstm"].steps_done == 17
    with pytest.raises(InputError) as info:
        Executor(ExecutorState(tmp_path / "empty.sqlite"))
    assert info.value.field == "state"


def test_finish_time_fairness_carries_isolated_time_across_recomputes(tmp_path: Path,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor poses each job's cumulative isolated time ``c_m`` (0 at its first call, then
    ``c_m + (s_prev - s) / thr_prev`` with the previous call's isolated throughput), as the simulator
    does, and keeps it in the state file across a restart."""
    import policyopt.executor.executor as E

    table = load_throughput_table(example_throughputs_path("small"))
    jobs = parse_jobs(EXAMPLES["small"])
    cfg = ExecutorConfig(cluster="cpu1=1,cpu2=1", round_seconds=2.0, policy="finish_time_fairness")
    ex = Executor(ExecutorState(tmp_path / "s.sqlite"), jobs, cfg, table, tmp_path / "run")
    posed: list[list[dict]] = []
    real = E.build_problem
    monkeypatch.setattr(E, "build_problem", lambda *a, **k: posed.append(list(a[1])) or real(*a, **k))
    import policyopt.policy as P

    made: list[str] = []
    real_get = P.get_policy
    monkeypatch.setattr(P, "get_policy", lambda name, **o: made.append(name) or real_get(name, **o))
    ex._refresh_topology(0.0)
    ex._admit(0.0)
    active = [r for r in ex.jobs.values() if r.status == "active"]
    assert len(active) == 3  # the fourth job arrives at 4 s
    assert ex._maybe_recompute(0.0, active) is not None
    assert all(j["isolated_time"] == 0.0 for j in posed[-1])
    saved = ex.state.get("isolated_time")
    rates = {j: v[1] for j, v in saved["prev"].items()}
    assert set(rates) == {r.job_id for r in active} and all(v > 0 for v in rates.values())
    for r in active:
        r.steps_done += 30
    ex.mech = None  # recompute now
    assert ex._maybe_recompute(4.0, active) is not None
    second = {j["id"]: j["isolated_time"] for j in posed[-1]}
    assert second == pytest.approx({j: 30 / v for j, v in rates.items()}, rel=1e-12)
    problem = real(dict(ex.placer.counts), posed[-1], table)
    assert {j.id: j.isolated_time for j in problem.jobs} == pytest.approx(second, rel=1e-12)
    assert made == ["finish_time_fairness"]  # one policy object per run (memory, warm starts)
    again = Executor(ExecutorState(tmp_path / "s.sqlite"), jobs, cfg)
    assert again.isolated.to_state() == ex.isolated.to_state()


def test_simulator_bridge_on_a_synthetic_report() -> None:
    pytest.importorskip("pandas")
    from policyopt.executor.fidelity import compare, simulate_run, table_from_profile

    table = load_throughput_table(example_throughputs_path("small"))
    gavel = table_from_profile(table, ["cpu1", "cpu2"], ["lstm-bs10", "resnet-bs32"])
    assert gavel.alone.shape == (2, 2)
    assert np.isclose(gavel.alone[0, 1], table["job_types"]["lstm-bs10"]["throughputs"]["cpu2"])
    assert gavel.paired[0, 1, 0, 0] > 0 and gavel.paired[0, 1, 0, 0] == gavel.paired[1, 0, 0, 1]
    cfg = ExecutorConfig(cluster="cpu1=1,cpu2=1", round_seconds=2.0).to_dict()
    report = {"config": cfg, "summary": {"mean_startup_seconds": 0.2, "mean_stop_seconds": 0.1, "makespan": 10.0},
              "jobs": {"a": {"job_type": "lstm-bs10", "arrival": 0.0, "steps_required": 100, "jct": 9.0,
                             "measured_throughputs": {}, "steps_by_type": {}},
                       "b": {"job_type": "resnet-bs32", "arrival": 0.0, "steps_required": 100, "jct": 10.0,
                             "measured_throughputs": {}, "steps_by_type": {}}}}
    sim = simulate_run(report, table)
    # two jobs on two workers, each alone on its better type: JCT ≥ steps / best throughput
    for jid, jt in (("a", "lstm-bs10"), ("b", "resnet-bs32")):
        best = max(table["job_types"][jt]["throughputs"].values())
        assert sim["jct"][jid] >= 100 / best - 1e-6
    out = compare(report, sim)
    assert out["makespan"]["simulated"] == pytest.approx(max(sim["jct"].values()))
    expected = 100 * (10.0 - out["makespan"]["simulated"]) / out["makespan"]["simulated"]
    assert out["makespan"]["difference_pct"] == pytest.approx(expected)


def test_report_json_is_plain(tmp_path: Path) -> None:
    from policyopt.executor.report import build_report, write_report

    state = ExecutorState(tmp_path / "s.sqlite")
    Executor(state, parse_jobs(EXAMPLES["small"]), ExecutorConfig(cluster="cpu1=1,cpu2=1"),
             load_throughput_table(example_throughputs_path("small")), tmp_path / "run")
    state.add_round(0, 0.0, 2.0, {"jobs": {}, "busy_seconds": 3.0, "slots": 2, "allocated_fraction": 1.0,
                                  "busy_fraction": 0.75, "recomputed": True, "migrated": []})
    report = build_report(state, status="stopped")
    assert report["summary"]["utilization"] == pytest.approx(0.75)
    assert report["summary"]["makespan"] is None and report["summary"]["completed"] == 0
    path = write_report(report, tmp_path / "out")
    assert json.loads(path.read_text())["jobs"]["lstm"]["steps_required"] == 240


def test_cli_rejects_bad_input_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policyopt.executor.cli import main

    base = ["run", "--policy", "max_min_fairness", "--round-seconds", "2", "--state", str(tmp_path / "s.sqlite"),
            "--output", str(tmp_path / "out"), "--quiet"]
    assert main([*base, "--example", "small", "--cluster", "cpu1=one"]) == 2
    assert "cluster.cpu1" in capsys.readouterr().err
    (tmp_path / "jobs.json").write_text(json.dumps({"jobs": [{"id": "a", "job_type": "lstm-bs10", "steps": -3}]}))
    assert main([*base, "--jobs", str(tmp_path / "jobs.json"), "--cluster", "cpu1=1"]) == 2
    assert "jobs[0].steps" in capsys.readouterr().err
    assert main([*base, "--jobs", str(tmp_path / "missing.json"), "--cluster", "cpu1=1"]) == 2
    assert "file not found" in capsys.readouterr().err
    assert main([*base, "--example", "small", "--cluster", "cpu1=1,cpu3=1"]) == 2  # not in the shipped table
    assert "--throughputs" in capsys.readouterr().err
    # a 2-worker job on a cluster without two workers of a type: no table helps, and none is asked for
    assert main([*base, "--example", "multi", "--cluster", "cpu1=1,cpu2=1"]) == 2
    err = capsys.readouterr().err
    assert "scale_factor: needs 2 workers of one type; the cluster has at most 1" in err
    assert "--throughputs" not in err
    assert not (tmp_path / "out" / "report.json").exists()


def test_live_display_renders_a_snapshot() -> None:
    import io

    from rich.console import Console

    from policyopt.executor.report import LineDisplay, LiveDisplay

    snapshot = {"round": 3, "time": 7.5, "left": 1.2, "policy": "max_min_fairness",
                "jobs": [{"id": "a", "job_type": "lstm-bs10", "status": "active", "worker": "cpu1-0",
                          "steps_done": 40, "steps_required": 100, "loss": 2.5, "initial_loss": 4.0,
                          "restarts": 1, "error": None},
                         {"id": "b", "job_type": "resnet-bs32", "status": "failed", "worker": "",
                          "steps_done": 0, "steps_required": 50, "loss": None, "initial_loss": None,
                          "restarts": 3, "error": "exit status 2: cannot pin"}]}
    buffer = io.StringIO()
    live = LiveDisplay(Console(file=buffer, force_terminal=True, width=140))
    live.update(snapshot)
    live.close()
    text = buffer.getvalue()
    assert "round 3" in text and "40/100" in text and "cannot pin" in text
    lines = io.StringIO()
    LineDisplay(lines).update(snapshot)
    assert lines.getvalue().startswith("[round 3 t=7.5s] a 40/100@cpu1-0")


def test_multi_worker_jobs_are_placed_whole_consolidated_or_spread() -> None:
    """A 2-worker job takes both slots of a type at once (all or nothing): on one machine when one
    has two free slots of the type, else spread over machines (the executor's slot ids come back)."""
    from policyopt.executor.topology import Topology

    slots = build_slots({"cpu1": 2, "cpu2": 2}, pin="off")
    topo = Topology(slots)
    assert topo.update({"cpu1-0": "a", "cpu1-1": "b", "cpu2-0": "a", "cpu2-1": "a"}, 0.0) == ([], [])
    assert topo.servers() == {"cpu1": [[0], [1]], "cpu2": [[2, 3]]}
    placer = RoundPlacer(topo.servers())
    assert placer.counts == {"cpu1": 2, "cpu2": 2} and placer.gpus_per_server == {"cpu1": 1, "cpu2": 2}
    mech = RoundMechanism(placer.counts, round_length=2.0)
    mech.set_allocation({"big": {"cpu1": 0.5, "cpu2": 0.5}, "one": {"cpu1": 0.5}, "two": {"cpu2": 0.5}},
                        (), {"big": 2, "one": 1, "two": 1})
    placed = placer.place(mech, {}, [])
    big = placed.assignment.get("big")
    assert big is not None and len(big) == 2
    assert (big == [0, 1]) == ("big" in placed.spread)   # cpu1 slots are on two machines: spread
    assert big in ([0, 1], [2, 3])
    assert all(len(v) == 1 for j, v in placed.assignment.items() if j != "big")
    # a node dies: its slots leave, the event lists them
    lost, added = topo.update({"cpu1-0": "a", "cpu2-0": "a", "cpu2-1": "a"}, 5.0)
    assert (lost, added) == ([1], [])
    assert topo.counts() == {"cpu1": 1, "cpu2": 2}
    topo.note_job([1], "big", 40)
    assert topo.note_resumed("big", 7) and not topo.note_resumed("big", 3)
    assert topo.events[-1] == {"time": 5.0, "event": "lost", "slot": "cpu1-1", "worker_type": "cpu1", "node": "b",
                               "jobs": {"big": {"steps_done_at_loss": 40, "steps_lost": 7}}}
    assert topo.update({"cpu1-0": "a", "cpu1-1": "c", "cpu2-0": "a", "cpu2-1": "a"}, 9.0) == ([], [1])
    assert topo.servers()["cpu1"] == [[0], [1]] and topo.events[-1]["node"] == "c"
    restored = Topology.from_state(slots, topo.to_state())
    assert restored.servers() == topo.servers() and restored.events == topo.events


def test_scale_factor_jobs_and_their_table_rows() -> None:
    from policyopt.executor.planning import job_throughputs
    from policyopt.executor.spec import check_table

    table = load_throughput_table(example_throughputs_path("multi"))
    jobs = parse_jobs(EXAMPLES["multi"])
    assert sorted(j.scale_factor for j in jobs) == [1, 1, 2, 2]
    check_table(table, jobs, ["cpu1", "cpu2"])
    thr = job_throughputs(table, "resnet-bs32", ["cpu1", "cpu2"], None, 2)
    row = table["job_types"]["resnet-bs32"]["scale_factors"]["2"]["throughputs"]
    assert thr == {"cpu1": row["cpu1"], "cpu2": row["cpu2"], "cpu1_unconsolidated": row["cpu1"],
                   "cpu2_unconsolidated": row["cpu2"]}
    with pytest.raises(InputError, match=r"scale_factors.4.*--plans dp4-ga1-gc0"):
        check_table(table, parse_jobs([{"id": "x", "job_type": "resnet-bs32", "steps": 5, "scale_factor": 4}]),
                    ["cpu1"])
    with pytest.raises(InputError, match=r"jobs\[0\]\.scale_factor"):
        parse_jobs([{"id": "x", "job_type": "lstm-bs10", "steps": 5, "scale_factor": 3}])  # 10 % 3 != 0
    with pytest.raises(InputError, match=r"jobs\[0\]\.scale_factor"):
        parse_jobs([{"id": "x", "job_type": "lstm-bs10", "steps": 5, "scale_factor": 0}])
    # the policy sees the scale factor; a 2-worker job cannot use the consolidated column of a type
    # whose machines hold one slot each, only the unconsolidated one
    problem_jobs = [{"id": j.id, "job_type": j.job_type, "weight": 1.0, "steps_remaining": j.steps,
                     "time_since_start": 0.0, "arrival": 0.0, "scale_factor": j.scale_factor,
                     "throughputs": job_throughputs(table, j.job_type, ["cpu1", "cpu2"], None, j.scale_factor)}
                    for j in jobs]
    problem = build_problem({"cpu1": 2, "cpu2": 2}, problem_jobs, table, gpus_per_server={"cpu1": 1, "cpu2": 2})
    from policyopt.policy import get_policy

    result = get_policy("max_min_fairness").solve(problem)
    alloc = result.allocation
    assert all(alloc[j.id].get("cpu1", 0.0) < 1e-9 for j in jobs if j.scale_factor == 2)
    x, coloc = mechanism_allocation(alloc, result.colocated_allocation, {"cpu1": 2, "cpu2": 2},
                                    {j.id: j.scale_factor for j in jobs})
    used = {t: sum(x[j.id][t] * j.scale_factor for j in jobs) for t in ("cpu1", "cpu2")}
    assert all(v <= 2 + 1e-9 for v in used.values())


def test_k_worker_rows_are_needed_only_for_types_with_k_workers() -> None:
    """A 2-worker job can never run on a type with one worker (one GPU beside CPU slots): its row
    for that type may be absent; with two such workers it must be there."""
    from policyopt.executor.spec import check_table

    table = load_throughput_table(example_throughputs_path("multi"))
    for row in table["job_types"].values():
        row["throughputs"]["h100"] = 2 * row["throughputs"]["cpu2"]  # alone rows only, no K = 2 row
    jobs = parse_jobs(EXAMPLES["multi"])
    check_table(table, jobs, {"cpu1": 2, "cpu2": 2, "h100": 1})
    with pytest.raises(InputError, match=r"scale_factors\.2\.throughputs\.h100"):
        check_table(table, jobs, {"cpu1": 2, "cpu2": 2, "h100": 2})
    with pytest.raises(InputError, match=r"scale_factor.*needs 2 workers of one type; the cluster has at most 1"):
        check_table(table, jobs, {"cpu1": 1, "h100": 1})
