"""Our simulator side by side with Gavel's own simulator, on the same trace, cluster, round and policy.

    python benchmarks/gavel_sim_compare.py --gavel PATH [--gavel-python PY] [--jobs 300] [--rate 3.5]
        [--cluster v100=12,p100=12,k80=12] [--window 120:240] [--seed 0] [--multi-gpu]
        [--arms aware,agnostic] [--ours KEY=VALUE ...] [--keep-arriving K] [--timeout 900] [--json FILE]
        [--trace-source ours|gavel] [--skip-gavel-sim]

``PATH`` is a checkout of Gavel's public code (``stanford-futuredata/gavel``, MIT): its root or its
``scheduler/`` folder, with the RPC stubs generated (``make rpc_stubs`` there) and its Python
dependencies installed for ``--gavel-python`` (default: this interpreter). Without ``--gavel``, or
when the path holds no Gavel simulator, the comparison is skipped with a message (exit 0); our
simulator still runs, so the command shows our side alone.

One Gavel trace (``policyopt.sim.traces.gavel_trace``: Poisson arrivals at ``--rate`` jobs/hour,
Gavel's duration and scale-factor distributions) is written in Gavel's trace format — one line per
job, tab-separated: ``job_type, command, working_directory, num_steps_arg, needs_data_dir,
total_steps, scale_factor, priority_weight, SLO, arrival_time``, where ``job_type`` is the model name
of Gavel's throughput table and the command fields (unused by Gavel's simulator) are placeholders —
and both simulators run it. ``--keep-arriving K`` continues that trace by ``K`` chunks as
``python -m policyopt.sim.experiments ... --keep-arriving`` does (the same jobs for the same seed), so
both simulators run the trace a published-scale experiment measured. ``--trace-source gavel`` has
Gavel's own generator draw the trace instead (run from ``PATH`` with ``--gavel-python``: the very jobs and
arrival times Gavel's simulator draws for ``--seed`` in its published sweeps, ``run_sweep_continuous.py
--seeds 0 1 2``; ``--keep-arriving K`` then takes ``(1 + KEEP_ARRIVING_EXTRA·K)·--jobs`` jobs of that one
stream), and ``--skip-gavel-sim`` runs our simulator alone on it:

* Gavel: ``scripts/drivers/simulate_scheduler_with_trace.py -t TRACE -p POLICY -c V:P:K --seed S
  --time_per_iteration 360 -s A -e B`` (solver ECOS, its default), in its own process; its average
  JCT over jobs ``[A, B)`` and every job's JCT are read from its output; wall and CPU seconds
  (``RUSAGE_CHILDREN``: the whole process, interpreter start and imports included);
* ours: :class:`~policyopt.sim.simulator.Simulator` with Gavel's simulator's semantics —
  rounds of 360 s, the allocation recomputed after arrivals / completions at most once every
  1,920 s (Gavel's ``minimum_time_between_allocation_resets``), no checkpoint / restore cost and no
  GPU relabeling (Gavel's simulator charges neither), every job at its consolidated throughput (one
  server per type; Gavel's simulator reads the consolidated throughput whatever the placement), the
  same window, simulated until the window has finished; wall and CPU seconds of ``Simulator.run``.
  ``--ours KEY=VALUE`` overrides any :class:`~policyopt.sim.simulator.SimConfig` field (to measure
  what a difference comes from).

Arms: ``aware`` = Gavel ``max_min_fairness_perf`` / ours ``max_min_fairness`` (heterogeneity-aware
LAS), ``agnostic`` = Gavel ``max_min_fairness`` / ours ``max_min_fairness_agnostic``; ``ftf_aware`` =
Gavel ``finish_time_fairness_perf`` / ours ``finish_time_fairness``, ``ftf_agnostic`` = Gavel
``finish_time_fairness`` / ours ``finish_time_fairness_agnostic`` (finish-time fairness); ``fifo_aware`` =
Gavel ``fifo_perf`` (greedy: each job in arrival order on the fastest type with room) / ours ``fifo`` (the
FIFO LP), ``fifo_agnostic`` = Gavel ``fifo`` / ours ``fifo_agnostic``, ``fifo_ss`` = Gavel ``fifo_packed`` /
ours ``fifo`` with space sharing (the ``fifo`` experiment's arms). Our side runs
in each of ``--variants``: ``default`` (our LP solve) and ``interior`` (the LP solved as Gavel's
simulator solves it, by an interior-point method — cvxpy + Clarabel here, ECOS in Gavel — without
our fill stage: the max-min LP has many optima, and which one is installed changes the schedule), and
for the ``agnostic`` arm ``proportional`` (``-o optimum=proportional``: the agnostic LP's optimum
defined in closed form — water-filled time shares split over the types in proportion to their counts —
the same on every solver path).
Printed: a markdown table with each arm's average JCT from each simulator, ours / Gavel, the per-job agreement
(median and 90th percentile of ``|JCT_ours − JCT_Gavel| / JCT_Gavel`` over the window), both wall
and CPU times and Gavel / ours; then each simulator's agnostic / aware ratio per pair of arms run.
"""
from __future__ import annotations

