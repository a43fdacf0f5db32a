"""HTTP service round trips on a real uvicorn server on a loopback port, with a real client (httpx)."""
from __future__ import annotations

import argparse
import json
import re
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

import policyopt  # noqa: E402
from policyopt.examples import load_example  # noqa: E402
from policyopt.service import Limits, create_app  # noqa: E402
from policyopt.service.examples import synthetic_cluster, synthetic_jobs, synthetic_problem  # noqa: E402
from policyopt.service.server import ServiceThread  # noqa: E402

pytestmark = pytest.mark.service

SMALL = load_example("small").to_dict()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    path = tmp_path_factory.mktemp("svc") / "state.sqlite"
    with ServiceThread(create_app(path, max_body_bytes=200_000,
                                  limits=Limits(default_time_limit=20.0, max_time_limit=30.0))) as url:
        yield url


@pytest.fixture(scope="module")
def client(server: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=server, timeout=60) as c:
        yield c


def _error(r: httpx.Response, status: int) -> dict[str, Any]:
    assert r.status_code == status, r.text
    body = r.json()
    assert set(body) == {"error", "message", "detail"}
    return body


# ------------------------------------------------------------------------------------------- stateless
def test_health_policies_and_openapi(client: httpx.Client) -> None:
    assert client.get("/v1/health").json()["status"] == "ok"
    pols = {p["name"]: p for p in client.get("/v1/policies").json()}
    assert pols.keys() == {p["name"] for p in policyopt.list_policies()}
    opts = {o["name"]: o for o in pols["max_min_fairness"]["options"]}
    assert {"solver", "algorithm", "time_limit", "space_sharing"} <= set(opts)
    assert opts["algorithm"]["choices"] == ["auto", "simplex", "ipm", "pdlp"]
    assert pols["max_min_fairness"]["doc"]
    schema = client.get("/openapi.json").json()
    for path in ("/v1/solve", "/v1/policies", "/v1/sessions", "/v1/sessions/{session_id}/rounds/next",
                 "/v1/sessions/{session_id}/progress", "/v1/sessions/{session_id}/workers/{worker_id}"):
        assert path in schema["paths"], path
    assert "SolveRequest" in schema["components"]["schemas"]
    assert "ApiKey" in schema["components"]["securitySchemes"]


def test_solve_matches_the_library(client: httpx.Client) -> None:
    for options in ({}, {"space_sharing": True}, {"algorithm": "ipm", "solver": "highs"}):
        r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL, "options": options})
        assert r.status_code == 200, r.text
        got = r.json()
        want = policyopt.solve(SMALL, "max_min_fairness", **options).to_dict()
        assert got["status"] == want["status"] == "optimal"
        assert got["objective"] == pytest.approx(want["objective"], rel=1e-6)
        assert got.keys() >= {"policy", "solver", "allocation", "colocated_allocation", "effective_throughputs",
                              "timings"}
        for job, row in want["allocation"].items():
            assert got["allocation"][job] == pytest.approx(row, abs=1e-6)


def test_solve_on_64_jobs_respects_capacity(client: httpx.Client) -> None:
    prob = synthetic_problem(64, gpus_per_type=16, seed=3)
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": prob})
    assert r.status_code == 200
    alloc = r.json()["allocation"]
    scale = {j["id"]: j["scale_factor"] for j in prob["jobs"]}
    for t in ("v100", "p100", "k80"):
        used = sum(scale[j] * row.get(t, 0.0) for j, row in alloc.items())
        assert used <= 16 + 1e-6
    assert all(sum(row.values()) <= 1 + 1e-6 for row in alloc.values())


