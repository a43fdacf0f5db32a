"""benchmarks/gavel_sim_compare.py: the trace export, reading Gavel's output, the skip without Gavel,
and — where a Gavel checkout is given (``POLICYOPT_GAVEL_REPO``, its interpreter in
``POLICYOPT_GAVEL_PYTHON``) — the agreement of the two simulators on a small trace."""
from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
from bench_scripts import load_benchmark


@pytest.fixture(scope="module")
def bench() -> Any:
    return load_benchmark("gavel_sim_compare.py", "gavel_sim_compare")


def _parse_like_gavel(path: Path) -> list[tuple[Any, ...]]:
    """Gavel's ``utils.parse_trace`` field handling (ten tab-separated fields, ``int``/``float`` casts)."""
    out = []
    for line in path.read_text().splitlines():
        (job_type, command, working_directory, num_steps_arg, needs_data_dir, total_steps, scale_factor,
         priority_weight, slo, arrival) = line.split("\t")
        out.append((job_type, bool(int(needs_data_dir)), int(total_steps), int(scale_factor), float(priority_weight),
                    float(slo), float(arrival)))
    return out


def test_trace_export_reads_back_as_gavel_reads_it(bench, gavel, tmp_path: Path) -> None:
    from policyopt.sim.traces import gavel_trace, parse_job_type

    trace = gavel_trace(gavel, 40, 4.0, seed=3, multi_gpu=True)
    bench.write_gavel_trace(trace, tmp_path / "t.txt")
    rows = _parse_like_gavel(tmp_path / "t.txt")
    assert len(rows) == len(trace)
    keys = set(gavel.job_types)
    for j, (model, _, steps, sf, weight, slo, arrival) in zip(trace, rows):
        assert (model, sf) == parse_job_type(j.job_type) and (model, sf) in keys
        assert steps == j.steps and weight == j.weight and slo == -1.0 and arrival == j.arrival
    assert [r[-1] for r in rows] == sorted(r[-1] for r in rows)  # Gavel asserts sorted arrivals


def test_fractional_steps_are_refused(bench, tmp_path: Path) -> None:
    from policyopt.errors import InputError
    from policyopt.sim.traces import TraceJob

    with pytest.raises(InputError, match="steps"):
        bench.write_gavel_trace([TraceJob("0", 0.0, "ResNet-18 (batch size 32)#1", 1, 10.5)], tmp_path / "t.txt")


def test_gavel_output_parsing(bench) -> None:
    text = ("Job completion times:\nJob 3: 100.500\nJob 4 (high priority): 7.000\n"
            "Average job completion time: 53.750 seconds (0.01 hours)\nCluster utilization: 0.5\n")
    assert bench.parse_gavel_output(text) == (53.75, {3: 100.5, 4: 7.0})
    assert bench.parse_gavel_output("nothing") == (None, {})


def test_without_gavel_only_ours_runs(bench, gavel_dir, tmp_path: Path, capsys) -> None:
    assert bench.gavel_scheduler_dir(tmp_path) is None
    assert bench.main(["--gavel", str(tmp_path), "--jobs", "20", "--rate", "3", "--cluster", "v100=2,p100=2,k80=2",
                       "--arms", "aware"]) == 0
    out = capsys.readouterr().out
    assert "Gavel's simulator skipped: no Gavel simulator" in out
    row = [line for line in out.splitlines() if line.startswith("| aware | default |")]
    assert len(row) == 1 and row[0].split("|")[3].strip() == "-"  # no Gavel number


