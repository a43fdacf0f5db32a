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

Every error is ``{"error": CODE, "message": TEXT, "detail": [{"field", "problem", "value"}]}``:
422 bad input (field = dotted path in the request body), 401 missing/wrong ``X-API-Key``, 404
unknown session/worker/job/round, 409 a stale round or a concurrent writer, 413 body larger than
``max_body_bytes`` (refused before it is parsed), 500 a server fault.
"""
from __future__ import annotations

import hmac
import logging
from pathlib import Path
from typing import Any, Awaitable, Callable, MutableMapping

from fastapi import FastAPI, HTTPException, Query, Request
from fastapi import Path as FPath
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

import policyopt
from policyopt.errors import InputError, PolicyOptError, UnknownNameError
from policyopt.policy import list_policies

from .models import (ErrorResponse, Health, JobInfoOut, JobsAdd, NextRoundRequest, PolicyInfo, ProgressReport,
                     RoundResponse, SessionCreate, SessionInfo, SolveRequest, SolveResponse, WorkerInfoOut, WorkersAdd)
from .limits import DEFAULT_MAX_BODY_BYTES, Limits
from .sessions import ItemNotFound, RoundConflict, SessionManager, SessionNotFound
from .store import ConflictError, Store
from .stateless import parse_problem, wrap_pop
from .validation import make_policy, solve_checked

__all__ = ["create_app", "DEFAULT_MAX_BODY_BYTES", "PUBLIC_PATHS"]

log = logging.getLogger("policyopt.service")

#: paths served without an API key
PUBLIC_PATHS = frozenset({"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def _short(value: Any, limit: int = 200) -> str:
    try:
        text = repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ cannot come from JSON, but be safe
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def error_body(code: str, message: str, detail: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    return {"error": code, "message": message, "detail": detail or []}


class _TooLarge(HTTPException):
    """Raised from ``receive`` once a streamed body passes the limit (FastAPI re-raises
    HTTPExceptions met while reading the body, so this reaches the 413 handler)."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"request body exceeds {limit} bytes")


class GuardMiddleware:
    """Pure ASGI middleware run before any routing or body parsing.

    * API key: when configured, every path outside :data:`PUBLIC_PATHS` needs header
      ``X-API-Key`` equal to it (constant-time comparison), else 401.
    * Body size: a ``Content-Length`` above ``max_body_bytes`` is refused with 413 before the body
      is parsed; a body streamed without a length is counted and refused as soon as it passes the
      limit. Refused bodies up to ``4 × max_body_bytes`` are read and dropped before the answer (so
      a client that writes its whole body first still reads the 413); larger ones are not read at
      all and the connection is closed.
    """

    def __init__(self, app: ASGIApp, api_key: str | None, max_body_bytes: int) -> None:
        self.app = app
        self.api_key = api_key.encode() if api_key else None
        self.max_body_bytes = max_body_bytes
        self.drain_bytes = 4 * max_body_bytes  # refused bodies up to this size are read and dropped

    async def _reply(self, send: Send, status: int, body: dict[str, Any], extra: list[tuple[bytes, bytes]] = ()) -> None:
        import json

        data = json.dumps(body).encode()
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(data)).encode()),
                                *extra]})
        await send({"type": "http.response.body", "body": data})

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope.get("headers") or [])
        if self.api_key is not None and scope.get("path") not in PUBLIC_PATHS:
            given = headers.get(b"x-api-key", b"")
            if not hmac.compare_digest(given, self.api_key):
                await self._reply(send, 401, error_body(
                    "unauthorized", "missing or wrong X-API-Key header",
                    [{"field": "header.X-API-Key", "problem": "missing or wrong", "value": None}]),
                    [(b"www-authenticate", b"ApiKey")])
                return
        limit = self.max_body_bytes
        length = headers.get(b"content-length")
        too_large = error_body("payload_too_large", f"request body exceeds {limit} bytes",
                               [{"field": "body", "problem": f"larger than {limit} bytes", "value": None}])
        if length is not None:
            try:
                n = int(length)
            except ValueError:
                await self._reply(send, 400, error_body("bad_request", "invalid Content-Length header"))
                return
            if n > limit:
                if n <= self.drain_bytes:  # read and drop it, so the client sees the answer
                    await self._drain(receive, self.drain_bytes)
                await self._reply(send, 413, too_large, [(b"connection", b"close")])
                return
        seen = 0
        started = False

        async def counting_receive() -> Message:
            nonlocal seen
            msg = await receive()
            if msg["type"] == "http.request":
                seen += len(msg.get("body", b""))
                if seen > limit:
                    if msg.get("more_body", False):
                        await self._drain(receive, self.drain_bytes - seen)
                    raise _TooLarge(limit)
            return msg

        async def tracking_send(msg: Message) -> None:
            nonlocal started
            if msg["type"] == "http.response.start":
                started = True
            await send(msg)

        try:
            await self.app(scope, counting_receive, tracking_send)
        except _TooLarge:
            if not started:
                await self._reply(send, 413, too_large, [(b"connection", b"close")])

    @staticmethod
    async def _drain(receive: Receive, budget: int) -> None:
        """Read and discard the rest of a refused body, at most ``budget`` bytes (then give up and
        let the connection close): clients that send the whole body before reading still get the
        413 instead of a reset connection."""
        while budget > 0:
            msg = await receive()
            if msg["type"] != "http.request":
                return
            budget -= len(msg.get("body", b""))
            if not msg.get("more_body", False):
                return


