"""Our whole solve against Gavel's solver stack (cvxpy + ECOS, cvxpy + Clarabel) on the same LPs.

Workload: Gavel's generator (``policies_bench.workload``: job types drawn from
``../shared/data/gavel/simulation_throughputs.json``, scale factors 1/2/4/8, N/4 GPUs of each of
V100/P100/K80, jobs observed mid-run). For each policy and size, in one fresh process (one call per
process, as ``policyopt solve`` does; process start-up — imports, loading HiGHS's library — is
done before the timed call, as cvxpy's and ECOS's are):

* ``ours``: ``policy.solve(problem)`` once, timed by its ``PolicyResult.timings`` (build + compile
  + solve + extract), with the default ``algorithm=auto`` — the first call in the process
  (``ours_s``) and the best of ``--repeats`` calls (``ours_best_s``); ``route``: how that first call
  was answered (``arrays``, ``class LP``, ``aggregated model``, ``kept model`` or ``modeling layer``,
  see :func:`_route`);
* ``old``: the same with ``algorithm=simplex`` — HiGHS's dual simplex, the previous default below
  200,000 non-zeros (``--old-max`` bounds the sizes: it is slow);
* every LP the policy solved is recorded (``path``: whether the backend solved them as the class
  space's reduced LPs; the standard form at each solve, in-place updates
  included; a stage solved by simplex steps on HiGHS's factorization, ``solvers/highs_steps``, is
  run by HiGHS in the recording pass), exported to one cvxpy problem each (``A_lo x ≥ lo``,
  ``A_hi x ≤ hi``, bounds on one vector variable) and solved with ECOS and Clarabel; their time is the solver's own
  (``solver_stats.solve_time``, cvxpy's compilation excluded; best of ``--repeats``), summed over
  the LPs; ``ecos_ratio`` = ECOS time / ``ours_s``, ``ecos_ratio_best`` = ECOS time / ``ours_best_s``;
  ``ecos_first_s`` / ``ecos_first_cpu_s``: the same sum of each LP's *first* solve in the process (the
  first LP's is ECOS's first call in the process: its code and data cold, as our first call's are),
  and ``ecos_ratio_first`` / ``ecos_cpu_ratio_first`` = that / ``ours_s`` / ``ours_cpu_s`` — first
  call against first call, like for like (``ecos_ratio_best`` and ``ecos_cpu_ratio``: best against
  best);
  on a loaded machine wall clocks mostly measure waiting, so the same are also measured in CPU
  seconds of the process (``ours_best_cpu_s``, ``ecos_cpu_s``, ``ecos_cpu_ratio``; the solver is
  called as cvxpy calls it, ``solve_via_data``, so cvxpy's compilation is excluded);
* objectives: each LP's optimum from our backend against ECOS's and Clarabel's (largest
  ``|a − b| / max(1, |a|)`` over the LPs: relative, absolute below 1 — finish-time fairness's
  Newton LPs have optimum 0);
* ``ipm_nocrossover_s``: HiGHS interior point without crossover on the first LP (load + solve; its
  point would still need ``AllocationSpace.project``), the "cheap route" the fast path is chosen
  against.

Writes a CSV and a plot (ECOS solver time / our total time, per policy, against jobs) and prints
the table. Timings on a shared machine are noisy; every ratio is measured side by side, in one
process per row.

    python benchmarks/solve_vs_gavel.py                       # 64 … 16,384 jobs, five policies
    python benchmarks/solve_vs_gavel.py --quick               # 64, 256, 1,024 jobs
    python benchmarks/solve_vs_gavel.py --sizes 2048 --policies max_min_fairness --csv out.csv
    python benchmarks/solve_vs_gavel.py --warm 2048            # re-solve after one arrival/completion vs cold
"""
from __future__ import annotations

import argparse
import concurrent.futures as cf
import multiprocessing as mp
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

