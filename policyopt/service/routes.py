"""The service's endpoints, as two routers over the objects in ``app.state`` (store, manager,
limits): :data:`stateless` (health, policies, solve) and :data:`sessions` (cluster sessions)."""
from __future__ import annotations

import hashlib
from contextlib import contextmanager
from typing import Any, Iterator

from fastapi import APIRouter, Query, Request
from fastapi import Path as FPath
from fastapi.responses import JSONResponse

import policyopt
from policyopt.errors import InputError
from policyopt.policy import list_policies
from pydantic import BaseModel

from .errors import SafeJSONRoute
from .models import (Deleted, Health, JobInfoOut, JobRemoved, JobsAdd, JobsAdded, NextRoundRequest, PolicyInfo,
                     ProgressAccepted, ProgressReport, RoundRecord, RoundResponse, SessionCreate, SessionCreated,
                     SessionInfo, SolveRequest, SolveResponse, WorkerInfoOut, WorkerRemoved, WorkersAdd, WorkersAdded)
from .sessions import IDEMPOTENCY, SessionManager
from .stateless import parse_problem, wrap_pop
from .validation import make_policy, solve_checked

__all__ = ["stateless", "sessions", "jsonable"]

stateless = APIRouter(route_class=SafeJSONRoute)
sessions = APIRouter(route_class=SafeJSONRoute, prefix="/v1/sessions", tags=["sessions"])


def _manager(request: Request) -> SessionManager:
    manager: SessionManager = request.app.state.manager
    return manager


@contextmanager
def _idempotent(request: Request, req: BaseModel | None) -> Iterator[None]:
    """Serve the body of a mutating request under its ``Idempotency-Key`` header, if any: the
    manager stores the response with the change and answers a retry from it (docs/service.md)."""
    key = request.headers.get("idempotency-key")
    if key is None:
        yield
        return
    if not key or len(key) > 200:
        raise InputError("header.Idempotency-Key", key, "must hold 1 to 200 characters")
    body = "" if req is None else req.model_dump_json()
    digest = hashlib.sha256(f"{request.method} {request.url.path}\n{body}".encode()).hexdigest()
    token = IDEMPOTENCY.set((key, digest))
    try:
        yield
    finally:
        IDEMPOTENCY.reset(token)


# ------------------------------------------------------------------------------------ stateless
@stateless.get("/v1/health", response_model=Health, tags=["service"])
def health(request: Request) -> dict[str, Any]:
    """Liveness: the service answers and its database is readable."""
    return {"status": "ok", "version": policyopt.__version__, "sessions": len(request.app.state.store.session_ids())}


@stateless.get("/v1/policies", response_model=list[PolicyInfo], tags=["stateless"])
def policies() -> JSONResponse:
    """Every registered policy with its documented options (name, type, default, doc, choices)."""
    return JSONResponse(jsonable(list_policies()))


@stateless.post("/v1/solve", response_model=SolveResponse, tags=["stateless"])
def solve(req: SolveRequest, request: Request) -> JSONResponse:
    """Solve one interchange problem with a registered policy; the body of the response is the
    CLI's result JSON. With ``options.time_limit`` (default and maximum set by the server) an
    expired solver returns ``status: "time_limit"`` and the documented fallback allocation.

    A problem with a ``reconfig`` section is a reconfiguration problem: the allocation is by
    configuration label (``<type>|g<GPUs>|c<cores>|n<nodes>|<plan>``) and ``sla_report`` lists
    the guaranteed jobs. With ``pop_k`` the policy runs under POP (``seed``: the partition's
    seed, default 0), its groups solved one after another, and the result has a ``pop`` section."""
    limits = request.app.state.limits
    problem = parse_problem(req.problem, reconfig="reconfig" in req.problem)
    policy, _ = make_policy(req.policy, req.options, default_time_limit=limits.default_time_limit,
                            max_time_limit=limits.max_time_limit)
    policy = wrap_pop(policy, req.pop_k, req.seed, len(problem.jobs), limits.min_jobs_per_pop_part)
    return JSONResponse(jsonable(solve_checked(policy, problem).to_dict()))


