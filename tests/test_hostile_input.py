"""Hostile input (issue 23 items 1, 3, 4, 6, 14; issue 15 item 3's HTTP contract): every broken
document is one line naming what is wrong, with exit status 2 on the CLI and 422 over HTTP; an
empty problem has a defined answer; the keep-alive connection survives a refused request."""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any, Iterator

import pytest

from policyopt import json_input
from policyopt.cli import main
from policyopt.errors import InputError
from policyopt.executor.spec import load_jobs
from policyopt.problem import Problem
from policyopt.schema import MAGNITUDE

PLAIN = {"cluster": {"worker_types": {"v100": {"count": 2}, "k80": {"count": 2}}},
         "jobs": [{"id": "a", "throughputs": {"v100": 4.0, "k80": 1.0}},
                  {"id": "b", "throughputs": {"v100": 2.0, "k80": 1.5}}]}

DEEP = "[" * 100_000 + "]" * 100_000
BROKEN: dict[str, tuple[bytes, str]] = {
    "not-utf8": (b'{"cluster": {"worker_types": {"v\xff100": {"count": 2}}}, "jobs": []}', "UTF-8"),
    "deep": (DEEP.encode(), "nested too deeply"),
    "deep-in-throughputs": (('{"cluster": {"worker_types": {"v100": 2}}, "jobs": [{"id": "a", "throughputs": '
                             + "{\"v100\": " * 100_000 + "1" + "}" * 100_000 + "}]}").encode(), "nested too deeply"),
    "huge-int": (('{"cluster": {"worker_types": {"v100": {"count": ' + "9" * 10_000 + '}}}, "jobs": []}').encode(),
                 "number too large"),
    "surrogate": (b'{"cluster": {"worker_types": {"v100": 2}}, '
                  b'"jobs": [{"id": "\\ud800", "throughputs": {"v100": 1}}]}',
                  "surrogate"),
}


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_cli_solve_prints_one_line_and_exits_2(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data, words = BROKEN[name]
    path = tmp_path / "p.json"
    path.write_bytes(data)
    assert main(["solve", "--input", str(path), "--policy", "max_min_fairness"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and words in err[0] and "Traceback" not in err[0], err
    if name == "surrogate":
        assert "jobs[0].id" in err[0]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_executor_jobs_file_is_one_input_error(name: str, tmp_path: Path) -> None:
    data, words = BROKEN[name]
    path = tmp_path / "jobs.json"
    path.write_bytes(data)
    with pytest.raises(InputError) as exc:
        load_jobs(path)
    assert words in str(exc.value) and "\n" not in str(exc.value)


def test_loads_accepts_what_json_accepts() -> None:
    doc = {"a": ["ü", "😀", 1.5, -3, None, True], "b": {"c": "\u00e9"}}
    assert json_input.loads(json.dumps(doc).encode()) == doc
    assert json_input.loads(json.dumps(doc, ensure_ascii=False).encode("utf-8")) == doc
    assert json_input.loads('{"pair": "\\ud83d\\ude00"}') == {"pair": "😀"}  # a valid surrogate pair


# ------------------------------------------------------------------------------------ empty problem
def test_empty_problem_is_optimal_and_empty_without_warnings(capsys: pytest.CaptureFixture[str],
                                                              tmp_path: Path) -> None:
    from policyopt.policy import get_policy
    from policyopt.pop import pop

    empty = Problem.from_dict({"cluster": PLAIN["cluster"], "jobs": []})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for name in ("max_min_fairness", "max_sum_throughput", "fifo", "finish_time_fairness", "min_cost",
                     "isolated", "max_min_fairness_water_filling"):
            res = get_policy(name).solve(empty)
            assert res.status.value == "optimal" and res.allocation == {} and res.objective is None, name
        assert pop(get_policy("max_min_fairness"), k=2, parallel=False).solve(empty).allocation == {}
    path = tmp_path / "empty.json"
    path.write_text(json.dumps({"cluster": PLAIN["cluster"], "jobs": []}))
    assert main(["solve", "--input", str(path), "--policy", "max_min_fairness"]) == 0
    out = capsys.readouterr()
    body = json.loads(out.out[out.out.index("{"):])
    assert body["status"] == "optimal" and body["allocation"] == {} and "RuntimeWarning" not in out.err


# ------------------------------------------------------------------------------------ one magnitude range
def test_one_magnitude_range_everywhere() -> None:
    from policyopt.service import validation

    lo, hi = MAGNITUDE
    for value in (lo / 10, hi * 10):
        d = json.loads(json.dumps(PLAIN))
        d["jobs"][0]["throughputs"]["v100"] = value
        with pytest.raises(InputError) as exc:
            Problem.from_dict(d)
        assert exc.value.field == "jobs[0].throughputs.v100" and f"[{lo:g}, {hi:g}]" in exc.value.problem
        with pytest.raises(InputError):
            validation.check_json_numbers({"x": value}, "body", magnitudes=True)
    for value in (lo, hi, 0.0):
        d = json.loads(json.dumps(PLAIN))
        d["jobs"][0]["throughputs"]["k80"] = value
        Problem.from_dict(d)
        validation.check_json_numbers({"x": value}, "body", magnitudes=True)


# ------------------------------------------------------------------------------------ HTTP
httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from policyopt.service import Limits, create_app
    from policyopt.service.server import ServiceThread

    path = tmp_path_factory.mktemp("hostile") / "state.sqlite"
    with ServiceThread(create_app(path, max_body_bytes=4_000_000,
                                  limits=Limits(default_time_limit=20.0, max_time_limit=30.0))) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        yield c


def _post_raw(client: Any, path: str, body: bytes) -> Any:
    return client.post(path, content=body, headers={"content-type": "application/json"})


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_http_broken_bodies_are_422_naming_the_problem(client: Any, name: str) -> None:
    data, words = BROKEN[name]
    body = b'{"policy": "max_min_fairness", "problem": ' + data + b"}"
    r = _post_raw(client, "/v1/solve", body)
    assert r.status_code == 422, r.text
    e = r.json()
    assert e["error"] == "invalid_input" and words in e["message"], e
    assert r.headers.get("connection", "").lower() != "close"
    if name == "surrogate":
        assert e["detail"][0]["field"] == "problem.jobs[0].id"
    ok = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN})  # same connection
    assert ok.status_code == 200, ok.text


def test_http_surrogate_in_session_job_is_422_and_the_connection_survives(client: Any) -> None:
    sid = client.post("/v1/sessions", json={"cluster": PLAIN["cluster"]}).json()["session_id"]
    body = (b'{"jobs": [{"id": "\\ud800x", "throughputs": {"v100": 1.0}, "steps_remaining": 10}]}')
    r = _post_raw(client, f"/v1/sessions/{sid}/jobs", body)
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "jobs[0].id", r.text
    assert r.headers.get("connection", "").lower() != "close"
    good = client.post(f"/v1/sessions/{sid}/jobs",
                       json={"jobs": [{"id": "ok", "throughputs": {"v100": 1.0}, "steps_remaining": 10}]})
    assert good.status_code == 200 and client.get(f"/v1/sessions/{sid}").status_code == 200


def test_http_empty_problem_is_optimal(client: Any) -> None:
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": {**PLAIN, "jobs": []}})
    assert r.status_code == 200 and r.json()["status"] == "optimal" and r.json()["allocation"] == {}


def test_http_unknown_fields_name_the_closest(client: Any) -> None:
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": {**PLAIN, "clusters": {}}})
    assert r.status_code == 422
    d = r.json()["detail"][0]
    assert d["field"] == "problem.clusters" and "did you mean 'cluster'" in d["problem"]
    r = client.post("/v1/solve", json={"policy": "max_min_fairness",
                                       "problem": {**PLAIN, "cluster": {**PLAIN["cluster"], "extra": 1}}})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "problem.cluster.extra"


def test_http_pop_k_is_capped_and_time_limit_covers_all_groups(client: Any) -> None:
    from policyopt.policy import get_policy
    from policyopt.service.stateless import wrap_pop

    from policyopt.service.examples import synthetic_problem

    prob = synthetic_problem(96, seed=2)
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": prob, "pop_k": 96})
    assert r.status_code == 422 and r.json()["detail"][0]["field"] == "pop_k"
    assert "at most 3" in r.json()["detail"][0]["problem"]
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": prob, "pop_k": 3})
    assert r.status_code == 200 and r.json()["pop"]["k"] == 3
    wrapped = wrap_pop(get_policy("max_min_fairness", time_limit=6.0), 3, 0, 96)
    assert wrapped.inner.config["time_limit"] == pytest.approx(2.0)  # type: ignore[attr-defined]


def test_http_solver_failures_are_502_and_503(client: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from policyopt.errors import SolverError, SolverNotAvailableError
    from policyopt.service import routes

    def failing(exc: Exception) -> Any:
        def solve(policy: Any, problem: Any, field: str = "problem") -> Any:
            raise exc
        return solve

    monkeypatch.setattr(routes, "solve_checked", failing(SolverError("highs: run() returned kError")))
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN})
    assert r.status_code == 502 and r.json()["error"] == "solver_failed"
    monkeypatch.setattr(routes, "solve_checked", failing(SolverNotAvailableError("gurobi is not installed")))
    r = client.post("/v1/solve", json={"policy": "max_min_fairness", "problem": PLAIN})
    assert r.status_code == 503 and r.json()["error"] == "solver_unavailable"


