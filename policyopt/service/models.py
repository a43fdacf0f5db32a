"""Pydantic request/response models of the HTTP service (they define the published OpenAPI schema).

The interchange objects inside requests (a problem, a cluster, session jobs, colocated entries,
entities) have one definition, :mod:`policyopt.schema`: their OpenAPI schema is the JSON Schema
generated from its field tables, and they are validated once, by the core's column-wise parser
(:meth:`policyopt.problem.Problem.from_dict`, or for a problem with a ``reconfig`` section
:func:`policyopt.problem.problem_from_any`), whose errors name the field path. Here they are only
required to be JSON objects. The service's own fields (policy, options, round numbers, ...) are
validated by the models below; their numbers are strict: ``"3"`` or ``true`` where a number
belongs is rejected, never converted.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, WithJsonSchema

from policyopt.schema import (COLOCATED_FIELDS, COLOCATED_TYPE_FIELDS, ENTITY_FIELDS, cluster_json_schema,
                              job_json_schema,
                              object_json_schema, problem_json_schema)

__all__ = [
    "Number", "ProblemBody", "ClusterBody", "SessionJobBody", "ColocatedBody", "ColocatedTypeBody", "EntityBody",
    "RECONFIG_SCHEMA",
    "SolveRequest", "SolveResponse", "PopReport", "SlaEntry", "INT_MAX", "PolicyOptionInfo", "PolicyInfo",
    "ErrorDetail", "ErrorResponse", "WorkerSpec", "SessionCreate", "WorkersAdd", "JobsAdd", "ProgressReport",
    "NextRoundRequest", "CombinationPlacement", "AllocationInfo", "RoundResponse", "SessionInfo", "JobInfoOut",
    "WorkerInfoOut", "Health", "SessionCreated", "Deleted", "WorkersAdded", "WorkerRemoved", "JobsAdded",
    "JobRemoved", "ProgressAccepted", "RoundRecord",
]

#: a JSON number (int or float); booleans and numeric strings are rejected
Number = Annotated[float, Strict()]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------------ interchange
#: the ``"reconfig"`` extension (docs/reconfig.md); checked by :func:`policyopt.reconfig.problem_from_dict`
RECONFIG_SCHEMA: dict[str, Any] = {
    "type": "object", "required": ["node_types", "models", "jobs"],
    "description": "reconfiguration extension (docs/reconfig.md); present = a reconfiguration problem",
    "properties": {
        "node_types": {"type": "object", "description": "node type (a cluster worker type) -> cpus_per_node, "
                       "host_mem_per_node, gpu_mem_bytes, bw_intra, bw_inter, bw_pcie"},
        "models": {"type": "object", "description": "model name -> params, layers, hidden, seq_len, global_batch, "
                   "fwd_time_1gpu, bytes_per_param, perf_params"},
        "jobs": {"type": "object", "description": "job id -> model, node_type, gpus, cpus, plan (the request), "
                 "guaranteed, reconfigurations, trained_seconds, checkpoint_seconds, current"},
        "quotas": {"type": "object", "description": "tenant -> gpus, cpus, host_mem"},
        "options": {"type": "object", "description": "reconfigure (all | plans | resources | none | dp_only | "
                    "cpus_only), threshold, gpu_counts, cpus_per_gpu, host_mem_per_gpu, round_seconds, "
                    "usable_fraction, max_tp, quota (reserve, default: idle capacity flows past a quota | cap)"}}}


def _problem_schema() -> dict[str, Any]:
    """A plain interchange problem, or one with a ``reconfig`` section (whose jobs may leave out
    ``throughputs`` and ``scale_factor``: the requested resources and plan give them)."""
    plain = problem_json_schema()
    plain.pop("$schema", None)
    reconfig = problem_json_schema({"reconfig": RECONFIG_SCHEMA})
    reconfig.pop("$schema", None)
    reconfig["required"] = ["cluster", "jobs", "reconfig"]
    reconfig["properties"]["jobs"]["items"]["required"] = ["id"]
    reconfig["title"] = "policyopt reconfiguration problem"
    return {"anyOf": [plain, reconfig], "description": "interchange problem (docs/schema.md)"}


ProblemBody = Annotated[dict[str, Any], WithJsonSchema(_problem_schema())]
ClusterBody = Annotated[dict[str, Any], WithJsonSchema(cluster_json_schema())]
SessionJobBody = Annotated[dict[str, Any], WithJsonSchema(job_json_schema(require=["steps_remaining"]))]
ColocatedBody = Annotated[dict[str, Any], WithJsonSchema(object_json_schema(COLOCATED_FIELDS, "a pair of jobs"))]
EntityBody = Annotated[dict[str, Any], WithJsonSchema(object_json_schema(ENTITY_FIELDS, "a tenant"))]
ColocatedTypeBody = Annotated[dict[str, Any], WithJsonSchema(object_json_schema(COLOCATED_TYPE_FIELDS,
                                                                                 "space sharing by job type"))]


# ------------------------------------------------------------------------------------ stateless
#: largest integer accepted in a request (the service refuses |n| >= 2**63 everywhere)
INT_MAX = 2 ** 63 - 1


class SolveRequest(_Closed):
    policy: str = Field(description="registered policy name (GET /v1/policies)")
    problem: ProblemBody
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="policy options, including solver, algorithm and time_limit")
    pop_k: int | None = Field(
        None, ge=1, le=INT_MAX, strict=True,
        description="apply POP (docs/pop.md): split jobs and workers into pop_k groups, solve each group, "
                    "merge. Only for policies whose objective recombines over groups (pop_combine). POP caps "
                    "k at the number of jobs and lowers it when a job would fit no group (pop.k_reason). "
                    "The groups are solved one after another inside the server (pop.mode = sequential)")
    seed: int | None = Field(
        None, ge=0, le=INT_MAX, strict=True,
        description="seed of POP's partition (default 0); only with pop_k")


class SolveResponse(_Open):
    """The CLI's result JSON (``PolicyResult.to_dict()``)."""

    policy: str
    solver: str
    status: Literal["optimal", "optimal_inaccurate", "infeasible", "unbounded", "time_limit", "error", "stopped"]
    objective: float | None
    allocation: dict[str, dict[str, float]]
    colocated_allocation: list[dict[str, Any]]
    effective_throughputs: dict[str, float]
    timings: dict[str, float]
    message: str | None = Field(None, description="set when the fallback allocation was returned")
    pop: PopReport | None = Field(None, description="present when the request had pop_k")
    sla_report: list[SlaEntry] | None = Field(
        None, description="reconfiguration problems: every guaranteed job, admitted or not, met or not")


