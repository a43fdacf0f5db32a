"""Job ids become file names only through one safe mapping (issue 23 item 5, security): an id like
``../../../escaped`` cannot put a job's checkpoints, lease or log outside ``--run-dir``."""
from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from policyopt.errors import InputError
from policyopt.executor.spec import job_file_name, parse_jobs

HOSTILE = ["../../../escaped", "..", ".", "a/b", "/etc/passwd", "..\\x", "~root", "a\x00b", "%2F", "ü/../x"]


@pytest.mark.parametrize("jid", HOSTILE + ["plain-id_1.v2", "résumé", "🙂"])
def test_the_mapping_is_one_safe_path_component(jid: str, tmp_path: Path) -> None:
    name = job_file_name(jid)
    assert name not in ("", ".", "..") and "/" not in name and "\\" not in name and "\x00" not in name
    assert (tmp_path / name).resolve().parent == tmp_path.resolve()


def test_the_mapping_is_one_to_one() -> None:
    ids = HOSTILE + ["%2E%2E", "%2E", "a%2Fb", "A", "a", "a.b", "a..b", "~", "%7E"]
    names = [job_file_name(i) for i in ids]
    assert len(set(names)) == len(ids)
    assert job_file_name("plain-id_1.v2") == "plain-id_1.v2"  # readable ids stay as they are


@pytest.mark.parametrize("jid, words", [("\ud800", "Unicode"), ("x" * 300, "too long"), ("/" * 80, "too long")])
def test_ids_that_cannot_be_mapped_are_refused_when_the_jobs_are_read(jid: str, words: str) -> None:
    with pytest.raises(InputError) as exc:
        parse_jobs([{"id": jid, "job_type": "lstm-bs10", "steps": 10}])
    assert exc.value.field == "jobs[0].id" and words in exc.value.problem


pytest.importorskip("torch")


@pytest.mark.torch
@pytest.mark.timeout(300)
def test_nothing_is_written_outside_run_dir_and_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policyopt.executor.cli import main

    root = tmp_path / "a" / "b" / "c"
    root.mkdir(parents=True)
    jobs = root / "jobs.json"
    jobs.write_text(json.dumps([{"id": "../../../escaped", "job_type": "lstm-bs10", "steps": 20},
                                {"id": "..", "job_type": "lstm-bs10", "steps": 20, "seed": 1}]))
    before = {p for p in tmp_path.rglob("*")}
    code = main(["run", "--jobs", str(jobs), "--cluster", "cpu1=1", "--policy", "max_min_fairness",
                 "--round-seconds", "2", "--state", str(root / "state.sqlite"), "--output", str(root / "out"),
                 "--run-dir", str(root / "run"), "--no-live", "--no-fidelity"])
    assert code == 0, capsys.readouterr().err[-3000:]
    allowed = (root / "out", root / "run")
    written = [p for p in tmp_path.rglob("*") if p not in before and not p.name.startswith("state.sqlite")]
    outside = [p for p in written if not any(a == p or a in p.parents for a in allowed)]
    assert not outside, outside
    assert not (tmp_path / "escaped").exists() and not (tmp_path / "a" / "escaped").exists()
    # the run's fork server warmed only the family of its jobs (LSTM), on its slot's one thread
    db = sqlite3.connect(str(root / "state.sqlite"))
    try:
        ready = [json.loads(d) for (d,) in db.execute("SELECT detail FROM events WHERE kind = 'fork_server_ready'")]
    finally:
        db.close()
    assert ready == [{"job_types": ["lstm-bs10"], "threads": [1]}]
    report = json.loads((root / "out" / "report.json").read_text())
    assert set(report["jobs"]) == {"../../../escaped", ".."}  # the ids themselves are kept in results
    assert sorted(os.listdir(root / "run" / "jobs")) == sorted([job_file_name(".."), job_file_name("../../../escaped")])
