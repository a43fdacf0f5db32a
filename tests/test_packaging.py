"""Packaging: every package directory is listed in pyproject, the namespace mapping works, the
console command runs."""
from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_package_is_listed() -> None:
    cfg = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(cfg["packages"])
    found = {"policyopt." + ".".join(p.parent.relative_to(ROOT / "policyopt").parts)
             for p in (ROOT / "policyopt").rglob("__init__.py")}
    found = {f.rstrip(".") for f in found} | {"policyopt.formulations", "policyopt.solvers"}
    assert found <= listed, f"add to pyproject [tool.setuptools].packages: {sorted(found - listed)}"
    assert cfg["package-dir"]["policyopt.formulations"] == "formulations"
    assert cfg["package-dir"]["policyopt.solvers"] == "solvers"


def test_namespace_mapping() -> None:
    import policyopt.formulations
    import policyopt.solvers

    assert Path(policyopt.formulations.__file__).parent.name == "formulations"
    assert Path(policyopt.solvers.__file__).parent.name == "solvers"


def test_console_help() -> None:
    r = subprocess.run([sys.executable, "-m", "policyopt.cli", "--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and "solve" in r.stdout
