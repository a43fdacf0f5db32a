"""The executor's final report and its live progress display.

:func:`build_report` reads the state file and returns (``report.json``)::

    {"status": "finished", "policy": ..., "cluster": {...}, "round_seconds": ...,
     "jobs": {id: {"job_type", "status", "steps_required", "steps_done", "jct", "arrival",
                   "first_start", "finish", "initial_loss", "final_loss", "restarts", "crashes",
                   "steps_lost", "error", "checkpoint", "checkpoint_step", "rounds_run",
                   "migrations", "preemptions", "launches", "seconds_by_type",
                   "measured_throughputs", "startup_seconds", "stop_seconds"}},
     "summary": {"jobs", "completed", "failed", "makespan", "mean_jct", "utilization",
                 "allocated_utilization", "migrations", "preemptions", "restarts", "steps_lost",
                 "rounds", "executor_starts", "mean_startup_seconds", "mean_stop_seconds"},
     "rounds": [{"index", "start", "duration", "cut_short", "slots", "load_average",
                 "jobs": {id: {"worker_type", "workers", "nodes", "spread", "steps", "renewed",
                               "train_seconds"}}, ...}],
     "slot_events": [{"time", "event": "lost"|"added", "slot", "worker_type", "node",
                      "jobs": {id: {"steps_done_at_loss", "steps_lost"}}}],
     "gpus_per_server": {type: slots of the type on one node, at the start},
     "throughputs_source": ...}

Times are on the executor clock (seconds; see :mod:`policyopt.executor.executor`).
``jct = finish − arrival``; ``makespan = max finish − min arrival``. ``utilization`` is the
training time of the workers over the time they were available,
``Σ_rounds busy seconds / Σ_rounds (slots × round duration)`` (a pair counts both jobs), and
``allocated_utilization`` the same with slots that held a job counted as fully busy.
``measured_throughputs[type]`` = steps trained alone on that worker type / training seconds there.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
from pathlib import Path
from typing import Any, Mapping

from .state import ExecutorState

__all__ = ["build_report", "write_report", "LiveDisplay", "LineDisplay", "print_summary"]

_CKPT = re.compile(r"ckpt-(\d{12})\.pt$")


def _mean(values: list[float]) -> float | None:
    return float(statistics.fmean(values)) if values else None


def build_report(state: ExecutorState, status: str = "finished") -> dict[str, Any]:
    """The report of the run in ``state`` (module docstring)."""
    saved = state.get("config") or {}
    executor = saved.get("executor", {})
    jobs = state.jobs()
    rounds = state.rounds()
    topology = state.get("topology") or {}
    out_jobs: dict[str, Any] = {}
    startup_all: list[float] = []
    stop_all: list[float] = []
    for rec in jobs.values():
        st = rec.stats
        jct = rec.finish - rec.arrival if rec.status == "completed" and rec.finish is not None else None
        match = _CKPT.search(rec.checkpoint or "")
        measured = {t: v["steps"] / v["seconds"] for t, v in st.get("measured", {}).items() if v.get("seconds", 0) > 0}
        startup = [float(x) for x in st.get("startup_seconds", [])]
        stops = [float(x) for x in st.get("stop_seconds", [])]
        startup_all += startup
        stop_all += stops
        out_jobs[rec.job_id] = {
            "job_type": rec.job_type, "status": rec.status, "steps_required": rec.steps_required,
            "steps_done": rec.steps_done, "jct": jct, "arrival": rec.arrival, "first_start": rec.first_start,
            "finish": rec.finish, "initial_loss": rec.initial_loss, "final_loss": rec.final_loss,
            "restarts": rec.restarts, "crashes": rec.crashes, "steps_lost": rec.steps_lost, "error": rec.error,
            "checkpoint": rec.checkpoint, "checkpoint_step": int(match.group(1)) if match else None,
            "rounds_run": st.get("rounds_run", 0), "migrations": st.get("migrations", 0),
            "preemptions": st.get("preemptions", 0), "launches": st.get("launches", 0),
            "seconds_by_type": st.get("seconds_by_type", {}), "steps_by_type": st.get("steps_by_type", {}),
            "measured_throughputs": measured, "startup_seconds": _mean(startup), "stop_seconds": _mean(stops),
            "corrupt_checkpoints": st.get("corrupt_checkpoints", []),
            "scale_factor": int(rec.spec.get("scale_factor", 1)), "node_losses": st.get("node_losses", 0),
            "steps_lost_node_loss": st.get("steps_lost_node_loss", 0),
        }
    done = [j for j in out_jobs.values() if j["status"] == "completed"]
    finishes = [j["finish"] for j in out_jobs.values() if j["finish"] is not None]
    arrivals = [j["arrival"] for j in out_jobs.values()]
    avail = sum(r["slots"] * r["duration"] for r in rounds)
    busy = sum(r["busy_seconds"] for r in rounds)
    allocated = sum(r["allocated_fraction"] * r["slots"] * r["duration"] for r in rounds)
    summary = {
        "jobs": len(out_jobs), "completed": len(done),
        "failed": sum(j["status"] == "failed" for j in out_jobs.values()),
        "makespan": (max(finishes) - min(arrivals)) if finishes and len(finishes) == len(out_jobs) else None,
        "mean_jct": _mean([j["jct"] for j in done]),
        "utilization": busy / avail if avail > 0 else None,
        "allocated_utilization": allocated / avail if avail > 0 else None,
        "migrations": sum(j["migrations"] for j in out_jobs.values()),
        "preemptions": sum(j["preemptions"] for j in out_jobs.values()),
        "restarts": sum(j["restarts"] for j in out_jobs.values()),
        "steps_lost": sum(j["steps_lost"] for j in out_jobs.values()),
        "rounds": len(rounds), "executor_starts": len(state.get("starts", [])),
        "executor_time": state.get("time", 0.0),
        "mean_startup_seconds": _mean(startup_all), "mean_stop_seconds": _mean(stop_all),
        "recomputes": len(state.events("recompute")),
        "spread_rounds": sum(1 for r in rounds for v in r["jobs"].values() if v.get("spread")),
        "slots_lost": sum(1 for e in topology.get("events", []) if e["event"] == "lost"),
        "slots_added": sum(1 for e in topology.get("events", []) if e["event"] == "added"),
    }
    throughputs = state.get("throughputs") or {}
    return {
        "slot_events": topology.get("events", []), "gpus_per_server": state.get("gpus_per_server") or {},
        "status": status, "policy": executor.get("policy"), "cluster": executor.get("cluster"),
        "round_seconds": executor.get("round_seconds"), "config": executor, "jobs": out_jobs, "summary": summary,
        "rounds": [{"index": r["index"], "start": r["start"], "duration": r["duration"],
                    "busy_fraction": r["busy_fraction"], "recomputed": r["recomputed"], "migrated": r["migrated"],
                    "cut_short": bool(r.get("cut_short", False)),
                    "phases": r.get("phases", {}), "load_average": r.get("load_average"),
                    "slots": r["slots"],
                    "jobs": {j: {"worker_type": v["worker_type"], "workers": v["workers"], "steps": v["steps"],
                                 "renewed": v["renewed"], "train_seconds": v.get("train_seconds"),
                                 "nodes": v.get("nodes"), "spread": v.get("spread", False)}
                             for j, v in r["jobs"].items()}} for r in rounds],
        "throughputs_source": throughputs.get("source"),
    }


def write_report(report: Mapping[str, Any], directory: str | Path) -> Path:
    """Write ``DIR/report.json``; returns its path."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    path = d / "report.json"
    tmp = d / ".report.json.tmp"
    tmp.write_text(json.dumps(report, indent=1, sort_keys=True, default=float))
    tmp.replace(path)
    return path


