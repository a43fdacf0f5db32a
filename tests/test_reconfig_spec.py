"""The ``"reconfig"`` section of the interchange JSON: round trip, defaults, errors, dispatch."""
from __future__ import annotations

import copy
import json

import pytest

from policyopt import InputError, Problem, UnknownNameError
from policyopt.perfmodel import ClusterSpec, Plan, predict_iter_time, configs_frame
from policyopt.reconfig import (A100_NODE, CATALOGUE, ReconfigProblem, load_problem,
                                problem_from_dict)
from policyopt.reconfig.examples import GPUS_PER_NODE


def small_problem_dict() -> dict:
    """Two nodes of 8 GPUs; a guaranteed RoBERTa job and a best-effort T5 job."""
    roberta, t5 = CATALOGUE["roberta-355m"], CATALOGUE["t5-1.2b"]
    return {
        "cluster": {"worker_types": {"a100": {"count": 16, "gpus_per_server": 8, "price_per_hour": 4.0}}},
        "jobs": [{"id": "r", "steps_remaining": 1000, "entity": "prod"},
                 {"id": "t", "steps_remaining": 500, "entity": "research", "time_since_start": 7200}],
        "entities": {"prod": {"weight": 1.0}, "research": {"weight": 1.0}},
        "reconfig": {
            "node_types": {"a100": A100_NODE.to_dict()},
            "models": {"roberta-355m": roberta.to_dict(), "t5-1.2b": t5.to_dict()},
            "jobs": {"r": {"model": "roberta-355m", "node_type": "a100", "gpus": 4, "cpus": 32,
                           "plan": {"dp": 4}, "guaranteed": True},
                     "t": {"model": "t5-1.2b", "node_type": "a100", "gpus": 2, "cpus": 16,
                           "plan": {"dp": 2, "ga_steps": 2}, "reconfigurations": 1,
                           "checkpoint_seconds": 60,
                           "current": {"node_type": "a100", "gpus": 2, "cpus": 16,
                                       "plan": {"dp": 2, "ga_steps": 2}}}},
            "quotas": {"prod": {"gpus": 8}},
            "options": {"reconfigure": "all", "threshold": 0.97},
        },
    }


def test_missing_throughputs_are_the_reference_throughput() -> None:
    p = ReconfigProblem.from_dict(small_problem_dict())
    job = p.job("r")
    assert job.scale_factor == 4
    # independent: 1 / T_iter of 4 GPUs, 32 cores, plain DP on one node
    spec = CATALOGUE["roberta-355m"]
    res = ClusterSpec(8, 96, A100_NODE.bw_intra, A100_NODE.bw_inter, A100_NODE.bw_pcie,
                      A100_NODE.gpu_mem_bytes, A100_NODE.host_mem_per_node).resources(4, 32)
    frame = configs_frame(spec.spec, [Plan(dp=4)], res)
    assert job.throughputs["a100"] == pytest.approx(1.0 / float(predict_iter_time(frame, spec.params)[0]))


def test_round_trip_and_plain_problem_still_parses() -> None:
    p = ReconfigProblem.from_dict(small_problem_dict())
    d = p.to_dict()
    again = ReconfigProblem.from_dict(json.loads(json.dumps(d)))
    assert again.to_dict() == d
    assert again.reconfig == p.reconfig
    plain = Problem.from_dict(d)  # extend, never break: the base parser ignores the section
    assert type(plain) is Problem and plain.job_ids == ["r", "t"]
    assert type(problem_from_dict(d)) is ReconfigProblem
    assert type(problem_from_dict({k: v for k, v in d.items() if k != "reconfig"})) is Problem
    assert type(load_problem(json.dumps(d))) is ReconfigProblem