SIZES = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384)
QUICK_SIZES = (64, 256, 1024)
#: label → (policy name, options); "+ss": space sharing over Gavel's type-level pair table
POLICIES: dict[str, tuple[str, dict[str, Any]]] = {
    "max_min_fairness": ("max_min_fairness", {}),
    "max_min_fairness+ss": ("max_min_fairness", {"space_sharing": True, "pair_top_k": 8}),
    "max_sum_throughput": ("max_sum_throughput", {}),
    "makespan": ("makespan", {}),
    "finish_time_fairness": ("finish_time_fairness", {}),
}


def _rel(a: float, b: float) -> float:
    """``|a − b| / max(1, |a|)``: relative, absolute for objectives below 1 (finish-time fairness's
    Newton LPs have optimum 0)."""
    return abs(a - b) / max(1.0, abs(a))
RESULTS = Path(__file__).resolve().parent / "results"


def to_cvxpy(sf: Any) -> Any:
    """One cvxpy problem equal to the standard form ``sf`` (rows already scaled; any positive row
    scaling leaves the optimum unchanged)."""
    import cvxpy as cp

    x = cp.Variable(sf.num_cols)
    A = sf.A.tocsr()
    lo, hi = np.flatnonzero(np.isfinite(sf.row_lower)), np.flatnonzero(np.isfinite(sf.row_upper))
    cl, cu = np.flatnonzero(np.isfinite(sf.col_lower)), np.flatnonzero(np.isfinite(sf.col_upper))
    cons = []
    if lo.size:
        cons.append(A[lo] @ x >= sf.row_lower[lo])
    if hi.size:
        cons.append(A[hi] @ x <= sf.row_upper[hi])
    if cl.size:
        cons.append(x[cl] >= sf.col_lower[cl])
    if cu.size:
        cons.append(x[cu] <= sf.col_upper[cu])
    obj = sf.c @ x + sf.offset
    return cp.Problem(cp.Maximize(obj) if sf.sense == "max" else cp.Minimize(obj), cons)


def _recording_solver(store: list[tuple[Any, float | None]], notes: list[str]) -> Any:
    """A HiGHS backend that records (a copy of the standard form, our objective) at every solve,
    and the fast-path note of each result."""
    from policyopt.solvers.highs import HighsSolver

    class Recording(HighsSolver):
        def load(self, sf: Any, options: Any) -> Any:
            model = super().load(sf, options)
            solve = model.solve

            def recorded() -> Any:
                res = solve()
                store.append((model.sf.copy(), res.objective))
                notes.append(str(res.options.get("fast_path", "")))
                return res

            model.solve = recorded  # type: ignore[method-assign]
            return model

    return Recording()


