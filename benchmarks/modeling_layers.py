"""The same LAS (max-min fairness) and max-sum-throughput LPs built with our modeling layer, cvxpy,
linopy and Pyomo, each solved by HiGHS, at 2,048 / 16,384 / 131,072 Gavel jobs (issue #24).

Every layer starts from the same numpy arrays of the allocation space (computed once per size and
not timed): the slot mask ``(jobs × configurations)``, throughputs ``T``, scale factors ``sf``,
each configuration's worker type, worker counts and the LAS normalizer ``a_m =
sf_m/(w_m·thr(m, X_equal))``. The LPs, identical in every layer::

    LAS:      max t      s.t.  a_m·Σ_c T[m,c]·X[m,c] − t ≥ 0           (every job m)
    max-sum:  max Σ_m Σ_c T[m,c]·X[m,c]
    both:     Σ_c X[m,c] ≤ 1,  Σ_{m, c of type k} sf_m·X[m,c] ≤ count_k,  0 ≤ X ≤ 1 on the mask

Measured per (layer, model, size), each in its own forked process, one run:

* ``build_s``: from the arrays to the layer's model object (ours: ``Model`` + rows + objective);
* ``first_iter_s``: from the start to HiGHS's ``run`` (build + the layer's translation: our
  ``compile`` + ``passModel``; cvxpy's canonicalization; linopy's matrices; Pyomo's writer);
* ``solve_s``: HiGHS's ``run``; ``peak_mb``: the process's peak RSS growth.

HiGHS's ``run`` is wrapped in every process so that every layer's HiGHS gets the same options
(interior point, quiet, ``--time-limit``) and both times are taken at the same place. cvxpy builds
lazily (``build_s`` is its expression tree; canonicalization happens inside ``solve``), so
``first_iter_s`` is the comparable "model ready" time. The
objectives must agree (1e-6 relative) and equal ``policyopt.solve``'s for the two policies.

    python benchmarks/modeling_layers.py --sizes 2048 16384 131072 --output benchmarks/results

``--build-only --repeats K`` measures ``build_s`` alone (no translation, no solve), the median of
``K`` processes per row, both as wall seconds and as the process's CPU seconds (``build_cpu_s``: on a
shared, loaded machine the wall clock mostly measures the wait for a core), layers interleaved
within each repeat, into ``modeling_layers_build.csv``.
"""
from __future__ import annotations

import argparse
import importlib
import multiprocessing as mp
import resource
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import scipy.sparse as sp

from policyopt.allocation import AllocationSpace
from policyopt.bench.harness import gavel_problem
from policyopt.bench.suite import markdown_table

LAYERS = ("ours", "cvxpy", "linopy", "pyomo")
MODELS = ("las", "max_sum")
_T0 = [0.0]
_HIGHS: dict[str, float] = {}


def _patch_highs(time_limit: float) -> None:
    """Every ``highspy.Highs.run`` in this process: same options, entry and exit times recorded."""
    import highspy

    orig = highspy.Highs.run

    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.setOptionValue("solver", "ipm")
        self.setOptionValue("output_flag", False)
        self.setOptionValue("time_limit", float(time_limit))
        _HIGHS.setdefault("enter", time.perf_counter())
        out = orig(self, *args, **kwargs)
        _HIGHS["exit"] = time.perf_counter()
        return out

    highspy.Highs.run = run  # type: ignore[method-assign]


