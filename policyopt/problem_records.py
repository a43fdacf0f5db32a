"""The problem's records: worker types, the cluster, jobs, colocated throughputs, entities.

Validated dataclasses (each checks its fields in ``__post_init__`` and names a bad one by its
interchange path, e.g. ``jobs[a].throughputs.v100``) and the field-by-field parsing helpers that
:class:`policyopt.problem.Problem` and :mod:`policyopt._job_columns` share. Units as in
:mod:`policyopt.problem`.
"""
from __future__ import annotations

import gc
import math
from contextlib import contextmanager
from dataclasses import dataclass, field
from operator import is_
from typing import TYPE_CHECKING, Any, Iterator, Mapping, Sequence

from .errors import InputError, UnknownNameError, _short
from .schema import (JOB_FIELDS, MAGNITUDE,
                     WORKER_TYPE_FIELDS, FieldSpec, unknown_field_message)

if TYPE_CHECKING:
    import numpy as np

UNCONSOLIDATED_SUFFIX = "_unconsolidated"


def physical_type(config: str) -> str:
    """The physical worker type a configuration name runs on (``v100_unconsolidated`` → ``v100``)."""
    if config.endswith(UNCONSOLIDATED_SUFFIX):
        return config[: -len(UNCONSOLIDATED_SUFFIX)]
    return config


_MIN_MAGNITUDE, _MAX_MAGNITUDE = MAGNITUDE


def _check_number(field_: str, value: Any, *, minimum: float | None = 0.0, strict: bool = False,
                  integer: bool = False, allow_none: bool = False) -> Any:
    """Validate one scalar: finite, a number, above ``minimum`` (strictly if ``strict``), and 0 or
    of a magnitude within :data:`policyopt.schema.MAGNITUDE`."""
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


def _check_spec(field_: str, value: Any, spec: FieldSpec, allow_none: bool = False) -> Any:
    """Validate one value against its :class:`~policyopt.schema.FieldSpec` (numbers only)."""
    return _check_number(field_, value, minimum=spec.minimum, strict=spec.exclusive,
                         integer=spec.type == "integer", allow_none=allow_none)


_JOB_SPECS = {f.name: f for f in JOB_FIELDS}
_JOB_KEYS = frozenset(_JOB_SPECS)
_JOB_NUMBERS = tuple(f for f in JOB_FIELDS if f.type in ("integer", "number"))
_WT_SPECS = {f.name: f for f in WORKER_TYPE_FIELDS}


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
        object.__setattr__(self, "count", _check_spec(f"{f}.count", self.count, _WT_SPECS["count"]))
        gps = _check_spec(f"{f}.gpus_per_server", self.gpus_per_server, _WT_SPECS["gpus_per_server"], True)
        object.__setattr__(self, "gpus_per_server", gps)
        price = _check_spec(f"{f}.price_per_hour", self.price_per_hour, _WT_SPECS["price_per_hour"], True)
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
    #: seconds the job would have needed in isolation for the steps done so far (finish-time
    #: fairness; None: ``time_since_start``)
    isolated_time: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id:
            raise InputError("jobs[].id", self.id, "job ids must be non-empty strings")
        f = f"jobs[{self.id}]"
        if not isinstance(self.throughputs, Mapping):
            raise InputError(f"{f}.throughputs", self.throughputs, "must be an object {worker_type: steps/s}")
        thr = {str(k): float(_check_number(f"{f}.throughputs.{k}", v)) for k, v in self.throughputs.items()}
        object.__setattr__(self, "throughputs", thr)
        for spec in _JOB_NUMBERS:  # the rules of policyopt.schema.JOB_FIELDS
            value = _check_spec(f"{f}.{spec.name}", getattr(self, spec.name), spec, allow_none=spec.default is None)
            if value is not None and spec.type == "number":
                value = float(value)
            object.__setattr__(self, spec.name, value)
        if self.entity is not None and not isinstance(self.entity, str):
            raise InputError(f"{f}.entity", self.entity, "must be a string or null")
        if not isinstance(self.priority, bool):
            raise InputError(f"{f}.priority", self.priority, "must be true or false")
        if self.job_type is not None and (not isinstance(self.job_type, str) or not self.job_type):
            raise InputError(f"{f}.job_type", self.job_type, "must be a non-empty string or null")

    @classmethod
    def _unchecked(cls, values: dict[str, Any]) -> "Job":
        """A job from values already validated column-wise (:meth:`Problem.from_dict`,
        :meth:`Problem.from_arrays`): no per-field checks. ``values`` holds every field."""
        job = object.__new__(cls)
        object.__setattr__(job, "__dict__", values)
        return job


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
    #: the jobs tuple these arrays were built from (a handed-in view is used only for that tuple)
    source: tuple[Any, ...] | None = field(default=None, repr=False, compare=False)


