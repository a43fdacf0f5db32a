"""``policyopt bench suite``: a fixed, versioned set of policy LPs/MILPs and every installed backend on it.

The problem set (version :data:`SUITE_VERSION`) is generated, never downloaded: for each family
(a policy, its options, and which of the models it solves) and size ``n`` (jobs), the problem is
:func:`~policyopt.bench.harness.gavel_problem` — Gavel's measured throughputs, Gavel's job mix,
``n/4`` GPUs of each of V100/P100/K80 — with the seed :func:`instance_seed` (a CRC of the family
and size), and the instance is the standard form the policy hands its backend at that stage
(:func:`~policyopt.bench.export.capture_stage`; earlier stages of multi-stage policies solved by
HiGHS). Each instance's fingerprint (SHA-256 of the standard form) is recorded, so two runs can be
checked to be on the same set.

Every backend solves every instance it supports (LP-only backends skip MILPs) in a forked child
with the time limit; a child still running at ``1.2·limit + 10 s`` is killed. The reference objective
of an instance is HiGHS's (else the median of the optimal answers); an answer **solves** the
instance when its status is optimal and its objective is within ``tol`` (1e-6) relative of the
reference. Reported per backend, LPs and MILPs apart, as in Mittelmann's benchmarks: the shifted
geometric mean of the time, ``exp(mean(log(t + s))) − s`` with shift ``s`` = 10 s, where an
unsolved instance counts as the time limit, and the number solved; plus Dolan–Moré performance profiles
``ρ_s(τ) = |{p : t_{p,s} ≤ τ·min_s' t_{p,s'}}| / |P|`` (unsolved: never), LPs and MILPs apart.
Times are wall seconds from the standard form to the answer (the backend's own model build
included).
"""
from __future__ import annotations

import multiprocessing as mp
import queue
import sys
import time
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..errors import InputError, UnknownNameError
from ..problem import Entity, Problem
from ..solver_api import SolverOptions, get_solver
from ..standard_form import StandardForm
from .export import capture_stage, fingerprint
from .harness import backend_options, gavel_problem

__all__ = [
    "ALL_SIZES",
    "DEFAULT_SIZES",
    "FAMILIES",
    "SUITE_VERSION",
    "Instance",
    "SuiteConfig",
    "build_instance",
    "default_backends",
    "markdown_table",
    "performance_profile",
    "plot_profiles",
    "run_suite",
    "shifted_geomean",
    "summarize_suite",
    "write_suite",
]

SUITE_VERSION = "2"
ALL_SIZES = (256, 2048, 16384, 131072, 262144)
#: the default run (fits 15 minutes on a loaded two-core machine); ``--sizes all`` for the full set
DEFAULT_SIZES = (256, 2048)
#: a child still running at ``KILL_FACTOR·limit + KILL_GRACE`` seconds is killed (SCIP may finish its
#: root LP before it looks at the clock)
KILL_FACTOR, KILL_GRACE = 1.2, 10.0
#: backends tried by default, in this order, where installed
CANDIDATE_BACKENDS = ("highs", "highs:ipm", "ortools:glop", "ortools:pdlp", "clarabel", "scip", "cuopt")


#: branch-and-bound nodes of the earlier bottleneck MILPs when ``wf_milp_last`` is generated: the first
#: bottleneck MILP is not proven optimal within minutes even at 256 jobs (``wf_milp``), so its best
#: point after this many nodes fixes the frozen set that the last MILP starts from (256 jobs only:
#: at 2,048 those nodes alone take many minutes, past the default run's budget)
WF_MILP_LAST_NODES = 50


@dataclass(frozen=True)
class Family:
    """A policy family of the suite: policy, options, which model (``stage``; ``None``: the last
    model the policy solves) and the largest size."""

    name: str
    policy: str
    options: dict[str, Any] = field(default_factory=dict)
    stage: int | None = 0
    space_sharing: bool = False
    max_size: int = ALL_SIZES[-1]
    prepare: Callable[[Problem, int], tuple[Problem, dict[str, Any]]] | None = None
    doc: str = ""