class PopReport(_Open):
    """``result.extra["pop"]`` (docs/pop.md): the partition and the time spent per group."""

    k: int = Field(description="groups used (<= k_requested)")
    k_requested: int
    seed: int
    k_reason: str | None = Field(description="why k was lowered, else null")
    group_sizes: list[int] = Field(description="jobs per group")
    group_counts: dict[str, list[int]] = Field(description="worker type -> workers (GPUs) per group")
    routed: list[str] = Field(description="jobs moved to another group because theirs could not run them")
    combine: str = Field(description="how sub-objectives combine: sum | min | max")
    mode: Literal["sequential", "parallel"]
    workers: int
    partition_seconds: list[float] = Field(description="wall seconds of each group's cut-and-solve")
    partition_cpu_seconds: list[float]
    worker_seconds: list[float]
    sequential_seconds: float = Field(description="sum of partition_seconds")
    parallel_seconds: float | None = Field(description="wall time of the parallel phase; null when sequential")
    sla: dict[str, Any] | None = Field(None, description="reconfiguration problems: guarantee counts")


class SlaEntry(_Open):
    """One guaranteed job of a reconfiguration problem (``MultiResourceSpace.sla_report``)."""

    job: str
    required: float = Field(description="reference steps/s (requested resources, original plan)")
    admitted: bool = Field(description="admitted by quota and cluster (in arrival order)")
    time_share: float = Field(description="guaranteed share of time at >= required steps/s (1 - shortfall)")
    met: bool
    reason: str | None = Field(None, description="why not met (quota or resources)")


class PolicyOptionInfo(_Open):
    name: str
    type: str
    default: Any
    doc: str
    choices: list[Any] | None = None


class PolicyInfo(_Open):
    name: str
    doc: str
    options: list[PolicyOptionInfo]


class ErrorDetail(BaseModel):
    field: str = Field(description="dotted path of the bad field in the request body")
    problem: str
    value: str | None = Field(None, description="repr of the offending value (truncated)")
    known: list[str] | None = Field(None, description="for an unknown name: the known names")


class ErrorResponse(BaseModel):
    error: str = Field(description="invalid_input | unauthorized | not_found | conflict | "
                                   "payload_too_large | method_not_allowed | internal_error | ...")
    message: str
    detail: list[ErrorDetail] = Field(default_factory=list)


class Health(BaseModel):
    status: Literal["ok"]
    version: str
    sessions: int


# ------------------------------------------------------------------------------------ sessions
class WorkerSpec(_Closed):
    id: str = Field(min_length=1, max_length=200, description="worker (GPU) id, unique among live workers")
    worker_type: str
    server: str | None = Field(None, max_length=200,
                               description="server (machine) holding this GPU; default: the worker id")


