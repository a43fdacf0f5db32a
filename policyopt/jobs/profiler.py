"""Profiler: measured steps/s of each job type alone and in pairs on every worker type present, and
(plan, resources) samples for the performance-model fit.

Every measurement runs real worker processes (``python -m policyopt.jobs.worker --no-checkpoint``)
pinned to the worker type's cores; the processes of one measurement pass a file barrier and then
train for ``seconds_per_run`` seconds together. A run's throughput is its ``steady_steps_per_s``
(steps after the first ``warmup_steps`` / their wall time). Each measurement is repeated
``repeats`` times (fresh model, data and optimizer each time, in the same processes to save the
~3 s start-up of torch); the table keeps the mean and the sample standard deviation (``ddof = 1``)
of the repeats — the measurement noise.

Worker types are what the machine has: ``cpu1`` (1 thread on 1 core) and ``cpu2`` (2 threads on 2
cores) when 2 cores are available, plus the CUDA device's model name lowercased (``h100``) when
``torch.cuda.is_available()``. A pair on a worker type is two processes with that worker type's
threads each, sharing its cores (or its GPU).

Outputs in ``output_dir``: ``throughputs.json`` (interchange table, see docs/jobs.md),
``plan_samples.csv`` (performance-model columns) and ``runs.json`` (every run's progress record).
"""
from __future__ import annotations

import csv
import itertools
import json
import math
import os
import platform
import re
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from policyopt.errors import InputError, PolicyOptError, UnknownNameError

__all__ = [
    "WorkerType",
    "ProfileResult",
    "ProfilerError",
    "PLAN_COLUMNS",
    "DEFAULT_PLANS",
    "cuda_worker_type_name",
    "detect_worker_types",
    "parse_plan",
    "profile",
]

PLAN_COLUMNS = [
    "model", "params", "layers", "hidden", "seq_len", "global_batch", "fwd_time_1gpu", "dp", "tp", "pp",
    "micro_batches", "ga_steps", "gc", "zero", "gpus", "cpus", "nodes", "bw_intra", "bw_inter", "bw_pcie",
    "bytes_per_param", "iter_time",
]
EXTRA_COLUMNS = ["iter_time_std", "repeats", "worker_type", "peak_memory_bytes"]
DEFAULT_PLANS = ("dp1-ga2-gc0", "dp1-ga1-gc1", "dp1-ga2-gc1", "dp2-ga1-gc0", "dp2-ga2-gc1")
_PLAN = re.compile(r"^dp(\d+)-ga(\d+)-gc([01])$")


class ProfilerError(PolicyOptError):
    """A profiling run failed (the message carries the worker's last stderr lines)."""


@dataclass(frozen=True)
class WorkerType:
    """A worker type of this machine: device, torch threads per process, cores it is pinned to."""

    name: str
    device: str
    threads: int
    cores: tuple[int, ...] | None


def cuda_worker_type_name(device_name: str) -> str:
    """Lowercased model token of a CUDA device name: 'NVIDIA H100 80GB HBM3' → 'h100',
    'Tesla V100-SXM2-16GB' → 'v100', 'NVIDIA A10G' → 'a10g'; otherwise the alphanumerics."""
    words = re.split(r"[\s\-_]+", device_name.lower())
    words = [w for w in words if w not in ("nvidia", "tesla", "geforce", "quadro", "")]
    for word in words:
        if re.fullmatch(r"[a-z]+\d+[a-z]?", word):
            return word
    return re.sub(r"[^a-z0-9]", "", "".join(words)) or "gpu"


