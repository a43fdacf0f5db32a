"""Reconfigurable jobs and multi-resource nodes: the ``"reconfig"`` section of the interchange JSON.

A :class:`ReconfigProblem` is a :class:`~policyopt.problem.Problem` (cluster, jobs, entities) plus a
:class:`ReconfigSpec`:

* ``node_types`` — per worker type of the cluster (``gpus_per_server`` = GPUs per node, ``count`` =
  GPUs of that type): CPU cores and host memory per node, GPU memory, bandwidths;
* ``models`` — model shapes (:class:`~policyopt.perfmodel.ModelSpec`) and fitted performance-model
  parameters (:class:`~policyopt.perfmodel.PerfParams`);
* ``jobs`` — per job: model, original (user) plan, requested GPUs / CPUs / node type, guaranteed
  flag, reconfiguration count ``N``, training time so far ``T``, checkpoint-restore seconds ``δ``
  and the configuration it currently runs with (``null`` when not running);
* ``quotas`` — per tenant (the job's ``entity``): GPUs, CPU cores, host bytes;
* ``options`` — what may change (``reconfigure``: all | plans | resources | none), the
  reconfiguration threshold, GPU-count and CPU-per-GPU grids, host memory per GPU, etc.

The base job fields keep their meaning (``steps_remaining`` in iterations, ``weight``,
``entity`` = tenant, ``time_since_start``). A reconfig job's ``throughputs`` may be omitted: they are
filled with ``{node_type: 1/T_iter}`` of the requested resources with the original plan (the
*reference* throughput), and ``scale_factor`` with the requested GPUs, so :meth:`to_dict` output
is also a valid plain problem (a fixed-plan view). See docs/reconfig.md for the schema.
"""
from __future__ import annotations

import json
import math
import numbers
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Mapping, Sequence

from policyopt.errors import InputError, UnknownNameError
from policyopt.perfmodel import ClusterSpec, ModelSpec, PerfParams, Plan
from policyopt.perfmodel.params import PARAM_NAMES
from policyopt.perfmodel.sensitivity import PlanSpace
from policyopt.problem import Cluster, Colocation, Job, Problem

__all__ = ["RECONFIGURE_MODES", "QUOTA_MODES", "NodeType", "ModelEntry", "CurrentConfig", "ReconfigJob", "Quota",
           "ReconfigOptions", "ReconfigSpec", "ReconfigProblem", "load_problem", "problem_from_dict"]

#: What an allocator may change. ``all``: plans and resources; ``plans``: plans only (resources
#: fixed to the request, Rubick-E); ``resources``: resources only (plan strategy fixed, data-parallel
#: degree follows the GPUs, Rubick-R); ``none``: neither (Rubick-N). ``dp_only`` (Sia-like: pure
#: data-parallel plans on any GPU count) and ``cpus_only`` (Synergy-like: original plan and GPUs,
#: CPU cores vary) are the baselines' spaces.
RECONFIGURE_MODES: tuple[str, ...] = ("all", "plans", "resources", "none", "dp_only", "cpus_only")
#: what a tenant quota does (``options.quota``)
QUOTA_MODES: tuple[str, ...] = ("cap", "reserve")
GiB = float(2 ** 30)


