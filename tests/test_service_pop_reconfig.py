"""``POST /v1/solve`` with POP (``pop_k``, ``seed``) and with reconfiguration problems (a ``reconfig``
section), on a real uvicorn server on a loopback port with a real client (httpx).

Every allocation is checked against the cluster from the response alone: per worker type,
``Σ_m scale_m · Σ_{c on t} X[m,c] ≤ count_t`` for plain problems, and for reconfiguration problems
``Σ_m Σ_{c on t} g_c · X[m,c] ≤ GPUs_t`` and ``Σ c_c · X[m,c] ≤ cores_t`` with ``g_c``, ``c_c``
read from the configuration label ``<type>|g<GPUs>|c<cores>|n<nodes>|<plan>``.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any, Iterator

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from policyopt import get_policy  # noqa: E402
from policyopt.pop import pop  # noqa: E402
from policyopt.problem import Problem  # noqa: E402
from policyopt.reconfig.trace import trace_problem, transformers_trace  # noqa: E402
from policyopt.service import Limits, create_app  # noqa: E402
from policyopt.service.examples import synthetic_problem  # noqa: E402
from policyopt.service.server import ServiceThread  # noqa: E402

pytestmark = pytest.mark.service

TOL = 1e-6
LABEL = re.compile(r"^(?P<type>[^|]+)\|g(?P<g>\d+)\|c(?P<c>\d+)\|n(?P<n>\d+)\|(?P<plan>.+)$")
# 40 jobs of 4 kinds; scale factors up to 4, so k = 4 leaves every group 4 GPUs of each type. The
# kinds matter: POP shuffles jobs inside a stratum (scale factor, job_type) with the seed; without
# labels every job with its own throughput vector is a stratum of one and the seed changes nothing.
PLAIN = synthetic_problem(40, gpus_per_type=16, seed=5)
for _i, _job in enumerate(PLAIN["jobs"]):
    _job["job_type"] = f"model-{_i % 4}"


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[httpx.Client]:
    path = tmp_path_factory.mktemp("svc_pop") / "state.sqlite"
    limits = Limits(default_time_limit=20.0, max_time_limit=30.0, min_jobs_per_pop_part=1)  # small test problems
    with ServiceThread(create_app(path, limits=limits)) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def reconfig_problem() -> dict[str, Any]:
    """Eight transformer jobs (three guaranteed, tenant ``prod`` with a 50% quota) on two 8-GPU
    nodes, as the interchange JSON with its ``reconfig`` section."""
    prob = trace_problem(transformers_trace(8, static=True, seed=3, max_gpus=8), nodes=2, quota_fraction=0.5)
    return json.loads(json.dumps(prob.to_dict()))


def _ok(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 200, r.text
    return r.json()


def _error(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    body = r.json()
    assert set(body) == {"error", "message", "detail"} and body["error"] == "invalid_input"
    return body


def _plain_usage(problem: dict[str, Any], allocation: dict[str, dict[str, float]]) -> dict[str, float]:
    """Workers used per physical type: ``Σ_m scale_m · X[m,c]`` over configurations ``c`` of the type."""
    scale = {str(j["id"]): j.get("scale_factor", 1) for j in problem["jobs"]}
    used = dict.fromkeys(problem["cluster"]["worker_types"], 0.0)
    for job, row in allocation.items():
        for config, x in row.items():
            used[config.removesuffix("_unconsolidated")] += scale[job] * x
    return used


def _reconfig_usage(allocation: dict[str, dict[str, float]]) -> tuple[dict[str, float], dict[str, float]]:
    """(GPUs, cores) used per node type, read from the configuration labels."""
    gpus: dict[str, float] = {}
    cores: dict[str, float] = {}
    for row in allocation.values():
        for label, x in row.items():
            m = LABEL.match(label)
            assert m, f"not a configuration label: {label!r}"
            t = m["type"]
            gpus[t] = gpus.get(t, 0.0) + int(m["g"]) * x
            cores[t] = cores.get(t, 0.0) + int(m["c"]) * x
    return gpus, cores


# ------------------------------------------------------------------------------------------------ POP
def test_pop_section_capacity_and_library_agreement(client: httpx.Client) -> None:
    body = _ok(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN, "pop_k": 4, "seed": 7}))
    p = body["pop"]
    assert (p["k"], p["k_requested"], p["seed"], p["k_reason"]) == (4, 4, 7, None)
    assert p["mode"] == "sequential" and p["workers"] == 1 and p["parallel_seconds"] is None
    assert sum(p["group_sizes"]) == 40 and max(p["group_sizes"]) - min(p["group_sizes"]) <= 1
    assert len(p["partition_seconds"]) == 4 and all(s > 0 for s in p["partition_seconds"])
    assert p["sequential_seconds"] == pytest.approx(sum(p["partition_seconds"]))
    for t, counts in p["group_counts"].items():  # the groups split each type's workers exactly
        assert sum(counts) == PLAIN["cluster"]["worker_types"][t]["count"]
    alloc = body["allocation"]
    assert set(alloc) == {j["id"] for j in PLAIN["jobs"]}
    for job, row in alloc.items():
        assert all(x >= -TOL for x in row.values()) and sum(row.values()) <= 1 + TOL, (job, row)
    for t, used in _plain_usage(PLAIN, alloc).items():
        assert used <= PLAIN["cluster"]["worker_types"][t]["count"] + TOL, (t, used)
    # the same partition and solves as the library's POP with the same seed
    lib = pop(get_policy("max_min_fairness", time_limit=20.0), k=4, seed=7,
              parallel=False).solve(Problem.from_dict(PLAIN))
    assert lib.extra["pop"]["group_sizes"] == p["group_sizes"]
    for job, row in lib.allocation.items():
        for config, x in row.items():
            assert alloc[job].get(config, 0.0) == pytest.approx(x, abs=1e-9), (job, config)
    # the merged allocation is feasible for the whole problem, so the full optimum is at least as good
    full = _ok(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN}))
    assert "pop" not in full
    assert full["objective"] >= body["objective"] - 1e-6
    thr = {str(j["id"]): j["throughputs"] for j in PLAIN["jobs"]}
    recomputed = {j: sum(thr[j][c] * x for c, x in row.items()) for j, row in alloc.items()}
    for j, v in recomputed.items():
        assert body["effective_throughputs"][j] == pytest.approx(v, rel=1e-6, abs=1e-9)


def test_pop_same_seed_same_allocation(client: httpx.Client) -> None:
    req = {"policy": "max_sum_throughput", "problem": PLAIN, "pop_k": 3, "seed": 11}
    a = _ok(client.post("/v1/solve", json=req))
    b = _ok(client.post("/v1/solve", json=req))
    assert a["allocation"] == b["allocation"]
    other = _ok(client.post("/v1/solve", json={**req, "seed": 12}))  # the seed reaches the partition
    assert other["pop"]["seed"] == 12 and other["allocation"] != a["allocation"]
    assert a["pop"]["group_sizes"] == b["pop"]["group_sizes"] and a["pop"]["combine"] == "sum"
    assert isinstance(a["objective"], float) and a["objective"] > 0
    default = _ok(client.post("/v1/solve", json={**req, "seed": None}))  # null seed = the default 0
    zero = _ok(client.post("/v1/solve", json={**req, "seed": 0}))
    assert default["pop"]["seed"] == 0 and default["allocation"] == zero["allocation"]


def test_pop_bad_requests_name_the_field(client: httpx.Client) -> None:
    e = _error(client.post("/v1/solve", json={"policy": "hierarchical", "problem": PLAIN, "pop_k": 2}))
    d = e["detail"][0]
    assert d["field"] == "pop_k" and "hierarchical" in d["problem"] and "pop_combine" in d["problem"]
    for bad in (0, -3, "2", 2.0, True, 2 ** 63):
        e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN, "pop_k": bad}))
        assert [x["field"] for x in e["detail"]] == ["pop_k"], (bad, e)
    for bad in (-1, "7", 1.5):
        e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN,
                                                  "pop_k": 2, "seed": bad}))
        assert [x["field"] for x in e["detail"]] == ["seed"], (bad, e)
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN, "seed": 3}))
    assert e["detail"][0]["field"] == "seed" and "pop_k" in e["detail"][0]["problem"]


# ------------------------------------------------------------------------------------------ reconfig
def _check_reconfig(problem: dict[str, Any], body: dict[str, Any]) -> None:
    """Labels name cluster node types; GPUs and cores per node type within the cluster; the SLA
    report covers exactly the guaranteed jobs, and a met guarantee shows in the job's throughput."""
    types = problem["cluster"]["worker_types"]
    alloc = body["allocation"]
    assert set(alloc) == {str(j["id"]) for j in problem["jobs"]}
    gpus, cores = _reconfig_usage(alloc)
    assert set(gpus) <= set(types)
    for t, used in gpus.items():
        nodes = types[t]["count"] // types[t]["gpus_per_server"]
        assert used <= types[t]["count"] + TOL, (t, used)
        assert cores[t] <= nodes * problem["reconfig"]["node_types"][t]["cpus_per_node"] + TOL, (t, cores[t])
    for job, row in alloc.items():
        assert sum(row.values()) <= 1 + TOL, job
    guaranteed = {j for j, r in problem["reconfig"]["jobs"].items() if r.get("guaranteed")}
    report = body["sla_report"]
    assert sorted(r["job"] for r in report) == sorted(guaranteed)
    assert any(r["admitted"] for r in report) and any(not r["admitted"] for r in report)
    for r in report:
        if r["met"]:  # the job ran all the time at >= its reference steps/s
            assert r["admitted"] and r["time_share"] == pytest.approx(1.0)
            assert body["effective_throughputs"][r["job"]] >= r["required"] * (1 - 1e-6), r
        else:
            assert r["reason"], r


