"""Convert Rubick's public artifact into ``benchmarks/data/rubick/`` (run once; the copy is kept).

    git clone https://github.com/AlibabaPAI/reconfigurable-dl-scheduler rubick
    python benchmarks/rubick_convert.py rubick

Reads the profile CSVs, the validation scripts and ``validation.md`` at the repository's HEAD
(via ``git show``) and writes ``samples.csv``, ``validation.json``, ``reported.csv``
(see :mod:`policyopt.perfmodel.rubick`).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from policyopt.perfmodel.rubick import convert_artifact

OUT = Path(__file__).resolve().parent / "data" / "rubick"


def main(argv: list[str] | None = None) -> int:
    """Convert the artifact of the repository given on the command line."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("repo", type=Path, help="a clone (or bare git directory) of the artifact")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)

    def read(path: str) -> str:
        return subprocess.run(["git", "-C", str(args.repo), "show", f"HEAD:{path}"],
                              check=True, capture_output=True, text=True).stdout

    print(convert_artifact(read, args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
