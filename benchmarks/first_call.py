"""The first solve of a process, piece by piece, against ECOS's first solve (issue 17's small sizes).

``solve_vs_gavel.py`` reports our first call in a process (``ours_s``, one call per process, as
``policyopt solve`` makes it) and its best of several. At 64 jobs the first call costs 2–3× the
later ones; this benchmark says where that goes, and what each piece costs cold. For a policy and a
size, fresh processes (spawned one after another, the kinds alternating, ``--processes`` of each)
do one thing each after the same start-up as ``solve_vs_gavel.py`` (imports, the workload, HiGHS's
library loaded and its banner silenced):

* ``ours``: ``policy.solve(problem)`` (wall and CPU; its phases from ``PolicyResult.timings``) with
  HiGHS's own calls timed around the backend's ``passModel`` and ``run`` (``highs_calls``; the
  reduced LP's too), so ``layers`` = the call less those: the modeling layer, the backend's Python
  and the result; the structured fast path's ``detect``, ``aggregate`` and ``certify`` timed alike,
  and a transportation LP's solve (``transport``: max-sum's small and class routes, its model,
  HiGHS's run and certificate; not in ``highs_calls``).
  The first call of the process, then ``--repeats − 1`` later calls by fresh policy objects: the
  fastest of those and its pieces (``later_*``);
* ``ours_warmed``: the same, in a process that first solved another policy on another problem
  (``makespan``, 32 jobs, untimed): what the first call costs once the process has run any solve;
* ``highs``: HiGHS alone on the policy's first LP (built untimed by our code, so only HiGHS is cold):
  a fresh ``Highs`` object given the arrays (``passModel``) and run with the options our rule picks
  for it (primal simplex, no presolve, no bound perturbation), first call;
* ``ecos``: ECOS's ``solve_via_data`` on each LP the policy solves (exported as ``solve_vs_gavel.py``
  does; cvxpy's compilation untimed): the first solve in the process and the best of ``--repeats``;
* ``prices`` (max-sum throughput only): the backend's linking-price path (``solvers/prices``) on the
  LP, started from its exact optimal row multipliers (computed in the parent process): the solve
  from the best possible start, first call.

CPU seconds are reported beside wall seconds; the medians over the processes are printed.

    python benchmarks/first_call.py --jobs 64 --policies max_sum_throughput max_min_fairness
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import time
from typing import Any

import numpy as np
import pandas as pd

KINDS = ("ours", "ours_warmed", "highs", "ecos", "prices")


def _setup(name: str, n: int, seed: int) -> tuple[Any, Any]:
    """The workload and the start-up of ``solve_vs_gavel.measure`` (untimed)."""
    from policies_bench import workload

    from policyopt.data import load_gavel
    from policyopt.solver_api import available_solvers
    from policyopt.solvers.highs import silence_banner

    problem = workload(load_gavel(), n, seed=seed)
    available_solvers()
    silence_banner()
    from policyopt.policy import get_policy

    return get_policy(name), problem


def _first_lp(pol: Any, problem: Any) -> Any:
    """The policy's first LP as it compiles it (the standard form HiGHS is given)."""
    from policyopt.modeling import Model

    space = pol.make_space(problem)
    model = Model(pol.name)
    X = space.add_allocation(model)
    pol.build(model, space, X)
    return model.compile()


def _recorded_lps(pol: Any, problem: Any) -> list[Any]:
    """Every LP the policy solves (recorded as ``solve_vs_gavel.py`` records them)."""
    from solve_vs_gavel import _recording_solver

    from policyopt.solvers import highs_steps

    forms: list[tuple[Any, float | None]] = []
    pol.config["solver"] = _recording_solver(forms, [])
    min_rows, highs_steps.MIN_ROWS = highs_steps.MIN_ROWS, 2**62
    try:
        pol.solve(problem)
    finally:
        highs_steps.MIN_ROWS = min_rows
    return [f for f, _ in forms]


