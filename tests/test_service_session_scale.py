"""Long-lived sessions and big clusters (issue 23 items 8-10, issue 16 item 8): request cost
follows the active jobs, the job cap counts active jobs, the round history is bounded, and the
migration matching never builds a dense worker × worker matrix past its budget."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from policyopt.errors import InputError
from policyopt.service.limits import Limits
from policyopt.service.rounds import MATCHING_MAX_SERVERS, live_layout, migration_rule
from policyopt.service.sessions import ItemNotFound, SessionManager
from policyopt.service.store import Changes, RoundRow, Store

CLUSTER = {"worker_types": {"v100": {"count": 2}, "k80": {"count": 2}}}


def job(i: int | str, steps: float = 1e9) -> dict[str, Any]:
    return {"id": str(i), "throughputs": {"v100": 2.0, "k80": 1.0}, "steps_remaining": steps}


def manager(tmp_path: Path, **limits: Any) -> SessionManager:
    return SessionManager(Store(tmp_path / "s.sqlite"), Limits(default_time_limit=20.0, **limits))


def test_job_cap_counts_active_jobs(tmp_path: Path) -> None:
    m = manager(tmp_path, max_jobs_per_session=10)
    sid = m.create({"cluster": CLUSTER, "policy": "max_min_fairness"})["session_id"]
    m.add_jobs(sid, [job(i) for i in range(10)])
    for i in range(10):
        m.remove_job(sid, str(i))
    m.add_jobs(sid, [job("eleventh")])  # 0 active before: within the cap of 10
    with pytest.raises(InputError) as exc:
        m.add_jobs(sid, [job(f"x{i}") for i in range(10)])
    assert "active" in exc.value.problem
    with pytest.raises(InputError) as exc:  # ids of jobs that left are still taken
        m.add_jobs(sid, [job("3")])
    assert exc.value.field == "jobs[0].id"


def test_requests_read_only_the_active_jobs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    m = manager(tmp_path)
    sid = m.create({"cluster": CLUSTER, "policy": "max_min_fairness"})["session_id"]
    m.add_jobs(sid, [job(f"gone{i}") for i in range(300)])
    m.add_jobs(sid, [job(f"stay{i}") for i in range(3)])
    for i in range(300):
        m.remove_job(sid, f"gone{i}")
    read: list[int] = []
    real = m.store.load

    def counting(*a: Any, **kw: Any) -> Any:
        out = real(*a, **kw)
        read.append(len(out[1]))
        return out

    monkeypatch.setattr(m.store, "load", counting)
    rnd = m.next_round(sid, {})
    m.report_progress(sid, {"round": rnd["round"], "steps": {j: 1.0 for j in rnd["assignment"]}})
    m.next_round(sid, {"close_round": rnd["round"]})
    info = m.info(sid)
    assert max(read) == 3, read  # never the 300 removed jobs
    assert info["jobs"] == {"removed": 300, "active": 3}


def test_colocated_entries_leave_with_their_jobs(tmp_path: Path) -> None:
    m = manager(tmp_path)
    sid = m.create({"cluster": CLUSTER, "policy": "max_min_fairness", "options": {"space_sharing": True}})["session_id"]
    m.add_jobs(sid, [job("a"), job("b"), job("c")],
               [{"jobs": ["a", "b"], "worker_type": "v100", "throughputs": [1.5, 1.5]},
                {"jobs": ["b", "c"], "worker_type": "v100", "throughputs": [1.2, 0.9]}])
    m.remove_job(sid, "b")
    _, _, _, coloc = m.store.load(sid)
    assert coloc == []
    m.next_round(sid, {})


def test_round_history_is_bounded_and_says_so(tmp_path: Path) -> None:
    m = manager(tmp_path, round_history=20)
    sid = m.create({"cluster": CLUSTER, "policy": "max_min_fairness"})["session_id"]
    m.add_jobs(sid, [job("a"), job("b")])
    for _ in range(60):
        m.next_round(sid, {})
    assert m.store.round_range(sid) == (40, 59)
    assert m.round(sid, 59)["round"] == 59
    with pytest.raises(ItemNotFound) as exc:
        m.round(sid, 3)
    assert "no longer kept" in exc.value.problem


def test_ten_thousand_rounds_keep_the_store_flat(tmp_path: Path) -> None:
    """The store's file (database + WAL) stops growing once the retention window is full."""
    store = Store(tmp_path / "s.sqlite")
    state = {"round": None}
    store.create("s", {}, Changes(state=state))
    plan = {"assignment": {f"job{i}": [f"v100-{i}"] for i in range(50)}, "timings": {"total": 0.01}}
    keep, sizes = 100, []
    version = 1
    for r in range(10_000):
        ch = Changes(state={"round": r}, rounds=[RoundRow(r, float(r), None, plan)],
                     round_closes=[(r - 1, 1.0, {"steps": {"job0": 1.0}})] if r else [],
                     prune_rounds_before=r - keep + 1)
        version = store.commit("s", version, ch)
        if r in (2_000, 9_999):
            size = sum(os.path.getsize(p) for p in tmp_path.glob("s.sqlite*"))
            sizes.append(size)
    assert store.round_range("s") == (9_900, 9_999)
    assert sizes[1] <= sizes[0] * 1.05, sizes  # flat: deleted rounds' pages are reused