def _with_slos(problem: Problem, seed: int) -> tuple[Problem, dict[str, Any]]:
    """SLOs of 2, 4 or 10 × the job's duration at its equal share (feasible: the equal share meets them)."""
    from ..allocation import AllocationSpace

    thr = AllocationSpace(problem).equal_share_throughput()
    factors = np.random.default_rng(seed).choice([2.0, 4.0, 10.0], size=len(problem.jobs))
    jobs = [replace(j, slo_seconds=float(f * j.steps_remaining / t)) if t > 0 else j
            for j, f, t in zip(problem.jobs, factors, thr)]
    return problem.with_jobs(jobs), {}


def _with_budget(problem: Problem, seed: int) -> tuple[Problem, dict[str, Any]]:
    """Budget = half the whole cluster's $/h over the equal-share makespan (the budget row binds)."""
    from ..allocation import AllocationSpace

    thr = AllocationSpace(problem).equal_share_throughput()
    steps = np.array([j.steps_remaining for j in problem.jobs])
    hours = float(np.max(steps[thr > 0] / thr[thr > 0])) / 3600.0
    rate = sum(w.count * (w.price_per_hour or 0.0) for w in problem.cluster.worker_types)
    return problem, {"budget": 0.5 * rate * hours}


def _with_entities(problem: Problem, seed: int) -> tuple[Problem, dict[str, Any]]:
    """Four entities (weights 1–4; one of them FIFO inside), jobs dealt round-robin."""
    ents = {"a": Entity("a", 1.0), "b": Entity("b", 2.0), "c": Entity("c", 3.0, "fifo"), "d": Entity("d", 4.0)}
    jobs = [replace(j, entity="abcd"[i % 4]) for i, j in enumerate(problem.jobs)]
    return Problem(problem.cluster, tuple(jobs), problem.colocated, ents, problem.colocated_types), {}


FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("las", "max_min_fairness", doc="max-min fairness (LAS), one LP"),
    Family("max_sum", "max_sum_throughput", doc="maximum total throughput, one LP"),
    Family("makespan", "makespan", doc="minimum makespan via z = 1/M, one LP"),
    Family("ftf", "finish_time_fairness", doc="finish-time fairness, its first parametric LP"),
    Family("fifo", "fifo", doc="heterogeneity-aware FIFO LP"),
    Family("cost_slo", "min_cost_slo", prepare=_with_slos, doc="min cost with SLO rows, one LP"),
    Family("budget_makespan", "makespan_under_budget", prepare=_with_budget,
           doc="makespan under a budget, one LP (z = 1/M)"),
    Family("water_filling_step", "max_min_fairness_water_filling", stage=1,
           doc="weighted water-filling, its second level LP (the last if it has one level)"),
    Family("hierarchical", "hierarchical", stage=1, prepare=_with_entities,
           doc="hierarchical water-filling (4 entities), its second level LP (or the last)"),
    Family("space_sharing", "max_min_fairness", options={"pair_top_k": 4}, space_sharing=True, max_size=16384,
           doc="max-min fairness with pair columns (4 best pairs per job)"),
    Family("wf_milp", "water_filling_milp", stage=1, max_size=16384,
           doc="the published water-filling's first bottleneck MILP (its second model)"),
    Family("wf_milp_last", "water_filling_milp", options={"mip_node_limit": WF_MILP_LAST_NODES}, stage=None,
           max_size=256, doc=f"the published water-filling's last bottleneck MILP (earlier MILPs stopped at "
                              f"{WF_MILP_LAST_NODES} nodes, their best points deciding the frozen jobs)"),
)}


def instance_seed(family: str, size: int) -> int:
    """The fixed seed of an instance (CRC-32 of ``"v<version>:<family>:<size>"``)."""
    return zlib.crc32(f"v{SUITE_VERSION}:{family}:{size}".encode())


