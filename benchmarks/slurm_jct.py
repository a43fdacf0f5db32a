"""Average JCT of one workload under ``policyopt slurm`` against Slurm's own scheduling, measured
on the same machine in one run.

    python benchmarks/slurm_jct.py [--policies max_min_fairness finish_time_fairness]
                                   [--round-seconds 5] [--restart-seconds S|auto[+prior|+prior0][+late][+boundB] [...]]
                                   [--output DIR] [--workdir DIR]

For each arm a fresh local Slurm cluster (policyopt.slurm.localcluster: 2 nodes x 2 V100 + 2 nodes
x 2 K80, emulated GPU types) runs the demo workload (policyopt.slurm.demo: six real training jobs
of four zoo types on 1, 2 and 4 GPUs, all submitted at once):

* ``slurm``: the jobs are submitted plainly (``--gpus=N``, no hold) and Slurm's own scheduler
  (``sched/backfill``, FIFO priority) runs them wherever GPUs are free, unaware of GPU types;
* one arm per policy: the jobs are submitted held with the opt-in comment and ``policyopt slurm``
  drives them round by round.

JCT = Slurm's end time - the job's submit time as Slurm listed it right after ``sbatch`` (from
``squeue --json``; Slurm resets a requeued job's submit time, so the final record's would measure
from the last requeue). Where the time went, per arm: the GPU-seconds the jobs were ``RUNNING``
in Slurm and, of them, the seconds their starts took inside the jobs (interpreter, imports,
model build, checkpoint load: the running time beyond what their steps take at the table's
speeds, to which a demo job paces itself), the requeues, and the controller's ``squeue`` calls
per round, its stops and moves, and the GPUs its rounds left idle while a job waited.
``--restart-seconds`` runs each policy once per value of the controller's option of that name
(default ``0 auto``); a value may end in ``+prior`` (the table given to the controller carries
each job type's ``startup_seconds``, measured here before the arms by
:func:`policyopt.slurm.demo.measure_startup`: the first estimate under ``auto``), ``+prior0``
(it carries ``startup_seconds`` 0 for every type: ``auto`` then starts from nothing, as it did
before a start of unknown cost was taken to cost a round) and in ``+late``
(the controller runs with ``--no-early-rounds``) and ``+boundB`` (it runs with
``--deviation-bound B``, e.g. ``auto+boundinf``: pins never cut short, as before the bound). An
arm whose jobs do not finish within ``--timeout`` is reported as such. Writes
``DIR/slurm_jct.json`` and prints a table. The machine is shared and loaded: compare the arms of
one run, not numbers across runs.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from policyopt.slurm.demo import DEMO_THROUGHPUTS, DEMO_WORKLOAD, measure_startup, submit, write_throughputs
from policyopt.slurm.localcluster import LocalSlurm, slurm_missing
from policyopt.slurm.slurmcmd import Slurm


def _wait_done(cluster: LocalSlurm, ids: list[str], timeout: float) -> dict[str, Any]:
    slurm = Slurm(cluster.env)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        jobs = {j.job_id: j for j in slurm.jobs(["gpu"]) if j.job_id in ids}
        if all(j.finished for j in jobs.values()) and len(jobs) == len(ids):
            return jobs
        time.sleep(1.0)
    raise TimeoutError(f"jobs not finished within {timeout:.0f} s")


def startup_seconds(seconds: dict[str, float], steps: int, throughputs: dict[str, float]) -> float:
    """Seconds a job was ``RUNNING`` in Slurm beyond what its steps take at the table's speeds:
    ``Σ_t s_t - steps / v̄`` with ``v̄ = Σ_t s_t·v_t / Σ_t s_t`` (its speed averaged over the time on
    each type). A demo job paces its steps to the table exactly, so this is the time its starts
    took inside the job (interpreter, imports, model build, checkpoint load) and its stops."""
    total = sum(seconds.values())
    work = sum(s * throughputs[t] for t, s in seconds.items())
    return total - steps * total / work if work > 0 else total


def round_counts(report: dict[str, Any], gpus: int) -> dict[str, float]:
    """From the controller's report: ``stops`` (running jobs requeued and not placed again in the
    round), ``moves`` (requeued and placed on another type), ``starts`` (placements), and
    ``idle_gpus_per_round``: the GPUs the rounds' decisions left unused, averaged over the rounds
    in which some job waited (decided nowhere)."""
    stops = moves = starts = 0
    idle: list[int] = []
    for r in report["rounds"]:
        placed = {jid for jid, _ in r["actions"]["place"]}
        requeued = set(r["actions"]["requeue"])
        moves += len(requeued & placed)
        stops += len(requeued - placed)
        starts += len(placed)
        live = [j for j, row in report["jobs"].items() if row["end_time"] is None or row["end_time"] > r["time"]]
        if any(j not in r["decided"] for j in live):
            idle.append(gpus - sum(d["gpus"] for d in r["decided"].values()))
    return {"stops": stops, "moves": moves, "starts": starts,
            "idle_gpus_per_round": sum(idle) / len(idle) if idle else 0.0, "rounds_with_waiting": len(idle)}


def run_arm(root: Path, policy: str | None, round_seconds: float, timeout: float,
            restart_seconds: str = "0", startup: dict[str, float] | None = None) -> dict[str, Any]:
    """One arm on a fresh cluster: per-job JCTs (s) and their mean, and where the time went.
    ``restart_seconds``: the controller's ``--restart-seconds`` (a number or ``auto``), with the
    suffixes ``+prior`` (the table carries ``startup``), ``+late`` (``--no-early-rounds``) and
    ``+boundB`` (``--deviation-bound B``)."""
    value, *flags = restart_seconds.split("+")
    if value != "auto":
        float(value)  # a number, else ValueError naming it
    bound = [f[len("bound"):] for f in flags if f.startswith("bound")]
    flags = [f for f in flags if not f.startswith("bound")]
    if set(flags) - {"prior", "prior0", "late"} or len(bound) > 1:
        raise SystemExit(f"--restart-seconds: unknown suffix in {restart_seconds!r} (+prior, +prior0, +late, +boundB)")
    plain = value != "auto" and float(value) == 0 and not flags and not bound
    name = policy if policy is None or plain else f"{policy}+restart-{restart_seconds}"
    work = root / (name or "slurm")
    work.mkdir(parents=True)
    with LocalSlurm(work / "cluster") as cluster:
        prior = startup if "prior" in flags else dict.fromkeys(DEMO_THROUGHPUTS, 0.0) if "prior0" in flags else None
        table = write_throughputs(work / "throughputs.json", prior)
        t0 = time.time()
        ids = submit(cluster, work, DEMO_WORKLOAD, opt_in=policy is not None, hold=policy is not None)
        # Slurm resets a requeued job's submit time: keep the original one
        submitted = {j.job_id: j.submit_time for j in Slurm(cluster.env).jobs(["gpu"]) if j.job_id in ids}
        proc = None
        if policy is not None:
            argv = [sys.executable, "-m", "policyopt.cli", "slurm", "--policy", policy, "--partition", "gpu",
                    "--throughputs", str(table), "--round-seconds", str(round_seconds),
                    "--state", str(work / "state.sqlite"), "--output", str(work / "out"), "--exit-when-idle",
                    "--restart-seconds", value] + (["--no-early-rounds"] if "late" in flags else []) \
                + (["--deviation-bound", bound[0]] if bound else [])
            proc = subprocess.Popen(argv, env=cluster.env, stdout=open(work / "controller.log", "wb"),  # noqa: SIM115
                                    stderr=subprocess.STDOUT)
        try:
            try:
                jobs = _wait_done(cluster, ids, timeout)
            except TimeoutError as exc:  # an arm that never finishes (jobs taking turns) is a result too
                print(f"{name}: {exc}", flush=True)
                return {"arm": name, "timed_out": timeout, "average_jct": None, "restart_seconds": restart_seconds,
                        "wall_s": time.time() - t0}
        finally:
            if proc is not None:
                try:
                    proc.wait(timeout=3 * round_seconds)
                except subprocess.TimeoutExpired:
                    proc.kill()
        for jid, job in zip(ids, DEMO_WORKLOAD):  # each job trained exactly its step budget
            progress = json.loads((work / "progress" / f"{jid}.json").read_text())
            if progress["steps_done"] != job.steps or progress["status"] != "completed":
                raise RuntimeError(f"job {jid}: {progress['status']} at {progress['steps_done']}/{job.steps}")
        jct = {jid: jobs[jid].end_time - submitted[jid] for jid in ids}
        for jid, job in zip(ids, DEMO_WORKLOAD):  # no job can finish faster than at its best speed
            fastest = job.steps / max(DEMO_THROUGHPUTS[job.job_type].values())
            if jct[jid] < fastest - 1.0:
                raise RuntimeError(f"job {jid}: JCT {jct[jid]:.0f} s is below its {fastest:.0f} s at full speed")
        states = {jid: jobs[jid].state for jid in ids}
        restarts = {jid: jobs[jid].restarts for jid in ids}
        # where the time went: seconds RUNNING per GPU type (Slurm's one run per job alone; the
        # controller's accounting of Slurm's runs otherwise), and of them the jobs' own startup
        if policy is None:
            node_type = {n.name: n.gpu_type for n in cluster.nodes}
            running = {jid: {node_type[jobs[jid].nodes[0]]: jobs[jid].end_time + 0.5 - jobs[jid].start_time}
                       for jid in ids}
            squeue_calls = None
            counts = None
        else:
            report = json.loads((work / "out" / "report.json").read_text())
            running = {jid: report["jobs"][jid]["seconds"] for jid in ids}
            calls = [int(line.rsplit(" ", 1)[1]) for line in (work / "controller.log").read_text().splitlines()
                     if line.startswith("round ") and "squeue calls" in line]
            squeue_calls = {"rounds": len(calls), "total": sum(calls), "max": max(calls, default=0)}
            counts = round_counts(report, sum(n.gpus for n in cluster.nodes))
        lost = {jid: startup_seconds(running[jid], job.steps, DEMO_THROUGHPUTS[job.job_type])
                for jid, job in zip(ids, DEMO_WORKLOAD)}
    return {"arm": name or "slurm (backfill, no controller)", "jct": jct, "states": states, "restarts": restarts,
            "average_jct": sum(jct.values()) / len(jct), "wall_s": time.time() - t0,
            "running_s": running, "startup_s": lost, "restart_seconds": restart_seconds,
            "gpu_seconds_running": sum(sum(r.values()) * j.gpus for r, j in zip(running.values(), DEMO_WORKLOAD)),
            "gpu_seconds_startup": sum(lost[jid] * j.gpus for jid, j in zip(ids, DEMO_WORKLOAD)),
            "squeue_calls": squeue_calls, "round_counts": counts,
            "jobs": [{"job_type": j.job_type, "steps": j.steps, "gpus": j.gpus} for j in DEMO_WORKLOAD]}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--policies", nargs="+", default=["max_min_fairness", "finish_time_fairness"])
    p.add_argument("--round-seconds", type=float, default=5.0)
    p.add_argument("--timeout", type=float, default=900.0, help="seconds per arm")
    p.add_argument("--output", type=Path, default=Path("benchmarks/results"))
    p.add_argument("--restart-seconds", nargs="+", default=["0", "auto"],
                   help="run each policy once per value of the controller's --restart-seconds (seconds or auto)")
    p.add_argument("--workdir", type=Path, default=None,
                   help="keep each arm's cluster, controller log and report.json here (default: a temporary folder)")
    args = p.parse_args(argv)
    why = slurm_missing()
    if why:
        print(f"skipped: {why}", file=sys.stderr)
        return 0
    rows = []
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="slurm-jct-") as tmp:
        root = Path(tmp) if args.workdir is None else args.workdir
        arms = [(None, "0")] + [(p, r) for p in args.policies for r in args.restart_seconds]
        startup = None
        if any("prior" in r.split("+") for r in args.restart_seconds):
            startup = measure_startup(sorted(DEMO_THROUGHPUTS), root)
            print("startup_seconds measured (s): " + ", ".join(f"{k} {v:.1f}" for k, v in startup.items()), flush=True)
        for policy, restart in arms:
            row = run_arm(root, policy, args.round_seconds, args.timeout, restart, startup)
            rows.append(row)
            if row["average_jct"] is None:
                continue
            calls, counts = row["squeue_calls"], row["round_counts"]
            print(f"{row['arm']:44s} average JCT {row['average_jct']:7.1f} s   "
                  f"jobs {', '.join(f'{v:.0f}' for v in row['jct'].values())}   "
                  f"restarts {sum(row['restarts'].values())}   GPU-s running {row['gpu_seconds_running']:.0f}, "
                  f"of them startup {row['gpu_seconds_startup']:.0f}"
                  + (f"   squeue calls/round {calls['total'] / max(calls['rounds'], 1):.1f} (max {calls['max']})"
                     f"   rounds {calls['rounds']}, stops {counts['stops']}, moves {counts['moves']}, "
                     f"idle GPUs/round while jobs wait {counts['idle_gpus_per_round']:.2f}"
                     if calls else ""),
                  flush=True)
    base = rows[0]["average_jct"]
    for row in rows[1:]:
        ratio = (f"average JCT {row['average_jct'] / base:.2f}x Slurm's own scheduling"
                 if row["average_jct"] is not None else f"not finished within {row['timed_out']:.0f} s")
        print(f"{row['arm']}: {ratio}")
    args.output.mkdir(parents=True, exist_ok=True)
    (args.output / "slurm_jct.json").write_text(json.dumps({"round_seconds": args.round_seconds,
                                                            "load_average": os.getloadavg(),
                                                            "load_average_start": load_start,
                                                            "startup_seconds_prior": startup, "arms": rows},
                                                           indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
