"""The single-GPU LAS curve at the published scale, from the CSVs of separate runs.

Each rate of ``python -m policyopt.sim.experiments las_single --scale published --keep-arriving --rates R
--seeds 0,1,2`` was run on its own (one rate per command) and its CSV kept under ``docs/figures/sim/``
as ``las_single_published_gavel_semantics_*.csv``. This script concatenates the given CSVs (default:
all of those; one row per rate, seed and arm; a (rate, seed, arm) found in two files is an error;
:func:`policyopt.sim.curves.merge_runs`) and writes

* ``STEM.csv``: the rows, sorted by rate, seed and arm;
* ``STEM.png``: average JCT against the input rate, both arms (mean over the seeds at which both arms
  finished, bars min–max; :func:`policyopt.sim.curves.paired_rows`);
* ``STEM_ratio.png``: the ratio agnostic ÷ aware average JCT per seed against the input rate;

and prints, per rate, our ratio per seed next to Gavel's published curve (:data:`PUBLISHED`).

Gavel's curve is its artifact's figure of LAS on the continuous-single trace
(``scheduler/notebooks/figures/evaluation/continuous_jobs/single_gpu_las_v100=36_p100=36_k80=36.pdf``
in ``stanford-futuredata/gavel``, drawn by ``continuous_jobs.ipynb`` with ``sns.lineplot(ci='sd')``:
36 GPUs per type, average JCT of jobs 4,000–5,000, seeds 0–2). The values were read from the PDF's
vector data: each mean is the middle of the curve's standard-deviation band, each standard deviation
its half-height, mapped through the axes' tick positions (0–8 jobs/hour, 0–100 hours). "LAS" is
Gavel's heterogeneity-agnostic ``max_min_fairness``, "Gavel" its ``max_min_fairness_perf``.

Usage: ``python benchmarks/las_single_curve.py [--dir docs/figures/sim] [--stem NAME] [CSV ...]``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from policyopt.errors import InputError
from policyopt.sim.curves import merge_runs, paired_rows
from policyopt.sim.plots import jct_vs_load_figure

PATTERN = "las_single_published_gavel_semantics_*.csv"
ARMS = ("agnostic", "aware")

#: Gavel's published curve: rate (jobs/hour) -> arm -> (mean, standard deviation over seeds 0-2) in hours
PUBLISHED: dict[float, dict[str, tuple[float, float]]] = {
    0.4: {"agnostic": (22.7, 1.7), "aware": (17.4, 1.0)},
    0.8: {"agnostic": (22.8, 1.7), "aware": (17.4, 1.0)},
    1.2: {"agnostic": (22.8, 1.7), "aware": (17.5, 1.0)},
    1.6: {"agnostic": (23.0, 1.6), "aware": (17.4, 0.9)},
    2.0: {"agnostic": (22.8, 1.8), "aware": (17.0, 0.7)},
    2.4: {"agnostic": (22.9, 1.6), "aware": (16.3, 0.7)},
    2.8: {"agnostic": (22.9, 1.8), "aware": (15.8, 0.8)},
    3.2: {"agnostic": (22.9, 1.7), "aware": (15.7, 1.0)},
    3.6: {"agnostic": (23.0, 1.7), "aware": (15.9, 1.2)},
    4.0: {"agnostic": (22.9, 1.7), "aware": (16.3, 1.4)},
    4.4: {"agnostic": (23.2, 1.8), "aware": (16.8, 1.6)},
    4.8: {"agnostic": (34.8, 6.9), "aware": (18.0, 1.8)},
    5.2: {"agnostic": (60.1, 8.5), "aware": (20.5, 1.6)},
    5.6: {"agnostic": (91.3, 7.1), "aware": (26.4, 2.7)},
    6.0: {"aware": (37.6, 5.9)},
}


def merged(directory: Path, stem: str, files: list[Path] | None = None) -> pd.DataFrame:
    """Every row of ``files`` (default: the per-rate CSVs under ``directory``, the merged ``stem.csv``
    itself excluded), sorted by rate, seed and arm; :class:`InputError` when there is none or a
    (rate, seed, arm) is in two files."""
    if not files:
        files = sorted(p for p in directory.glob(PATTERN) if p.stem != stem)
    if not files:
        raise InputError("dir", str(directory), f"no {PATTERN} under it")
    return merge_runs(files)


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
    try:
        df = merged(args.dir, args.stem, args.csv)
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    df.to_csv(args.dir / f"{args.stem}.csv", index=False)
    both = paired_rows(df, ARMS)
    jct_vs_load_figure(both, args.dir / f"{args.stem}.png", hue="arm",
                       title="LAS single-GPU, 36 GPUs per type, jobs 4,000-5,000, seeds "
                             f"{', '.join(map(str, sorted(df['seed'].unique())))} (mean over the seeds both arms "
                             "finished, bars min-max)")
    r = ratios(df)
    jct_vs_load_figure(r.assign(seed=r["seed"].map(lambda s: f"seed {s}")), args.dir / f"{args.stem}_ratio.png",
                       y="ratio", hue="seed", ylabel="agnostic / aware average JCT",
                       title="LAS single-GPU at the published scale: ratio per seed (published: 3.5x)")
    print(published_table(df, r))


def published_table(df: pd.DataFrame, r: pd.DataFrame) -> str:
    """A markdown table per rate: Gavel's published means and ratio, our means (over the seeds whose two
    arms both finished) and our ratio per seed."""
    both = paired_rows(df, ARMS).pivot_table(index=["rate", "seed"], columns="arm", values="avg_jct_hours")
    means = both.groupby(level="rate").mean()
    per_seed = r.pivot(index="rate", columns="seed", values="ratio")
    lines = ["| rate | published agnostic / aware (h) | published ratio | ours agnostic / aware (h) | ours per seed |",
             "|---|---|---|---|---|"]
    for rate in means.index:
        pub = PUBLISHED.get(round(float(rate), 1), {})
        agn, aw = pub.get("agnostic"), pub.get("aware")
        pub_s = f"{agn[0] if agn else '–'} / {aw[0] if aw else '–'}"
        pub_r = f"{agn[0] / aw[0]:.2f}" if agn and aw else "–"
        ours = f"{means.loc[rate, 'agnostic']:.1f} / {means.loc[rate, 'aware']:.1f}"
        seeds = " / ".join("–" if pd.isna(v) else f"{v:.2f}" for v in per_seed.loc[rate])
        lines.append(f"| {rate} | {pub_s} | {pub_r} | {ours} | {seeds} |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