def _loc_to_field(loc: tuple[Any, ...] | list[Any]) -> str:
    parts = list(loc)
    if parts and parts[0] in ("body", "query", "path", "header"):
        head = parts.pop(0)
        if not parts:
            return "body" if head == "body" else head
        if head != "body":
            parts.insert(0, head)
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += f".{p}" if out else str(p)
    return out or "body"


def _input_error_response(exc: InputError) -> JSONResponse:
    detail: dict[str, Any] = {"field": exc.field, "problem": exc.problem, "value": _short(exc.value)}
    if isinstance(exc, UnknownNameError):
        detail["known"] = exc.known[:50]
    return JSONResponse(status_code=422, content=error_body("invalid_input", str(exc), [detail]))


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
    manager = SessionManager(store, limits)
    app = FastAPI(title="policyopt policy service", version=policyopt.__version__,
                  description="Scheduling policies as optimization problems, over HTTP: stateless solves and "
                              "stateful cluster sessions driven round by round (see docs/service.md).",
                  responses={422: {"model": ErrorResponse}, 401: {"model": ErrorResponse},
                             413: {"model": ErrorResponse}})
    app.state.store, app.state.manager, app.state.limits = store, manager, limits

    # ------------------------------------------------------------------------------ errors
    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        return _input_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = []
        for e in exc.errors()[:50]:
            field = _loc_to_field(e.get("loc", ()))
            problem = str(e.get("msg", "invalid"))
            if e.get("type") == "json_invalid":
                loc = e.get("loc", ())
                field = "body"
                problem = (f"malformed JSON at character {loc[-1] if loc else '?'}: "
                           + str((e.get("ctx") or {}).get("error", problem)))
            detail.append({"field": field, "problem": problem, "value": _short(e.get("input"))})
        first = detail[0] if detail else {"field": "body", "problem": "invalid"}
        return JSONResponse(status_code=422, content=error_body(
            "invalid_input", f"{first['field']}: {first['problem']}", detail))

    @app.exception_handler(SessionNotFound)
    async def _no_session(_: Request, exc: SessionNotFound) -> JSONResponse:
        return JSONResponse(status_code=404, content=error_body(
            "not_found", str(exc), [{"field": "session_id", "problem": "unknown session", "value": _short(exc.session_id)}]))

    @app.exception_handler(ItemNotFound)
    async def _no_item(_: Request, exc: ItemNotFound) -> JSONResponse:
        return JSONResponse(status_code=404, content=error_body(
            "not_found", str(exc), [{"field": exc.field, "problem": exc.problem, "value": _short(exc.value)}]))

    @app.exception_handler(RoundConflict)
    async def _round_conflict(_: Request, exc: RoundConflict) -> JSONResponse:
        return JSONResponse(status_code=409, content=error_body(
            "conflict", str(exc), [{"field": exc.field, "problem": exc.problem, "value": _short(exc.value)}]))

    @app.exception_handler(ConflictError)
    async def _conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return JSONResponse(status_code=409, content=error_body("conflict", str(exc)))

    @app.exception_handler(PolicyOptError)
    async def _policyopt(_: Request, exc: PolicyOptError) -> JSONResponse:
        log.exception("policyopt error", exc_info=exc)
        return JSONResponse(status_code=500, content=error_body(type(exc).__name__, str(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
        return JSONResponse(status_code=exc.status_code, headers=getattr(exc, "headers", None),
                            content=error_body(codes.get(exc.status_code, "http_error"), str(exc.detail)))

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(status_code=500, content=error_body("internal_error", f"{type(exc).__name__}: {exc}"))

    # ------------------------------------------------------------------------------ stateless
    @app.get("/v1/health", response_model=Health, tags=["service"])
    def health() -> dict[str, Any]:
        """Liveness: the service answers and its database is readable."""
        return {"status": "ok", "version": policyopt.__version__, "sessions": len(store.session_ids())}

    @app.get("/v1/policies", response_model=list[PolicyInfo], tags=["stateless"])
    def policies() -> JSONResponse:
        """Every registered policy with its documented options (name, type, default, doc, choices)."""
        return JSONResponse(jsonable(list_policies()))

    @app.post("/v1/solve", response_model=SolveResponse, tags=["stateless"])
    def solve(req: SolveRequest) -> JSONResponse:
        """Solve one interchange problem with a registered policy; the body of the response is the
        CLI's result JSON. With ``options.time_limit`` (default and maximum set by the server) an
        expired solver returns ``status: "time_limit"`` and the documented fallback allocation.

        A problem with a ``reconfig`` section is a reconfiguration problem: the allocation is by
        configuration label (``<type>|g<GPUs>|c<cores>|n<nodes>|<plan>``) and ``sla_report`` lists
        the guaranteed jobs. With ``pop_k`` the policy runs under POP (``seed``: the partition's
        seed, default 0), its groups solved one after another, and the result has a ``pop`` section."""
        if req.problem.is_reconfig:  # the reconfig parser needs the JSON integers as sent
            problem = parse_problem(req.problem.raw(), reconfig=True)
        else:
            problem = parse_problem(req.problem.model_dump(exclude_unset=True), reconfig=False)
        policy, _ = make_policy(req.policy, req.options, default_time_limit=limits.default_time_limit,
                                max_time_limit=limits.max_time_limit)
        policy = wrap_pop(policy, req.pop_k, req.seed)
        return JSONResponse(jsonable(solve_checked(policy, problem).to_dict()))

    # ------------------------------------------------------------------------------ sessions
    @app.post("/v1/sessions", status_code=201, tags=["sessions"])
    def create_session(req: SessionCreate) -> dict[str, Any]:
        """Create a cluster session (cluster, policy + options, round length); workers are created
        from the cluster's counts unless ``auto_workers`` is false."""
        body = req.model_dump()
        body["cluster"] = req.cluster.model_dump(exclude_unset=True)
        body["entities"] = {k: v.model_dump(exclude_unset=True) for k, v in (req.entities or {}).items()}
        return manager.create(body)

    @app.get("/v1/sessions/{session_id}", response_model=SessionInfo, tags=["sessions"])
    def get_session(session_id: str) -> dict[str, Any]:
        return manager.info(session_id)

    @app.delete("/v1/sessions/{session_id}", tags=["sessions"])
    def delete_session(session_id: str) -> dict[str, Any]:
        manager.delete(session_id)
        return {"deleted": session_id}

    @app.get("/v1/sessions/{session_id}/workers", response_model=list[WorkerInfoOut], tags=["sessions"])
    def get_workers(session_id: str) -> list[dict[str, Any]]:
        return manager.workers(session_id)

    @app.post("/v1/sessions/{session_id}/workers", tags=["sessions"])
    def add_workers(session_id: str, req: WorkersAdd) -> dict[str, Any]:
        """Register workers (GPUs); the allocation is recomputed at the next round."""
        return manager.add_workers(session_id, [w.model_dump() for w in req.workers])

    @app.delete("/v1/sessions/{session_id}/workers/{worker_id}", tags=["sessions"])
    def remove_worker(session_id: str, worker_id: str) -> dict[str, Any]:
        """Remove a worker (e.g. it failed); the allocation is recomputed at the next round."""
        return manager.remove_worker(session_id, worker_id)

    @app.get("/v1/sessions/{session_id}/jobs", response_model=list[JobInfoOut], tags=["sessions"])
    def get_jobs(session_id: str, status: str | None = Query(None, pattern="^(active|completed|removed)$")
                 ) -> list[dict[str, Any]]:
        return manager.jobs(session_id, status)

    @app.post("/v1/sessions/{session_id}/jobs", tags=["sessions"])
    def add_jobs(session_id: str, req: JobsAdd) -> dict[str, Any]:
        """Add interchange job objects (``steps_remaining`` required) and colocated throughputs."""
        return manager.add_jobs(session_id, [j.model_dump(exclude_unset=True) for j in req.jobs],
                                [c.model_dump(exclude_unset=True) for c in req.colocated])

    @app.delete("/v1/sessions/{session_id}/jobs/{job_id}", tags=["sessions"])
    def remove_job(session_id: str, job_id: str) -> dict[str, Any]:
        return manager.remove_job(session_id, job_id)

    @app.post("/v1/sessions/{session_id}/progress", tags=["sessions"])
    def progress(session_id: str, req: ProgressReport) -> dict[str, Any]:
        """Report progress of the open round: steps (added up across reports), seconds each job ran,
        the round's wall time, completed jobs."""
        return manager.report_progress(session_id, req.model_dump())

    @app.post("/v1/sessions/{session_id}/rounds/next", response_model=RoundResponse, tags=["sessions"])
    def next_round(session_id: str, req: NextRoundRequest | None = None) -> JSONResponse:
        """Close the open round and plan the next: job -> worker ids (mechanism + placement)."""
        body = req.model_dump() if req is not None else {}
        return JSONResponse(manager.next_round(session_id, body))  # plain JSON types already

    @app.get("/v1/sessions/{session_id}/rounds/{index}", tags=["sessions"])
    def get_round(session_id: str, index: int = FPath(ge=0, lt=2 ** 62)) -> dict[str, Any]:
        return manager.round(session_id, index)

    # ------------------------------------------------------------------------------ OpenAPI
    def openapi() -> dict[str, Any]:
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

    app.openapi = openapi  # type: ignore[method-assign]
    app.add_middleware(GuardMiddleware, api_key=api_key, max_body_bytes=max_body_bytes)
    return app


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
