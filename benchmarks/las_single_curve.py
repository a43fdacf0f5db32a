"""The single-GPU LAS curve at the published scale, from the CSVs of separate runs.

Each rate of ``python -m policyopt.sim.experiments las_single --scale published --keep-arriving --rates R
--seeds 0,1,2`` was run on its own (one rate per command) and its CSV kept under ``docs/figures/sim/``
as ``las_single_published_gavel_semantics_*.csv``. This script concatenates the given CSVs (default:
all of those; one row per rate, seed and arm; a (rate, seed, arm) found in two files is an error) and
writes

* ``STEM.csv``: the rows, sorted by rate, seed and arm;
* ``STEM.png``: average JCT against the input rate, both arms (mean over the seeds, bars min–max);
* ``STEM_ratio.png``: the ratio agnostic ÷ aware average JCT per seed against the input rate.

Usage: ``python benchmarks/las_single_curve.py [--dir docs/figures/sim] [--stem NAME] [CSV ...]``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from policyopt.sim.plots import jct_vs_load_figure

PATTERN = "las_single_published_gavel_semantics_*.csv"


def merged(directory: Path, stem: str, files: list[Path] | None = None) -> pd.DataFrame:
    """Every row of ``files`` (default: the per-rate CSVs under ``directory``, the merged ``stem.csv``
    itself excluded)."""
    if not files:
        files = sorted(p for p in directory.glob(PATTERN) if p.stem != stem)
    if not files:
        raise SystemExit(f"no {PATTERN} under {directory}")
    df = pd.concat([pd.read_csv(p) for p in files], ignore_index=True)
    dup = df.duplicated(["rate", "seed", "arm"], keep=False)
    if dup.any():
        raise SystemExit(f"(rate, seed, arm) in two files: {df.loc[dup, ['rate', 'seed', 'arm']].values.tolist()}")
    return df.sort_values(["rate", "seed", "arm"]).reset_index(drop=True)


def ratios(df: pd.DataFrame) -> pd.DataFrame:
    """Agnostic ÷ aware average JCT per (rate, seed)."""
    wide = df.pivot_table(index=["rate", "seed"], columns="arm", values="avg_jct_hours")
    return (wide["agnostic"] / wide["aware"]).rename("ratio").reset_index()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="docs/figures/sim", type=Path)
    ap.add_argument("--stem", default="las_single_published_gavel_semantics_curve")
    ap.add_argument("csv", nargs="*", type=Path, help="the per-rate CSVs (default: every one under --dir)")
    args = ap.parse_args()
    df = merged(args.dir, args.stem, args.csv)
    df.to_csv(args.dir / f"{args.stem}.csv", index=False)
    jct_vs_load_figure(df, args.dir / f"{args.stem}.png", hue="arm",
                       title="LAS single-GPU, 36 GPUs per type, jobs 4,000-5,000, seeds "
                             f"{', '.join(map(str, sorted(df['seed'].unique())))} (min-max)")
    r = ratios(df)
    jct_vs_load_figure(r.assign(seed=r["seed"].map(lambda s: f"seed {s}")), args.dir / f"{args.stem}_ratio.png",
                       y="ratio", hue="seed", ylabel="agnostic / aware average JCT",
                       title="LAS single-GPU at the published scale: ratio per seed (published: 3.5x)")
    table = r.pivot(index="rate", columns="seed", values="ratio")
    print(table.to_string(float_format=lambda v: f"{v:.2f}"))


if __name__ == "__main__":
    main()
