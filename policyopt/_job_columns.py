"""The interchange problem's jobs validated and built column-wise (the fast path of
:meth:`policyopt.problem.Problem.from_dict` and :meth:`~policyopt.problem.Problem.from_arrays`).

Each field present in any job is read once as a column (one C-level pass), checked with one type
scan and one numpy pass against :data:`policyopt.schema.JOB_FIELDS`, and the :class:`Job` objects
are then built without their per-field checks; the first job with a defect is re-validated by the
per-job reference (:func:`policyopt.problem_records._job_from_raw`), whose error names the field.
"""
from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from itertools import chain, repeat
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from .errors import InputError
from .problem_records import (_JOB_KEYS, _JOB_NUMBERS, _JOB_SPECS, _NONE, _NUMBER_TYPES, _THROUGHPUT_SPEC, Job,
                              _bad_array, _id_number_ok, _job_from_raw)
from .schema import FieldSpec

if TYPE_CHECKING:
    import numpy as np

__all__ = ["ParsedJobs", "parse_jobs", "jobs_from_columns"]


def _bad_numbers(values: Sequence[Any], spec: FieldSpec,
                 types: set[type] | None = None) -> tuple["np.ndarray", "np.ndarray"]:
    """``(bad, a)``: mask of the values (``None`` = the field's default) that break ``spec`` and the
    values as floats, in one numpy pass (plus one type scan; ``types``: the values' types, if known)."""
    import numpy as np

    n = len(values)
    if types is None:
        types = set(map(type, values))
    if _NONE in types:
        values = [spec.default if v is None else v for v in values]
        types = set(map(type, values))
    bad = None
    if not types <= _NUMBER_TYPES and any(issubclass(t, (np.integer, np.floating)) for t in types):
        values = [v.item() if isinstance(v, (np.integer, np.floating)) else v for v in values]  # numpy scalars
        types = set(map(type, values))
    if not types <= _NUMBER_TYPES:
        bad = np.fromiter((type(v) not in _NUMBER_TYPES for v in values), bool, n)
        values = [v if type(v) in _NUMBER_TYPES else 0 for v in values]
    try:
        a = np.array(values, dtype=float)
    except OverflowError:  # integers beyond float range
        a = np.array([v if abs(v) < 1e300 else math.inf for v in values], dtype=float)
    out = _bad_array(a, spec)
    if bad is not None:
        out |= bad
    return out, a


@dataclass
class ParsedJobs:
    jobs: list[Job]
    ids: list[str]
    configs: list[str]
    columns: dict[str, "np.ndarray"]  # config -> throughput column
    scale: "np.ndarray"
    weight: "np.ndarray"
    steps: "np.ndarray"
    time_since_start: "np.ndarray"


#: a job's attributes in the order of :class:`Job`'s fields, each at its default
_JOB_DEFAULTS: dict[str, Any] = {f.name: _JOB_SPECS[f.name].default for f in dataclass_fields(Job)}
assert _JOB_DEFAULTS.keys() == _JOB_KEYS, "Job's fields and policyopt.schema.JOB_FIELDS must agree"
assert tuple(_JOB_DEFAULTS) == ("id", "throughputs", "scale_factor", "weight", "steps_remaining", "time_since_start",
                                "entity", "slo_seconds", "arrival", "priority", "job_type", "isolated_time"), \
    "jobs_from_columns lists Job's fields in this order"


def _set_column(rows: list[dict[str, Any]], key: str, values: Iterable[Any]) -> None:
    """``rows[i][key] = values[i]`` for every row (one C-level pass)."""
    deque(map(dict.__setitem__, rows, repeat(key), values), maxlen=0)


def jobs_from_columns(columns: Mapping[str, Sequence[Any] | None]) -> list[Job]:
    """Jobs from values already validated column-wise: field -> one value per job (``id`` and
    ``throughputs`` required; ``None`` or absent: every job has the field's default); one dict display
    per job, then C-level maps."""
    if columns.get("id") is None or columns.get("throughputs") is None:
        raise ValueError("jobs_from_columns needs the id and throughputs columns")
    cols = [repeat(_JOB_DEFAULTS[name]) if columns.get(name) is None else columns[name] for name in _JOB_DEFAULTS]
    attrs = [{"id": a, "throughputs": b, "scale_factor": c, "weight": d, "steps_remaining": e,
              "time_since_start": f, "entity": g, "slo_seconds": h, "arrival": i, "priority": j, "job_type": k,
              "isolated_time": m} for a, b, c, d, e, f, g, h, i, j, k, m in zip(*cols)]
    return _jobs_from_attrs(attrs)


def _jobs_from_attrs(attrs: list[dict[str, Any]]) -> list[Job]:
    """One :class:`Job` per attribute dict (every field present, already validated), built without
    ``__post_init__``: :meth:`Job._unchecked` as C-level maps."""
    jobs: list[Job] = list(map(object.__new__, repeat(Job, len(attrs))))
    deque(map(object.__setattr__, jobs, repeat("__dict__"), attrs), maxlen=0)
    return jobs


