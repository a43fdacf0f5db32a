"""``policyopt serve``: run the HTTP policy service with uvicorn."""
from __future__ import annotations

import argparse
import os
import sys

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
    if args.round_history < 1:
        raise InputError("--round-history", args.round_history, "must keep at least 1 round")
    if args.default_time_limit > args.max_time_limit:
        raise InputError("--default-time-limit", args.default_time_limit, "must not exceed --max-time-limit")
    if args.repair and args.new_state:
        raise InputError("--repair/--new-state", True, "give one of them")
    if _needs_reexec(args):
        _reexec_with_system_malloc(args.program_argv)
    api_key = _api_key(args)
    if args.repair or args.new_state:
        from policyopt.state_file import repair, set_aside

        if args.repair:
            out = repair(args.state)
            print(f"repaired {args.state}: {out['tables']}; the damaged file is {out['damaged_file']}",
                  file=sys.stderr)
        else:
            old = set_aside(args.state, "old")
            if old is not None:
                print(f"new empty state {args.state}; the previous file is {old}", file=sys.stderr)
    app = create_app(args.state, api_key=api_key, max_body_bytes=args.max_body_bytes,
                     limits=Limits(default_time_limit=args.default_time_limit, max_time_limit=args.max_time_limit,
                                   round_history=args.round_history))
    uvicorn.run(app, host=args.host, port=args.port, log_level=args.log_level)
    return 0


def _needs_reexec(args: argparse.Namespace) -> bool:
    """``--allocator system`` on Linux, started as a program (``policyopt serve``, ``python -m
    policyopt serve``: ``args.program_argv`` is set), and ``PYTHONMALLOC`` not chosen by the user."""
    return (args.allocator == "system" and sys.platform.startswith("linux") and "PYTHONMALLOC" not in os.environ
            and getattr(args, "program_argv", None) is not None)


def _reexec_with_system_malloc(argv: list[str]) -> None:
    """Replace this process (same pid) by ``python -m policyopt ARGV`` with ``PYTHONMALLOC=malloc``.

    Why: CPython's small-object allocator takes memory in 1 MiB arenas and gives an arena back only
    when every object in it is gone; a request that parses a large problem leaves arenas pinned by
    the few objects that outlive it (caches, log records, the next request's objects), so the
    server's resident memory creeps up with large requests. With the C allocator every freed block
    returns to glibc, and :func:`~policyopt.service.middleware.release_memory` (``malloc_trim``)
    hands the pages back to the system after each large request. ``MALLOC_ARENA_MAX=1`` (unless
    set): one heap for all threads. With a second heap (glibc gives request threads heaps of their
    own), the first large request served on a thread of that heap left ~8 MB resident for good, and
    the GIL serializes the threads' allocations anyway."""
    sys.stdout.flush()
    sys.stderr.flush()
    env = {"MALLOC_ARENA_MAX": "1", **os.environ, "PYTHONMALLOC": "malloc"}  # one heap to trim
    os.execve(sys.executable, [sys.executable, "-m", "policyopt", *argv], env)


def _api_key(args: argparse.Namespace) -> str | None:
    """The key from ``--api-key-file``, ``$POLICYOPT_API_KEY`` or (with a warning: other users
    see a process's arguments in ``ps``) ``--api-key``."""
    if args.api_key_file:
        from pathlib import Path

        try:
            key = Path(args.api_key_file).read_text().strip()
        except OSError as exc:
            raise InputError("--api-key-file", args.api_key_file, f"cannot be read: {exc.strerror}") from None
        if not key:
            raise InputError("--api-key-file", args.api_key_file, "is empty")
        return key
    if args.api_key:
        print(f"policyopt serve: warning: --api-key on the command line is visible to every user of this "
              f"machine (ps, /proc); set ${API_KEY_ENV} or use --api-key-file FILE instead", file=sys.stderr)
        return str(args.api_key)
    return os.environ.get(API_KEY_ENV) or None


def add_subparser(sub: argparse._SubParsersAction) -> None:
    """Register ``policyopt serve``."""
    from .limits import DEFAULT_MAX_BODY_BYTES

    p = sub.add_parser("serve", help="run the HTTP policy service (FastAPI + uvicorn)",
                       description="Serve POST /v1/solve, GET /v1/policies and stateful cluster sessions persisted "
                                   "in SQLite (docs/service.md). OpenAPI schema at /openapi.json.")
    p.add_argument("--host", default="127.0.0.1", help="interface to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=8000, help="TCP port (default 8000)")
    p.add_argument("--state", default="policyopt-state.sqlite",
                   help="SQLite file holding sessions (created if missing; a damaged or emptied file is refused)")
    p.add_argument("--api-key", dest="api_key", default=None,
                   help=f"require header X-API-Key with this value; prefer ${API_KEY_ENV} or --api-key-file "
                        "(a command-line argument is visible to other users in ps: a warning is printed)")
    p.add_argument("--api-key-file", dest="api_key_file", default=None, metavar="FILE",
                   help="read the API key from FILE (first line; keep it readable by you only)")
    p.add_argument("--repair", action="store_true",
                   help="salvage a damaged --state file's readable rows into a fresh one (the damaged file is "
                        "kept as FILE.damaged-TIME), then serve")
    p.add_argument("--new-state", dest="new_state", action="store_true",
                   help="move an existing --state file aside (FILE.old-TIME) and start with an empty one")
    p.add_argument("--max-body-bytes", dest="max_body_bytes", type=int, default=DEFAULT_MAX_BODY_BYTES,
                   help=f"refuse larger request bodies with 413 (default {DEFAULT_MAX_BODY_BYTES})")
    p.add_argument("--default-time-limit", dest="default_time_limit", type=float, default=30.0,
                   help="solver time limit (s) when a request gives none (default 30)")
    p.add_argument("--max-time-limit", dest="max_time_limit", type=float, default=60.0,
                   help="largest time_limit (s) a request may ask for (default 60)")
    p.add_argument("--round-history", dest="round_history", type=int, default=1000, metavar="N",
                   help="rounds of history kept per session (older ones are deleted; default 1000)")
    p.add_argument("--allocator", choices=["system", "python"], default="system",
                   help="memory allocator of the server process: system (default on Linux: the server "
                        "restarts itself once with PYTHONMALLOC=malloc, so the memory a large request used "
                        "goes back to the system after it) or python (CPython's own small-object allocator, "
                        "faster for small objects but its memory stays resident); an explicit "
                        "$PYTHONMALLOC is always kept")
    p.add_argument("--log-level", dest="log_level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])
    p.set_defaults(func=serve)
