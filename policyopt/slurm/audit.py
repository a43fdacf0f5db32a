"""Check a controller run against Slurm's own view: ``squeue --json`` snapshots taken beside it.

:class:`SqueueSampler` polls ``squeue --json`` in a thread and keeps, per snapshot, every running
job's nodes and GPU indices (``gres_detail``). From the snapshots:

* :func:`gpu_seconds` — seconds each job ran on each GPU type (a change of state is placed in the
  middle of the gap between two snapshots); :func:`transition_gaps` — those gaps, per job;
* :func:`overcommit` — snapshots where a GPU type had more GPUs in use than exist, a job held
  other than its requested count, or two jobs held the same GPU of a node (each should be empty);
* :func:`decided_seconds` — from ``report.json``: the seconds of the rounds in which the controller
  chose each job for each type (what it asked Slurm to run);
* :func:`expected_seconds` — from ``report.json``: ``Σ_rounds X_r[job, type] · (round length)``
  over the rounds the job was waiting or running (the last one cut at the job's end), for the
  installed (packable) allocation or the policy's own;
* :func:`deliverable_seconds` — the same for the installed allocation over the rounds the
  controller ran, the time a round overran (the controller late or down) counted as decided;
* :func:`start_delays` — per start the controller asked for: when Slurm's snapshots first show
  the job running there, against the start the controller accounted; :func:`stop_delays` — per
  requeue: when they show it stopped; :func:`start_losses` — their sum per job and type.
"""
from __future__ import annotations

import bisect
import json
import re
import subprocess
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from policyopt.slurm.slurmcmd import expand_nodelist, gpus_requested, parse_gres

__all__ = ["Snapshot", "SqueueSampler", "decided_seconds", "deliverable_seconds", "expected_seconds", "gpu_indices",
           "gpu_seconds", "overcommit", "start_delays", "start_losses", "stop_delays", "transition_gaps"]


def gpu_indices(detail: str) -> tuple[str, int, list[int]]:
    """``"gpu:v100:2(IDX:0-1)"`` -> ``("v100", 2, [0, 1])``."""
    counts = parse_gres(detail)
    gpu_type, count = next(iter(counts.items())) if counts else ("", 0)
    idx: list[int] = []
    m = re.search(r"IDX:([^)]*)\)", detail)
    if m and m.group(1) not in ("", "N/A"):
        for part in m.group(1).split(","):
            lo, _, hi = part.partition("-")
            idx.extend(range(int(lo), int(hi or lo) + 1))
    return gpu_type, count, idx


@dataclass
class Snapshot:
    """Running jobs at time ``t``: job -> (requested GPUs, [(node, gpu type, [GPU indices])])."""

    t: float
    running: dict[str, tuple[int, list[tuple[str, str, list[int]]]]] = field(default_factory=dict)
    states: dict[str, tuple[str, str]] = field(default_factory=dict)  # job -> (state, reason)


class SqueueSampler:
    """Poll ``squeue --json`` every ``interval`` seconds in a daemon thread (``start``/``stop``)."""

    def __init__(self, env: Mapping[str, str] | None = None, interval: float = 0.5) -> None:
        self.env = dict(env) if env is not None else None
        self.interval = interval
        self.snapshots: list[Snapshot] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def sample(self) -> Snapshot | None:
        res = subprocess.run(["squeue", "--json", "--states=all"], env=self.env, capture_output=True,
                             text=True, timeout=60)
        t = time.time()
        if res.returncode != 0:
            return None
        snap = Snapshot(t)
        for rec in json.loads(res.stdout).get("jobs", []):
            jid = str(rec["job_id"])
            state = rec.get("job_state")
            state = state[0] if isinstance(state, list) else str(state)
            snap.states[jid] = (state, str(rec.get("state_reason") or ""))
            if state != "RUNNING":
                continue
            nodes = expand_nodelist(str(rec.get("nodes") or ""))
            details = [gpu_indices(d) for d in rec.get("gres_detail") or []]
            held = [(n, t_, idx) for n, (t_, _, idx) in zip(nodes, details)]
            snap.running[jid] = (gpus_requested(rec)[0], held)
        return snap

    def _loop(self) -> None:
        while not self._stop.is_set():
            snap = self.sample()
            if snap is not None:
                self.snapshots.append(snap)
            self._stop.wait(self.interval)

    def start(self) -> "SqueueSampler":
        self._thread.start()
        return self

    def stop(self) -> list[Snapshot]:
        self._stop.set()
        self._thread.join(timeout=30)
        return self.snapshots


