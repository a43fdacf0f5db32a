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
from policyopt.slurm.audit import Snapshot, expected_seconds, gpu_indices, overcommit
from policyopt.slurm.controller import Controller, ControllerConfig
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

    def place(self, jid: str, gpu_type: str) -> bool:
        self.calls.append(("place", [jid, gpu_type]))
        return True


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
    out = Controller(cfg, fake, store, log=lambda _: None).run_round(now=200.0)  # type: ignore[arg-type]
    touched = {j for _, args in fake.calls for j in args if j.isdigit()}
    assert touched <= {"1", "2", "3", "4", "5"} and touched
    # one k80 GPU is held by the job the controller does not manage: 2 v100 + 1 k80 to hand out
    used: dict[str, int] = {}
    for d in out["decided"].values():
        used[d["gpu_type"]] = used.get(d["gpu_type"], 0) + d["gpus"]
    assert used.get("v100", 0) <= 2 and used.get("k80", 0) <= 1
    placed = {args[0] for kind, args in fake.calls if kind == "place"}
    assert placed == set(out["decided"]) and ("release", sorted(placed, key=int)) in fake.calls
    assert store.last_round() == 0 and store.get("last_time") == 200.0
    store.close()
    # a restart on the same state continues with round 1
    store = StateStore(tmp_path / "s.sqlite")
    assert Controller(cfg, FakeSlurm(jobs), store, log=lambda _: None).run_round(now=210.0)["round"] == 1  # type: ignore[arg-type]
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


def test_controller_with_pop_and_gavel_table(tmp_path: Path, gavel_dir: Path) -> None:
    from policyopt.pop import pop

    table = load_throughputs(gavel_dir / "simulation_throughputs.json")
    names = ["ResNet-18 (batch size 64)", "Transformer (batch size 32)", "A3C", "LM (batch size 20)"]
    names = [n for n in names if n in table] + [n for n in table if "#" not in n][:4]
    jobs = [_job(str(i + 1), f"policyopt:type={n}") for i, n in enumerate(names[:6])]
    cfg = ControllerConfig(pop(get_policy("max_min_fairness"), k=2, parallel=False), "max_min_fairness", ["gpu"],
                           table, 10.0)
    store = StateStore(tmp_path / "s.sqlite")
    out = Controller(cfg, FakeSlurm(jobs), store, log=lambda _: None).run_round(now=50.0)  # type: ignore[arg-type]
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
    out = Controller(cfg, FakeSlurm(jobs), store, log=lambda _: None).run_round(now=100.0)  # type: ignore[arg-type]
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