def _fmt(x: Any, spec: str = ".2f") -> str:
    return "-" if x is None else format(x, spec)


def _table(snapshot: Mapping[str, Any]) -> Any:
    from rich.progress_bar import ProgressBar
    from rich.table import Table

    title = (f"policyopt run · policy {snapshot['policy']} · round {snapshot['round']} · "
             f"t = {snapshot['time']:.1f} s · {snapshot['left']:.1f} s left in round")
    table = Table(title=title, expand=False)
    for name in ("job", "type", "status", "worker", "progress", "steps", "loss", "restarts"):
        table.add_column(name)
    for row in snapshot["jobs"]:
        total = max(1, int(row["steps_required"]))
        bar = ProgressBar(total=total, completed=min(total, int(row["steps_done"])), width=24)
        loss = f"{_fmt(row['initial_loss'])} → {_fmt(row['loss'])}" if row["loss"] is not None else "-"
        status = row["status"] + (f" ({row['error'][:40]})" if row.get("error") else "")
        table.add_row(row["id"], row["job_type"], status, row["worker"] or "-", bar,
                      f"{row['steps_done']}/{row['steps_required']}", loss, str(row["restarts"]))
    return table


class LiveDisplay:
    """A rich live table of the jobs (status, worker, progress bar, loss), refreshed each poll."""

    def __init__(self, console: Any = None) -> None:
        from rich.console import Console
        from rich.live import Live

        self.console = console or Console(stderr=True)
        self._live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._started = False

    def update(self, snapshot: Mapping[str, Any]) -> None:
        if not self._started:
            self._live.start()
            self._started = True
        self._live.update(_table(snapshot))

    def close(self) -> None:
        if self._started:
            self._live.stop()
            self._started = False