def test_openapi_holds_every_field_solve_accepts(client: Any) -> None:
    from policyopt.schema import (COLOCATED_FIELDS, COLOCATED_TYPE_FIELDS, ENTITY_FIELDS, JOB_FIELDS,
                                  PROBLEM_SECTIONS, WORKER_TYPE_FIELDS)

    spec = client.get("/openapi.json").json()
    req = spec["components"]["schemas"]["SolveRequest"]["properties"]["problem"]
    plain = req["anyOf"][0]["properties"]
    assert set(plain) == set(PROBLEM_SECTIONS)  # colocated_types was missing before
    assert set(plain["jobs"]["items"]["properties"]) == {f.name for f in JOB_FIELDS}  # job_type was missing
    wt = plain["cluster"]["properties"]["worker_types"]["additionalProperties"]["anyOf"][0]
    assert set(wt["properties"]) == {f.name for f in WORKER_TYPE_FIELDS}
    assert set(plain["colocated"]["items"]["properties"]) == {f.name for f in COLOCATED_FIELDS}
    assert set(plain["colocated_types"]["items"]["properties"]) == {f.name for f in COLOCATED_TYPE_FIELDS}
    assert set(plain["entities"]["additionalProperties"]["properties"]) == {f.name for f in ENTITY_FIELDS}
    assert "reconfig" in req["anyOf"][1]["properties"]
    # every field in the OpenAPI's job object is accepted by /v1/solve
    job = {"id": "a", "throughputs": {"v100": 1.0}}
    job.update({f.name: f.default for f in JOB_FIELDS if f.default is not None})
    job.update(job_type="x", entity=None, slo_seconds=50.0, arrival=1.0)
    r = client.post("/v1/solve", json={"policy": "max_min_fairness",
                                       "problem": {**PLAIN, "jobs": [job], "colocated_types": []}})
    assert r.status_code == 200, r.text