def _num(field_: str, value: Any, *, minimum: float = 0.0, strict: bool = True,
         integer: bool = False) -> float:
    """A finite number above ``minimum`` (strictly if ``strict``), else InputError."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(field_, value, "must be a number")
    v = float(value)
    if not math.isfinite(v):
        raise InputError(field_, value, "must be finite")
    if (strict and v <= minimum) or (not strict and v < minimum):
        raise InputError(field_, value, f"must be {'>' if strict else '>='} {minimum:g}")
    if integer and not v.is_integer():
        raise InputError(field_, value, "must be an integer")
    return v


def _obj(field_: str, value: Any) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise InputError(field_, value, "must be an object")
    return value


def _keys(field_: str, obj: Mapping[str, Any], allowed: set[str],
          required: frozenset[str] | set[str] = frozenset()) -> None:
    unknown = sorted(set(obj) - allowed)
    if unknown:
        raise InputError(f"{field_}.{unknown[0]}", obj[unknown[0]],
                         f"unknown field; allowed: {', '.join(sorted(allowed))}")
    for key in sorted(required):
        if key not in obj:
            raise InputError(f"{field_}.{key}", None, "is required")


@dataclass(frozen=True)
class NodeType:
    """Per-node resources of one worker type (GPUs per node come from ``gpus_per_server``)."""

    name: str
    cpus_per_node: int
    host_mem_per_node: float
    gpu_mem_bytes: float
    bw_intra: float = 150e9
    bw_inter: float = 12.5e9
    bw_pcie: float = 12e9

    def __post_init__(self) -> None:
        f = f"reconfig.node_types.{self.name}"
        object.__setattr__(self, "cpus_per_node",
                           int(_num(f"{f}.cpus_per_node", self.cpus_per_node, integer=True)))
        for name in ("host_mem_per_node", "gpu_mem_bytes", "bw_intra", "bw_inter", "bw_pcie"):
            object.__setattr__(self, name, _num(f"{f}.{name}", getattr(self, name)))

    def cluster_spec(self, gpus_per_node: int) -> ClusterSpec:
        """The performance model's view of one node of this type."""
        return ClusterSpec(gpus_per_node=int(gpus_per_node), cpus_per_node=self.cpus_per_node,
                           bw_intra=self.bw_intra, bw_inter=self.bw_inter, bw_pcie=self.bw_pcie,
                           gpu_mem_bytes=self.gpu_mem_bytes, host_mem_per_node=self.host_mem_per_node)

    def to_dict(self) -> dict[str, Any]:
        return {k.name: getattr(self, k.name) for k in fields(self) if k.name != "name"}


@dataclass(frozen=True)
class ModelEntry:
    """A model's shape and its fitted performance-model parameters."""

    spec: ModelSpec
    params: PerfParams

    def to_dict(self) -> dict[str, Any]:
        row = self.spec.to_row()
        row.pop("model")
        return {**row, "perf_params": {k: getattr(self.params, k) for k in PARAM_NAMES}}


def _plan_from(field_: str, raw: Any) -> Plan:
    obj = _obj(field_, raw)
    _keys(field_, obj, {"dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "zero"}, {"dp"})
    try:
        return Plan(**dict(obj))
    except InputError as exc:  # re-anchor the field path under this job
        raise InputError(f"{field_}.{exc.field.split('.', 1)[-1]}", exc.value, exc.problem) from None


def _plan_dict(plan: Plan) -> dict[str, Any]:
    return {"dp": plan.dp, "tp": plan.tp, "pp": plan.pp, "micro_batches": plan.micro_batches,
            "ga_steps": plan.ga_steps, "gc": plan.gc, "zero": plan.zero}


@dataclass(frozen=True)
class CurrentConfig:
    """The configuration a running job holds now (node type, GPUs, CPUs, plan, nodes spanned) and,
    optionally, which nodes of its type it runs on (``node_ids``, 0-based indices in the type's
    node order; a placement keeps an unchanged job there when they have room)."""

    node_type: str
    gpus: int
    cpus: int
    plan: Plan
    nodes: int | None = None  # None: consolidated (ceil(gpus / gpus_per_node))
    node_ids: tuple[int, ...] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"node_type": self.node_type, "gpus": self.gpus, "cpus": self.cpus,
                               "plan": _plan_dict(self.plan)}
        if self.nodes is not None:
            out["nodes"] = self.nodes
        if self.node_ids is not None:
            out["node_ids"] = list(self.node_ids)
        return out


@dataclass(frozen=True)
class ReconfigJob:
    """What a reconfigurable job asked for, and its reconfiguration history.

    ``trained_seconds`` is ``T`` of the reconfiguration rule (None: the job's ``time_since_start``),
    ``reconfigurations`` is ``N`` and ``checkpoint_seconds`` is ``δ``.
    """

    model: str
    node_type: str
    gpus: int
    cpus: int
    plan: Plan
    guaranteed: bool = False
    reconfigurations: int = 0
    trained_seconds: float | None = None
    checkpoint_seconds: float = 30.0
    current: CurrentConfig | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"model": self.model, "node_type": self.node_type, "gpus": self.gpus,
                               "cpus": self.cpus, "plan": _plan_dict(self.plan),
                               "guaranteed": self.guaranteed,
                               "reconfigurations": self.reconfigurations,
                               "checkpoint_seconds": self.checkpoint_seconds,
                               "current": None if self.current is None else self.current.to_dict()}
        if self.trained_seconds is not None:
            out["trained_seconds"] = self.trained_seconds
        return out


