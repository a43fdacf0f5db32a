"""Sessions under concurrency and restarts, on real servers on loopback ports (httpx clients)."""
from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from policyopt.service import create_app  # noqa: E402
from policyopt.service.examples import synthetic_cluster, synthetic_jobs  # noqa: E402
from policyopt.service.server import ServiceThread  # noqa: E402

pytestmark = pytest.mark.service

VOLATILE = ("session_id", "version", "timings")


def _stable(rd: dict[str, Any]) -> dict[str, Any]:
    """A round response without the fields that legitimately differ between two runs."""
    out = {k: v for k, v in rd.items() if k not in VOLATILE}
    if out.get("allocation"):
        out["allocation"] = {k: v for k, v in out["allocation"].items() if k != "solve_seconds"}
    return out


def _post(c: httpx.Client, path: str, body: Any = None, status: int = 200) -> dict[str, Any]:
    r = c.post(path, json=body if body is not None else {})
    assert r.status_code == status, r.text
    return r.json()


def test_concurrent_progress_loses_no_update(tmp_path: Path) -> None:
    """8 threads post progress for the same round concurrently; every step is counted once."""
    with ServiceThread(create_app(tmp_path / "c.sqlite")) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = _post(c, "/v1/sessions", {"cluster": synthetic_cluster(8), "round_length": 60}, 201)["session_id"]
        _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(12, seed=4)})
        rd = _post(c, f"/v1/sessions/{sid}/rounds/next")
        running = sorted(rd["assignment"])
        assert len(running) >= 4
        v0 = c.get(f"/v1/sessions/{sid}").json()["version"]
        threads, posts, errors = 8, 12, []

        def worker(k: int) -> None:
            with httpx.Client(base_url=url, timeout=60) as tc:
                for i in range(posts):
                    job = running[(k + i) % len(running)]
                    r = tc.post(f"/v1/sessions/{sid}/progress", json={"round": 0, "steps": {job: 1.0 + k}})
                    if r.status_code != 200:
                        errors.append(r.text)

        ts = [threading.Thread(target=worker, args=(k,)) for k in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert not errors
        expected = {j: 0.0 for j in running}
        for k in range(threads):
            for i in range(posts):
                expected[running[(k + i) % len(running)]] += 1.0 + k
        jobs = {j["id"]: j for j in c.get(f"/v1/sessions/{sid}/jobs").json()}
        for j in running:
            assert jobs[j]["steps_done"] == pytest.approx(expected[j])
        assert c.get(f"/v1/sessions/{sid}").json()["version"] == v0 + threads * posts
        # concurrent "next round" calls closing the same round: exactly one wins
        codes: list[int] = []

        def closer() -> None:
            with httpx.Client(base_url=url, timeout=60) as tc:
                codes.append(tc.post(f"/v1/sessions/{sid}/rounds/next", json={"close_round": 0}).status_code)

        ts = [threading.Thread(target=closer) for _ in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        assert sorted(codes) == [200, 409, 409, 409]
        hist = c.get(f"/v1/sessions/{sid}/rounds/0").json()
        assert hist["progress"]["steps"] == pytest.approx(expected)


def test_two_service_instances_on_one_file(tmp_path: Path) -> None:
    """Two apps (separate locks) on one SQLite file: the version check refuses stale writes (409),
    clients retry, and no update is lost."""
    path = tmp_path / "shared.sqlite"
    with ServiceThread(create_app(path)) as url_a, ServiceThread(create_app(path)) as url_b:
        with httpx.Client(base_url=url_a, timeout=60) as c:
            sid = _post(c, "/v1/sessions", {"cluster": synthetic_cluster(4)}, 201)["session_id"]
            _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(6, seed=8, max_scale=1)})
            rd = _post(c, f"/v1/sessions/{sid}/rounds/next")
        job = sorted(rd["assignment"])[0]
        conflicts = [0]
        lock = threading.Lock()

        def worker(url: str) -> None:
            with httpx.Client(base_url=url, timeout=60) as tc:
                for _ in range(15):
                    while True:
                        r = tc.post(f"/v1/sessions/{sid}/progress", json={"round": 0, "steps": {job: 1.0}})
                        if r.status_code == 409:
                            with lock:
                                conflicts[0] += 1
                            continue
                        assert r.status_code == 200, r.text
                        break

        ts = [threading.Thread(target=worker, args=(u,)) for u in (url_a, url_b, url_a, url_b)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        with httpx.Client(base_url=url_b, timeout=60) as c:
            got = {j["id"]: j for j in c.get(f"/v1/sessions/{sid}/jobs").json()}[job]["steps_done"]
    assert got == pytest.approx(60.0)


def _script(c: httpx.Client, sid: str, rounds: range, log: list[dict[str, Any]]) -> None:
    """A deterministic driver: progress every round, arrivals, a worker failure, a removal."""
    for r in rounds:
        body: dict[str, Any] = {}
        if r > 0:
            prev = log[-1]
            body = {"close_round": r - 1, "progress": {
                "round": r - 1, "steps": {j: 2000.0 + 100 * i for i, j in enumerate(sorted(prev["assignment"]))},
                "round_duration": 55.0 + r}}
        log.append(_stable(_post(c, f"/v1/sessions/{sid}/rounds/next", body)))
        if r == 2:
            _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(5, seed=77, prefix="late")})
        if r == 4:
            assert c.delete(f"/v1/sessions/{sid}/workers/v100-1-2").status_code == 200
        if r == 6:
            assert c.delete(f"/v1/sessions/{sid}/jobs/job3").status_code == 200
        if r == 7:
            _post(c, f"/v1/sessions/{sid}/workers", {"workers": [{"id": "v100-9-0", "worker_type": "v100",
                                                                    "server": "v100-9"}]})


