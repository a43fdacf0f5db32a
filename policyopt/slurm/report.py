"""``report.json`` of ``policyopt slurm``: what the controller decided and what Slurm ran, from its
state file (docs/slurm.md describes the fields)."""
from __future__ import annotations

import json
from pathlib import Path

from policyopt.slurm.state import StateStore

__all__ = ["write_report"]


def write_report(store: StateStore, output: Path) -> Path:
    """``output/report.json``: per round, each managed job's decided GPU type and count and what
    Slurm ran; per job, seconds received on each GPU type, restarts and JCT."""
    output.mkdir(parents=True, exist_ok=True)
    received = store.received()
    jobs = {}
    for jid, row in sorted(store.known_jobs().items(), key=lambda kv: int(kv[0])):
        end = row["end_time"]
        jobs[jid] = {"job_type": row["job_type"], "gpus": row["gpus"], "weight": row["weight"],
                     "seconds": received.get(jid, {}), "restarts": row["restarts"],
                     "submit_time": row["submit_time"], "end_time": end, "state": row["final_state"],
                     "jct": None if end is None else end - row["submit_time"]}
    finished = [j["jct"] for j in jobs.values() if j["jct"] is not None and j["state"] == "COMPLETED"]
    rounds = [{"round": r["round"], "time": r["started"], "decided": r["decided"], "ran": r["ran"],
               "allocation": r["allocation"].get("x", {}),
               "policy_allocation": r["allocation"].get("policy_x", r["allocation"].get("x", {})),
               "actions": r["actions"]} for r in store.rounds()]
    report = {"config": store.get("config"), "rounds": rounds, "jobs": jobs,
              "summary": {"jobs": len(jobs), "completed": len(finished),
                          "average_jct": sum(finished) / len(finished) if finished else None}}
    path = output / "report.json"
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(report, indent=1))
    tmp.replace(path)
    return path