class Data:
    """The arrays every layer starts from (not timed)."""

    def __init__(self, n: int) -> None:
        space = AllocationSpace(gavel_problem(n, seed=0))
        self.space = space
        self.mask = space.mask.copy()
        self.T = np.where(self.mask, space.T, 0.0)
        self.sf = space.scale.astype(float)
        self.ctype = space.config_type.copy()
        self.counts = space.counts.astype(float)
        self.a = space.scale / (space.weights * space.equal_share_throughput())
        self.jj, self.cc = np.nonzero(self.mask)  # slots in C order
        self.n, self.C, self.K = self.mask.shape[0], self.mask.shape[1], self.counts.size

    def slot_matrices(self) -> tuple[sp.csr_matrix, sp.csr_matrix, sp.csr_matrix]:
        """(jobs × slots) membership and throughput, (types × slots) capacity (for cvxpy)."""
        k = self.jj.size
        cols = np.arange(k)
        mem = sp.csr_matrix((np.ones(k), (self.jj, cols)), shape=(self.n, k))
        thr = sp.csr_matrix((self.T[self.jj, self.cc], (self.jj, cols)), shape=(self.n, k))
        cap = sp.csr_matrix((self.sf[self.jj], (self.ctype[self.cc], cols)), shape=(self.K, k))
        return mem, thr, cap


# ------------------------------------------------------------------------------------------ layers
def run_ours(d: Data, model: str) -> tuple[float, Callable[[], float]]:
    from policyopt import Model, SolverOptions, get_solver

    m = Model(model)
    X = d.space.add_allocation(m)
    if model == "las":
        m.maximize_min(d.space.throughput(X) * d.a, "t")
    else:
        m.maximize(d.space.throughput(X).sum())
    built = time.perf_counter()

    def solve() -> float:
        # interior point named: "auto" would first try our block-aggregation fast path, which is a
        # solver feature, not the modeling layer being compared
        res = get_solver("highs").solve(m.compile(), SolverOptions(algorithm="ipm"))
        return float(res.objective)

    return built, solve


def run_cvxpy(d: Data, model: str) -> tuple[float, Callable[[], float]]:
    import cvxpy as cp

    mem, thr, cap = d.slot_matrices()
    x = cp.Variable(d.jj.size)
    cons = [mem @ x <= 1.0, cap @ x <= d.counts, x >= 0.0, x <= 1.0]
    if model == "las":
        t = cp.Variable()
        cons.append(cp.multiply(d.a, thr @ x) - t >= 0.0)
        prob = cp.Problem(cp.Maximize(t), cons)
    else:
        prob = cp.Problem(cp.Maximize(cp.sum(thr @ x)), cons)
    built = time.perf_counter()

    def solve() -> float:
        prob.solve(solver=cp.HIGHS)
        return float(prob.value)

    return built, solve


def run_linopy(d: Data, model: str) -> tuple[float, Callable[[], float]]:
    import linopy
    import xarray as xr

    jobs = np.arange(d.n)
    cfgs = np.arange(d.C)
    m = linopy.Model()
    X = m.add_variables(lower=0.0, upper=1.0, coords=[jobs, cfgs], dims=["job", "config"], name="X",
                        mask=xr.DataArray(d.mask, coords=[jobs, cfgs], dims=["job", "config"]))
    T = xr.DataArray(d.T, coords=[jobs, cfgs], dims=["job", "config"])
    sf = xr.DataArray(d.sf, coords=[jobs], dims=["job"])
    ctype = xr.DataArray(d.ctype, coords=[cfgs], dims=["config"], name="type")
    m.add_constraints(X.sum("config") <= 1.0, name="job_time")
    m.add_constraints((X * sf).sum("job").groupby(ctype).sum() <= xr.DataArray(d.counts, dims=["type"]),
                      name="capacity")
    thr = (X * T).sum("config")
    if model == "las":
        t = m.add_variables(name="t")
        m.add_constraints(thr * xr.DataArray(d.a, coords=[jobs], dims=["job"]) - t >= 0.0, name="epigraph")
        m.add_objective(1.0 * t, sense="max")
    else:
        m.add_objective(thr.sum(), sense="max")
    built = time.perf_counter()

    def solve() -> float:
        m.solve(solver_name="highs", io_api="direct", progress=False)  # highspy passModel, no LP file
        return float(m.objective.value)

    return built, solve