def test_restart_in_the_middle_of_a_session(tmp_path: Path) -> None:
    """Stop the server after 5 rounds, start a new app on the same file: the session continues
    exactly as an uninterrupted one (same placements, pending lists, completions; the objective to
    1e-9 relative)."""
    create = {"cluster": synthetic_cluster(8), "round_length": 60, "min_recompute_interval": 120.0,
              "options": {"space_sharing": False}}
    jobs = synthetic_jobs(16, seed=11)
    for j in jobs[:3]:
        j["steps_remaining"] = 3000.0  # these complete after a few rounds

    ref: list[dict[str, Any]] = []
    with ServiceThread(create_app(tmp_path / "ref.sqlite")) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = _post(c, "/v1/sessions", create, 201)["session_id"]
        _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": jobs})
        _script(c, sid, range(12), ref)

    got: list[dict[str, Any]] = []
    path = tmp_path / "restart.sqlite"
    with ServiceThread(create_app(path)) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = _post(c, "/v1/sessions", create, 201)["session_id"]
        _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": jobs})
        _script(c, sid, range(5), got)
        before = c.get(f"/v1/sessions/{sid}").json()
    with ServiceThread(create_app(path)) as url, httpx.Client(base_url=url, timeout=60) as c:
        assert c.get(f"/v1/sessions/{sid}").json() == before
        _script(c, sid, range(5, 12), got)
        jobs_after = {j["id"]: j["status"] for j in c.get(f"/v1/sessions/{sid}/jobs").json()}

    assert len(got) == len(ref) == 12
    for r, (a, b) in enumerate(zip(got, ref)):
        # the uninterrupted server warm-starts each recompute from its policy object's previous solve,
        # the restarted one solves its first recompute cold: the same optimum, to rounding
        oa, ob = ((rd.get("allocation") or {}).get("objective") for rd in (a, b))
        if oa is not None and ob is not None:
            assert oa == pytest.approx(ob, rel=1e-9), f"round {r}'s objective differs after the restart"
            a, b = ({**rd, "allocation": {**rd["allocation"], "objective": None}} for rd in (a, b))
        assert a == b, f"round {r} differs after the restart"
    assert any(rd["completed"] for rd in ref), "the script should complete some jobs"
    assert any(rd["migrated"] or rd["recomputed"] for rd in ref[5:])
    assert jobs_after["job3"] == "removed" and sum(s == "completed" for s in jobs_after.values()) >= 3


def test_session_equals_a_direct_python_round_loop(tmp_path: Path) -> None:
    """The HTTP session (state reloaded from SQLite on every request) places every round exactly as
    an in-memory loop over the library: solve → RoundMechanism → RoundPipeline."""
    import policyopt
    from policyopt.mechanism import RoundMechanism
    from policyopt.placement import ClusterLayout, RoundPipeline

    cluster = synthetic_cluster(8)
    jobs = synthetic_jobs(24, seed=21)  # more demand than GPUs: jobs rotate
    counts = {t: 8 for t in cluster["worker_types"]}
    layout = ClusterLayout.from_counts(counts, {t: 4 for t in counts})
    worker_of = [f"{t}-{g // 4}-{g % 4}" for t in counts for g in range(8)]
    result = policyopt.solve({"cluster": cluster, "jobs": jobs}, "max_min_fairness")
    mech = RoundMechanism(counts, round_length=60.0)
    mech.set_allocation(result.allocation, result.colocated_allocation, {j["id"]: j["scale_factor"] for j in jobs})
    pipeline = RoundPipeline.from_names(layout, "mechanism", options={"policy": {"mechanism": mech}})
    with ServiceThread(create_app(tmp_path / "d.sqlite")) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = _post(c, "/v1/sessions", {"cluster": cluster, "round_length": 60.0}, 201)["session_id"]
        _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": jobs})
        seen: set[tuple[str, ...]] = set()
        for r in range(15):
            rd = _post(c, f"/v1/sessions/{sid}/rounds/next")
            res = pipeline.run_round([])
            mech.record_round(res.selection)
            want = {j: sorted(worker_of[g] for g in gs) for j, gs in res.placement.gpus.items()}
            assert {j: sorted(ws) for j, ws in rd["assignment"].items()} == want, f"round {r}"
            assert rd["pending"][: len(res.selection.pending)] == list(res.selection.pending)
            seen.add(tuple(sorted(rd["assignment"])))
    assert len(seen) > 3  # the running set changes from round to round


