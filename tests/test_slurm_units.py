"""The Slurm controller's parts that need no Slurm: parsing, opt-in, throughput tables, state,
and one controller round against a scripted stand-in for Slurm's commands."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from policyopt.cli import main
from policyopt.errors import InputError
from policyopt.policy import get_policy
from policyopt.mechanism import RoundMechanism
from policyopt.slurm.audit import (
    Snapshot,
    deliverable_seconds,
    expected_seconds,
    gpu_indices,
    gpu_seconds,
    overcommit,
    start_delays,
    start_losses,
    stop_delays,
    transition_gaps,
)
from policyopt.slurm.controller import Controller, ControllerConfig, poll_interval, start_estimate
from policyopt.slurm.mapping import managed_job, parse_opt_in, parse_weights
from policyopt.slurm.slurmcmd import (
    SlurmJob,
    SlurmNode,
    expand_nodelist,
    gpus_requested,
    parse_gres,
    parse_squeue_json,
)
from policyopt.slurm.state import StateStore
from policyopt.slurm.throughputs import load_throughputs


def test_nodelists_and_gres() -> None:
    assert expand_nodelist("k1,v[1-2]") == ["k1", "v1", "v2"]
    assert expand_nodelist("n[08-10],gpu[1,3]x") == ["n08", "n09", "n10", "gpu1x", "gpu3x"]
    assert expand_nodelist("") == []
    assert parse_gres("gpu:v100:2(S:0),nic:1") == {"v100": 2}
    assert parse_gres("gpu:4") == {"": 4}
    assert gpu_indices("gpu:v100:2(IDX:0-1)") == ("v100", 2, [0, 1])
    assert gpu_indices("gpu:k80:1(IDX:1)") == ("k80", 1, [1])


@pytest.mark.parametrize("record, expected", [
    ({"tres_per_job": "gres:gpu:4"}, (4, None)),
    ({"tres_per_job": "gres:gpu:v100:2"}, (2, "v100")),
    ({"tres_per_node": "gres:gpu:2", "node_count": 3}, (6, None)),
    ({"tres_per_task": "gres:gpu:1", "tasks": 2}, (2, None)),
    ({"tres_per_job": "", "tres_per_node": ""}, (0, None)),
])
def test_gpus_requested(record: dict[str, Any], expected: tuple[int, str | None]) -> None:
    assert gpus_requested(record) == expected


def test_squeue_json_record() -> None:
    # the fields of a Slurm 22.05 `squeue --json` job record that the controller reads
    data = {"jobs": [{"job_id": 7, "name": "x", "user_name": "ana", "partition": "gpu", "job_state": "RUNNING",
                      "state_reason": "None", "comment": "policyopt:type=lstm-bs10", "account": "", "qos": "",
                      "nodes": "v[1-2]", "tres_per_job": "gres:gpu:4", "node_count": 2, "features": "v100",
                      "submit_time": 10, "start_time": 12, "end_time": 0, "restart_cnt": 2, "priority": 5}]}
    (job,) = parse_squeue_json(data)
    assert job.job_id == "7" and job.nodes == ("v1", "v2") and job.gpus == 4 and job.active and not job.held
    assert job.restarts == 2 and job.start_time == 12.0


def test_opt_in(tmp_path: Path) -> None:
    assert parse_opt_in("") is None and parse_opt_in("my comment") is None and parse_opt_in("policyoptx") is None
    assert parse_opt_in("policyopt").job_type is None  # type: ignore[union-attr]
    spec = parse_opt_in("policyopt:type=lstm-bs10,steps=300,weight=2")
    assert spec is not None and (spec.job_type, spec.steps, spec.weight) == ("lstm-bs10", 300.0, 2.0)
    f = tmp_path / "job.json"
    f.write_text(json.dumps({"type": "resnet-bs32", "steps": 50}))
    spec = parse_opt_in(f"policyopt:file={f}")
    assert spec is not None and (spec.job_type, spec.steps) == ("resnet-bs32", 50.0)
    with pytest.raises(InputError, match="comment"):
        parse_opt_in("policyopt:kind=x")
    with pytest.raises(InputError, match="comment.steps"):
        parse_opt_in("policyopt:type=a,steps=-1")
    with pytest.raises(InputError, match="comment.file"):
        parse_opt_in(f"policyopt:file={tmp_path / 'missing.json'}")
    assert parse_weights(["qos:high=2", "account:phys=0.5"]) == {"qos:high": 2.0, "account:phys": 0.5}
    with pytest.raises(InputError, match="--weight"):
        parse_weights(["high=2"])


def _job(jid: str, comment: str, gpus: int = 1, state: str = "PENDING", reason: str = "JobHeldUser",
         nodes: tuple[str, ...] = (), qos: str = "", gpu_type: str | None = None, start: float = 0.0) -> SlurmJob:
    return SlurmJob(jid, "j", "u", "gpu", state, reason, comment, "", qos, nodes, gpus, gpu_type, "",
                    100.0, start, 0.0, 0, 0 if reason.startswith("JobHeld") else 1)


def test_managed_job_mapping() -> None:
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}}
    assert managed_job(_job("1", "hello"), table, ["k80", "v100"], {}) is None
    mj = managed_job(_job("1", "policyopt:type=lstm-bs10", gpus=2, qos="high"), table, ["k80", "v100"],
                     {"qos:high": 3.0})
    assert mj is not None and mj.throughputs == {"k80": 5.0, "v100": 10.0} and mj.gpus == 2 and mj.weight == 3.0
    agnostic = managed_job(_job("2", "policyopt:type=unknown"), table, ["k80", "v100"], {})
    assert agnostic is not None and agnostic.job_type is None and agnostic.throughputs == {"k80": 1.0, "v100": 1.0}
    pinned = managed_job(_job("3", "policyopt:type=lstm-bs10", gpu_type="k80"), table, ["k80", "v100"], {})
    assert pinned is not None and pinned.throughputs == {"k80": 5.0, "v100": 0.0}
    with pytest.raises(InputError, match="gpus"):
        managed_job(_job("4", "policyopt", gpus=0), table, ["k80"], {})


def test_throughput_formats(tmp_path: Path, gavel_dir: Path) -> None:
    prof = tmp_path / "throughputs.json"
    prof.write_text(json.dumps({"job_types": {"a": {"throughputs": {"v100": 3.0, "k80": 1}}}, "worker_types": {}}))
    assert load_throughputs(prof) == {"a": {"v100": 3.0, "k80": 1.0}}
    gavel = load_throughputs(gavel_dir / "simulation_throughputs.json")
    assert gavel["ResNet-18 (batch size 16)"]["k80"] == pytest.approx(4.795294551566172)
    assert "ResNet-18 (batch size 16)#1" in gavel and any(k.endswith("#4") for k in gavel)
    assert all("unconsolidated" not in t for row in gavel.values() for t in row)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"job_types": {"a": {"throughputs": {"v100": -1}}}}))
    with pytest.raises(InputError, match="throughputs.job_types.a.throughputs.v100"):
        load_throughputs(bad)
    with pytest.raises(InputError, match="--throughputs"):
        load_throughputs(tmp_path / "none.json")


class FakeSlurm:
    """A scripted stand-in for :class:`policyopt.slurm.slurmcmd.Slurm`: fixed nodes and jobs, and a
    record of every change asked for."""

    dry_run = False

    def __init__(self, jobs: list[SlurmJob]) -> None:
        self._jobs = jobs
        self.calls: list[tuple[str, list[str]]] = []
        self.types: dict[str, str] = {}  # job -> the GPU type it was placed on

    def nodes(self, partitions: list[str]) -> list[SlurmNode]:
        return [SlurmNode("v1", "v100", 2, "idle"), SlurmNode("k1", "k80", 2, "mix")]

    def jobs(self, partitions: list[str]) -> list[SlurmJob]:
        return list(self._jobs)

    def requeue_hold(self, ids: list[str]) -> bool:
        self.calls.append(("requeue", list(ids)))
        return True

    def hold(self, ids: list[str]) -> bool:
        self.calls.append(("hold", list(ids)))
        return True

    def release(self, ids: list[str]) -> bool:
        self.calls.append(("release", list(ids)))
        return True

    def place(self, ids: list[str], gpu_type: str) -> bool:
        self.calls.append(("place", list(ids)))
        self.types.update(dict.fromkeys(ids, gpu_type))
        return True


def _controller(cfg: ControllerConfig, fake: FakeSlurm, store: StateStore) -> Controller:
    ctl = Controller(cfg, fake, store, log=lambda _: None)  # type: ignore[arg-type]
    ctl.start_watch = 0.0  # the scripted jobs never start: do not poll for their starts
    return ctl


def test_controller_round_touches_only_opted_in_jobs(tmp_path: Path) -> None:
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}, "resnet-bs32": {"v100": 12.0, "k80": 3.0}}
    jobs = [_job("1", "policyopt:type=lstm-bs10"), _job("2", "policyopt:type=resnet-bs32"),
            _job("3", "policyopt:type=resnet-bs32", gpus=2), _job("4", "policyopt"),
            _job("5", "policyopt:type=lstm-bs10", gpus=2),
            _job("8", "", state="RUNNING", reason="None", nodes=("k1",), start=90.0),  # not opted in
            _job("9", "", state="PENDING", reason="Priority")]  # not opted in
    fake = FakeSlurm(jobs)
    cfg = ControllerConfig(get_policy("max_min_fairness"), "max_min_fairness", ["gpu"], table, 10.0)
    store = StateStore(tmp_path / "s.sqlite")
    out = _controller(cfg, fake, store).run_round(now=200.0)
    touched = {j for _, args in fake.calls for j in args if j.isdigit()}
    assert touched <= {"1", "2", "3", "4", "5"} and touched
    # one k80 GPU is held by the job the controller does not manage: 2 v100 + 1 k80 to hand out
    used: dict[str, int] = {}
    for d in out["decided"].values():
        used[d["gpu_type"]] = used.get(d["gpu_type"], 0) + d["gpus"]
    assert used.get("v100", 0) <= 2 and used.get("k80", 0) <= 1
    placed = {j for kind, args in fake.calls if kind == "place" for j in args}
    assert placed == set(out["decided"]) and ("release", sorted(placed, key=int)) in fake.calls
    assert store.last_round() == 0 and store.get("last_time") == 200.0
    store.close()
    # a restart on the same state continues with round 1
    store = StateStore(tmp_path / "s.sqlite")
    assert _controller(cfg, FakeSlurm(jobs), store).run_round(now=210.0)["round"] == 1
    store.close()


def test_dry_run_state_is_not_written(tmp_path: Path) -> None:
    path = tmp_path / "s.sqlite"
    store = StateStore(path)
    store.put("last_time", 5.0)
    store.commit()
    store.close()
    mem = StateStore(path, in_memory=True)
    assert mem.get("last_time") == 5.0
    mem.put("last_time", 9.0)
    mem.commit()
    mem.close()
    again = StateStore(path)
    assert again.get("last_time") == 5.0
    again.close()


def test_audit_helpers() -> None:
    a = Snapshot(0.0, {"1": (2, [("v1", "v100", [0, 1])]), "2": (1, [("v1", "v100", [1])])})
    problems = overcommit([a], {"v100": 2})
    assert any("held by 1 and 2" in p for p in problems) and any("3 v100 GPUs in use" in p for p in problems)
    report = {"jobs": {"1": {"end_time": 15.0}},
              "rounds": [{"time": 0.0, "allocation": {"1": {"v100": 0.5}}},
                         {"time": 10.0, "allocation": {"1": {"v100": 1.0}}},
                         {"time": 20.0, "allocation": {}}]}
    assert expected_seconds(report) == {"1": {"v100": 0.5 * 10 + 1.0 * 5}}


def test_deliverable_counts_an_overrun_round_as_decided() -> None:
    # 10 s rounds; round 0 lasted 25 s (the controller was down) with job 1 decided on k80
    report = {"config": {"round_seconds": 10.0}, "jobs": {"1": {"end_time": None}},
              "rounds": [{"round": 0, "time": 0.0, "allocation": {"1": {"v100": 0.5, "k80": 0.5}},
                          "decided": {"1": {"gpu_type": "k80", "gpus": 1}}},
                         {"round": 1, "time": 25.0, "allocation": {"1": {"v100": 0.5, "k80": 0.5}}, "decided": {}},
                         {"round": 2, "time": 35.0, "allocation": {}, "decided": {}}]}
    assert deliverable_seconds(report) == {"1": {"v100": 5.0 + 5.0, "k80": 5.0 + 15.0 + 5.0}}
    assert expected_seconds(report) == {"1": {"v100": 17.5, "k80": 17.5}}


def test_start_delays_from_snapshots() -> None:
    run = (1, [("k1", "k80", [0])])
    snaps = [Snapshot(10.0), Snapshot(10.5), Snapshot(11.0, {"1": run}), Snapshot(21.0, {"1": run})]
    report = {"rounds": [{"round": 0, "time": 10.0, "actions": {"place": [["1", "k80"], ["2", "v100"]]},
                          "ran": {"1": {"started": 0.9}}},
                         {"round": 1, "time": 20.0, "actions": {"place": []}, "ran": None}]}
    assert start_delays(snaps, report) == [
        {"round": 0, "job": "1", "gpu_type": "k80", "seen": 0.75, "gap": 0.5, "controller": 0.9},
        {"round": 0, "job": "2", "gpu_type": "v100", "seen": None, "gap": None, "controller": None}]


def test_snapshot_seconds_edges_and_stops() -> None:
    v, k = (1, [("v1", "v100", [0])]), (1, [("k1", "k80", [0])])
    snaps = [Snapshot(0.0, {"1": v}), Snapshot(1.0, {"1": v}), Snapshot(2.0), Snapshot(4.0, {"1": k}),
             Snapshot(5.0, {"1": k})]
    # a change of state sits in the middle of its gap: v100 until 1.5, k80 from 3.0
    assert gpu_seconds(snaps) == {"1": {"v100": 1.5, "k80": 2.0}}
    assert transition_gaps(snaps) == {"1": {"v100": [1.0], "k80": [2.0]}}
    report = {"rounds": [{"round": 0, "time": 0.5, "actions": {"requeue": ["1"], "place": []}}]}
    assert stop_delays(snaps, report) == [{"round": 0, "job": "1", "gpu_type": "v100", "seen": 1.0, "gap": 1.0}]
    assert start_losses([{"job": "1", "gpu_type": "k80", "seen": 0.5}, {"job": "1", "gpu_type": "k80", "seen": 1.0},
                         {"job": "1", "gpu_type": "k80", "seen": None}]) == {"1": {"k80": 1.5}}


def test_start_estimate() -> None:
    assert start_estimate(100.0) == 100.5  # Slurm's whole second alone
    assert start_estimate(100.0, [100.2, 100.6]) == pytest.approx(100.4)  # narrowed by the polls
    assert start_estimate(100.0, [99.0, 100.4]) == pytest.approx(100.2)
    assert start_estimate(100.0, [100.7, None]) == pytest.approx(100.85)
    assert start_estimate(100.0, [102.0, 103.0]) == 100.5  # polls of another run: Slurm's alone


def _accounting_controller(tmp_path: Path, jobs: list[SlurmJob]) -> tuple[Controller, StateStore]:
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}}
    cfg = ControllerConfig(get_policy("max_min_fairness"), "max_min_fairness", ["gpu"], table, 10.0)
    store = StateStore(tmp_path / "s.sqlite")
    for j in jobs:
        store.add_job(j.job_id, "lstm-bs10", 1, 1.0, 100.0, 0.0, 0)
    return _controller(cfg, FakeSlurm(jobs), store), store


def test_accounting_follows_slurms_running_state(tmp_path: Path) -> None:
    def job(jid: str, state: str, node: str, start: float, end: float = 0.0) -> SlurmJob:
        return SlurmJob(jid, "j", "u", "gpu", state, "None", "policyopt:type=lstm-bs10", "", "", (node,), 1, None,
                        "", 0.0, start, end, 1, 1)

    jobs = [job("1", "RUNNING", "k1", 101.0),  # requeued off v100 at 100.4, started on k80 in [101.2, 101.6]
            job("2", "COMPLETING", "v1", 100.0, 6e9),  # requeued at 100.4, still exiting: times reset by Slurm
            job("3", "COMPLETED", "v1", 95.0, 105.0),  # finished at 105.x
            job("4", "RUNNING", "k1", 104.0)]  # started by Slurm at 104.x, not observed by the controller
    ctl, store = _accounting_controller(tmp_path, jobs)
    store.put("last_time", 100.0)
    store.put("stopped", [["1", "v100", 100.4], ["2", "v100", 100.4]])
    store.put("observed_starts", {"1": [101.2, 101.6]})
    ran = ctl._account(110.0, store.known_jobs(), {j.job_id: j for j in jobs}, {"v1": "v100", "k1": "k80"})
    assert ran["1"]["seconds_by_type"] == pytest.approx({"v100": 0.4, "k80": 110.0 - 101.4})
    assert ran["1"]["started"] == pytest.approx(1.4) and ran["1"]["stopped"]["seconds"] == pytest.approx(0.4)
    assert ran["2"]["seconds_by_type"] == pytest.approx({"v100": 0.4})  # not the 10 s since its reset start
    assert ran["3"]["seconds_by_type"] == pytest.approx({"v100": 5.5})
    assert ran["4"]["seconds_by_type"] == pytest.approx({"k80": 5.5}) and ran["4"]["started"] == 4.5
    assert store.received()["1"] == pytest.approx({"v100": 0.4, "k80": 8.6})
    store.close()


def test_an_overrun_round_is_one_round_for_the_mechanism(tmp_path: Path) -> None:
    jobs = [SlurmJob("1", "j", "u", "gpu", "RUNNING", "None", "policyopt:type=lstm-bs10", "", "", ("v1",), 1,
                     None, "", 0.0, 100.0, 0.0, 0, 1)]
    ctl, store = _accounting_controller(tmp_path, jobs)
    ctl.mech = RoundMechanism({"k80": 2, "v100": 2}, round_length=10.0)
    ctl.mech.set_allocation({"1": {"v100": 0.5, "k80": 0.5}}, (), {"1": 1})
    store.put("last_time", 100.0)
    store.put("observed_starts", {"1": [100.4, 100.6]})
    ran = ctl._account(125.0, store.known_jobs(), {"1": jobs[0]}, {"v1": "v100"})
    assert ran["1"]["seconds"] == pytest.approx(24.5)  # what Slurm ran, all of it
    # the mechanism: one round of 10 s, of which the job ran 9.5 (its last 15 s were the overrun)
    assert ctl.mech.elapsed == 10.0 and ctl.mech.received[0].tolist() == pytest.approx([0.0, 9.5])
    ctl.mech.credit("1", "k80", 0.25)
    assert ctl.mech.received[0].tolist() == pytest.approx([0.25, 9.5])
    with pytest.raises(InputError, match="seconds"):
        ctl.mech.credit("1", "k80", -1.0)
    store.close()


@pytest.mark.parametrize("placed, credited", [("v100", 2.2), ("k80", 0.0), (None, 0.0)])
def test_a_placed_jobs_start_loss_counts_as_received_by_the_mechanism(tmp_path: Path, placed: str | None,
                                                                      credited: float) -> None:
    # rounds of 10 s; this interval lasted 8 s (100 -> 108: a round run early, recorded as a round
    # of 8 s). The job started at 102.2 (Slurm: 102, polls 102.0-102.4): it ran 5.8 s; placed on
    # v100 last round, its 2.2 s start count as received by the mechanism too: the whole short
    # round. Placed on another type, or not placed by the controller: not credited.
    jobs = [SlurmJob("1", "j", "u", "gpu", "RUNNING", "None", "policyopt:type=lstm-bs10", "", "", ("v1",), 1,
                     None, "", 0.0, 102.0, 0.0, 0, 1)]
    ctl, store = _accounting_controller(tmp_path, jobs)
    ctl.mech = RoundMechanism({"k80": 2, "v100": 2}, round_length=10.0)
    ctl.mech.set_allocation({"1": {"v100": 0.5, "k80": 0.5}}, (), {"1": 1})
    store.put("last_time", 100.0)
    store.put("observed_starts", {"1": [102.0, 102.4]})
    if placed is not None:
        store.put("placed", [["1", placed]])
    ran = ctl._account(108.0, store.known_jobs(), {"1": jobs[0]}, {"v1": "v100"})
    assert ran["1"]["seconds"] == pytest.approx(5.8) and ran["1"]["started"] == pytest.approx(2.2)
    assert ctl.mech.elapsed == pytest.approx(8.0)
    assert ctl.mech.received[0].tolist() == pytest.approx([0.0, 5.8 + credited])
    assert store.received()["1"] == pytest.approx({"v100": 5.8})  # Slurm's seconds, not the credit
    store.close()


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    thr = tmp_path / "t.json"
    thr.write_text(json.dumps({"job_types": {"a": {"throughputs": {"v100": 1.0}}}}))
    base = ["slurm", "--policy", "max_min_fairness", "--throughputs", str(thr), "--state", str(tmp_path / "s")]
    assert main([*base, "--partition", " , ", "--round-seconds", "5"]) == 2
    assert "--partition" in capsys.readouterr().err
    assert main([*base, "--partition", "gpu", "--round-seconds", "0"]) == 2
    assert "--round-seconds" in capsys.readouterr().err
    assert main([*base, "--partition", "gpu", "--round-seconds", "5", "--policy", "nope"]) == 2
    assert "nope" in capsys.readouterr().err
    assert main([*base, "--partition", "gpu", "--round-seconds", "5", "--restart-seconds", "-1"]) == 2
    assert "--restart-seconds: must be >= 0 (got -1.0)" in capsys.readouterr().err


def test_controller_with_pop_and_gavel_table(tmp_path: Path, gavel_dir: Path) -> None:
    from policyopt.pop import pop

    table = load_throughputs(gavel_dir / "simulation_throughputs.json")
    names = ["ResNet-18 (batch size 64)", "Transformer (batch size 32)", "A3C", "LM (batch size 20)"]
    names = [n for n in names if n in table] + [n for n in table if "#" not in n][:4]
    jobs = [_job(str(i + 1), f"policyopt:type={n}") for i, n in enumerate(names[:6])]
    cfg = ControllerConfig(pop(get_policy("max_min_fairness"), k=2, parallel=False), "max_min_fairness", ["gpu"],
                           table, 10.0)
    store = StateStore(tmp_path / "s.sqlite")
    out = _controller(cfg, FakeSlurm(jobs), store).run_round(now=50.0)
    alloc = store.get("allocation")
    assert sorted(alloc["x"], key=int) == [j.job_id for j in jobs] and alloc["capacity"] == {"k80": 2, "v100": 2}
    per_type = {t: sum(row[t] for row in alloc["x"].values()) for t in ("k80", "v100")}
    assert all(v <= 2 + 1e-6 for v in per_type.values()) and sum(per_type.values()) > 0
    assert 0 < len(out["decided"]) <= 4
    store.close()


def test_jobs_outside_the_partitions_are_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    from policyopt.slurm.slurmcmd import Slurm

    # Slurm 22.05's `squeue --json` ignores --partition: the records of every partition come back
    records = {"jobs": [{"job_id": 1, "partition": "gpu", "job_state": "PENDING", "comment": "policyopt"},
                        {"job_id": 2, "partition": "other", "job_state": "PENDING", "comment": "policyopt"},
                        {"job_id": 3, "partition": "other,gpu", "job_state": "PENDING", "comment": ""}]}

    def fake_run(argv: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(argv, 0, json.dumps(records), "")

    monkeypatch.setattr(subprocess, "run", fake_run)
    assert [j.job_id for j in Slurm().jobs(["gpu"])] == ["1", "3"]
    assert [j.job_id for j in Slurm().jobs(["other"])] == ["2", "3"]


def test_controller_installs_a_packable_allocation(tmp_path: Path) -> None:
    # two 1-GPU jobs and a 2-GPU job that all run fastest on the 2 V100s: the 2-GPU job needs the whole type
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}, "resnet-bs32": {"v100": 12.0, "k80": 3.0}}
    jobs = [_job("1", "policyopt:type=resnet-bs32"), _job("2", "policyopt:type=resnet-bs32"),
            _job("3", "policyopt:type=lstm-bs10", gpus=2)]
    cfg = ControllerConfig(get_policy("max_min_fairness"), "max_min_fairness", ["gpu"], table, 10.0)
    store = StateStore(tmp_path / "s.sqlite")
    out = _controller(cfg, FakeSlurm(jobs), store).run_round(now=100.0)
    alloc = store.get("allocation")
    gpus = {"1": 1, "2": 1, "3": 2}
    y = {j: dict.fromkeys(("k80", "v100"), 0.0) for j in gpus}
    assert sum(share for _, share in alloc["configurations"]) == pytest.approx(1.0, abs=1e-6)
    for conf, share in alloc["configurations"]:  # every configuration fits: 2 GPUs of each type
        for t in ("k80", "v100"):
            assert sum(gpus[j] for j, tt in conf if tt == t) <= 2
        for j, t in conf:
            y[j][t] += share
    for j in gpus:
        assert alloc["x"][j] == pytest.approx(y[j], abs=1e-5) and set(alloc["policy_x"][j]) == {"k80", "v100"}
    assert [[j, d["gpu_type"]] for j, d in sorted(out["decided"].items())] in [
        sorted(conf) for conf, _ in alloc["configurations"]]
    store.close()


@pytest.mark.parametrize("restart, cost, slack", [(0.0, 2.0, 0.1), (6.0, 2.0, 0.4), (20.0, 2.0, 0.5)])
def test_round_choice_charges_the_restart_seconds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  restart: float, cost: float, slack: float) -> None:
    # measured start cost 2 s, rounds of 10 s: a start is charged the 2 s Slurm takes (they count in
    # the deviations); up to half of 2 s + --restart-seconds (at most half a round) of deviation is
    # traded for fewer stops and moves
    import policyopt.slurm.controller as controller_module

    seen: dict[str, float] = {}

    def spy(configs: Any, owed: Any, length: float, running: Any, pins: Any, gpus: Any, capacity: Any, fill: Any, *,
            start_cost: float, slack: float, bound: float) -> tuple[list[Any], dict[str, str]]:
        seen.update(start_cost=start_cost, slack=slack, length=length, bound=bound)
        return [], {}

    monkeypatch.setattr(controller_module, "choose_with_pins", spy)
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}}
    cfg = ControllerConfig(get_policy("max_min_fairness"), "max_min_fairness", ["gpu"], table, 10.0,
                           restart_seconds=restart)
    store = StateStore(tmp_path / "s.sqlite")
    store.put("start_cost", 2.0)
    _controller(cfg, FakeSlurm([_job("1", "policyopt:type=lstm-bs10")]), store).run_round(now=200.0)
    assert seen == {"start_cost": pytest.approx(cost), "slack": pytest.approx(slack), "length": 10.0,
                    "bound": 0.5}  # the default --deviation-bound
    store.close()


def test_poll_interval_backs_off() -> None:
    assert poll_interval(0.0) == pytest.approx(0.1) and poll_interval(1.0) == pytest.approx(0.3)
    assert poll_interval(2.0) == pytest.approx(0.5) and poll_interval(30.0) == 0.5


def test_finish_time_fairness_carries_isolated_time_across_rounds(tmp_path: Path) -> None:
    """The controller poses each job's cumulative isolated time ``c_m`` (0 at its first solve, then
    ``(s_prev - s) / thr_prev`` with the previous solve's isolated throughput), as the simulator,
    the executor and the service do, and keeps it in its state across a restart."""
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}, "resnet-bs32": {"v100": 12.0, "k80": 3.0}}
    jobs = [_job("1", "policyopt:type=lstm-bs10"), _job("2", "policyopt:type=resnet-bs32"),
            _job("3", "policyopt:type=resnet-bs32")]
    policy = get_policy("finish_time_fairness")
    posed: list[Any] = []
    real = policy.solve
    policy.solve = lambda p, *a, **k: posed.append(p) or real(p, *a, **k)  # type: ignore[method-assign]
    cfg = ControllerConfig(policy, "finish_time_fairness", ["gpu"], table, 10.0)
    store = StateStore(tmp_path / "s.sqlite")
    _controller(cfg, FakeSlurm(jobs), store).run_round(now=200.0)
    first = {j.id: j for j in posed[-1].jobs}
    assert [j.isolated_time for j in first.values()] == [0.0, 0.0, 0.0]
    iso = real(posed[-1]).extra["isolated_throughputs"]
    store.add_received("1", "v100", 4.0)  # 40 steps done
    store.add_received("2", "k80", 2.0)  # 6 steps done
    store.commit()
    store.close()
    store = StateStore(tmp_path / "s.sqlite")  # a restart; a job arrives, so the policy is solved again
    _controller(cfg, FakeSlurm([*jobs, _job("4", "policyopt:type=lstm-bs10")]), store).run_round(now=210.0)
    assert len(posed) == 2
    second = {j.id: j.isolated_time for j in posed[-1].jobs}
    assert second == pytest.approx({"1": 40.0 / iso["1"], "2": 6.0 / iso["2"], "3": 0.0, "4": 0.0}, rel=1e-9)
    store.close()


@pytest.mark.parametrize("restart, learned", [(None, 5.0), (3.0, 3.0)])
def test_a_completed_job_teaches_the_start_cost(tmp_path: Path, restart: float | None, learned: float) -> None:
    # 100 steps at 10 steps/s take 10 s; Slurm ran the job 15 s on v100 over 1 start: 5 s per start,
    # used for every type while nothing else is known (--restart-seconds auto); a given value wins
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}, "resnet-bs32": {"v100": 12.0, "k80": 3.0}}
    done = SlurmJob("1", "j", "u", "gpu", "COMPLETED", "None", "policyopt:type=lstm-bs10,steps=100", "", "",
                    ("v1",), 1, None, "", 100.0, 150.0, 165.0, 0, 1)
    cfg = ControllerConfig(get_policy("max_min_fairness"), "max_min_fairness", ["gpu"], table, 10.0,
                           restart_seconds=restart)
    store = StateStore(tmp_path / "s.sqlite")
    store.add_job("1", "lstm-bs10", 1, 1.0, 100.0, 100.0, 0)
    store.add_received("1", "v100", 15.0)
    ctl = _controller(cfg, FakeSlurm([done, _job("2", "policyopt:type=resnet-bs32")]), store)
    ctl.run_round(now=170.0)
    assert store.get("startup") == {"lstm-bs10": [pytest.approx(5.0), 1]}
    assert ctl.restart_cost("lstm-bs10") == pytest.approx(learned)
    assert ctl.restart_cost("resnet-bs32") == pytest.approx(learned)
    store.close()


INF = float("inf")


@pytest.mark.parametrize("restart, start, steps, ran, kept, bound", [
    (0.0, 195.0, 1000, 0.0, False, INF),  # start cost 0: the allocation's V100 wins (the choice before)
    (10.0, 195.0, 1000, 0.0, True, INF),  # a 5 s old run that cost 10 s to start is not undone
    (10.0, 100.0, 1000, 100.0, False, INF),  # a long run far from its end moves
    (10.0, 100.0, 1000, 200.0, True, INF),  # 1000 - 50 steps done: 10 s left on k80 <= one round, kept to its end
    # 975 - 50 steps done: 15 s left <= 2 x 10 s but more than one round: it moves (a longer tail
    # would hold its GPUs for rounds while others wait)
    (10.0, 100.0, 1000, 195.0, False, INF),
    # the deviation bound (default half a round): the allocation gives k80 no time, so a round kept
    # there leaves the job a round ahead on k80 and a round behind on v100; the mechanism's choice wins
    (10.0, 195.0, 1000, 0.0, False, 0.5),
    (10.0, 100.0, 1000, 200.0, False, 0.5),
    (10.0, 195.0, 1000, 0.0, True, 1.0),  # a bound of a round allows it
])
def test_a_running_job_is_kept_while_young_or_near_its_end(tmp_path: Path, restart: float, start: float,
                                                          steps: int, ran: float, kept: bool, bound: float) -> None:
    # one job on a K80 since `start`; max-min fairness gives it the faster V100
    table = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}}
    job = _job("1", f"policyopt:type=lstm-bs10,steps={steps}", state="RUNNING", reason="None", nodes=("k1",),
               start=start)
    cfg = ControllerConfig(get_policy("max_min_fairness"), "max_min_fairness", ["gpu"], table, 10.0,
                           restart_seconds=restart, deviation_bound=bound)
    store = StateStore(tmp_path / "s.sqlite")
    store.add_job("1", "lstm-bs10", 1, 1.0, float(steps), 100.0, 0)
    if ran:
        store.add_received("1", "k80", ran)
    fake = FakeSlurm([job])
    ctl = _controller(cfg, fake, store)
    ctl.requeue_timeout = 0.0  # the scripted job never exits: do not wait for it before placing it again
    out = ctl.run_round(now=200.0)
    assert out["decided"]["1"]["gpu_type"] == ("k80" if kept else "v100")
    assert (("requeue", ["1"]) in fake.calls) is not kept
    store.close()