def test_time_limit_status_and_fallback(client: httpx.Client) -> None:
    prob = synthetic_problem(600, gpus_per_type=200, seed=1)
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": prob,
                                       "options": {"time_limit": 1e-6}})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "time_limit"
    assert "fallback" in body["message"] or "best feasible" in body["message"]
    assert len(body["allocation"]) == 600
    scale = {j["id"]: j["scale_factor"] for j in prob["jobs"]}
    for t in ("v100", "p100", "k80"):  # the fallback is a feasible allocation
        assert sum(scale[j] * row.get(t, 0.0) for j, row in body["allocation"].items()) <= 200 + 1e-6
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL,
                                              "options": {"time_limit": 31}}), 422)
    assert e["detail"][0]["field"] == "options.time_limit"
    assert "maximum" in e["detail"][0]["problem"]


@pytest.mark.parametrize("mutate, field, words", [
    (lambda p: p["jobs"][1]["throughputs"].__setitem__("v100", -1.0), "problem.jobs[1].throughputs.v100", ">= 0"),
    (lambda p: p["jobs"][0]["throughputs"].__setitem__("tpu", 3.0), "problem.jobs[0].throughputs", "unknown"),
    (lambda p: p["jobs"][2].__setitem__("id", "resnet50"), "problem.jobs[].id", "duplicate"),
    (lambda p: p["jobs"][0].__setitem__("throughputs", {"v100": "fast"}), "problem.jobs[0].throughputs.v100", "number"),
    (lambda p: p["jobs"][0].__setitem__("colour", "red"), "problem.jobs[0].colour", "unknown field"),
    (lambda p: p["cluster"]["worker_types"]["v100"].__setitem__("count", -4), "problem.cluster.worker_types.v100.count",
     ">= 0"),
    (lambda p: p["colocated"][0].__setitem__("jobs", ["resnet50", "ghost"]),
     "problem.colocated[resnet50|ghost].jobs[1]", "unknown"),
    (lambda p: p.pop("jobs"), "problem.jobs", "required"),
    (lambda p: p["jobs"][3].__setitem__("scale_factor", 10 ** 400), "problem.jobs[3].scale_factor", "magnitude"),
    (lambda p: p["jobs"][3].__setitem__("scale_factor", 64), "problem.jobs[3]", "fits no worker type"),
    (lambda p: p["jobs"][3].__setitem__("id", 10 ** 30), "problem.jobs[3].id", "out of range"),
    (lambda p: p["jobs"][0].__setitem__("weight", 1e-320), "problem.jobs[0].weight", "magnitude"),
    (lambda p: p["jobs"][0]["throughputs"].__setitem__("k80", 1e300), "problem.jobs[0].throughputs.k80", "magnitude"),
])
def test_bad_problems_name_the_field(client: httpx.Client, mutate: Any, field: str, words: str) -> None:
    prob = json.loads(json.dumps(SMALL))
    mutate(prob)
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": prob}), 422)
    fields = [d["field"] for d in e["detail"]]
    assert field in fields, e
    assert words in e["detail"][fields.index(field)]["problem"], e


def test_bad_envelopes(client: httpx.Client) -> None:
    e = _error(client.post("/v1/solve", json={"policy": "nope", "problem": SMALL}), 422)
    assert e["detail"][0]["field"] == "policy" and "max_min_fairness" in e["detail"][0]["known"]
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL,
                                              "options": {"solver": "gurobi"}}), 422)
    assert e["detail"][0]["field"] == "options.solver"
    for bad_solver in ("pulp:NO_SUCH_SOLVER", "cvxpy:NO_SUCH_SOLVER"):  # sub-solvers resolve late: tried once
        e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL,
                                                  "options": {"solver": bad_solver}}), 422)
        assert e["detail"][0]["field"] == "options.solver"
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL,
                                              "options": {"warp": 9}}), 422)
    assert e["detail"][0]["field"] == "options.warp"
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL,
                                              "options": {"pair_top_k": 10 ** 400}}), 422)
    assert e["detail"][0]["field"] == "options.pair_top_k"
    e = _error(client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL,
                                              "options": {"algorithm": "magic"}}), 422)
    assert e["detail"][0]["field"] == "options.algorithm"
    e = _error(client.post("/v1/solve", content=b'{"policy": "max_min_fairness", "problem": {',
                           headers={"content-type": "application/json"}), 422)
    assert e["detail"][0]["field"] == "body" and "malformed JSON" in e["detail"][0]["problem"]
    e = _error(client.post("/v1/solve", json={"problem": SMALL, "extra": 1}), 422)
    assert {d["field"] for d in e["detail"]} == {"policy", "extra"}
    _error(client.get("/v1/nothing"), 404)
    _error(client.put("/v1/solve", json={}), 405)