def run_pyomo(d: Data, model: str) -> tuple[float, Callable[[], float]]:
    import pyomo.environ as pyo

    k = d.jj.size
    slots_of_job: list[list[int]] = [[] for _ in range(d.n)]
    slots_of_type: list[list[int]] = [[] for _ in range(d.K)]
    for s, (j, c) in enumerate(zip(d.jj.tolist(), d.cc.tolist())):
        slots_of_job[j].append(s)
        slots_of_type[int(d.ctype[c])].append(s)
    tval = d.T[d.jj, d.cc].tolist()
    sfs = d.sf[d.jj].tolist()
    m = pyo.ConcreteModel()
    m.S = pyo.RangeSet(0, k - 1)
    m.J = pyo.RangeSet(0, d.n - 1)
    m.K = pyo.RangeSet(0, d.K - 1)
    m.x = pyo.Var(m.S, bounds=(0.0, 1.0))
    m.job_time = pyo.Constraint(m.J, rule=lambda mm, j: sum(mm.x[s] for s in slots_of_job[j]) <= 1.0)
    m.capacity = pyo.Constraint(m.K, rule=lambda mm, t: sum(sfs[s] * mm.x[s] for s in slots_of_type[t])
                                <= float(d.counts[t]) if slots_of_type[t] else pyo.Constraint.Skip)
    a = d.a.tolist()
    if model == "las":
        m.t = pyo.Var()
        m.epigraph = pyo.Constraint(m.J, rule=lambda mm, j: a[j] * sum(tval[s] * mm.x[s] for s in slots_of_job[j])
                                    - mm.t >= 0.0)
        m.obj = pyo.Objective(expr=m.t, sense=pyo.maximize)
    else:
        m.obj = pyo.Objective(expr=sum(tval[s] * m.x[s] for s in range(k)), sense=pyo.maximize)
    built = time.perf_counter()

    def solve() -> float:
        opt = pyo.SolverFactory("appsi_highs")
        opt.solve(m)
        return float(pyo.value(m.obj))

    return built, solve


RUNNERS = {"ours": run_ours, "cvxpy": run_cvxpy, "linopy": run_linopy, "pyomo": run_pyomo}
#: imported before the clock starts (import time is not build time)
IMPORTS = {"ours": ("policyopt",), "cvxpy": ("cvxpy",), "linopy": ("linopy", "xarray"),
           "pyomo": ("pyomo.environ", "pyomo.contrib.appsi.solvers.highs")}


def _child(layer: str, model: str, d: Data, time_limit: float, queue: Any) -> None:
    try:
        import highspy

        highspy.Highs.resetGlobalScheduler(True)  # worker threads do not survive fork
        _patch_highs(time_limit)
        for mod in IMPORTS[layer]:
            importlib.import_module(mod)
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t0 = time.perf_counter()
        built, solve = RUNNERS[layer](d, model)
        obj = solve()
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        queue.put({"build_s": built - t0, "first_iter_s": _HIGHS["enter"] - t0,
                   "solve_s": _HIGHS["exit"] - _HIGHS["enter"], "total_s": time.perf_counter() - t0,
                   "peak_mb": max(rss1 - rss0, 0) / 1024.0, "objective": obj, "error": ""})
    except Exception as exc:  # noqa: BLE001 - a failing layer is a row
        queue.put({"error": f"{type(exc).__name__}: {exc}"[:200]})


def _build_child(layer: str, model: str, d: Data, queue: Any) -> None:
    try:
        for mod in IMPORTS[layer]:
            importlib.import_module(mod)
        t0, c0 = time.perf_counter(), time.process_time()
        built, _ = RUNNERS[layer](d, model)
        queue.put({"build_s": built - t0, "build_cpu_s": time.process_time() - c0, "error": ""})
    except Exception as exc:  # noqa: BLE001 - a failing layer is a row
        queue.put({"error": f"{type(exc).__name__}: {exc}"[:200]})


