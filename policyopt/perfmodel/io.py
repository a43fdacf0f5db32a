"""CSV input/output with the exact column names of docs/perf-model.md.

SAMPLES.csv: :data:`~policyopt.perfmodel.table.SAMPLE_COLUMNS`; CONFIGS.csv:
:data:`~policyopt.perfmodel.table.CONFIG_COLUMNS` (extra columns are kept and ignored);
PRED.csv: CONFIGS.csv unchanged plus ``pred_iter_time`` (seconds).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from policyopt.errors import InputError

from .table import validate_table

__all__ = ["read_table_csv", "read_samples", "read_configs", "write_predictions"]


def read_table_csv(path: str | Path, field: str) -> pd.DataFrame:
    """Read a CSV as text-preserving DataFrame (``none`` stays a string; no NA guessing)."""
    p = Path(path)
    if not p.is_file():
        raise InputError(field, str(p), "file not found")
    try:
        return pd.read_csv(p, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.EmptyDataError, pd.errors.ParserError) as err:
        raise InputError(field, str(p), f"not a readable CSV ({err})") from None


def read_samples(path: str | Path) -> pd.DataFrame:
    """Read and validate SAMPLES.csv (errors name ``samples[row].column``)."""
    return validate_table(read_table_csv(path, "samples_file"), "samples", require_iter_time=True)


def read_configs(path: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Read CONFIGS.csv: (raw text table as written, validated typed table)."""
    raw = read_table_csv(path, "configs_file")
    return raw, validate_table(raw, "configs")


def write_predictions(raw_configs: pd.DataFrame, pred_iter_time: np.ndarray,
                      path: str | Path) -> None:
    """Write PRED.csv: the configuration rows as read plus a ``pred_iter_time`` column."""
    if "pred_iter_time" in raw_configs.columns:
        raise InputError("configs.pred_iter_time", "present",
                         "CONFIGS.csv already has a pred_iter_time column")
    pred = np.asarray(pred_iter_time, dtype=float)
    if pred.shape != (len(raw_configs),):
        raise InputError("pred_iter_time", pred.shape, f"need one value per row ({len(raw_configs)})")
    out = raw_configs.reset_index(drop=True).copy()
    out["pred_iter_time"] = pred
    out.to_csv(path, index=False, float_format="%.9g")