@dataclass
class Instance:
    family: str
    size: int
    sf: StandardForm
    stage: int
    build_seconds: float
    sha256: str

    @property
    def name(self) -> str:
        return f"{self.family}-{self.size}"

    def row(self) -> dict[str, Any]:
        return {"instance": self.name, "family": self.family, "jobs": self.size, "cols": self.sf.num_cols,
                "rows": self.sf.num_rows, "nnz": self.sf.nnz, "mip": self.sf.is_mip,
                "stage": self.stage, "build_s": self.build_seconds, "sha256": self.sha256}


def build_instance(family: str, size: int) -> Instance:
    """Generate one instance of the suite (deterministic for a suite version)."""
    from ..policy import get_policy

    fam = FAMILIES[family]
    t0 = time.perf_counter()
    seed = instance_seed(family, size)
    problem = gavel_problem(size, seed=seed % 2**31, space_sharing=fam.space_sharing)
    extra: dict[str, Any] = {}
    if fam.prepare is not None:
        problem, extra = fam.prepare(problem, seed)
    opts = {**fam.options, **extra, **({"space_sharing": True} if fam.space_sharing else {})}
    wanted = sys.maxsize if fam.stage is None else fam.stage  # None: run the policy through, keep the last
    sf, stage = capture_stage(get_policy(fam.policy, **opts), problem, wanted, or_last=True)
    return Instance(family, size, sf, stage, time.perf_counter() - t0, fingerprint(sf))


def default_backends() -> list[str]:
    """The candidate backends that are installed (cuOpt: and a GPU is visible)."""
    from ..solver_api import available_solvers

    avail = set(available_solvers())
    return [b for b in CANDIDATE_BACKENDS if b.partition(":")[0] in avail]


@dataclass(frozen=True)
class SuiteConfig:
    families: Sequence[str] = tuple(FAMILIES)
    sizes: Sequence[int] = DEFAULT_SIZES
    backends: Sequence[str] = ()
    time_limit: float = 30.0
    tol: float = 1e-6
    shift: float = 10.0

    def check(self) -> None:
        for f in self.families:
            if f not in FAMILIES:
                raise UnknownNameError("--policies", f, FAMILIES)
        for n in self.sizes:
            if n not in ALL_SIZES:
                raise InputError("--sizes", n, f"the suite's sizes are {', '.join(map(str, ALL_SIZES))} (or 'all')")
        if not self.time_limit > 0:
            raise InputError("--time-limit", self.time_limit, "must be a positive number of seconds")
        for b in self.backends:
            get_solver(backend_options(b)["solver"])  # unknown or missing backends fail now


def _solve_child(sf: StandardForm, backend: str, time_limit: float, queue: Any) -> None:
    try:
        if backend.startswith("highs"):  # HiGHS's worker threads do not survive fork: start them afresh
            import highspy

            highspy.Highs.resetGlobalScheduler(True)
        opts = backend_options(backend)
        solver = get_solver(opts["solver"])
        t0 = time.perf_counter()
        res = solver.solve(sf, SolverOptions(algorithm=opts.get("algorithm", "auto"), time_limit=time_limit))
        wall = time.perf_counter() - t0
        queue.put({"status": res.status.value, "objective": res.objective, "seconds": wall,
                   "violation": None if res.x is None else float(sf.violation(res.x)), "message": res.message[:200]})
    except Exception as exc:  # noqa: BLE001 - reported as a row
        queue.put({"status": "error", "objective": None, "seconds": None, "violation": None,
                   "message": f"{type(exc).__name__}: {exc}"[:200]})


