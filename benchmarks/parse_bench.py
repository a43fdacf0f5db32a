"""Parse + validate an interchange problem: the column-wise validator against the per-job one (#15, #23).

Measured side by side in one run, on the same seeded problem (``synthetic_problem``, three worker
types, every optional numeric field given):

* ``json``: ``json.loads`` of the document (reported apart: both paths share it);
* ``before``: the per-job validator of an earlier commit (``git show REV:policyopt/problem.py``,
  loaded as its own module; skipped when git or the revision is not available);
* ``after``: ``Problem.from_dict`` (column-wise validation, one pass per field);
* ``from_arrays``: ``Problem.from_arrays`` from numpy columns (the embedders' fast path);
* memory: resident bytes per parsed job (RSS after building the problem minus RSS before, the
  document already parsed and then dropped), and the RSS left after the problem is released.

    python benchmarks/parse_bench.py --jobs 50000 --repeats 3 --before-rev 0304486 --http 190000

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


def timed(fn: Callable[[], Any], repeats: int) -> float:
    out = []
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
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


def http_memory(n: int) -> dict[str, Any]:
    """``POST /v1/solve`` (policy ``isolated``: no LP, so parsing dominates) of an ``n``-job problem
    to a service in this process: resident memory added per job at the peak of the request and
    left after it (the request body is built before the baseline is taken)."""
    import httpx

    from policyopt.service import create_app
    from policyopt.service.server import ServiceThread

    body = json.dumps({"policy": "isolated", "problem": document(n)}).encode()
    with ServiceThread(create_app(Path(tempfile.mkdtemp()) / "s.sqlite", max_body_bytes=len(body) + 1)) as url, \
            httpx.Client(base_url=url, timeout=600) as client:
        client.get("/v1/health")
        gc.collect()
        base = rss_bytes()
        peak = [base]
        done = False

        def sample() -> None:
            while not done:
                peak[0] = max(peak[0], rss_bytes())
                time.sleep(0.005)

        import threading

        t = threading.Thread(target=sample)
        t.start()
        r = client.post("/v1/solve", content=body, headers={"content-type": "application/json"})
        done = True
        t.join()
        assert r.status_code == 200, r.text[:300]
        del r
        gc.collect()
        left = rss_bytes()
    return {"jobs": n, "http_peak_per_job_B": (peak[0] - base) / n, "http_left_per_job_B": (left - base) / n}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jobs", type=int, nargs="+", default=[50_000])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--before-rev", default="0304486", help="git revision of the per-job validator")
    ap.add_argument("--http", type=int, default=0, metavar="N",
                    help="also POST an N-job problem to an in-process service: peak and kept RSS per job")
    args = ap.parse_args(argv)
    before = old_parser(args.before_rev)
    rows = []
    for n in args.jobs:
        rows.append(measure(n, args.repeats, before))
    import pandas as pd

    print(pd.DataFrame(rows).to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    if args.http:
        h = http_memory(args.http)
        print(f"HTTP /v1/solve of {h['jobs']} jobs: +{h['http_peak_per_job_B']:.0f} B/job at the peak, "
              f"{h['http_left_per_job_B']:.0f} B/job kept after the request")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
