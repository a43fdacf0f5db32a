"""Server-wide limits of the HTTP service (no web-framework imports: the CLI reads the defaults)."""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Limits", "DEFAULT_MAX_BODY_BYTES"]

#: request bodies larger than this are refused with 413 (``--max-body-bytes``)
DEFAULT_MAX_BODY_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """``default_time_limit`` (s) applies when a request gives no ``time_limit``; a larger
    ``time_limit`` than ``max_time_limit`` is refused; sessions hold at most
    ``max_jobs_per_session`` active jobs and ``max_workers_per_session`` workers; ``pop_k`` may
    not leave fewer than ``min_jobs_per_pop_part`` jobs in a POP part (smaller parts cost more in
    per-part overhead, solved one after another, than they save); each session keeps the history
    of its last ``round_history`` rounds."""

    default_time_limit: float | None = 30.0
    max_time_limit: float | None = 60.0
    max_jobs_per_session: int = 100_000
    max_workers_per_session: int = 100_000
    min_jobs_per_pop_part: int = 32
    #: rounds of history kept per session (older rounds are deleted; GET .../rounds/{n} says so)
    round_history: int = 1000