def run_one(kind: str, name: str, n: int, seed: int, repeats: int, duals: np.ndarray | None) -> dict[str, Any]:
    """One fresh process: ``kind`` once, cold (see the module docstring)."""
    from policyopt.policy import get_policy

    pol, problem = _setup(name, n, seed)
    row: dict[str, Any] = {"kind": kind, "policy": name, "jobs": n}
    if kind == "ours_warmed":  # the process has solved something else first: another policy, another problem
        from policies_bench import workload

        from policyopt.data import load_gavel

        get_policy("makespan").solve(workload(load_gavel(), 32, seed=seed + 1))
        pol = get_policy(name)
    if kind in ("ours", "ours_warmed"):
        from policyopt.solvers import blocks
        from policyopt.solvers import highs as backend

        spent: dict[str, float] = {}

        def timed(owner: Any, attr: str, key: str) -> None:
            f = getattr(owner, attr)

            def g(*a: Any, **k: Any) -> Any:
                t0 = time.perf_counter()
                try:
                    return f(*a, **k)
                finally:
                    spent[key] = spent.get(key, 0.0) + time.perf_counter() - t0
            setattr(owner, attr, g)

        timed(backend.HighsModel, "_pass_model", "highs")
        timed(backend.HighsModel, "_run", "highs")
        for attr in ("detect", "aggregate", "certify"):  # the structured fast path's steps
            timed(blocks, attr, attr)
        from policyopt.solvers import transport

        timed(transport, "solve", "transport")  # a transportation LP (its model, HiGHS's run, certificate)
        calls: list[dict[str, Any]] = []
        for _ in range(max(2, repeats)):  # the first call, then later ones (fresh policy objects)
            pol = get_policy(name)
            spent.clear()
            c0, w0 = time.process_time(), time.perf_counter()
            res = pol.solve(problem)
            wall, cpu = time.perf_counter() - w0, time.process_time() - c0
            t = res.timings
            calls.append(dict(wall_s=wall, cpu_s=cpu, build_s=t.build, compile_s=t.compile, solve_s=t.solve,
                              extract_s=t.extract, highs_calls_s=spent.get("highs", 0.0),
                              detect_s=spent.get("detect", 0.0), aggregate_s=spent.get("aggregate", 0.0),
                              certify_s=spent.get("certify", 0.0), transport_s=spent.get("transport", 0.0),
                              layers_s=wall - spent.get("highs", 0.0),
                              objective=res.objective))
        row.update(calls[0])
        later = min(calls[1:], key=lambda c: c["wall_s"])  # the fastest later call, with its pieces
        row.update({f"later_{k}": v for k, v in later.items() if k != "objective"})
    elif kind == "highs":
        import highspy

        sf = _first_lp(pol, problem)
        A = sf.A.tocsc()
        lp = highspy.HighsLp()
        lp.num_col_, lp.num_row_ = sf.num_cols, sf.num_rows
        lp.col_cost_, lp.col_lower_, lp.col_upper_ = sf.c, sf.col_lower, sf.col_upper
        lp.row_lower_, lp.row_upper_ = sf.row_lower, sf.row_upper
        lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
        lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
        lp.sense_ = highspy.ObjSense.kMaximize if sf.sense == "max" else highspy.ObjSense.kMinimize
        c0, w0 = time.process_time(), time.perf_counter()
        h = highspy.Highs()
        for k, v in (("output_flag", False), ("solver", "simplex"), ("simplex_strategy", 4),
                     ("presolve", "off"), ("primal_simplex_bound_perturbation_multiplier", 0.0), ("threads", 1)):
            h.setOptionValue(k, v)
        h.passModel(lp)
        h.run()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        row.update(wall_s=wall, cpu_s=cpu, objective=h.getInfo().objective_function_value,
                   iterations=h.getInfo().simplex_iteration_count)
    elif kind == "ecos":
        from solve_vs_gavel import to_cvxpy

        first = first_cpu = best = best_cpu = 0.0
        for sf in _recorded_lps(pol, problem):
            data, chain, _ = to_cvxpy(sf).get_problem_data("ECOS")
            walls, cpus = [], []
            for _ in range(repeats):
                c0, w0 = time.process_time(), time.perf_counter()
                chain.solver.solve_via_data(data, warm_start=False, verbose=False, solver_opts={})
                walls.append(time.perf_counter() - w0)
                cpus.append(time.process_time() - c0)
            first, first_cpu = first + walls[0], first_cpu + cpus[0]
            best, best_cpu = best + min(walls), best_cpu + min(cpus)
        row.update(wall_s=first, cpu_s=first_cpu, best_wall_s=best, best_cpu_s=best_cpu)
    elif kind == "prices":
        from policyopt.solver_api import SolverOptions
        from policyopt.solvers.highs import HighsSolver

        sf = _first_lp(pol, problem)
        loaded = HighsSolver().load(sf, SolverOptions())
        loaded.return_duals = False
        assert duals is not None
        c0, w0 = time.process_time(), time.perf_counter()
        applies = loaded.set_dual_start(duals)
        res = loaded.solve()
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        row.update(wall_s=wall, cpu_s=cpu, objective=res.objective,
                   route=str(res.options.get("fast_path", "")) if applies else "shape not detected")
    else:
        raise ValueError(f"kind: {kind!r} is not one of {', '.join(KINDS)}")
    return row


