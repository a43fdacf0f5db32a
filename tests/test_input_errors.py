"""Bad input gets a typed error naming the field and value; the CLI prints one line, exit != 0."""
from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from policyopt import InputError, Problem, UnknownNameError


def base() -> dict:
    return {"cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 2}}},
            "jobs": [{"id": "0", "throughputs": {"v100": 4.0, "k80": 1.0}},
                     {"id": "1", "throughputs": {"v100": 3.0, "k80": 2.0}}]}


@pytest.mark.parametrize("mutate, field, value", [
    (lambda d: d["jobs"][0]["throughputs"].update(v100=float("nan")), "jobs[0].throughputs.v100", "nan"),
    (lambda d: d["jobs"][0]["throughputs"].update(v100=-1.0), "jobs[0].throughputs.v100", "-1.0"),
    (lambda d: d["jobs"][0]["throughputs"].update(v100=float("inf")), "jobs[0].throughputs.v100", "inf"),
    (lambda d: d["jobs"][1].update(id="0"), "jobs[].id", "'0'"),
    (lambda d: d["jobs"][0].update(scale_factor=0), "jobs[0].scale_factor", "0"),
    (lambda d: d["jobs"][0].update(scale_factor=1.5), "jobs[0].scale_factor", "1.5"),
    (lambda d: d["jobs"][0].update(weight=0), "jobs[0].weight", "0"),
    (lambda d: d["jobs"][0].update(steps_remaining="many"), "jobs[0].steps_remaining", "'many'"),
    (lambda d: d["jobs"][0].update(slo_seconds=-5), "jobs[0].slo_seconds", "-5"),
    (lambda d: d["jobs"][0].update(colour="red"), "jobs[0].colour", "'red'"),
    (lambda d: d["cluster"]["worker_types"].update(v100={"count": -1}), "cluster.worker_types.v100.count", "-1"),
    (lambda d: d["cluster"]["worker_types"].update(v100={"count": 0}, k80={"count": 0}),
     "cluster.worker_types", "{'v100': 0, 'k80': 0}"),
    (lambda d: d["jobs"][0].update(throughputs={"v100": 0.0, "k80": 0.0}), "jobs[0]", "scale_factor"),
    (lambda d: d["jobs"][0].update(scale_factor=4), "jobs[0]", "scale_factor"),
    (lambda d: d.update(colocated=[{"jobs": ["0", "9"], "worker_type": "v100", "throughputs": [1, 1]}]),
     "colocated[0|9].jobs[1]", "'9'"),
    (lambda d: d.update(colocated=[{"jobs": ["0", "1"], "worker_type": "v100", "throughputs": [1, float("nan")]}]),
     "colocated[0|1@v100].throughputs[1]", "nan"),
    (lambda d: d.update(jobs="nope"), "jobs", "'nope'"),
])
def test_field_named(mutate, field: str, value: str) -> None:
    d = base()
    mutate(d)
    with pytest.raises(InputError) as exc:
        Problem.from_json(json.dumps(d))
    assert exc.value.field == field
    assert field in str(exc.value) and value in str(exc.value)


def test_unknown_worker_type() -> None:
    d = base()
    d["jobs"][0]["throughputs"]["a100"] = 9.0
    with pytest.raises(UnknownNameError) as exc:
        Problem.from_dict(d)
    assert exc.value.field == "jobs[0].throughputs" and "a100" in str(exc.value) and "v100" in str(exc.value)


def test_malformed_json() -> None:
    with pytest.raises(InputError, match="malformed JSON"):
        Problem.from_json('{"cluster": {"worker_types": ')


def test_round_trip_json_and_dataframes() -> None:
    d = base()
    d["jobs"][0].update(entity="a", slo_seconds=100.0, weight=2.0)
    d["colocated"] = [{"jobs": ["0", "1"], "worker_type": "v100", "throughputs": [2.0, 1.5]}]
    d["entities"] = {"a": {"weight": 2.0, "policy": "fifo"}}
    p = Problem.from_dict(d)
    assert Problem.from_json(p.to_json()) == p
    cluster = pd.DataFrame({"worker_type": ["v100", "k80"], "count": [2, 2]})
    jobs = pd.DataFrame({"id": ["0", "1"], "throughput_v100": [4.0, 3.0], "throughput_k80": [1.0, 2.0],
                         "weight": [2.0, 1.0]})
    coloc = pd.DataFrame({"job_a": ["0"], "job_b": ["1"], "worker_type": ["v100"],
                          "throughput_a": [2.0], "throughput_b": [1.5]})
    q = Problem.from_dataframes(cluster, jobs, coloc)
    assert q.job("0").throughputs == {"v100": 4.0, "k80": 1.0} and q.job("0").weight == 2.0
    assert q.colocated[0].throughputs == (2.0, 1.5)
    with pytest.raises(InputError, match="missing columns"):
        Problem.from_dataframes(cluster.drop(columns="count"), jobs)


def test_labels_mismatch_raises() -> None:
    from policyopt import AlignmentError, IndexSet, Model

    m = Model()
    x = m.add_variables("x", (IndexSet("jobs", ["a", "b"]),))
    y = m.add_variables("y", (IndexSet("jobs", ["a", "c"]),))
    with pytest.raises(AlignmentError, match="jobs"):
        _ = x + y


def run_cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "policyopt.cli", *args], capture_output=True, text=True,
                          input=stdin, timeout=120)