class LineDisplay:
    """One line per round on a stream (for logs and non-terminals)."""

    def __init__(self, stream: Any = None) -> None:
        self.stream = stream or sys.stderr
        self._round = -1

    def update(self, snapshot: Mapping[str, Any]) -> None:
        if snapshot["round"] == self._round:
            return
        self._round = snapshot["round"]
        parts = [f"{r['id']} {r['steps_done']}/{r['steps_required']}" + (f"@{r['worker']}" if r["worker"] else "")
                 for r in snapshot["jobs"] if r["status"] in ("active", "pending")]
        print(f"[round {snapshot['round']} t={snapshot['time']:.1f}s] " + "; ".join(parts), file=self.stream,
              flush=True)

    def close(self) -> None:
        pass


def print_summary(report: Mapping[str, Any], console: Any = None) -> None:
    """The final per-job table and the summary line (rich)."""
    from rich.console import Console
    from rich.table import Table

    console = console or Console(width=None if sys.stdout.isatty() else 150)
    table = Table(title=f"policyopt run: {report['status']} (policy {report['policy']}, cluster {report['cluster']})")
    for name in ("job", "type", "status", "steps", "JCT s", "loss", "restarts", "lost", "migr.", "preempt."):
        table.add_column(name)
    for jid, j in report["jobs"].items():
        table.add_row(jid, j["job_type"], j["status"], f"{j['steps_done']}/{j['steps_required']}",
                      _fmt(j["jct"], ".1f"),
                      f"{_fmt(j['initial_loss'], '.3f')} → {_fmt(j['final_loss'], '.3f')}", str(j["restarts"]),
                      str(j["steps_lost"]), str(j["migrations"]), str(j["preemptions"]))
    console.print(table)
    s = report["summary"]
    console.print(f"makespan {_fmt(s['makespan'], '.1f')} s · mean JCT {_fmt(s['mean_jct'], '.1f')} s · "
                  f"utilization {_fmt(s['utilization'], '.2f')} "
                  f"(allocated {_fmt(s['allocated_utilization'], '.2f')}) · "
                  f"{s['rounds']} rounds · {s['migrations']} migrations · {s['preemptions']} preemptions · "
                  f"{s['restarts']} restarts · {s['steps_lost']} steps lost")
    fid = report.get("fidelity")
    if fid and fid.get("available"):
        console.print("simulated with the profiler's throughputs: makespan "
                      f"{_fmt(fid['makespan']['simulated'], '.1f')} s "
                      f"({_fmt(fid['makespan']['difference_pct'], '+.1f')} %), mean |JCT difference| "
                      f"{_fmt(fid['mean_abs_jct_difference_pct'], '.1f')} %")