@pytest.mark.parametrize("servers, rule", [(MATCHING_MAX_SERVERS, "matching"), (MATCHING_MAX_SERVERS + 1, "simple")])
def test_matching_falls_back_to_the_simple_rule_past_its_budget(servers: int, rule: str) -> None:
    workers = [(f"w{i}", "v100", f"s{i}") for i in range(servers)] + [(f"k{i}", "k80", "k") for i in range(4)]
    layout, _ = live_layout(["v100", "k80"], workers)
    assert migration_rule(layout, "matching") == rule
    assert migration_rule(layout, "none") == "none"


def test_big_session_round_uses_the_fallback(tmp_path: Path) -> None:
    m = manager(tmp_path)
    n = MATCHING_MAX_SERVERS + 200
    sid = m.create({"cluster": {"worker_types": {"v100": {"count": n, "gpus_per_server": 1}}},
                    "policy": "max_min_fairness"})["session_id"]
    m.add_jobs(sid, [{"id": str(i), "throughputs": {"v100": 1.0 + i % 3}, "steps_remaining": 1e9}
                     for i in range(n + 50)])
    first = m.next_round(sid, {})
    second = m.next_round(sid, {"close_round": first["round"]})
    assert second["migration"] == "simple" and len(second["assignment"]) == n
    kept = [j for j in second["assignment"] if j in first["assignment"]]
    assert all(second["assignment"][j] == first["assignment"][j] for j in kept)  # renewed jobs stay put


def test_sessions_share_gpus_by_job_type_like_the_simulator(tmp_path: Path) -> None:
    """Issue 16 item 8: ``colocated_types`` at creation + ``job_type`` on jobs + the policy option
    ``space_sharing``: pairs of jobs run on the same GPU when that beats running alone."""
    m = manager(tmp_path)
    table = [{"job_types": ["small", "small"], "worker_type": "v100", "throughputs": [0.9, 0.9]}]
    sid = m.create({"cluster": {"worker_types": {"v100": {"count": 1}}}, "policy": "max_sum_throughput",
                    "options": {"space_sharing": True}, "colocated_types": table})["session_id"]
    m.add_jobs(sid, [{"id": x, "throughputs": {"v100": 1.0}, "steps_remaining": 1e9, "job_type": "small"}
                     for x in ("a", "b")])
    rnd = m.next_round(sid, {})
    assert [sorted(p["jobs"]) for p in rnd["placements"]] == [["a", "b"]]
    assert rnd["assignment"]["a"] == rnd["assignment"]["b"]
    with pytest.raises(InputError) as exc:  # the table is validated against the cluster at creation
        m.create({"cluster": CLUSTER, "colocated_types": [{**table[0], "worker_type": "tpu"}]} | {"policy": "fifo"})
    assert exc.value.field.startswith("colocated_types")


def test_sessions_pack_pending_jobs_onto_running_ones(tmp_path: Path) -> None:
    """Issue 16 item 8: ``packing`` (the simulator's --packing, Tesserae's matching): a job the
    mechanism leaves pending is paired onto a running single job when the pair beats running alone."""
    m = manager(tmp_path)
    table = [{"job_types": ["small", "small"], "worker_type": "v100", "throughputs": [0.8, 0.8]}]
    base = {"cluster": {"worker_types": {"v100": {"count": 1}}}, "policy": "max_min_fairness",
            "colocated_types": table}
    jobs = [{"id": x, "throughputs": {"v100": 1.0}, "steps_remaining": 1e9, "job_type": "small"} for x in ("a", "b")]
    plain = m.create(base)["session_id"]
    m.add_jobs(plain, jobs)
    alone = m.next_round(plain, {})
    assert len(alone["assignment"]) == 1 and len(alone["pending"]) == 1  # one GPU, time-shared
    packed = m.create({**base, "packing": True})["session_id"]
    m.add_jobs(packed, jobs)
    rnd = m.next_round(packed, {})
    assert [sorted(p["jobs"]) for p in rnd["placements"]] == [["a", "b"]] and rnd["pending"] == []
    m.report_progress(packed, {"round": rnd["round"], "steps": {"a": 10.0, "b": 10.0}})
    nxt = m.next_round(packed, {"close_round": rnd["round"]})
    assert sorted(nxt["assignment"]) == ["a", "b"]
    # a job without a job_type is never packed
    m.add_jobs(packed, [{"id": "c", "throughputs": {"v100": 1.0}, "steps_remaining": 1e9}])
    for _ in range(3):
        r = m.next_round(packed, {})
        assert all("c" not in p["jobs"] or len(p["jobs"]) == 1 for p in r["placements"])
