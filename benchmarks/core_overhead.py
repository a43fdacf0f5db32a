"""Modeling overhead of policyopt vs a bare highspy ``passModel`` of the same matrices (issue #2).

For max-min fairness over N jobs × 3 worker types, measured side by side in one run:

* ``floor``: numpy builds the CSC arrays of the epigraph LP directly and passes them with the
  all-arrays ``Highs.passModel`` overload (the physical limit of any modeling layer);
* ``ours``: ``AllocationSpace`` + ``Model`` (variables, time/capacity rows, epigraph) + ``compile``
  (standard form, row scaling) + our HiGHS adapter's ``passModel``.

Both start from the same in-memory ``Problem`` (parsing JSON into a Problem is data loading and is
reported separately as ``problem_s``). Medians of ``--repeats`` runs; then one solve each with
simplex and interior point (both must agree on the objective).

    python benchmarks/core_overhead.py --sizes 1000 10000 100000 --repeats 5
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import pandas as pd
import scipy.sparse as sp

from policyopt import AllocationSpace, Cluster, Job, Model, Problem, SolverOptions, get_solver


def make_problem(n: int, seed: int = 0) -> Problem:
    rng = np.random.default_rng(seed)
    speed = rng.uniform(1.0, 10.0, n)
    T = np.stack([speed * rng.uniform(2.0, 4.0, n), speed * rng.uniform(1.2, 2.0, n), speed], axis=1)
    sf = rng.choice([1, 2, 4, 8], size=n, p=[0.7, 0.1, 0.15, 0.05])
    names = ["v100", "p100", "k80"]
    cluster = Cluster.from_counts({t: max(8, n // 4) for t in names})
    jobs = tuple(Job(str(i), dict(zip(names, T[i].tolist())), scale_factor=int(sf[i])) for i in range(n))
    return Problem(cluster, jobs)


def floor_build(T: np.ndarray, sf: np.ndarray, w: np.ndarray, counts: np.ndarray):
    """Bare numpy CSC of: max t s.t. norm_m·Σ_c T[m,c]x[m,c] − t ≥ 0; Σ_c x ≤ 1; Σ_m sf x ≤ count."""
    import highspy

    n, C = T.shape
    norm = sf / (w * (T @ (counts / counts.sum())))
    nx = n * C
    # columns: x (job-major), then t; rows: epigraph (n), job time (n), capacity (C)
    jj = np.repeat(np.arange(n), C)
    cc = np.tile(np.arange(C), n)
    rows = np.concatenate([jj, n + jj, 2 * n + cc, np.arange(n)])
    cols = np.concatenate([np.arange(nx), np.arange(nx), np.arange(nx), np.full(n, nx)])
    vals = np.concatenate([(T * norm[:, None]).ravel(), np.ones(nx), np.repeat(sf, C).astype(float), -np.ones(n)])
    A = sp.csc_matrix((vals, (rows, cols)), shape=(2 * n + C, nx + 1))
    inf = highspy.kHighsInf
    c = np.zeros(nx + 1)
    c[-1] = 1.0
    lo = np.zeros(nx + 1)
    lo[-1] = -inf
    hi = np.ones(nx + 1)
    hi[-1] = inf
    rlo = np.concatenate([np.zeros(n), np.full(n + C, -inf)])
    rhi = np.concatenate([np.full(n, inf), np.ones(n), counts])
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(nx + 1, 2 * n + C, A.nnz, 1, -1, 0.0, c, lo, hi, rlo, rhi,
                A.indptr[:-1].astype(np.int32), A.indices.astype(np.int32), A.data, np.zeros(nx + 1, np.int32))
    return h


def ours_build(problem: Problem, algorithm: str = "auto"):
    space = AllocationSpace(problem)
    model = Model("mmf")
    X = space.add_allocation(model)
    norm = space.scale / (space.weights * space.equal_share_throughput())
    t = model.maximize_min(space.throughput(X) * norm, "t")
    sf = model.compile()
    loaded = get_solver("highs").load(sf, SolverOptions(algorithm=algorithm))
    return loaded, t


def arrays_of(problem: Problem) -> tuple[np.ndarray, ...]:
    names = problem.cluster.names
    T = np.array([[j.throughputs.get(c, 0.0) for c in names] for j in problem.jobs])
    sf = np.array([j.scale_factor for j in problem.jobs], float)
    w = np.array([j.weight for j in problem.jobs], float)
    counts = np.array([problem.cluster.counts[c] for c in names], float)
    return T, sf, w, counts


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 10000, 100000])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--solve-max", type=int, default=10000, help="solve only sizes up to this")
    ap.add_argument("--simplex-max", type=int, default=10000, help="solve with simplex only up to this size")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args()
    rows = []
    for n in args.sizes:
        t0 = time.perf_counter()
        problem = make_problem(n)
        problem_s = time.perf_counter() - t0
        arrs = arrays_of(problem)
        floor_t, ours_t = [], []
        for _ in range(args.repeats):  # interleaved, so both see the same machine noise
            t0 = time.perf_counter()
            floor_build(*arrs)
            floor_t.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            ours_build(problem)
            ours_t.append(time.perf_counter() - t0)
        f, o = statistics.median(floor_t), statistics.median(ours_t)
        row = {"jobs": n, "problem_s": problem_s, "floor_s": f, "ours_s": o, "ratio": o / f}
        if n <= args.solve_max:
            for alg in ("simplex", "ipm"):
                if alg == "simplex" and n > args.simplex_max:
                    continue
                loaded, t = ours_build(problem, alg)
                t0 = time.perf_counter()
                res = loaded.solve()
                row[f"solve_{alg}_s"] = time.perf_counter() - t0
                row[f"obj_{alg}"] = float(t.value(res.x)[()]) if res.x is not None else float("nan")
        rows.append(row)
        print(pd.DataFrame([row]).to_string(index=False), flush=True)
    df = pd.DataFrame(rows)
    print("\nmax-min fairness, N jobs x 3 types: build+compile+passModel (median of %d)" % args.repeats)
    print(df.to_string(index=False, float_format=lambda v: f"{v:.4g}"))
    ok = (df["ratio"] <= 3.0).all()
    print(f"\ntarget ours/floor <= 3x: {'MET' if ok else 'MISSED'} (max {df['ratio'].max():.2f}x)")
    if args.csv:
        df.to_csv(args.csv, index=False)


if __name__ == "__main__":
    main()
