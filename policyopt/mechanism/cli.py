"""CLI sub-command ``track-allocation``: how closely the round mechanism realizes an allocation.

Input: a JSON file ``{"allocation": {...}, "colocated": [...], "scale_factors": {...},
"worker_counts": {...}}`` (``colocated`` optional). Prints the tracking table.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from policyopt.errors import InputError
from policyopt.mechanism.tracking import format_tracking_table, track_allocation

__all__ = ["add_subparser", "run_track"]


def run_track(args: argparse.Namespace) -> int:
    """Run ``track_allocation`` on the JSON file named by ``args.allocation``."""
    path = Path(args.allocation)
    try:
        data: Any = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError("allocation", str(path), f"cannot read JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError("allocation", str(path), "top level must be an object")
    for key in ("allocation", "scale_factors", "worker_counts"):
        if key not in data:
            raise InputError(key, None, f"missing from {path}")
    rows = track_allocation(data["allocation"], data.get("colocated", []), data["scale_factors"],
                            data["worker_counts"], args.rounds, round_length=args.round_length,
                            work_conserving=not args.no_work_conserving)
    print(format_tracking_table(rows, args.round_length))
    return 0


def add_subparser(subparsers: Any) -> None:
    """Register ``track-allocation``: ``policyopt track-allocation ALLOCATION.json [--rounds R]``."""
    p = subparsers.add_parser(
        "track-allocation", help="realized vs allocated time fractions over rounds",
        description="Run the round mechanism on an allocation for --rounds rounds and print how far the "
                    "realized time fractions r/T are from the allocated ones X after 1, 2, 4, ... rounds "
                    "(largest and mean absolute difference over jobs and configurations).")
    p.add_argument("allocation", help="JSON file {\"allocation\": {job: {config: fraction}}, \"colocated\": "
                                      "[...] (optional), \"scale_factors\": {job: GPUs}, \"worker_counts\": "
                                      "{type: count}}")
    p.add_argument("--rounds", type=int, default=256, help="rounds to simulate (default 256)")
    p.add_argument("--round-length", type=float, default=360.0, help="seconds per round (default 360)")
    p.add_argument("--no-work-conserving", action="store_true",
                   help="do not give idle workers to jobs that are ahead of their allocation")
    p.set_defaults(func=run_track)
