"""The Slurm controller's first estimate of a start cost (the throughput table's
``startup_seconds``) and its early rounds (a round run when a job ends while another waits),
without Slurm."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from policyopt.errors import InputError
from policyopt.policy import get_policy
from policyopt.slurm.controller import EARLY_POLL, Controller, ControllerConfig
from policyopt.slurm.slurmcmd import SlurmJob
from policyopt.slurm.startcost import StartupModel
from policyopt.slurm.state import StateStore
from policyopt.slurm.throughputs import load_startup_seconds, load_throughputs

TABLE = {"lstm-bs10": {"v100": 10.0, "k80": 5.0}, "resnet-bs32": {"v100": 12.0, "k80": 3.0}}


def _job(jid: str, state: str) -> SlurmJob:
    return SlurmJob(jid, "j", "u", "gpu", state, "None", "policyopt:type=lstm-bs10", "", "", ("v1",), 1, None, "",
                    100.0, 101.0, 0.0, 0, 1)


class ScriptedSlurm:
    """``jobs()`` answers from a script, one list per call (the last one repeated); counts calls."""

    dry_run = False

    def __init__(self, script: list[list[SlurmJob]]) -> None:
        self.script = script
        self.calls = 0

    def jobs(self, partitions: list[str]) -> list[SlurmJob]:
        self.calls += 1
        return list(self.script[min(self.calls - 1, len(self.script) - 1)])


class FakeClock:
    """``clock()`` and ``sleep(d)`` on a clock that moves only when slept on."""

    def __init__(self) -> None:
        self.t = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.t

    def sleep(self, d: float) -> None:
        self.sleeps.append(d)
        self.t += d


def _controller(tmp_path: Path, slurm: ScriptedSlurm, *, early: bool = True,
                prior: dict[str, float] | None = None, restart: float | None = None,
                state: str = "s.sqlite") -> Controller:
    cfg = ControllerConfig(get_policy("max_min_fairness"), "max_min_fairness", ["gpu"], TABLE, 10.0,
                           restart_seconds=restart, startup_prior=prior or {}, early_rounds=early)
    return Controller(cfg, slurm, StateStore(tmp_path / state), log=lambda _: None)  # type: ignore[arg-type]


def test_startup_seconds_are_read_from_the_table_and_checked(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    path.write_text(json.dumps({"job_types": {"a": {"throughputs": {"v100": 1.0}, "startup_seconds": 7.5},
                                              "b": {"throughputs": {"v100": 2.0}}}}))
    assert load_startup_seconds(path) == {"a": 7.5} and set(load_throughputs(path)) == {"a", "b"}
    path.write_text(json.dumps({"job_types": {"a": {"throughputs": {"v100": 1.0}, "startup_seconds": -1}}}))
    with pytest.raises(InputError, match=r"job_types\.a\.startup_seconds"):
        load_startup_seconds(path)
    gavel = tmp_path / "g.json"
    gavel.write_text(json.dumps({"v100": {"('A', 1)": {"null": 1.0}}}))
    assert load_startup_seconds(gavel) == {}


def test_a_prior_is_the_start_cost_until_the_type_has_a_finished_job(tmp_path: Path) -> None:
    model = StartupModel(prior={"a": 8.0})
    assert model.estimate("a") == 8.0 and model.estimate("b") == 0.0
    model.observe("b", 4.0)
    assert model.estimate("a") == 8.0 and model.estimate("b") == 4.0  # the type's prior before the others' mean
    assert model.estimate("c") == 4.0
    model.observe("a", 12.0)
    assert model.estimate("a") == 12.0  # learned replaces the prior
    assert StartupModel().estimate("a", unknown=10.0) == 10.0
    assert StartupModel({"b": (4.0, 1)}).estimate("a", unknown=10.0) == 4.0
    # the controller under auto charges the prior from its first round, and a start of a type
    # nothing is known of (no prior, no finished job) one round, not nothing; a number overrides both
    ctl = _controller(tmp_path, ScriptedSlurm([[]]), prior={"lstm-bs10": 9.0})
    assert ctl.restart_cost("lstm-bs10") == 9.0 and ctl.restart_cost("resnet-bs32") == 10.0
    ctl.store.close()
    fixed = _controller(tmp_path, ScriptedSlurm([[]]), prior={"lstm-bs10": 9.0}, restart=3.0, state="t.sqlite")
    assert fixed.restart_cost("lstm-bs10") == 3.0
    fixed.store.close()
    # what was learned is kept in the state file: a restarted controller starts from it, not the prior
    ctl = _controller(tmp_path, ScriptedSlurm([[]]), prior={"lstm-bs10": 9.0})
    ctl.store.put("startup", StartupModel({"lstm-bs10": (12.0, 2)}).to_state())
    ctl.store.commit()
    ctl.store.close()
    again = _controller(tmp_path, ScriptedSlurm([[]]), prior={"lstm-bs10": 9.0})
    assert again.restart_cost("lstm-bs10") == 6.0 and again.restart_cost("resnet-bs32") == 6.0
    again.store.close()


def test_a_job_that_ends_while_another_waits_starts_the_next_round(tmp_path: Path) -> None:
    # the round ran job 1 and left job 2 waiting; Slurm shows job 1 running for two polls, then done
    slurm = ScriptedSlurm([[_job("1", "RUNNING")], [_job("1", "RUNNING")], [_job("1", "COMPLETED")]])
    ctl, clock = _controller(tmp_path, slurm), FakeClock()
    record = {"decided": {"1": {"gpu_type": "v100", "gpus": 1}}, "live": ["1", "2"]}
    assert ctl.wait_for_round(10.0, record, clock.sleep, clock) is True
    assert slurm.calls == 3 and clock.t == pytest.approx(3 * EARLY_POLL)
    # a job Slurm no longer lists has ended too
    gone = _controller(tmp_path, ScriptedSlurm([[]]), state="t.sqlite")
    assert gone.wait_for_round(10.0, record, clock.sleep, clock) is True
    ctl.store.close()
    gone.store.close()


@pytest.mark.parametrize("early, live", [(True, ["1"]), (False, ["1", "2"])])
def test_no_early_round_without_a_waiting_job_or_when_disabled(tmp_path: Path, early: bool, live: list[str]) -> None:
    slurm = ScriptedSlurm([[_job("1", "COMPLETED")]])
    ctl, clock = _controller(tmp_path, slurm, early=early), FakeClock()
    record = {"decided": {"1": {"gpu_type": "v100", "gpus": 1}}, "live": live}
    assert ctl.wait_for_round(10.0, record, clock.sleep, clock) is False
    assert slurm.calls == 0 and clock.sleeps == [10.0]  # one sleep to the boundary, no squeue call
    ctl.store.close()


def test_a_round_whose_jobs_keep_running_waits_for_its_boundary(tmp_path: Path) -> None:
    slurm = ScriptedSlurm([[_job("1", "RUNNING")]])
    ctl, clock = _controller(tmp_path, slurm), FakeClock()
    record = {"decided": {"1": {"gpu_type": "v100", "gpus": 1}}, "live": ["1", "2"]}
    assert ctl.wait_for_round(10.0, record, clock.sleep, clock) is False
    assert clock.t == pytest.approx(10.0) and 1 <= slurm.calls <= 10.0 / EARLY_POLL
    ctl.store.close()
