"""Shared fixtures: the Gavel data directory (skips with a clear reason when missing)."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
GAVEL_DIR = ROOT.parent / "shared" / "data" / "gavel"


@pytest.fixture(scope="session")
def gavel_dir() -> Path:
    if not (GAVEL_DIR / "simulation_throughputs.json").exists():
        pytest.skip(f"Gavel throughput data missing: expected {GAVEL_DIR}/simulation_throughputs.json "
                    "(../shared/data/gavel beside the checkout)")
    return GAVEL_DIR


@pytest.fixture(scope="session")
def gavel(gavel_dir: Path):
    from policyopt.data import load_gavel

    return load_gavel(gavel_dir / "simulation_throughputs.json")
