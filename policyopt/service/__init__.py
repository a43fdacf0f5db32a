"""HTTP policy service (``policyopt serve``): stateless solves and stateful cluster sessions.

``create_app(state_path, api_key=None, max_body_bytes=...)`` builds the FastAPI application;
sessions live in the SQLite file ``state_path``. Needs the ``service`` extra (fastapi, uvicorn,
httpx); the names below are imported lazily, so ``policyopt.service.cli`` (the ``serve``
sub-command) can be registered without the extra. See ``docs/service.md``.
"""
from __future__ import annotations

from .._lazy import lazy_exports

__all__ = ["create_app", "DEFAULT_MAX_BODY_BYTES", "Limits", "SessionManager", "Store", "ServiceThread"]

_WHERE = {"create_app": ".app", "DEFAULT_MAX_BODY_BYTES": ".limits", "Limits": ".limits",
          "SessionManager": ".sessions", "Store": ".store", "ServiceThread": ".server"}


__getattr__, __dir__ = lazy_exports(__name__, _WHERE, globals())