import argparse
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from policyopt.cluster_counts import parse_cluster
from policyopt.data.gavel import load_gavel
from policyopt.errors import InputError
from policyopt.sim.experiments import GAVEL_SIMULATOR, KEEP_ARRIVING_EXTRA
from policyopt.sim.metrics import window_backlog
from policyopt.sim.simulator import SimConfig, Simulator
from policyopt.sim.traces import TraceJob, _more_seed, continue_arrivals, gavel_trace, job_type_name, parse_job_type

#: arm -> (Gavel's policy name, ours)
ARMS: dict[str, tuple[str, str]] = {"aware": ("max_min_fairness_perf", "max_min_fairness"),
                                    "agnostic": ("max_min_fairness", "max_min_fairness_agnostic"),
                                    "ftf_aware": ("finish_time_fairness_perf", "finish_time_fairness"),
                                    "ftf_agnostic": ("finish_time_fairness", "finish_time_fairness_agnostic"),
                                    "fifo_aware": ("fifo_perf", "fifo"), "fifo_agnostic": ("fifo", "fifo_agnostic"),
                                    "fifo_ss": ("fifo_packed", "fifo")}
#: our side's configuration per arm, beyond the policy (``fifo_ss``: the ``fifo`` experiment's space sharing)
ARM_CONFIG: dict[str, dict[str, Any]] = {"fifo_ss": {"space_sharing": True, "policy_options": {"pair_top_k": 4}}}
#: (aware arm, agnostic arm) pairs whose ratio is printed
PAIRS: tuple[tuple[str, str], ...] = (("aware", "agnostic"), ("ftf_aware", "ftf_agnostic"),
                                      ("fifo_aware", "fifo_agnostic"), ("fifo_ss", "fifo_agnostic"))
#: our side's variants: ``default`` (our LP solve: HiGHS, a vertex, then the fill stage), ``interior``
#: (Gavel's choice of optimum: an interior-point solver, cvxpy + Clarabel, no fill — the max-min LP's
#: optimum is not unique, and an interior-point method returns the centre of the optimal face)
#: ``proportional`` (the agnostic arms only: ``max_min_fairness_agnostic -o optimum=proportional``, the
#: LP's optimum defined in closed form, the same on every solver path; other arms are not rerun)
VARIANTS: dict[str, dict[str, Any]] = {"default": {},
                                       "interior": {"policy_options": {"solver": "cvxpy:CLARABEL", "fill": False}},
                                       "proportional": {"policy_options": {"optimum": "proportional"}}}
#: per variant limited to some of our policies: those policies
VARIANT_POLICIES: dict[str, tuple[str, ...]] = {"proportional": ("max_min_fairness_agnostic",)}
#: Gavel's ``Scheduler(minimum_time_between_allocation_resets=1920)``
GAVEL_RESET_SECONDS = GAVEL_SIMULATOR["recompute_interval"]
DRIVER = Path("scripts") / "drivers" / "simulate_scheduler_with_trace.py"
_JOB_LINE = re.compile(r"^Job (\d+)(?: \(high priority\))?: ([0-9.eE+-]+)$")
_AVG_LINE = re.compile(r"^Average job completion time: ([0-9.eE+-]+) seconds")


def gavel_scheduler_dir(path: str | Path | None) -> Path | None:
    """Gavel's ``scheduler/`` folder under ``path`` (the repository root or the folder itself), or None."""
    if path is None:
        return None
    p = Path(path)
    for cand in (p, p / "scheduler"):
        if (cand / DRIVER).is_file() and (cand / "scheduler.py").is_file():
            return cand
    return None