@dataclass(frozen=True)
class Quota:
    """A tenant's limits (None = unlimited): GPUs, CPU cores, host bytes."""

    gpus: float | None = None
    cpus: float | None = None
    host_mem: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in (("gpus", self.gpus), ("cpus", self.cpus),
                                  ("host_mem", self.host_mem)) if v is not None}


@dataclass(frozen=True)
class ReconfigOptions:
    """Knobs of the configuration space (see docs/reconfig.md).

    ``threshold``: a running job may be reconfigured only while ``(T − (N+1)·δ)/T ≥ threshold``
    (the reconfiguration being decided counted). ``round_seconds``: when set, configurations other
    than a running job's current one have their throughput scaled by ``max(0, 1 − δ/round_seconds)``
    (the checkpoint-restore time amortized over one round, visible in every objective).
    ``host_mem_per_gpu``: host bytes a job needs per GPU besides its plan's offloaded state.
    ``quota``: ``reserve`` (default) — a tenant's quota bounds what its admitted guaranteed jobs
    use while the policy decides, then capacity the allocation leaves idle flows on to them (work
    conservation, :mod:`~policyopt.reconfig.work_conservation`; policies with
    ``idle_capacity_helps = False`` keep the quota as a cap); ``cap`` — the quota bounds them always,
    even on an otherwise idle cluster.
    """

    reconfigure: str = "all"
    threshold: float = 0.97
    gpu_counts: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64)
    cpus_per_gpu: tuple[int, ...] = (2, 4, 8, 12)
    host_mem_per_gpu: float = 32 * GiB
    round_seconds: float | None = None
    usable_fraction: float = 0.9
    max_tp: int = 8
    quota: str = "reserve"

    def __post_init__(self) -> None:
        f = "reconfig.options"
        if self.reconfigure not in RECONFIGURE_MODES:
            raise UnknownNameError(f"{f}.reconfigure", self.reconfigure, RECONFIGURE_MODES)
        if self.quota not in QUOTA_MODES:
            raise UnknownNameError(f"{f}.quota", self.quota, QUOTA_MODES)
        if not 0.0 <= _num(f"{f}.threshold", self.threshold, strict=False) <= 1.0:
            raise InputError(f"{f}.threshold", self.threshold, "must be in [0, 1]")
        for name in ("gpu_counts", "cpus_per_gpu"):
            vals = getattr(self, name)
            if isinstance(vals, (str, bytes)) or not isinstance(vals, Sequence) or not vals:
                raise InputError(f"{f}.{name}", vals, "must be a non-empty list of integers >= 1")
            clean = tuple(sorted({int(_num(f"{f}.{name}", v, minimum=1, strict=False, integer=True))
                                  for v in vals}))
            object.__setattr__(self, name, clean)
        object.__setattr__(self, "host_mem_per_gpu",
                           _num(f"{f}.host_mem_per_gpu", self.host_mem_per_gpu, strict=False))
        if self.round_seconds is not None:
            object.__setattr__(self, "round_seconds", _num(f"{f}.round_seconds", self.round_seconds))
        if not 0 < _num(f"{f}.usable_fraction", self.usable_fraction) <= 1:
            raise InputError(f"{f}.usable_fraction", self.usable_fraction, "must be in (0, 1]")
        object.__setattr__(self, "max_tp", int(_num(f"{f}.max_tp", self.max_tp, minimum=1,
                                                    strict=False, integer=True)))

    @property
    def plan_space(self) -> PlanSpace:
        return PlanSpace(max_tp=self.max_tp)

    def to_dict(self) -> dict[str, Any]:
        out = {k.name: getattr(self, k.name) for k in fields(self)}
        out["gpu_counts"], out["cpus_per_gpu"] = list(self.gpu_counts), list(self.cpus_per_gpu)
        if out["round_seconds"] is None:
            del out["round_seconds"]
        return out


