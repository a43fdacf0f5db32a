"""``benchmarks/las_single_curve.py``: the per-rate CSVs of the single-GPU published runs merged into one
curve (average JCT per arm, ratio per seed)."""
from __future__ import annotations

import pandas as pd
import pytest
from bench_scripts import load_benchmark

from policyopt.errors import InputError


def _rows(rate: float, jct: dict[tuple[int, str], float]) -> pd.DataFrame:
    return pd.DataFrame([{"experiment": "las_single", "arm": arm, "seed": seed, "rate": rate, "avg_jct_hours": v}
                         for (seed, arm), v in jct.items()])


def test_merge_writes_the_curve_and_the_ratio_per_seed(tmp_path, monkeypatch) -> None:
    mod = load_benchmark("las_single_curve.py", "las_single_curve")
    _rows(0.4, {(0, "aware"): 10.0, (0, "agnostic"): 20.0, (1, "aware"): 8.0, (1, "agnostic"): 12.0}).to_csv(
        tmp_path / "las_single_published_gavel_semantics_rate0.4.csv", index=False)
    _rows(2.0, {(0, "aware"): 5.0, (0, "agnostic"): 7.5, (1, "aware"): 4.0, (1, "agnostic"): 4.0}).to_csv(
        tmp_path / "las_single_published_gavel_semantics_rate2.0.csv", index=False)
    monkeypatch.setattr("sys.argv", ["las_single_curve.py", "--dir", str(tmp_path)])
    mod.main()
    merged = pd.read_csv(tmp_path / "las_single_published_gavel_semantics_curve.csv")
    assert len(merged) == 8 and list(merged["rate"].unique()) == [0.4, 2.0]
    r = mod.ratios(merged).set_index(["rate", "seed"])["ratio"]
    assert r.to_dict() == {(0.4, 0): 2.0, (0.4, 1): 1.5, (2.0, 0): 1.5, (2.0, 1): 1.0}
    assert (tmp_path / "las_single_published_gavel_semantics_curve.png").stat().st_size > 0
    assert (tmp_path / "las_single_published_gavel_semantics_curve_ratio.png").stat().st_size > 0
    # run again: the merged CSV is not read as an input
    mod.main()
    assert len(pd.read_csv(tmp_path / "las_single_published_gavel_semantics_curve.csv")) == 8


def test_a_rate_seed_and_arm_in_two_files_is_an_error(tmp_path) -> None:
    mod = load_benchmark("las_single_curve.py", "las_single_curve")
    for name in ("rate0.4", "rate0.4_again"):
        _rows(0.4, {(0, "aware"): 10.0, (0, "agnostic"): 20.0}).to_csv(
            tmp_path / f"las_single_published_gavel_semantics_{name}.csv", index=False)
    with pytest.raises(InputError, match="in two files"):
        mod.merged(tmp_path, "las_single_published_gavel_semantics_curve")
    with pytest.raises(InputError, match="no las_single_published_gavel_semantics"):
        mod.merged(tmp_path / "none", "las_single_published_gavel_semantics_curve")


def test_published_table_means_only_seeds_with_both_arms() -> None:
    mod = load_benchmark("las_single_curve.py", "las_single_curve")
    # seed 1's agnostic run did not finish: its aware run must not enter the aware mean
    df = _rows(2.4, {(0, "aware"): 10.0, (0, "agnostic"): 15.0, (1, "aware"): 30.0})
    table = mod.published_table(df, mod.ratios(df))
    row = next(line for line in table.splitlines() if line.startswith("| 2.4 "))
    assert row == "| 2.4 | 22.9 / 16.3 | 1.40 | 15.0 / 10.0 | 1.50 / – |", row


def test_the_figure_means_only_seeds_with_both_arms(tmp_path, monkeypatch) -> None:
    """At a rate where one arm of a seed did not finish, the curve's means of both arms are over the same
    seeds (the merged CSV keeps every row)."""
    mod = load_benchmark("las_single_curve.py", "las_single_curve")
    _rows(2.4, {(0, "aware"): 10.0, (0, "agnostic"): 15.0, (1, "aware"): 30.0, (2, "aware"): 20.0}).to_csv(
        tmp_path / "las_single_published_gavel_semantics_rate2.4.csv", index=False)
    drawn: dict[str, pd.DataFrame] = {}
    monkeypatch.setattr(mod, "jct_vs_load_figure", lambda table, path, **kw: drawn.setdefault(path.name, table))
    monkeypatch.setattr("sys.argv", ["las_single_curve.py", "--dir", str(tmp_path), "--stem", "c"])
    mod.main()
    assert len(pd.read_csv(tmp_path / "c.csv")) == 4
    means = drawn["c.png"].groupby("arm")["avg_jct_hours"].mean().to_dict()
    assert means == {"agnostic": 15.0, "aware": 10.0}