def test_reconfig_problem_labels_capacity_and_sla(client: httpx.Client, reconfig_problem: dict[str, Any]) -> None:
    body = _ok(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": reconfig_problem}))
    assert body["status"] == "optimal" and "pop" not in body
    _check_reconfig(reconfig_problem, body)
    # job throughputs and scale factors may be left out: the reference steps/s are filled in
    bare = copy.deepcopy(reconfig_problem)
    for j in bare["jobs"]:
        j.pop("throughputs"), j.pop("scale_factor")
    again = _ok(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": bare}))
    assert again["objective"] == pytest.approx(body["objective"], rel=1e-9)
    assert again["sla_report"] == body["sla_report"]
    # the same JSON without the reconfig section is a fixed-plan problem over the worker type
    plain = {k: v for k, v in reconfig_problem.items() if k != "reconfig"}
    fixed = _ok(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": plain}))
    assert "sla_report" not in fixed and all(set(r) <= {"a100"} for r in fixed["allocation"].values())


def test_reconfig_problem_under_pop(client: httpx.Client, reconfig_problem: dict[str, Any]) -> None:
    body = _ok(client.post("/v1/solve", json={"policy": "max_sum_throughput", "options": {"normalize": True},
                                              "problem": reconfig_problem, "pop_k": 2, "seed": 1}))
    p = body["pop"]
    assert p["k"] == 2 and p["seed"] == 1 and p["mode"] == "sequential"
    assert p["group_counts"]["a100"] == [8, 8]  # whole 8-GPU nodes per group
    assert p["sla"]["guaranteed"] == len(body["sla_report"])
    assert p["sla"]["met"] == sum(r["met"] for r in body["sla_report"])
    _check_reconfig(reconfig_problem, body)
    full = _ok(client.post("/v1/solve", json={"policy": "max_sum_throughput", "options": {"normalize": True},
                                              "problem": reconfig_problem}))
    assert full["objective"] >= body["objective"] - 1e-6 * max(1.0, abs(full["objective"]))


@pytest.mark.parametrize("mutate, field, words", [
    (lambda p: p["reconfig"]["jobs"]["2"].__setitem__("model", "gpt-5"), "problem.reconfig.jobs.2.model", "unknown"),
    (lambda p: p["reconfig"]["jobs"]["2"]["plan"].__setitem__("dp", 3), "problem.reconfig.jobs.2.plan", "differs"),
    (lambda p: p["reconfig"].pop("node_types"), "problem.reconfig.node_types", "required"),
    (lambda p: p["reconfig"]["jobs"].pop("4"), "problem.reconfig.jobs.4", "reconfig entry"),
    (lambda p: p["reconfig"]["jobs"]["4"].__setitem__("gpus", "two"), "problem.reconfig.jobs.4.gpus", "number"),
    (lambda p: p["reconfig"]["node_types"]["a100"].__setitem__("cpus_per_node", -5),
     "problem.reconfig.node_types.a100.cpus_per_node", "> 0"),
    (lambda p: p["reconfig"]["jobs"].__setitem__("5", 7), "problem.reconfig.jobs.5", "object"),
    (lambda p: p.__setitem__("reconfig", None), "problem.reconfig", "object"),
    (lambda p: p["reconfig"]["models"]["vit-86m"].__setitem__("layers", 1e300),
     "problem.reconfig.models.vit-86m.layers", "integer"),
])
def test_malformed_reconfig_names_the_field(client: httpx.Client, reconfig_problem: dict[str, Any],
                                             mutate: Any, field: str, words: str) -> None:
    prob = copy.deepcopy(reconfig_problem)
    mutate(prob)
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": prob}))
    fields = [d["field"] for d in e["detail"]]
    assert field in fields, e
    assert words in e["detail"][fields.index(field)]["problem"], e


def test_plain_job_without_throughputs_is_refused(client: httpx.Client) -> None:
    prob = copy.deepcopy(PLAIN)
    del prob["jobs"][0]["throughputs"]
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": prob}))
    assert e["detail"][0]["field"] == "problem.jobs[0].throughputs" and "required" in e["detail"][0]["problem"]
    assert _ok(client.get("/v1/health"))["status"] == "ok"