class JobChanges:
    """How one job tuple was made from another (:meth:`Problem.with_jobs`): ``jobs[:prefix]`` equal
    ``source[:prefix]`` and the last ``suffix`` of ``jobs`` equal the last ``suffix`` of ``source``
    (equal jobs: the same objects, or equal in every field), with ``prefix, suffix ≤ min(len(jobs),
    len(source))`` and both that length where the tuples are equal. Each end is at least as long
    as the run of the same objects there, and the longest where the positions that hold other
    objects form one block (the usual change: jobs completed or arrived in one place). Found once
    here (:func:`_common_end`); tuples are immutable, so the record holds for as long as it
    exists. A problem uses it only while it is for its own ``jobs`` (:attr:`Problem.job_changes`):
    a re-solve that kept ``source`` (or a problem made from the same ``source``) reads the changed
    positions from it instead of comparing the job lists."""

    __slots__ = ("source", "jobs", "prefix", "suffix")

    source: tuple[Any, ...]
    jobs: tuple[Any, ...]
    prefix: int
    suffix: int

    def __init__(self, source: tuple[Any, ...], jobs: tuple[Any, ...]) -> None:
        n, S = len(jobs), len(source)
        p = _common_end(jobs, source, False)
        q = p if p == n == S else _common_end(jobs, source, True)
        for name, value in (("source", source), ("jobs", jobs), ("prefix", p), ("suffix", q)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"JobChanges.{name} is read-only")

    def __reduce__(self) -> tuple[Any, ...]:
        return (JobChanges, (self.source, self.jobs))

    def __repr__(self) -> str:
        return (f"JobChanges({len(self.source)} jobs -> {len(self.jobs)}: prefix {self.prefix}, "
                f"suffix {self.suffix})")


def _common_end(a: tuple[Any, ...], b: tuple[Any, ...], from_end: bool) -> int:
    """A length ``k`` such that the first (``from_end``: last) ``k`` jobs of ``a`` and ``b`` are
    equal, at least the run of the same objects there: the end of that run found by bisection on
    identity (a few dozen ``is`` tests, exact where the other objects form one block), then the
    ends compared as tuples (``==``: the same objects at C speed, others as jobs); where they
    differ (the other objects not one block), the run of the same objects counted one by one."""
    n, S = len(a), len(b)
    L = min(n, S)
    lo, hi = 0, L
    while lo < hi:
        mid = (lo + hi) // 2
        if (a[n - 1 - mid] is b[S - 1 - mid]) if from_end else (a[mid] is b[mid]):
            lo = mid + 1
        else:
            hi = mid
    if not lo or (a[n - lo:] == b[S - lo:] if from_end else a[:lo] == b[:lo]):
        return lo
    same = list(map(is_, reversed(a[n - L:]), reversed(b[S - L:])) if from_end else map(is_, a[:L], b[:L]))
    return same.index(False) if False in same else L