def test_cli_bad_input_one_line(tmp_path) -> None:
    bad = base()
    bad["jobs"][0]["throughputs"]["v100"] = float("nan")
    f = tmp_path / "bad.json"
    f.write_text(json.dumps(bad))
    r = run_cli("solve", "--policy", "max_min_fairness", "--input", str(f))
    assert r.returncode != 0
    assert r.stderr.strip().count("\n") == 0 and "jobs[0].throughputs.v100" in r.stderr
    assert "Traceback" not in r.stderr
    f.write_text("{not json")
    r = run_cli("solve", "--policy", "max_min_fairness", "--input", str(f))
    assert r.returncode != 0 and "malformed JSON" in r.stderr and "Traceback" not in r.stderr
    r = run_cli("solve", "--policy", "nope", "--example", "small")
    assert r.returncode != 0 and "policy" in r.stderr and "max_min_fairness" in r.stderr
    r = run_cli("solve", "--policy", "max_min_fairness", "--input", str(tmp_path / "missing.json"))
    assert r.returncode != 0 and "file not found" in r.stderr


def test_cli_round_trip(tmp_path) -> None:
    from policyopt.examples import example_dict

    f = tmp_path / "p.json"
    f.write_text(json.dumps(example_dict("small")))
    out = tmp_path / "r.json"
    for solver in ("highs", "cvxpy", "pulp"):
        r = run_cli("solve", "--policy", "max_min_fairness", "--input", str(f), "--solver", solver,
                    "--output", str(out))
        assert r.returncode == 0, r.stderr
        res = json.loads(out.read_text())
        assert set(res) >= {"policy", "solver", "status", "objective", "allocation", "colocated_allocation",
                            "effective_throughputs", "timings"}
        assert res["status"] == "optimal"
        assert set(res["timings"]) >= {"build", "compile", "solve", "extract"}
        if solver == "highs":
            ref = res["objective"]
        assert res["objective"] == pytest.approx(ref, rel=1e-6)


def test_extreme_magnitudes_rejected() -> None:
    for field, val in (("throughputs", {"v100": 1e-320, "k80": 1.0}), ("weight", 1e-300),
                       ("steps_remaining", 10 ** 400)):
        d = base()
        d["jobs"][0][field] = val
        with pytest.raises(InputError, match="magnitude"):
            Problem.from_dict(d)


def test_bad_options_and_sub_solvers() -> None:
    import policyopt

    p = Problem.from_dict(base())
    with pytest.raises(InputError, match="time_limit"):
        policyopt.solve(p, "max_min_fairness", time_limit=10 ** 400)
    with pytest.raises(InputError, match="pair_top_k"):
        policyopt.solve(p, "max_min_fairness", pair_top_k=float("inf"))
    with pytest.raises(UnknownNameError, match="pulp:NOPE"):
        policyopt.solve(p, "max_min_fairness", solver="pulp:NOPE")
    with pytest.raises(UnknownNameError, match="cvxpy:NOPE"):
        policyopt.solve(p, "max_min_fairness", solver="cvxpy:NOPE")


def test_cli_missing_optional_dependency_is_one_line(monkeypatch, capsys) -> None:
    """A command whose optional extra is missing prints one line naming the extra."""
    import argparse

    from policyopt import cli

    def needs_torch(args: argparse.Namespace) -> int:
        raise ModuleNotFoundError("No module named 'torch'", name="torch")

    parser = cli.build_parser()
    monkeypatch.setattr(cli, "build_parser", lambda *_: parser)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    sub.choices["policies"].set_defaults(func=needs_torch)
    assert cli.main(["policies"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "policyopt[torch]" in err


def test_errors_survive_pickling() -> None:
    """Errors cross process boundaries (POP workers, executor): type, field, value and message kept."""
    import pickle

    from policyopt.errors import AlignmentError, UnknownNameError

    for err in (InputError("jobs[3].throughputs.v100", float("nan"), "must be finite"),
                UnknownNameError("policy", "nope", ["a", "b"]), AlignmentError("jobs", ["a"], ["b"])):
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert getattr(back, "field", None) == getattr(err, "field", None)


def test_numpy_scalars_are_numbers() -> None:
    """Throughputs, counts, weights and scale factors given as numpy scalars (e.g. read from a
    DataFrame row) parse as the plain numbers they hold; a numpy NaN or bool is refused by name."""
    import numpy as np

    plain = Problem.from_dict(base())
    d = base()
    d["cluster"]["worker_types"]["v100"]["count"] = np.int64(2)
    d["jobs"][0]["throughputs"] = {"v100": np.float64(4.0), "k80": np.float32(1.0)}
    d["jobs"][1].update(scale_factor=np.int32(1), weight=np.float32(1.0))
    got = Problem.from_dict(d)
    assert got.to_dict() == plain.to_dict()
    assert all(type(v) is float for j in got.jobs for v in j.throughputs.values())
    assert type(got.jobs[1].scale_factor) is int and type(got.jobs[1].weight) is float
    d["jobs"][0]["throughputs"]["v100"] = np.float64("nan")
    with pytest.raises(InputError) as e:
        Problem.from_dict(d)
    assert e.value.field == "jobs[0].throughputs.v100" and "finite" in str(e.value)
    d["jobs"][0]["throughputs"]["v100"] = np.bool_(True)
    with pytest.raises(InputError) as e:
        Problem.from_dict(d)
    assert e.value.field == "jobs[0].throughputs.v100"
