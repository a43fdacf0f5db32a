"""The executor on a multi-node Ray cluster (Ray's own test cluster, ``ray.cluster_utils.Cluster``,
three nodes with different worker-type resources on this machine), with a node lost mid-run and a
node joining later.

Nodes: the head offers ``pw:cpu1`` and ``pw:cpu2``, node B only ``pw:cpu1``, node C only ``pw:cpu2``,
so a 2-worker job's ranks always run on two nodes (spread). The executor runs as its own process
(``policyopt run --backend ray --ray-address ADDR --ray-resource-prefix pw:``) while the test
removes node B once a 2-worker job has trained on it in the current round, and later adds a node
that offers ``pw:cpu1`` again. Every job must finish at exactly its step count with a falling
loss, the jobs that ran on B restart whole from their checkpoints losing at most one round of
steps, and ``report.json`` lists the lost and the added slot.

Small form for CI: the ``multi`` example's jobs at half their steps, 4-second rounds, one CPU and
80 MB of object store per node (the whole test takes about two to three minutes on the loaded
2-core development machine).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")
ray = pytest.importorskip("ray", reason="the Ray backend needs the 'ray' package (pip install 'ray[default]')")

from policyopt.executor.spec import EXAMPLES  # noqa: E402
from policyopt.executor.state import ExecutorState  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.timeout(900)]
ROOT = Path(__file__).resolve().parents[1]
MEM = 80 * 2**20
ROUND = 4.0


def _wait(what: str, predicate, timeout: float, proc: subprocess.Popen[bytes]) -> None:  # type: ignore[no-untyped-def]
    t0 = time.time()
    while not predicate():
        assert proc.poll() is None, f"the executor exited ({proc.returncode}) while waiting for {what}"
        assert time.time() - t0 < timeout, f"timed out waiting for {what}"
        time.sleep(0.3)


def _state(path: Path) -> ExecutorState | None:
    """The executor's state, or None while its process has not created the file or written its
    first page (the file exists with 0 bytes for a moment, which the state check refuses)."""
    if not path.exists() or path.stat().st_size == 0:
        return None
    return ExecutorState(path)


def _topology(path: Path) -> dict[str, Any]:
    st = _state(path)
    return (st.get("topology") if st is not None else None) or {}


def test_ray_multinode_node_loss_and_return(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    jobs = [dict(j, steps=j["steps"] // 2) for j in EXAMPLES["multi"]]
    (tmp_path / "jobs.json").write_text(json.dumps(jobs))
    t0 = time.time()
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"pw:cpu1": 1, "pw:cpu2": 1}, "object_store_memory": MEM,
        "include_dashboard": False})
    proc = None
    log = open(tmp_path / "executor.log", "wb")
    try:
        node_b = cluster.add_node(num_cpus=1, resources={"pw:cpu1": 1}, object_store_memory=MEM)
        cluster.add_node(num_cpus=1, resources={"pw:cpu2": 1}, object_store_memory=MEM)
        cluster.wait_for_nodes()
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
        state_path = tmp_path / "s.sqlite"
        proc = subprocess.Popen(
            [sys.executable, "-m", "policyopt.executor.cli", "run", "--jobs", str(tmp_path / "jobs.json"),
             "--cluster", "cpu1=2,cpu2=2", "--backend", "ray", "--ray-address", cluster.address,
             "--ray-resource-prefix", "pw:", "--policy", "max_min_fairness", "--round-seconds", str(ROUND),
             "--state", str(state_path), "--output", str(tmp_path / "out"), "--no-live"],
            env=env, stdout=log, stderr=subprocess.STDOUT)

        def b_slots() -> set[str]:
            topo = _topology(state_path)
            names = {str(i): f"cpu1-{k}" for i, k in ((0, 0), (1, 1))}
            return {names[i] for i, n in (topo.get("nodes") or {}).items() if n == node_b.node_id and i in names}

        def dp_job_training_on_b() -> bool:
            st = _state(state_path)
            if st is None:
                return False
            on_b = b_slots()
            for rec in st.jobs().values():
                p = rec.process or {}
                ranks = p.get("ranks") or []
                workers = {w for r in ranks for w in r.get("workers", [])}
                if len(ranks) == 2 and workers & on_b and p.get("pid", 0) > 0:
                    try:  # the live progress record of rank 0: training, with steps past its checkpoint
                        live = json.loads(Path(p["progress_file"]).read_text())
                    except (OSError, ValueError):
                        continue
                    if live.get("status") == "running" and live.get("steps_this_session", 0) >= 5:
                        return True
            return False

        _wait("a 2-worker job with progress training on node B", dp_job_training_on_b, 400, proc)
        cluster.remove_node(node_b)
        removed_at = time.time()
        _wait("the executor to take the lost slot out", lambda: any(
            e["event"] == "lost" for e in _topology(state_path).get("events", [])),
            4 * ROUND + 30, proc)
        noticed = time.time() - removed_at
        cluster.add_node(num_cpus=1, resources={"pw:cpu1": 1}, object_store_memory=MEM)
        proc.wait(timeout=600)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        log.close()
        cluster.shutdown()
    out = (tmp_path / "executor.log").read_text(errors="replace")
    assert proc.returncode == 0, out[-4000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    for jid, job in report["jobs"].items():
        assert job["status"] == "completed", (jid, job)
        assert job["steps_done"] == job["steps_required"] == job["checkpoint_step"], jid
        assert job["final_loss"] < job["initial_loss"], jid
    scale = {jid: j["scale_factor"] for jid, j in report["jobs"].items()}
    spread = [(r["index"], j) for r in report["rounds"] for j, v in r["jobs"].items()
              if scale[j] == 2 and len(set(v["nodes"])) == 2 and v["steps"] > 0]
    assert spread, "no 2-worker job trained with its ranks on two nodes"
    lost = [e for e in report["slot_events"] if e["event"] == "lost"]
    added = [e for e in report["slot_events"] if e["event"] == "added"]
    assert [e["node"] for e in lost] == [node_b.node_id] and lost[0]["slot"] in ("cpu1-0", "cpu1-1")
    # the replacement node rejoins at the next round — unless the run finished before it started
    last_round = max(r["time"] for r in report["rounds"]) if report["rounds"] and "time" in report["rounds"][0] \
        else None
    if added:
        assert added[0]["slot"] == lost[0]["slot"] and added[0]["time"] > lost[0]["time"]
    else:
        print(f"\nthe run ended (last round at {last_round}) before the replacement node registered", file=sys.stderr)
    hit = lost[0]["jobs"]
    assert hit and all(scale[j] == 2 for j in hit)
    # one round's worth of steps: the job's best measured rate × the round length
    for j, entry in hit.items():
        rate = max(report["jobs"][j]["measured_throughputs"].values())
        assert entry["steps_lost"] is not None and 0 <= entry["steps_lost"] <= rate * ROUND + 1, (j, entry, rate)
    # the lost slot is out of the cluster until the node came back, then it is used again
    assert any(r["slots"] == 3 for r in report["rounds"]) and report["rounds"][-1]["slots"] in (3, 4)
    print(f"\nRay 3-node run: {time.time() - t0:.0f} s wall, makespan {report['summary']['makespan']:.1f} s, "
          f"loss noticed after {noticed:.1f} s, lost {[(j, e['steps_lost']) for j, e in hit.items()]}, "
          f"{len(spread)} spread rounds", file=sys.stderr)