def optimal_duals(name: str, n: int, seed: int) -> np.ndarray:
    """The first LP's optimal row multipliers (HiGHS, in this process)."""
    from policyopt.solver_api import SolverOptions
    from policyopt.solvers.highs import HighsSolver

    pol, problem = _setup(name, n, seed)
    loaded = HighsSolver().load(_first_lp(pol, problem), SolverOptions(algorithm="simplex"))
    res = loaded.solve()
    assert res.row_duals is not None
    return np.asarray(res.row_duals)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--jobs", type=int, nargs="+", default=[64])
    ap.add_argument("--policies", nargs="+", default=["max_sum_throughput", "max_min_fairness"])
    ap.add_argument("--kinds", nargs="+", default=list(KINDS), choices=KINDS)
    ap.add_argument("--processes", type=int, default=5, help="fresh processes per kind")
    ap.add_argument("--repeats", type=int, default=5,
                    help="ECOS: solves per LP (the first and the best); ours: calls per process (the first and the "
                         "fastest later one)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--csv", default=None, help="write every process's row here")
    args = ap.parse_args()
    ctx = mp.get_context("spawn")
    rows = []
    for name in args.policies:
        for n in args.jobs:
            kinds = [k for k in args.kinds if k != "prices" or name == "max_sum_throughput"]
            duals = None
            if "prices" in kinds:
                with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
                    duals = ex.submit(optimal_duals, name, n, args.seed).result()
            for _ in range(args.processes):
                for kind in kinds:  # alternating: each kind sees the same machine load
                    with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
                        rows.append(ex.submit(run_one, kind, name, n, args.seed, args.repeats, duals).result())
    df = pd.DataFrame(rows)
    if args.csv:
        df.to_csv(args.csv, index=False)
    pieces = ("wall_s", "cpu_s", "build_s", "compile_s", "solve_s", "extract_s", "highs_calls_s", "detect_s",
              "aggregate_s", "certify_s", "transport_s", "layers_s")
    num = [c for c in (*pieces, "best_wall_s", "best_cpu_s", "iterations", *(f"later_{p}" for p in pieces))
           if c in df]
    med = df.groupby(["policy", "jobs", "kind"], sort=False)[num].median()
    med[[c for c in num if c.endswith("_s")]] *= 1e3
    med = med.rename(columns={c: c[:-2] + "_ms" if c.endswith("_s") else c for c in num})
    with pd.option_context("display.width", 220, "display.max_columns", 20, "display.float_format", "{:.3f}".format):
        print(f"medians over {args.processes} fresh processes per kind (ms):")
        print(med[[c for c in med if not c.startswith("later_")]].to_string())
        later = med[[c for c in med if c.startswith("later_")]].dropna(how="all")
        if len(later):
            print("ours, the fastest later call of each process (ms):")
            print(later.rename(columns=lambda c: c[len("later_"):]).to_string())
        if "route" in df:
            print("price path:", "; ".join(sorted(set(df["route"].dropna().astype(str)))))
    if "objective" in df:
        spread = df.groupby(["policy", "jobs"])["objective"].agg(lambda v: float(np.ptp(v.dropna())) if v.notna().any()
                                                                  else float("nan"))
        print("objective spread across kinds (max − min):", spread.to_dict())


if __name__ == "__main__":
    main()
