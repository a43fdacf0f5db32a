"""``policyopt.sim.curves``: the CSVs of separate experiment runs merged (a simulation in two files is
an error), and the rows of the seeds at which every arm has a value."""
from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
import pytest

from policyopt.errors import InputError
from policyopt.sim.curves import merge_runs, paired_rows


def rows(*items: tuple[float, int, str, float]) -> pd.DataFrame:
    return pd.DataFrame([{"rate": r, "seed": s, "arm": a, "avg_jct_hours": v} for r, s, a, v in items])


def test_merge_runs_sorts_the_rows_of_every_file(tmp_path: Path) -> None:
    rows((2.0, 1, "b", 4.0), (0.4, 0, "b", 3.0)).to_csv(tmp_path / "x.csv", index=False)
    rows((0.4, 0, "a", 1.0), (2.0, 0, "a", 2.0)).to_csv(tmp_path / "y.csv", index=False)
    got = merge_runs([tmp_path / "x.csv", tmp_path / "y.csv"])
    assert got[["rate", "seed", "arm"]].values.tolist() == [[0.4, 0, "a"], [0.4, 0, "b"], [2.0, 0, "a"],
                                                             [2.0, 1, "b"]]
    assert list(got.index) == [0, 1, 2, 3]


def test_merge_runs_errors(tmp_path: Path) -> None:
    rows((0.4, 0, "a", 1.0)).to_csv(tmp_path / "x.csv", index=False)
    rows((0.4, 0, "a", 2.0), (0.4, 1, "a", 2.0)).to_csv(tmp_path / "y.csv", index=False)
    with pytest.raises(InputError, match=r"files: \(rate, seed, arm\) in two files") as err:
        merge_runs([tmp_path / "x.csv", tmp_path / "y.csv"])
    assert err.value.value == [[0.4, 0, "a"], [0.4, 0, "a"]]
    with pytest.raises(InputError, match="files: no CSV given"):
        merge_runs([])
    pd.DataFrame({"rate": [1.0], "arm": ["a"]}).to_csv(tmp_path / "z.csv", index=False)
    with pytest.raises(InputError, match="no column seed"):
        merge_runs([tmp_path / "z.csv"])


def test_paired_rows_keep_the_seeds_every_arm_has() -> None:
    df = rows((2.4, 0, "a", 1.0), (2.4, 0, "b", 2.0),
              (2.4, 1, "b", 3.0),                        # arm a missing
              (2.4, 2, "a", math.nan), (2.4, 2, "b", 4.0),  # arm a did not finish
              (4.0, 1, "a", 5.0), (4.0, 1, "b", 6.0), (4.0, 1, "c", 7.0))
    got = paired_rows(df, ("a", "b"))
    assert got[["rate", "seed", "arm"]].values.tolist() == [[2.4, 0, "a"], [2.4, 0, "b"], [4.0, 1, "a"],
                                                             [4.0, 1, "b"]]
    means = got.groupby(["rate", "arm"])["avg_jct_hours"].mean().to_dict()
    assert means == {(2.4, "a"): 1.0, (2.4, "b"): 2.0, (4.0, "a"): 5.0, (4.0, "b"): 6.0}
    assert paired_rows(df, ("a", "b", "c"))[["rate", "seed"]].drop_duplicates().values.tolist() == [[4.0, 1]]