@contextmanager
def _gc_paused() -> Iterator[None]:
    """Pause the cyclic garbage collector while a parser builds many objects (none are cyclic):
    its generation-2 passes would otherwise rescan the growing object graph again and again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


def _config_order(used: set[str], names: list[str], jobs: Sequence[Job]) -> list[str]:
    """Columns of ``T``: the worker types, then the placement variants jobs use (sorted); a
    configuration on no known worker type is an error naming the first job that uses it."""
    known = set(names)
    unknown = {c for c in used if physical_type(c) not in known}
    if unknown:
        j = next(j for j in jobs if not unknown.isdisjoint(j.throughputs))
        cfg = next(c for c in j.throughputs if c in unknown)
        raise UnknownNameError(f"jobs[{j.id}].throughputs", cfg, known)
    return names + sorted(used - known)


def _job_from_raw(i: int, rj: Any) -> Job:
    """One job object, validated field by field (the reference path; it also writes the message of
    any error the column-wise pass of :func:`policyopt._job_columns.parse_jobs` finds)."""
    if not isinstance(rj, Mapping):
        raise InputError(f"jobs[{i}]", rj, "must be an object")
    _reject_unknown_keys(f"jobs[{i}]", rj, _JOB_KEYS)
    for key in ("id", "throughputs"):
        if rj.get(key) is None:
            raise InputError(f"jobs[{i}].{key}", None, "is required")
    jid = rj["id"]
    if isinstance(jid, (int, float)) and not isinstance(jid, bool):
        if not _id_number_ok(jid):
            raise InputError(f"jobs[{i}].id", jid, "a numeric id must be finite and an integer out of range "
                                                   "(|n| < 2**63) is refused")
        jid = str(jid)
    if not isinstance(jid, str) or not jid:
        raise InputError(f"jobs[{i}].id", jid, "job ids must be non-empty strings (or numbers)")
    kw = {k: rj[k] for k in _JOB_KEYS - {"id"} if k in rj and rj[k] is not None}
    if "priority" in kw and not isinstance(kw["priority"], bool):
        raise InputError(f"jobs[{i}].priority", kw["priority"], "must be true or false")
    try:
        return Job(id=jid, **kw)
    except InputError as exc:
        raise _at_index(exc, f"jobs[{jid}]", i) from None


def _job_by_index(exc: InputError, jobs: Sequence[Job]) -> InputError:
    """``exc`` (naming a job ``jobs[<id>]``) naming it by its place in the list instead."""
    for i, j in enumerate(jobs):
        if exc.field.startswith(f"jobs[{j.id}]"):
            return _at_index(exc, f"jobs[{j.id}]", i)
    return exc


def _at_index(exc: InputError, prefix: str, i: int) -> InputError:
    """``exc`` with the field path ``jobs[<id>]...`` rewritten to the job's place in the JSON list,
    ``jobs[<i>]...`` (the interchange parser names fields by their JSON path)."""
    if exc.field.startswith(prefix):
        exc.field = f"jobs[{i}]{exc.field[len(prefix):]}"
        exc.args = (f"{exc.field}: {exc.problem} (got {_short(exc.value)})",)
    return exc


_NUMBER_TYPES = frozenset({int, float})


def _id_number_ok(v: int | float) -> bool:
    """A numeric job id (converted to its string): a finite number; integers within ±2**63."""
    return abs(v) < 2 ** 63 if isinstance(v, int) else math.isfinite(v)
_NONE = type(None)


def _bad_array(a: "np.ndarray", spec: FieldSpec) -> "np.ndarray":
    """Mask of the numbers in float array ``a`` that break ``spec`` (finite, magnitude, integer, minimum)."""
    import numpy as np

    lo, hi = MAGNITUDE
    with np.errstate(invalid="ignore"):
        mag = np.abs(a)
        out = ~np.isfinite(a) | ((a != 0) & ((mag < lo) | (mag > hi)))
        if spec.type == "integer":
            out |= a != np.floor(a)
        if spec.minimum is not None:
            out |= (a <= spec.minimum) if spec.exclusive else (a < spec.minimum)
    return out


_THROUGHPUT_SPEC = FieldSpec("throughputs.<config>", "number", "steps/s", minimum=0)


def _reject_unknown_keys(field_: str, obj: Mapping[str, Any], allowed: set[str] | frozenset[str]) -> None:
    """An unknown key is an error naming it and the closest known name (a typo must not pass)."""
    unknown = sorted(set(obj) - allowed, key=str)
    if unknown:
        name = unknown[0]
        raise InputError(f"{field_}.{name}" if field_ else str(name), obj[name], unknown_field_message(name, allowed))


def _nan_to_none(v: Any) -> Any:
    if v is None:
        return None
    if isinstance(v, float) and math.isnan(v):
        return None
    return v


#: a recorded change is read where at most this many jobs changed (more: a re-solve matches the jobs
#: itself, by identity or by ids, which may find longer common ends)
RECORDED_MAX = 16


def recorded_ends(kept: tuple[Any, ...], kept_rec: JobChanges | None, jobs: tuple[Any, ...],
                  rec: JobChanges | None) -> tuple[int, int] | None:
    """Common ends ``p``, ``q`` (``p + q ≤ min(len(kept), len(jobs))``) of the kept jobs and
    ``jobs`` read from the records of how the problems were made (:meth:`Problem.with_jobs`,
    :class:`~policyopt.problem_records.JobChanges`): ``jobs`` made from ``kept`` (its record's
    ends), or both made from the same job tuple (the shorter of the two records' ends: each end
    is the same objects in all three). ``None`` without such records, or where more than
    :data:`RECORDED_MAX` jobs changed on either side."""
    if rec is None:
        return None
    n, S = len(jobs), len(kept)
    if rec.source is kept:
        p, q = rec.prefix, rec.suffix
    elif kept_rec is not None and kept_rec.jobs is kept and rec.source is kept_rec.source:
        p, q = min(rec.prefix, kept_rec.prefix), min(rec.suffix, kept_rec.suffix)
    else:
        return None
    L = min(n, S)
    p = min(p, L)
    q = min(q, L - p)
    if max(n, S) - p - q > RECORDED_MAX:
        return None
    return p, q