def continued_trace(table: Any, num_jobs: int, rate: float, seed: int, multi_gpu: bool, chunks: int) -> list[TraceJob]:
    """Gavel trace of ``num_jobs`` jobs, continued by ``chunks`` chunks of ``KEEP_ARRIVING_EXTRA·num_jobs``
    jobs each: the trace ``python -m policyopt.sim.experiments ... --keep-arriving`` simulates (chunk ``k``
    drawn from its own seed, its arrivals continuing the Poisson process)."""
    trace = gavel_trace(table, num_jobs, rate, seed=seed, multi_gpu=multi_gpu)
    for k in range(chunks):
        more = gavel_trace(table, KEEP_ARRIVING_EXTRA * num_jobs + 1, rate, seed=_more_seed(seed, k),
                           multi_gpu=multi_gpu)
        trace = continue_arrivals(trace, more)
    return trace


#: run by Gavel's interpreter in its ``scheduler/`` folder: the jobs and arrival times Gavel's ``Scheduler.simulate``
#: draws for ``run_sweep_continuous.py`` (``_initialize_seeds``: jobs from ``random.Random(seed + 2)``, arrival gaps
#: from ``random.Random(seed + 3)``; the first job at time 0; ``utils.generate_job`` with the oracle throughputs
#: ``simulation_throughputs.json``), one JSON list a line: type, scale factor, steps, duration, arrival
_GAVEL_DRAW = """
import json, math, random, sys
import utils
n, rate, seed, multi = int(sys.argv[1]), float(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == "1"
thr = utils.read_all_throughputs_json_v2("simulation_throughputs.json")
jobs = random.Random()
jobs.seed(seed + 2)
gaps = random.Random()
gaps.seed(seed + 3)
lam = 3600.0 / rate
t = 0.0
for i in range(n):
    job = utils.generate_job(throughputs=thr, reference_worker_type="v100", rng=jobs, job_id=None,
                             fixed_job_duration=None, generate_multi_gpu_jobs=multi,
                             generate_multi_priority_jobs=False, SLO_rng=None)
    sys.stdout.write(json.dumps([job.job_type, job.scale_factor, job.total_steps, job.duration, t]) + "\\n")
    t = -math.log(1.0 - gaps.random()) / (1.0 / lam) + t
"""


def gavel_drawn_trace(sched_dir: Path, python: str, num_jobs: int, rate: float, seed: int,
                      multi_gpu: bool) -> list[TraceJob]:
    """The first ``num_jobs`` jobs of the trace Gavel's own simulator draws for ``seed`` at ``rate`` jobs/hour
    (its published sweeps: ``run_sweep_continuous.py --seeds 0 1 2``), drawn by Gavel's generator in its own
    process. Jobs are numbered from 0 in arrival order, as Gavel numbers them; steps are rounded up to a whole
    number (Gavel's trace format holds whole steps; our generator's convention, ``ceil(duration · V100
    throughput)``), a change of at most one step in millions."""
    proc = subprocess.run([python, "-c", _GAVEL_DRAW, str(num_jobs), repr(float(rate)), str(seed),
                           "1" if multi_gpu else "0"], cwd=sched_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          text=True, check=False)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ""
        raise InputError("trace_source", "gavel", f"Gavel's generator failed (exit {proc.returncode}): {tail}")
    out = []
    for i, line in enumerate(proc.stdout.splitlines()):
        model, sf, steps, duration, arrival = json.loads(line)
        out.append(TraceJob(str(i), float(arrival), job_type_name(model, int(sf)), int(sf), float(np.ceil(steps)),
                            duration_v100=float(duration)))
    if len(out) != num_jobs:
        raise InputError("trace_source", "gavel", f"Gavel's generator gave {len(out)} jobs, not {num_jobs}")
    return out


