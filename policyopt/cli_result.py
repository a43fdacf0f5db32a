"""How the command line reports a policy result: why it is not optimal (on stderr), a summary
table at 80 columns, and the exit status.

Exit status of ``policyopt solve`` (see ``docs/cli.md``): 0 optimal; 3 time limit (the policy's
fallback allocation is returned); 4 infeasible (fallback returned); 5 unbounded; 6 solver error;
7 any other non-optimal status (``optimal_inaccurate``: the backend's tolerances were not met).
``--allow-nonoptimal`` turns 3–7 into 0 (the result is written either way); 2 stays the code of
input errors.
"""
from __future__ import annotations

import logging
import shutil
import textwrap
from collections.abc import Mapping
from typing import Any

__all__ = ["EXIT_OTHER", "EXIT_STATUS", "exit_status", "explain", "print_summary", "report_notes", "wrap_rows"]

log = logging.getLogger("policyopt.cli")

#: result status → exit status of ``policyopt solve`` (``docs/cli.md``)
EXIT_STATUS: dict[str, int] = {"optimal": 0, "time_limit": 3, "infeasible": 4, "unbounded": 5, "error": 6,
                               "optimal_inaccurate": 7}
#: exit status of a non-optimal status not in :data:`EXIT_STATUS`
EXIT_OTHER = 7
_MAX_LINES = 10  # per kind of note; the rest is counted


def exit_status(status: str, allow_nonoptimal: bool = False) -> int:
    """The documented exit status of a result with ``status``."""
    code = EXIT_STATUS.get(status, EXIT_OTHER)
    return 0 if allow_nonoptimal else code


def _capped(lines: list[str], what: str) -> list[str]:
    if len(lines) <= _MAX_LINES:
        return lines
    return lines[:_MAX_LINES] + [f"... {len(lines) - _MAX_LINES} more {what} (see the result JSON)"]


#: pairs sharing workers for less of the time than this (solver noise, shown as 0.000) are not listed
PAIR_FRACTION_SHOWN = 5e-4


def _fraction(pair: Mapping[str, Any]) -> float:
    try:
        return float(pair.get("fraction", pair.get("time_fraction", 0.0)))
    except (TypeError, ValueError):
        return 0.0


def explain(out: Mapping[str, Any]) -> list[tuple[int, str]]:
    """``(logging level, sentence)`` for everything in a result dict (``PolicyResult.to_dict()``)
    that a reader of the status line alone would miss: the status and the policy's message, SLO
    violations, SLAs not met, POP lowering ``k``, the colocated pairs of a space-sharing result (those sharing
    workers at least :data:`PAIR_FRACTION_SHOWN` of the time)."""
    notes: list[tuple[int, str]] = []
    status = str(out.get("status", ""))
    message = str(out.get("message") or "")
    if message.startswith(status + ":"):  # fallback messages start with the status
        message = message[len(status) + 1:].strip()
    if status != "optimal":
        notes.append((logging.WARNING, f"status {status}: {message or 'the solver gave no reason'}"))
    elif message:
        notes.append((logging.INFO, message))
    slo = [f"SLO of job {v.get('job')} not met: needs {float(v.get('required_throughput', 0)):.4g} steps/s, "
           f"gets {float(v.get('best_effort_throughput', 0)):.4g} (short by "
           f"{100 * float(v.get('shortfall_fraction', 0)):.1f} %)"
           for v in out.get("slo_violations") or [] if isinstance(v, Mapping)]
    notes += [(logging.WARNING, s) for s in _capped(slo, "SLO violations")]
    sla = [f"SLA of job {r.get('job')} not met" + (f": {r['reason']}" if r.get("reason") else "")
           for r in out.get("sla_report") or [] if isinstance(r, Mapping) and r.get("met") is False]
    notes += [(logging.WARNING, s) for s in _capped(sla, "SLAs not met")]
    pop = out.get("pop")
    if isinstance(pop, Mapping) and pop.get("k_reason"):
        notes.append((logging.WARNING, f"POP: {pop['k_reason']}"))
    pairs = [f"{' + '.join(map(str, c.get('jobs', [])))} on {c.get('worker_type')}: {f:.3f} of the time"
             for c in out.get("colocated_allocation") or [] if isinstance(c, Mapping)
             if (f := _fraction(c)) >= PAIR_FRACTION_SHOWN]
    if pairs:
        notes.append((logging.INFO, f"{len(pairs)} colocated pair(s) share workers:"))
        notes += [(logging.INFO, "  " + s) for s in _capped(pairs, "pairs")]
    return notes


def report_notes(out: Mapping[str, Any]) -> None:
    """Log :func:`explain`'s notes (stderr through the ``policyopt`` logger)."""
    for level, text in explain(out):
        log.log(level, text)


def wrap_rows(rows: list[tuple[str, str]], width: int | None = None) -> str:
    """``name  text`` rows with ``text`` wrapped to the terminal width (80 when not a terminal),
    continuation lines indented under the text; a name longer than its column gets its own line."""
    width = width or shutil.get_terminal_size((80, 24)).columns
    col = min(max((len(n) for n, _ in rows), default=0), 28) + 2
    lines: list[str] = []
    for name, text in rows:
        body = textwrap.wrap(text, max(20, width - col)) or [""]
        if len(name) + 2 > col:
            lines.append(name)
            lines += [" " * col + b for b in body]
        else:
            lines.append(f"{name:<{col}}{body[0]}")
            lines += [" " * col + b for b in body[1:]]
    return "\n".join(lines)


def print_summary(result: Any, max_jobs: int = 40) -> None:
    """The allocation on stderr, one row per job: its non-zero time fractions per configuration and
    its steps/s, wrapped to the terminal (80 columns when not a terminal)."""
    from rich.console import Console
    from rich.table import Table

    console = Console(stderr=True, width=shutil.get_terminal_size((80, 24)).columns)
    objective = "-" if result.objective is None else f"{result.objective:.6g}"
    table = Table(title=f"{result.policy}: {result.status.value}, objective {objective}", title_justify="left")
    table.add_column("job", max_width=32)
    table.add_column("time fractions (configuration=fraction)", ratio=1)
    table.add_column("steps/s", justify="right", no_wrap=True)
    for job, alloc in list(result.allocation.items())[:max_jobs]:
        used = ", ".join(f"{c}={f:.3f}" for c, f in alloc.items() if f > 5e-4) or "-"
        table.add_row(job, used, f"{result.effective_throughputs.get(job, 0.0):.4g}")
    console.print(table)
    if len(result.allocation) > max_jobs:
        console.print(f"... {len(result.allocation) - max_jobs} more jobs")
    console.print("timings (s): " + ", ".join(f"{k}={v:.4f}" for k, v in result.timings.to_dict().items()))