def measure(label: str, n: int, seed: int, old: bool, gavel_solvers: tuple[str, ...], repeats: int) -> dict[str, Any]:
    """One row, in a fresh process: ours (first call), old, and the Gavel solvers on the same LPs."""
    from policies_bench import workload

    from policyopt.data import load_gavel
    from policyopt.policy import get_policy

    name, options = POLICIES[label]
    problem = workload(load_gavel(), n, seed=seed, colocated=bool(options.get("space_sharing")))
    # process start-up, not solving: the solver package and HiGHS's library loaded (as cvxpy and
    # ECOS are before their timed solve)
    from policyopt.solver_api import available_solvers
    from policyopt.solvers.highs import silence_banner

    available_solvers()
    silence_banner()
    pol = get_policy(name, **options)
    c0 = time.process_time()
    res = pol.solve(problem)
    cpu = time.process_time() - c0
    t = res.timings
    route = _route(pol)
    row: dict[str, Any] = {"policy": label, "jobs": n, "status": res.status.value, "route": route, "ours_s": t.total,
                           "ours_cpu_s": cpu, "build_s": t.build, "compile_s": t.compile,
                           "solve_s": t.solve, "extract_s": t.extract, "objective": res.objective}
    best, best_cpu = t.total, cpu
    for _ in range(repeats - 1):  # later calls (fresh policy objects, same process): best of them
        pol = get_policy(name, **options)
        c0 = time.process_time()
        best = min(best, pol.solve(problem).timings.total)
        best_cpu = min(best_cpu, time.process_time() - c0)
    row["ours_best_s"], row["ours_best_cpu_s"] = best, best_cpu
    # the LPs it solved, recorded by a second (untimed) run
    forms: list[tuple[Any, float | None]] = []
    notes: list[str] = []
    rec = get_policy(name, **options)
    rec.config["solver"] = _recording_solver(forms, notes)
    # a stage the policy solves by simplex steps on HiGHS's factorization (max-min fairness's fill,
    # solvers/highs_steps) is an LP it solved too: recorded by letting HiGHS run it here
    from policyopt.solvers import highs_steps

    min_rows, highs_steps.MIN_ROWS = highs_steps.MIN_ROWS, 2**62
    try:
        rec.solve(problem)
    finally:
        highs_steps.MIN_ROWS = min_rows
    row.update(lps=len(forms), cols=forms[0][0].num_cols, rows=forms[0][0].num_rows, nnz=forms[0][0].nnz)
    row["path"] = "aggregated" if any(str(note).startswith("aggregated") for note in notes) else "whole LP"
    # the cheap route, for comparison: HiGHS interior point without crossover on the (first) LP
    # (its point then needs AllocationSpace.project to be exactly feasible; not timed here)
    from policyopt import SolverOptions, get_solver

    t0 = time.perf_counter()
    nox = get_solver("highs").load(forms[0][0].copy(),
                                   SolverOptions(algorithm="ipm", extra={"run_crossover": "off"})).solve()
    row["ipm_nocrossover_s"] = time.perf_counter() - t0
    row["ipm_nocrossover_rel_diff"] = (_rel(forms[0][1], nox.objective)
                                       if nox.objective is not None and forms[0][1] is not None else np.inf)
    if old:
        pol_old = get_policy(name, **options, algorithm="simplex")
        c0 = time.process_time()
        r_old = pol_old.solve(problem)
        row["old_cpu_s"] = time.process_time() - c0
        row["old_s"] = r_old.timings.total
        row["old_objective"] = r_old.objective
    for solver in gavel_solvers:
        total, total_cpu, worst = 0.0, 0.0, 0.0
        first, first_cpu = 0.0, 0.0  # each LP's first solve in the process
        for f, ours in forms:
            prob = to_cvxpy(f)
            data, chain, _ = prob.get_problem_data(solver)
            times, cpus = [], []
            for _ in range(repeats):  # the solver's own call, as cvxpy makes it (no canonicalization)
                c0, w0 = time.process_time(), time.perf_counter()
                raw = chain.solver.solve_via_data(data, warm_start=False, verbose=False, solver_opts={})
                cpus.append(time.process_time() - c0)
                times.append(time.perf_counter() - w0)
            del raw
            prob.solve(solver=solver)  # the objective, through cvxpy's usual path
            total += min(times)
            total_cpu += min(cpus)
            first += times[0]
            first_cpu += cpus[0]
            if ours is None or prob.value is None or not np.isfinite(prob.value):
                worst = np.inf
            else:
                worst = max(worst, _rel(ours, float(prob.value)))
        key = solver.lower()
        row[f"{key}_s"], row[f"{key}_cpu_s"] = total, total_cpu
        row[f"{key}_ratio"] = total / row["ours_s"]
        row[f"{key}_ratio_best"] = total / row["ours_best_s"]
        row[f"{key}_cpu_ratio"] = total_cpu / row["ours_best_cpu_s"]
        row[f"{key}_first_s"], row[f"{key}_first_cpu_s"] = first, first_cpu
        row[f"{key}_ratio_first"] = first / row["ours_s"]
        row[f"{key}_cpu_ratio_first"] = first_cpu / row["ours_cpu_s"]
        row[f"{key}_obj_rel_diff"] = worst
    return row


WORKLOADS = ("gavel", "distinct")


