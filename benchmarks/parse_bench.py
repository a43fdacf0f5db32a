"""Parse + validate an interchange problem: the column-wise validator against the per-job one (#15, #23).

Measured side by side in one run, on the same seeded problem (``synthetic_problem``, three worker
types, every optional numeric field given):

* ``json``: ``json.loads`` of the document (reported apart: both paths share it);
* ``before``: the per-job validator of an earlier commit (``git show REV:policyopt/problem.py``,
  loaded as its own module; skipped when git or the revision is not available);
* ``after``: ``Problem.from_dict`` (column-wise validation, one pass per field);
* ``from_arrays``: ``Problem.from_arrays`` from numpy columns (the embedders' fast path);
* memory: resident bytes per parsed job (RSS after building the problem minus RSS before, the
  document already parsed and then dropped), and the RSS left after the problem is released;
* ``--http N``: the same problem with ``N`` jobs posted to ``policyopt serve`` (a process of its
  own) several times, with ``--allocator system`` (the default) and ``python`` side by side: the
  server's resident memory per job at the peak and kept after each request.

    python benchmarks/parse_bench.py --jobs 50000 --repeats 3 --before-rev 0304486 --http 190000

``--clock cpu`` times with the process's CPU time instead of the wall clock (on a shared, loaded
machine the wall clock mostly measures the wait for a core; the ratios are what to compare).

Target (issue 15): parse + validate 50,000 jobs in ≤ 0.2 s; ≤ 2 KB resident per parsed job.
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np

from policyopt.problem import Cluster, Problem
from policyopt.service.examples import synthetic_problem


def document(n: int) -> dict[str, Any]:
    doc = synthetic_problem(n, seed=1)
    for i, j in enumerate(doc["jobs"]):
        j.update(weight=1.0 + (i % 3), time_since_start=float(i % 100), arrival=float(i))
    return doc


def old_parser(rev: str) -> Callable[[dict[str, Any]], Any] | None:
    """``Problem.from_dict`` of revision ``rev``, as a separate module (None if unavailable)."""
    root = Path(__file__).resolve().parents[1]
    try:
        src = subprocess.run(["git", "show", f"{rev}:policyopt/problem.py"], cwd=root, capture_output=True,
                             text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    path = Path(tempfile.mkdtemp()) / "problem.py"
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("policyopt._problem_before", path,
                                                  submodule_search_locations=None)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    mod.__package__ = "policyopt"
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod.Problem.from_dict  # type: ignore[no-any-return]


def rss_bytes() -> int:
    with open("/proc/self/statm") as fh:
        return int(fh.read().split()[1]) * 4096


CLOCK: list[Callable[[], float]] = [time.perf_counter]


def timed(fn: Callable[[], Any], repeats: int) -> float:
    clock = CLOCK[0]
    out = []
    for _ in range(repeats):
        gc.collect()
        t0 = clock()
        fn()
        out.append(clock() - t0)
    return statistics.median(out)


def measure(n: int, repeats: int, before: Callable[[dict[str, Any]], Any] | None) -> dict[str, Any]:
    """One row of the table for ``n`` jobs (module docstring)."""
    doc = document(n)
    text = json.dumps(doc)
    t_json = timed(lambda: json.loads(text), repeats)
    data = json.loads(text)
    t_after = timed(lambda: Problem.from_dict(data), repeats)  # noqa: F821 - called here, before the del below
    t_before = timed(lambda: before(data), repeats) if before is not None else float("nan")  # noqa: F821
    names = list(doc["cluster"]["worker_types"])
    T = np.array([[j["throughputs"][t] for t in names] for j in doc["jobs"]])
    ids = [j["id"] for j in doc["jobs"]]
    sf = np.array([j["scale_factor"] for j in doc["jobs"]])
    steps = np.array([j["steps_remaining"] for j in doc["jobs"]])
    cluster = Cluster.from_counts({t: w["count"] for t, w in doc["cluster"]["worker_types"].items()}, 4)
    t_arrays = timed(lambda: Problem.from_arrays(cluster, ids, T, names, scale_factor=sf, steps_remaining=steps),
                     repeats)
    # memory: parse from text, drop the document, measure what the problem keeps
    del data, doc
    gc.collect()
    base = rss_bytes()
    problem = Problem.from_dict(json.loads(text))
    gc.collect()
    per_job = (rss_bytes() - base) / n
    del problem
    gc.collect()
    left = (rss_bytes() - base) / n
    return {"jobs": n, "json_s": t_json, "before_s": t_before, "after_s": t_after, "speedup": t_before / t_after,
            "from_arrays_s": t_arrays, "rss_per_job_B": per_job, "rss_left_per_job_B": left}


def _server_rss(pid: int) -> int:
    with open(f"/proc/{pid}/statm") as fh:
        return int(fh.read().split()[1]) * 4096


def http_memory(n: int, allocator: str, requests: int = 4) -> dict[str, Any]:
    """``POST /v1/solve`` (policy ``isolated``: no LP, so parsing dominates) of an ``n``-job problem,
    ``requests`` times, to ``policyopt serve --allocator ALLOCATOR`` in its own process (so the
    client's memory is not counted): the server's resident memory per job at the peak of the
    requests and kept after each one (read after a ``GET /v1/health`` that the server answers only
    once it has handed the request's freed memory back), against its RSS after a small warm-up
    request."""
    import os
    import socket
    import threading

    import httpx

    body = json.dumps({"policy": "isolated", "problem": document(n)}).encode()
    small = json.dumps({"policy": "isolated", "problem": document(50)}).encode()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if k != "PYTHONMALLOC"}
    state = Path(tempfile.mkdtemp()) / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-m", "policyopt", "serve", "--port", str(port), "--state", str(state),
                             "--max-body-bytes", str(len(body) + 1), "--allocator", allocator, "--log-level",
                             "warning"], env=env)
    headers = {"content-type": "application/json"}
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=600) as client:
            for _ in range(600):
                try:
                    client.get("/v1/health")
                    break
                except httpx.TransportError:
                    time.sleep(0.1)
            client.post("/v1/solve", content=small, headers=headers)
            client.get("/v1/health")
            base = _server_rss(proc.pid)
            peak = [base]
            kept = []
            for _ in range(requests):
                done = threading.Event()

                def sample(done: threading.Event = done) -> None:
                    while not done.is_set():
                        peak[0] = max(peak[0], _server_rss(proc.pid))
                        time.sleep(0.005)

                t = threading.Thread(target=sample)
                t.start()
                r = client.post("/v1/solve", content=body, headers=headers)
                done.set()
                t.join()
                assert r.status_code == 200, r.text[:300]
                del r
                client.get("/v1/health")  # answered after the server has released the request's memory
                kept.append((_server_rss(proc.pid) - base) / n)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    return {"jobs": n, "allocator": allocator, "http_peak_per_job_B": (peak[0] - base) / n,
            "http_kept_per_job_B": kept}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[50_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before-rev", default="0304486", help="git revision of the per-job validator")
    ap.add_argument("--http", type=int, default=0, metavar="N",
                    help="also POST an N-job problem to policyopt serve (its own process, both --allocator "
                         "choices): peak and kept RSS per job")
    ap.add_argument("--http-requests", type=int, default=4, help="large requests per server (default 4)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall clock (default) or the process's CPU time (see the module docstring)")
    args = ap.parse_args(argv)
    CLOCK[0] = time.process_time if args.clock == "cpu" else time.perf_counter
    before = old_parser(args.before_rev)
    rows = []
    for n in args.jobs:
        rows.append(measure(n, args.repeats, before))
    import pandas as pd

    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.http:
        for allocator in ("system", "python"):
            h = http_memory(args.http, allocator, args.http_requests)
            kept = ", ".join(f"{k:.0f}" for k in h["http_kept_per_job_B"])
            print(f"HTTP /v1/solve of {h['jobs']} jobs, serve --allocator {allocator}: "
                  f"+{h['http_peak_per_job_B']:.0f} B/job at the peak; kept after each request: {kept} B/job")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
