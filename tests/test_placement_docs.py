"""The Python examples in docs/mechanism.md and docs/placement.md run as written."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs"


def python_blocks(page: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S)


@pytest.mark.parametrize("page", ["mechanism.md", "placement.md"])
def test_doc_examples_run(page: str) -> None:
    blocks = python_blocks(page)
    assert blocks, f"no python examples in {page}"
    namespace: dict[str, object] = {"__name__": f"docs_{page}"}
    for i, code in enumerate(blocks):
        try:
            exec(compile(code, f"{page}[block {i}]", "exec"), namespace)
        except Exception as exc:  # pragma: no cover - the message names the failing block
            raise AssertionError(f"{page}: example {i} failed: {exc!r}") from exc