def test_oversized_bodies_are_refused(client: httpx.Client, server: str) -> None:
    big = {"policy": "max_min_fairness", "problem": synthetic_problem(2000)}
    e = _error(client.post("/v1/solve", json=big), 413)
    assert e["error"] == "payload_too_large"

    def chunks() -> Iterator[bytes]:  # no Content-Length: counted while streaming
        data = json.dumps(big).encode()
        for i in range(0, len(data), 16_384):
            yield data[i:i + 16_384]

    r = client.post("/v1/solve", content=chunks(), headers={"content-type": "application/json"})
    assert r.status_code == 413 and r.json()["error"] == "payload_too_large"
    # a lying Content-Length header larger than the limit is refused before any body is read
    host, port = server.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as s:
        s.sendall(b"POST /v1/solve HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: 999999999\r\n\r\n")
        reply = s.recv(4096).decode()
    assert reply.startswith("HTTP/1.1 413")
    assert client.get("/v1/health").status_code == 200


def test_api_key(tmp_path: Path) -> None:
    with ServiceThread(create_app(tmp_path / "k.sqlite", api_key="s3cret")) as url:
        with httpx.Client(base_url=url, timeout=30) as c:
            assert c.get("/v1/health").status_code == 200
            assert c.get("/openapi.json").status_code == 200
            e = _error(c.get("/v1/policies"), 401)
            assert e["error"] == "unauthorized"
            _error(c.get("/v1/policies", headers={"X-API-Key": "wrong"}), 401)
            _error(c.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL}), 401)
            _error(c.post("/v1/sessions", json={"cluster": SMALL["cluster"]}), 401)
            ok = c.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL},
                        headers={"X-API-Key": "s3cret"})
            assert ok.status_code == 200
            schema = c.get("/openapi.json").json()
            assert schema["paths"]["/v1/solve"]["post"]["security"] == [{"ApiKey": []}]


# ------------------------------------------------------------------------------------------- sessions
def _session(client: httpx.Client, **kw: Any) -> str:
    body = {"cluster": synthetic_cluster(8), "round_length": 60.0, **kw}
    r = client.post("/v1/sessions", json=body)
    assert r.status_code == 201, r.text
    return r.json()["session_id"]


def _check_round(rd: dict[str, Any], workers: dict[str, str], scale: dict[str, int]) -> None:
    """No worker holds two combinations; every job gets exactly scale_factor workers of one type."""
    used: list[str] = []
    for p in rd["placements"]:
        assert len(p["workers"]) == scale[p["jobs"][0]]
        assert {workers[w] for w in p["workers"]} == {p["worker_type"]}
        used += p["workers"]
    assert len(used) == len(set(used))
    running = [j for p in rd["placements"] for j in p["jobs"]]
    assert len(running) == len(set(running)) and set(running) == set(rd["assignment"])


