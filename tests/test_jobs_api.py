"""Job API: leases, atomic verified checkpoints, resume determinism, renewal and failure records."""
from __future__ import annotations

import json
import random
import threading
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("sklearn")

from policyopt.errors import InputError  # noqa: E402
from policyopt.jobs import (  # noqa: E402
    CheckpointCorruptError,
    CheckpointStore,
    Lease,
    TrainingSession,
    build_job,
)
from policyopt.jobs.checkpoint import read_checkpoint, write_checkpoint  # noqa: E402

pytestmark = pytest.mark.torch


def _train(job_type: str, ckpt: Path, steps_total: int, lease: Lease | None = None, seed: int = 3):
    """Run one session of a zoo job in-process; returns (job, session)."""
    torch.manual_seed(seed)
    job = build_job(job_type, seed=seed)
    with TrainingSession("job", ckpt, job.model, job.optimizer, lease=lease, steps_total=steps_total) as s:
        for batch in s.wrap(job.stream):
            job.optimizer.zero_grad()
            loss = job.loss_fn(job.model, batch)
            loss.backward()
            job.optimizer.step()
            s.report(loss.item())
    return job, s


@pytest.mark.parametrize("job_type", ["resnet-bs32", "transformer-bs16", "lstm-bs10"])
def test_resume_is_bitwise_identical_to_a_straight_run(tmp_path: Path, job_type: str) -> None:
    straight, s_straight = _train(job_type, tmp_path / "a", steps_total=10)
    assert s_straight.stop_reason == "completed" and s_straight.step == 10
    first, s1 = _train(job_type, tmp_path / "b", steps_total=10, lease=Lease(steps_limit=4))
    assert s1.stop_reason == "lease_ended" and s1.step == 4
    resumed, s2 = _train(job_type, tmp_path / "b", steps_total=10, lease=Lease(steps_limit=100))
    assert s2.resumed_from is not None and s2.session_start_step == 4 and s2.step == 10
    for (name, p), (_, q) in zip(straight.model.state_dict().items(), resumed.model.state_dict().items()):
        assert torch.equal(p, q), name
    # the job-level loss history survives the checkpoint: same initial/final loss as the straight run
    assert s2.progress()["initial_loss"] == pytest.approx(s_straight.progress()["initial_loss"], abs=0)
    assert s2.progress()["final_loss"] == pytest.approx(s_straight.progress()["final_loss"], rel=1e-6)
    assert resumed.stream.position == 10


def _user_script(ckpt: Path, data: list[torch.Tensor], steps_total: int, lease: Lease | None) -> torch.nn.Module:
    """A user's own script: dropout (torch RNG), numpy and `random` noise, a plain list as data."""
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    with TrainingSession("user", ckpt, model, opt, lease=lease, steps_total=steps_total) as s:
        for x in s.wrap(data):
            noise = float(np.random.normal()) * 0.01 + random.random() * 0.01
            loss = (model(x).squeeze(-1) - x.sum(dim=1) - noise).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            s.report(loss.item())
    return model


def test_rng_states_and_plain_iterables_are_restored(tmp_path: Path) -> None:
    gen = torch.Generator().manual_seed(1)
    data = [torch.randn(4, 8, generator=gen) for _ in range(12)]

    def reseed() -> None:
        np.random.seed(5)
        random.seed(5)

    reseed()
    straight = _user_script(tmp_path / "a", data, 12, None)
    reseed()
    _user_script(tmp_path / "b", data, 12, Lease(steps_limit=5))
    np.random.seed(99)  # a different global state before resuming: the checkpoint must restore it
    random.seed(99)
    torch.manual_seed(99)
    resumed = _user_script(tmp_path / "b", data, 12, None)
    for p, q in zip(straight.parameters(), resumed.parameters()):
        assert torch.equal(p, q)


def test_checkpoint_roundtrip_and_corruption_is_detected(tmp_path: Path) -> None:
    path = tmp_path / "ckpt-000000000001.pt"
    write_checkpoint(path, {"w": torch.arange(5.0), "step": 1})
    assert torch.equal(read_checkpoint(path)["w"], torch.arange(5.0))
    raw = bytearray(path.read_bytes())
    raw[-3] ^= 0xFF
    path.write_bytes(bytes(raw))
    with pytest.raises(CheckpointCorruptError, match="sha256"):
        read_checkpoint(path)
    path.write_bytes(bytes(raw[:30]))
    with pytest.raises(CheckpointCorruptError, match="truncated"):
        read_checkpoint(path)
    path.write_bytes(b"NOTACKPT" + bytes(raw[8:]))
    with pytest.raises(CheckpointCorruptError, match="magic"):
        read_checkpoint(path)
    assert not list(tmp_path.glob(".*tmp*"))  # no temporary files left behind


def test_store_keeps_two_and_falls_back_past_a_corrupt_newest(tmp_path: Path) -> None:
    store = CheckpointStore(tmp_path, keep=2)
    for step in (1, 2, 3):
        store.save(step, {"step": step})
    assert [s for s, _ in store.list()] == [3, 2]
    newest = store.path_for(3)
    newest.write_bytes(newest.read_bytes()[:-10])
    with pytest.raises(CheckpointCorruptError):
        CheckpointStore(tmp_path).load_latest(fallback=False, quarantine=False)
    loaded = store.load_latest()
    assert loaded is not None and loaded.step == 2 and loaded.payload["step"] == 2
    assert loaded.skipped[0][0] == newest and (tmp_path / (newest.name + ".corrupt")).exists()
    store.path_for(2).write_bytes(b"garbage")
    with pytest.raises(CheckpointCorruptError, match="no valid checkpoint"):
        store.load_latest()


