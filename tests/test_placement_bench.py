"""Smoke test: benchmarks/placement_bench.py runs end to end in its --quick form, on Gavel's
throughputs and on the seeded synthetic table it uses where Gavel's file is missing."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks" / "placement_bench.py"


@pytest.mark.parametrize("data", ["gavel", "synthetic"])
def test_placement_bench_quick(capsys: Any, tmp_path: Path, data: str) -> None:
    spec = importlib.util.spec_from_file_location("placement_bench", BENCH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    if data == "synthetic":
        module.GAVEL = tmp_path / "missing.json"
    elif not module.GAVEL.exists():
        pytest.skip(f"Gavel's throughputs not found at {module.GAVEL}")
    assert module.main(["--quick", "--reps", "1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split()[0]: line.split() for line in out.splitlines() if line.strip()}
    strategies = {"scratch+none", "scratch+simple", "scratch+matching", "renew+none", "renew+matching"}
    assert strategies <= set(rows)
    assert all(int(rows[s][1]) >= 0 for s in strategies)
    assert rows["256"][1] == "32"  # the timing row for 256 jobs on 32 GPUs is printed
    assert rows["throughputs:"][1] == ("synthetic" if data == "synthetic" else str(module.GAVEL))
