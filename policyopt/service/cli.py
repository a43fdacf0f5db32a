"""``policyopt serve``: run the HTTP policy service with uvicorn."""
from __future__ import annotations

import argparse
import os

from policyopt.errors import InputError

__all__ = ["add_subparser", "serve"]

API_KEY_ENV = "POLICYOPT_API_KEY"


def serve(args: argparse.Namespace) -> int:
    """Start uvicorn on ``args.host:args.port`` with the app over ``args.state``."""
    try:
        import uvicorn

        from .app import create_app
    except ModuleNotFoundError as exc:  # the optional extra is missing
        raise InputError("serve", exc.name, "the HTTP service needs: pip install 'policyopt[service]'") from None
    from .limits import Limits

    if not 0 <= args.port <= 65535:
        raise InputError("--port", args.port, "must lie in 0..65535")
    if args.max_body_bytes < 1:
        raise InputError("--max-body-bytes", args.max_body_bytes, "must be a positive number of bytes")
    if args.max_time_limit <= 0 or args.default_time_limit <= 0:
        raise InputError("--max-time-limit/--default-time-limit", [args.max_time_limit, args.default_time_limit],
                         "must be positive seconds")
    if args.default_time_limit > args.max_time_limit:
        raise InputError("--default-time-limit", args.default_time_limit, "must not exceed --max-time-limit")
    api_key = args.api_key or os.environ.get(API_KEY_ENV) or None
    app = create_app(args.state, api_key=api_key, max_body_bytes=args.max_body_bytes,
                     limits=Limits(default_time_limit=args.default_time_limit, max_time_limit=args.max_time_limit))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def add_subparser(sub: argparse._SubParsersAction) -> None:
    """Register ``policyopt serve``."""
    from .limits import DEFAULT_MAX_BODY_BYTES

    p = sub.add_parser("serve", help="run the HTTP policy service (FastAPI + uvicorn)",
                       description="Serve POST /v1/solve, GET /v1/policies and stateful cluster sessions persisted "
                                   "in SQLite (docs/service.md). OpenAPI schema at /openapi.json.")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--state", default="policyopt-state.sqlite", help="SQLite file holding sessions (created if missing)")
    p.add_argument("--api-key", dest="api_key", default=None,
                   help=f"require header X-API-Key with this value (or set ${API_KEY_ENV})")
    p.add_argument("--max-body-bytes", dest="max_body_bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help=f"refuse larger request bodies with 413 (default {DEFAULT_MAX_BODY_BYTES})")
    p.add_argument("--default-time-limit", dest="default_time_limit", type=float, default=30.0,
                   help="solver time limit (s) when a request gives none (default 30)")
    p.add_argument("--max-time-limit", dest="max_time_limit", type=float, default=60.0,
                   help="largest time_limit (s) a request may ask for (default 60)")
    p.add_argument("--log-level", dest="log_level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=serve)