@dataclass(frozen=True)
class ReconfigSpec:
    """The ``"reconfig"`` section: node types, models, per-job requests, quotas, options."""

    node_types: Mapping[str, NodeType]
    models: Mapping[str, ModelEntry]
    jobs: Mapping[str, ReconfigJob]
    quotas: Mapping[str, Quota] = field(default_factory=dict)
    options: ReconfigOptions = field(default_factory=ReconfigOptions)

    def __post_init__(self) -> None:
        for name in ("node_types", "models", "jobs", "quotas"):
            object.__setattr__(self, name, dict(getattr(self, name)))
        for jid, rj in self.jobs.items():
            f = f"reconfig.jobs.{jid}"
            if rj.model not in self.models:
                raise UnknownNameError(f"{f}.model", rj.model, self.models)
            for where, nt in ((f"{f}.node_type", rj.node_type),
                              (f"{f}.current.node_type", rj.current.node_type if rj.current else None)):
                if nt is not None and nt not in self.node_types:
                    raise UnknownNameError(where, nt, self.node_types)
            if rj.plan.gpus != rj.gpus:
                raise InputError(f"{f}.plan", _plan_dict(rj.plan),
                                 f"dp·tp·pp = {rj.plan.gpus} differs from gpus = {rj.gpus}")
            if rj.current is not None and rj.current.plan.gpus != rj.current.gpus:
                raise InputError(f"{f}.current.plan", _plan_dict(rj.current.plan),
                                 f"dp·tp·pp = {rj.current.plan.gpus} differs from gpus = "
                                 f"{rj.current.gpus}")

    def with_options(self, **changes: Any) -> "ReconfigSpec":
        return replace(self, options=replace(self.options, **changes))

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_dict(cls, data: Any) -> "ReconfigSpec":
        root = _obj("reconfig", data)
        _keys("reconfig", root, {"node_types", "models", "jobs", "quotas", "options"},
              {"node_types", "models", "jobs"})
        node_types = {}
        for name, raw in _obj("reconfig.node_types", root["node_types"]).items():
            f = f"reconfig.node_types.{name}"
            obj = _obj(f, raw)
            _keys(f, obj, {"cpus_per_node", "host_mem_per_node", "gpu_mem_bytes", "bw_intra",
                           "bw_inter", "bw_pcie"},
                  {"cpus_per_node", "host_mem_per_node", "gpu_mem_bytes"})
            node_types[str(name)] = NodeType(name=str(name), **dict(obj))
        models = {}
        spec_keys = {"params", "layers", "hidden", "seq_len", "global_batch", "fwd_time_1gpu",
                     "bytes_per_param"}
        for name, raw in _obj("reconfig.models", root["models"]).items():
            f = f"reconfig.models.{name}"
            obj = _obj(f, raw)
            _keys(f, obj, spec_keys | {"perf_params"}, (spec_keys - {"bytes_per_param"})
                  | {"perf_params"})
            pp = _obj(f"{f}.perf_params", obj["perf_params"])
            _keys(f"{f}.perf_params", pp, set(PARAM_NAMES), set(PARAM_NAMES))
            try:
                spec = ModelSpec(name=str(name), **{k: obj[k] for k in spec_keys if k in obj})
                params = PerfParams(**dict(pp))
            except InputError as exc:
                raise InputError(f"{f}.{exc.field.split('.', 1)[-1]}", exc.value,
                                 exc.problem) from None
            models[str(name)] = ModelEntry(spec, params)
        jobs = {}
        job_keys = {"model", "node_type", "gpus", "cpus", "plan", "guaranteed", "reconfigurations",
                    "trained_seconds", "checkpoint_seconds", "current"}
        for jid, raw in _obj("reconfig.jobs", root["jobs"]).items():
            f = f"reconfig.jobs.{jid}"
            obj = _obj(f, raw)
            _keys(f, obj, job_keys, {"model", "node_type", "gpus", "cpus", "plan"})
            guaranteed = obj.get("guaranteed", False)
            if not isinstance(guaranteed, bool):
                raise InputError(f"{f}.guaranteed", guaranteed, "must be true or false")
            current = None
            if obj.get("current") is not None:
                cur = _obj(f"{f}.current", obj["current"])
                _keys(f"{f}.current", cur, {"node_type", "gpus", "cpus", "plan", "nodes", "node_ids"},
                      {"node_type", "gpus", "cpus", "plan"})
                nodes = cur.get("nodes")
                ids = cur.get("node_ids")
                if ids is not None:
                    if (not isinstance(ids, list) or not ids or len(set(map(str, ids))) != len(ids)
                            or (nodes is not None and len(ids) != nodes)):
                        raise InputError(f"{f}.current.node_ids", ids,
                                         "must be a non-empty list of distinct node indices, one per node spanned")
                    ids = tuple(int(_num(f"{f}.current.node_ids[{i}]", v, strict=False, integer=True))
                                for i, v in enumerate(ids))
                current = CurrentConfig(
                    str(cur["node_type"]),
                    int(_num(f"{f}.current.gpus", cur["gpus"], integer=True)),
                    int(_num(f"{f}.current.cpus", cur["cpus"], integer=True)),
                    _plan_from(f"{f}.current.plan", cur["plan"]),
                    None if nodes is None else int(_num(f"{f}.current.nodes", nodes, integer=True)), ids)
            trained = obj.get("trained_seconds")
            jobs[str(jid)] = ReconfigJob(
                model=str(obj["model"]), node_type=str(obj["node_type"]),
                gpus=int(_num(f"{f}.gpus", obj["gpus"], integer=True)),
                cpus=int(_num(f"{f}.cpus", obj["cpus"], integer=True)),
                plan=_plan_from(f"{f}.plan", obj["plan"]), guaranteed=guaranteed,
                reconfigurations=int(_num(f"{f}.reconfigurations", obj.get("reconfigurations", 0),
                                          strict=False, integer=True)),
                trained_seconds=None if trained is None else _num(f"{f}.trained_seconds", trained,
                                                                  strict=False),
                checkpoint_seconds=_num(f"{f}.checkpoint_seconds",
                                        obj.get("checkpoint_seconds", 30.0), strict=False),
                current=current)
        quotas = {}
        for tenant, raw in _obj("reconfig.quotas", root.get("quotas") or {}).items():
            f = f"reconfig.quotas.{tenant}"
            obj = _obj(f, raw)
            _keys(f, obj, {"gpus", "cpus", "host_mem"})
            quotas[str(tenant)] = Quota(**{k: _num(f"{f}.{k}", v, strict=False)
                                           for k, v in obj.items() if v is not None})
        opts = dict(_obj("reconfig.options", root.get("options") or {}))
        _keys("reconfig.options", opts, {f.name for f in fields(ReconfigOptions)})
        for name in ("gpu_counts", "cpus_per_gpu"):
            if name in opts and isinstance(opts[name], list):
                opts[name] = tuple(opts[name])
        return cls(node_types, models, jobs, quotas, ReconfigOptions(**opts))

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "node_types": {n: t.to_dict() for n, t in self.node_types.items()},
            "models": {n: m.to_dict() for n, m in self.models.items()},
            "jobs": {j: r.to_dict() for j, r in self.jobs.items()},
            "options": self.options.to_dict(),
        }
        if self.quotas:
            out["quotas"] = {t: q.to_dict() for t, q in self.quotas.items()}
        return out


