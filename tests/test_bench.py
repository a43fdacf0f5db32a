"""The benchmarking harness runs cases in child processes, times phases, checks agreement."""
from __future__ import annotations


from policyopt.bench import BenchConfig, run_benchmark, summarize, write_results


def test_harness_small(gavel, tmp_path) -> None:
    cfg = BenchConfig(policies=["max_min_fairness"], sizes=[8, 16], backends=["highs:simplex", "highs:ipm", "cvxpy"],
                      repeats=2)
    runs = run_benchmark(cfg)
    assert len(runs) == 2 * 3 * 2 and (runs["status"] == "optimal").all()
    for phase in ("build_s", "compile_s", "solve_s", "extract_s"):
        assert (runs[phase] >= 0).all()
    summ = summarize(runs)
    assert summ["agrees"].all()
    assert (summ["peak_rss_mb"] >= 0).all()
    paths = write_results(runs, summ, tmp_path)
    assert all(p.exists() for p in paths) and any(p.suffix == ".png" for p in paths)


def test_bench_cli(gavel, tmp_path) -> None:
    from policyopt.cli import main

    rc = main(["bench", "--policies", "max_min_fairness", "--sizes", "8", "--backends", "highs:ipm", "pulp:CBC",
               "--repeats", "1", "--output", str(tmp_path)])
    assert rc == 0
    assert (tmp_path / "summary.csv").read_text().count("\n") == 3
