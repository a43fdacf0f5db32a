"""The local Slurm cluster (slurmctld + one slurmd per node + munge) and one controller round on it:
``--dry-run`` changes nothing; a real round places and releases the opted-in job on the GPU type
the policy chose and leaves the other job alone."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from policyopt.errors import PolicyOptError
from policyopt.slurm.demo import DemoJob, submit, write_throughputs
from policyopt.slurm.localcluster import LocalSlurm, NodeSpec, slurm_missing
from policyopt.slurm.slurmcmd import Slurm

pytestmark = pytest.mark.skipif(slurm_missing() is not None, reason=str(slurm_missing()))


def _policyopt(cluster: LocalSlurm, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "policyopt.cli", *argv], env=cluster.env, capture_output=True,
                          text=True, timeout=120, check=False)


def test_cluster_dry_run_then_one_round(tmp_path: Path) -> None:
    nodes = (NodeSpec("v1", "v100", 1), NodeSpec("k1", "k80", 2))
    with LocalSlurm(tmp_path / "slurm", nodes) as cluster:
        slurm = Slurm(cluster.env)
        assert {(n.name, n.gpu_type, n.gpus) for n in slurm.nodes(["gpu"])} == {("v1", "v100", 1), ("k1", "k80", 2)}
        work = tmp_path / "work"
        work.mkdir()
        table = write_throughputs(work / "throughputs.json")
        (managed,) = submit(cluster, work, [DemoJob("recommendation-bs128", 20)])
        (other,) = submit(cluster, work, [DemoJob("recommendation-bs128", 20)], opt_in=False)  # held, not ours
        args = ["slurm", "--policy", "max_min_fairness", "--partition", "gpu", "--throughputs", str(table),
                "--round-seconds", "5", "--state", str(work / "state.sqlite")]
        dry = _policyopt(cluster, *args, "--dry-run")
        assert dry.returncode == 0, dry.stderr
        assert f"would run: scontrol update JobId={managed} Features=v100" in dry.stdout
        assert f"would run: scontrol release {managed}" in dry.stdout
        acts = [line for line in dry.stdout.splitlines() if line.startswith("would run")]
        assert all(re.search(rf"\b{other}\b", line.split(" ", 4)[-1]) is None for line in acts)
        jobs = {j.job_id: j for j in slurm.jobs(["gpu"])}
        assert jobs[managed].held and jobs[managed].features == "" and not (work / "state.sqlite").exists()

        real = _policyopt(cluster, *args, "--rounds", "1", "--output", str(work / "out"))
        assert real.returncode == 0, real.stderr
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            jobs = {j.job_id: j for j in slurm.jobs(["gpu"])}
            if jobs[managed].state in ("RUNNING", "COMPLETED"):
                break
            time.sleep(0.3)
        assert jobs[managed].nodes == ("v1",) and jobs[managed].features == "v100"
        assert jobs[other].held and jobs[other].features == ""  # never touched
        report = json.loads((work / "out" / "report.json").read_text())
        assert report["rounds"][0]["decided"] == {managed: {"gpu_type": "v100", "gpus": 1}}


def test_a_port_taken_before_slurmctld_binds_it_gets_a_fresh_attempt(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The local cluster's ports are found free, then bound by the daemons: one taken in between
    (held here) makes slurmctld exit, and the cluster starts on a second attempt with fresh ports."""
    import socket

    import policyopt.slurm.localcluster as lc

    with socket.socket() as held:
        held.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        held.bind(("0.0.0.0", 0))
        held.listen()
        taken = held.getsockname()[1]
        picks: list[list[int]] = []
        free = lc._free_ports

        def first_one_taken(n: int) -> list[int]:
            ports = free(n)
            if not picks:
                ports[0] = taken  # slurmctld's port
            picks.append(ports)
            return ports

        monkeypatch.setattr(lc, "_free_ports", first_one_taken)
        with LocalSlurm(tmp_path / "slurm", (NodeSpec("v1", "v100", 1),)) as cluster:
            assert [n.name for n in Slurm(cluster.env).nodes(["gpu"])] == ["v1"]
    assert len(picks) == 2 and taken not in picks[1]


def test_a_start_that_times_out_leaves_no_daemon_running(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """slurmctld up but the nodes never idle within the timeout: start raises, and every daemon it
    started (munged, slurmctld, slurmd) is gone (before, they outlived the failed start)."""
    import policyopt.slurm.localcluster as lc

    monkeypatch.setattr(lc.LocalSlurm, "_all_idle", lambda self: False)
    cluster = LocalSlurm(tmp_path / "slurm", (NodeSpec("v1", "v100", 1),))
    spawned: list[subprocess.Popen[bytes]] = []
    spawn = cluster._spawn

    def recording(argv: list[str], log: str) -> subprocess.Popen[bytes]:
        spawned.append(spawn(argv, log))
        return spawned[-1]

    monkeypatch.setattr(cluster, "_spawn", recording)
    with pytest.raises(PolicyOptError, match="did not"):  # become idle (or, on a loaded machine, answer)
        cluster.start(timeout=3.0)
    assert spawned and spawned[0].args[0] == "munged"
    assert all(p.poll() is not None for p in spawned), [p.args[0] for p in spawned if p.poll() is None]
