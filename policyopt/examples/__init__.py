"""Built-in example problems (``policyopt solve --example NAME``)."""
from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..errors import UnknownNameError
from ..problem import Problem

__all__ = ["EXAMPLES", "load_example", "example_dict"]

EXAMPLES = {
    "small": "small.json",
    "gavel-small": "gavel_small.json",
}


def example_dict(name: str) -> dict[str, Any]:
    if name not in EXAMPLES:
        raise UnknownNameError("example", name, EXAMPLES)
    return json.loads(resources.files(__package__).joinpath(EXAMPLES[name]).read_text())


def load_example(name: str) -> Problem:
    """The built-in example problem ``name`` (see :data:`EXAMPLES`)."""
    return Problem.from_dict(example_dict(name))
