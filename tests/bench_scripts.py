"""Loading a script of ``benchmarks/`` as a module, for the tests that check it."""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"


def load_benchmark(filename: str, module_name: str) -> ModuleType:
    """``benchmarks/filename`` executed as module ``module_name`` (registered only while it runs, so
    that its dataclasses resolve)."""
    spec = importlib.util.spec_from_file_location(module_name, BENCHMARKS / filename)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    return module
