"""benchmarks/fifo_curve.py: the merged CSV, the figure, and the table of Gavel's published FIFO curve
next to ours (ratios of the means and per seed)."""
from __future__ import annotations

import sys
from pathlib import Path

import pandas as pd
import pytest
from bench_scripts import load_benchmark

from policyopt.errors import InputError


def test_table_and_files(tmp_path: Path, monkeypatch, capsys) -> None:
    fc = load_benchmark("fifo_curve.py", "fifo_curve")
    rows = [{"rate": 4.8, "seed": s, "arm": a, "avg_jct_hours": v}
            for s, vals in ((0, (40.0, 20.0, 10.0)), (1, (60.0, 20.0, 20.0)))
            for a, v in zip(("agnostic", "aware", "aware+ss"), vals)]
    pd.DataFrame(rows).to_csv(tmp_path / "a.csv", index=False)
    monkeypatch.setattr(sys, "argv", ["fifo_curve.py", "--dir", str(tmp_path), "--stem", "c", str(tmp_path / "a.csv")])
    fc.main()
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| 4.8 |"))
    # Gavel at 4.8: 92.0 / 24.1 / 20.1 h; ours: means 50 / 20 / 15, per seed 2.00 / 3.00 and 4.00 / 3.00
    assert "92.0/24.1/20.1" in row and f"{92.0 / 24.1:.2f}×" in row and f"{92.0 / 20.1:.2f}×" in row
    assert "**2.50×** (2.00 / 3.00)" in row and f"**{50 / 15:.2f}×** (4.00 / 3.00)" in row
    assert "| 0, 1 |" in row
    assert len(pd.read_csv(tmp_path / "c.csv")) == 6 and (tmp_path / "c.png").exists()
    # a seed with an arm still running is left out of the means and ratios
    pd.DataFrame(rows + [{"rate": 4.8, "seed": 2, "arm": "aware", "avg_jct_hours": 1.0}]).to_csv(
        tmp_path / "a.csv", index=False)
    fc.main()
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("| 4.8 |"))
    assert "| 0, 1 |" in row and "**2.50×** (2.00 / 3.00)" in row
    # ... and out of the figure's means (the merged CSV keeps it)
    drawn: dict[str, pd.DataFrame] = {}
    monkeypatch.setattr(fc, "jct_vs_load_figure", lambda table, path, **kw: drawn.setdefault(path.name, table))
    fc.main()
    assert len(pd.read_csv(tmp_path / "c.csv")) == 7
    ours = drawn["c.png"][drawn["c.png"]["arm"].str.startswith("ours: ")]
    assert ours.groupby("arm")["avg_jct_hours"].mean().to_dict() == {
        "ours: agnostic": 50.0, "ours: aware": 20.0, "ours: aware+ss": 15.0}
    pd.DataFrame(rows[:1]).to_csv(tmp_path / "b.csv", index=False)
    with pytest.raises(InputError, match="two files"):
        fc.merged([tmp_path / "a.csv", tmp_path / "b.csv"], "c")


def test_published_curve_is_monotone_and_complete() -> None:
    """Every published rate of the sweep up to 5.2 has all three arms; each arm's mean grows with the rate."""
    fc = load_benchmark("fifo_curve.py", "fifo_curve")
    rates = sorted(fc.PUBLISHED)
    assert rates[:13] == [round(0.4 * k, 1) for k in range(1, 14)]
    for arm in fc.ARMS:
        means = [fc.PUBLISHED[r][arm][0] for r in rates if arm in fc.PUBLISHED[r]]
        assert means == sorted(means)
