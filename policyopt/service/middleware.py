"""The service's outer ASGI guard: API key and request body size, before routing or parsing."""
from __future__ import annotations

import hmac
import json
from typing import Any, Awaitable, Callable, MutableMapping

from fastapi import HTTPException

__all__ = ["GuardMiddleware", "PUBLIC_PATHS", "error_body"]

#: paths served without an API key
PUBLIC_PATHS = frozenset({"/v1/health", "/openapi.json", "/docs", "/docs/oauth2-redirect", "/redoc"})

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


#: after a request body at least this large, free memory is handed back to the system
RELEASE_AFTER_BYTES = 4 * 1024 * 1024


def release_memory() -> None:
    """Return the heap's free pages to the operating system (glibc ``malloc_trim``): a large
    request's parse leaves tens of MB free but resident; elsewhere nothing happens."""
    import ctypes
    import ctypes.util
    import gc

    gc.collect()
    name = ctypes.util.find_library("c")
    if not name:
        return
    try:
        ctypes.CDLL(name).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        return


def error_body(code: str, message: str, detail: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """Every error response: ``{"error": CODE, "message": TEXT, "detail": [{"field", "problem", "value"}]}``."""
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

    async def _reply(self, send: Send, status: int, body: dict[str, Any],
                     extra: tuple[tuple[bytes, bytes], ...] = ()) -> None:
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
                    ((b"www-authenticate", b"ApiKey"),))
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
                await self._reply(send, 413, too_large, ((b"connection", b"close"),))
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
                await self._reply(send, 413, too_large, ((b"connection", b"close"),))
        finally:
            if seen >= RELEASE_AFTER_BYTES:
                release_memory()

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