def test_finish_time_fairness_session_carries_isolated_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A ``finish_time_fairness`` session poses each job's cumulative isolated time: 0 at its first
    recompute, then ``(s_prev - s) / thr_prev`` with the isolated throughput of the previous call
    (as the simulator and the executor do), kept in the session's state across a server restart."""
    from policyopt.service import rounds as R

    posed: list[Any] = []
    real = R.session_problem
    monkeypatch.setattr(R, "session_problem", lambda *a, **k: posed.append(real(*a, **k)) or posed[-1])
    body = {"cluster": synthetic_cluster(2), "round_length": 60, "policy": "finish_time_fairness"}
    db = tmp_path / "f.sqlite"
    with ServiceThread(create_app(db)) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = _post(c, "/v1/sessions", body, 201)["session_id"]
        _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(5, seed=1, max_scale=1)})
        rd = _post(c, f"/v1/sessions/{sid}/rounds/next")
        assert [j.isolated_time for j in posed[-1].jobs] == [0.0] * 5
        first = {j.id: j.steps_remaining for j in posed[-1].jobs}
        _post(c, f"/v1/sessions/{sid}/progress", {"round": 0, "steps": {j: 600.0 for j in rd["assignment"]}})
    with ServiceThread(create_app(db)) as url, httpx.Client(base_url=url, timeout=60) as c:  # a restart
        _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(1, seed=2, prefix="late", max_scale=1)})
        _post(c, f"/v1/sessions/{sid}/rounds/next")  # an arrival: recompute
    assert len(posed) == 2
    second = {j.id: j for j in posed[-1].jobs}
    assert second["late0"].isolated_time == 0.0
    from policyopt.policy import get_policy

    iso = get_policy("finish_time_fairness").solve(posed[0]).extra["isolated_throughputs"]
    want = {j: (first[j] - second[j].steps_remaining) / iso[j] for j in first}
    assert sum(v > 0 for v in want.values()) >= 2
    assert {j: second[j].isolated_time for j in first} == pytest.approx(want, rel=1e-9)


def test_session_keeps_one_policy_object_between_rounds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The policy object of a session lives across its rounds (AlloX's and Gandiva's memory, warm
    starts): one is made at the first recompute and reused at the next ones; a second server on
    the same file, which did not run the session's last round, makes its own."""
    import policyopt.service.round_steps as RS
    import policyopt.service.sessions as S

    made: list[Any] = []
    real = S.make_policy
    for module in (S, RS):  # create's check / the rounds' recompute
        monkeypatch.setattr(module, "make_policy", lambda *a, **k: made.append(real(*a, **k)[0]) or (made[-1], {}))
    db = tmp_path / "p.sqlite"
    app = create_app(db)
    with ServiceThread(app) as url, httpx.Client(base_url=url, timeout=60) as c:
        sid = _post(c, "/v1/sessions", {"cluster": synthetic_cluster(2), "round_length": 60, "policy": "allox"},
                    201)["session_id"]
        for r in range(3):  # an arrival before each round: three recomputes
            _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(2, seed=r, prefix=f"r{r}-", max_scale=1)})
            _post(c, f"/v1/sessions/{sid}/rounds/next")
        assert len(made) == 2  # create's check, then the session's policy object
        assert made[1]._running  # AlloX remembers the jobs it started
    with ServiceThread(create_app(db)) as url, httpx.Client(base_url=url, timeout=60) as c:
        _post(c, f"/v1/sessions/{sid}/jobs", {"jobs": synthetic_jobs(1, seed=9, prefix="x", max_scale=1)})
        _post(c, f"/v1/sessions/{sid}/rounds/next")
    assert len(made) == 3