class SessionCreate(_Closed):
    cluster: ClusterBody = Field(description="worker types (count, gpus_per_server, price_per_hour)")
    policy: str = "max_min_fairness"
    options: dict[str, Any] = Field(default_factory=dict, description="policy options (as in /v1/solve)")
    round_length: Number = Field(360.0, description="seconds per round")
    min_recompute_interval: Number = Field(
        0.0, description="seconds of session time between allocation recomputes on job arrivals/completions")
    auto_workers: bool = Field(True, description="create `count` workers per type named <type>-<server>-<gpu>")
    workers: list[WorkerSpec] = Field(default_factory=list, description="workers to register at creation")
    entities: dict[str, EntityBody] | None = None
    colocated_types: list[ColocatedTypeBody] = Field(
        default_factory=list, description="space sharing by job type (jobs carry job_type), as in the simulator: "
                                          "with the policy option space_sharing, pairs of jobs share GPUs")
    packing: bool = Field(False, description="Tesserae packing, as the simulator's --packing: each round, jobs "
                                             "the mechanism left pending are paired onto running single jobs "
                                             "when colocated_types says the pair beats running alone")
    placer: str = Field("consolidate", description="placement stage: consolidate | first_fit")
    migration: str = Field("matching", description="migration minimizer: matching | simple | none")
    work_conserving: bool = True
    deficit_cap: Number | None = Field(None, description="seconds of deficit carried across resets "
                                                         "(default: one round)")


class WorkersAdd(_Closed):
    workers: list[WorkerSpec] = Field(min_length=1)


class JobsAdd(_Closed):
    jobs: list[SessionJobBody] = Field(min_length=1, description="interchange job objects (steps_remaining required)")
    colocated: list[ColocatedBody] = Field(default_factory=list,
                                           description="colocated throughputs among session jobs")


class ProgressReport(_Closed):
    round: int = Field(description="the round the report is about (must be the open round)", strict=True)
    steps: dict[str, Number] = Field(default_factory=dict, description="job -> steps done (added up)")
    durations: dict[str, Number] = Field(default_factory=dict,
                                         description="job -> seconds it ran this round, in [0, round_length]")
    round_duration: Number | None = Field(None, description="wall-clock seconds of the round (> 0)")
    completed: list[str] = Field(default_factory=list, description="jobs that finished this round")


class NextRoundRequest(_Closed):
    close_round: int | None = Field(None, strict=True,
                                    description="the open round this call closes (a retried call is refused)")
    progress: ProgressReport | None = None


class CombinationPlacement(BaseModel):
    jobs: list[str]
    worker_type: str
    workers: list[str]
    spread: bool
    renewed: bool


class AllocationInfo(BaseModel):
    status: str
    objective: float | None
    message: str
    computed_in_round: int
    solve_seconds: float


class RoundResponse(BaseModel):
    session_id: str
    round: int
    version: int
    round_length: float
    time: float = Field(description="session time (seconds) at the start of the round")
    placements: list[CombinationPlacement]
    assignment: dict[str, list[str]] = Field(description="job -> worker ids")
    pending: list[str]
    unschedulable: list[str]
    completed: list[str] = Field(description="jobs that completed when the previous round closed")
    migrated: list[str]
    recomputed: bool
    allocation: AllocationInfo | None
    timings: dict[str, float]
    migration: str = Field("matching", description="migration minimizer used this round: the session's, or "
                                                   "simple when matching would exceed its budget (servers in "
                                                   "one class > 2,048)")


class JobInfoOut(BaseModel):
    id: str
    status: str
    steps_done: float
    steps_remaining: float
    time_since_start: float
    added_at: float
    finished_at: float | None
    spec: dict[str, Any]


class WorkerInfoOut(BaseModel):
    id: str
    worker_type: str
    server: str


class SessionInfo(BaseModel):
    session_id: str
    version: int
    round: int | None
    time: float
    policy: str
    options: dict[str, Any]
    round_length: float
    worker_counts: dict[str, int]
    jobs: dict[str, int] = Field(description="status -> number of jobs")
    allocation: AllocationInfo | None


class SessionCreated(BaseModel):
    session_id: str
    version: int
    policy: str
    options: dict[str, Any]
    worker_counts: dict[str, int]
    round_length: float


class Deleted(BaseModel):
    deleted: str


class WorkersAdded(BaseModel):
    added: list[str]
    worker_counts: dict[str, int]
    version: int


class WorkerRemoved(BaseModel):
    removed: str
    worker_counts: dict[str, int]
    version: int


class JobsAdded(BaseModel):
    added: list[str]
    version: int


class JobRemoved(BaseModel):
    removed: str
    version: int


class ProgressAccepted(BaseModel):
    round: int
    steps_remaining: dict[str, float] = Field(description="job -> steps remaining after this report")
    version: int


class RoundRecord(BaseModel):
    round: int
    started_at: float
    duration: float | None
    plan: dict[str, Any] = Field(description="the round's response as it was returned")
    progress: dict[str, Any] | None
