"""Data model: cluster, jobs, colocated (space-sharing) throughputs, entities.

A :class:`Problem` is what every policy takes. It is immutable in spirit (dataclasses with
validation in ``__post_init__``) and converts to and from the interchange JSON documented in
``docs/schema.md``.

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
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from .errors import InputError, UnknownNameError
from .extensions import problem_parser

__all__ = [
    "UNCONSOLIDATED_SUFFIX",
    "WorkerType",
    "Cluster",
    "Job",
    "Colocation",
    "TypeColocation",
    "Entity",
    "Problem",
    "physical_type",
    "problem_from_any",
]

UNCONSOLIDATED_SUFFIX = "_unconsolidated"


def physical_type(config: str) -> str:
    """The physical worker type a configuration name runs on (``v100_unconsolidated`` → ``v100``)."""
    if config.endswith(UNCONSOLIDATED_SUFFIX):
        return config[: -len(UNCONSOLIDATED_SUFFIX)]
    return config


_MIN_MAGNITUDE = 1e-9
_MAX_MAGNITUDE = 1e15


def _check_number(field_: str, value: Any, *, minimum: float | None = 0.0, strict: bool = False,
                  integer: bool = False, allow_none: bool = False) -> Any:
    """Validate one scalar: finite, a number, above ``minimum`` (strictly if ``strict``)."""
    if value is None:
        if allow_none:
            return None
        raise InputError(field_, value, "a number is required")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        try:  # numpy scalars
            import numpy as np

            if isinstance(value, np.generic) and np.issubdtype(type(value), np.number):
                value = value.item()
            else:
                raise TypeError
        except TypeError:
            raise InputError(field_, value, "must be a number") from None
    if isinstance(value, float) and not math.isfinite(value):
        raise InputError(field_, value, "must be finite (NaN and infinity are not allowed)")
    if value != 0 and not (_MIN_MAGNITUDE <= abs(value) <= _MAX_MAGNITUDE):
        raise InputError(field_, value, f"magnitude must be 0 or within [{_MIN_MAGNITUDE:g}, {_MAX_MAGNITUDE:g}] "
                                        "(values this small or large break the numerics)")
    if integer and (not float(value).is_integer()):
        raise InputError(field_, value, "must be an integer")
    if minimum is not None:
        if strict and not value > minimum:
            raise InputError(field_, value, f"must be > {minimum:g}")
        if not strict and not value >= minimum:
            raise InputError(field_, value, f"must be >= {minimum:g}")
    return int(value) if integer else value


@dataclass(frozen=True)
class WorkerType:
    """An accelerator type: ``count`` workers (GPUs) in servers of ``gpus_per_server``."""

    name: str
    count: int
    gpus_per_server: int | None = None
    price_per_hour: float | None = None

    def __post_init__(self) -> None:
        f = f"cluster.worker_types.{self.name}"
        if not isinstance(self.name, str) or not self.name:
            raise InputError("cluster.worker_types", self.name, "worker type names must be non-empty strings")
        if self.name.endswith(UNCONSOLIDATED_SUFFIX):
            raise InputError(f, self.name, f"physical worker types may not end in {UNCONSOLIDATED_SUFFIX!r}")
        object.__setattr__(self, "count", _check_number(f"{f}.count", self.count, integer=True))
        gps = _check_number(f"{f}.gpus_per_server", self.gpus_per_server, minimum=1, integer=True, allow_none=True)
        object.__setattr__(self, "gpus_per_server", gps)
        price = _check_number(f"{f}.price_per_hour", self.price_per_hour, allow_none=True)
        object.__setattr__(self, "price_per_hour", None if price is None else float(price))

    @property
    def servers(self) -> int:
        """Number of servers (the last one may be partly filled)."""
        gps = self.gpus_per_server or self.count or 1
        return -(-self.count // gps)


@dataclass(frozen=True)
class Cluster:
    """The worker types of a cluster, in a fixed order (the order of columns in allocations)."""

    worker_types: tuple[WorkerType, ...]

    def __post_init__(self) -> None:
        wts = tuple(self.worker_types)
        object.__setattr__(self, "worker_types", wts)
        if not wts:
            raise InputError("cluster.worker_types", {}, "a cluster needs at least one worker type")
        names = [w.name for w in wts]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise InputError("cluster.worker_types", dup, "duplicate worker type names")
        if sum(w.count for w in wts) == 0:
            raise InputError("cluster.worker_types", {w.name: w.count for w in wts},
                             "the cluster has zero workers in total")

    @classmethod
    def from_counts(cls, counts: Mapping[str, int], gpus_per_server: int | Mapping[str, int] | None = None,
                    prices: Mapping[str, float] | None = None) -> "Cluster":
        """``Cluster.from_counts({"v100": 4, "k80": 4})``."""
        def gps(n: str) -> int | None:
            return gpus_per_server.get(n) if isinstance(gpus_per_server, Mapping) else gpus_per_server
        return cls(tuple(WorkerType(n, c, gps(n), (prices or {}).get(n)) for n, c in counts.items()))

    @property
    def names(self) -> list[str]:
        return [w.name for w in self.worker_types]

    def __getitem__(self, name: str) -> WorkerType:
        for w in self.worker_types:
            if w.name == name:
                return w
        raise UnknownNameError("worker_type", name, self.names)

    @property
    def counts(self) -> dict[str, int]:
        return {w.name: w.count for w in self.worker_types}

    @property
    def total_workers(self) -> int:
        return sum(w.count for w in self.worker_types)


@dataclass(frozen=True)
class Job:
    """A training job.

    ``throughputs[config]``: steps/s of the whole job holding ``scale_factor`` workers of that
    configuration (a worker type, or ``<type>_unconsolidated``); missing or 0 = cannot run there.
    ``arrival`` orders jobs for FIFO-style policies (defaults to the order in the problem).
    ``job_type`` (optional) names the job's kind (e.g. ``"ResNet-50 (batch size 64)#1"``): a problem's
    ``colocated_types`` table gives space-sharing throughputs per pair of job *types*, which
    scales to thousands of jobs without one entry per pair of jobs.
    """

    id: str
    throughputs: Mapping[str, float]
    scale_factor: int = 1
    weight: float = 1.0
    steps_remaining: float = 1.0
    time_since_start: float = 0.0
    entity: str | None = None
    slo_seconds: float | None = None
    arrival: float | None = None
    priority: bool = False  # high priority / deadline-bound: never packed with another job
    job_type: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InputError("jobs[].id", self.id, "job ids must be non-empty strings")
        f = f"jobs[{self.id}]"
        if not isinstance(self.throughputs, Mapping):
            raise InputError(f"{f}.throughputs", self.throughputs, "must be an object {worker_type: steps/s}")
        thr = {str(k): float(_check_number(f"{f}.throughputs.{k}", v)) for k, v in self.throughputs.items()}
        object.__setattr__(self, "throughputs", thr)
        object.__setattr__(self, "scale_factor",
                           _check_number(f"{f}.scale_factor", self.scale_factor, minimum=1, integer=True))
        object.__setattr__(self, "weight", float(_check_number(f"{f}.weight", self.weight, strict=True)))
        object.__setattr__(self, "steps_remaining",
                           float(_check_number(f"{f}.steps_remaining", self.steps_remaining)))
        object.__setattr__(self, "time_since_start",
                           float(_check_number(f"{f}.time_since_start", self.time_since_start)))
        slo = _check_number(f"{f}.slo_seconds", self.slo_seconds, strict=True, allow_none=True)
        object.__setattr__(self, "slo_seconds", None if slo is None else float(slo))
        arr = _check_number(f"{f}.arrival", self.arrival, minimum=None, allow_none=True)
        object.__setattr__(self, "arrival", None if arr is None else float(arr))
        if self.entity is not None and not isinstance(self.entity, str):
            raise InputError(f"{f}.entity", self.entity, "must be a string or null")
        if self.job_type is not None and (not isinstance(self.job_type, str) or not self.job_type):
            raise InputError(f"{f}.job_type", self.job_type, "must be a non-empty string or null")


@dataclass(frozen=True)
class Colocation:
    """Two jobs sharing ``scale_factor`` workers of ``worker_type``: their throughputs while paired."""

    jobs: tuple[str, str]
    worker_type: str
    throughputs: tuple[float, float]

    def __post_init__(self) -> None:
        jobs = tuple(str(j) for j in self.jobs)
        f = f"colocated[{'|'.join(jobs)}@{self.worker_type}]"
        if len(jobs) != 2 or jobs[0] == jobs[1]:
            raise InputError(f"{f}.jobs", list(self.jobs), "a colocation names exactly two distinct jobs")
        thr = tuple(float(_check_number(f"{f}.throughputs[{i}]", v)) for i, v in enumerate(self.throughputs))
        if len(thr) != 2:
            raise InputError(f"{f}.throughputs", list(self.throughputs), "must hold two throughputs")
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "throughputs", thr)


@dataclass(frozen=True)
class TypeColocation:
    """Space sharing at the level of job *types*: any job of type ``job_types[0]`` paired with any
    job of type ``job_types[1]`` on ``worker_type`` runs at ``throughputs`` (in that order).

    Equivalent to one :class:`Colocation` per pair of such jobs, but stored once per pair of types;
    :class:`~policyopt.allocation.AllocationSpace` expands it vectorized (with pruning). The two
    types may be equal (two jobs of the same kind sharing). An explicit :class:`Colocation` for a
    pair of jobs takes precedence over the table.
    """

    job_types: tuple[str, str]
    worker_type: str
    throughputs: tuple[float, float]

    def __post_init__(self) -> None:
        types = tuple(self.job_types) if isinstance(self.job_types, (list, tuple)) else (self.job_types,)
        f = f"colocated_types[{'|'.join(map(str, types))}@{self.worker_type}]"
        if len(types) != 2 or not all(isinstance(t, str) and t for t in types):
            raise InputError(f"{f}.job_types", list(types), "must name exactly two job types (strings)")
        if not isinstance(self.worker_type, str) or not self.worker_type:
            raise InputError(f"{f}.worker_type", self.worker_type, "must be a worker type name")
        raw = tuple(self.throughputs) if isinstance(self.throughputs, (list, tuple)) else (self.throughputs,)
        if len(raw) != 2:
            raise InputError(f"{f}.throughputs", list(raw), "must hold two throughputs")
        thr = tuple(float(_check_number(f"{f}.throughputs[{i}]", v)) for i, v in enumerate(raw))
        object.__setattr__(self, "job_types", types)
        object.__setattr__(self, "throughputs", thr)


@dataclass(frozen=True)
class Entity:
    """A tenant: its share ``weight`` and how its jobs share its part (``fairness`` or ``fifo``)."""

    name: str
    weight: float = 1.0
    policy: str = "fairness"

    def __post_init__(self) -> None:
        f = f"entities.{self.name}"
        object.__setattr__(self, "weight", float(_check_number(f"{f}.weight", self.weight, strict=True)))
        if self.policy not in ("fairness", "fifo"):
            raise InputError(f"{f}.policy", self.policy, "must be 'fairness' or 'fifo'")


@dataclass(frozen=True)
class ProblemArrays:
    """Columnar view of a problem's jobs (built once, with the problem): ``T[job, config]`` etc."""

    configs: list[str]
    ids: "np.ndarray"
    T: "np.ndarray"
    scale: "np.ndarray"
    weights: "np.ndarray"
    steps: "np.ndarray"
    time_since_start: "np.ndarray"


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
    _arrays: ProblemArrays | None = field(default=None, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        jobs = tuple(self.jobs)
        object.__setattr__(self, "jobs", jobs)
        object.__setattr__(self, "colocated", tuple(self.colocated))
        object.__setattr__(self, "colocated_types", tuple(self.colocated_types))
        object.__setattr__(self, "entities", dict(self.entities))
        ids = [j.id for j in jobs]
        seen: set[str] = set()
        for i in ids:
            if i in seen:
                raise InputError("jobs[].id", i, "duplicate job id")
            seen.add(i)
        known = set(self.cluster.names)
        counts = self.cluster.counts
        for j in jobs:
            fits = False
            for cfg, t in j.throughputs.items():
                base = physical_type(cfg)
                if base not in known:
                    raise UnknownNameError(f"jobs[{j.id}].throughputs", cfg, known)
                if t > 0 and j.scale_factor <= counts[base]:
                    fits = True
            if not fits:
                raise InputError(
                    f"jobs[{j.id}]", {"scale_factor": j.scale_factor, "throughputs": dict(j.throughputs)},
                    "the job fits no worker type (zero throughput everywhere, or more workers than any "
                    "type it can run on has)")
            if j.entity is not None and self.entities and j.entity not in self.entities:
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
        object.__setattr__(self, "_arrays", self._build_arrays())

    def _build_arrays(self) -> ProblemArrays:
        import numpy as np

        names = self.cluster.names
        extra = sorted({c for j in self.jobs for c in j.throughputs if c not in names})
        configs = names + [c for c in extra if physical_type(c) in names]
        n = len(self.jobs)
        T = np.zeros((n, len(configs)))
        for k, c in enumerate(configs):
            T[:, k] = np.fromiter((j.throughputs.get(c, 0.0) for j in self.jobs), float, n)

        def col(attr: str) -> "np.ndarray":
            return np.fromiter((getattr(j, attr) for j in self.jobs), float, n)

        ids = np.array([j.id for j in self.jobs], dtype=str) if n else np.zeros(0, dtype=str)
        return ProblemArrays(configs, ids, T, col("scale_factor"), col("weight"), col("steps_remaining"),
                             col("time_since_start"))

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

    def with_jobs(self, jobs: Iterable[Job], colocated: Iterable[Colocation] | None = None,
                  cluster: Cluster | None = None) -> "Problem":
        """A copy with other jobs (colocations restricted to those jobs unless given)."""
        jobs = tuple(jobs)
        ids = {j.id for j in jobs}
        if colocated is None:
            colocated = [c for c in self.colocated if c.jobs[0] in ids and c.jobs[1] in ids]
        return Problem(cluster or self.cluster, jobs, tuple(colocated), self.entities, self.colocated_types)

    # ----------------------------------------------------------------------------- interchange JSON
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Problem":
        """Parse the interchange format (see ``docs/schema.md``); every error names its field."""
        if not isinstance(data, Mapping):
            raise InputError("(root)", type(data).__name__, "the problem must be a JSON object")
        cl = data.get("cluster")
        if not isinstance(cl, Mapping) or not isinstance(cl.get("worker_types"), Mapping):
            raise InputError("cluster.worker_types", cl, "must be an object {name: {count, ...}}")
        wts = []
        for name, spec in cl["worker_types"].items():
            if isinstance(spec, (int, float)) and not isinstance(spec, bool):
                spec = {"count": spec}
            if not isinstance(spec, Mapping):
                raise InputError(f"cluster.worker_types.{name}", spec, "must be an object with 'count'")
            _reject_unknown_keys(f"cluster.worker_types.{name}", spec,
                                 {"count", "gpus_per_server", "price_per_hour"})
            if "count" not in spec:
                raise InputError(f"cluster.worker_types.{name}.count", None, "is required")
            wts.append(WorkerType(str(name), spec["count"], spec.get("gpus_per_server"), spec.get("price_per_hour")))
        cluster = Cluster(tuple(wts))
        raw_jobs = data.get("jobs")
        if not isinstance(raw_jobs, Sequence) or isinstance(raw_jobs, (str, bytes)):
            raise InputError("jobs", raw_jobs, "must be a list of job objects")
        job_keys = {"id", "throughputs", "scale_factor", "weight", "steps_remaining", "time_since_start",
                    "entity", "slo_seconds", "arrival", "priority", "job_type"}
        jobs = []
        for i, rj in enumerate(raw_jobs):
            if not isinstance(rj, Mapping):
                raise InputError(f"jobs[{i}]", rj, "must be an object")
            _reject_unknown_keys(f"jobs[{i}]", rj, job_keys)
            if "id" not in rj:
                raise InputError(f"jobs[{i}].id", None, "is required")
            if "throughputs" not in rj:
                raise InputError(f"jobs[{i}].throughputs", None, "is required")
            jid = rj["id"]
            if isinstance(jid, (int, float)) and not isinstance(jid, bool):
                jid = str(jid)
            kw = {k: rj[k] for k in job_keys - {"id"} if k in rj and rj[k] is not None}
            if "priority" in kw and not isinstance(kw["priority"], bool):
                raise InputError(f"jobs[{i}].priority", kw["priority"], "must be true or false")
            jobs.append(Job(id=jid, **kw))
        colocs = []
        for i, rc in enumerate(data.get("colocated") or []):
            if not isinstance(rc, Mapping):
                raise InputError(f"colocated[{i}]", rc, "must be an object")
            _reject_unknown_keys(f"colocated[{i}]", rc, {"jobs", "worker_type", "throughputs"})
            for key in ("jobs", "worker_type", "throughputs"):
                if key not in rc:
                    raise InputError(f"colocated[{i}].{key}", None, "is required")
            if not isinstance(rc["jobs"], Sequence) or isinstance(rc["jobs"], str) or len(rc["jobs"]) != 2:
                raise InputError(f"colocated[{i}].jobs", rc["jobs"], "must list exactly two job ids")
            if not isinstance(rc["throughputs"], Sequence) or len(rc["throughputs"]) != 2:
                raise InputError(f"colocated[{i}].throughputs", rc["throughputs"], "must list two throughputs")
            colocs.append(Colocation(tuple(str(x) for x in rc["jobs"]), str(rc["worker_type"]),
                                     tuple(rc["throughputs"])))
        type_colocs = []
        raw_types = data.get("colocated_types") or []
        if not isinstance(raw_types, Sequence) or isinstance(raw_types, (str, bytes)):
            raise InputError("colocated_types", raw_types, "must be a list of objects")
        for i, rc in enumerate(raw_types):
            if not isinstance(rc, Mapping):
                raise InputError(f"colocated_types[{i}]", rc, "must be an object")
            _reject_unknown_keys(f"colocated_types[{i}]", rc, {"job_types", "worker_type", "throughputs"})
            for key in ("job_types", "worker_type", "throughputs"):
                if key not in rc:
                    raise InputError(f"colocated_types[{i}].{key}", None, "is required")
            jt = rc["job_types"]
            if not isinstance(jt, Sequence) or isinstance(jt, str) or len(jt) != 2:
                raise InputError(f"colocated_types[{i}].job_types", jt, "must list exactly two job types")
            thr = rc["throughputs"]
            if not isinstance(thr, Sequence) or isinstance(thr, str) or len(thr) != 2:
                raise InputError(f"colocated_types[{i}].throughputs", thr, "must list two throughputs")
            type_colocs.append(TypeColocation(tuple(str(x) for x in jt), str(rc["worker_type"]), tuple(thr)))
        ents = {}
        raw_ents = data.get("entities") or {}
        if not isinstance(raw_ents, Mapping):
            raise InputError("entities", raw_ents, "must be an object {name: {weight, policy}}")
        for name, spec in raw_ents.items():
            if not isinstance(spec, Mapping):
                raise InputError(f"entities.{name}", spec, "must be an object")
            _reject_unknown_keys(f"entities.{name}", spec, {"weight", "policy"})
            ents[str(name)] = Entity(str(name), spec.get("weight", 1.0), spec.get("policy", "fairness"))
        return cls(cluster, tuple(jobs), tuple(colocs), ents, tuple(type_colocs))

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
        text = str(text_or_path)
        source = "(string)"
        if isinstance(text_or_path, Path) or not text.lstrip().startswith("{"):
            path = Path(text_or_path)
            if not path.exists():
                raise InputError("input", str(path), "file not found")
            source, text = str(path), path.read_text()
        try:
            # NaN/Infinity parse to floats so the field check names the exact field they sit in
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise InputError(source, f"line {exc.lineno} column {exc.colno}", f"malformed JSON: {exc.msg}") from None
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
        thr_cols = [c for c in jobs.columns if str(c).startswith("throughput_")] if isinstance(jobs, pd.DataFrame) else []
        job_list = []
        for r in records(jobs, "jobs", {"id"}):
            d: dict[str, Any] = {"id": str(r["id"]),
                                 "throughputs": {c[len("throughput_"):]: r[c] for c in thr_cols
                                                 if _nan_to_none(r[c]) is not None}}
            for k in ("scale_factor", "weight", "steps_remaining", "time_since_start", "entity",
                      "slo_seconds", "arrival", "priority", "job_type"):
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


def _reject_unknown_keys(field_: str, obj: Mapping[str, Any], allowed: set[str]) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise InputError(f"{field_}.{unknown[0]}", obj[unknown[0]],
                         f"unknown field; allowed: {', '.join(sorted(allowed))}")


def _nan_to_none(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


#: the top-level keys of a core problem; any other key is looked up among the registered problem kinds
CORE_PROBLEM_KEYS = frozenset({"cluster", "jobs", "colocated", "colocated_types", "entities"})


def problem_from_any(data: Mapping[str, Any]) -> "Problem":
    """Parse an interchange problem, including its extensions: a top-level key registered with
    :func:`policyopt.extensions.register_problem_kind` routes the problem to that kind's parser
    (``"reconfig"``: execution-plan configurations, docs/reconfig.md, a ``ReconfigProblem``)."""
    parser = problem_parser(data, CORE_PROBLEM_KEYS) if isinstance(data, Mapping) else None
    return parser(data) if parser is not None else Problem.from_dict(data)