def test_session_round_trip(client: httpx.Client) -> None:
    sid = _session(client)
    info = client.get(f"/v1/sessions/{sid}").json()
    assert info["worker_counts"] == {"v100": 8, "p100": 8, "k80": 8} and info["round"] is None
    workers = {w["id"]: w["worker_type"] for w in client.get(f"/v1/sessions/{sid}/workers").json()}
    assert len(workers) == 24 and workers["v100-1-3"] == "v100"
    jobs = synthetic_jobs(20, seed=5)
    jobs[0]["steps_remaining"] = 1.0  # finishes in its first round
    scale = {j["id"]: j["scale_factor"] for j in jobs}
    assert client.post(f"/v1/sessions/{sid}/jobs", json={"jobs": jobs}).status_code == 200
    ran: dict[str, float] = {}
    first_done = None
    for r in range(6):
        rd = client.post(f"/v1/sessions/{sid}/rounds/next", json={}).json()
        assert rd["round"] == r and rd["time"] == pytest.approx(60.0 * r)
        assert rd["recomputed"] == (r == 0 or bool(rd["completed"]))
        _check_round(rd, workers, scale)
        if "job0" in rd["completed"]:
            first_done = r
        steps = {j: 10.0 for j in rd["assignment"]}
        for j in steps:
            ran[j] = ran.get(j, 0.0) + 10.0
        pr = client.post(f"/v1/sessions/{sid}/progress", json={"round": r, "steps": steps})
        assert pr.status_code == 200, pr.text
    assert first_done is not None and first_done >= 1
    listed = {j["id"]: j for j in client.get(f"/v1/sessions/{sid}/jobs").json()}
    assert listed["job0"]["status"] == "completed"
    for j, done in ran.items():
        assert listed[j]["steps_done"] == pytest.approx(done)
    hist = client.get(f"/v1/sessions/{sid}/rounds/2").json()
    assert hist["duration"] == pytest.approx(60.0) and hist["plan"]["round"] == 2
    assert hist["progress"]["steps"]
    _error(client.get(f"/v1/sessions/{sid}/rounds/99"), 404)
    assert _error(client.get(f"/v1/sessions/{sid}/rounds/{10 ** 30}"), 422)["detail"][0]["field"] == "path.index"


def test_realized_fractions_track_the_allocation(client: httpx.Client) -> None:
    """Over many rounds the time each job ran on each type approaches X[job, type]·T."""
    sid = _session(client, cluster={"worker_types": {"v100": {"count": 2}, "k80": {"count": 2}}})
    jobs = [{"id": f"j{i}", "throughputs": {"v100": 40.0 - 5 * i, "k80": 10.0 + i}, "steps_remaining": 1e12}
            for i in range(5)]
    client.post(f"/v1/sessions/{sid}/jobs", json={"jobs": jobs})
    got = np.zeros((5, 2))
    rounds = 60
    for _r in range(rounds):
        rd = client.post(f"/v1/sessions/{sid}/rounds/next", json={}).json()
        for p in rd["placements"]:
            got[int(p["jobs"][0][1:]), ["v100", "k80"].index(p["worker_type"])] += 1
    X = policyopt.solve({"cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 2}}},
                         "jobs": jobs}, "max_min_fairness").allocation
    want = np.array([[X[f"j{i}"]["v100"], X[f"j{i}"]["k80"]] for i in range(5)])
    assert np.abs(got / rounds - want).max() < 0.05


