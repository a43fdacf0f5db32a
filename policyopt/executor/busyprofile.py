"""Throughputs measured with every slot of the cluster busy (``policyopt run --profile busy``).

The profiler (:mod:`policyopt.jobs.profiler`) measures a job type alone on an idle machine, in a
fresh process without checkpoints. During a run every slot of the cluster trains at once, and slots
may share cores (``cpu1=2,cpu2=2`` is six torch threads; on two cores each gets about a third of
one), so a job trains far slower than alone. This module measures each ``(job type, scale factor
K, worker type)`` of a run as the run trains it: on the run's own slots (same threads, same pinning
as :func:`policyopt.executor.cluster.build_slots`), started through the run's backend (the fork
server, or the Ray actors), with a lease of ``seconds_per_run`` and the run's periodic checkpoints,
while every other slot trains too.

:func:`busy_assignments` covers the targets with few measurements: each measurement places as
many uncovered targets as fit on the free slots (larger ``K`` first, distinct job types first, a
``K``-worker target on ``K`` free slots of its type) and fills each slot still free with a
one-worker run of the run's job types (the one with the fewest samples on that type first), so no
slot idles. Every process of a measurement is a sample of its ``(job type, K, worker type)``:
``steps / training seconds`` of its lease (rank 0's record), start-up steps and checkpoints
included as in a round. The table keeps, per entry, the mean and the sample standard deviation
(``ddof = 1``) of the samples of all repeats, and their count. It has the profiler's format
(``job_types[t].throughputs``, ``scale_factors["K"]``) and ``meta.under_load`` (with every process's
record in ``samples``: ``rate``, ``steady`` (steps/s after the first two steps), ``steps``,
``train_seconds``), and the rate of each job in each measured configuration
(``configurations``, :mod:`policyopt.executor.configurations`), which the fidelity simulation uses.
"""
from __future__ import annotations

import json
import os
import platform
import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Mapping, Sequence

from policyopt.errors import InputError
from policyopt.jobs.profiler import ProfilerError

from .backends import Backend, Launch, LocalProcessBackend, ProcessHandle
from .cluster import Slot, build_slots
from .configurations import configurations_from_samples

__all__ = ["Target", "busy_assignments", "schedule_assignments", "predicted_schedule", "profile_busy"]

#: ``(job type, scale factor, worker type)``
Target = tuple[str, int, str]


def busy_assignments(slots: Sequence[Slot], targets: Sequence[Target],
                     fillers: Sequence[str]) -> list[list[tuple[Target, tuple[int, ...]]]]:
    """Measurements covering ``targets``: each a list of ``(target, slot indices)`` using every slot
    at most once; a slot left over gets a one-worker run of a ``fillers`` job type. A target whose
    ``K`` exceeds its worker type's slot count cannot run and is left out."""
    by_type: dict[str, list[int]] = {}
    for s in slots:
        by_type.setdefault(s.worker_type, []).append(s.index)
    todo = sorted({t for t in targets if len(by_type.get(t[2], [])) >= t[1]}, key=lambda t: (-t[1], t))
    samples: dict[Target, int] = {}
    out: list[list[tuple[Target, tuple[int, ...]]]] = []
    while todo:
        free = {t: list(ids) for t, ids in by_type.items()}
        chosen: list[tuple[Target, tuple[int, ...]]] = []
        for mixed in (True, False):  # distinct job types side by side first, as in a run
            for target in list(todo):
                jt, k, wt = target
                if len(free[wt]) >= k and not (mixed and any(c[0][0] == jt for c in chosen)):
                    chosen.append((target, tuple(free[wt][:k])))
                    del free[wt][:k]
                    todo.remove(target)
        for wt, ids in free.items():
            for sid in ids:
                jt = min(fillers, key=lambda f: (samples.get((f, 1, wt), 0), list(fillers).index(f)))
                chosen.append(((jt, 1, wt), (sid,)))
                samples[(jt, 1, wt)] = samples.get((jt, 1, wt), 0) + 1
        for target, _ in chosen:
            samples[target] = samples.get(target, 0) + 1
        out.append(chosen)
    return out