# ------------------------------------------------------------------------------------ sessions
@sessions.post("", status_code=201, response_model=SessionCreated)
def create_session(req: SessionCreate, request: Request) -> dict[str, Any]:
    """Create a cluster session (cluster, policy + options, round length); workers are created
    from the cluster's counts unless ``auto_workers`` is false."""
    with _idempotent(request, req):
        return _manager(request).create(req.model_dump())


@sessions.get("/{session_id}", response_model=SessionInfo)
def get_session(session_id: str, request: Request) -> dict[str, Any]:
    return _manager(request).info(session_id)


@sessions.delete("/{session_id}", response_model=Deleted)
def delete_session(session_id: str, request: Request) -> dict[str, Any]:
    _manager(request).delete(session_id)
    return {"deleted": session_id}


@sessions.get("/{session_id}/workers", response_model=list[WorkerInfoOut])
def get_workers(session_id: str, request: Request) -> list[dict[str, Any]]:
    return _manager(request).workers(session_id)


@sessions.post("/{session_id}/workers", response_model=WorkersAdded)
def add_workers(session_id: str, req: WorkersAdd, request: Request) -> dict[str, Any]:
    """Register workers (GPUs); the allocation is recomputed at the next round."""
    with _idempotent(request, req):
        return _manager(request).add_workers(session_id, [w.model_dump() for w in req.workers])


@sessions.delete("/{session_id}/workers/{worker_id}", response_model=WorkerRemoved)
def remove_worker(session_id: str, worker_id: str, request: Request) -> dict[str, Any]:
    """Remove a worker (e.g. it failed); the allocation is recomputed at the next round."""
    with _idempotent(request, None):
        return _manager(request).remove_worker(session_id, worker_id)


@sessions.get("/{session_id}/jobs", response_model=list[JobInfoOut])
def get_jobs(session_id: str, request: Request,
             status: str | None = Query(None, pattern="^(active|completed|removed)$")) -> list[dict[str, Any]]:
    return _manager(request).jobs(session_id, status)


@sessions.post("/{session_id}/jobs", response_model=JobsAdded)
def add_jobs(session_id: str, req: JobsAdd, request: Request) -> dict[str, Any]:
    """Add interchange job objects (``steps_remaining`` required) and colocated throughputs."""
    with _idempotent(request, req):
        return _manager(request).add_jobs(session_id, req.jobs, req.colocated)


@sessions.delete("/{session_id}/jobs/{job_id}", response_model=JobRemoved)
def remove_job(session_id: str, job_id: str, request: Request) -> dict[str, Any]:
    with _idempotent(request, None):
        return _manager(request).remove_job(session_id, job_id)


@sessions.post("/{session_id}/progress", response_model=ProgressAccepted)
def progress(session_id: str, req: ProgressReport, request: Request) -> dict[str, Any]:
    """Report progress of the open round: steps (added up across reports), seconds each job ran,
    the round's wall time, completed jobs."""
    with _idempotent(request, req):
        return _manager(request).report_progress(session_id, req.model_dump())


@sessions.post("/{session_id}/rounds/next", response_model=RoundResponse)
def next_round(session_id: str, request: Request, req: NextRoundRequest | None = None) -> JSONResponse:
    """Close the open round and plan the next: job -> worker ids (mechanism + placement)."""
    body = req.model_dump() if req is not None else {}
    with _idempotent(request, req):
        return JSONResponse(_manager(request).next_round(session_id, body))  # plain JSON types already


@sessions.get("/{session_id}/rounds/{index}", response_model=RoundRecord)
def get_round(session_id: str, request: Request, index: int = FPath(ge=0, lt=2 ** 62)) -> dict[str, Any]:
    return _manager(request).round(session_id, index)


def jsonable(obj: Any) -> Any:
    """Plain JSON types (numpy scalars/arrays and enums converted; non-finite floats -> None)."""
    import enum
    import math

    import numpy as np

    if isinstance(obj, dict):
        return {str(k): jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [jsonable(v) for v in obj]
    if isinstance(obj, bool) or obj is None or isinstance(obj, (int, str)):
        return obj
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, np.generic):
        return jsonable(obj.item())
    if isinstance(obj, np.ndarray):
        return jsonable(obj.tolist())
    if isinstance(obj, enum.Enum):
        return jsonable(obj.value)
    if isinstance(obj, type):
        return obj.__name__
    return str(obj)