def test_worker_failure_and_job_removal(client: httpx.Client) -> None:
    sid = _session(client, cluster={"worker_types": {"v100": {"count": 4, "gpus_per_server": 4},
                                                     "k80": {"count": 4, "gpus_per_server": 4}}})
    jobs = synthetic_jobs(6, seed=2, max_scale=2)
    for j in jobs:
        j["throughputs"].pop("p100")
    client.post(f"/v1/sessions/{sid}/jobs", json={"jobs": jobs})
    rd = client.post(f"/v1/sessions/{sid}/rounds/next").json()
    victim = next(iter(rd["assignment"].values()))[0]
    r = client.delete(f"/v1/sessions/{sid}/workers/{victim}")
    assert r.status_code == 200 and r.json()["worker_counts"]["v100" if victim.startswith("v") else "k80"] == 3
    _error(client.delete(f"/v1/sessions/{sid}/workers/{victim}"), 404)
    rd2 = client.post(f"/v1/sessions/{sid}/rounds/next", json={"close_round": 0}).json()
    assert rd2["recomputed"] is True
    assert all(victim not in ws for ws in rd2["assignment"].values())
    # the worker comes back on its server
    server = victim.rsplit("-", 1)[0]
    r = client.post(f"/v1/sessions/{sid}/workers",
                    json={"workers": [{"id": victim, "worker_type": victim.split("-")[0], "server": server}]})
    assert r.status_code == 200
    gone = next(iter(rd2["assignment"]))
    assert client.delete(f"/v1/sessions/{sid}/jobs/{gone}").status_code == 200
    _error(client.delete(f"/v1/sessions/{sid}/jobs/{gone}"), 404)
    rd3 = client.post(f"/v1/sessions/{sid}/rounds/next").json()
    assert rd3["recomputed"] and gone not in rd3["assignment"] and gone not in rd3["pending"]
    assert sum(len(ws) for ws in rd3["assignment"].values()) <= 8
    # a job larger than the live cluster waits as unschedulable
    big = {"id": "huge", "throughputs": {"v100": 10.0}, "scale_factor": 4, "steps_remaining": 10.0}
    assert client.post(f"/v1/sessions/{sid}/jobs", json={"jobs": [big]}).status_code == 200
    for w in ("v100-0-0", "v100-0-1"):
        client.delete(f"/v1/sessions/{sid}/workers/{w}")
    rd4 = client.post(f"/v1/sessions/{sid}/rounds/next").json()
    assert "huge" in rd4["unschedulable"] and "huge" in rd4["pending"]


def test_session_errors_leave_state_untouched(client: httpx.Client) -> None:
    sid = _session(client)
    jobs = synthetic_jobs(4, seed=9)
    client.post(f"/v1/sessions/{sid}/jobs", json={"jobs": jobs})
    rd = client.post(f"/v1/sessions/{sid}/rounds/next").json()
    before = client.get(f"/v1/sessions/{sid}").json()
    running = next(iter(rd["assignment"]))
    bad_requests = [
        ("post", "/jobs", {"jobs": [{"id": "n1", "throughputs": {"v100": 5.0}}]}, 422, "jobs[0].steps_remaining"),
        ("post", "/jobs", {"jobs": [{**jobs[0]}]}, 422, "jobs[0].id"),
        ("post", "/jobs", {"jobs": [{"id": "ok", "throughputs": {"v100": 5.0}, "steps_remaining": 5.0},
                                    {"id": "bad", "throughputs": {"v100": float("nan")}, "steps_remaining": 5.0}]},
         422, "jobs[1].throughputs.v100"),
        ("post", "/jobs", {"jobs": [{"id": "x", "throughputs": {"v100": 5.0}, "steps_remaining": 1.0}],
                           "colocated": [{"jobs": ["x", "ghost"], "worker_type": "v100", "throughputs": [1, 1]}]},
         422, "colocated[x|ghost].jobs[1]"),
        ("post", "/workers", {"workers": [{"id": "v100-0-0", "worker_type": "v100"}]}, 422, "workers[0].id"),
        ("post", "/workers", {"workers": [{"id": "t0", "worker_type": "tpu"}]}, 422, "workers[0].worker_type"),
        ("post", "/workers", {"workers": [{"id": "t0", "worker_type": "k80", "server": "v100-0"}]}, 422,
         "workers[0].server"),
        ("post", "/progress", {"round": 0, "steps": {running: 5.0, "nobody": 1.0}}, 422, "steps.nobody"),
        ("post", "/progress", {"round": 0, "steps": {running: -5.0}}, 422, f"steps.{running}"),
        ("post", "/progress", {"round": 0, "durations": {running: 61.0}}, 422, f"durations.{running}"),
        ("post", "/progress", {"round": 0, "round_duration": 0}, 422, "round_duration"),
        ("post", "/progress", {"round": 7, "steps": {running: 5.0}}, 409, "round"),
        ("post", "/progress", {"round": "0"}, 422, "round"),
        ("post", "/rounds/next", {"close_round": 5}, 409, "close_round"),
        ("post", "/rounds/next", {"progress": {"round": 0, "steps": {running: float("inf")}}}, 422,
         f"progress.steps.{running}"),
    ]
    for method, path, body, status, field in bad_requests:
        r = client.request(method.upper(), f"/v1/sessions/{sid}{path}", content=json.dumps(body),
                           headers={"content-type": "application/json"})
        e = _error(r, status)
        assert field in [d["field"] for d in e["detail"]], (path, body, e)
    after = client.get(f"/v1/sessions/{sid}").json()
    assert after == before
    assert {j["id"] for j in client.get(f"/v1/sessions/{sid}/jobs").json()} == {j["id"] for j in jobs}
    # bad session configurations
    for body, field in [({"cluster": {"worker_types": {}}}, "cluster.worker_types"),
                        ({"cluster": synthetic_cluster(2), "policy": "nope"}, "policy"),
                        ({"cluster": synthetic_cluster(2), "round_length": -1}, "round_length"),
                        ({"cluster": synthetic_cluster(2), "placer": "magic"}, "placer"),
                        ({"cluster": synthetic_cluster(2), "migration": "magic"}, "migration"),
                        ({"cluster": synthetic_cluster(2), "options": {"time_limit": 0}}, "options.time_limit")]:
        e = _error(client.post("/v1/sessions", json=body), 422)
        assert e["detail"][0]["field"] == field, e


