"""Damaged state (issue 23 items 11, 13): a state file that was emptied, truncated or overwritten
with garbage is refused at start with one line naming the file and what to do; --repair salvages,
--new-state starts over beside the old file, an online backup is consistent while writes go on,
and what a SIGKILLed writer acknowledged is in the file."""
from __future__ import annotations

import argparse
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from policyopt.cli import main
from policyopt.errors import InputError
from policyopt.service.limits import Limits
from policyopt.service.sessions import SessionManager
from policyopt.service.store import Store
from policyopt.state_file import backup, check_state_file, repair

CLUSTER = {"worker_types": {"v100": {"count": 2}, "k80": {"count": 2}}}


def filled_store(path: Path, sessions: int = 3, jobs: int = 40) -> list[str]:
    m = SessionManager(Store(path), Limits())
    sids = []
    for _ in range(sessions):
        sid = m.create({"cluster": CLUSTER, "policy": "max_min_fairness"})["session_id"]
        m.add_jobs(sid, [{"id": f"j{i}", "throughputs": {"v100": 2.0, "k80": 1.0}, "steps_remaining": 1e6,
                          "job_type": "x" * 200} for i in range(jobs)])
        sids.append(sid)
    m.store.close()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # everything in the main file, as after a clean stop
    conn.close()
    return sids


