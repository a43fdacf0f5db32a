"""The documentation site as a reader meets it: every JSON block parses (and every problem in one
is a valid problem), every page is in the navigation, math renders (arithmatex + MathJax), and the
pages speak of the project only."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
JSON_BLOCK = re.compile(r"```json\n(.*?)```", re.S)


def _json_blocks() -> list[tuple[str, int, str]]:
    return [(str(p.relative_to(ROOT)), i, b) for p in PAGES for i, b in enumerate(JSON_BLOCK.findall(p.read_text()))]


@pytest.mark.parametrize("page,index,text", _json_blocks(), ids=[f"{p}[{i}]" for p, i, _ in _json_blocks()])
def test_json_blocks_are_valid(page: str, index: int, text: str) -> None:
    """Every ```json block parses; one holding a problem (``cluster`` and ``jobs``) is accepted by
    ``Problem.from_dict`` (e.g. colocations name existing jobs)."""
    from policyopt import Problem

    data = json.loads(text)
    if isinstance(data, dict) and "cluster" in data and "jobs" in data:
        Problem.from_dict(data)


def test_schema_example_is_a_problem() -> None:
    blocks = JSON_BLOCK.findall((DOCS / "schema.md").read_text())
    from policyopt import Problem

    problem = Problem.from_dict(json.loads(blocks[0]))
    assert len(problem.jobs) == 2 and problem.colocated


def _nav_pages(node: object) -> list[str]:
    if isinstance(node, str):
        return [node] if node.endswith(".md") else []
    if isinstance(node, list):
        return [p for item in node for p in _nav_pages(item)]
    if isinstance(node, dict):
        return [p for v in node.values() for p in _nav_pages(v)]
    return []


def _mkdocs_config() -> dict:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


def test_every_page_is_in_the_navigation() -> None:
    nav = set(_nav_pages(_mkdocs_config()["nav"]))
    pages = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")}
    assert pages - nav == set(), f"add to mkdocs.yml nav: {sorted(pages - nav)}"
    assert nav - pages == set(), f"nav names missing pages: {sorted(nav - pages)}"


def test_math_renders() -> None:
    """``$$…$$`` blocks need pymdownx.arithmatex (generic) and MathJax on the site."""
    import tomllib

    cfg = _mkdocs_config()
    ext = {next(iter(e)) if isinstance(e, dict) else e: e for e in cfg["markdown_extensions"]}
    assert "pymdownx.arithmatex" in ext and ext["pymdownx.arithmatex"]["pymdownx.arithmatex"]["generic"] is True
    scripts = cfg["extra_javascript"]
    assert any("mathjax" in s and s.startswith("https://") for s in scripts)
    local = [s for s in scripts if not s.startswith("https://")]
    assert all((DOCS / s).exists() for s in local)
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["docs"]
    assert any(d.startswith("pymdown-extensions") for d in extra)
    assert any("$$" in p.read_text() for p in DOCS.rglob("*.md"))


_PRIVATE = re.compile(r"\bissue ?#?\d+|\(#\d+\)|helper[- ]brief|closing notes|other sessions|/work/", re.I)


def test_pages_speak_of_the_project_only() -> None:
    """No references to issues or notes a reader cannot see, no paths of a development machine,
    no development-process documents."""
    assert not (DOCS / "dev").exists()
    hits = [f"{p.relative_to(ROOT)}:{n}: {line.strip()}" for p in PAGES
            for n, line in enumerate(p.read_text().splitlines(), 1) if _PRIVATE.search(line)]
    assert not hits, "\n".join(hits)