def write_gavel_trace(trace: Sequence[TraceJob], path: str | Path) -> None:
    """``trace`` in Gavel's trace format (``utils.parse_trace``: ten tab-separated fields a line).

    Arrival times are written with ``repr`` (exact), steps as integers (our generator's steps are
    whole numbers already: ``ceil(duration · V100 throughput)``); SLO ``-1`` means none."""
    lines = []
    for j in trace:
        model, sf = parse_job_type(j.job_type)
        if float(j.steps) != int(j.steps):
            raise InputError(f"trace[{j.id}].steps", j.steps, "Gavel's trace format needs a whole number of steps")
        if "\t" in model or "\n" in model:
            raise InputError(f"trace[{j.id}].job_type", j.job_type, "must not contain tabs or newlines")
        slo = -1.0 if j.slo_seconds is None else float(j.slo_seconds)
        lines.append("\t".join([model, "-", "-", "--num_steps", "0", str(int(j.steps)), str(sf),
                                repr(float(j.weight)), repr(slo), repr(float(j.arrival))]))
    Path(path).write_text("\n".join(lines) + "\n")


def parse_gavel_output(text: str) -> tuple[float | None, dict[int, float]]:
    """(average JCT, per-job JCT) from the output of Gavel's ``get_average_jct``."""
    avg, per_job = None, {}
    for line in text.splitlines():
        m = _JOB_LINE.match(line.strip())
        if m:
            per_job[int(m.group(1))] = float(m.group(2))
            continue
        m = _AVG_LINE.match(line.strip())
        if m:
            avg = float(m.group(1))
    return avg, per_job


def run_gavel(sched_dir: Path, python: str, trace_path: Path, policy: str, counts: dict[str, int], seed: int,
              window: tuple[int, int], round_seconds: int, timeout: float) -> dict[str, Any]:
    """Gavel's simulator on ``trace_path`` in its own process: average JCT, per-job JCTs, wall, CPU."""
    cmd = [python, str(DRIVER), "-t", str(trace_path.resolve()), "-p", policy,
           "-c", f"{counts.get('v100', 0)}:{counts.get('p100', 0)}:{counts.get('k80', 0)}",
           "--seed", str(seed), "--time_per_iteration", str(round_seconds),
           "-s", str(window[0]), "-e", str(window[1])]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, cwd=sched_dir, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"status": f"timeout after {timeout:.0f} s", "wall_s": time.perf_counter() - t0,
                "command": _shown(cmd)}
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    avg, per_job = parse_gavel_output(proc.stdout)
    status = "ok" if proc.returncode == 0 and avg is not None else \
        f"failed (exit {proc.returncode}): {proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else ''}"
    return {"status": status, "avg_jct_s": avg, "per_job": per_job, "wall_s": wall, "cpu_s": cpu,
            "command": _shown(cmd)}


def _shown(cmd: Sequence[str]) -> str:
    """The Gavel command as recorded: interpreter and trace by file name only (no local paths)."""
    return " ".join([Path(cmd[0]).name, *cmd[1:3], Path(cmd[3]).name, *cmd[4:]])


def arm_overrides(arm: str, variant: str, overrides: dict[str, Any]) -> dict[str, Any]:
    """Our side's SimConfig overrides for ``arm`` in ``variant``: the arm's (:data:`ARM_CONFIG`), the
    variant's (:data:`VARIANTS`), then ``--ours``, later ones winning; ``policy_options`` merged key by
    key across the three."""
    parts = (ARM_CONFIG.get(arm, {}), VARIANTS[variant], overrides)
    over: dict[str, Any] = {k: v for part in parts for k, v in part.items()}
    opts = [part["policy_options"] for part in parts if "policy_options" in part]
    if opts:
        over["policy_options"] = {k: v for o in opts for k, v in o.items()}
    return over


def ours_config(policy: str, counts: dict[str, int], seed: int, num_jobs: int, window: tuple[int, int],
                round_seconds: float, overrides: dict[str, Any]) -> SimConfig:
    """Our :class:`SimConfig` with Gavel's simulator's semantics (module docstring), then ``overrides``."""
    settings: dict[str, Any] = {
        "policy": policy, "round_seconds": float(round_seconds), **GAVEL_SIMULATOR,
        "gpus_per_server": {t: max(c, 1) for t, c in counts.items()}, "seed": seed, "until": "window",
        # positions [lo, hi): floor((lo + 0.5) / N * N) = lo exactly
        "window": ((window[0] + 0.5) / num_jobs, (window[1] + 0.5) / num_jobs)}
    settings.update(overrides)
    return SimConfig(**settings)