def _throughput_columns(thr: list[dict[Any, Any]], n: int) -> tuple[list[str], dict[str, "np.ndarray"],
                                                                     "np.ndarray", bool]:
    """``(configs, columns, bad, float_only)`` of the jobs' throughput objects: sorted configuration
    names, one float column per configuration (0 where a job omits it), the jobs with a value that
    breaks the rules and whether every value is already a float. When every object names the same
    configurations in the same order (the usual case) all values are read in one flat pass."""
    import numpy as np

    bad = np.zeros(n, dtype=bool)
    keysets = set(map(tuple, thr))
    if len(keysets) == 1:
        (order,) = keysets
        flat = list(chain.from_iterable(map(dict.values, thr)))
        types = set(map(type, flat))
        b, a = _bad_numbers(flat, _THROUGHPUT_SPEC, types)
        k = len(order)
        if k:
            bad |= b.reshape(n, k).any(axis=1)
        A = a.reshape(n, k)
        return sorted(order), {c: A[:, i] for i, c in enumerate(order)}, bad, types <= {float}
    configs = sorted(set().union(*thr)) if n else []
    columns: dict[str, np.ndarray] = {}
    float_only = True
    for c in configs:
        column = list(map(dict.get, thr, repeat(c), repeat(0.0)))
        types = set(map(type, column))
        b, columns[c] = _bad_numbers(column, _THROUGHPUT_SPEC, types)
        bad |= b
        float_only = float_only and types <= {float}
    return configs, columns, bad, float_only


def parse_jobs(raw_jobs: Sequence[Any]) -> ParsedJobs:
    """Validate and build the jobs of a problem column-wise (rules of
    :data:`policyopt.schema.JOB_FIELDS`): each field present in any job is read once as a column
    (one C-level pass), checked with one type scan and one numpy pass, and the jobs are then built
    from their own objects merged over the defaults, without re-checking; only values that must
    change (an integer weight becomes a float, a numeric id a string, ``null`` its default) are
    written back. The first job (in list order) with any defect is re-validated by
    :func:`_job_from_raw`, whose error names the field (``jobs[3].throughputs.v100``)."""
    import numpy as np

    n = len(raw_jobs)
    rows: list[Any] = list(raw_jobs)
    bad = np.zeros(n, dtype=bool)
    present: set[Any] = set().union(*rows) if set(map(type, rows)) == {dict} else set(_JOB_KEYS) | {None}
    if not present <= _JOB_KEYS:  # a job that is no object, or has an unknown field
        ok = np.fromiter((isinstance(r, Mapping) and r.keys() <= _JOB_KEYS for r in rows), bool, n)
        bad |= ~ok
        rows = [dict(r) if o else {} for r, o in zip(rows, ok.tolist())]
        present = set().union(*rows)

    def column(name: str) -> list[Any]:
        return list(map(dict.get, rows, repeat(name))) if name in present else [None] * n

    convert: dict[str, np.ndarray] = {}  # numbers to write back converted after the checks (as floats)
    fixes: dict[str, list[Any]] = {}
    ids = column("id")
    if set(map(type, ids)) != {str} or "" in ids:
        ids = [(str(v) if _id_number_ok(v) else None) if type(v) in _NUMBER_TYPES else v for v in ids]
        bad |= np.fromiter((type(v) is not str or not v for v in ids), bool, n)
        fixes["id"] = ids

    thr = column("throughputs")
    if set(map(type, thr)) != {dict}:
        ok = np.fromiter((isinstance(t, Mapping) for t in thr), bool, n)
        bad |= ~ok
        thr = [dict(t) if o else {} for t, o in zip(thr, ok.tolist())]
    configs, columns, b, float_only = _throughput_columns(thr, n)
    bad |= b

    nums: dict[str, np.ndarray] = {}
    for spec in _JOB_NUMBERS:
        if spec.name not in present:  # every job has the default
            if spec.default is not None:
                nums[spec.name] = np.full(n, float(spec.default))
            continue
        vals = column(spec.name)
        types = set(map(type, vals))
        want = int if spec.type == "integer" else float
        if spec.default is None:  # nullable without a default (slo_seconds, arrival): None stays None
            if types <= {_NONE, float}:
                given = [v for v in vals if v is not None] if _NONE in types else vals
                bad_given = _bad_array(np.array(given, dtype=float), spec)
                if bad_given.any():
                    bad[np.fromiter((v is not None for v in vals), bool, n)] |= bad_given
                continue
            present_mask = np.fromiter((v is not None for v in vals), bool, n)
            b, a = _bad_numbers([v for v in vals if v is not None], spec)
            bad[present_mask] |= b
            out = np.full(n, np.nan)
            out[present_mask] = a
            convert[spec.name] = out
        else:
            b, nums[spec.name] = _bad_numbers(vals, spec, types)
            bad |= b
            if types != {want}:
                convert[spec.name] = nums[spec.name]
    for name, allowed in (("entity", {_NONE, str}), ("priority", {_NONE, bool}), ("job_type", {_NONE, str})):
        if name not in present:
            continue
        vals = column(name)
        types = set(map(type, vals))
        if not types <= allowed or (name == "job_type" and "" in vals):
            bad |= np.fromiter((type(v) not in allowed or v == "" and name == "job_type" for v in vals), bool, n)
        if name == "priority" and _NONE in types:
            fixes[name] = [v is True for v in vals]
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        _job_from_raw(i, raw_jobs[i])  # raises with the field's name
        raise InputError(f"jobs[{i}]", raw_jobs[i], "invalid job")  # pragma: no cover - the rules agree

    for name, a in convert.items():
        if _JOB_SPECS[name].type == "integer":
            fixes[name] = a.astype(np.int64).tolist()
        elif _JOB_SPECS[name].default is None:
            fixes[name] = [None if math.isnan(v) else v for v in a.tolist()]
        else:
            fixes[name] = a.tolist()
    thr = list(map(dict, thr)) if float_only else [{k: float(v) for k, v in t.items()} for t in thr]
    attrs = [{**_JOB_DEFAULTS, **r, "throughputs": t} for r, t in zip(rows, thr)]
    for name, values in fixes.items():
        _set_column(attrs, name, values)
    return ParsedJobs(_jobs_from_attrs(attrs), ids, configs, columns, nums["scale_factor"], nums["weight"],
                       nums["steps_remaining"], nums["time_since_start"])
