"""A fresh install runs the commands that need Gavel's tables: the wheel built from this checkout
is installed into a new virtual environment and run from elsewhere (no checkout on ``sys.path``,
no ``../shared`` beside it). Its dependencies come from the running environment's site-packages
through a ``.pth`` line (which does not process that directory's own ``.pth`` files, so the
checkout's editable install stays invisible); the test asserts ``policyopt`` is imported from
the new environment."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("fresh")
    wheels = base / "wheels"
    # built from a copy: setuptools writes build/ and *.egg-info/ beside the sources it builds
    src = base / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "*.egg-info", "__pycache__", ".*_cache", ".hypothesis", "dist"))
    r = _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(wheels),
              str(src)], cwd=base)
    assert r.returncode == 0, r.stderr
    (wheel,) = wheels.glob("policyopt-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    for f in ("simulation_throughputs.json", "physical_cluster_throughputs.json", "LICENSE.gavel", "README.md"):
        assert f"policyopt/data/gavel_throughputs/{f}" in names, f
    env_dir = base / "venv"
    r = _run([sys.executable, "-m", "venv", "--without-pip", str(env_dir)], cwd=base)
    assert r.returncode == 0, r.stderr
    py = env_dir / "bin" / "python"
    r = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-deps", "-q", str(wheel)], cwd=base)
    assert r.returncode == 0, r.stderr
    site = _run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], cwd=base)
    Path(site.stdout.strip(), "_dependencies.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return env_dir


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "POLICYOPT_GAVEL_DIR", "VIRTUAL_ENV")}
    env["MPLBACKEND"] = "Agg"
    return env


def test_installed_package_is_the_wheel(venv: Path, tmp_path: Path) -> None:
    r = _run([str(venv / "bin" / "python"), "-c", "import policyopt, policyopt.data.gavel as g; "
              "print(policyopt.__file__); print(g.find_gavel_dir())"], cwd=tmp_path, env=_env())
    assert r.returncode == 0, r.stderr
    module, data = r.stdout.split()
    assert Path(module).is_relative_to(venv) and Path(data).is_relative_to(venv)
    assert not Path(module).is_relative_to(ROOT)


def test_fresh_install_simulates_and_benches(venv: Path, tmp_path: Path) -> None:
    exe = str(venv / "bin" / "policyopt")
    r = _run([exe, "simulate", "--policy", "max_min_fairness", "--generator", "gavel", "--jobs", "6", "--rate", "4",
              "--cluster", "v100=2,p100=2,k80=2", "--seed", "0", "--output", "sim", "--no-figures"],
             cwd=tmp_path, env=_env())
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "sim" / "metrics.json").read_text())["num_jobs"] == 6
    r = _run([exe, "bench", "--policies", "max_min_fairness", "--sizes", "8", "--backends", "highs:simplex",
              "--repeats", "1", "--output", "bench"], cwd=tmp_path, env=_env())
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "bench" / "summary.csv").read_text().count("\n") == 2


def test_missing_override_dir_is_an_error(venv: Path, tmp_path: Path) -> None:
    env = {**_env(), "POLICYOPT_GAVEL_DIR": str(tmp_path / "nope")}
    r = _run([str(venv / "bin" / "policyopt"), "simulate", "--policy", "max_min_fairness", "--generator", "gavel",
              "--jobs", "4", "--static", "--cluster", "v100=2", "--seed", "0", "--output", "sim"],
             cwd=tmp_path, env=env)
    assert r.returncode == 2
    assert "POLICYOPT_GAVEL_DIR" in r.stderr and "nope" in r.stderr and r.stderr.count("\n") == 1
