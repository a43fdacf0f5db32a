"""The Ray backend on a local Ray instance (``ray.init(address="local")``): one actor per worker slot runs the
same worker entry point; three real jobs (about two seconds of training each) finish at exactly their step counts."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("sklearn")
ray = pytest.importorskip("ray", reason="the Ray backend needs the 'ray' package (pip install 'ray[default]')")

from policyopt.executor.ray_backend import RayBackend  # noqa: E402
from policyopt.executor.cluster import build_slots  # noqa: E402
from policyopt.executor.executor import Executor, ExecutorConfig  # noqa: E402
from policyopt.executor.spec import example_throughputs_path, load_throughput_table, parse_jobs  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.timeout(900)]


def test_ray_backend_runs_real_jobs_to_completion(tmp_path: Path) -> None:
    jobs = parse_jobs([{"id": "lm", "job_type": "lstm-bs10", "steps": 80},
                       {"id": "rec", "job_type": "recommendation-bs128", "steps": 120},
                       {"id": "cnn", "job_type": "resnet-bs32", "steps": 60}])
    config = ExecutorConfig(cluster="cpu1=1,cpu2=1", policy="max_min_fairness", round_seconds=2.0)
    t0 = time.time()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="policyopt-test")
    try:
        backend = RayBackend(build_slots(config.cluster, config.pin), tmp_path / "run" / "backend", run_id="t",
                             warm_job_types=[j.job_type for j in jobs])
        executor = Executor(tmp_path / "state.sqlite", jobs, config, load_throughput_table(example_throughputs_path()),
                            tmp_path / "run", backend=backend)
        report = executor.run()
    finally:
        ray.shutdown()
    for jid, job in report["jobs"].items():
        assert job["status"] == "completed", (jid, job)
        assert job["steps_done"] == job["steps_required"] == job["checkpoint_step"]
        assert job["final_loss"] < job["initial_loss"]
    nodes = [e["detail"]["workers"] for e in executor.state.events("launch")]
    assert {w for ws in nodes for w in ws} == {"cpu1-0", "cpu2-0"}
    print(f"\nRay backend: {time.time() - t0:.1f} s wall, makespan {report['summary']['makespan']:.1f} s")
