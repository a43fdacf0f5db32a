"""``import policyopt`` from a source checkout that is not installed fails at once with a message that
says what to do, instead of a bare ``No module named 'policyopt.solvers'`` at the first solve."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import policyopt

PACKAGE = Path(policyopt.__file__).parent


def _import_from(root: Path) -> subprocess.CompletedProcess[str]:
    # -S: no site processing, so no editable-install finder maps policyopt.formulations elsewhere; the
    # dependencies come from this interpreter's path entries that do not hold a policyopt package
    deps = [p for p in sys.path if p and Path(p).is_dir() and not (Path(p) / "policyopt").exists()]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(deps)}
    return subprocess.run([sys.executable, "-S", "-c", "import policyopt"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def _copy_package(root: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", "formulations", "solvers")
    shutil.copytree(PACKAGE, root / "policyopt", ignore=skip)


def test_uninstalled_checkout_says_to_install(tmp_path: Path) -> None:
    _copy_package(tmp_path)
    for sub in ("formulations", "solvers"):
        (tmp_path / sub).mkdir()
        (tmp_path / sub / "__init__.py").write_text("")
    done = _import_from(tmp_path)
    assert done.returncode != 0
    assert "NotInstalledError" in done.stderr and "policyopt.formulations is not importable" in done.stderr
    assert f"pip install -e {tmp_path}" in done.stderr


def test_a_package_without_the_checkout_folders_imports(tmp_path: Path) -> None:
    _copy_package(tmp_path)
    done = _import_from(tmp_path)
    assert done.returncode == 0, done.stderr