def _on(snap: Snapshot, jid: str) -> str | None:
    """The one GPU type ``jid`` runs on in ``snap`` (``None``: not running, or on several)."""
    held = snap.running.get(jid)
    types = {t for _, t, _ in held[1]} if held is not None else set()
    return types.pop() if len(types) == 1 else None


def gpu_seconds(snapshots: Sequence[Snapshot]) -> dict[str, dict[str, float]]:
    """Job -> GPU type -> seconds seen running there. Between two snapshots a job running in both
    counts the whole gap, in one of them half of it (a change of state is placed in the middle of
    the gap, so each start or stop is off by at most half the gap around it)."""
    out: dict[str, dict[str, float]] = {}
    for a, b in zip(snapshots, snapshots[1:]):
        half = 0.5 * (b.t - a.t)
        for snap in (a, b):
            for jid in snap.running:
                t = _on(snap, jid)
                if t is not None:
                    out.setdefault(jid, {})[t] = out.get(jid, {}).get(t, 0.0) + half
    return out


def transition_gaps(snapshots: Sequence[Snapshot]) -> dict[str, dict[str, list[float]]]:
    """Job -> GPU type -> the gap between the two snapshots around each start or stop of the job on
    that type (a move is a stop on one type and a start on the other): the resolution of
    :func:`gpu_seconds` at each of those edges is half of it."""
    out: dict[str, dict[str, list[float]]] = {}
    for a, b in zip(snapshots, snapshots[1:]):
        for jid in set(a.running) | set(b.running):
            before, after = _on(a, jid), _on(b, jid)
            if before != after:
                for t in {before, after} - {None}:
                    assert t is not None
                    out.setdefault(jid, {}).setdefault(t, []).append(b.t - a.t)
    return out


def overcommit(snapshots: Sequence[Snapshot], capacity: Mapping[str, int]) -> list[str]:
    """Every violation found: a type over its GPU count, a job with other than its requested GPU
    count or on several types, a GPU (node, index) held by two jobs."""
    problems = []
    for snap in snapshots:
        used: dict[str, int] = {}
        owner: dict[tuple[str, int], str] = {}
        for jid, (requested, held) in snap.running.items():
            got = sum(len(idx) for _, _, idx in held)
            if got != requested:
                problems.append(f"t={snap.t:.1f}: job {jid} holds {got} GPUs, requested {requested}")
            if len({t for _, t, _ in held}) > 1:
                problems.append(f"t={snap.t:.1f}: job {jid} spans GPU types {held}")
            for node, t, idx in held:
                used[t] = used.get(t, 0) + len(idx)
                for i in idx:
                    if (node, i) in owner:
                        problems.append(f"t={snap.t:.1f}: GPU {node}:{i} held by {owner[node, i]} and {jid}")
                    owner[node, i] = jid
        for t, n in used.items():
            if n > capacity.get(t, 0):
                problems.append(f"t={snap.t:.1f}: {n} {t} GPUs in use, {capacity.get(t, 0)} exist")
    return problems


def expected_seconds(report: Mapping[str, Any], key: str = "allocation") -> dict[str, dict[str, float]]:
    """Job -> GPU type -> ``Σ X_r · dt_r`` over the rounds of ``report`` (the allocation in force
    from each round's start to the next; a job's last round cut at its end time). ``key``:
    ``"allocation"`` (the installed, packable one) or ``"policy_allocation"`` (the policy's LP)."""
    rounds = report["rounds"]
    ends = {j: info.get("end_time") for j, info in report["jobs"].items()}
    out: dict[str, dict[str, float]] = {}
    for a, b in zip(rounds, rounds[1:]):
        for jid, x in a.get(key, a["allocation"]).items():
            end = ends.get(jid)
            stop = b["time"] if end is None else min(b["time"], end)
            dt = max(stop - a["time"], 0.0)
            for t, v in x.items():
                out.setdefault(jid, {})[t] = out.get(jid, {}).get(t, 0.0) + float(v) * dt
    return out


