"""The service's adapter to the mechanism and placement (policyopt/service/rounds.py) and its store."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from policyopt.errors import InputError
from policyopt.mechanism import RoundMechanism
from policyopt.mechanism.recompute import RecomputeClock
from policyopt.service import rounds as R
from policyopt.service.store import Changes, ConflictError, JobRow, NotFoundError, Store, WorkerRow


def _mechanism(seed: int = 0) -> RoundMechanism:
    rng = np.random.default_rng(seed)
    mech = RoundMechanism({"v100": 4, "k80": 4}, round_length=60.0)
    x = rng.uniform(0.05, 0.4, size=(8, 2))  # rows sum <= 0.8, columns <= 3.2 of the 4 workers
    alloc = {f"j{i}": {"v100": float(a), "k80": float(b)} for i, (a, b) in enumerate(x)}
    pairs = [{"jobs": ["j0", "j1"], "worker_type": "v100", "fraction": 0.05}]
    mech.set_allocation(alloc, pairs, {f"j{i}": 1 for i in range(8)})
    for _ in range(7):
        mech.record_round(mech.schedule_round(), None)
    return mech


def test_mechanism_state_round_trip_is_exact() -> None:
    mech = _mechanism()
    state = json.loads(json.dumps(R.mechanism_to_state(mech)))
    back = R.mechanism_from_state(state)
    assert np.array_equal(back.priorities(), mech.priorities())
    assert np.array_equal(back.received, mech.received) and np.array_equal(back.deficits, mech.deficits)
    assert back.elapsed == mech.elapsed and back.num_resets == mech.num_resets
    for _ in range(5):  # both continue identically
        a, b = mech.schedule_round(), back.schedule_round()
        assert a == b
        mech.record_round(a, None)
        back.record_round(b, None)
    # a reset after the restore carries the same deficits
    alloc = {f"j{i}": {"v100": 0.3, "k80": 0.1} for i in range(8)}
    for m in (mech, back):
        m.remove_jobs(["j7"])
        m.set_allocation(alloc, [])
    assert np.array_equal(back.deficits, mech.deficits)


def test_with_worker_counts_carries_deficits() -> None:
    mech = _mechanism(1)
    ref = R.mechanism_from_state(R.mechanism_to_state(mech))
    alloc = {f"j{i}": {"v100": 0.2, "k80": 0.2} for i in range(8)}
    smaller = R.with_worker_counts(mech, {"v100": 2, "k80": 4})
    smaller.set_allocation({j: {"v100": 0.25 * (j < "j4"), "k80": 0.2} for j in alloc}, [])
    assert smaller.worker_counts == {"v100": 2, "k80": 4}
    ref.set_allocation({j: {"v100": 0.25 * (j < "j4"), "k80": 0.2} for j in alloc}, [])
    assert np.array_equal(smaller.deficits, ref.deficits)
    assert np.abs(smaller.deficits).sum() > 0
    assert sum(c.num_gpus for c in smaller.schedule_round().combinations if c.worker_type == "v100") <= 2
    with pytest.raises(InputError):
        R.with_worker_counts(mech, {"k80": 4, "v100": 4})


def test_fold_configurations() -> None:
    alloc, pairs = R.fold_configurations(
        {"a": {"v100": 0.25, "v100_unconsolidated": 0.5, "k80": 0.1}},
        [{"jobs": ["a", "b"], "worker_type": "v100", "fraction": 0.1},
         {"jobs": ["a", "b"], "worker_type": "v100_unconsolidated", "fraction": 0.2}])
    assert alloc == {"a": {"v100": 0.75, "k80": 0.1}}
    assert pairs == [{"jobs": ["a", "b"], "worker_type": "v100", "fraction": pytest.approx(0.3)}]


def test_live_layout_with_uneven_servers() -> None:
    workers = [("a", "v100", "s1"), ("b", "k80", "s2"), ("c", "v100", "s1"), ("d", "v100", "s3"), ("e", "k80", "s2")]
    layout, worker_of = R.live_layout(["v100", "k80"], workers)
    assert worker_of == ["a", "c", "d", "b", "e"]
    assert layout.worker_counts() == {"v100": 3, "k80": 2}
    assert layout.server_size.tolist() == [2, 1, 2] and layout.first_gpu.tolist() == [0, 2, 3]
    assert layout.gpu_server.tolist() == [0, 0, 1, 2, 2]
    empty, none = R.live_layout(["v100"], [])
    assert empty.num_gpus == 0 and none == []


def test_place_round_keeps_leases_and_reports_worker_ids() -> None:
    mech = RoundMechanism({"v100": 4}, round_length=60.0)
    mech.set_allocation({"a": {"v100": 1.0}, "b": {"v100": 1.0}}, [], {"a": 2, "b": 1})
    layout, worker_of = R.live_layout(["v100"], [(f"w{i}", "v100", f"s{i // 2}") for i in range(4)])
    p1 = R.place_round(mech, layout, worker_of, {}, [])
    assert sorted(p1.assignment) == ["a", "b"] and len(p1.assignment["a"]) == 2
    assert set(p1.assignment["a"]) in ({"w0", "w1"}, {"w2", "w3"})  # consolidated on one server
    assert {w for ws in p1.assignment.values() for w in ws} <= set(worker_of)
    mech.record_round(p1.selection, None)
    p2 = R.place_round(mech, layout, worker_of, p1.assignment, p1.pairs)
    assert p2.assignment == p1.assignment  # same jobs, same workers: no migration
    assert all(p["renewed"] for p in p2.placements)


def test_clock_and_assignment_round_trip() -> None:
    clock = RecomputeClock(30.0)
    clock.note("arrival", 5.0, "a")
    clock.mark_recomputed(10.0)
    clock.note("completion", 20.0, "b")
    back = R.clock_from_state(json.loads(json.dumps(R.clock_to_state(clock))))
    assert back == clock and back.due(40.0) and not back.due(39.0)
    mech = _mechanism(2)
    a = mech.schedule_round()
    assert R.assignment_from_state(json.loads(json.dumps(R.assignment_to_state(a)))) == a


def test_store_version_check_and_atomicity(tmp_path: Path) -> None:
    store = Store(tmp_path / "s.sqlite")
    v = store.create("s1", {"k": 1}, Changes(state={"n": 0}, workers_add=[WorkerRow("w0", 0, "v100", "s0")]))
    assert v == 1
    job = JobRow("j", 0, "active", {"id": "j"}, 0.0, 10.0, 0.0, 0.0)
    assert store.commit("s1", 1, Changes(state={"n": 1}, jobs=[job])) == 2
    with pytest.raises(ConflictError):
        store.commit("s1", 1, Changes(state={"n": 99}))
    with pytest.raises(ValueError):  # NaN cannot be stored: nothing of the change is written
        store.commit("s1", 2, Changes(state={"n": float("nan")}, jobs=[JobRow("k", 1, "active", {}, 0, 1, 0, 0)]))
    sess, jobs, workers, _ = Store(tmp_path / "s.sqlite").load("s1")  # a second store on the same file
    assert sess.version == 2 and sess.state == {"n": 1} and list(jobs) == ["j"]
    assert [w.worker_id for w in workers] == ["w0"]
    with pytest.raises(NotFoundError):
        store.load("nope")
    store.delete("s1")
    assert store.session_ids() == []


def test_failed_round_changes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A next-round call that fails after the mechanism was already advanced in memory (here: the
    placement stage raises) writes nothing and drops the cached mechanism; the retry returns
    exactly what an undisturbed session returns."""
    from policyopt.service.examples import synthetic_cluster, synthetic_jobs
    from policyopt.service.sessions import SessionManager

    def drive(manager: SessionManager, fail_at: int | None) -> list[dict]:
        sid = manager.create({"cluster": synthetic_cluster(4), "policy": "max_min_fairness", "options": {},
                              "round_length": 60.0})["session_id"]
        manager.add_jobs(sid, synthetic_jobs(10, seed=6))
        out: list[dict] = []
        for r in range(6):
            body = {} if r == 0 else {"progress": {"round": r - 1, "steps": {j: 500.0 for j in out[-1]["assignment"]}}}
            if r == fail_at:
                before = manager.store.load(sid)[0]
                real = R.place_round

                def broken(*a: object, **k: object) -> None:
                    raise RuntimeError("placement crashed")

                monkeypatch.setattr(R, "place_round", broken)
                with pytest.raises(RuntimeError):
                    manager.next_round(sid, body)
                monkeypatch.setattr(R, "place_round", real)
                after = manager.store.load(sid)[0]
                assert (after.version, after.state) == (before.version, before.state)
                assert sid not in manager._mechanisms  # noqa: SLF001 - the advanced copy is gone
            rd = manager.next_round(sid, body)
            out.append({k: v for k, v in rd.items() if k not in ("session_id", "timings", "allocation")})
        return out

    ref = drive(SessionManager(Store(tmp_path / "a.sqlite")), None)
    got = drive(SessionManager(Store(tmp_path / "b.sqlite")), 3)
    assert got == ref
