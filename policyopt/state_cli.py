"""``policyopt state``: check, back up and repair a state file (the service's ``--state`` or the
executor's ``--state``) — see :mod:`policyopt.state_file`."""
from __future__ import annotations

import argparse
import json

__all__ = ["add_subparser"]


def _run(args: argparse.Namespace) -> int:
    from .state_file import backup, check_state_file, repair

    if args.action == "check":
        check_state_file(args.file, (), command="policyopt state repair")
        print(f"{args.file}: ok")
    elif args.action == "backup":
        if not args.output:
            from .errors import InputError

            raise InputError("output", None, "give the copy's path: policyopt state backup FILE COPY")
        out = backup(args.file, args.output)
        print(f"{args.file} -> {args.output}: {out['pages']} pages, {out['bytes']} bytes (online backup)")
    else:
        print(json.dumps(repair(args.file), indent=1))
    return 0


def add_subparser(sub: argparse._SubParsersAction) -> None:
    """Register ``policyopt state``."""
    p = sub.add_parser("state", help="check, back up (online) or repair an SQLite state file",
                       description="check: PRAGMA quick_check and the file's shape; backup: a consistent copy "
                                   "with SQLite's online backup API while a server or executor keeps writing; "
                                   "repair: salvage every readable row into a fresh file (the damaged one is "
                                   "kept as FILE.damaged-TIME).")
    p.add_argument("action", choices=["check", "backup", "repair"], help="what to do")
    p.add_argument("file", help="the state file (policyopt serve --state / policyopt run --state)")
    p.add_argument("output", nargs="?", default=None, help="backup: the copy's path (must not exist)")
    p.set_defaults(func=_run)
