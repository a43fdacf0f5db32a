"""Long-lived sessions and big clusters (issue 23 items 8-10): measured in-process through
``SessionManager`` over a real SQLite store (the HTTP layer adds a constant per request).

* ``--workers N``: a session of N one-GPU servers and N/5 jobs; the time and peak resident memory
  (``ru_maxrss`` of a fresh child process) of its first rounds (round 0 places from scratch, later
  rounds renew and relabel: the migration stage meets its budget and uses the simple rule);
* ``--churn J``: ``rounds/next`` on a session that has seen J jobs added and removed (12 active)
  against a fresh session with the same 12 jobs, interleaved, medians (issue target: within 1.2×).

    python benchmarks/session_scale.py --workers 100000 --churn 10000
"""
from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from policyopt.service.limits import Limits
from policyopt.service.sessions import SessionManager
from policyopt.service.store import Store


def _job(i: Any) -> dict[str, Any]:
    return {"id": str(i), "throughputs": {"v100": 1.0 + (hash(str(i)) % 7) / 3}, "steps_remaining": 1e12}


def big_round(workers: int, rounds: int) -> dict[str, Any]:
    """Run in a child process (so ``ru_maxrss`` is this measurement's peak)."""
    m = SessionManager(Store(Path(tempfile.mkdtemp()) / "s.sqlite"), Limits())
    t0 = time.perf_counter()
    sid = m.create({"cluster": {"worker_types": {"v100": {"count": workers, "gpus_per_server": 1}}},
                    "policy": "max_min_fairness"})["session_id"]
    m.add_jobs(sid, [_job(i) for i in range(workers // 5)])
    setup = time.perf_counter() - t0
    times, rules, last = [], [], None
    for _ in range(rounds):
        t = time.perf_counter()
        out = m.next_round(sid, {} if last is None else {"close_round": last})
        times.append(time.perf_counter() - t)
        rules.append(out["migration"])
        last = out["round"]
    return {"workers": workers, "jobs": workers // 5, "setup_s": setup, "round_s": times, "migration": rules,
            "peak_rss_MB": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def churn(n_jobs: int, samples: int) -> dict[str, Any]:
    def session(m: SessionManager, gone: int) -> str:
        sid = m.create({"cluster": {"worker_types": {"v100": {"count": 8}}}, "policy": "max_min_fairness",
                        "min_recompute_interval": 1e9})["session_id"]
        for k in range(0, gone, 500):
            m.add_jobs(sid, [_job(f"g{i}") for i in range(k, min(gone, k + 500))])
            for i in range(k, min(gone, k + 500)):
                m.remove_job(sid, f"g{i}")
        m.add_jobs(sid, [_job(f"a{i}") for i in range(12)])
        m.next_round(sid, {})
        return sid

    m = SessionManager(Store(Path(tempfile.mkdtemp()) / "s.sqlite"), Limits())
    old, fresh = session(m, n_jobs), session(m, 0)
    t_old, t_fresh = [], []
    for _ in range(samples):  # interleaved: load drifts hit both alike
        for sid, acc in ((old, t_old), (fresh, t_fresh)):
            t = time.perf_counter()
            m.next_round(sid, {})
            acc.append(time.perf_counter() - t)
    a, b = statistics.median(t_old), statistics.median(t_fresh)
    return {"removed_jobs": n_jobs, "next_after_churn_ms": a * 1e3, "next_fresh_ms": b * 1e3, "ratio": a / b}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--workers", type=int, default=100_000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--churn", type=int, default=10_000)
    ap.add_argument("--samples", type=int, default=60)
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        print(json.dumps(big_round(args.workers, args.rounds)))
        return 0
    if args.workers:
        out = subprocess.run([sys.executable, __file__, "--child", "--workers", str(args.workers), "--rounds",
                              str(args.rounds)], capture_output=True, text=True, check=True).stdout
        r = json.loads(out.strip().splitlines()[-1])
        print(f"{r['workers']} workers, {r['jobs']} jobs: setup {r['setup_s']:.1f} s; rounds "
              + ", ".join(f"{t:.2f} s ({m})" for t, m in zip(r["round_s"], r["migration"]))
              + f"; peak RSS {r['peak_rss_MB']:.0f} MB")
    if args.churn:
        c = churn(args.churn, args.samples)
        print(f"rounds/next after {c['removed_jobs']} jobs added and removed: {c['next_after_churn_ms']:.2f} ms "
              f"vs fresh {c['next_fresh_ms']:.2f} ms (ratio {c['ratio']:.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
