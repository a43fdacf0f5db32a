"""The ``command`` recorded in an experiment's ``STEM.json`` re-runs the same experiment: parsed by
``python -m policyopt.sim.experiments``, it makes the same :func:`run_experiment` call (every
option that was given, values read back exactly)."""
from __future__ import annotations

import inspect
import json
import shlex
from typing import Any

import pytest

from policyopt.sim import experiments as ex
from policyopt.sim.experiment_runner import command_line

PREFIX = ["python", "-m", "policyopt.sim.experiments"]


def calls(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> list[dict[str, Any]]:
    """The :func:`run_experiment` calls ``main(argv)`` makes, each as its bound arguments (nothing run)."""
    sig = inspect.signature(ex.run_experiment)
    made: list[dict[str, Any]] = []

    def record(*args: Any, **kwargs: Any) -> dict[str, Any]:
        bound = sig.bind(*args, **kwargs)
        bound.apply_defaults()
        made.append(dict(bound.arguments))
        return {}

    with monkeypatch.context() as m:
        m.setattr(ex, "run_experiment", record)
        assert ex.main(argv) == 0
    return made


def rerun(monkeypatch: pytest.MonkeyPatch, command: str) -> list[dict[str, Any]]:
    words = shlex.split(command)
    assert words[:3] == PREFIX
    return calls(monkeypatch, words[3:])


@pytest.mark.parametrize("argv", [
    ["las_single"],
    ["las_single", "--output", "out dir/with 'quotes'", "--seeds", "0,1,2", "--workers", "3", "--rates",
     "0.4,2.4,0.30000000000000004", "--scale", "published", "--jobs", "600"],
    ["fifo", "--quick", "--seeds", "5", "--keep-arriving", "--scale", "published", "--ray-address", "local"],
    ["las_single", "--variant", "gavel_solve", "--rates", "3", "--output", "/tmp/x"],
])
def test_the_command_line_makes_the_same_call(monkeypatch: pytest.MonkeyPatch, argv: list[str]) -> None:
    """``command_line`` of a call, parsed by the command, makes that call again."""
    (call,) = calls(monkeypatch, argv)
    call.pop("progress")
    command = command_line(**call)
    assert rerun(monkeypatch, command) == [{**call, "progress": True}]


def test_the_recorded_command_reruns_the_run(gavel_dir, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A run with seeds, rates, jobs and workers given: the JSON's command makes the same call."""
    tiny = ex.Experiment("tiny", "tiny", "-", "v100=4,p100=4,k80=4", {"generator": "shockwave", "jobs": 12},
                         (ex.Arm("las", {"policy": "las"}), ex.Arm("fifo", {"policy": "round:fifo"})),
                         baseline="fifo", treatment="las", rates=(20.0, 30.0), seeds=(0, 1))
    monkeypatch.setitem(ex.EXPERIMENTS, "tiny", tiny)
    argv = ["tiny", "--output", str(tmp_path), "--seeds", "1", "--rates", "25", "--jobs", "10", "--workers", "2"]
    assert ex.main(argv) == 0
    summary = json.loads((tmp_path / "tiny.json").read_text())
    assert summary["seeds"] == [1] and summary["rates"] == [25.0]
    assert rerun(monkeypatch, summary["command"]) == calls(monkeypatch, argv)
