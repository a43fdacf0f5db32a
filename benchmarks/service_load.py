"""Load test of the HTTP policy service (bounded, loopback only, stops by itself).

The server runs in a child process (``python -m policyopt.service.server``) on 127.0.0.1 with a
fresh SQLite file; clients are httpx threads in this process. Phases (each capped by ``--requests``
and ``--max-seconds``):

1. ``solve64``: ``POST /v1/solve`` with ``max_min_fairness`` on seeded 64-job problems (3 worker
   types × 32 GPUs), with 1 and with ``--clients`` concurrent clients.
2. ``round1000``: a session with 1,000 jobs on 3 × 256 GPUs; each request is one scheduler round,
   ``POST .../rounds/next`` carrying the previous round's progress (steps for every running job).
   No event happens, so no re-solve: mechanism + placement + migration minimization + persistence.
3. ``round1000+arrival``: the same, but one job arrives before every round, so every round also
   re-solves the 1,000-job allocation LP.

Reports requests/s and p50/p99 latency (ms) per phase; ``--output`` writes them as JSON.

    python benchmarks/service_load.py                 # about a minute on 2 cores
    python benchmarks/service_load.py --quick         # a few seconds (CI smoke)
"""
from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

try:
    import httpx
except ModuleNotFoundError:  # pragma: no cover
    sys.exit("the load test needs the service extra: pip install 'policyopt[service]'")

from policyopt.service.examples import synthetic_cluster, synthetic_jobs, synthetic_problem