def test_session_falls_back_and_continues_from_previous_checkpoint(tmp_path: Path) -> None:
    _train("recommendation-bs128", tmp_path, steps_total=20, lease=Lease(steps_limit=3))
    _train("recommendation-bs128", tmp_path, steps_total=20, lease=Lease(steps_limit=3))
    newest = CheckpointStore(tmp_path).path_for(6)
    newest.write_bytes(newest.read_bytes()[:100])
    _, s = _train("recommendation-bs128", tmp_path, steps_total=20, lease=Lease(steps_limit=2))
    record = s.progress()
    assert record["session_start_step"] == 3 and record["steps_done"] == 5
    assert record["corrupt_checkpoints"][0]["path"].endswith("ckpt-000000000006.pt")
    CheckpointStore(tmp_path).path_for(5).write_bytes(b"x")
    job = build_job("recommendation-bs128")
    with pytest.raises(CheckpointCorruptError):
        with TrainingSession("job", tmp_path, job.model, job.optimizer, on_corrupt="raise"):
            pass


def test_keep_workers_renewal_continues_without_checkpoint(tmp_path: Path) -> None:
    job = build_job("recommendation-bs128")
    lease = Lease(steps_limit=3, keep_workers=True, lease_id=1)
    session = TrainingSession("job", tmp_path / "ck", job.model, job.optimizer, lease=lease, steps_total=50,
                              renewal_wait_s=5.0, progress_file=tmp_path / "p.json")
    saved_during: list[int] = []
    with session as s:
        for batch in s.wrap(job.stream):
            loss = job.loss_fn(job.model, batch)
            job.optimizer.zero_grad()
            loss.backward()
            job.optimizer.step()
            s.report(loss.item())
            if s.step == 2:  # 3rd step running: the executor renews before the lease runs out
                threading.Timer(0.2, s.renew, args=(Lease(steps_limit=4, keep_workers=False, lease_id=2),)).start()
            saved_during.append(len(s.store.list()))
    assert s.step == 7 and s.stop_reason == "lease_ended" and s.leases_in_session == 2
    assert max(saved_during) == 0  # no checkpoint while the job kept its workers
    assert [step for step, _ in s.store.list()] == [7]
    record = json.loads((tmp_path / "p.json").read_text())
    assert record["status"] == "lease_ended" and record["steps_done"] == 7
    assert record["steps_per_s"] > 0 and record["train_seconds"] > 0


def test_lease_file_deadline_and_failed_step_is_recorded(tmp_path: Path) -> None:
    lease_file = tmp_path / "lease.json"
    Lease(deadline=0.0, lease_id=4).write(lease_file)  # already expired: no step may run
    job = build_job("lstm-bs10")
    with TrainingSession("job", tmp_path / "ck", job.model, job.optimizer, lease_file=lease_file,
                         steps_total=10) as s:
        steps = sum(1 for _ in s.wrap(job.stream))
    assert steps == 0 and s.stop_reason == "lease_ended" and s.lease.lease_id == 4
    with pytest.raises(RuntimeError, match="boom"):
        with TrainingSession("job", tmp_path / "ck", job.model, job.optimizer, steps_total=10,
                             progress_file=tmp_path / "p.json") as s:
            for _ in s.wrap(job.stream):
                raise RuntimeError("boom")
    record = json.loads((tmp_path / "p.json").read_text())
    assert record["status"] == "failed" and "boom" in record["error"]
    assert [step for step, _ in s.store.list()] == [0]  # nothing saved from the failed session


def test_bad_input_is_rejected(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="lease.steps_limit"):
        Lease(steps_limit=-1)
    with pytest.raises(InputError, match="keep_workers"):
        Lease.from_dict({"keep_workers": "yes"})
    with pytest.raises(InputError, match="unknown lease field"):
        Lease.from_dict({"deadlin": 3})
    job = build_job("resnet-bs32")
    with pytest.raises(InputError, match="job_id"):
        TrainingSession("", tmp_path, job.model, job.optimizer)
    _train("resnet-bs32", tmp_path / "x", steps_total=1)
    with pytest.raises(InputError, match="holds checkpoints of job"):
        with TrainingSession("other", tmp_path / "x", job.model, job.optimizer):
            pass
    session = TrainingSession("job", tmp_path / "y", job.model, job.optimizer)
    with pytest.raises(InputError, match="with TrainingSession"):
        next(iter(session.wrap([1])))


def test_wrap_again_after_renew_continues_the_same_iterator(tmp_path: Path) -> None:
    model = torch.nn.Linear(2, 1)
    seen: list[int] = []
    data = range(100)  # not resumable: the session must keep its iterator, not restart it
    with TrainingSession("job", tmp_path, model, None, lease=Lease(steps_limit=3)) as s:
        seen += list(s.wrap(data))
        s.renew(Lease(steps_limit=2, lease_id=1))
        seen += list(s.wrap(data))
    assert seen == [0, 1, 2, 3, 4] and s.step == 5 and s.leases_in_session == 2
