"""Pydantic request/response models of the HTTP service (they define the published OpenAPI schema).

The problem models check only the *shape* of the interchange JSON (objects, lists, numbers); the
domain rules (finite non-negative throughputs, known worker types, unique ids, a job that fits
somewhere, ...) are checked by :meth:`policyopt.problem.Problem.from_dict`, whose errors name the
field path. Unknown keys are passed on so that it can name them too. Numbers are strict: ``"3"``
or ``true`` where a number belongs is rejected, never converted.
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict

__all__ = [
    "Number", "WorkerTypeSpec", "ClusterSpec", "JobSpec", "ColocatedSpec", "EntitySpec", "ProblemSpec",
    "SolveRequest", "SolveResponse", "PolicyOptionInfo", "PolicyInfo", "ErrorDetail", "ErrorResponse",
    "WorkerSpec", "SessionCreate", "WorkersAdd", "JobsAdd", "ProgressReport", "NextRoundRequest",
    "CombinationPlacement", "AllocationInfo", "RoundResponse", "SessionInfo", "JobInfoOut", "WorkerInfoOut",
    "Health",
]

#: a JSON number (int or float); booleans and numeric strings are rejected
Number = Annotated[float, Strict()]


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow")


class _Closed(BaseModel):
    model_config = ConfigDict(extra="forbid")


# ------------------------------------------------------------------------------------ interchange
class WorkerTypeSpec(_Open):
    count: Number = Field(description="number of workers (GPUs) of this type (integer >= 0)")
    gpus_per_server: Number | None = Field(None, description="GPUs per server (integer >= 1)")
    price_per_hour: Number | None = Field(None, description="dollars per worker-hour")


class ClusterSpec(_Open):
    worker_types: dict[str, WorkerTypeSpec] = Field(description="worker type name -> spec")


class JobSpec(_Open):
    id: Any = Field(description="job id (a string; numbers are converted)")
    throughputs: dict[str, Number] = Field(
        description="steps/s of the whole job holding scale_factor workers of a configuration "
                    "(a worker type or <type>_unconsolidated); 0 = cannot run there")
    scale_factor: Number | None = Field(None, description="workers the job needs (integer >= 1; default 1)")
    weight: Number | None = Field(None, description="share weight (> 0; default 1)")
    steps_remaining: Number | None = Field(None, description="steps left (>= 0); required in sessions")
    time_since_start: Number | None = Field(None, description="seconds since the job started (>= 0)")
    entity: str | None = Field(None, description="tenant name")
    slo_seconds: Number | None = Field(None, description="deadline, seconds from now (> 0)")
    arrival: Number | None = Field(None, description="arrival time (orders FIFO policies)")
    priority: bool | None = Field(None, description="high priority: never packed with another job")


class ColocatedSpec(_Open):
    jobs: list[Any] = Field(description="the two job ids")
    worker_type: str
    throughputs: list[Number] = Field(description="the two jobs' steps/s while sharing")


class EntitySpec(_Open):
    weight: Number | None = None
    policy: str | None = Field(None, description="fairness | fifo")


class ProblemSpec(_Open):
    """The interchange problem (docs/schema.md)."""

    cluster: ClusterSpec
    jobs: list[JobSpec]
    colocated: list[ColocatedSpec] | None = None
    entities: dict[str, EntitySpec] | None = None


# ------------------------------------------------------------------------------------ stateless
class SolveRequest(_Closed):
    policy: str = Field(description="registered policy name (GET /v1/policies)")
    problem: ProblemSpec
    options: dict[str, Any] = Field(default_factory=dict,
                                    description="policy options, including solver, algorithm and time_limit")


class SolveResponse(_Open):
    """The CLI's result JSON (``PolicyResult.to_dict()``)."""

    policy: str
    solver: str
    status: Literal["optimal", "infeasible", "unbounded", "time_limit", "error"]
    objective: float | None
    allocation: dict[str, dict[str, float]]
    colocated_allocation: list[dict[str, Any]]
    effective_throughputs: dict[str, float]
    timings: dict[str, float]
    message: str | None = Field(None, description="set when the fallback allocation was returned")


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
    cluster: ClusterSpec = Field(description="worker types (count, gpus_per_server, price_per_hour)")
    policy: str = "max_min_fairness"
    options: dict[str, Any] = Field(default_factory=dict, description="policy options (as in /v1/solve)")
    round_length: Number = Field(360.0, description="seconds per round")
    min_recompute_interval: Number = Field(
        0.0, description="seconds of session time between allocation recomputes on job arrivals/completions")
    auto_workers: bool = Field(True, description="create `count` workers per type named <type>-<server>-<gpu>")
    workers: list[WorkerSpec] = Field(default_factory=list, description="workers to register at creation")
    entities: dict[str, EntitySpec] | None = None
    placer: str = Field("consolidate", description="placement stage: consolidate | first_fit")
    migration: str = Field("matching", description="migration minimizer: matching | simple | none")
    work_conserving: bool = True
    deficit_cap: Number | None = Field(None, description="seconds of deficit carried across resets "
                                                         "(default: one round)")


class WorkersAdd(_Closed):
    workers: list[WorkerSpec] = Field(min_length=1)


class JobsAdd(_Closed):
    jobs: list[JobSpec] = Field(min_length=1, description="interchange job objects (steps_remaining required)")
    colocated: list[ColocatedSpec] = Field(default_factory=list,
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