def deliverable_seconds(report: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Job -> GPU type -> the seconds the installed allocation asks for, over the rounds the
    controller ran: ``Σ_r Y_r·min(Δ_r, L) + a_r·max(Δ_r - L, 0)``, with ``Δ_r`` the time from
    round ``r``'s start to the next round's (a job's last round cut at its end time), ``L`` the
    round length and ``a_r`` 1 on the type round ``r`` decided for the job. A round cannot end
    before the controller runs the next one: while it is late or down (killed and restarted),
    Slurm keeps running what the last round decided, and that time is counted as decided."""
    rounds = report["rounds"]
    length = float(report["config"]["round_seconds"])
    ends = {j: info.get("end_time") for j, info in report["jobs"].items()}
    out: dict[str, dict[str, float]] = {}
    for a, b in zip(rounds, rounds[1:]):
        for jid, y in a["allocation"].items():
            end = ends.get(jid)
            stop = b["time"] if end is None else min(b["time"], end)
            dt = max(stop - a["time"], 0.0)
            row = out.setdefault(jid, {})
            for t, v in y.items():
                row[t] = row.get(t, 0.0) + float(v) * min(dt, length)
            if jid in a["decided"] and dt > length:
                t = a["decided"][jid]["gpu_type"]
                row[t] = row.get(t, 0.0) + dt - length
    return out


def start_delays(snapshots: Sequence[Snapshot], report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every start the controller asked for, as Slurm's snapshots show it: for each round ``r``
    and job it placed on type ``t``, ``seen`` = seconds from the round's start to the job's first
    run on ``t`` (the middle between the last snapshot without it and the first with it; ``None``
    when it did not run on ``t`` before the next round), ``gap`` = the time between those two
    snapshots (the resolution), and ``controller`` = the start the controller accounted
    (``ran[job]["started"]`` of round ``r`` in ``report.json``, or ``None``)."""
    out = []
    rounds = report["rounds"]
    times = [s.t for s in snapshots]
    for i, r in enumerate(rounds):
        t0 = r["time"]
        t1 = rounds[i + 1]["time"] if i + 1 < len(rounds) else float("inf")
        for jid, gpu_type in r["actions"]["place"]:
            prev, seen, gap = t0, None, None
            for s in snapshots[bisect.bisect_left(times, t0):]:
                if s.t >= t1:
                    break
                held = s.running.get(jid)
                if held is not None and {t for _, t, _ in held[1]} == {gpu_type}:
                    seen, gap = 0.5 * (prev + s.t) - t0, s.t - prev
                    break
                prev = s.t
            mine = ((r.get("ran") or {}).get(jid) or {}).get("started")
            out.append({"round": r["round"], "job": jid, "gpu_type": gpu_type, "seen": seen, "gap": gap,
                        "controller": mine})
    return out


def stop_delays(snapshots: Sequence[Snapshot], report: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every requeue the controller asked for, as Slurm's snapshots show it: for each round ``r``
    and job it requeued, ``seen`` = seconds from the round's start until the job no longer runs
    on the type it ran on (the middle of the gap), ``gpu_type`` that type, ``gap`` the gap."""
    out = []
    rounds = report["rounds"]
    times = [s.t for s in snapshots]
    for r in rounds:
        t0 = r["time"]
        k = bisect.bisect_left(times, t0)
        if k == 0 or k >= len(snapshots):
            continue
        for jid in r["actions"]["requeue"]:
            gpu_type = _on(snapshots[k - 1], jid)
            if gpu_type is None:
                continue
            prev = snapshots[k - 1].t
            for snap in snapshots[k:]:
                if _on(snap, jid) != gpu_type:
                    out.append({"round": r["round"], "job": jid, "gpu_type": gpu_type,
                                "seen": 0.5 * (prev + snap.t) - t0, "gap": snap.t - prev})
                    break
                prev = snap.t
    return out


def start_losses(delays: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, float]]:
    """Job -> GPU type -> the sum of ``seen`` over ``delays`` (:func:`start_delays`: the seconds
    its starts there cost, as Slurm's snapshots show them; starts never seen are not counted;
    :func:`stop_delays`: the seconds it ran on after the rounds that requeued it began)."""
    out: dict[str, dict[str, float]] = {}
    for d in delays:
        if d["seen"] is not None:
            row = out.setdefault(d["job"], {})
            row[d["gpu_type"]] = row.get(d["gpu_type"], 0.0) + float(d["seen"])
    return out


def decided_seconds(report: Mapping[str, Any]) -> dict[str, dict[str, float]]:
    """Job -> GPU type -> seconds of the rounds the controller decided to run it there (a job's
    last round cut at its end time)."""
    rounds = report["rounds"]
    ends = {j: info.get("end_time") for j, info in report["jobs"].items()}
    out: dict[str, dict[str, float]] = {}
    for a, b in zip(rounds, rounds[1:]):
        for jid, d in a["decided"].items():
            end = ends.get(jid)
            stop = b["time"] if end is None else min(b["time"], end)
            t = d["gpu_type"]
            out.setdefault(jid, {})[t] = out.get(jid, {}).get(t, 0.0) + max(stop - a["time"], 0.0)
    return out
