"""Generate ``docs/cli.md`` (every command's ``--help``) from the argparse parser itself.

    python -m policyopt.cli_reference > docs/cli.md

``tests/test_cli_reference.py`` fails when the committed page is out of date.
"""
from __future__ import annotations

import argparse
import os

from .cli import build_parser

HEADER = """# Command reference

Generated from the parser by `python -m policyopt.cli_reference > docs/cli.md`; a test checks
that it is current. `python -m policyopt` is the same command.

Global options (before the command): `--plugin MODULE_OR_FILE` imports a module or a `.py` file
that registers policies (repeatable; also `$POLICYOPT_PLUGINS`, comma-separated); `-q` / `-qq`
show only warnings / errors on stderr, `-v` adds debug messages; `--version`.

Results go to stdout, messages to stderr. Errors print one line (`policyopt: error: FIELD: PROBLEM
(got VALUE)`) and exit with status 2; when stdout's reader goes away (`policyopt ... | head`) the
command stops quietly with status 141.

`policyopt solve` writes the result either way and says on stderr why it is not optimal (the
policy's message, SLOs not met, SLAs not met, POP lowering `k`, colocated pairs); its exit status
is the result's status:

| exit status | result status | what was returned |
|---|---|---|
| 0 | `optimal` | the optimum |
| 2 | — | nothing: an input error (one line on stderr) |
| 3 | `time_limit` | the solver's best feasible point unless the isolated allocation dominates it, else the policy's fallback allocation |
| 4 | `infeasible` | the policy's fallback allocation (e.g. best effort for SLOs) |
| 5 | `unbounded` | the policy's fallback allocation |
| 6 | `error` | the policy's fallback allocation (the solver failed) |
| 7 | `optimal_inaccurate`, `stopped`, or any other non-optimal status | the solver's point without a proof of optimality (the message says why) |

`--allow-nonoptimal` makes 3–7 exit with 0 (for scripts that read the status from the JSON).
"""


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions:  # noqa: SLF001 - argparse offers no public accessor
        if isinstance(action, argparse._SubParsersAction):  # noqa: SLF001
            return dict(action.choices)
    return {}


def render() -> str:
    os.environ["COLUMNS"] = "100"
    parser = build_parser()
    out = [HEADER]
    for name, sub in _subparsers(parser).items():
        out.append(f"\n## policyopt {name}\n\n```text\n{sub.format_help().rstrip()}\n```\n")
        for sname, ssub in _subparsers(sub).items():
            out.append(f"\n### policyopt {name} {sname}\n\n```text\n{ssub.format_help().rstrip()}\n```\n")
    return "".join(out)


if __name__ == "__main__":  # pragma: no cover
    print(render(), end="")
