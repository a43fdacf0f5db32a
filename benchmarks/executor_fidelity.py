"""Simulator against executor on ``--example multi``: throughput table × round model, side by side.

Runs ``policyopt run --example multi --cluster cpu1=2,cpu2=2 --policy max_min_fairness
--round-seconds 3`` once per variant of ``--variants`` (``NAME=PATH``: ``--throughputs PATH``;
``NAME=busy``: ``--profile busy``, measured at the start of the run with every slot busy),
``--repeats`` times, interleaved (variant A, variant B, variant A, …), so every variant sees the
same machine load. Each finished run is simulated with the table its policy used and with the rates
the run itself measured, under both round models of :mod:`policyopt.executor.fidelity`
(``nominal``: rounds of the lease length, start-up and stop costs; ``rounds``: the run's measured
round duration and launch cost). One row per (run, simulated table, model): the measured and
simulated makespan and their difference in percent of the simulated one, and the mean absolute
per-job JCT difference (a table with measured ``configurations``, from ``--profile busy|schedule``,
is simulated with them and, side by side, without them: "one rate per type"; ``priced``: the
job-rounds its exact / shared / table rule priced); and the machine's
1-minute load average (other users' processes included) while the table was profiled
(``--profile busy|schedule``) and during the run's rounds.
``--states`` re-simulates finished runs (their state files) instead.

    nice python benchmarks/executor_fidelity.py --repeats 2 --csv fidelity.csv
    nice python benchmarks/executor_fidelity.py --ray --round-seconds 5   # 3-node Ray test cluster

Default variants: ``alone`` (the shipped ``multi_throughputs.json``, measured one job at a time)
and ``busy`` (``--profile busy``).
"""
from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import pandas as pd

from policyopt.executor.fidelity import MODELS, compare, simulate_run
from policyopt.executor.report import build_report
from policyopt.executor.spec import example_throughputs_path
from policyopt.executor.state import ExecutorState

CLUSTER, POLICY = "cpu1=2,cpu2=2", "max_min_fairness"


def run_once(spec: str, work: Path, round_seconds: float, ray_address: str | None = None) -> tuple[Path, float]:
    """One executor run of the example with the table ``spec`` (a path, ``busy`` or ``schedule``),
    on the Ray cluster at ``ray_address`` if given; its state file and wall seconds (profiling
    included)."""
    state = work / "state.sqlite"
    table = ["--profile", spec] if spec in ("busy", "schedule") else ["--throughputs", spec]
    ray = ["--backend", "ray", "--ray-address", ray_address, "--ray-resource-prefix", "pw:"] if ray_address else []
    cmd = [sys.executable, "-m", "policyopt.executor.cli", "run", "--example", "multi", "--cluster", CLUSTER,
           "--policy", POLICY, "--round-seconds", str(round_seconds), *table, *ray,
           "--state", str(state), "--output", str(work / "out"), "--no-fidelity", "--quiet"]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True)
    return state, time.perf_counter() - t0


def rows_for(state: Path, label: str) -> list[dict[str, Any]]:
    """Simulate the run in ``state`` with its own table and with its measured rates, both models."""
    st = ExecutorState(state)
    report = build_report(st)
    table = (st.get("throughputs") or {})["table"]
    st.close()
    loads = [r["load_average"] for r in report["rounds"] if r.get("load_average") is not None]
    profiled = (table.get("meta") or {}).get("load_average") or {}
    at_profile = [v for v in profiled.values() if v is not None]
    load = {"load_profile": sum(at_profile) / len(at_profile) if at_profile else None,
            "load_run": sum(loads) / len(loads) if loads else None}
    out = []
    sims = [("its table", False, True), ("measured in the run", True, True)]
    if table.get("configurations"):  # side by side: the same table without its per-configuration rates
        sims.insert(1, ("its table, one rate per type", False, False))
    for name, measured, configurations in sims:
        for model in MODELS:
            c = compare(report, simulate_run(report, table, model=model, measured_throughputs=measured,
                                             configurations=configurations))
            out.append({"run": label, "simulated with": name, "model": model,
                        "measured_s": c["makespan"]["measured"], "simulated_s": c["makespan"]["simulated"],
                        "makespan_diff_pct": c["makespan"]["difference_pct"],
                        "mean_abs_jct_diff_pct": c["mean_abs_jct_difference_pct"], **load,
                        "priced": "/".join(str(v) for v in (c.get("configuration_rates") or {}).values())})
    return out


def ray_cluster() -> Any:
    """Ray's multi-node test cluster on this machine, as in ``tests/test_executor_ray_nodes.py``: the
    head offers ``pw:cpu1`` and ``pw:cpu2``, node B ``pw:cpu1``, node C ``pw:cpu2``."""
    from ray.cluster_utils import Cluster

    mem = 80 * 2**20
    cluster = Cluster(initialize_head=True, head_node_args={
        "num_cpus": 1, "resources": {"pw:cpu1": 1, "pw:cpu2": 1}, "object_store_memory": mem,
        "include_dashboard": False})
    cluster.add_node(num_cpus=1, resources={"pw:cpu1": 1}, object_store_memory=mem)
    cluster.add_node(num_cpus=1, resources={"pw:cpu2": 1}, object_store_memory=mem)
    cluster.wait_for_nodes()
    return cluster


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--variants", nargs="+", metavar="NAME=PATH|busy|schedule",
                    default=[f"alone={example_throughputs_path('multi')}", "busy=busy"])
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--round-seconds", type=float, default=3.0)
    ap.add_argument("--states", nargs="*", default=None, help="re-simulate these finished runs, run nothing")
    ap.add_argument("--keep", default=None, help="keep the runs' state files in this directory")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--ray", action="store_true", help="run on a 3-node Ray test cluster (--backend ray)")
    args = ap.parse_args()
    variants = dict(item.split("=", 1) for item in args.variants)
    rows: list[dict[str, Any]] = []
    if args.states is not None:
        for s in args.states:
            rows += rows_for(Path(s), "/".join(Path(s).parts[-3:-1]))  # e.g. KEEP/schedule-0
    else:
        base = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="fidelity-"))
        cluster = ray_cluster() if args.ray else None
        try:
            for r in range(args.repeats):
                for name, spec in variants.items():
                    work = base / f"{name}-{r}"
                    work.mkdir(parents=True, exist_ok=True)
                    state, wall = run_once(spec, work, args.round_seconds, cluster.address if cluster else None)
                    new = rows_for(state, f"{name} #{r} ({wall:.0f} s wall)")
                    print(pd.DataFrame(new).to_string(index=False, float_format=lambda v: f"{v:.1f}"), flush=True)
                    rows += new
        finally:
            if cluster is not None:
                cluster.shutdown()
    frame = pd.DataFrame(rows)
    print()
    print(frame.to_string(index=False, float_format=lambda v: f"{v:.1f}"))
    if args.csv:
        frame.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