def _run_one(inst: Instance, backend: str, time_limit: float) -> dict[str, Any]:
    ctx = mp.get_context("fork") if "fork" in mp.get_all_start_methods() else mp.get_context()
    q = ctx.Queue()
    proc = ctx.Process(target=_solve_child, args=(inst.sf, backend, time_limit, q))
    t0 = time.perf_counter()
    proc.start()
    try:
        out = q.get(timeout=KILL_FACTOR * time_limit + KILL_GRACE)
    except queue.Empty:  # the child overran its limit (or died without an answer)
        proc.kill()
        out = {"status": "killed", "objective": None, "seconds": None, "violation": None,
               "message": f"still running after {KILL_FACTOR * time_limit + KILL_GRACE:.0f} s (killed)"}
    proc.join()
    if out["seconds"] is None:
        out["seconds"] = time.perf_counter() - t0
    return out


def _supports(backend: str, mip: bool) -> bool:
    from ..solver_api import Feature

    if not mip:
        return True
    opts = backend_options(backend)
    if opts.get("algorithm", "auto") != "auto":  # an LP algorithm choice: the MILP run is the plain backend's
        return False
    return get_solver(opts["solver"]).supports(Feature.MILP)


def run_suite(cfg: SuiteConfig, progress: Callable[[str, int, int], None] | None = None
              ) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Build the instances and run every backend on them. Returns ``(instances, runs)``."""
    cfg.check()
    backends = list(cfg.backends) or default_backends()
    pairs = [(f, n) for n in cfg.sizes for f in cfg.families if n <= FAMILIES[f].max_size]
    total = len(pairs) * (1 + len(backends))
    done = 0
    inst_rows, rows = [], []
    for family, size in pairs:
        if progress:
            progress(f"building {family}-{size}", done, total)
        inst = build_instance(family, size)
        inst_rows.append(inst.row())
        done += 1
        for b in backends:
            if progress:
                progress(f"{inst.name} {b}", done, total)
            done += 1
            if not _supports(b, inst.sf.is_mip):
                continue
            out = _run_one(inst, b, cfg.time_limit)
            rows.append({"instance": inst.name, "family": family, "jobs": size, "mip": inst.sf.is_mip,
                         "backend": b, **out})
    if progress:
        progress("done", total, total)
    runs = pd.DataFrame(rows)
    if not runs.empty:
        runs = _judge(runs, cfg.tol)
    return pd.DataFrame(inst_rows), runs


def _judge(runs: pd.DataFrame, tol: float) -> pd.DataFrame:
    """Reference objective per instance (HiGHS, else the median optimum); ``solved``."""
    opt = runs[runs["status"] == "optimal"]
    med = opt.groupby("instance")["objective"].median()
    highs = opt[opt["backend"] == "highs"].set_index("instance")["objective"]
    ref = med.copy()
    ref.loc[highs.index] = highs
    runs = runs.copy()
    runs["reference"] = runs["instance"].map(ref)
    obj = runs["objective"].astype(float)
    runs["rel_diff"] = (obj - runs["reference"]).abs() / np.maximum(runs["reference"].abs(), 1e-9)
    runs["solved"] = (runs["status"] == "optimal") & (runs["rel_diff"] <= tol)
    return runs


def shifted_geomean(t: np.ndarray, shift: float) -> float:
    """``exp(mean(log(t + shift))) − shift``."""
    t = np.asarray(t, float)
    return float(np.exp(np.mean(np.log(t + shift))) - shift) if t.size else float("nan")


def summarize_suite(runs: pd.DataFrame, time_limit: float, shift: float = 10.0) -> pd.DataFrame:
    """Per backend, LPs and MILPs apart (backends try different sets: LP-only ones skip MILPs):
    instances tried and solved, shifted geometric mean of the time (unsolved = the limit), and the
    LP mean relative to the best backend's; ``wrong`` counts optimal answers off the reference."""
    if runs.empty:
        return pd.DataFrame()
    out = []
    for b, d in runs.groupby("backend", sort=False):
        row: dict[str, Any] = {"backend": b}
        for kind, part in (("lp", d[~d["mip"]]), ("milp", d[d["mip"]])):
            t = np.where(part["solved"], np.minimum(part["seconds"].astype(float), time_limit), time_limit)
            row[f"{kind}_solved"] = f"{int(part['solved'].sum())}/{len(part)}"
            row[f"{kind}_sgm_s"] = shifted_geomean(t, shift) if len(part) else float("nan")
        row["wrong"] = int(((d["status"] == "optimal") & ~d["solved"]).sum())
        out.append(row)
    summ = pd.DataFrame(out)
    summ["lp_sgm_vs_best"] = summ["lp_sgm_s"] / summ["lp_sgm_s"].min()
    return summ


