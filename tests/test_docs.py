"""Every ```python block in README.md and docs/ runs on its own (a fresh namespace per block: a
reader can copy any one snippet); the mkdocs site builds."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = sorted([ROOT / "README.md", *[p for p in (ROOT / "docs").rglob("*.md") if "dev" not in p.parts]])
BLOCK = re.compile(r"```python\n(.*?)```", re.S)


@pytest.mark.parametrize("path", DOCS, ids=[str(p.relative_to(ROOT)) for p in DOCS])
def test_code_blocks_run(path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = BLOCK.findall(path.read_text())
    if not blocks:
        pytest.skip("no python blocks")
    monkeypatch.chdir(tmp_path)
    for i, code in enumerate(blocks):
        ns: dict = {"__name__": f"doc_{path.stem}_{i}"}
        try:
            exec(compile(code, f"{path.name}[block {i}]", "exec"), ns)
        except ImportError as exc:  # an optional extra (e.g. torch) that is not installed
            pytest.skip(f"optional dependency missing: {exc}")


def test_mkdocs_builds(tmp_path: Path) -> None:
    if shutil.which("mkdocs") is None and not _has_module("mkdocs"):
        pytest.skip("mkdocs not installed (extra 'docs')")
    if not _has_module("pymdownx"):
        pytest.skip("pymdown-extensions not installed (extra 'docs': pip install -e '.[docs]')")
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "-q", "-d", str(tmp_path / "site")],
                       cwd=ROOT, capture_output=True, text=True, timeout=300, env={**os.environ})
    assert r.returncode == 0, r.stderr


def _has_module(name: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(name) is not None