def test_ftf_arms_run_and_print_their_ratio(bench, gavel_dir, tmp_path: Path, capsys) -> None:
    """The finish-time-fairness arms (Gavel ``finish_time_fairness[_perf]``) run on our side, and their
    ratio is printed from the two rows."""
    assert bench.ARMS["ftf_aware"] == ("finish_time_fairness_perf", "finish_time_fairness")
    assert bench.ARMS["ftf_agnostic"] == ("finish_time_fairness", "finish_time_fairness_agnostic")
    out_json = tmp_path / "cmp.json"
    assert bench.main(["--gavel", str(tmp_path), "--jobs", "20", "--rate", "3", "--cluster", "v100=2,p100=2,k80=2",
                       "--arms", "ftf_aware,ftf_agnostic", "--json", str(out_json)]) == 0
    import json

    rows = {r["arm"]: r for r in json.loads(out_json.read_text())["rows"]}
    assert {r["ours_policy"] for r in rows.values()} == {"finish_time_fairness", "finish_time_fairness_agnostic"}
    a, b = (rows[k]["ours"]["avg_jct_s"] for k in ("ftf_aware", "ftf_agnostic"))
    out = capsys.readouterr().out
    assert f"ours (default): ftf_agnostic / ftf_aware average JCT = {b / a:.3f}" in out


def test_fifo_arms_are_the_fifo_experiments(bench, gavel_dir, tmp_path: Path, capsys) -> None:
    """The FIFO arms pair Gavel's ``fifo`` / ``fifo_perf`` / ``fifo_packed`` with the ``fifo`` experiment's
    arms (``fifo_ss``: the aware LP with its space sharing), and both ratios to the agnostic arm are printed."""
    import json

    from policyopt.sim.experiments import EXPERIMENTS

    exp = {a.label: a.config for a in EXPERIMENTS["fifo"].arms}
    assert bench.ARMS["fifo_aware"] == ("fifo_perf", exp["aware"]["policy"])
    assert bench.ARMS["fifo_agnostic"] == ("fifo", exp["agnostic"]["policy"])
    assert bench.ARMS["fifo_ss"] == ("fifo_packed", exp["aware+ss"]["policy"])
    assert bench.ARM_CONFIG["fifo_ss"] == {k: v for k, v in exp["aware+ss"].items() if k != "policy"}
    out_json = tmp_path / "cmp.json"
    assert bench.main(["--gavel", str(tmp_path), "--jobs", "20", "--rate", "6", "--cluster", "v100=1,p100=1,k80=1",
                       "--arms", "fifo_aware,fifo_ss,fifo_agnostic", "--json", str(out_json)]) == 0
    rows = {r["arm"]: r for r in json.loads(out_json.read_text())["rows"]}
    agn, ss = (rows[k]["ours"]["avg_jct_s"] for k in ("fifo_agnostic", "fifo_ss"))
    assert f"ours (default): fifo_agnostic / fifo_ss average JCT = {agn / ss:.3f}" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("POLICYOPT_GAVEL_REPO"),
                    reason="set POLICYOPT_GAVEL_REPO to a Gavel checkout (POLICYOPT_GAVEL_PYTHON: its interpreter)")
def test_agreement_with_gavels_simulator(bench, gavel_dir, tmp_path: Path) -> None:
    """60 single-GPU jobs on 4/4/4: the aware arm (our solve) and the agnostic arm solved as Gavel solves
    it (interior point) or at its closed-form optimum (``proportional``) within 5 % of Gavel's average JCT."""
    import json

    out = tmp_path / "cmp.json"
    assert bench.main(["--gavel", os.environ["POLICYOPT_GAVEL_REPO"], "--gavel-python",
                       os.environ.get("POLICYOPT_GAVEL_PYTHON", sys.executable), "--jobs", "60", "--rate", "3",
                       "--cluster", "v100=4,p100=4,k80=4", "--variants", "default,interior,proportional",
                       "--json", str(out)]) == 0
    rows = {(r["arm"], r["variant"]): r for r in json.loads(out.read_text())["rows"]}
    assert ("aware", "proportional") not in rows  # the variant applies to the agnostic arm only
    for key in (("aware", "default"), ("aware", "interior"), ("agnostic", "interior"), ("agnostic", "proportional")):
        assert rows[key]["gavel"]["status"] == "ok"
        assert abs(rows[key]["ours_over_gavel"] - 1.0) <= 0.05, (key, rows[key]["ours_over_gavel"])