def build_only(sizes: list[int], layers: list[str], models: list[str], repeats: int, out: Path) -> None:
    """The ``--build-only`` table (module docstring)."""
    ctx = mp.get_context("fork")
    rows = []
    for n in sizes:
        d = Data(n)
        for model in models:
            got: dict[str, list[dict[str, Any]]] = {layer: [] for layer in layers}
            for _ in range(repeats):
                for layer in layers:
                    q = ctx.Queue()
                    p = ctx.Process(target=_build_child, args=(layer, model, d, q))
                    p.start()
                    got[layer].append(q.get())
                    p.join()
            for layer, runs in got.items():
                ok = [r for r in runs if not r["error"]]
                rows.append({"jobs": n, "model": model, "layer": layer, "runs": len(ok),
                             "build_s": float(np.median([r["build_s"] for r in ok])) if ok else np.nan,
                             "build_cpu_s": float(np.median([r["build_cpu_s"] for r in ok])) if ok else np.nan,
                             "error": next((r["error"] for r in runs if r["error"]), "")})
            print(f"{n} {model} done", flush=True)
    df = pd.DataFrame(rows)
    for col in ("build_s", "build_cpu_s"):
        ours = df[df["layer"] == "ours"].set_index(["jobs", "model"])[col]
        df[f"{col}_vs_ours"] = [v / ours.get((n, m), np.nan) for v, n, m in zip(df[col], df["jobs"], df["model"])]
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "modeling_layers_build.csv", index=False)
    print(markdown_table(df.drop(columns=["error"])))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", type=int, default=[2048, 16384, 131072])
    ap.add_argument("--layers", nargs="+", default=list(LAYERS), choices=LAYERS)
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--time-limit", type=float, default=600.0, help="HiGHS seconds per solve")
    ap.add_argument("--output", default="benchmarks/results")
    ap.add_argument("--build-only", action="store_true", help="time the builds only (module docstring)")
    ap.add_argument("--repeats", type=int, default=3, help="processes per row with --build-only")
    args = ap.parse_args()
    if args.build_only:
        build_only(args.sizes, args.layers, args.models, args.repeats, Path(args.output))
        return
    from rich.progress import Progress

    import policyopt

    ctx = mp.get_context("fork")
    rows = []
    cases = [(n, model, layer) for n in args.sizes for model in args.models for layer in args.layers]
    with Progress() as bar:
        task = bar.add_task("modeling layers", total=len(cases))
        data: dict[int, Data] = {}
        for n, model, layer in cases:
            bar.update(task, description=f"{layer} {model} n={n}")
            if n not in data:
                data.clear()
                data[n] = Data(n)
            q = ctx.Queue()
            p = ctx.Process(target=_child, args=(layer, model, data[n], args.time_limit, q))
            p.start()
            out = q.get()
            p.join()
            rows.append({"jobs": n, "model": model, "layer": layer, "slots": int(data[n].jj.size), **out})
            bar.advance(task)
    df = pd.DataFrame(rows)
    ref = {}
    for n in args.sizes:
        prob = gavel_problem(n, seed=0)
        for model, pol in (("las", "max_min_fairness"), ("max_sum", "max_sum_throughput")):
            if model in args.models:
                ref[(n, model)] = policyopt.solve(prob, pol, algorithm="ipm").objective
    df["policy_objective"] = [ref.get((n, m)) for n, m in zip(df["jobs"], df["model"])]
    df["agrees"] = (df["objective"] - df["policy_objective"]).abs() <= 1e-6 * df["policy_objective"].abs()
    for col in ("build_s", "first_iter_s"):
        ours = df[df["layer"] == "ours"].set_index(["jobs", "model"])[col]
        df[f"{col}_vs_ours"] = [v / ours.get((n, m), np.nan) for v, n, m in zip(df[col], df["jobs"], df["model"])]
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    df.to_csv(out / "modeling_layers.csv", index=False)
    cols = ["jobs", "model", "layer", "build_s", "first_iter_s", "solve_s", "peak_mb", "build_s_vs_ours",
            "first_iter_s_vs_ours", "agrees"]
    table = markdown_table(df[[c for c in cols if c in df]])
    (out / "modeling_layers.md").write_text(table)
    print(table)


if __name__ == "__main__":
    main()
