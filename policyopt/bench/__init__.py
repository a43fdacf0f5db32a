"""Solver benchmarking harness (``policyopt bench``)."""
from .harness import (
    DEFAULT_BACKENDS,
    BenchConfig,
    gavel_problem,
    run_benchmark,
    summarize,
    write_results,
)

__all__ = ["DEFAULT_BACKENDS", "BenchConfig", "gavel_problem", "run_benchmark", "summarize", "write_results"]
