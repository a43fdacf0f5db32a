"""Malformed and hostile inputs (hypothesis): a real server must answer every request with a JSON
4xx (or a 2xx when the fuzzed input happens to be valid), never a 5xx, and stay healthy."""
from __future__ import annotations

import json
from typing import Any, Iterator

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from policyopt.examples import load_example  # noqa: E402
from policyopt.service import create_app  # noqa: E402
from policyopt.service.examples import synthetic_cluster, synthetic_jobs  # noqa: E402
from policyopt.service.server import ServiceThread  # noqa: E402

pytestmark = pytest.mark.service

SMALL = load_example("small").to_dict()
FUZZ = settings(max_examples=60, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))

leaves = (st.none() | st.booleans() | st.integers() | st.integers(min_value=10 ** 18, max_value=10 ** 400)
          | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=12))
json_values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                           | st.dictionaries(st.text(max_size=8), inner, max_size=4), max_leaves=25)
# values that look like the real thing: known keys mixed in
keys = st.sampled_from(["policy", "problem", "options", "cluster", "jobs", "worker_types", "id", "throughputs",
                        "v100", "count", "round", "steps", "durations", "completed", "progress", "workers",
                        "worker_type", "server", "colocated", "scale_factor", "steps_remaining", "time_limit"])
shaped = st.recursive(leaves, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(keys | st.text(max_size=4), inner, max_size=5), max_leaves=30)


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[httpx.Client, str]]:
    path = tmp_path_factory.mktemp("fuzz") / "state.sqlite"
    with ServiceThread(create_app(path, max_body_bytes=100_000)) as url, \
            httpx.Client(base_url=url, timeout=60) as c:
        r = c.post("/v1/sessions", json={"cluster": synthetic_cluster(4), "round_length": 60})
        sid = r.json()["session_id"]
        c.post(f"/v1/sessions/{sid}/jobs", json={"jobs": synthetic_jobs(6, seed=3)})
        c.post(f"/v1/sessions/{sid}/rounds/next")
        yield c, sid


def _send(c: httpx.Client, path: str, payload: Any) -> httpx.Response:
    data = json.dumps(payload).encode() if not isinstance(payload, bytes) else payload
    return c.post(path, content=data, headers={"content-type": "application/json"})


def _check(r: httpx.Response, allow_ok: bool) -> None:
    assert r.status_code < 500, r.text
    body = r.json()
    if r.status_code >= 400:
        assert body["error"] and isinstance(body["message"], str) and isinstance(body["detail"], list)
        for d in body["detail"]:
            assert isinstance(d["field"], str) and d["problem"]
    else:
        assert allow_ok, (r.status_code, r.text)


def _paths(sid: str) -> list[tuple[str, bool]]:
    """Endpoint and whether a random body could be valid there."""
    s = f"/v1/sessions/{sid}"
    return [("/v1/solve", False), ("/v1/sessions", False), (f"{s}/jobs", False), (f"{s}/workers", False),
            (f"{s}/progress", True), (f"{s}/rounds/next", True)]


@FUZZ
@given(payload=json_values | shaped, which=st.integers(0, 5))
def test_random_json(env: tuple[httpx.Client, str], payload: Any, which: int) -> None:
    c, sid = env
    path, allow_ok = _paths(sid)[which]
    _check(_send(c, path, payload), allow_ok)


@FUZZ
@given(data=st.binary(max_size=200), which=st.integers(0, 5))
def test_random_bytes(env: tuple[httpx.Client, str], data: bytes, which: int) -> None:
    c, sid = env
    path, allow_ok = _paths(sid)[which]
    _check(_send(c, path, data), allow_ok and data.strip() in (b"", b"{}", b"null"))


def _replace_somewhere(doc: Any, draw: Any, value: Any) -> Any:
    """``doc`` with one randomly chosen node (or key) replaced by ``value``."""
    if isinstance(doc, dict) and doc and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(doc)))
        out = dict(doc)
        if draw(st.integers(0, 4)) == 0:
            out[draw(st.text(max_size=6))] = value  # add an unexpected key
        else:
            out[key] = _replace_somewhere(doc[key], draw, value)
        return out
    if isinstance(doc, list) and doc and draw(st.booleans()):
        i = draw(st.integers(0, len(doc) - 1))
        return [*doc[:i], _replace_somewhere(doc[i], draw, value), *doc[i + 1:]]
    return value


@FUZZ
@given(data=st.data())
def test_mutated_valid_requests(env: tuple[httpx.Client, str], data: st.DataObject) -> None:
    """Valid requests with one node replaced by a random value: 200 or a 4xx naming a field."""
    c, sid = env
    value = data.draw(json_values)
    which = data.draw(st.integers(0, 2))
    if which == 0:
        path, doc = "/v1/solve", {"policy": "max_min_fairness", "problem": SMALL, "options": {"time_limit": 5}}
    elif which == 1:
        path, doc = f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(2, seed=1, prefix="m")}
    else:
        path, doc = "/v1/sessions", {"cluster": SMALL["cluster"], "policy": "max_min_fairness", "round_length": 30}
    mutated = _replace_somewhere(doc, data.draw, value)
    _check(_send(c, path, mutated), allow_ok=True)


def test_hostile_bodies_and_health_afterwards(env: tuple[httpx.Client, str]) -> None:
    c, sid = env
    hostile = [b"[" * 50_000 + b"]" * 50_000,  # deep nesting
               b'{"policy": "max_min_fairness", "problem": ' + b"1" * 5000 + b"}",  # a 5000-digit integer
               b'{"policy": "max_min_fairness", "problem": {"cluster": {"worker_types": {"v100": {"count": 1e999}}},'
               b' "jobs": []}}',
               b'{"a": 1, "a": 2}', b"\xff\xfe\x00garbage", b"NaN", b'"just a string"', b""]
    for body in hostile:
        for path, allow_ok in _paths(sid):
            _check(_send(c, path, body), allow_ok and body == b"")
    long_id = {"policy": "max_min_fairness", "problem": {"cluster": {"worker_types": {"v100": {"count": 1}}},
                                                        "jobs": [{"id": "x" * 50_000, "throughputs": {"v100": 1}}]}}
    r = _send(c, "/v1/solve", long_id)  # valid, merely large (the body limit bounds it)
    assert r.status_code == 200 and r.json()["allocation"]["x" * 50_000] == {"v100": 1.0}
    r = c.post("/v1/solve", content=b"{}", headers={"content-type": "text/plain"})
    assert r.status_code == 422
    assert c.get("/v1/health").json()["status"] == "ok"
    ok = c.post("/v1/solve", json={"policy": "max_min_fairness", "problem": SMALL})
    assert ok.status_code == 200 and ok.json()["status"] == "optimal"
    assert c.get(f"/v1/sessions/{sid}").status_code == 200