@dataclass(frozen=True)
class ReconfigProblem(Problem):
    """A :class:`~policyopt.problem.Problem` whose jobs can change plan and resources.

    Every job needs an entry in ``reconfig.jobs``; every reconfig node type must be a worker type
    of the cluster with ``gpus_per_server`` set (GPUs per node); quotas must name entities in use.
    Policies solve it over :class:`~policyopt.reconfig.space.MultiResourceSpace` (registered with
    :func:`~policyopt.policy.register_space`).
    """

    reconfig: ReconfigSpec | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        spec = self.reconfig
        if not isinstance(spec, ReconfigSpec):
            raise InputError("reconfig", spec, "a ReconfigProblem needs a ReconfigSpec")
        ids = set(self.job_ids)
        missing = sorted(ids - set(spec.jobs))
        if missing:
            raise InputError(f"reconfig.jobs.{missing[0]}", None,
                             "every job needs a reconfig entry (model, plan, requested resources)")
        extra = sorted(set(spec.jobs) - ids)
        if extra:
            raise UnknownNameError(f"reconfig.jobs.{extra[0]}", extra[0], ids)
        for name in spec.node_types:
            try:
                wt = self.cluster[name]
            except UnknownNameError:
                raise UnknownNameError(f"reconfig.node_types.{name}", name, self.cluster.names) from None
            if wt.gpus_per_server is None:
                raise InputError(f"cluster.worker_types.{name}.gpus_per_server", None,
                                 "node types of a reconfig problem need gpus_per_server (GPUs per node)")
        tenants = {j.entity for j in self.jobs} | set(self.entities)
        for tenant in spec.quotas:
            if tenant not in tenants:
                raise UnknownNameError(f"reconfig.quotas.{tenant}", tenant,
                                       sorted(t for t in tenants if t is not None))

    # ------------------------------------------------------------------ derived views
    def gpus_per_node(self, node_type: str) -> int:
        gps = self.cluster[node_type].gpus_per_server
        assert gps is not None
        return int(gps)

    def nodes(self, node_type: str) -> float:
        """Nodes of a type: GPUs / GPUs per node (fractional after a POP-style split)."""
        return self.cluster[node_type].count / self.gpus_per_node(node_type)

    def with_reconfig(self, spec: ReconfigSpec) -> "ReconfigProblem":
        return ReconfigProblem(self.cluster, self.jobs, self.colocated, self.entities,
                               self.colocated_types, reconfig=spec)

    def with_options(self, **changes: Any) -> "ReconfigProblem":
        """A copy with other :class:`ReconfigOptions` (e.g. ``reconfigure="plans"``)."""
        assert self.reconfig is not None
        return self.with_reconfig(self.reconfig.with_options(**changes))

    def with_jobs(self, jobs: Any, colocated: Any = None, cluster: Cluster | None = None
                  ) -> "ReconfigProblem":
        """A copy restricted to ``jobs`` (reconfig entries and quotas follow; with ``cluster``, the
        node counts follow the new GPU counts). Quotas are kept as given: a caller that splits the
        cluster into ``k`` parts should scale them too (:meth:`scaled_quotas`)."""
        jobs = tuple(jobs)
        base = Problem.with_jobs(self, jobs, colocated, cluster)
        assert self.reconfig is not None
        spec = replace(self.reconfig, jobs={j.id: self.reconfig.jobs[j.id] for j in jobs})
        return ReconfigProblem(base.cluster, base.jobs, base.colocated, base.entities,
                               base.colocated_types, reconfig=spec)

    def scaled_quotas(self, factor: float) -> "ReconfigProblem":
        """A copy with every quota multiplied by ``factor`` (for cluster splits)."""
        assert self.reconfig is not None
        q = {t: Quota(*(None if v is None else v * factor for v in (x.gpus, x.cpus, x.host_mem)))
             for t, x in self.reconfig.quotas.items()}
        return self.with_reconfig(replace(self.reconfig, quotas=q))

    def pop_adapter(self) -> Any:
        """How :func:`policyopt.pop.pop` splits this problem and merges the groups' results
        (:class:`~policyopt.reconfig.pop_support.ReconfigPopAdapter`)."""
        from .pop_support import ReconfigPopAdapter  # late import: pop_support imports the space
        return ReconfigPopAdapter(self)

    # ------------------------------------------------------------------ JSON
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "ReconfigProblem":
        """Parse a problem with a ``"reconfig"`` section (missing job throughputs are filled with
        the reference throughput of the requested resources and original plan)."""
        if not isinstance(data, Mapping):
            raise InputError("(root)", type(data).__name__, "the problem must be a JSON object")
        if "reconfig" not in data:
            raise InputError("reconfig", None, "is required for a reconfigurable problem")
        spec = ReconfigSpec.from_dict(data["reconfig"])
        raw = {k: v for k, v in data.items() if k != "reconfig"}  # the rest is a plain problem
        raw_jobs = raw.get("jobs")
        if isinstance(raw_jobs, Sequence) and not isinstance(raw_jobs, (str, bytes)):
            for j in raw_jobs:
                if isinstance(j, Mapping) and "id" in j and str(j["id"]) not in spec.jobs:
                    raise InputError(f"reconfig.jobs.{j['id']}", None,
                                     "every job needs a reconfig entry (model, plan, requested resources)")
            raw["jobs"] = _fill_jobs(list(raw_jobs), spec, _gpus_per_node(data))
        base = Problem.from_dict(raw)
        return cls(base.cluster, base.jobs, base.colocated, base.entities, base.colocated_types,
                   reconfig=spec)

    def to_dict(self) -> dict[str, Any]:
        out = super().to_dict()
        assert self.reconfig is not None
        out["reconfig"] = self.reconfig.to_dict()
        return out