def schedule_assignments(slots: Sequence[Slot], rounds: Sequence[Sequence[tuple[str, int, str]]]
                         ) -> list[tuple[int, list[tuple[Target, tuple[int, ...]]]]]:
    """The distinct slot configurations of ``rounds`` (each the ``(job type, K, worker type)`` of
    the jobs that run together in one round), as measurements ``(rounds seen, [(target, slot
    indices)])``, most frequent first. A job of ``K`` workers of type ``T`` takes the next ``K``
    slots of ``T``; the other slots stay idle, as in the round."""
    by_type: dict[str, list[int]] = {}
    for s in slots:
        by_type.setdefault(s.worker_type, []).append(s.index)
    seen: dict[tuple[Target, ...], int] = {}
    for r in rounds:
        key = tuple(sorted((str(jt), int(k), str(wt)) for jt, k, wt in r))
        if key:
            seen[key] = seen.get(key, 0) + 1
    out = []
    for key, n in sorted(seen.items(), key=lambda kv: (-kv[1], kv[0])):
        free = {t: list(ids) for t, ids in by_type.items()}
        m = []
        for jt, k, wt in key:
            if len(free.get(wt, [])) < k:
                raise InputError("schedule", list(key), f"needs more {wt} slots than the cluster has")
            m.append(((jt, k, wt), tuple(free[wt][:k])))
            del free[wt][:k]
        out.append((n, m))
    return out


def predicted_schedule(jobs: Sequence[Any], config: Any, table: Mapping[str, Any],
                       gpus_per_server: Mapping[str, int]) -> list[list[tuple[str, int, str]]]:
    """The rounds of the run of ``jobs`` (:class:`~policyopt.executor.spec.JobSpec`) under
    ``config`` (:class:`~policyopt.executor.executor.ExecutorConfig`) as the simulator predicts
    them with ``table``: per round, the ``(job type, K, worker type)`` of the jobs that run."""
    from .fidelity import simulate_run

    plan = {"config": config.to_dict(), "summary": {}, "rounds": [], "gpus_per_server": dict(gpus_per_server),
            "jobs": {j.id: {"job_type": j.job_type, "scale_factor": j.scale_factor, "arrival": j.arrival,
                            "steps_required": j.steps} for j in jobs}}
    sim = simulate_run(plan, table, model="nominal", record_runs=True)
    spec = {j.id: (j.job_type, j.scale_factor) for j in jobs}
    rounds: dict[float, list[tuple[str, int, str]]] = {}
    for t, jid, wt in sim.get("runs", []):
        rounds.setdefault(t, []).append((spec[jid][0], spec[jid][1], wt))
    return [rounds[t] for t in sorted(rounds)]


def _measure(backend: Backend, slots: Sequence[Slot], measurement: Sequence[tuple[Target, tuple[int, ...]]],
             work: Path, seconds: float, checkpoint_interval: float | None, tag: str) -> list[dict[str, Any]]:
    """Start every launch of ``measurement`` on its slots through ``backend``; once each has trained
    a step, give them all one lease ending ``seconds`` later; wait for them all to end, and return
    rank 0's records."""
    launched: list[list[ProcessHandle]] = []
    first = {"deadline": time.time() + 600.0, "steps_limit": None, "keep_workers": False, "lease_id": 1}
    try:
        for j, ((jt, k, _wt), ids) in enumerate(measurement):
            addr, port = backend.rendezvous(slots[ids[0]].worker_id) if k > 1 else ("", 0)
            jid = f"{tag}-{j}"
            handles = []
            for r in range(k):
                slot = slots[ids[r]]
                name = f"{jid}" if r == 0 else f"{jid}-r{r}"
                handles.append(backend.start(Launch(
                    jid, jt, 10**9, 0, str(work / jid / "checkpoints"), str(work / jid / f"progress-{name}.json"),
                    str(work / jid / "lease.json"), str(work / jid / f"worker-{name}.log"), threads=slot.threads,
                    device=slot.device, cpu_affinity=slot.cores, renewal_wait=1.0,
                    checkpoint_interval=checkpoint_interval,
                    lease=first,
                    workers=(slot.worker_id,), launch_id=j + 1, rank=r, world=k, master_addr=addr,
                    master_port=port, rendezvous_timeout=seconds + 120.0)))
            launched.append(handles)
        limit = time.time() + 300.0
        while not all(backend.poll(hs[0]) is not None or int((backend.progress(hs[0]) or {}).get("steps_done") or 0)
                      > 0 for hs in launched):  # every group formed and trains (or already ended: reported)
            if time.time() > limit:
                raise ProfilerError(f"busy profile {tag}: workers did not start training within 300 s")
            time.sleep(0.05)
        t_end = time.time() + seconds
        for hs in launched:
            backend.renew(hs[0], {**first, "deadline": t_end, "lease_id": 2})
        limit = t_end + 120.0
        while any(backend.poll(h) is None for hs in launched for h in hs):
            if time.time() > limit:
                raise ProfilerError(f"busy profile {tag}: workers still running 120 s after their lease ended")
            time.sleep(0.05)
        records = []
        for ((jt, k, wt), _), hs in zip(measurement, launched):
            rec = backend.progress(hs[0]) or {}
            steps, train = int(rec.get("steps_this_session") or 0), float(rec.get("train_seconds") or 0.0)
            if rec.get("status") != "lease_ended" or steps <= 0 or train <= 0:
                tail = backend.log_tail(hs[0]) or "no log"
                raise ProfilerError(f"busy profile: {jt} on {k} {wt} worker(s) ended with status "
                                    f"{rec.get('status')!r} after {steps} steps: {tail}")
            records.append({"rate": steps / train, "steady": rec.get("steady_steps_per_s"), "steps": steps,
                            "train_seconds": train})
        return records
    finally:
        for hs in launched:
            for h in hs:
                if backend.poll(h) is None:
                    backend.kill(h)