@pytest.mark.parametrize("path, value, field", [
    (("reconfig", "jobs", "r", "model"), "gpt-9", "reconfig.jobs.r.model"),
    (("reconfig", "jobs", "r", "plan"), {"dp": 2}, "reconfig.jobs.r.plan"),
    (("reconfig", "jobs", "r", "gpus"), 0, "reconfig.jobs.r.gpus"),
    (("reconfig", "jobs", "t", "current", "node_type"), "h100", "reconfig.jobs.t.current.node_type"),
    (("reconfig", "quotas", "nobody"), {"gpus": 1}, "reconfig.quotas.nobody"),
    (("reconfig", "options", "reconfigure"), "everything", "reconfig.options.reconfigure"),
    (("reconfig", "options", "threshold"), 1.5, "reconfig.options.threshold"),
    (("reconfig", "node_types", "a100", "cpus_per_node"), -1, "reconfig.node_types.a100.cpus_per_node"),
    (("reconfig", "models", "t5-1.2b", "perf_params", "k_bwd"), float("nan"),
     "reconfig.models.t5-1.2b.k_bwd"),
    (("reconfig", "jobs", "r", "colour"), "red", "reconfig.jobs.r.colour"),
])
def test_bad_fields_name_the_field(path: tuple, value: object, field: str) -> None:
    d = copy.deepcopy(small_problem_dict())
    node = d
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    with pytest.raises(InputError) as exc:
        ReconfigProblem.from_dict(d)
    assert exc.value.field == field


def test_oom_original_plan_is_rejected() -> None:
    d = small_problem_dict()
    d["reconfig"]["models"]["llama-30b"] = CATALOGUE["llama-30b"].to_dict()
    d["reconfig"]["jobs"]["r"].update(model="llama-30b", gpus=1, cpus=8, plan={"dp": 1})
    with pytest.raises(InputError) as exc:
        ReconfigProblem.from_dict(d)
    assert exc.value.field == "reconfig.jobs.r.plan" and "memory" in exc.value.problem


def test_structural_errors() -> None:
    d = small_problem_dict()
    del d["reconfig"]["jobs"]["t"]
    with pytest.raises(InputError, match="reconfig entry"):
        ReconfigProblem.from_dict(d)
    d = small_problem_dict()
    del d["cluster"]["worker_types"]["a100"]["gpus_per_server"]
    with pytest.raises(InputError) as exc:
        ReconfigProblem.from_dict(d)
    assert exc.value.field == "cluster.worker_types.a100.gpus_per_server"
    d = small_problem_dict()
    d["reconfig"]["jobs"]["ghost"] = d["reconfig"]["jobs"]["r"]
    with pytest.raises(UnknownNameError):
        ReconfigProblem.from_dict(d)


def test_with_jobs_keeps_the_section_and_follows_the_cluster() -> None:
    from policyopt import Cluster
    p = ReconfigProblem.from_dict(small_problem_dict())
    sub = p.with_jobs([p.job("t")], cluster=Cluster.from_counts({"a100": 8}, GPUS_PER_NODE, {"a100": 4.0}))
    assert isinstance(sub, ReconfigProblem) and list(sub.reconfig.jobs) == ["t"]
    assert sub.nodes("a100") == 1.0
    assert sub.scaled_quotas(0.5).reconfig.quotas["prod"].gpus == 4.0


def test_cli_solve_reports_slas_and_takes_float_gpus_per_server(tmp_path, capsys) -> None:
    """`policyopt solve --input` on a reconfig problem prints the SLA report of every guaranteed job
    (LP policies keep it on their space), and `gpus_per_server: 8.0` is taken like 8."""
    from policyopt.cli import main

    raw = small_problem_dict()
    raw["cluster"]["worker_types"]["a100"]["gpus_per_server"] = 8.0
    path = tmp_path / "p.json"
    path.write_text(json.dumps(raw))
    assert main(["solve", "--policy", "max_sum_throughput", "--input", str(path)]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["status"] == "optimal"
    assert [r["job"] for r in out["sla_report"]] == ["r"]