def damage(path: Path, how: str) -> None:
    size = path.stat().st_size
    if how == "emptied":
        path.write_bytes(b"")
    elif how == "half":
        with open(path, "r+b") as fh:
            fh.truncate(size // 2)
    elif how == "garbage":
        with open(path, "r+b") as fh:
            fh.seek(4096 * 2)
            fh.write(os.urandom(4096 * 3))
    elif how == "not-sqlite":
        path.write_bytes(b"hello, I am not a database" * 100)
    for side in ("-wal", "-shm"):
        Path(str(path) + side).unlink(missing_ok=True)


@pytest.mark.parametrize("how", ["emptied", "half", "garbage", "not-sqlite"])
def test_damaged_state_is_refused_with_one_line(tmp_path: Path, how: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "state.sqlite"
    filled_store(path)
    damage(path, how)
    size = path.stat().st_size
    with pytest.raises(InputError) as exc:
        Store(path)
    msg = str(exc.value)
    assert str(path) in msg and "--repair" in msg and "--new-state" in msg, msg
    assert path.stat().st_size == size  # never started empty over it, never rewritten
    pytest.importorskip("uvicorn")
    assert main(["serve", "--state", str(path), "--port", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(path) in err[0], err


def test_repair_salvages_and_keeps_the_damaged_file(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    sids = filled_store(path, sessions=3)
    damage(path, "garbage")
    out = repair(path)
    assert Path(str(out["damaged_file"])).exists()
    tables = out["tables"]
    assert isinstance(tables, dict) and tables["sessions"]["kept"] >= 1
    check_state_file(path, ("sessions", "jobs"))
    store = Store(path)
    assert set(store.session_ids()) <= set(sids) and store.session_ids()


def test_new_state_moves_the_old_file_aside(tmp_path: Path) -> None:
    from policyopt.state_file import set_aside

    path = tmp_path / "state.sqlite"
    filled_store(path)
    damage(path, "emptied")
    old = set_aside(path, "old")
    assert old is not None and old.exists() and not path.exists()
    assert Store(path).session_ids() == []


def test_online_backup_is_consistent_while_writes_go_on(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    m = SessionManager(Store(path), Limits())
    sid = m.create({"cluster": CLUSTER, "policy": "max_min_fairness"})["session_id"]
    stop = threading.Event()

    def writer() -> None:
        i = 0
        while not stop.is_set():
            m.add_jobs(sid, [{"id": f"w{i}", "throughputs": {"v100": 1.0}, "steps_remaining": 5.0}])
            i += 1

    t = threading.Thread(target=writer)
    t.start()
    try:
        time.sleep(0.3)
        copies = []
        for k in range(3):
            copy = tmp_path / f"copy{k}.sqlite"
            assert main(["state", "backup", str(path), str(copy)]) == 0
            copies.append(copy)
    finally:
        stop.set()
        t.join()
    for copy in copies:
        check_state_file(copy, ("sessions", "jobs"))
        store = Store(copy)
        sess, jobs, _, _ = store.load(sid)
        # one committed state: the session's version counts exactly the changes its rows show
        assert sess.version == 1 + len(jobs)
    with pytest.raises(InputError):
        backup(path, copies[0])  # never overwrites


def test_executor_state_file_gets_the_same_check(tmp_path: Path) -> None:
    from policyopt.executor.state import ExecutorState

    path = tmp_path / "run.sqlite"
    st = ExecutorState(path)
    st.put("round", 3)
    st.close()
    damage(path, "emptied")
    with pytest.raises(InputError) as exc:
        ExecutorState(path)
    assert str(path) in str(exc.value) and "policyopt state repair" in str(exc.value)


def test_a_state_file_being_created_by_another_process_is_not_refused(tmp_path: Path) -> None:
    """Another process has created the file (SQLite's header page written) and its first
    transaction, which creates the tables, is still open: the file holds one page and no tables.
    Opening it then (a second opener, or a test watching a starting executor) waits for that
    transaction instead of calling the file damaged. A larger file without tables is still refused."""
    from policyopt.executor.state import ExecutorState

    path = tmp_path / "run.sqlite"
    creator = sqlite3.connect(str(path), isolation_level=None)
    creator.execute("PRAGMA journal_mode=WAL")
    creator.execute("BEGIN IMMEDIATE")
    creator.execute("CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT)")
    check_state_file(path, ("meta", "jobs", "rounds", "events"))  # raised "holds no tables" before
    opened: list[ExecutorState] = []
    opener = threading.Thread(target=lambda: opened.append(ExecutorState(path)))
    opener.start()
    time.sleep(0.2)
    creator.execute("ROLLBACK")  # the creator's migration went away: the opener migrates the file itself
    creator.close()
    opener.join(timeout=60)
    assert opened, "the second opener failed"
    opened[0].put("round", 1)
    assert opened[0].get("round") == 1
    opened[0].close()

    dropped = tmp_path / "dropped.sqlite"
    conn = sqlite3.connect(str(dropped))
    conn.execute("CREATE TABLE t (x)")
    conn.executemany("INSERT INTO t VALUES (?)", [("x" * 500,)] * 200)
    conn.commit()
    conn.execute("DROP TABLE t")  # its pages stay in the file (free list): data may have been lost
    conn.commit()
    conn.close()
    with pytest.raises(InputError, match="holds no tables"):
        check_state_file(dropped, ("meta",))


_WRITER = """
import sys
from policyopt.service.limits import Limits
from policyopt.service.sessions import SessionManager
from policyopt.service.store import Store
m = SessionManager(Store(sys.argv[1]), Limits())
sid = m.create({"cluster": {"worker_types": {"v100": {"count": 2}}}, "policy": "max_min_fairness"})["session_id"]
print(sid, flush=True)
i = 0
while True:
    m.add_jobs(sid, [{"id": f"j{i}", "throughputs": {"v100": 1.0}, "steps_remaining": 5.0}])
    print(f"j{i}", flush=True)  # acknowledged: the transaction committed
    i += 1
"""


def test_sigkill_keeps_every_acknowledged_write(tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", _WRITER, str(path)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    sid = proc.stdout.readline().strip()
    acked = []
    while len(acked) < 40:
        acked.append(proc.stdout.readline().strip())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    check_state_file(path, ("sessions", "jobs"))
    _, jobs, _, _ = Store(path).load(sid)
    assert set(acked) <= set(jobs)


def test_api_key_on_the_command_line_warns(capsys: pytest.CaptureFixture[str], tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from policyopt.service.cli import _api_key

    ns = argparse.Namespace(api_key="s3cret", api_key_file=None)
    assert _api_key(ns) == "s3cret"
    assert "visible" in capsys.readouterr().err
    key = tmp_path / "key"
    key.write_text("from-file\n")
    assert _api_key(argparse.Namespace(api_key=None, api_key_file=str(key))) == "from-file"
    monkeypatch.setenv("POLICYOPT_API_KEY", "from-env")
    assert _api_key(argparse.Namespace(api_key=None, api_key_file=None)) == "from-env"
    assert capsys.readouterr().err == ""


def test_idempotency_key_makes_a_retry_safe(tmp_path: Path) -> None:
    pytest.importorskip("fastapi")
    import warnings

    warnings.filterwarnings("ignore", message="Using `httpx` with")
    from fastapi.testclient import TestClient

    from policyopt.service import create_app

    client = TestClient(create_app(tmp_path / "s.sqlite"))
    h = {"Idempotency-Key": "create-1"}
    first = client.post("/v1/sessions", json={"cluster": CLUSTER}, headers=h).json()
    again = client.post("/v1/sessions", json={"cluster": CLUSTER}, headers=h).json()
    assert again == first and len(client.app.state.store.session_ids()) == 1
    sid = first["session_id"]
    body = {"jobs": [{"id": "a", "throughputs": {"v100": 1.0}, "steps_remaining": 10.0}]}
    r1 = client.post(f"/v1/sessions/{sid}/jobs", json=body, headers={"Idempotency-Key": "add-a"})
    r2 = client.post(f"/v1/sessions/{sid}/jobs", json=body, headers={"Idempotency-Key": "add-a"})
    assert r1.status_code == r2.status_code == 200 and r1.json() == r2.json()  # not "id already used"
    n1 = client.post(f"/v1/sessions/{sid}/rounds/next", headers={"Idempotency-Key": "round-0"}).json()
    n2 = client.post(f"/v1/sessions/{sid}/rounds/next", headers={"Idempotency-Key": "round-0"}).json()
    assert n1 == n2 and client.get(f"/v1/sessions/{sid}").json()["round"] == 0  # one round, not two
    other = client.post(f"/v1/sessions/{sid}/jobs", json={"jobs": [{**body["jobs"][0], "id": "b"}]},
                        headers={"Idempotency-Key": "add-a"})
    assert other.status_code == 422 and other.json()["detail"][0]["field"] == "header.Idempotency-Key"
    plain = client.post(f"/v1/sessions/{sid}/jobs", json=body)  # without a key: a real second request
    assert plain.status_code == 422 and plain.json()["detail"][0]["field"] == "jobs[0].id"