def _gpus_per_node(data: Mapping[str, Any]) -> dict[str, int]:
    """``{worker type: gpus_per_server}`` from a raw problem (entries without it are skipped)."""
    cl = data.get("cluster")
    wts = cl.get("worker_types") if isinstance(cl, Mapping) else None
    if not isinstance(wts, Mapping):
        return {}
    out = {}
    for name, w in wts.items():
        g = w.get("gpus_per_server") if isinstance(w, Mapping) else None
        # integral numbers as Problem.from_dict takes them (8 or 8.0); anything else is left to
        # Problem.from_dict, which names the field
        if isinstance(g, (int, float)) and not isinstance(g, bool) and float(g).is_integer() and g >= 1:
            out[str(name)] = int(g)
    return out


def _fill_jobs(raw_jobs: list[Any], spec: ReconfigSpec, gpn: Mapping[str, int]) -> list[Any]:
    """Fill missing ``throughputs`` of reconfig jobs (reference steps/s on the requested node type,
    one vectorized evaluation) and ``scale_factor`` (requested GPUs)."""
    out = [dict(j) if isinstance(j, Mapping) else j for j in raw_jobs]
    need = []
    for i, j in enumerate(out):
        if isinstance(j, dict) and "id" in j and str(j["id"]) in spec.jobs:
            rj = spec.jobs[str(j["id"])]
            j.setdefault("scale_factor", rj.gpus)
            if "throughputs" not in j:
                if rj.node_type not in gpn:
                    raise InputError(f"cluster.worker_types.{rj.node_type}.gpus_per_server", None,
                                     "node types of a reconfig problem need gpus_per_server")
                need.append(i)
    if need:
        from .catalog import reference_throughputs  # late import: catalog imports this module
        ids = [str(out[i]["id"]) for i in need]
        thr = reference_throughputs(spec, ids, gpn)
        for i, jid, t in zip(need, ids, thr.tolist()):
            out[i]["throughputs"] = {spec.jobs[jid].node_type: t}
    return out


def problem_from_dict(data: Mapping[str, Any]) -> Problem:
    """:class:`ReconfigProblem` when ``data`` has a ``"reconfig"`` section, else a plain Problem."""
    if isinstance(data, Mapping) and "reconfig" in data:
        return ReconfigProblem.from_dict(data)
    return Problem.from_dict(data)


def load_problem(source: str | Path) -> Problem:
    """Load a problem JSON (string or path), dispatching on the ``"reconfig"`` section."""
    text = str(source)
    if isinstance(source, Path) or not text.lstrip().startswith("{"):
        path = Path(source)
        if not path.exists():
            raise InputError("input", str(path), "file not found")
        text = path.read_text()
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError("input", f"line {exc.lineno} column {exc.colno}",
                         f"malformed JSON: {exc.msg}") from None
    return problem_from_dict(data)


def make_problem(cluster: Cluster, jobs: Sequence[Job], spec: ReconfigSpec,
                 entities: Mapping[str, Any] | None = None,
                 colocated: Sequence[Colocation] = ()) -> ReconfigProblem:
    """Build a :class:`ReconfigProblem` from objects."""
    return ReconfigProblem(cluster, tuple(jobs), tuple(colocated), dict(entities or {}), (),
                           reconfig=spec)
