"""The FIFO curve at the published scale next to Gavel's published one, from the CSVs of runs of
``python -m policyopt.sim.experiments fifo --scale published --keep-arriving [--rates ...]``.

Gavel's curve (:data:`PUBLISHED`) is its artifact's figure of FIFO on the continuous-single trace
(``scheduler/notebooks/figures/evaluation/continuous_jobs/single_gpu_fifo_v100=36_p100=36_k80=36.pdf``
in ``stanford-futuredata/gavel``, drawn by its notebook ``continuous_jobs.ipynb``: 36 GPUs per type,
average JCT of jobs 4,000–5,000, seeds 0–2, ``sns.lineplot(ci='sd')``). The values were read from the
PDF's vector data: each mean is a marker's position (or, where the marker lies above the plotted range,
the middle of the standard-deviation band), each standard deviation the band's half-height, mapped
through the axes (0–6 jobs/hour, 0–100 hours). Gavel's arms are its greedy policies ``fifo``
(heterogeneity-agnostic), ``fifo_perf`` (each job, in arrival order, on the fastest type with room) and
``fifo_packed`` (the same with space sharing); ours are the FIFO LP (``fifo_agnostic``, ``fifo``) and
the aware LP over job pairs (see the ``fifo`` experiment).

Writes ``STEM.csv`` (our rows, sorted by rate, seed and arm; a (rate, seed, arm) in two files is an
error; :func:`policyopt.sim.curves.merge_runs`) and ``STEM.png`` (ours: mean over the seeds at which all
three arms finished, bars min–max, :func:`policyopt.sim.curves.paired_rows`; Gavel's: its published
means), and prints a markdown table per rate: Gavel's means and ratios, ours over the same seeds, and
our per-seed ratios.

Usage: ``python benchmarks/fifo_curve.py [--dir docs/figures/sim] [--stem NAME] CSV ...``.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import pandas as pd

from policyopt.errors import InputError
from policyopt.sim.curves import merge_runs, paired_rows
from policyopt.sim.plots import jct_vs_load_figure

#: Gavel's published curve: rate (jobs/hour) -> arm -> (mean, standard deviation over seeds 0-2) in hours
PUBLISHED: dict[float, dict[str, tuple[float, float]]] = {
    0.4: {"agnostic": (17.4, 1.0), "aware": (15.0, 1.0), "aware+ss": (15.0, 1.0)},
    0.8: {"agnostic": (17.4, 1.0), "aware": (15.1, 1.0), "aware+ss": (15.1, 1.0)},
    1.2: {"agnostic": (17.5, 1.0), "aware": (15.1, 1.0), "aware+ss": (15.1, 1.0)},
    1.6: {"agnostic": (17.5, 1.0), "aware": (15.2, 1.0), "aware+ss": (15.2, 1.0)},
    2.0: {"agnostic": (18.0, 1.1), "aware": (15.2, 1.0), "aware+ss": (15.2, 1.0)},
    2.4: {"agnostic": (18.1, 1.1), "aware": (15.2, 1.0), "aware+ss": (15.2, 1.0)},
    2.8: {"agnostic": (18.2, 1.3), "aware": (15.3, 1.0), "aware+ss": (15.3, 1.0)},
    3.2: {"agnostic": (19.7, 2.5), "aware": (15.5, 1.1), "aware+ss": (15.5, 1.1)},
    3.6: {"agnostic": (21.8, 3.2), "aware": (15.8, 1.2), "aware+ss": (15.8, 1.2)},
    4.0: {"agnostic": (23.8, 2.7), "aware": (16.4, 1.4), "aware+ss": (16.4, 1.4)},
    4.4: {"agnostic": (46.4, 16.1), "aware": (17.5, 1.5), "aware+ss": (17.5, 1.5)},
    4.8: {"agnostic": (92.0, 32.0), "aware": (24.1, 4.8), "aware+ss": (20.1, 1.0)},
    5.2: {"agnostic": (154.3, 37.9), "aware": (57.1, 29.6), "aware+ss": (41.7, 20.3)},
    5.6: {"aware": (108.3, 27.4), "aware+ss": (86.1, 27.0)},
    6.0: {"aware": (154.9, 25.0), "aware+ss": (131.9, 25.0)},
}
ARMS = ("agnostic", "aware", "aware+ss")


def merged(files: list[Path], stem: str) -> pd.DataFrame:
    """Every row of ``files`` (a merged ``stem.csv`` among them is skipped), sorted by rate, seed and arm;
    :class:`InputError` when there is none or a (rate, seed, arm) is in two files."""
    return merge_runs([p for p in files if p.stem != stem])


def table(df: pd.DataFrame) -> str:
    """Markdown: per rate, Gavel's means and ratios agnostic ÷ aware (÷ aware+ss), ours over the seeds that
    have all three arms, and our per-seed ratios."""
    # a seed still running at some arm is left out
    wide = paired_rows(df, ARMS).pivot_table(index=["rate", "seed"], columns="arm", values="avg_jct_hours")
    lines = ["| rate | Gavel agnostic / aware / aware+SS (h) | Gavel ÷ aware | Gavel ÷ aware+SS | seeds "
             "| ours agnostic / aware / aware+SS (h) | ours ÷ aware (per seed) | ours ÷ aware+SS (per seed) |",
             "|---|---|---|---|---|---|---|---|"]
    for rate, g in wide.groupby(level="rate"):
        pub = PUBLISHED.get(round(float(rate), 1), {})
        pm = {a: pub[a][0] for a in pub}
        gm = "/".join(f"{pm[a]:.1f}" if a in pm else "–" for a in ARMS)
        r1 = f"{pm['agnostic'] / pm['aware']:.2f}×" if {"agnostic", "aware"} <= set(pm) else "–"
        r2 = f"{pm['agnostic'] / pm['aware+ss']:.2f}×" if {"agnostic", "aware+ss"} <= set(pm) else "–"
        mean = g.mean()
        om = " / ".join(f"{mean[a]:.1f}" for a in ARMS)
        s1 = " / ".join(f"{x:.2f}" for x in g["agnostic"] / g["aware"])
        s2 = " / ".join(f"{x:.2f}" for x in g["agnostic"] / g["aware+ss"])
        seeds = ", ".join(str(int(s)) for s in g.index.get_level_values("seed"))
        lines.append(f"| {rate:g} | {gm} | {r1} | {r2} | {seeds} | {om} "
                     f"| **{mean['agnostic'] / mean['aware']:.2f}×** ({s1}) "
                     f"| **{mean['agnostic'] / mean['aware+ss']:.2f}×** ({s2}) |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dir", default="docs/figures/sim", type=Path)
    ap.add_argument("--stem", default="fifo_published_arriving_curve")
    ap.add_argument("csv", nargs="+", type=Path, help="CSVs of fifo --scale published runs")
    args = ap.parse_args()
    try:
        df = merged(args.csv, args.stem)
    except InputError as exc:
        raise SystemExit(f"error: {exc}") from None
    df.to_csv(args.dir / f"{args.stem}.csv", index=False)
    full = paired_rows(df, ARMS)
    pub = pd.DataFrame([{"rate": r, "seed": 0, "arm": f"Gavel: {a}", "avg_jct_hours": v[0]}
                        for r, arms in PUBLISHED.items() for a, v in arms.items()])
    ours = full.assign(arm="ours: " + full["arm"])[["rate", "seed", "arm", "avg_jct_hours"]]
    jct_vs_load_figure(pd.concat([ours, pub[pub["rate"] <= df["rate"].max() + 0.4]], ignore_index=True),
                       args.dir / f"{args.stem}.png", hue="arm",
                       title="FIFO single-GPU, 36 GPUs per type, jobs 4,000-5,000; ours: seeds "
                             f"{', '.join(map(str, sorted(df['seed'].unique())))} "
                             "(mean over the seeds all arms finished, bars min-max); Gavel: published means")
    print(table(df))


if __name__ == "__main__":
    main()