def detect_worker_types() -> dict[str, WorkerType]:
    """``cpu1``, ``cpu2`` (when two cores are usable) and the first CUDA device's model, if any."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    types = {"cpu1": WorkerType("cpu1", "cpu", 1, (cores[0],))}
    if len(cores) >= 2:
        types["cpu2"] = WorkerType("cpu2", "cpu", 2, tuple(cores[:2]))
    import torch

    if torch.cuda.is_available():
        name = cuda_worker_type_name(torch.cuda.get_device_name(0))
        types[name] = WorkerType(name, "cuda:0", 1, None)
    return types


def parse_plan(label: str) -> tuple[int, int, bool]:
    """``"dp2-ga1-gc0"`` → ``(2, 1, False)``."""
    match = _PLAN.match(label)
    if match is None:
        raise InputError("plans", label, "expected dpN-gaA-gc0|1, e.g. dp2-ga1-gc0")
    dp, ga, gc = int(match.group(1)), int(match.group(2)), match.group(3) == "1"
    if dp < 1 or ga < 1:
        raise InputError("plans", label, "dp and ga must be >= 1")
    return dp, ga, gc


@dataclass
class _Launch:
    job_type: str
    worker: WorkerType
    dp: int = 1
    ga: int = 1
    gc: bool = False
    measure_forward: bool = False
    measure_allreduce: bool = False


@dataclass
class ProfileResult:
    table: dict[str, Any]
    samples: list[dict[str, Any]]
    runs: list[dict[str, Any]] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)


def _mean_std(values: Sequence[float]) -> tuple[float, float]:
    arr = np.asarray(values, dtype=float)
    return float(arr.mean()), float(arr.std(ddof=1)) if arr.size > 1 else 0.0


def _run_together(launches: Sequence[_Launch], seconds: float, warmup_steps: int, workdir: Path,
                  env: dict[str, str], repeats: int = 1) -> list[list[dict[str, Any]]]:
    """Start the launches at once and wait; ``result[r][i]`` is launch ``i``'s record of repeat ``r``.

    Each worker process runs ``repeats`` leases back to back (fresh model each time); before each
    one, the processes meet at a file barrier so that paired runs overlap in time.
    """
    workdir.mkdir(parents=True, exist_ok=True)
    sync = Path(tempfile.mkdtemp(prefix="sync-", dir=workdir))
    procs: list[tuple[subprocess.Popen[bytes], Path, Path]] = []
    for i, launch in enumerate(launches):
        progress, stderr = sync / f"progress-{i}.json", sync / f"stderr-{i}.txt"
        cmd = [sys.executable, "-m", "policyopt.jobs.worker", "--job-type", launch.job_type, "--job-id", f"profile-{i}",
               "--checkpoint-dir", str(sync / f"ckpt-{i}"), "--no-checkpoint", "--steps-total", str(10**9),
               "--lease-seconds", str(seconds), "--threads", str(launch.worker.threads),
               "--device", launch.worker.device, "--progress-file", str(progress),
               "--sync-dir", str(sync / "barrier"), "--sync-count", str(len(launches)),
               "--warmup-steps", str(warmup_steps), "--dp", str(launch.dp), "--ga", str(launch.ga),
               "--repeats", str(repeats)]
        if launch.worker.cores is not None:
            cmd += ["--cpu-affinity", ",".join(map(str, launch.worker.cores))]
        cmd += ["--gc"] * launch.gc + ["--measure-forward"] * launch.measure_forward
        cmd += ["--measure-allreduce"] * launch.measure_allreduce
        with open(stderr, "wb") as err:
            procs.append((subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=err, env=env), progress, stderr))
    codes = []
    for proc, _, _ in procs:
        try:
            codes.append(proc.wait(timeout=repeats * (seconds + 60) + 300))
        except subprocess.TimeoutExpired:
            proc.kill()
            codes.append(-9)
    results: list[list[dict[str, Any]]] = []
    for r in range(repeats):
        records = []
        for (_proc, progress, stderr), code in zip(procs, codes):
            path = progress if r == 0 else progress.with_name(f"{progress.stem}-r{r}{progress.suffix}")
            record = json.loads(path.read_text()) if path.exists() else {}
            if code == 0 and record.get("steady_steps_per_s") is None:
                raise ProfilerError(f"{record.get('job_type', '?')} on {launches[0].worker.name} (repeat {r}) did only "
                                    f"{record.get('steps_this_session')} steps in {seconds} s, not more than the "
                                    f"{warmup_steps} warm-up steps: raise seconds_per_run")
            if code != 0 or record.get("steady_steps_per_s") is None:
                tail = stderr.read_text(errors="replace").strip().splitlines()[-5:]
                raise ProfilerError(f"worker {record.get('job_type', '?')} (repeat {r}) exited {code} "
                                    f"(status {record.get('status')}, steady_steps_per_s "
                                    f"{record.get('steady_steps_per_s')}): {' | '.join(tail) or 'no stderr'}")
            records.append(record)
        results.append(records)
    return results


def profile(
    output_dir: Path | str,
    job_types: Sequence[str] | None = None,
    worker_types: Sequence[str] | None = None,
    seconds_per_run: float = 3.0,
    repeats: int = 3,
    pairs: bool = False,
    plans: Sequence[str] | None = DEFAULT_PLANS,
    warmup_steps: int = 3,
    log: Callable[[str], None] | None = None,
) -> ProfileResult:
    """Measure and write ``throughputs.json``, ``plan_samples.csv`` and ``runs.json`` in ``output_dir``.

    ``job_types`` default: one variant per family (the middle batch size). ``plans``: extra
    execution plans sampled on the CPU (``cpu1`` threads per rank; ``dp ≤`` usable cores) and on a
    GPU (``dp = 1`` only); the base plan dp1-ga1-gc0 is the ``cpu1``/GPU alone run itself.
    """
    from .zoo import FAMILIES, JOB_TYPES, get_job_type

    if seconds_per_run <= 0 or not math.isfinite(seconds_per_run):
        raise InputError("seconds_per_run", seconds_per_run, "must be a positive number")
    if repeats < 1:
        raise InputError("repeats", repeats, "must be >= 1")
    if job_types is None:
        job_types = [sorted((s for s in JOB_TYPES.values() if s.family == f), key=lambda s: s.batch_size)[1].name
                     for f in FAMILIES]
    if not job_types:
        raise InputError("job_types", job_types, "must name at least one job type")
    specs = {name: get_job_type(name) for name in job_types}
    available = detect_worker_types()
    chosen = list(available) if worker_types is None else list(worker_types)
    for name in chosen:
        if name not in available:
            raise UnknownNameError("worker_types", name, available)
    workers = {name: available[name] for name in chosen}
    plan_specs = [parse_plan(p) for p in (plans or ())]
    say = log or (lambda _msg: None)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parents[2]),
                                         env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    runs: list[dict[str, Any]] = []

    with tempfile.TemporaryDirectory(prefix="policyopt-profile-") as tmp:
        work = Path(tmp)

        def measure(kind: str, launches: list[_Launch], worker: str) -> list[list[dict[str, Any]]]:
            rounds = _run_together(launches, seconds_per_run, warmup_steps, work, env, repeats)
            for r, records in enumerate(rounds):
                for rec in records:
                    rec.update(measurement=kind, worker_type=worker, repeat=r)
                runs.extend(records)
            rates = [[round(rec["steady_steps_per_s"], 2) for rec in records] for records in rounds]
            first = launches[0]
            plan = f"dp{first.dp}-ga{first.ga}-gc{int(first.gc)}"
            say(f"{kind:5s} {worker:7s} {plan:11s} {' + '.join(x.job_type for x in launches):42s} steps/s {rates}")
            return rounds

        # alone: throughputs[job][worker] (the cpu1 / GPU runs also time the forward pass)
        alone: dict[str, dict[str, list[dict[str, Any]]]] = {name: {} for name in specs}
        for name in specs:
            for wname, worker in workers.items():
                launch = _Launch(name, worker, measure_forward=wname == "cpu1" or worker.device.startswith("cuda"))
                alone[name][wname] = [rs[0] for rs in measure("alone", [launch], wname)]
        # pairs: every unordered pair (with itself) sharing each worker type
        colocated = []
        if pairs:
            for a, b in itertools.combinations_with_replacement(list(specs), 2):
                for wname, worker in workers.items():
                    rounds = measure("pair", [_Launch(a, worker), _Launch(b, worker)], wname)
                    ta, sa = _mean_std([rs[0]["steady_steps_per_s"] for rs in rounds])
                    tb, sb = _mean_std([rs[1]["steady_steps_per_s"] for rs in rounds])
                    colocated.append({"job_types": [a, b], "worker_type": wname, "throughputs": [ta, tb],
                                      "throughputs_std": [sa, sb]})
        # plan samples, then the K-worker rows (data parallelism over K workers of a type)
        samples, cpu_runs = _plan_samples(specs, workers, alone, plan_specs, measure)
        scaled = _scale_factor_runs(specs, workers, plan_specs, measure, cpu_runs)

    table: dict[str, Any] = {
        "worker_types": {w.name: {"count": 1, "device": w.device, "threads": w.threads,
                                  "cores": list(w.cores) if w.cores is not None else None} for w in workers.values()},
        "job_types": {},
        "colocated": colocated,
        "meta": {"unit": "steps/s", "seconds_per_run": seconds_per_run, "repeats": repeats,
                 "warmup_steps": warmup_steps, "host": platform.node(), "python": platform.python_version(),
                 "torch": _torch_version(), "cpu_count": os.cpu_count(), "created_at": time.time()},
    }
    for name, spec in specs.items():
        means, stds = {}, {}
        for wname in workers:
            means[wname], stds[wname] = _mean_std([rec["steady_steps_per_s"] for rec in alone[name][wname]])
        table["job_types"][name] = {"throughputs": means, "throughputs_std": stds, "family": spec.family,
                                    "batch_size": spec.batch_size, "params": spec.parameter_count()}
        if scaled.get(name):
            table["job_types"][name]["scale_factors"] = {
                str(k): {"throughputs": {w: _mean_std([r["steady_steps_per_s"] for r in rs])[0]
                                         for w, rs in per.items()},
                         "throughputs_std": {w: _mean_std([r["steady_steps_per_s"] for r in rs])[1]
                                             for w, rs in per.items()},
                         "plan": f"dp{k}-ga1-gc0"}
                for k, per in sorted(scaled[name].items())}
    paths = {"table": str(out / "throughputs.json"), "samples": str(out / "plan_samples.csv"),
             "runs": str(out / "runs.json")}
    Path(paths["table"]).write_text(json.dumps(table, indent=1))
    with open(paths["samples"], "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=PLAN_COLUMNS + EXTRA_COLUMNS)
        writer.writeheader()
        writer.writerows(samples)
    Path(paths["runs"]).write_text(json.dumps(runs, indent=1))
    return ProfileResult(table, samples, runs, paths)


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _plan_samples(specs: dict[str, Any], workers: dict[str, WorkerType],
                  alone: dict[str, dict[str, list[dict[str, Any]]]],
                  plan_specs: list[tuple[int, int, bool]], measure: Callable[..., list[list[dict[str, Any]]]]
                  ) -> tuple[list[dict[str, Any]], dict[tuple[str, int, int, bool], list[dict[str, Any]]]]:
    """One CSV row per (job type, device, plan): mean iteration time ``1 / steady_steps_per_s``;
    also returns the CPU runs by ``(job type, dp, ga, gc)``.

    CPU rows: one torch thread per data-parallel rank, so ``cpus = dp`` and ``gpus = 0``;
    ``fwd_time_1gpu`` is the forward time of the global batch on one thread (the cpu1 alone run).
    GPU rows: ``gpus = dp = 1``. ``bw_intra`` is the measured all-reduce bus bandwidth (dp > 1 runs,
    bytes/s) on CPU and the device-to-device copy bandwidth on a GPU; ``bw_inter = 0`` (one node);
    ``bw_pcie`` the pinned host-to-device copy bandwidth (0 on CPU).
    """
    rows: list[dict[str, Any]] = []
    cpu_base = workers.get("cpu1")
    gpu = next((w for w in workers.values() if w.device.startswith("cuda")), None)
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cpu_runs: dict[tuple[str, int, int, bool], list[dict[str, Any]]] = {}
    gpu_runs: dict[tuple[str, int, int, bool], list[dict[str, Any]]] = {}
    for name in specs:
        if cpu_base is not None:
            cpu_runs[(name, 1, 1, False)] = alone[name]["cpu1"]
            for dp, ga, gc in plan_specs:
                if (dp, ga, gc) == (1, 1, False) or dp > len(cores):
                    continue
                worker = WorkerType(f"cpu-dp{dp}", "cpu", 1, tuple(cores[:dp]))
                rounds = measure("plan", [_Launch(name, worker, dp, ga, gc, measure_allreduce=dp > 1)], worker.name)
                cpu_runs[(name, dp, ga, gc)] = [rs[0] for rs in rounds]
        if gpu is not None:
            gpu_runs[(name, 1, 1, False)] = alone[name][gpu.name]
            for dp, ga, gc in plan_specs:
                if dp == 1 and (ga, gc) != (1, False):
                    rounds = measure("plan", [_Launch(name, gpu, 1, ga, gc)], gpu.name)
                    gpu_runs[(name, 1, ga, gc)] = [rs[0] for rs in rounds]
    allreduce = [r["allreduce_bytes_per_s"] for runs in cpu_runs.values() for r in runs if "allreduce_bytes_per_s" in r]
    cpu_bw = float(np.mean(allreduce)) if allreduce else ""
    gpu_bw = _gpu_bandwidths() if gpu is not None else {}
    for device_runs, is_gpu in ((cpu_runs, False), (gpu_runs, True)):
        for (name, dp, ga, gc), runs in device_runs.items():
            spec = specs[name]
            base = device_runs[(name, 1, 1, False)]
            fwd = float(np.mean([r["fwd_time_s"] for r in base])) if all("fwd_time_s" in r for r in base) else ""
            iter_mean, iter_std = _mean_std([1.0 / r["steady_steps_per_s"] for r in runs])
            peak_key = "max_memory_allocated" if is_gpu else "max_rss_bytes"
            rows.append({
                "model": name, "params": spec.parameter_count(), "layers": spec.layers, "hidden": spec.hidden,
                "seq_len": spec.seq_len, "global_batch": spec.batch_size, "fwd_time_1gpu": fwd, "dp": dp, "tp": 1,
                "pp": 1, "micro_batches": 1, "ga_steps": ga, "gc": int(gc), "zero": "none",
                "gpus": dp if is_gpu else 0, "cpus": dp * (runs[0]["threads"]), "nodes": 1,
                "bw_intra": gpu_bw.get("d2d", "") if is_gpu else cpu_bw, "bw_inter": 0,
                "bw_pcie": gpu_bw.get("h2d", "") if is_gpu else 0, "bytes_per_param": 4,
                "iter_time": iter_mean, "iter_time_std": iter_std, "repeats": len(runs),
                "worker_type": runs[0]["worker_type"], "peak_memory_bytes": max(r.get(peak_key, 0) for r in runs),
            })
    return rows, cpu_runs


def _scale_factor_runs(specs: dict[str, Any], workers: dict[str, WorkerType], plan_specs: list[tuple[int, int, bool]],
                       measure: Callable[..., list[list[dict[str, Any]]]],
                       cpu_runs: dict[tuple[str, int, int, bool], list[dict[str, Any]]]
                       ) -> dict[str, dict[int, dict[str, list[dict[str, Any]]]]]:
    """K-worker runs: ``result[job type][K][worker type]`` = the records of a data-parallel run
    over ``K`` workers of that type, for every plan ``dpK-ga1-gc0`` with ``K > 1``.

    A CPU worker type of ``N`` threads runs ``K`` ranks of ``N`` threads each on the next ``K·N``
    usable cores (wrapping, as the executor's slots do); the ``cpu1`` row reuses the plan sample
    ``dpK-ga1-gc0`` (one thread per rank on ``K`` cores), which is the same run. A CUDA type needs
    ``K`` visible devices (NCCL, one per rank) and is skipped otherwise.
    """
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    ks = sorted({dp for dp, ga, gc in plan_specs if dp > 1 and ga == 1 and not gc})
    out: dict[str, dict[int, dict[str, list[dict[str, Any]]]]] = {name: {} for name in specs}
    if not ks:
        return out
    gpus = 0
    if any(w.device.startswith("cuda") for w in workers.values()):
        import torch

        gpus = torch.cuda.device_count()
    for name in specs:
        for k in ks:
            per: dict[str, list[dict[str, Any]]] = {}
            for wname, worker in workers.items():
                if worker.device == "cpu":
                    if worker.threads == 1 and (name, k, 1, False) in cpu_runs:
                        per[wname] = cpu_runs[(name, k, 1, False)]
                        continue
                    chosen = tuple(sorted({cores[i % len(cores)] for i in range(k * worker.threads)}))
                    launch = _Launch(name, WorkerType(wname, "cpu", worker.threads, chosen), k)
                elif gpus >= k:
                    launch = _Launch(name, worker, k)
                else:
                    continue
                per[wname] = [rs[0] for rs in measure("scale", [launch], wname)]
            out[name][k] = per
    return out


def _gpu_bandwidths(megabytes: int = 256, repeats: int = 5) -> dict[str, float]:
    """Measured device-to-device and pinned host-to-device copy bandwidth of cuda:0 in bytes/s."""
    import torch

    n = megabytes * (1 << 20)
    src = torch.empty(n, dtype=torch.uint8, device="cuda:0")
    dst = torch.empty_like(src)
    host = torch.empty(n, dtype=torch.uint8, pin_memory=True)
    result = {}
    for key, (a, b) in {"d2d": (dst, src), "h2d": (dst, host)}.items():
        a.copy_(b, non_blocking=True)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(repeats):
            a.copy_(b, non_blocking=True)
        torch.cuda.synchronize()
        result[key] = n * repeats / (time.perf_counter() - t0)
    return result
