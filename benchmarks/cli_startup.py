"""Start-up time of the ``policyopt`` command against ``python -c "import policyopt"``.

Each repetition runs, in a fresh interpreter and interleaved (so machine load hits all alike):

* ``import``: ``python -c "import policyopt"``;
* ``--help``: ``python -m policyopt --help``;
* ``solve``: ``python -m policyopt solve --example small --policy max_min_fairness`` (a 0.01 s solve).

Reports the median wall time of each and the ratios to ``import``. Target: ``--help`` within 1.5×.

    python benchmarks/cli_startup.py --repeats 9
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

COMMANDS: dict[str, list[str]] = {
    "import": [sys.executable, "-c", "import policyopt"],
    "--help": [sys.executable, "-m", "policyopt", "--help"],
    "solve": [sys.executable, "-m", "policyopt", "solve", "--example", "small", "--policy", "max_min_fairness"],
}


def _wall(cmd: list[str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=9)
    args = ap.parse_args()
    for cmd in COMMANDS.values():  # warm the file cache once
        _wall(cmd)
    times: dict[str, list[float]] = {k: [] for k in COMMANDS}
    for _ in range(args.repeats):
        for name, cmd in COMMANDS.items():
            times[name].append(_wall(cmd))
    base = statistics.median(times["import"])
    print(f"{'command':<10} {'median s':>9} {'min s':>7} {'x import':>9}")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:<10} {med:9.3f} {min(ts):7.3f} {med / base:9.2f}")
    ratio = statistics.median(times["--help"]) / base
    print(f"\n--help / import = {ratio:.2f} (target <= 1.5): {'met' if ratio <= 1.5 else 'NOT met'}")


if __name__ == "__main__":
    main()
