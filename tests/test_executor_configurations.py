"""Throughputs per configuration (:mod:`policyopt.executor.configurations`): the table's
``configurations`` list is validated naming the field, built from a busy profile's samples, and
prices each simulated round (exact configuration, else shared by threads, else the table); the
simulator's ``round_rates`` hook changes a run as its math says."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import pytest

from policyopt.errors import InputError
from policyopt.executor import ExecutorConfig
from policyopt.executor.configurations import (ConfigurationRates, configurations_from_samples,
                                               parse_configurations)
from policyopt.executor.spec import example_throughputs_path, load_throughput_table

pytest.importorskip("pandas")


def _table(configurations: Any) -> dict[str, Any]:
    return {"job_types": {"a": {}, "b": {}}, "worker_types": {"cpu1": {"threads": 1}, "cpu2": {"threads": 2}},
            "configurations": configurations}


def test_parse_configurations_sorts_members_and_names_bad_fields() -> None:
    out = parse_configurations(_table([{"jobs": [["b", 2, "cpu2"], ["a", 1, "cpu1"]], "throughputs": [7, 5],
                                        "samples": 2}]))
    assert out[0].jobs == (("a", 1, "cpu1"), ("b", 2, "cpu2")) and out[0].throughputs == (5.0, 7.0)
    assert out[0].samples == 2 and parse_configurations({"job_types": {}}) == []
    bad = [("nope", "throughputs.configurations"),
           ([3], "throughputs.configurations[0]"),
           ([{"jobs": [], "throughputs": []}], "throughputs.configurations[0].jobs"),
           ([{"jobs": [["a", 1, "cpu1"]], "throughputs": [1, 2]}], "throughputs.configurations[0].throughputs"),
           ([{"jobs": [["a", 0, "cpu1"]], "throughputs": [1]}], "throughputs.configurations[0].jobs[0]"),
           ([{"jobs": [["a", True, "cpu1"]], "throughputs": [1]}], "throughputs.configurations[0].jobs[0]"),
           ([{"jobs": [["zz", 1, "cpu1"]], "throughputs": [1]}], "throughputs.configurations[0].jobs[0]"),
           ([{"jobs": [["a", 1, "gpu"]], "throughputs": [1]}], "throughputs.configurations[0].jobs[0]"),
           ([{"jobs": [["a", 1, "cpu1"]], "throughputs": [float("nan")]}],
            "throughputs.configurations[0].throughputs[0]"),
           ([{"jobs": [["a", 1, "cpu1"]], "throughputs": [-1]}], "throughputs.configurations[0].throughputs[0]"),
           ([{"jobs": [["a", 1, "cpu1"]], "throughputs": [1], "samples": 0}], "throughputs.configurations[0].samples")]
    for raw, field in bad:
        with pytest.raises(InputError) as info:
            parse_configurations(_table(raw))
        assert info.value.field == field, raw


def test_load_throughput_table_rejects_a_bad_configuration(tmp_path: Path) -> None:
    table = load_throughput_table(example_throughputs_path("multi"))
    table["configurations"] = [{"jobs": [["lstm-bs10", 1, "cpu1"]], "throughputs": ["fast"]}]
    path = tmp_path / "t.json"
    path.write_text(json.dumps(table))
    with pytest.raises(InputError) as info:
        load_throughput_table(path)
    assert info.value.field == "throughputs.configurations[0].throughputs[0]"


def test_configurations_from_samples_pool_repeats_and_passes() -> None:
    def s(pass_: str, m: int, r: int, jt: str, k: int, wt: str, rate: float) -> dict[str, Any]:
        return {"pass": pass_, "measurement": m, "repeat": r, "job_type": jt, "scale_factor": k,
                "worker_type": wt, "slots": [], "rate": rate}

    samples = [s("busy", 0, 0, "b", 2, "cpu2", 6.0), s("busy", 0, 0, "a", 1, "cpu1", 4.0),
               s("busy", 0, 1, "b", 2, "cpu2", 8.0), s("busy", 0, 1, "a", 1, "cpu1", 6.0),
               s("schedule", 3, 0, "a", 1, "cpu1", 8.0), s("schedule", 3, 0, "b", 2, "cpu2", 10.0),
               s("busy", 1, 0, "a", 1, "cpu1", 3.0), s("busy", 1, 0, "a", 1, "cpu1", 5.0)]
    out = configurations_from_samples(samples)
    assert out == [{"jobs": [["a", 1, "cpu1"], ["a", 1, "cpu1"]], "throughputs": [4.0, 4.0],
                    "throughputs_std": [np.std([3.0, 5.0], ddof=1)] * 2, "samples": 1},
                   {"jobs": [["a", 1, "cpu1"], ["b", 2, "cpu2"]], "throughputs": [6.0, 8.0],
                    "throughputs_std": [2.0, 2.0], "samples": 3}]
    assert parse_configurations(_table(out))[1].samples == 3


def test_configuration_rates_exact_then_shared_then_table() -> None:
    table = _table([
        {"jobs": [["a", 1, "cpu1"], ["b", 2, "cpu2"]], "throughputs": [5, 7]},  # T = 1 + 2·2 = 5
        {"jobs": [["a", 1, "cpu1"]], "throughputs": [20]},  # T = 1
        {"jobs": [["a", 1, "cpu1"], ["a", 1, "cpu1"], ["b", 2, "cpu2"]], "throughputs": [3, 4, 6]},  # T = 6
        {"jobs": [["g", 1, "gpu"]], "throughputs": [50]}])
    table["job_types"]["g"] = {}
    table["worker_types"]["gpu"] = {"device": "cuda", "threads": 1}
    rates = ConfigurationRates(parse_configurations(table), table["worker_types"], scale=0.5, cores=2,
                               other_threads=1.0)
    # max(P, T + E) of the four configurations: 6, 2, 7 and 2 (a GPU slot's threads do not count)
    t = np.array([11.0, 13.0, 17.0])
    # exact: the measured rate, scaled; two equal members share their mean
    assert rates([("b#2", "cpu2"), ("a#1", "cpu1")], t[:2]).tolist() == [3.5, 2.5]
    assert rates([("a#1", "cpu1"), ("b#2", "cpu2"), ("a#1", "cpu1")], t).tolist() == [1.75, 3.0, 1.75]
    # shared: a beside an unmeasured c (T + E = 3): each rate of a, times its configuration's
    # max(P, T + E) / 3; c was never measured, so it keeps the table's rate
    got = rates([("a#1", "cpu1"), ("c#1", "cpu1")], t[:2]).tolist()
    assert got == [pytest.approx(0.5 * np.mean([5 * 6 / 3, 20 * 2 / 3, 3 * 7 / 3, 4 * 7 / 3])), 13.0]
    # b beside a GPU job (T + E = 5): from its two configurations; the GPU job is not shared by threads
    got = rates([("b#2", "cpu2"), ("x#1", "gpu")], t[:2]).tolist()
    assert got == [pytest.approx(0.5 * np.mean([7 * 6 / 5, 6 * 7 / 5])), 13.0]
    # a with g (T + E = 2: a core each, at most): g keeps the table's rate outside its exact configuration
    got = rates([("g#1", "gpu"), ("a#1", "cpu1")], t[:2]).tolist()
    assert got == [11.0, pytest.approx(0.5 * np.mean([5 * 6 / 2, 20 * 2 / 2, 3 * 7 / 2, 4 * 7 / 2]))]
    assert rates([("g#1", "gpu")], t[:1]).tolist() == [25.0]
    assert rates.used == {"exact": 6, "shared": 3, "table": 3}
    with pytest.raises(InputError) as info:
        ConfigurationRates([], cores=0)
    assert info.value.field == "cores"


def test_round_rates_hook_in_the_simulator() -> None:
    from policyopt.data.gavel import GavelThroughputs
    from policyopt.sim.simulator import SimConfig, Simulator
    from policyopt.sim.traces import TraceJob

    table = GavelThroughputs([("a", 1), ("b", 1)], ["cpu1"], np.array([[10.0], [10.0]]), np.zeros((2, 2, 1, 2)))
    cfg = SimConfig(round_seconds=1.0, restore_seconds=0.0, checkpoint_seconds=0.0, prices={"cpu1": 0.0},
                    gpus_per_server={"cpu1": 2})
    trace = [TraceJob("x", 0.0, "a#1", 1, 100.0), TraceJob("y", 0.0, "b#1", 1, 50.0)]
    seen: list[list[tuple[str, str]]] = []

    def together_faster(entries: Sequence[tuple[str, str]], rates: np.ndarray) -> np.ndarray:
        seen.append(sorted(entries))
        return rates * (2.0 if len(entries) == 2 else 1.0)

    plain = Simulator({"cpu1": 2}, cfg, table).run(trace).jobs
    hooked = Simulator({"cpu1": 2}, cfg, table, round_rates=together_faster).run(trace).jobs
    jct = dict(zip(plain["id"], plain["jct"]))
    assert jct == {"x": pytest.approx(10.0), "y": pytest.approx(5.0)}
    # together at 20 steps/s: y done at 2.5 s (its slot frees at the end of round 3), x then alone
    # at 10 steps/s: 60 steps by 3 s, 40 more from 3 s → 7 s
    jct = dict(zip(hooked["id"], hooked["jct"]))
    assert jct == {"x": pytest.approx(7.0), "y": pytest.approx(2.5)}
    assert seen[0] == [("a#1", "cpu1"), ("b#1", "cpu1")] and seen[-1] == [("a#1", "cpu1")]
    with pytest.raises(InputError) as info:
        Simulator({"cpu1": 2}, cfg, table, round_rates=lambda e, r: r[:1]).run(trace)
    assert info.value.field == "round_rates"


def test_simulate_run_prices_rounds_by_the_table_configurations() -> None:
    from policyopt.executor.fidelity import compare, simulate_run

    table = load_throughput_table(example_throughputs_path("small"))
    cfg = ExecutorConfig(cluster="cpu1=1,cpu2=1", round_seconds=3.0).to_dict()
    jobs = {jid: {"job_type": jt, "arrival": 0.0, "steps_required": 150, "jct": 1.5, "finish": 1.5,
                  "measured_throughputs": {}, "steps_by_type": {}}
            for jid, jt in (("a", "lstm-bs10"), ("b", "resnet-bs32"))}
    report = {"config": cfg, "jobs": jobs, "rounds": [],
              "summary": {"mean_startup_seconds": 0.0, "mean_stop_seconds": 0.0, "makespan": 1.5}}
    plain = simulate_run(report, table, model="nominal")
    assert plain["configuration_rates"] is None and plain["jct"]["a"] > 1.5
    table["configurations"] = [{"jobs": [["lstm-bs10", 1, a], ["resnet-bs32", 1, b]], "throughputs": [100, 100]}
                               for a, b in (("cpu1", "cpu2"), ("cpu2", "cpu1"))]
    sim = simulate_run(report, table, model="nominal")
    # both jobs run in the first round, each at the measured 100 steps/s of that configuration
    assert sim["jct"] == {"a": pytest.approx(1.5), "b": pytest.approx(1.5)}
    assert sim["configuration_rates"] == {"exact": 2, "shared": 0, "table": 0}
    assert compare(report, sim)["makespan"]["difference_pct"] == pytest.approx(0.0, abs=1e-9)
    assert simulate_run(report, table, model="nominal", configurations=False)["jct"] == plain["jct"]
    assert simulate_run(report, table, model="nominal", measured_throughputs=True)["configuration_rates"] is None


class _FakeBackend:
    """Workers that report, at once, ``60 / (processes of their measurement)`` steps/s over 1 s."""

    name = "fake"

    def __init__(self) -> None:
        from policyopt.executor.backends import ProcessHandle

        self._handle = ProcessHandle
        self.launches: dict[str, list[Any]] = {}
        self.renewed: set[str] = set()

    def start(self, launch: Any) -> Any:
        self.launches.setdefault(launch.job_id.rsplit("-", 1)[0], []).append(launch)
        return self._handle(launch.job_id, launch.launch_id, 0, None, 0.0, launch.progress_file, launch.lease_file,
                            launch.log_file, launch.workers, rank=launch.rank)

    def rendezvous(self, worker_id: str) -> tuple[str, int]:
        return "127.0.0.1", 1

    def renew(self, handle: Any, lease: Any) -> None:
        self.renewed.add(handle.job_id)

    def poll(self, handle: Any) -> int | None:
        return 0 if handle.job_id in self.renewed else None

    def progress(self, handle: Any) -> dict[str, Any]:
        rate = 60.0 / len(self.launches[handle.job_id.rsplit("-", 1)[0]])
        return {"status": "lease_ended", "steps_done": int(rate), "steps_this_session": int(rate),
                "train_seconds": 1.0, "steady_steps_per_s": rate}

    def kill(self, handle: Any) -> None:
        raise AssertionError("every fake worker ends by itself")

    def log_tail(self, handle: Any, lines: int = 5) -> str:
        return ""

    def close(self) -> None:
        pass


def test_schedule_profile_completes_the_configurations_of_the_final_prediction(tmp_path: Path) -> None:
    from policyopt.executor.busyprofile import profile_busy
    from policyopt.executor.cluster import build_slots

    one = [("lstm-bs10", 1, "cpu1")]
    two = [("lstm-bs10", 1, "cpu1"), ("recommendation-bs128", 1, "cpu1")]
    tables: list[dict[str, Any]] = []

    def schedule(table: dict[str, Any]) -> list[list[tuple[str, int, str]]]:
        tables.append(table)  # first the busy table; then the table with the schedule pass in it
        return [one, one] if len(tables) == 1 else [one, two, one]

    table = profile_busy({"cpu1": 3}, [("lstm-bs10", 1), ("recommendation-bs128", 1)], tmp_path,
                         seconds_per_run=0.01, repeats=2, backend=_FakeBackend(),  # type: ignore[arg-type]
                         slots=build_slots({"cpu1": 3}, "off", cores=[0, 1]), schedule=schedule)
    under = table["meta"]["under_load"]
    assert under["schedule"] == [{"rounds": 2, "slots": ["lstm-bs10#1@cpu1-0"]}]
    # the second prediction's new round (lstm beside recommendation, one slot idle) is measured;
    # lstm alone was measured already and is not measured again
    assert under["completed"] == [{"rounds": 1, "slots": ["lstm-bs10#1@cpu1-0", "recommendation-bs128#1@cpu1-1"]}]
    assert [s["pass"] for s in under["samples"]].count("complete") == 4  # 2 processes × 2 repeats
    configs = {tuple(map(tuple, c["jobs"])): c for c in table["configurations"]}
    assert configs[tuple(one)]["throughputs"] == [60.0] and configs[tuple(one)]["samples"] == 2
    assert configs[tuple(sorted(two))]["throughputs"] == [30.0, 30.0]
    assert len(configs) == 3  # and the busy pass's: three one-worker processes, every slot busy
    # the per-type rows the policy sees: the schedule pass for lstm, the busy pass for recommendation
    assert table["job_types"]["lstm-bs10"]["throughputs"]["cpu1"] == 60.0
    assert table["job_types"]["recommendation-bs128"]["throughputs"]["cpu1"] == 20.0
    assert tables[1]["configurations"] and tables[1]["job_types"] == table["job_types"]