def start_server(state: Path) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([sys.executable, "-m", "policyopt.service.server", "--state", str(state), "--port", "0"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    url = line.split()[1]
    if not url.startswith("http://127.0.0.1:"):
        proc.kill()
        raise RuntimeError(f"refusing a non-loopback server URL {url}")
    return proc, url


def stop_server(proc: subprocess.Popen[str]) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()


def summarize(name: str, latencies: list[float], wall: float, clients: int) -> dict[str, Any]:
    lat = np.asarray(latencies) * 1e3
    return {"phase": name, "clients": clients, "requests": int(lat.size), "seconds": wall,
            "req_per_s": lat.size / wall if wall > 0 else float("nan"),
            "p50_ms": float(np.percentile(lat, 50)), "p99_ms": float(np.percentile(lat, 99)),
            "mean_ms": float(lat.mean())}


def run_clients(url: str, clients: int, requests: int, max_seconds: float,
                one: Callable[[httpx.Client, int], None]) -> tuple[list[float], float]:
    """``clients`` threads share ``requests`` calls of ``one(client, i)``; stop at ``max_seconds``."""
    latencies: list[float] = []
    lock = threading.Lock()
    counter = iter(range(requests))
    deadline = time.perf_counter() + max_seconds

    def worker() -> None:
        with httpx.Client(base_url=url, timeout=120) as c:
            while time.perf_counter() < deadline:
                with lock:
                    i = next(counter, None)
                if i is None:
                    return
                t0 = time.perf_counter()
                one(c, i)
                dt = time.perf_counter() - t0
                with lock:
                    latencies.append(dt)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return latencies, time.perf_counter() - t0


def bench_solve(url: str, clients: int, requests: int, max_seconds: float) -> dict[str, Any]:
    bodies = [json.dumps({"policy": "max_min_fairness", "problem": synthetic_problem(64, gpus_per_type=32, seed=s)})
              for s in range(8)]

    def one(c: httpx.Client, i: int) -> None:
        r = c.post("/v1/solve", content=bodies[i % len(bodies)], headers={"content-type": "application/json"})
        if r.status_code != 200 or r.json()["status"] != "optimal":
            raise RuntimeError(r.text[:300])

    run_clients(url, 1, 4, 60, one)  # warm up (imports, HiGHS load)
    lat, wall = run_clients(url, clients, requests, max_seconds, one)
    return summarize("solve64", lat, wall, clients)


def bench_rounds(url: str, rounds: int, max_seconds: float, arrivals: bool) -> tuple[dict[str, Any], float]:
    with httpx.Client(base_url=url, timeout=300) as c:
        sid = c.post("/v1/sessions", json={"cluster": synthetic_cluster(256, gpus_per_server=8),
                                           "round_length": 360.0}).json()["session_id"]
        jobs = synthetic_jobs(1000, seed=7)
        for j in jobs:
            j["steps_remaining"] = 1e9  # nobody finishes during the test
        r = c.post(f"/v1/sessions/{sid}/jobs", json={"jobs": jobs})
        r.raise_for_status()
        t0 = time.perf_counter()
        first = c.post(f"/v1/sessions/{sid}/rounds/next").json()
        first_s = time.perf_counter() - t0
        state = {"last": first}
        extra = iter(synthetic_jobs(rounds + 10, seed=99, prefix="arrival"))

        def one(cl: httpx.Client, i: int) -> None:
            last = state["last"]
            if arrivals:
                job = next(extra)
                job["steps_remaining"] = 1e9
                cl.post(f"/v1/sessions/{sid}/jobs", json={"jobs": [job]}).raise_for_status()
            body = {"close_round": last["round"],
                    "progress": {"round": last["round"], "steps": {j: 100.0 for j in last["assignment"]}}}
            t = time.perf_counter()
            r = cl.post(f"/v1/sessions/{sid}/rounds/next", json=body)
            state["dt"] = time.perf_counter() - t
            if r.status_code != 200:
                raise RuntimeError(r.text[:300])
            state["last"] = r.json()
            if arrivals and not state["last"]["recomputed"]:
                raise RuntimeError("expected a recompute after an arrival")

        latencies: list[float] = []

        def timed(cl: httpx.Client, i: int) -> None:
            one(cl, i)
            latencies.append(state["dt"])

        _, wall = run_clients(url, 1, rounds, max_seconds, timed)
        running = len(state["last"]["assignment"])
    name = "round1000+arrival" if arrivals else "round1000"
    out = summarize(name, latencies, sum(latencies), 1)
    out["running_jobs"] = running
    return out, first_s


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--requests", type=int, default=400, help="solve requests per phase (cap)")
    p.add_argument("--rounds", type=int, default=100, help="rounds per round phase (cap)")
    p.add_argument("--clients", type=int, default=4, help="concurrent clients in the second solve phase")
    p.add_argument("--max-seconds", type=float, default=30.0, help="time cap per phase")
    p.add_argument("--quick", action="store_true", help="tiny run (smoke test)")
    p.add_argument("--output", help="write the results as JSON here")
    args = p.parse_args(argv)
    if args.quick:
        args.requests, args.rounds, args.max_seconds = 20, 5, 10.0
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        proc, url = start_server(Path(tmp) / "load.sqlite")
        try:
            results.append(bench_solve(url, 1, args.requests, args.max_seconds))
            results.append(bench_solve(url, args.clients, args.requests, args.max_seconds))
            res, first = bench_rounds(url, args.rounds, args.max_seconds, arrivals=False)
            res["first_round_s"] = first
            results.append(res)
            res, _ = bench_rounds(url, max(3, args.rounds // 5), args.max_seconds, arrivals=True)
            results.append(res)
        finally:
            stop_server(proc)
    print(f"{'phase':20s} {'clients':>7s} {'requests':>8s} {'req/s':>8s} {'p50 ms':>8s} {'p99 ms':>8s}")
    for r in results:
        print(f"{r['phase']:20s} {r['clients']:7d} {r['requests']:8d} {r['req_per_s']:8.1f} "
              f"{r['p50_ms']:8.1f} {r['p99_ms']:8.1f}")
    for r in results:
        if "first_round_s" in r:
            print(f"1,000-job session: first round (solve + place) {r['first_round_s']:.2f} s; "
                  f"{r['running_jobs']} jobs running per round")
    if args.output:
        Path(args.output).write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