def test_keep_arriving_trace_is_the_experiments_trace(bench, gavel) -> None:
    """``--keep-arriving K`` compares on the very trace ``experiments ... --keep-arriving`` simulates."""
    from policyopt.sim import experiments as ex

    exp = ex.scaled(ex.EXPERIMENTS["las_multi"], "published", jobs=30, rates=[2.0], keep_arriving=True)
    for chunks in (0, 2):
        ours = bench.continued_trace(gavel, 30, 2.0, 5, True, chunks)
        assert len(ours) == 30 * (1 + ex.KEEP_ARRIVING_EXTRA * chunks)
        if chunks:
            assert ours == ex._make_trace(exp, 5, 2.0, gavel, chunks)
    with pytest.raises(Exception, match="keep_arriving"):
        bench.main(["--jobs", "30", "--keep-arriving", "-1"])


def test_arm_overrides_merge_policy_options_of_arm_variant_and_command_line(bench) -> None:
    """``--ours policy_options=...`` keeps its options beside the arm's and the variant's (later wins)."""
    got = bench.arm_overrides("fifo_ss", "interior", {"policy_options": {"pair_threshold": 0.5, "fill": True},
                                                       "seed": 3})
    assert got["space_sharing"] is True and got["seed"] == 3
    assert got["policy_options"] == {"pair_top_k": 4, "solver": "cvxpy:CLARABEL", "fill": True, "pair_threshold": 0.5}
    assert bench.arm_overrides("aware", "default", {}) == {}
    assert bench.arm_overrides("aware", "interior", {})["policy_options"] == {"solver": "cvxpy:CLARABEL", "fill": False}


def _fake_gavel(tmp_path: Path) -> Path:
    """A folder laid out as Gavel's ``scheduler/`` whose ``utils`` draws jobs from the given ``rng`` only
    (the calls ``gavel_drawn_trace`` makes of Gavel's code), to test our side of the exchange."""
    d = tmp_path / "scheduler"
    (d / "scripts" / "drivers").mkdir(parents=True)
    (d / "scripts" / "drivers" / "simulate_scheduler_with_trace.py").write_text("")
    (d / "scheduler.py").write_text("")
    (d / "simulation_throughputs.json").write_text("{}")
    (d / "utils.py").write_text(
        "import types\n"
        "def read_all_throughputs_json_v2(path):\n"
        "    assert path == 'simulation_throughputs.json'\n"
        "    return {}\n"
        "def generate_job(throughputs, reference_worker_type, rng, job_id, fixed_job_duration,\n"
        "                 generate_multi_gpu_jobs, generate_multi_priority_jobs, SLO_rng):\n"
        "    sf = rng.choice([1, 2, 4, 8]) if generate_multi_gpu_jobs else 1\n"
        "    return types.SimpleNamespace(job_type='ResNet-18 (batch size 32)', scale_factor=sf,\n"
        "                                 total_steps=1000.0 * rng.random() + 0.25, duration=3600.0)\n")
    return d


