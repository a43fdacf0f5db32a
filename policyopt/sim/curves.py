"""Curves from the CSVs of separate experiment runs (``python -m policyopt.sim.experiments ...``, one
row per rate, seed and arm): the rows merged into one table, and the rows that compare like with like.

* :func:`merge_runs` — every row of several CSVs, a (rate, seed, arm) found twice being an error;
* :func:`paired_rows` — the rows of the (rate, seed) pairs at which every arm has a value, so that
  each arm's mean at a rate is taken over the same seeds (a seed still running, or cut short, at
  one arm leaves that rate's other arms too).
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

__all__ = ["merge_runs", "paired_rows", "KEYS"]

#: the columns that name one simulation of an experiment's CSV
KEYS = ("rate", "seed", "arm")


def merge_runs(files: Sequence[str | Path]) -> Any:
    """The rows of ``files`` (CSVs of experiment runs) in one DataFrame, sorted by rate, seed and arm.

    Raises :class:`~policyopt.errors.InputError` (field ``files``) when no file is given or a
    (rate, seed, arm) is in two files (or twice in one)."""
    import pandas as pd

    from ..errors import InputError

    if not files:
        raise InputError("files", list(files), "no CSV given")
    df = pd.concat([pd.read_csv(p) for p in files], ignore_index=True)
    missing = [k for k in KEYS if k not in df.columns]
    if missing:
        raise InputError("files", [str(p) for p in files], f"the CSVs have no column {', '.join(missing)}")
    dup = df.duplicated(list(KEYS), keep=False)
    if dup.any():
        raise InputError("files", df.loc[dup, list(KEYS)].values.tolist(), "(rate, seed, arm) in two files")
    return df.sort_values(list(KEYS)).reset_index(drop=True)


def paired_rows(df: Any, arms: Sequence[str], value: str = "avg_jct_hours") -> Any:
    """The rows of ``df`` whose (rate, seed) has a non-missing ``value`` at every arm of ``arms``
    (rows of other arms are dropped): at each rate, every arm's mean over the result is a mean over
    the same seeds."""
    have = df[df["arm"].isin(list(arms)) & df[value].notna()]
    count = have.groupby(["rate", "seed"])["arm"].nunique()
    full = count[count == len(set(arms))].index
    keep = have.set_index(["rate", "seed"]).index.isin(full)
    return have[keep].reset_index(drop=True)