def run_ours(trace: Sequence[TraceJob], cluster: str, cfg: SimConfig, table: Any) -> dict[str, Any]:
    """Our simulator on ``trace``: average JCT over the window, per-job JCTs, wall and CPU seconds."""
    c0, t0 = time.process_time(), time.perf_counter()
    res = Simulator(cluster, cfg, table).run(trace)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    j = res.jobs
    win = j[j["in_window"]]
    per_job = {int(i): float(v) for i, v in zip(win["id"], win["jct"])}
    bl = window_backlog(j["arrival"].to_numpy(float), j["finish"].to_numpy(float), j["in_window"].to_numpy(bool))
    last_h = (float(j["arrival"].max()) - float(j["arrival"].min())) / 3600.0
    return {"status": "ok", "avg_jct_s": res.metrics["avg_jct"], "per_job": per_job, "wall_s": wall, "cpu_s": cpu,
            "recomputes": res.metrics["policy_solve_seconds"]["count"], "rounds": res.metrics["rounds"],
            "window_done_h": bl["t2_h"], "last_arrival_h": last_h, "active_trend": bl["active_trend"],
            "arrivals_cover_window": bl["t2_h"] is not None and last_h >= bl["t2_h"]}


def per_job_agreement(ours: dict[int, float], gavel: dict[int, float]) -> dict[str, float | None]:
    """Median and p90 of ``|ours − Gavel| / Gavel`` over the jobs both report."""
    ids = sorted(set(ours) & set(gavel))
    if not ids:
        return {"median": None, "p90": None, "jobs": 0}
    a = np.array([ours[i] for i in ids])
    g = np.array([gavel[i] for i in ids])
    rel = np.abs(a - g) / np.maximum(g, 1e-9)
    return {"median": float(np.median(rel)), "p90": float(np.quantile(rel, 0.9)), "jobs": len(ids)}


def by_scale_factor(ours: dict[int, float], gavel: dict[int, float],
                    trace: Sequence[TraceJob]) -> list[dict[str, Any]]:
    """Per scale factor, over the jobs both report: count and each simulator's average JCT (s)."""
    ids = sorted(set(ours) & set(gavel))
    sf = np.array([trace[i].scale_factor for i in ids], dtype=int)
    a = np.array([ours[i] for i in ids], dtype=float)
    g = np.array([gavel[i] for i in ids], dtype=float)
    return [{"scale_factor": int(k), "jobs": int((sf == k).sum()), "ours_avg_jct_s": float(a[sf == k].mean()),
             "gavel_avg_jct_s": float(g[sf == k].mean())} for k in np.unique(sf)]


