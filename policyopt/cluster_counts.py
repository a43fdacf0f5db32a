"""The ``name=count,...`` shorthand for a cluster's worker counts (simulator and executor)."""
from __future__ import annotations

import re
from typing import Any, Mapping

import numpy as np

from .errors import InputError

__all__ = ["parse_cluster"]

_NAME = re.compile(r"^[a-z][a-z0-9_]*$")


def parse_cluster(spec: str | Mapping[str, Any], example: str = "v100=36,p100=36,k80=36") -> dict[str, int]:
    """``"v100=36,p100=36,k80=36"`` (or a mapping) → ``{"v100": 36, "p100": 36, "k80": 36}``, order kept.

    Worker type names are lowercase (``[a-z][a-z0-9_]*``), counts non-negative integers, no name
    twice, at least one worker in all; every error is an :class:`InputError` on ``cluster`` or
    ``cluster.<name>`` (``example`` is shown in the message for a malformed string)."""
    items: list[tuple[str, Any]]
    if isinstance(spec, Mapping):
        items = [(str(k), v) for k, v in spec.items()]
    elif isinstance(spec, str) and spec.strip():
        items = []
        for part in spec.split(","):
            name, sep, value = part.strip().partition("=")
            if not sep or not name.strip():
                raise InputError("cluster", spec, f"must look like {example}")
            items.append((name.strip(), value.strip()))
    else:
        raise InputError("cluster", spec, f"must look like {example}")
    out: dict[str, int] = {}
    for name, value in items:
        if not _NAME.match(name):
            raise InputError(f"cluster.{name}", name, "worker type names are lowercase, e.g. v100, cpu1, h100")
        if name in out:
            raise InputError(f"cluster.{name}", value, "worker type listed twice")
        ok = (isinstance(value, (int, np.integer)) and not isinstance(value, bool)) or \
            (isinstance(value, str) and value.isdigit())
        if not ok or int(value) < 0:
            raise InputError(f"cluster.{name}", value, "must be a non-negative integer")
        out[name] = int(value)
    if sum(out.values()) == 0:
        raise InputError("cluster", spec, "the cluster needs at least one worker")
    return out