def test_trace_drawn_by_gavels_generator(bench, tmp_path: Path) -> None:
    """``--trace-source gavel``: jobs numbered from 0 in arrival order, the first at 0, then Gavel's gaps
    (``random.Random(seed + 3)``, ``-log(1 - u) / (1 / lam)``), the jobs from ``random.Random(seed + 2)``,
    steps rounded up."""
    import math
    import random

    d = _fake_gavel(tmp_path)
    trace = bench.gavel_drawn_trace(d, sys.executable, 50, 2.6, 4, True)
    jobs, gaps = random.Random(), random.Random()
    jobs.seed(6)
    gaps.seed(7)
    t, lam = 0.0, 3600.0 / 2.6
    for i, j in enumerate(trace):
        sf = jobs.choice([1, 2, 4, 8])
        steps = 1000.0 * jobs.random() + 0.25
        assert (j.id, j.arrival, j.scale_factor, j.steps) == (str(i), t, sf, float(math.ceil(steps)))
        assert j.job_type == f"ResNet-18 (batch size 32)#{sf}"
        t = -math.log(1.0 - gaps.random()) / (1.0 / lam) + t
    (d / "utils.py").write_text("raise ImportError('no such module: psutil')\n")
    from policyopt.errors import InputError

    with pytest.raises(InputError, match="psutil"):
        bench.gavel_drawn_trace(d, sys.executable, 5, 2.6, 4, True)


def test_trace_source_gavel_without_gavel_is_skipped(bench, tmp_path: Path, capsys) -> None:
    assert bench.main(["--trace-source", "gavel", "--jobs", "20", "--arms", "aware"]) == 0
    assert "needs Gavel's code to draw the trace: skipped" in capsys.readouterr().out


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("POLICYOPT_GAVEL_REPO"),
                    reason="set POLICYOPT_GAVEL_REPO to a Gavel checkout (POLICYOPT_GAVEL_PYTHON: its interpreter)")
def test_drawn_trace_is_the_trace_gavels_simulator_generates(bench, tmp_path: Path) -> None:
    """Gavel's own ``Scheduler.simulate`` (generating jobs as its sweeps do, writing each to
    ``output_trace_file_name``) and ``gavel_drawn_trace`` give the same jobs and arrival times."""
    import subprocess

    sched = bench.gavel_scheduler_dir(os.environ["POLICYOPT_GAVEL_REPO"])
    python = os.environ.get("POLICYOPT_GAVEL_PYTHON", sys.executable)
    out = tmp_path / "live.txt"
    program = ("import scheduler, utils\n"  # (python -c: the working directory, Gavel's scheduler/, is on the path)
               "s = scheduler.Scheduler(utils.get_policy('fifo', solver='ECOS', seed=0),"
               " throughputs_file='simulation_throughputs.json', seed=1, time_per_iteration=360, simulate=True)\n"
               f"s.simulate({{'v100': 36, 'p100': 36, 'k80': 36}}, lam=3600.0 / 2.6, num_total_jobs=150,"
               f" generate_multi_gpu_jobs=True, output_trace_file_name={str(out)!r})\n")
    subprocess.run([python, "-c", program], cwd=sched, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    live = [line.rstrip("\n").split("\t") for line in out.read_text().splitlines()]
    drawn = bench.gavel_drawn_trace(sched, python, 150, 2.6, 1, True)
    assert len(live) == len(drawn) == 150
    for j, row in zip(drawn, live):
        assert j.job_type == f"{row[0]}#{row[6]}" and j.scale_factor == int(row[6])
        assert int(row[5]) <= j.steps <= int(row[5]) + 1  # Gavel writes the steps truncated, we round up
        assert abs(j.arrival - float(row[9])) <= 1e-6 * max(1.0, j.arrival)


def test_by_scale_factor_averages_the_jobs_both_report(bench) -> None:
    from policyopt.sim.traces import TraceJob

    trace = [TraceJob(str(i), float(i), f"ResNet-18 (batch size 32)#{sf}", sf, 10.0)
             for i, sf in enumerate([1, 8, 1, 8])]
    rows = bench.by_scale_factor({0: 10.0, 1: 100.0, 2: 30.0, 3: 50.0}, {0: 20.0, 1: 300.0, 2: 40.0}, trace)
    assert rows == [{"scale_factor": 1, "jobs": 2, "ours_avg_jct_s": 20.0, "gavel_avg_jct_s": 30.0},
                    {"scale_factor": 8, "jobs": 1, "ours_avg_jct_s": 100.0, "gavel_avg_jct_s": 300.0}]