def _override(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or key not in SimConfig.__dataclass_fields__:
        raise InputError("ours", text, "must be KEY=VALUE with KEY a SimConfig field")
    try:
        return key, json.loads(value)
    except json.JSONDecodeError:
        return key, value


def _fmt(x: float | None, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--gavel", help="Gavel's repository (or its scheduler/ folder); absent: ours only")
    p.add_argument("--gavel-python", default=sys.executable, help="the interpreter with Gavel's dependencies")
    p.add_argument("--jobs", type=int, default=300)
    p.add_argument("--rate", type=float, default=3.5, help="jobs/hour")
    p.add_argument("--cluster", default="v100=12,p100=12,k80=12")
    p.add_argument("--window", default=None, help="measured job positions A:B (default: 0.4N:0.8N)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--multi-gpu", action="store_true", help="Gavel's multi-GPU trace (1/2/4/8 GPUs)")
    p.add_argument("--arms", default="aware,agnostic", help=f"comma-separated, among {', '.join(ARMS)}")
    p.add_argument("--variants", default="default", help=f"our side's variants, comma-separated: {', '.join(VARIANTS)}")
    p.add_argument("--round-seconds", type=int, default=360)
    p.add_argument("--ours", action="append", default=[], type=_override, metavar="KEY=VALUE",
                   help="override a SimConfig field of our side (repeatable)")
    p.add_argument("--timeout", type=float, default=900.0, help="seconds Gavel's simulator may take per arm")
    p.add_argument("--keep-arriving", type=int, default=0, metavar="K",
                   help="continue the trace by K chunks of KEEP_ARRIVING_EXTRA times --jobs more jobs, as "
                        "'python -m policyopt.sim.experiments ... --keep-arriving' does (the same jobs for the "
                        "same seed), so that jobs keep arriving while the window runs")
    p.add_argument("--trace-source", choices=("ours", "gavel"), default="ours",
                   help="who draws the trace: ours (policyopt.sim.traces.gavel_trace, the experiments' traces) "
                        "or gavel (Gavel's own generator, run from --gavel: the very trace its simulator draws "
                        "for --seed, as in its published sweeps; --keep-arriving K then draws "
                        "(1 + KEEP_ARRIVING_EXTRA·K)·--jobs jobs of that one stream)")
    p.add_argument("--skip-gavel-sim", action="store_true",
                   help="do not run Gavel's simulator (with --trace-source gavel: ours alone on Gavel's trace)")
    p.add_argument("--trace-out", help="keep the exported Gavel trace here")
    p.add_argument("--json", help="write the results here")
    args = p.parse_args(argv)

    counts = parse_cluster(args.cluster)
    n = args.jobs
    if args.window:
        lo, _, hi = args.window.partition(":")
        window = (int(lo), int(hi))
    else:
        window = (int(0.4 * n), int(0.8 * n))
    if not 0 <= window[0] < window[1] <= n:
        raise InputError("window", args.window, f"must be A:B with 0 <= A < B <= jobs ({n})")
    arms = [a for a in args.arms.split(",") if a]
    for a in arms:
        if a not in ARMS:
            raise InputError("arms", a, f"must be among {', '.join(ARMS)}")
    variants = [v for v in args.variants.split(",") if v]
    for v in variants:
        if v not in VARIANTS:
            raise InputError("variants", v, f"must be among {', '.join(VARIANTS)}")
    sched_dir = gavel_scheduler_dir(args.gavel)
    if sched_dir is None:
        why = "no --gavel given" if args.gavel is None else f"no Gavel simulator ({DRIVER}) under {args.gavel}"
        print(f"Gavel's simulator skipped: {why}; running ours only.")
    table = load_gavel()
    if args.keep_arriving < 0:
        raise InputError("keep_arriving", args.keep_arriving, "must be a number of chunks >= 0")
    if args.trace_source == "gavel":
        if sched_dir is None:
            print("--trace-source gavel needs Gavel's code to draw the trace: skipped.")
            return 0
        trace = gavel_drawn_trace(sched_dir, args.gavel_python, n * (1 + KEEP_ARRIVING_EXTRA * args.keep_arriving),
                                  args.rate, args.seed, args.multi_gpu)
    else:
        trace = continued_trace(table, n, args.rate, args.seed, args.multi_gpu, args.keep_arriving)
    run_gavel_sim = sched_dir is not None and not args.skip_gavel_sim
    overrides = dict(args.ours)
    with tempfile.TemporaryDirectory() as tmp:
        trace_path = Path(args.trace_out) if args.trace_out else Path(tmp) / "trace.txt"
        write_gavel_trace(trace, trace_path)
        rows = []
        for arm in arms:
            gpol, opol = ARMS[arm]
            gavel: dict[str, Any] = {"status": "skipped"}
            if run_gavel_sim:
                assert sched_dir is not None
                gavel = run_gavel(sched_dir, args.gavel_python, trace_path, gpol, counts, args.seed, window,
                                  args.round_seconds, args.timeout)
                print(f"[{arm}] Gavel: {gavel['status']}, avg JCT "
                      f"{_fmt(None if gavel.get('avg_jct_s') is None else gavel['avg_jct_s'] / 3600)} h, "
                      f"wall {gavel['wall_s']:.1f} s, CPU {_fmt(gavel.get('cpu_s'), '.1f')} s", flush=True)
            for variant in variants:
                if variant in VARIANT_POLICIES and opol not in VARIANT_POLICIES[variant]:
                    print(f"[{arm}] ours ({variant}): not run ({variant} applies to "
                          f"{', '.join(VARIANT_POLICIES[variant])} only)", flush=True)
                    continue
                cfg = ours_config(opol, counts, args.seed, len(trace), window, args.round_seconds,
                                  arm_overrides(arm, variant, overrides))
                ours = run_ours(trace, args.cluster, cfg, table)
                print(f"[{arm}] ours ({variant}): avg JCT {_fmt(ours['avg_jct_s'] / 3600)} h, "
                      f"wall {ours['wall_s']:.1f} s, CPU {ours['cpu_s']:.1f} s; window done at "
                      f"{_fmt(ours['window_done_h'], '.0f')} h, last arrival {ours['last_arrival_h']:.0f} h, "
                      f"active_trend {_fmt(ours['active_trend'], '+.2f')}", flush=True)
                if not ours["arrivals_cover_window"]:
                    print(f"[{arm}] ours ({variant}): the window outlasted the trace's arrivals "
                          "(more --keep-arriving chunks needed for the published methodology)", flush=True)
                agree = per_job_agreement(ours["per_job"], gavel.get("per_job", {}))
                sizes = by_scale_factor(ours["per_job"], gavel.get("per_job", {}), trace) if agree["jobs"] else []
                for r in sizes:
                    print(f"[{arm}] ours ({variant}) / Gavel, {r['jobs']} jobs of {r['scale_factor']} GPU(s): "
                          f"{r['ours_avg_jct_s'] / 3600:.1f} / {r['gavel_avg_jct_s'] / 3600:.1f} h", flush=True)
                rows.append({"arm": arm, "variant": variant, "gavel_policy": gpol, "ours_policy": opol,
                             "gavel": gavel, "ours": ours, "per_job": agree, "by_scale_factor": sizes})
    h = 3600.0
    print(f"\n{len(trace)} jobs ({'multi' if args.multi_gpu else 'single'}-GPU), {args.rate:g} jobs/h, "
          f"seed {args.seed}, trace drawn by {'Gavel' if args.trace_source == 'gavel' else 'policyopt'}, "
          f"cluster {args.cluster}, window jobs [{window[0]}, {window[1]}), rounds {args.round_seconds} s"
          + (f", ours with {overrides}" if overrides else ""))
    print("| arm | ours | Gavel avg JCT (h) | ours avg JCT (h) | ours / Gavel | per-job rel. diff median / p90 "
          "| Gavel wall / CPU (s) | ours wall / CPU (s) | Gavel / ours CPU |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        g, o = r["gavel"], r["ours"]
        ga = g.get("avg_jct_s")
        ratio = None if ga is None else o["avg_jct_s"] / ga
        speed = None if g.get("cpu_s") is None else g["cpu_s"] / max(o["cpu_s"], 1e-9)
        pj = r["per_job"]
        print(f"| {r['arm']} | {r['variant']} | {_fmt(None if ga is None else ga / h)} | {_fmt(o['avg_jct_s'] / h)} | "
              f"{_fmt(ratio, '.3f')} | {_fmt(pj['median'], '.3f')} / {_fmt(pj['p90'], '.3f')} | "
              f"{_fmt(g.get('wall_s'), '.1f')} / {_fmt(g.get('cpu_s'), '.1f')} | "
              f"{o['wall_s']:.1f} / {o['cpu_s']:.1f} | {_fmt(speed, '.1f')}{'' if speed is None else '×'} |")
        r["ours_over_gavel"], r["gavel_over_ours_cpu"] = ratio, speed
    byarm = {(r["arm"], r["variant"]): r for r in rows}
    for variant in variants:
        for who in ("gavel", "ours"):
            if who == "gavel" and variant != variants[0]:
                continue
            for pair in PAIRS:
                # a variant not run on an arm (VARIANT_POLICIES): that arm's default row, the same policy
                a, b = ((byarm.get((arm, variant)) or byarm.get((arm, "default")) or {}).get(who, {}).get("avg_jct_s")
                        for arm in pair)
                if a and b:
                    print(f"{'Gavel' if who == 'gavel' else f'ours ({variant})'}: {pair[1]} / {pair[0]} average "
                          f"JCT = {b / a:.3f}")
    if args.json:
        for r in rows:
            for who in ("gavel", "ours"):
                r[who] = {k: v for k, v in r[who].items() if k != "per_job"}
        Path(args.json).write_text(json.dumps({"jobs": len(trace), "keep_arriving": args.keep_arriving,
                                               "rate": args.rate, "seed": args.seed,
                                               "trace_source": args.trace_source,
                                               "cluster": args.cluster, "window": list(window),
                                               "multi_gpu": args.multi_gpu, "overrides": overrides,
                                               "rows": rows}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
