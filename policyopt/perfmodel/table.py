"""The configuration table: exact CSV columns and their (vectorized) validation.

One row = one (model, plan, resources) configuration. Samples carry ``iter_time`` as well.
Validation checks whole columns with numpy and reports the *first* bad cell as
``InputError(f"{table}[{row}].{column}", value, problem)`` with ``row`` the 0-based data row
(header not counted), e.g. ``samples[3].dp``.
"""
from __future__ import annotations

from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from policyopt.errors import InputError, UnknownNameError

from .plans import ZERO_MODES, ModelSpec, Plan, Resources, check_plan_fits

__all__ = [
    "SPEC_COLUMNS", "PLAN_COLUMNS", "RESOURCE_COLUMNS", "CONFIG_COLUMNS", "SAMPLE_COLUMNS",
    "INT_COLUMNS", "validate_table", "config_row", "configs_frame", "row_to_objects",
]

SPEC_COLUMNS: tuple[str, ...] = ("model", "params", "layers", "hidden", "seq_len",
                                 "global_batch", "fwd_time_1gpu", "bytes_per_param")
PLAN_COLUMNS: tuple[str, ...] = ("dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "zero")
RESOURCE_COLUMNS: tuple[str, ...] = ("gpus", "cpus", "nodes", "bw_intra", "bw_inter", "bw_pcie")
#: Columns of CONFIGS.csv (in this order when written by policyopt).
CONFIG_COLUMNS: tuple[str, ...] = SPEC_COLUMNS + PLAN_COLUMNS + RESOURCE_COLUMNS
#: Columns of SAMPLES.csv.
SAMPLE_COLUMNS: tuple[str, ...] = CONFIG_COLUMNS + ("iter_time",)

#: Columns that must hold integers >= 1 (``gc`` is separate: 0/1).
INT_COLUMNS: tuple[str, ...] = ("layers", "hidden", "seq_len", "global_batch", "dp", "tp", "pp",
                                "micro_batches", "ga_steps", "gpus", "cpus", "nodes")
_FLOAT_COLUMNS: tuple[str, ...] = ("params", "fwd_time_1gpu", "bytes_per_param", "bw_intra",
                                   "bw_inter", "bw_pcie")


def _fail(table: str, rows: np.ndarray, column: str, values: pd.Series, problem: str) -> None:
    """Raise for the first True entry of the boolean mask ``rows``, if any."""
    bad = np.flatnonzero(rows)
    if bad.size:
        i = int(bad[0])
        raise InputError(f"{table}[{i}].{column}", values.iloc[i], problem)


def validate_table(df: pd.DataFrame, table: str = "configs", *,
                   require_iter_time: bool = False) -> pd.DataFrame:
    """Validate a configuration (or sample) table and return a clean typed copy.

    Checks, column by column: presence; numeric parse; integers >= 1 for :data:`INT_COLUMNS`;
    finite > 0 for sizes, times and bandwidths; ``gc`` in {0, 1}; ``zero`` in ``ZERO_MODES``;
    and per row: dp·tp·pp = gpus, nodes <= gpus, pp <= layers, micro_batches = 1 when pp = 1,
    dp·ga_steps·micro_batches <= global_batch. The copy has int64 / float64 / str dtypes and a
    0..n-1 index; values are never altered.
    """
    if not isinstance(df, pd.DataFrame):
        raise InputError(table, type(df).__name__, "must be a pandas DataFrame")
    required = SAMPLE_COLUMNS if require_iter_time else CONFIG_COLUMNS
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise InputError(f"{table}.{missing[0]}", list(missing), "missing column(s)")
    if len(df) == 0:
        raise InputError(table, 0, "has no rows")
    raw = df.reset_index(drop=True)
    out = raw.copy()

    model = raw["model"]
    empty = model.isna().to_numpy() | (model.astype(str).str.strip() == "").to_numpy()
    _fail(table, empty, "model", model, "must be a non-empty name")
    out["model"] = model.astype(str)

    numeric = list(INT_COLUMNS) + list(_FLOAT_COLUMNS) + ["gc"]
    if require_iter_time:
        numeric.append("iter_time")
    for col in numeric:
        values = pd.to_numeric(raw[col], errors="coerce").to_numpy(dtype=float)
        _fail(table, ~np.isfinite(values), col, raw[col], "must be a finite number")
        out[col] = values
    for col in INT_COLUMNS:
        v = out[col].to_numpy()
        _fail(table, v != np.round(v), col, raw[col], "must be an integer")
        _fail(table, v < 1, col, raw[col], "must be an integer >= 1")
        out[col] = v.astype(np.int64)
    positive = list(_FLOAT_COLUMNS) + (["iter_time"] if require_iter_time else [])
    for col in positive:
        _fail(table, out[col].to_numpy() <= 0, col, raw[col], "must be > 0")
    gc = out["gc"].to_numpy()
    _fail(table, (gc != 0) & (gc != 1), "gc", raw["gc"], "must be 0 or 1")
    out["gc"] = gc.astype(np.int64)

    zero = raw["zero"].astype(str)
    unknown = np.flatnonzero(~zero.isin(ZERO_MODES).to_numpy())
    if unknown.size:
        i = int(unknown[0])
        raise UnknownNameError(f"{table}[{i}].zero", raw["zero"].iloc[i], ZERO_MODES)
    out["zero"] = zero

    d, t, p = (out[c].to_numpy() for c in ("dp", "tp", "pp"))
    _fail(table, d * t * p != out["gpus"].to_numpy(), "dp", raw["dp"],
          "dp·tp·pp must equal gpus")
    _fail(table, out["nodes"].to_numpy() > out["gpus"].to_numpy(), "nodes", raw["nodes"],
          "more nodes than gpus")
    _fail(table, p > out["layers"].to_numpy(), "pp", raw["pp"], "more pipeline stages than layers")
    m = out["micro_batches"].to_numpy()
    _fail(table, (p == 1) & (m != 1), "micro_batches", raw["micro_batches"],
          "must be 1 when pp = 1 (use ga_steps)")
    per_step = d * out["ga_steps"].to_numpy() * m
    _fail(table, per_step > out["global_batch"].to_numpy(), "ga_steps", raw["ga_steps"],
          "dp·ga_steps·micro_batches exceeds global_batch")
    columns = list(required) + [c for c in out.columns if c not in required]
    return out[columns]


def config_row(spec: ModelSpec, plan: Plan, resources: Resources) -> dict[str, object]:
    """One CSV row (dict keyed by :data:`CONFIG_COLUMNS`) after checking the plan fits."""
    check_plan_fits(spec, plan, resources)
    row: dict[str, object] = {}
    row.update(spec.to_row())
    row.update(plan.to_row())
    row.update(resources.to_row())
    return {c: row[c] for c in CONFIG_COLUMNS}


def configs_frame(spec: ModelSpec, plans: Sequence[Plan],
                  resources: Resources | Sequence[Resources]) -> pd.DataFrame:
    """A validated configuration table of ``spec`` under each plan (one Resources, or one each)."""
    res_list: Iterable[Resources]
    if isinstance(resources, Resources):
        res_list = [resources] * len(plans)
    else:
        res_list = list(resources)
        if len(res_list) != len(plans):
            raise InputError("resources", len(res_list), f"need one per plan ({len(plans)})")
    rows = [config_row(spec, plan, res) for plan, res in zip(plans, res_list)]
    return validate_table(pd.DataFrame(rows, columns=list(CONFIG_COLUMNS)))


def row_to_objects(row: pd.Series) -> tuple[ModelSpec, Plan]:
    """Rebuild the ModelSpec and Plan of one validated table row."""
    spec = ModelSpec(name=str(row["model"]), params=float(row["params"]),
                     layers=int(row["layers"]), hidden=int(row["hidden"]),
                     seq_len=int(row["seq_len"]), global_batch=int(row["global_batch"]),
                     fwd_time_1gpu=float(row["fwd_time_1gpu"]),
                     bytes_per_param=float(row["bytes_per_param"]))
    plan = Plan(dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]),
                micro_batches=int(row["micro_batches"]), ga_steps=int(row["ga_steps"]),
                gc=bool(row["gc"]), zero=str(row["zero"]))
    return spec, plan