def test_every_route_declares_its_response_model(client: Any) -> None:
    from fastapi.routing import APIRoute

    from policyopt.service import routes

    found = [r for router in (routes.stateless, routes.sessions) for r in router.routes if isinstance(r, APIRoute)]
    assert len(found) == 15
    untyped = [f"{sorted(r.methods)} {r.path}" for r in found if r.response_model is None]
    assert not untyped, untyped
    spec = client.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            ok = [c for c in op["responses"] if c.startswith("2")]
            assert ok and "schema" in op["responses"][ok[0]].get("content", {}).get("application/json", {}), \
                (method, path)


def _asgi(app: Any, method: str, path: str, body: bytes = b"", query: bytes = b"") -> tuple[int, dict[str, Any]]:
    """One request handed to the application as an ASGI server would, with ``path`` already
    percent-decoded (a server decoding with ``surrogateescape`` passes lone surrogates through;
    an HTTP client cannot send one). An exception escaping the application raises here."""
    import asyncio

    sent: list[dict[str, Any]] = []
    done = False

    async def receive() -> dict[str, Any]:
        nonlocal done
        if done:
            await asyncio.sleep(3600)
        done = True
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
             "scheme": "http", "path": path, "raw_path": b"/", "query_string": query, "root_path": "",
             "headers": [(b"host", b"test"), (b"content-type", b"application/json"),
                         (b"content-length", str(len(body)).encode())],
             "client": ("127.0.0.1", 1), "server": ("127.0.0.1", 80)}
    asyncio.run(app(scope, receive, send))
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    data = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return status, json.loads(data)


def test_lone_surrogate_in_a_path_parameter_is_422_naming_it(tmp_path: Path) -> None:
    """A session, job or worker id in the URL path holding a lone surrogate is the documented 422
    naming the parameter (before: the id reached SQLite, UnicodeEncodeError, 500)."""
    from policyopt.service import create_app

    app = create_app(tmp_path / "s.sqlite")
    status, created = _asgi(app, "POST", "/v1/sessions", json.dumps({"cluster": PLAIN["cluster"]}).encode())
    assert status == 201
    sid = created["session_id"]
    for method, path, field in [("GET", "/v1/sessions/\ud800", "path.session_id"),
                                ("DELETE", "/v1/sessions/x\udcff", "path.session_id"),
                                ("GET", "/v1/sessions/\ud800/jobs", "path.session_id"),
                                ("DELETE", f"/v1/sessions/{sid}/jobs/\ud800", "path.job_id"),
                                ("DELETE", f"/v1/sessions/{sid}/workers/v100-\udced", "path.worker_id"),
                                ("POST", "/v1/sessions/\ud800/rounds/next", "path.session_id")]:
        status, body = _asgi(app, method, path, b"{}" if method == "POST" else b"")
        assert status == 422, (method, ascii(path), body)
        assert body["error"] == "invalid_input" and body["detail"][0]["field"] == field, body
        assert "lone UTF-16 surrogate" in body["detail"][0]["problem"]
    status, body = _asgi(app, "GET", f"/v1/sessions/{sid}")  # the session is untouched
    assert status == 200 and body["session_id"] == sid
