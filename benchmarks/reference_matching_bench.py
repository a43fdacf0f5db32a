"""Gavel's reference-model matching vs our matrix completion on held-out Gavel colocation data.

For each (number of reference types, profiling percentage) and seed: the reference types' pairs are
known, every other type only by its fingerprint; both methods predict the other measured cells of the
new types (:func:`policyopt.estimation.reference.reference_matching_errors`). Prints the absolute
error of normalized throughputs (median, p90, mean) per method.

Run: ``python benchmarks/reference_matching_bench.py [--seeds 3] [--references 8 13 20]
[--profiling 0.3 0.6 1.0]``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd

from policyopt.data import load_gavel
from policyopt.estimation.reference import reference_matching_errors

GAVEL = Path(__file__).resolve().parents[2] / "shared" / "data" / "gavel" / "simulation_throughputs.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--references", type=int, nargs="+", default=[8, 13, 20])
    ap.add_argument("--profiling", type=float, nargs="+", default=[0.3, 0.6, 1.0])
    ap.add_argument("--gavel", type=Path, default=GAVEL)
    args = ap.parse_args()
    g = load_gavel(args.gavel)
    rows = []
    for r in args.references:
        for p in args.profiling:
            runs = [reference_matching_errors(g, r, p, s) for s in range(args.seeds)]
            for method in ("reference matching", "matrix completion"):
                e = np.concatenate([x[method] for x in runs])
                rows.append({"references": r, "profiling": p, "method": method, "cells": e.size,
                             "median": np.median(e), "p90": np.percentile(e, 90), "mean": e.mean()})
    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