def profile_busy(cluster: Mapping[str, int], job_types: Sequence[tuple[str, int]], output_dir: Path | str,
                 seconds_per_run: float = 3.0, repeats: int = 2, pin: str = "auto",
                 checkpoint_interval: float | None = None, backend: Backend | None = None,
                 slots: Sequence[Slot] | None = None, log: Callable[[str], None] | None = None,
                 schedule: Callable[[dict[str, Any]], Sequence[Sequence[tuple[str, int, str]]]] | None = None
                 ) -> dict[str, Any]:
    """Measure ``job_types`` (``(name, K)`` items; the one-worker row of each name is measured too)
    on ``cluster``'s slots with every slot busy, through ``backend`` (the run's own; default a
    :class:`~policyopt.executor.backends.LocalProcessBackend` in ``output_dir``); each worker
    trains a lease of ``seconds_per_run`` with periodic checkpoints every ``checkpoint_interval``
    seconds, as in a round. A sample is ``steps / training seconds`` of one lease (its start-up
    steps included, as in a round). With ``schedule`` (the rounds a run is predicted to have, given
    the busy table: :func:`predicted_schedule`), a second pass measures each distinct round of the
    prediction as it is (:func:`schedule_assignments`), and an entry seen there takes the mean of
    those samples, each configuration weighted by the rounds it was predicted for. Then the run is
    predicted again with that table and its measured ``configurations`` (the per-type rows the
    policy will see are now fixed), and a third pass (``complete``) measures each predicted round
    not measured yet; it adds configurations only. Writes and returns
    ``output_dir/throughputs.json``."""
    import numpy as np

    from policyopt.jobs.zoo import get_job_type

    if not (seconds_per_run > 0 and np.isfinite(seconds_per_run)):
        raise InputError("profile_seconds", seconds_per_run, "must be a positive number")
    if repeats < 1:
        raise InputError("repeats", repeats, "must be >= 1")
    slots = list(slots) if slots is not None else build_slots(cluster, pin)
    names = sorted({str(n) for n, _ in job_types})
    for n in names:
        get_job_type(n)  # unknown names fail before anything starts
    types = [t for t, n in cluster.items() if n > 0]
    wanted = sorted({(n, int(k)) for n, k in job_types} | {(n, 1) for n in names})
    targets = [(n, k, t) for n, k in wanted for t in types]
    plan = busy_assignments(slots, targets, names)
    say = log or (lambda _m: None)
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    own = backend is None
    use: Backend = backend if backend is not None else LocalProcessBackend(
        out / "backend", warm_job_types=names, warm_threads=[s.threads for s in slots])
    rates: dict[Target, list[float]] = {}
    weighted: dict[Target, list[tuple[float, int]]] = {}
    scheduled: list[tuple[int, list[tuple[Target, tuple[int, ...]]]]] = []
    completed: list[tuple[int, list[tuple[Target, tuple[int, ...]]]]] = []
    samples: list[dict[str, Any]] = []
    t_start = time.time()
    load = {"start": _load(), "end": None}

    def label(m: Sequence[tuple[Target, tuple[int, ...]]]) -> list[str]:
        return [f"{jt}#{k}@{','.join(slots[s].worker_id for s in ids)}" for (jt, k, _), ids in m]

    def build(r: Mapping[Target, list[float]], w: Mapping[Target, list[tuple[float, int]]]) -> dict[str, Any]:
        meta = {"unit": "steps/s", "seconds_per_run": seconds_per_run, "repeats": repeats,
                "checkpoint_interval": checkpoint_interval, "host": platform.node(),
                "python": platform.python_version(), "cpu_count": os.cpu_count(), "created_at": t_start,
                "load_average": dict(load),
                "under_load": {"cluster": {t: int(cluster[t]) for t in types}, "pin": pin,
                               "backend": getattr(use, "name", type(use).__name__),
                               "measurements": [label(m) for m in plan],
                               "schedule": [{"rounds": n, "slots": label(m)} for n, m in scheduled],
                               "completed": [{"rounds": n, "slots": label(m)} for n, m in completed],
                               "samples": list(samples)}}
        table = _table(r, w, names, wanted, types, slots, cluster, meta)
        table["configurations"] = configurations_from_samples(samples)
        return table

    def run_pass(name: str, measurements: Sequence[Sequence[tuple[Target, tuple[int, ...]]]], tmp: Path
                 ) -> list[list[list[float]]]:
        results = []
        for i, measurement in enumerate(measurements):
            got: list[list[float]] = [[] for _ in measurement]
            for r in range(repeats):
                for j, rec in enumerate(_measure(use, slots, measurement, tmp / f"{name}{i}-{r}", seconds_per_run,
                                                 checkpoint_interval, f"{name}{i}-{r}")):
                    got[j].append(rec["rate"])
                    (jt, k, wt), ids = measurement[j]
                    samples.append({"pass": name, "measurement": i, "repeat": r, "job_type": jt, "scale_factor": k,
                                    "worker_type": wt, "slots": [slots[s].worker_id for s in ids], **rec})
            say(f"{name} {i + 1}/{len(measurements)}: " + ", ".join(
                f"{jt}#{k}@{wt} {np.mean(v):.1f}" for ((jt, k, wt), _), v in zip(measurement, got)) + " steps/s")
            results.append(got)
        return results

    try:
        warm = getattr(use, "warm_up", None)
        if warm is not None:
            warm()  # the fork servers' start (torch import) is not part of any measurement
        with tempfile.TemporaryDirectory(prefix="policyopt-busy-", dir=out) as tmp:
            for measurement, got in zip(plan, run_pass("busy", plan, Path(tmp))):
                for (target, _), vals in zip(measurement, got):
                    rates.setdefault(target, []).extend(vals)
            if schedule is not None:
                scheduled = schedule_assignments(slots, schedule(build(rates, {})))
                got_all = run_pass("schedule", [m for _, m in scheduled], Path(tmp))
                for (seen, measurement), got in zip(scheduled, got_all):
                    for (target, _), vals in zip(measurement, got):
                        weighted.setdefault(target, []).extend((v, seen) for v in vals)
                known = {tuple(sorted(t for t, _ in m)) for m in [*plan, *(m for _, m in scheduled)]}
                completed = [(n, m) for n, m in schedule_assignments(slots, schedule(build(rates, weighted)))
                             if tuple(sorted(t for t, _ in m)) not in known]
                run_pass("complete", [m for _, m in completed], Path(tmp))
    finally:
        if own:
            use.close()
    load["end"] = _load()
    table = build(rates, weighted)
    (out / "throughputs.json").write_text(json.dumps(table, indent=1))
    return table


