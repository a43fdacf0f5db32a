"""Error responses of the service and the request-body reader they start from.

* :class:`SafeJSONRoute` — every route reads its JSON body through
  :func:`policyopt.json_input.loads`: bytes that are not UTF-8, nesting too deep for the parser,
  integers with thousands of digits and strings holding a lone surrogate are a 422 naming the
  problem (and the field, where there is one), not FastAPI's bare 400 "error parsing the body" or
  a 500 when the string reaches SQLite or the response encoder (which also cost the client its
  keep-alive connection). Path and query parameters with a lone surrogate are a 422 naming the
  parameter (``path.job_id``) too.
* :func:`install_error_handlers` — one JSON shape for every error
  (``{"error", "message", "detail": [{"field", "problem", "value"}]}``) and one status per cause:
  422 bad input, 404 unknown session/item, 409 conflicts, 502 a solver backend failed, 503 a
  solver backend is not available, 500 a server fault.
"""
from __future__ import annotations

import logging
from typing import Any, Callable, Coroutine

from fastapi import FastAPI, HTTPException, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from policyopt import json_input
from policyopt.errors import InputError, PolicyOptError, SolverError, SolverNotAvailableError, UnknownNameError

from .middleware import error_body
from .sessions import ItemNotFound, RoundConflict, SessionNotFound
from .store import ConflictError

__all__ = ["SafeJSONRoute", "install_error_handlers", "input_error_response", "short"]

log = logging.getLogger("policyopt.service")


def short(value: Any, limit: int = 200) -> str:
    """``repr(value)`` cut to ``limit`` characters (safe for any value, however deeply nested)."""
    try:
        text = repr(value)
    except (RecursionError, ValueError):  # a value nested deeper than repr follows
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class _BodyError(HTTPException):
    """A body that is not readable JSON (an :class:`InputError`); raised while FastAPI reads the
    body, which re-raises HTTPExceptions (anything else would become its bare 400)."""

    def __init__(self, error: InputError) -> None:
        super().__init__(422, str(error))
        self.input_error = error


class _SafeJSONRequest(Request):
    async def json(self) -> Any:
        if not hasattr(self, "_json"):
            body = await self.body()
            try:
                self._json = json_input.loads(body, "body")
            except InputError as exc:
                raise _BodyError(exc) from None
        return self._json


class SafeJSONRoute(APIRoute):
    """An ``APIRoute`` whose request body is parsed by :func:`policyopt.json_input.loads`."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def route(request: Request) -> Response:
            _check_text_parameters(request)
            return await handler(_SafeJSONRequest(request.scope, request.receive))

        return route


def _check_text_parameters(request: Request) -> None:
    """Path and query parameters are Unicode text: one holding a lone UTF-16 surrogate (an ASGI
    server may pass one through from a percent-encoded path) is a 422 naming it (``path.job_id``,
    ``query.status``), before it can reach SQLite or a UTF-8 response."""
    params = [(f"path.{k}", v) for k, v in request.path_params.items()]
    params += [(f"query.{k}", v) for k, v in request.query_params.multi_items()]
    for field, value in params:
        if isinstance(value, str) and json_input.find_lone_surrogate(value, field):
            raise InputError(field, value, "the text holds a lone UTF-16 surrogate")


def loc_to_field(loc: tuple[Any, ...] | list[Any]) -> str:
    """A pydantic error location as a dotted field path (``jobs[0].id``)."""
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


def input_error_response(exc: InputError) -> JSONResponse:
    detail: dict[str, Any] = {"field": exc.field, "problem": exc.problem, "value": short(exc.value)}
    if isinstance(exc, UnknownNameError):
        detail["known"] = exc.known[:50]
    return JSONResponse(status_code=422, content=error_body("invalid_input", str(exc), [detail]))


def install_error_handlers(app: FastAPI) -> None:
    """Register the handlers that give every error its status and JSON shape (module docstring)."""

    @app.exception_handler(InputError)
    async def _input(_: Request, exc: InputError) -> JSONResponse:
        return input_error_response(exc)

    @app.exception_handler(RequestValidationError)
    async def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        detail = []
        for e in exc.errors()[:50]:
            field = loc_to_field(e.get("loc", ()))
            problem = str(e.get("msg", "invalid"))
            if e.get("type") == "json_invalid":
                loc = e.get("loc", ())
                field = "body"
                problem = (f"malformed JSON at character {loc[-1] if loc else '?'}: "
                           + str((e.get("ctx") or {}).get("error", problem)))
            detail.append({"field": field, "problem": problem, "value": short(e.get("input"))})
        first = detail[0] if detail else {"field": "body", "problem": "invalid"}
        return JSONResponse(status_code=422, content=error_body(
            "invalid_input", f"{first['field']}: {first['problem']}", detail))

    @app.exception_handler(SessionNotFound)
    async def _no_session(_: Request, exc: SessionNotFound) -> JSONResponse:
        return JSONResponse(status_code=404, content=error_body(
            "not_found", str(exc),
            [{"field": "session_id", "problem": "unknown session", "value": short(exc.session_id)}]))

    @app.exception_handler(ItemNotFound)
    async def _no_item(_: Request, exc: ItemNotFound) -> JSONResponse:
        return JSONResponse(status_code=404, content=error_body(
            "not_found", str(exc), [{"field": exc.field, "problem": exc.problem, "value": short(exc.value)}]))

    @app.exception_handler(RoundConflict)
    async def _round_conflict(_: Request, exc: RoundConflict) -> JSONResponse:
        return JSONResponse(status_code=409, content=error_body(
            "conflict", str(exc), [{"field": exc.field, "problem": exc.problem, "value": short(exc.value)}]))

    @app.exception_handler(ConflictError)
    async def _conflict(_: Request, exc: ConflictError) -> JSONResponse:
        return JSONResponse(status_code=409, content=error_body("conflict", str(exc)))

    @app.exception_handler(SolverNotAvailableError)
    async def _solver_missing(_: Request, exc: SolverNotAvailableError) -> JSONResponse:
        log.warning("solver not available: %s", exc)
        return JSONResponse(status_code=503, content=error_body("solver_unavailable", str(exc)),
                            headers={"Retry-After": "60"})

    @app.exception_handler(SolverError)
    async def _solver_failed(_: Request, exc: SolverError) -> JSONResponse:
        log.warning("solver failed: %s", exc)
        return JSONResponse(status_code=502, content=error_body("solver_failed", str(exc)))

    @app.exception_handler(PolicyOptError)
    async def _policyopt(_: Request, exc: PolicyOptError) -> JSONResponse:
        log.exception("policyopt error", exc_info=exc)
        return JSONResponse(status_code=500, content=error_body(type(exc).__name__, str(exc)))

    @app.exception_handler(StarletteHTTPException)
    async def _http(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        if isinstance(exc, _BodyError):
            return input_error_response(exc.input_error)
        codes = {400: "bad_request", 404: "not_found", 405: "method_not_allowed", 413: "payload_too_large"}
        return JSONResponse(status_code=exc.status_code, headers=getattr(exc, "headers", None),
                            content=error_body(codes.get(exc.status_code, "http_error"), str(exc.detail)))

    @app.exception_handler(Exception)
    async def _internal(_: Request, exc: Exception) -> JSONResponse:
        log.exception("unhandled error", exc_info=exc)
        return JSONResponse(status_code=500, content=error_body("internal_error", f"{type(exc).__name__}: {exc}"))