def _route(pol: Any) -> str:
    """How a policy object's first (timed) call was answered: ``arrays`` (a small max-sum or max-min
    problem from the space's arrays, :mod:`policyopt.transport_route`), ``class LP`` (max-sum's
    transportation LP over the job classes, :mod:`policyopt.class_transport`), ``aggregated model``
    (the class space's reduced LP, :mod:`policyopt.aggregate_cold`, kept for re-solves), ``kept model``
    (the modeling layer's LP, kept for re-solves, :mod:`policyopt.incremental`) or ``modeling layer``
    (none kept). The backend may still aggregate the LP it is given: ``path`` says so."""
    from policyopt import class_transport, incremental, transport_route
    from policyopt.aggregate_resolve import AggregateModel

    if class_transport.answered(pol):
        return "class LP"
    if pol.__dict__.get(transport_route._ANSWERED):
        return "arrays"
    st = incremental.state(pol)
    if st is None:
        return "modeling layer"
    return "aggregated model" if isinstance(st, AggregateModel) else "kept model"


WARM_POLICIES = ("max_min_fairness", "max_sum_throughput")


def measure_warm(n: int, seed: int, repeats: int, workloads: tuple[str, ...] = WORKLOADS,
                 policies: tuple[str, ...] = WARM_POLICIES) -> list[dict[str, Any]]:
    """Re-solve after one arrival at ``n`` jobs (and after one completion, ``n − 1`` left) against a
    cold solve, in one process: a fresh policy object solving the problem (cold) and one that solved
    the problem before the change (warm: its loaded model updated in place, see docs/solvers-resolves.md).
    Two workloads: Gavel's (jobs repeat: the structured fast path), and the same with every job's
    throughputs scaled by ``U(0.9, 1.1)`` (all jobs distinct: the whole LP goes to HiGHS); ``workloads``
    picks them (``gavel``, ``distinct``); ``policies`` the policies (of :data:`WARM_POLICIES`). ``path``
    tells how the re-solve was answered: ``class basis``
    (max-sum after its class transportation LP: that LP's kept basis, :mod:`policyopt.transport_resolve`;
    ``class LP``: a HiGHS run on that LP), ``aggregated``
    (the kept reduced LP, :mod:`policyopt.aggregate_resolve`; ``aggregated, factor``: an LP stage
    answered from the kept factorization of its last basis, :mod:`policyopt.aggregate_basis`,
    without a HiGHS run), ``in place`` (the kept whole LP,
    :mod:`policyopt.incremental`; a max-sum completion's jobs held at 0 there too), ``rebuilt from
    prices`` (a fresh build started from the kept capacity prices) or ``rebuilt``. ``steady_*``: the
    same change after a re-solve (the object's previous problem was answered warm too); ``steady_path``
    how that one was answered."""
    import dataclasses

    from policies_bench import workload

    from policyopt.data import load_gavel
    from policyopt.policy import get_policy
    from policyopt.solvers.highs import silence_banner

    silence_banner()
    p = workload(load_gavel(), n, seed=seed)
    rng = np.random.default_rng(seed)
    distinct = [dataclasses.replace(j, throughputs={c: v * float(rng.uniform(0.9, 1.1))
                                                    for c, v in j.throughputs.items()})
                for j in p.jobs]
    rows = []
    for label, jobs in (("gavel", list(p.jobs)), ("distinct jobs", distinct)):
        if label.split()[0] not in workloads:
            continue
        # an arrival (the last job) and a completion (a job in the middle of the list); ``steady``:
        # the same change on a policy object whose previous problem was itself a re-solve (the one
        # before it had also lost job n/4): what a scheduler's or simulator's later re-solves cost
        other = jobs[:n // 4] + jobs[n // 4 + 1:]
        for change, first, prev, new in (
                ("arrival", other[:-1], jobs[:-1], jobs),
                ("completion", other, jobs, jobs[:n // 2] + jobs[n // 2 + 1:])):
            first_p, prev_p, new_p = p.with_jobs(first), p.with_jobs(prev), p.with_jobs(new)
            for name in policies:
                cold_t, warm_t, steady_t, objs = [], [], [], []
                for _ in range(repeats):  # CPU seconds of policy.solve (wall clocks measure waiting here)
                    c0 = time.process_time()
                    r = get_policy(name).solve(new_p)
                    cold_t.append(time.process_time() - c0)
                    pol = get_policy(name)
                    pol.solve(prev_p)
                    before = _answered(pol)
                    c0 = time.process_time()
                    w = pol.solve(new_p)
                    warm_t.append(time.process_time() - c0)
                    objs.append(_rel(r.objective, w.objective))
                    path = _path(pol, before)
                    pol = get_policy(name)
                    pol.solve(first_p)
                    pol.solve(prev_p)
                    before = _answered(pol)
                    c0 = time.process_time()
                    w = pol.solve(new_p)
                    steady_t.append(time.process_time() - c0)
                    objs.append(_rel(r.objective, w.objective))
                    steady_path = _path(pol, before)
                rows.append({"workload": label, "change": change, "policy": name, "jobs": len(new), "path": path,
                             "steady_path": steady_path,
                             "cold_cpu_s": min(cold_t), "warm_cpu_s": min(warm_t),
                             "warm_over_cold": min(warm_t) / min(cold_t), "steady_cpu_s": min(steady_t),
                             "steady_over_cold": min(steady_t) / min(cold_t), "obj_rel_diff": max(objs)})
    return rows


def _answered(pol: Any) -> tuple[Any, int, int, int, tuple[int, int]]:
    """The policy's kept model, how many problems it answered in place, how many fresh builds of
    the policy started from a kept model's prices, how many LP answers an aggregated model read
    from its kept factorization, and how many re-solves the class transportation LP's kept basis
    answered (and how many by a HiGHS run on that LP)."""
    from policyopt import incremental, transport_resolve

    st = incremental.state(pol)
    return (st, (st.updates if st is not None else 0), incremental.seeded(pol),
            getattr(st, "factor_answers", 0), transport_resolve.answered(pol))


def _path(pol: Any, before: tuple[Any, int, int, int, tuple[int, int]]) -> str:
    """How the last solve was answered, from the kept model before and after it."""
    from policyopt.aggregate_resolve import AggregateModel

    st, n, seeded, factored, (basis, runs) = _answered(pol)
    if basis > before[4][0]:
        return "class basis"
    if runs > before[4][1]:
        return "class LP"
    if st is None or (st is before[0] and n == before[1]) or (st is not before[0] and n == 0):
        return "rebuilt from prices" if seeded > before[2] else "rebuilt"
    if isinstance(st, AggregateModel):  # (factor: no HiGHS run; a max-min solve has two LP stages)
        return "aggregated, factor" if factored > (before[3] if st is before[0] else 0) else "aggregated"
    return "in place"


def run_all(labels: list[str], sizes: list[int], seed: int, old_max: int, ss_max: int,
            gavel_max: int, solvers: tuple[str, ...], repeats: int) -> pd.DataFrame:
    from tqdm import tqdm

    jobs = [(lab, n) for lab in labels for n in sizes if not (lab.endswith("+ss") and n > ss_max)]
    rows = []
    ctx = mp.get_context("spawn")
    for lab, n in tqdm(jobs, desc="solve_vs_gavel", file=sys.stderr):
        # a fresh process per row: one call per process, like `policyopt solve`
        with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
            fut = ex.submit(measure, lab, n, seed, n <= old_max, solvers if n <= gavel_max else (), repeats)
            rows.append(fut.result())
    return pd.DataFrame(rows)


def plot(df: pd.DataFrame, path: Path) -> Path:
    """ECOS solver time / our total time against jobs, one line per policy (log-log)."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(7.5, 4.5))
    ax = fig.add_subplot()
    for lab, d in df.groupby("policy", sort=False):
        if "ecos_cpu_ratio" in d:
            d = d.dropna(subset=["ecos_cpu_ratio"])
            line = ax.plot(d["jobs"], d["ecos_cpu_ratio"], marker="o", label=f"{lab} (CPU s)")
            ax.plot(d["jobs"], d["ecos_ratio"], ls=":", color=line[0].get_color())
    for y, txt in ((1.0, "as fast as ECOS"), (5.0, "5× (target)"), (20.0, "20× (goal)")):
        ax.axhline(y, color="grey", lw=0.8, ls="--")
        ax.text(df["jobs"].min(), y * 1.05, txt, fontsize=7, color="grey")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("jobs (N/4 GPUs each of V100, P100, K80)")
    ax.set_ylabel("ECOS solver time / our total time\n(solid: CPU s, best of runs; dotted: wall, first call)")
    ax.set_title("policyopt solve vs Gavel's cvxpy + ECOS (same LPs)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=None)
    ap.add_argument("--policies", nargs="+", default=list(POLICIES), choices=list(POLICIES))
    ap.add_argument("--quick", action="store_true", help=f"sizes {QUICK_SIZES}")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--old-max", type=int, default=2048, help="measure algorithm=simplex up to this size")
    ap.add_argument("--ss-max", type=int, default=1024, help="space sharing up to this size")
    ap.add_argument("--gavel-max", type=int, default=16384, help="run ECOS/Clarabel up to this size")
    ap.add_argument("--solvers", nargs="+", default=["ECOS", "CLARABEL"])
    ap.add_argument("--repeats", type=int, default=3,
                    help="ECOS/Clarabel: best of this many solves; ours: the first call, and the best of this many")
    ap.add_argument("--csv", type=Path, default=RESULTS / "solve_vs_gavel.csv")
    ap.add_argument("--plot", type=Path, default=RESULTS / "solve_vs_gavel.png")
    ap.add_argument("--warm", type=int, nargs="*", default=None, metavar="JOBS",
                    help="only measure the re-solve after one arrival (and one completion) against a cold solve "
                         "(default 2048 jobs)")
    ap.add_argument("--workload", nargs="+", default=list(WORKLOADS), choices=WORKLOADS,
                    help="with --warm: Gavel's generated jobs (kinds repeat) and/or the same jobs made distinct")
    args = ap.parse_args()
    if args.warm is not None:
        warm_policies = tuple(p for p in WARM_POLICIES if p in args.policies)
        if not warm_policies:
            ap.error(f"--warm measures {', '.join(WARM_POLICIES)}; --policies {' '.join(args.policies)} has neither")
        ctx = mp.get_context("spawn")
        rows = []
        for n in args.warm or [2048]:
            with cf.ProcessPoolExecutor(max_workers=1, mp_context=ctx) as ex:
                rows += ex.submit(measure_warm, n, args.seed, max(1, args.repeats), tuple(args.workload),
                                  warm_policies).result()
        with pd.option_context("display.width", 200, "display.float_format", "{:.4g}".format):
            print(pd.DataFrame(rows).to_string(index=False))
        return
    sizes = args.sizes or list(QUICK_SIZES if args.quick else SIZES)
    df = run_all(args.policies, sizes, args.seed, args.old_max, args.ss_max, args.gavel_max,
                 tuple(s.upper() for s in args.solvers), max(1, args.repeats))
    args.csv.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(args.csv, index=False)
    plot(df, args.plot)
    cols = [c for c in ("policy", "jobs", "lps", "nnz", "route", "path", "ours_s", "ours_best_s", "old_s",
                        "ipm_nocrossover_s", "ecos_s", "ecos_ratio", "ecos_ratio_best", "ours_best_cpu_s", "ecos_cpu_s",
                        "ecos_cpu_ratio", "ecos_first_s", "ecos_ratio_first", "ecos_cpu_ratio_first",
                        "clarabel_s", "clarabel_ratio", "ecos_obj_rel_diff", "clarabel_obj_rel_diff") if c in df]
    with pd.option_context("display.width", 250, "display.max_columns", 30, "display.float_format", "{:.4g}".format):
        print(df[cols].to_string(index=False))
    print(f"\nwrote {args.csv} and {args.plot}")


if __name__ == "__main__":
    main()
