"""A published-scale sweep (small form) run through Ray equals the same sweep run in one process."""
from __future__ import annotations

import json
import logging
from pathlib import Path

import pandas as pd
import pytest

ray = pytest.importorskip("ray", reason="the Ray sweep needs the 'ray' package (pip install 'policyopt[ray]')")

pytestmark = pytest.mark.timeout(600)


def test_sweep_on_a_local_ray_instance_equals_the_local_run(gavel_dir, tmp_path: Path, caplog) -> None:
    """``--ray-address local``: two rates × two arms (four Ray tasks) on 108 GPUs, 15 jobs each; every
    row equals the one-process run's (measured times aside), progress is logged per finished task, the
    files are written, and the Ray instance the command started is shut down again."""
    from policyopt.sim import experiments as ex

    common = ["las_single", "--scale", "published", "--jobs", "15", "--rates", "5,6", "--seeds", "0"]
    with caplog.at_level(logging.INFO, logger="policyopt.sim.experiments"):
        assert ex.main([*common, "--output", str(tmp_path / "ray"), "--ray-address", "local"]) == 0
    assert not ray.is_initialized()
    progress = [r.getMessage() for r in caplog.records if r.getMessage().startswith("[")]
    assert len(progress) == 4 and {p.split("]")[0] for p in progress} == {"[1/4", "[2/4", "[3/4", "[4/4"}
    assert any("submitted to Ray" in r.getMessage() for r in caplog.records)
    assert ex.main([*common, "--output", str(tmp_path / "one")]) == 0
    timings = ["wall_seconds", "cpu_seconds", "solve_ms_mean"]  # measured times: the only columns that may differ
    got = pd.read_csv(tmp_path / "ray" / "las_single_published.csv").drop(columns=timings)
    want = pd.read_csv(tmp_path / "one" / "las_single_published.csv").drop(columns=timings)
    assert list(got["arm"]) == ["aware", "agnostic"] * 2 and list(got["rate"]) == [5.0, 5.0, 6.0, 6.0]
    pd.testing.assert_frame_equal(got, want)
    a = json.loads((tmp_path / "ray" / "las_single_published.json").read_text())
    b = json.loads((tmp_path / "one" / "las_single_published.json").read_text())
    assert a["ratios"] == b["ratios"] and a["means"] == b["means"]
    assert (tmp_path / "ray" / "las_single_published_jct_vs_load.png").exists()


def test_ray_address_uses_a_running_ray_session_and_leaves_it_running(gavel_dir, tmp_path: Path) -> None:
    """With Ray already initialized (``ray.init(num_cpus=2)``, standing in for a cluster), the sweep
    runs its tasks there and does not shut that session down."""
    from policyopt.sim import experiments as ex

    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, namespace="policyopt-test")
    try:
        summary = ex.run_experiment("las_single", tmp_path, [0], scale="published", jobs=12, rates=[6.0],
                                    progress=False, ray_address="auto")
        assert ray.is_initialized()
    finally:
        ray.shutdown()
    assert summary["status"] == "ok"
    df = pd.read_csv(tmp_path / "las_single_published.csv")
    assert list(df["arm"]) == ["aware", "agnostic"] and (df["completed"] > 0).all()


def test_a_local_ray_instance_is_new_even_when_another_cluster_runs_here(tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """``--ray-address local`` (the sweep) and no address (the executor's Ray backend) start a new
    Ray instance: they pass Ray's own ``"local"``. ``ray.init(address=None)`` would join the cluster
    that ``RAY_ADDRESS`` or ``/tmp/ray/ray_current_cluster`` names (a ``ray start --head`` or a
    ``ray.cluster_utils.Cluster`` in another process), and fail there when given ``num_cpus``."""
    from policyopt.executor.ray_backend import RayBackend
    from policyopt.sim import experiments as ex

    class Stop(Exception):
        pass

    addresses: list[str | None] = []

    def init(address: str | None = None, **options: object) -> None:
        addresses.append(address)
        raise Stop

    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", init)
    with pytest.raises(Stop):
        ex._run_on_ray([], "local", lambda k, result: None)
    with pytest.raises(Stop):
        RayBackend([], tmp_path / "run")
    assert addresses == ["local", "local"]
