"""HTTP policy service (``policyopt serve``): stateless solves and stateful cluster sessions.

``create_app(state_path, api_key=None, max_body_bytes=...)`` builds the FastAPI application;
sessions live in the SQLite file ``state_path``. Needs the ``service`` extra (fastapi, uvicorn,
httpx); the names below are imported lazily, so ``policyopt.service.cli`` (the ``serve``
sub-command) can be registered without the extra. See ``docs/service.md``.
"""
from __future__ import annotations

import importlib
from typing import Any

__all__ = ["create_app", "DEFAULT_MAX_BODY_BYTES", "Limits", "SessionManager", "Store", "ServiceThread"]

_WHERE = {"create_app": ".app", "DEFAULT_MAX_BODY_BYTES": ".limits", "Limits": ".limits",
          "SessionManager": ".sessions", "Store": ".store", "ServiceThread": ".server"}


def __getattr__(name: str) -> Any:
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name], __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
