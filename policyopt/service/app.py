"""The FastAPI application: ``create_app(state_path, api_key=None, max_body_bytes=...)``.

Endpoints (all JSON; see ``docs/service.md``)::

    GET    /v1/health                              liveness (no auth)
    GET    /v1/policies                            registered policies, their options and docs
    POST   /v1/solve                               {"policy", "problem", "options", "pop_k", "seed"} -> result JSON
    POST   /v1/sessions                            create a cluster session -> {"session_id", ...}
    GET    /v1/sessions/{sid}                      summary
    DELETE /v1/sessions/{sid}
    GET    /v1/sessions/{sid}/workers              live workers
    POST   /v1/sessions/{sid}/workers              register workers
    DELETE /v1/sessions/{sid}/workers/{worker_id}  remove a worker (failure)
    GET    /v1/sessions/{sid}/jobs[?status=...]    jobs
    POST   /v1/sessions/{sid}/jobs                 add jobs (+ colocated throughputs)
    DELETE /v1/sessions/{sid}/jobs/{job_id}        remove a job
    POST   /v1/sessions/{sid}/progress             report progress of the open round
    POST   /v1/sessions/{sid}/rounds/next          close the open round, plan the next one
    GET    /v1/sessions/{sid}/rounds/{n}           a round's plan and progress

The parts: :mod:`.middleware` (API key, body size), :mod:`.errors` (safe body reading, one error
shape: 422 bad input with the field path, 401, 404, 409, 413, 502/503 solver failures, 500 a
server fault), :mod:`.routes` (the two routers), :mod:`.sessions` over :mod:`.store`.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

import policyopt
from policyopt.errors import InputError

from . import routes
from .errors import install_error_handlers
from .limits import DEFAULT_MAX_BODY_BYTES, Limits
from .middleware import PUBLIC_PATHS, GuardMiddleware, error_body
from .models import ErrorResponse
from .sessions import SessionManager
from .store import Store

__all__ = ["create_app", "DEFAULT_MAX_BODY_BYTES", "PUBLIC_PATHS", "error_body", "jsonable"]

log = logging.getLogger("policyopt.service")
jsonable = routes.jsonable


def create_app(state_path: str | Path, api_key: str | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
               limits: Limits | None = None) -> FastAPI:
    """The service over the SQLite file ``state_path`` (created if missing; ``":memory:"`` is not
    supported — sessions must outlive the process). ``api_key``: require header ``X-API-Key``.
    ``max_body_bytes``: larger request bodies get 413. ``limits``: solver time limits and session sizes."""
    if not isinstance(max_body_bytes, int) or max_body_bytes < 1:
        raise InputError("max_body_bytes", max_body_bytes, "must be a positive integer")
    if str(state_path) in ("", ":memory:"):
        raise InputError("state_path", state_path, "must be a file: sessions have to outlive the process")
    limits = limits or Limits()
    store = Store(state_path)
    app = FastAPI(title="policyopt policy service", version=policyopt.__version__,
                  description="Scheduling policies as optimization problems, over HTTP: stateless solves and "
                              "stateful cluster sessions driven round by round (see docs/service.md).",
                  responses={422: {"model": ErrorResponse}, 401: {"model": ErrorResponse},
                             413: {"model": ErrorResponse}})
    app.state.store, app.state.manager, app.state.limits = store, SessionManager(store, limits), limits
    install_error_handlers(app)
    app.include_router(routes.stateless)
    app.include_router(routes.sessions)
    app.openapi = lambda: _openapi(app, api_key)  # type: ignore[method-assign]
    app.add_middleware(GuardMiddleware, api_key=api_key, max_body_bytes=max_body_bytes)
    return app


def _openapi(app: FastAPI, api_key: str | None) -> dict[str, Any]:
    """The OpenAPI document, with the ``ApiKey`` scheme (required on every non-public path when
    the server has a key)."""
    if app.openapi_schema:
        return app.openapi_schema
    schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
    schema.setdefault("components", {})["securitySchemes"] = {
        "ApiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key",
                   "description": "required on every /v1 path except /v1/health when the server has a key"}}
    if api_key:
        for path, ops in schema.get("paths", {}).items():
            if path not in PUBLIC_PATHS:
                for op in ops.values():
                    op["security"] = [{"ApiKey": []}]
    app.openapi_schema = schema
    return schema
