"""Data model: cluster, jobs, colocated (space-sharing) throughputs, entities.

A :class:`Problem` is what every policy takes. It is immutable in spirit (dataclasses with
validation in ``__post_init__``) and converts to and from the interchange JSON documented in
``docs/schema.md``. The records it holds (worker types, jobs, colocations, entities) are defined
in :mod:`policyopt.problem_records` and importable from here.

Units: throughputs are steps/s of the *whole* job when it holds ``scale_factor`` workers of the
type (0 means it cannot run there); ``steps_remaining`` in steps; ``time_since_start`` and
``slo_seconds`` in seconds; ``price_per_hour`` in dollars per worker-hour.

Placement variants: a job's ``throughputs`` may name ``<type>_unconsolidated`` (e.g.
``v100_unconsolidated``): the throughput when its workers are spread over several servers. Such a
*configuration* shares capacity with the physical type ``<type>``.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from itertools import repeat
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Mapping, Sequence

from .errors import InputError, UnknownNameError
from .extensions import problem_parser
from .problem_records import (_JOB_SPECS, _THROUGHPUT_SPEC, _WT_SPECS, UNCONSOLIDATED_SUFFIX, Cluster, Colocation,
                              Entity, Job, JobChanges, ProblemArrays, TypeColocation, WorkerType, _bad_array,
                              _check_number, _check_spec, _config_order, _gc_paused, _job_by_index, _nan_to_none,
                              _reject_unknown_keys, physical_type)
from .schema import (COLOCATED_FIELDS, COLOCATED_TYPE_FIELDS, ENTITY_FIELDS, PROBLEM_SECTIONS)

if TYPE_CHECKING:
    import numpy as np

__all__ = [
    "UNCONSOLIDATED_SUFFIX",
    "WorkerType",
    "Cluster",
    "Job",
    "Colocation",
    "TypeColocation",
    "Entity",
    "Problem",
    "JobChanges",
    "physical_type",
    "problem_from_any",
]

@dataclass(frozen=True)
class Problem:
    """Cluster + jobs (+ colocated throughputs, entities): the input of every policy.

    ``colocated`` lists pairs of jobs; ``colocated_types`` lists pairs of job types (see
    :class:`TypeColocation`), used for jobs that carry a ``job_type``.
    """

    cluster: Cluster
    jobs: tuple[Job, ...]
    colocated: tuple[Colocation, ...] = ()
    entities: Mapping[str, Entity] = field(default_factory=dict)
    colocated_types: tuple[TypeColocation, ...] = ()
    #: the columnar view; parsers that validated the jobs column-wise hand it in (else built here)
    _arrays: ProblemArrays | None = field(default=None, repr=False, compare=False, kw_only=True)
    #: how :attr:`jobs` was made from another problem's (:meth:`with_jobs`); used only while it is
    #: for this problem's own ``jobs`` (:attr:`job_changes`)
    _changes: JobChanges | None = field(default=None, repr=False, compare=False, kw_only=True)

    def __post_init__(self) -> None:
        import numpy as np

        jobs = tuple(self.jobs)
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "colocated", tuple(self.colocated))
        object.__setattr__(self, "colocated_types", tuple(self.colocated_types))
        object.__setattr__(self, "entities", dict(self.entities))
        if self._changes is not None and self._changes.jobs is not jobs:
            object.__setattr__(self, "_changes", None)  # (another problem's jobs: dataclasses.replace)
        ids = list(map(attrgetter("id"), jobs))
        seen = set(ids)
        if len(seen) != len(ids):
            first: set[str] = set()
            for i in ids:
                if i in first:
                    raise InputError("jobs[].id", i, "duplicate job id")
                first.add(i)
        # column-wise: configurations, T[job, config], which jobs fit somewhere (no per-job loop)
        names = self.cluster.names
        known = set(names)
        counts = self.cluster.counts
        n = len(jobs)
        arrays = self._arrays
        if arrays is not None and (arrays.source is not jobs or arrays.configs[:len(names)] != names):
            arrays = None  # handed in for other jobs or another cluster (dataclasses.replace)
        if arrays is None:
            used = set().union(*(j.throughputs for j in jobs)) if jobs else set()
            configs = _config_order(used, names, jobs)
            T = np.zeros((n, len(configs)))
            for k, cfg in enumerate(configs):
                if cfg in used:
                    T[:, k] = [j.throughputs.get(cfg, 0.0) for j in jobs]

            def col(attr: str) -> "np.ndarray":
                return np.fromiter((getattr(j, attr) for j in jobs), float, n)

            ids_arr = np.array(ids, dtype=str) if n else np.zeros(0, dtype=str)
            arrays = ProblemArrays(configs, ids_arr, T, col("scale_factor"), col("weight"), col("steps_remaining"),
                                   col("time_since_start"), jobs)
            object.__setattr__(self, "_arrays", arrays)
        configs, T, scale = arrays.configs, arrays.T, arrays.scale
        cap = np.array([counts[physical_type(c)] for c in configs], dtype=float)
        fits = ((T > 0) & (scale[:, None] <= cap[None, :])).any(axis=1) if n else np.ones(0, bool)
        if not fits.all():
            j = jobs[int(np.flatnonzero(~fits)[0])]
            raise InputError(
                f"jobs[{j.id}]", {"scale_factor": j.scale_factor, "throughputs": dict(j.throughputs)},
                "the job fits no worker type (zero throughput everywhere, or more workers than any "
                "type it can run on has)")
        if self.entities:
            stray = {j.entity for j in jobs} - set(self.entities) - {None}
            if stray:
                j = next(j for j in jobs if j.entity in stray)
                raise UnknownNameError(f"jobs[{j.id}].entity", j.entity, self.entities)
        pairs_seen: set[tuple[str, str, str]] = set()
        for c in self.colocated:
            for k, jid in enumerate(c.jobs):
                if jid not in seen:
                    raise UnknownNameError(f"colocated[{'|'.join(c.jobs)}].jobs[{k}]", jid, seen)
            if physical_type(c.worker_type) not in known:
                raise UnknownNameError(f"colocated[{'|'.join(c.jobs)}].worker_type", c.worker_type, known)
            key = (min(c.jobs), max(c.jobs), c.worker_type)
            if key in pairs_seen:
                raise InputError(f"colocated[{'|'.join(c.jobs)}@{c.worker_type}]", list(c.jobs),
                                 "duplicate colocation entry")
            pairs_seen.add(key)
        types_seen: set[tuple[str, str, str]] = set()
        for tc in self.colocated_types:
            f = f"colocated_types[{'|'.join(tc.job_types)}@{tc.worker_type}]"
            if physical_type(tc.worker_type) not in known:
                raise UnknownNameError(f"{f}.worker_type", tc.worker_type, known)
            tkey = (min(tc.job_types), max(tc.job_types), tc.worker_type)
            if tkey in types_seen:
                raise InputError(f, list(tc.job_types), "duplicate type colocation entry")
            types_seen.add(tkey)


    @property
    def arrays(self) -> ProblemArrays:
        """The columnar view (``T`` is jobs × :attr:`configurations`)."""
        assert self._arrays is not None
        return self._arrays

    # ----------------------------------------------------------------------------- accessors
    @property
    def job_ids(self) -> list[str]:
        return [j.id for j in self.jobs]

    def job(self, job_id: str) -> Job:
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise UnknownNameError("job", job_id, self.job_ids)

    @property
    def configurations(self) -> list[str]:
        """Configuration names in column order: physical types, then placement variants used by jobs."""
        return list(self.arrays.configs)

    @property
    def job_changes(self) -> JobChanges | None:
        """How this problem's jobs were made from another problem's (:meth:`with_jobs`: the common
        ends of the two job tuples, :class:`~policyopt.problem_records.JobChanges`), or ``None``:
        a problem made otherwise, or one whose ``jobs`` were replaced since."""
        ch = self._changes
        return ch if ch is not None and ch.jobs is self.jobs else None

    def with_jobs(self, jobs: Iterable[Job], colocated: Iterable[Colocation] | None = None,
                  cluster: Cluster | None = None) -> "Problem":
        """A copy with other jobs (colocations restricted to those jobs unless given). It records
        which of its jobs are this problem's at the same place from either end
        (:attr:`job_changes`), so a policy that solved this problem re-solves the copy from the
        changed positions only."""
        jobs = tuple(jobs)
        ids = {j.id for j in jobs}
        if colocated is None:
            colocated = [c for c in self.colocated if c.jobs[0] in ids and c.jobs[1] in ids]
        return Problem(cluster or self.cluster, jobs, tuple(colocated), self.entities, self.colocated_types,
                       _changes=JobChanges(self.jobs, jobs))

    def __getstate__(self) -> dict[str, Any]:
        """The state without the record of :meth:`with_jobs` (identities: meaningless in a copy)."""
        state = dict(self.__dict__)
        state.pop("_changes", None)
        return state

    # ----------------------------------------------------------------------------- interchange JSON
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Problem":
        """Parse the interchange format (see ``docs/schema.md``); every error names its field by its
        JSON path (``jobs[3].throughputs.v100``: the fourth job of the list)."""
        if not isinstance(data, Mapping):
            raise InputError("(root)", type(data).__name__, "the problem must be a JSON object")
        # sections of registered problem kinds (reconfig) are skipped: an extended problem parses as a plain one
        _reject_unknown_keys("", {k: v for k, v in data.items() if not (k not in CORE_PROBLEM_KEYS
                                                                        and _is_extension_key(k))}, CORE_PROBLEM_KEYS)
        for key in ("cluster", "jobs"):
            if key not in data:
                raise InputError(key, None, "is required")
        cl = data.get("cluster")
        if not isinstance(cl, Mapping) or not isinstance(cl.get("worker_types"), Mapping):
            raise InputError("cluster.worker_types", cl, "must be an object {name: {count, ...}}")
        _reject_unknown_keys("cluster", cl, {"worker_types"})
        wts = []
        for name, spec in cl["worker_types"].items():
            if isinstance(spec, (int, float)) and not isinstance(spec, bool):
                spec = {"count": spec}
            if not isinstance(spec, Mapping):
                raise InputError(f"cluster.worker_types.{name}", spec, "must be an object with 'count'")
            _reject_unknown_keys(f"cluster.worker_types.{name}", spec, set(_WT_SPECS))
            if "count" not in spec:
                raise InputError(f"cluster.worker_types.{name}.count", None, "is required")
            wts.append(WorkerType(str(name), spec["count"], spec.get("gpus_per_server"), spec.get("price_per_hour")))
        cluster = Cluster(tuple(wts))
        raw_jobs = data.get("jobs")
        if not isinstance(raw_jobs, Sequence) or isinstance(raw_jobs, (str, bytes)):
            raise InputError("jobs", raw_jobs, "must be a list of job objects")
        from ._job_columns import parse_jobs

        with _gc_paused():  # tens of thousands of new containers: no collection passes midway
            parsed = parse_jobs(raw_jobs)
        jobs = tuple(parsed.jobs)
        import numpy as np

        try:
            configs = _config_order(set(parsed.configs), cluster.names, jobs)
        except InputError as exc:
            raise _job_by_index(exc, jobs) from None
        T = np.zeros((len(jobs), len(configs)))
        for k, c in enumerate(configs):
            if c in parsed.columns:
                T[:, k] = parsed.columns[c]
        arrays = ProblemArrays(configs, np.array(parsed.ids, dtype=str) if jobs else np.zeros(0, dtype=str),
                               T, parsed.scale, parsed.weight, parsed.steps, parsed.time_since_start, jobs)
        colocs = []
        for i, rc in enumerate(data.get("colocated") or []):
            if not isinstance(rc, Mapping):
                raise InputError(f"colocated[{i}]", rc, "must be an object")
            _reject_unknown_keys(f"colocated[{i}]", rc, {f.name for f in COLOCATED_FIELDS})
            for key in ("jobs", "worker_type", "throughputs"):
                if key not in rc:
                    raise InputError(f"colocated[{i}].{key}", None, "is required")
            if not isinstance(rc["jobs"], Sequence) or isinstance(rc["jobs"], str) or len(rc["jobs"]) != 2:
                raise InputError(f"colocated[{i}].jobs", rc["jobs"], "must list exactly two job ids")
            if not isinstance(rc["throughputs"], Sequence) or len(rc["throughputs"]) != 2:
                raise InputError(f"colocated[{i}].throughputs", rc["throughputs"], "must list two throughputs")
            colocs.append(Colocation((str(rc["jobs"][0]), str(rc["jobs"][1])), str(rc["worker_type"]),
                                     tuple(rc["throughputs"])))
        type_colocs = []
        raw_types = data.get("colocated_types") or []
        if not isinstance(raw_types, Sequence) or isinstance(raw_types, (str, bytes)):
            raise InputError("colocated_types", raw_types, "must be a list of objects")
        for i, rc in enumerate(raw_types):
            if not isinstance(rc, Mapping):
                raise InputError(f"colocated_types[{i}]", rc, "must be an object")
            _reject_unknown_keys(f"colocated_types[{i}]", rc, {f.name for f in COLOCATED_TYPE_FIELDS})
            for key in ("job_types", "worker_type", "throughputs"):
                if key not in rc:
                    raise InputError(f"colocated_types[{i}].{key}", None, "is required")
            jt = rc["job_types"]
            if not isinstance(jt, Sequence) or isinstance(jt, str) or len(jt) != 2:
                raise InputError(f"colocated_types[{i}].job_types", jt, "must list exactly two job types")
            thr = rc["throughputs"]
            if not isinstance(thr, Sequence) or isinstance(thr, str) or len(thr) != 2:
                raise InputError(f"colocated_types[{i}].throughputs", thr, "must list two throughputs")
            type_colocs.append(TypeColocation((str(jt[0]), str(jt[1])), str(rc["worker_type"]), tuple(thr)))
        ents = {}
        raw_ents = data.get("entities") or {}
        if not isinstance(raw_ents, Mapping):
            raise InputError("entities", raw_ents, "must be an object {name: {weight, policy}}")
        for name, spec in raw_ents.items():
            if not isinstance(spec, Mapping):
                raise InputError(f"entities.{name}", spec, "must be an object")
            _reject_unknown_keys(f"entities.{name}", spec, {f.name for f in ENTITY_FIELDS})
            ents[str(name)] = Entity(str(name), spec.get("weight", 1.0), spec.get("policy", "fairness"))
        try:
            return cls(cluster, jobs, tuple(colocs), ents, tuple(type_colocs), _arrays=arrays)
        except InputError as exc:  # cross-checks name jobs by id: name them by their place in the list
            raise _job_by_index(exc, jobs) from None

    @classmethod
    def from_arrays(cls, cluster: Cluster, ids: Sequence[Any], throughputs: Any, configs: Sequence[str] | None = None,
                    *, scale_factor: Any = None, weight: Any = None, steps_remaining: Any = None,
                    time_since_start: Any = None, slo_seconds: Any = None, arrival: Any = None,
                    isolated_time: Any = None, entity: Sequence[str | None] | None = None, priority: Any = None,
                    job_type: Sequence[str | None] | None = None, colocated: Iterable[Colocation] = (),
                    entities: Mapping[str, Entity] | None = None,
                    colocated_types: Iterable[TypeColocation] = ()) -> "Problem":
        """Build a problem from columns (the fast path for embedders: no per-job dicts to validate).

        ``throughputs``: array ``n × len(configs)`` of steps/s, ``T[i, k]`` for job ``ids[i]`` on
        configuration ``configs[k]`` (default: the cluster's worker types in order); numeric columns
        are length-``n`` arrays (``slo_seconds``/``arrival`` may hold NaN for "none"); each column
        is checked once with numpy against the rules of :data:`policyopt.schema.JOB_FIELDS`, and
        an error names the first bad job (``jobs[<id>].<field>``)."""
        import numpy as np

        from ._job_columns import jobs_from_columns

        configs = list(cluster.names if configs is None else configs)
        ids = list(ids)
        if set(map(type, ids)) != {str}:
            ids = [str(i) if isinstance(i, (int, np.integer)) and not isinstance(i, bool) else i for i in ids]
        n = len(ids)
        T = np.asarray(throughputs, dtype=float)
        if T.shape != (n, len(configs)):
            raise InputError("throughputs", list(T.shape), f"must be an array of shape ({n}, {len(configs)}) "
                                                           "(jobs × configurations)")

        def column(name: str, values: Any) -> Any:
            spec = _JOB_SPECS[name]
            if values is None:
                return None
            a = np.asarray(values, dtype=float).reshape(-1)
            if a.shape != (n,):
                raise InputError(name, list(np.shape(values)), f"must hold one value per job ({n})")
            nullable = spec.default is None
            check = a[~np.isnan(a)] if nullable else a
            where = np.flatnonzero(~np.isnan(a)) if nullable else np.arange(n)
            bad = _bad_array(check, spec)
            if bad.any():
                i = int(where[np.flatnonzero(bad)[0]])
                _check_spec(f"jobs[{ids[i]}].{name}", float(a[i]), spec)
            return a

        if (set(map(type, ids)) != {str} or "" in ids) and any(not isinstance(i, str) or not i for i in ids):
            bad_id = next(i for i in ids if not isinstance(i, str) or not i)
            raise InputError("jobs[].id", bad_id, "job ids must be non-empty strings")
        bad_t = _bad_array(T.ravel(), _THROUGHPUT_SPEC)
        if bad_t.any():
            i, k = divmod(int(np.flatnonzero(bad_t)[0]), len(configs))
            _check_number(f"jobs[{ids[i]}].throughputs.{configs[k]}", float(T[i, k]))
        cols = {name: column(name, v) for name, v in (
            ("scale_factor", scale_factor), ("weight", weight), ("steps_remaining", steps_remaining),
            ("time_since_start", time_since_start), ("slo_seconds", slo_seconds), ("arrival", arrival),
            ("isolated_time", isolated_time))}

        def values(name: str) -> list[Any] | None:
            spec = _JOB_SPECS[name]
            a = cols[name]
            if a is None:
                return None
            if spec.type == "integer":
                return a.astype(np.int64).tolist()
            return [None if math.isnan(v) else v for v in a.tolist()] if spec.default is None else a.tolist()

        def strings(name: str, given: Sequence[Any] | None, empty_ok: bool) -> list[Any] | None:
            if given is None:
                return None
            out = list(given)
            if len(out) != n:
                raise InputError(name, len(out), f"must hold one value per job ({n})")
            for i, v in enumerate(out):
                if v is not None and (not isinstance(v, str) or (not v and not empty_ok)):
                    raise InputError(f"jobs[{ids[i]}].{name}", v, "must be a non-empty string or null")
            return out

        columns: dict[str, list[Any] | None] = {name: values(name) for name in cols}
        if priority is not None and np.shape(priority) != (n,):
            raise InputError("priority", list(np.shape(priority)), f"must hold one value per job ({n})")
        columns["priority"] = None if priority is None else np.asarray(priority, dtype=bool).tolist()
        columns["entity"], columns["job_type"] = strings("entity", entity, True), strings("job_type", job_type, False)
        columns["id"] = ids
        with _gc_paused():
            columns["throughputs"] = list(map(dict, map(zip, repeat(configs), T.tolist())))
            jobs_t = tuple(jobs_from_columns(columns))
        order = _config_order(set(configs), cluster.names, jobs_t)
        full = np.zeros((n, len(order)))
        where = {c: k for k, c in enumerate(configs)}
        for k, c in enumerate(order):
            if c in where:
                full[:, k] = T[:, where[c]]

        def floats(name: str) -> "np.ndarray":
            a = cols[name]
            return np.full(n, float(_JOB_SPECS[name].default)) if a is None else a

        arrays = ProblemArrays(order, np.array(ids, dtype=str) if n else np.zeros(0, dtype=str), full,
                               floats("scale_factor"), floats("weight"), floats("steps_remaining"),
                               floats("time_since_start"), jobs_t)
        return cls(cluster, jobs_t, tuple(colocated), dict(entities or {}), tuple(colocated_types), _arrays=arrays)

    def to_dict(self) -> dict[str, Any]:
        """The interchange JSON object (round-trips through :meth:`from_dict`)."""
        wts: dict[str, Any] = {}
        for w in self.cluster.worker_types:
            spec: dict[str, Any] = {"count": w.count}
            if w.gpus_per_server is not None:
                spec["gpus_per_server"] = w.gpus_per_server
            if w.price_per_hour is not None:
                spec["price_per_hour"] = w.price_per_hour
            wts[w.name] = spec
        jobs = []
        for j in self.jobs:
            d: dict[str, Any] = {"id": j.id, "throughputs": dict(j.throughputs), "scale_factor": j.scale_factor,
                                 "weight": j.weight, "steps_remaining": j.steps_remaining,
                                 "time_since_start": j.time_since_start, "entity": j.entity,
                                 "slo_seconds": j.slo_seconds}
            if j.arrival is not None:
                d["arrival"] = j.arrival
            if j.priority:
                d["priority"] = True
            if j.job_type is not None:
                d["job_type"] = j.job_type
            if j.isolated_time is not None:
                d["isolated_time"] = j.isolated_time
            jobs.append(d)
        out: dict[str, Any] = {"cluster": {"worker_types": wts}, "jobs": jobs}
        if self.colocated:
            out["colocated"] = [{"jobs": list(c.jobs), "worker_type": c.worker_type,
                                 "throughputs": list(c.throughputs)} for c in self.colocated]
        if self.colocated_types:
            out["colocated_types"] = [{"job_types": list(c.job_types), "worker_type": c.worker_type,
                                       "throughputs": list(c.throughputs)} for c in self.colocated_types]
        if self.entities:
            out["entities"] = {n: {"weight": e.weight, "policy": e.policy} for n, e in self.entities.items()}
        return out

    @classmethod
    def from_json(cls, text_or_path: str | Path) -> "Problem":
        """Load from a JSON string or a path to a JSON file. Malformed JSON raises ``InputError``."""
        from . import json_input

        if isinstance(text_or_path, Path) or not str(text_or_path).lstrip().startswith("{"):
            data = json_input.read(text_or_path, "input")
        else:
            data = json_input.loads(str(text_or_path), "(string)")
        if cls is Problem:
            return problem_from_any(data)
        return cls.from_dict(data)

    def to_json(self, path: str | Path | None = None, indent: int | None = 2) -> str:
        text = json.dumps(self.to_dict(), indent=indent)
        if path is not None:
            Path(path).write_text(text)
        return text

    # ----------------------------------------------------------------------------- DataFrames
    @classmethod
    def from_dataframes(cls, cluster: Any, jobs: Any, colocated: Any | None = None,
                        entities: Mapping[str, Mapping[str, Any]] | None = None) -> "Problem":
        """Build from pandas DataFrames.

        ``cluster``: rows per worker type with columns ``worker_type, count`` (+ ``gpus_per_server``,
        ``price_per_hour``). ``jobs``: one row per job with ``id`` and one ``throughput_<config>``
        column per configuration (+ the optional job fields as columns). ``colocated``: columns
        ``job_a, job_b, worker_type, throughput_a, throughput_b``.
        """
        import pandas as pd

        def records(df: Any, name: str, required: set[str]) -> list[dict[str, Any]]:
            if not isinstance(df, pd.DataFrame):
                raise InputError(name, type(df).__name__, "must be a pandas DataFrame")
            missing = required - set(df.columns)
            if missing:
                raise InputError(f"{name}.columns", sorted(df.columns), f"missing columns {sorted(missing)}")
            return df.to_dict("records")

        wts = {}
        for r in records(cluster, "cluster", {"worker_type", "count"}):
            spec = {"count": _nan_to_none(r["count"])}
            for k in ("gpus_per_server", "price_per_hour"):
                if k in r and _nan_to_none(r[k]) is not None:
                    spec[k] = _nan_to_none(r[k])
            wts[str(r["worker_type"])] = spec
        thr_cols = ([c for c in jobs.columns if str(c).startswith("throughput_")]
                    if isinstance(jobs, pd.DataFrame) else [])
        job_list = []
        for r in records(jobs, "jobs", {"id"}):
            d: dict[str, Any] = {"id": str(r["id"]),
                                 "throughputs": {c[len("throughput_"):]: r[c] for c in thr_cols
                                                 if _nan_to_none(r[c]) is not None}}
            for k in ("scale_factor", "weight", "steps_remaining", "time_since_start", "entity",
                      "slo_seconds", "arrival", "priority", "job_type", "isolated_time"):
                if k in r and _nan_to_none(r[k]) is not None:
                    d[k] = r[k].item() if hasattr(r[k], "item") else r[k]
            job_list.append(d)
        coloc = []
        if colocated is not None:
            for r in records(colocated, "colocated", {"job_a", "job_b", "worker_type", "throughput_a", "throughput_b"}):
                coloc.append({"jobs": [str(r["job_a"]), str(r["job_b"])], "worker_type": str(r["worker_type"]),
                              "throughputs": [r["throughput_a"], r["throughput_b"]]})
        return cls.from_dict({"cluster": {"worker_types": wts}, "jobs": job_list, "colocated": coloc,
                              "entities": dict(entities or {})})

    def jobs_frame(self) -> Any:
        """Jobs as a pandas DataFrame (one ``throughput_<config>`` column per configuration)."""
        import pandas as pd

        rows = []
        for j in self.jobs:
            r: dict[str, Any] = {"id": j.id, "scale_factor": j.scale_factor, "weight": j.weight,
                                 "steps_remaining": j.steps_remaining, "time_since_start": j.time_since_start,
                                 "entity": j.entity, "slo_seconds": j.slo_seconds}
            if j.job_type is not None:
                r["job_type"] = j.job_type
            r.update({f"throughput_{c}": t for c, t in j.throughputs.items()})
            rows.append(r)
        return pd.DataFrame(rows)


#: the top-level keys of a core problem (:data:`policyopt.schema.PROBLEM_SECTIONS`); any other key is
#: looked up among the registered problem kinds
CORE_PROBLEM_KEYS = frozenset(PROBLEM_SECTIONS)


def _is_extension_key(key: Any) -> bool:
    """``key`` is the top-level key of a registered problem kind (e.g. ``reconfig``)."""
    return isinstance(key, str) and problem_parser({key: None}, CORE_PROBLEM_KEYS) is not None


def problem_from_any(data: Mapping[str, Any]) -> "Problem":
    """Parse an interchange problem, including its extensions: a top-level key registered with
    :func:`policyopt.extensions.register_problem_kind` routes the problem to that kind's parser
    (``"reconfig"``: execution-plan configurations, docs/reconfig.md, a ``ReconfigProblem``)."""
    parser = problem_parser(data, CORE_PROBLEM_KEYS) if isinstance(data, Mapping) else None
    return parser(data) if parser is not None else Problem.from_dict(data)