def test_sessions_are_isolated(client: httpx.Client) -> None:
    a, b = _session(client), _session(client)
    assert a != b and len(a) == 32 and int(a, 16) >= 0
    client.post(f"/v1/sessions/{a}/jobs", json={"jobs": synthetic_jobs(3, seed=1, prefix="a")})
    client.post(f"/v1/sessions/{b}/jobs", json={"jobs": synthetic_jobs(2, seed=1, prefix="a")})  # same ids: fine
    assert len(client.get(f"/v1/sessions/{a}/jobs").json()) == 3
    assert len(client.get(f"/v1/sessions/{b}/jobs").json()) == 2
    client.post(f"/v1/sessions/{a}/rounds/next")
    assert client.get(f"/v1/sessions/{b}").json()["round"] is None
    _error(client.get("/v1/sessions/" + "0" * 32), 404)
    assert client.delete(f"/v1/sessions/{a}").status_code == 200
    _error(client.get(f"/v1/sessions/{a}"), 404)
    _error(client.post(f"/v1/sessions/{a}/rounds/next"), 404)
    assert client.get(f"/v1/sessions/{b}/jobs").status_code == 200


def test_serve_command(tmp_path: Path) -> None:
    """``policyopt serve`` (via add_subparser) starts uvicorn; it answers on its port with the key."""
    code = ("import argparse, sys; from policyopt.service.cli import add_subparser; "
            "p = argparse.ArgumentParser(); add_subparser(p.add_subparsers()); "
            "a = p.parse_args(sys.argv[1:]); sys.exit(a.func(a))")
    proc = subprocess.Popen([sys.executable, "-c", code, "serve", "--port", "0", "--state", str(tmp_path / "c.sqlite"),
                             "--api-key", "k1", "--log-level", "info"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = None
        assert proc.stderr is not None
        for _ in range(200):
            line = proc.stderr.readline()
            m = re.search(r"Uvicorn running on (http://127\.0\.0\.1:\d+)", line)
            if m:
                url = m.group(1)
                break
            if not line and proc.poll() is not None:
                break
        assert url is not None, "the server did not start"
        assert httpx.get(f"{url}/v1/health", timeout=30).status_code == 200
        assert httpx.get(f"{url}/v1/policies", timeout=30).status_code == 401
        assert httpx.get(f"{url}/v1/policies", headers={"X-API-Key": "k1"}, timeout=30).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    from policyopt.errors import InputError
    from policyopt.service.cli import serve

    bad = argparse.Namespace(host="127.0.0.1", port=70000, state=str(tmp_path / "x.sqlite"), api_key=None,
                             max_body_bytes=10, default_time_limit=1.0, max_time_limit=2.0, log_level="info")
    with pytest.raises(InputError, match="--port"):
        serve(bad)
