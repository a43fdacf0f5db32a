"""docs/cli.md documents every command exactly as the parser defines it."""
from __future__ import annotations

from pathlib import Path

from policyopt.cli_reference import render

ROOT = Path(__file__).resolve().parents[1]


def test_cli_reference_is_current() -> None:
    assert (ROOT / "docs" / "cli.md").read_text() == render(), \
        "regenerate with: python -m policyopt.cli_reference > docs/cli.md"