def _load() -> float | None:
    """This machine's 1-minute load average (other users' processes included), if the OS has one."""
    return os.getloadavg()[0] if hasattr(os, "getloadavg") else None


def _table(rates: Mapping[Target, list[float]], weighted: Mapping[Target, list[tuple[float, int]]],
           names: Sequence[str], wanted: Sequence[tuple[str, int]], types: Sequence[str], slots: Sequence[Slot],
           cluster: Mapping[str, int], meta: dict[str, Any]) -> dict[str, Any]:
    """The profiler-format table of the samples: the schedule pass's weighted mean where it measured
    an entry, else the busy pass's mean."""
    import numpy as np

    from policyopt.jobs.zoo import get_job_type

    def stats(target: Target) -> tuple[float, float, int]:
        if weighted.get(target):
            v = np.array([x for x, _ in weighted[target]])
            w = np.array([n for _, n in weighted[target]], dtype=float)
            mean = float(np.average(v, weights=w))
            return mean, float(np.std(v, ddof=1)) if v.size > 1 else 0.0, int(v.size)
        vals = rates.get(target, [])
        return (float(np.mean(vals)) if vals else 0.0, float(np.std(vals, ddof=1)) if len(vals) > 1 else 0.0,
                len(vals))

    def row(name: str, k: int) -> dict[str, Any]:
        st = {t: stats((name, k, t)) for t in types}
        return {"throughputs": {t: v[0] for t, v in st.items()}, "throughputs_std": {t: v[1] for t, v in st.items()},
                "samples": {t: v[2] for t, v in st.items()}}

    table: dict[str, Any] = {
        "worker_types": {t: {"count": int(cluster[t]), "device": next(s.device for s in slots if s.worker_type == t),
                             "threads": next(s.threads for s in slots if s.worker_type == t),
                             "cores": None} for t in types},
        "job_types": {}, "colocated": [], "meta": meta}
    for name in names:
        spec = get_job_type(name)
        entry = {**row(name, 1), "family": spec.family, "batch_size": spec.batch_size,
                 "params": spec.parameter_count()}
        ks = sorted({k for n, k in wanted if n == name and k > 1})
        if ks:
            entry["scale_factors"] = {str(k): {**row(name, k), "plan": f"dp{k}-ga1-gc0"} for k in ks}
        table["job_types"][name] = entry
    return table