def performance_profile(runs: pd.DataFrame) -> tuple[pd.DataFrame, np.ndarray]:
    """Dolan–Moré ratios ``r[p, s] = t[p, s] / min_s t[p, s]`` (inf where unsolved or not tried)."""
    t = runs.assign(t=np.where(runs["solved"], runs["seconds"].astype(float), np.inf)).pivot_table(
        index="instance", columns="backend", values="t", aggfunc="min")
    best = t.min(axis=1)
    ratios = t.div(best.replace(np.inf, np.nan), axis=0).fillna(np.inf)
    return ratios, np.sort(np.unique(ratios.to_numpy()[np.isfinite(ratios.to_numpy())]))


def plot_profiles(runs: pd.DataFrame, path: Path) -> Path:
    """Performance profiles (LP instances, MILP instances) as one PNG (no pyplot, no backend switch)."""
    from matplotlib.figure import Figure

    groups = [("LP instances", runs[~runs["mip"]]), ("MILP instances", runs[runs["mip"]])]
    groups = [(t, g) for t, g in groups if not g.empty]
    fig = Figure(figsize=(5.5 * len(groups), 4.2))
    for k, (title, g) in enumerate(groups):
        ax = fig.add_subplot(1, len(groups), k + 1)
        ratios, taus = performance_profile(g)
        n = len(ratios)
        hi = max(float(taus.max()) if taus.size else 1.0, 1.0) * 2.0
        grid = np.unique(np.concatenate([[1.0], taus, [hi]]))
        for b in ratios.columns:
            r = ratios[b].to_numpy()
            rho = [(r <= tau).sum() / n for tau in grid]
            ax.step(grid, rho, where="post", label=b)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("τ (time ≤ τ × best)")
        ax.set_ylabel("fraction of instances solved")
        ax.set_title(f"{title} ({n})")
        if not taus.size:  # an empty profile says why, instead of flat lines at 0
            ax.text(0.5, 0.5, "no instance solved (optimal and within tol)\nby any backend within the time limit",
                    transform=ax.transAxes, ha="center", va="center", fontsize=9)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    return path


def markdown_table(df: pd.DataFrame) -> str:
    """A pipe table (numbers to 3 significant digits)."""
    def cell(v: Any) -> str:
        return f"{v:.3g}" if isinstance(v, (float, np.floating)) else str(v)

    lines = ["| " + " | ".join(map(str, df.columns)) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in df.itertuples(index=False)]
    return "\n".join(lines) + "\n"


def write_suite(instances: pd.DataFrame, runs: pd.DataFrame, summary: pd.DataFrame, cfg: SuiteConfig,
                out_dir: str | Path) -> list[Path]:
    """``instances.csv``, ``runs.csv``, ``summary.csv``, ``summary.md``, ``profile.png``, ``suite.json``."""
    import json

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = [out / "instances.csv", out / "runs.csv", out / "summary.csv", out / "summary.md", out / "suite.json"]
    instances.to_csv(paths[0], index=False)
    runs.to_csv(paths[1], index=False)
    summary.to_csv(paths[2], index=False)
    paths[3].write_text(markdown_table(summary) if not summary.empty else "no runs\n")
    paths[4].write_text(json.dumps({"suite_version": SUITE_VERSION, "families": list(cfg.families),
                                    "sizes": list(cfg.sizes), "backends": sorted(set(runs.get("backend", []))),
                                    "time_limit": cfg.time_limit, "tol": cfg.tol, "shift": cfg.shift}, indent=2))
    if not runs.empty:
        paths.append(plot_profiles(runs, out / "profile.png"))
    return paths
