"""Every registered policy over execution-plan configurations (:class:`MultiResourceSpace`).

One small reconfiguration problem — five transformer jobs on two node types (one A100 node of 8
GPUs, two V100-class nodes of 4), a guaranteed tenant ``prod`` with a GPU and core quota (and, for
``min_cost_slo``, variants with an SLO on one job) — is solved by every policy in
:func:`policyopt.policy.list_policies` through the one API (``get_policy(name).solve(problem)``).
For each result:

* **rows, recomputed here**: the allocation is checked against rows written in this file from the
  problem's definition — configuration GPUs and cores parsed from the column labels, node cores and
  host memory from the ``reconfig.node_types``, the quota from ``reconfig.quotas``, the guarantee
  ``Σ_{c: T_raw[m,c] ≥ r_m} X[m,c] ≥ 1`` of the admitted guaranteed jobs — and against
  ``space.check``;
* **objective, cross-checked**: LP policies against the same optimization written here as a dense
  ``scipy.optimize.linprog`` problem over those rows (max-sum, max-min, makespan, makespan under a
  budget, finish-time fairness by bisection, FIFO, fluid SRPT, min-cost in both forms, min-cost with
  an SLO, the shortest-job-first lexicographic sequence); heuristics against their stated rule
  (AlloX's matching cost from per-GPU processing times, Gandiva's equal share, the baselines'
  reported normalized throughput bounded by the LP optimum).

No policy refuses: every registered policy has a reading over configurations (space sharing alone
is refused, with an ``InputError``). A policy registered after this file was written is still run
and its rows checked. The water-filling policies run with their defaults (symmetry reduction turns
itself off over spaces that add rows) and with ``aggregate=False``.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from scipy.optimize import linprog

from policyopt import get_policy, list_policies
from policyopt.errors import InputError
from policyopt.reconfig import A100_NODE, CATALOGUE, MultiResourceSpace, ReconfigProblem
from policyopt.reconfig.spec import GiB
from policyopt.result import PolicyResult, Status

QUOTA_GPUS, QUOTA_CPUS = 6.0, 48.0
PRICES = {"a100": 4.0, "v100": 1.5}
V100_NODE = {"cpus_per_node": 48, "host_mem_per_node": 7.68e11, "gpu_mem_bytes": 32 * GiB,
             "bw_intra": 5e10, "bw_inter": 1.25e10, "bw_pcie": 1.2e10}
# id, model, node type, GPUs, cores, plan, guaranteed, steps, arrival
JOBS = [("j0", "vit-86m", "a100", 2, 16, {"dp": 2}, True, 4000.0, 0.0),
        ("j1", "roberta-355m", "v100", 2, 16, {"dp": 2, "gc": True}, False, 3000.0, 1.0),
        ("j2", "bert-336m", "a100", 4, 32, {"dp": 4}, True, 8000.0, 2.0),
        ("j3", "t5-1.2b", "v100", 4, 24, {"dp": 4, "gc": True}, False, 2000.0, 3.0),
        ("j4", "vit-86m", "v100", 1, 8, {"dp": 1, "gc": True}, False, 6000.0, 4.0)]
# both guaranteed jobs fit the quota by their requests (2 + 4 GPUs ≤ 6, 16 + 32 cores ≤ 48)
ADMITTED = {"j0", "j2"}
SLO_JOB = "j1"


def reconfig_problem(slo_seconds: float | None = None) -> ReconfigProblem:
    """The problem of this module (``slo_seconds``: an SLO on job j1)."""
    a100 = {k: getattr(A100_NODE, k) for k in V100_NODE}
    data = {
        "cluster": {"worker_types": {
            "a100": {"count": 8, "gpus_per_server": 8, "price_per_hour": PRICES["a100"]},
            "v100": {"count": 8, "gpus_per_server": 4, "price_per_hour": PRICES["v100"]}}},
        "jobs": [{"id": j, "steps_remaining": s, "entity": "prod" if g else "research", "arrival": a,
                  "time_since_start": 100.0 * i,
                  **({"slo_seconds": slo_seconds} if slo_seconds is not None and j == SLO_JOB else {})}
                 for i, (j, m, t, gp, c, p, g, s, a) in enumerate(JOBS)],
        "entities": {"prod": {"weight": 1.0}, "research": {"weight": 1.0}},
        "reconfig": {
            "node_types": {"a100": a100, "v100": V100_NODE},
            "models": {m: CATALOGUE[m].to_dict() for m in sorted({j[1] for j in JOBS})},
            "jobs": {j: {"model": m, "node_type": t, "gpus": gp, "cpus": c, "plan": p, "guaranteed": g}
                     for j, m, t, gp, c, p, g, s, a in JOBS},
            "quotas": {"prod": {"gpus": QUOTA_GPUS, "cpus": QUOTA_CPUS}},
            # quotas that cap: the rows written here hold them always (the default, "reserve", lets
            # idle capacity flow past them after the policy's solve: test_reconfig_work_conservation)
            "options": {"gpu_counts": [1, 2, 4, 8], "cpus_per_gpu": [4, 8], "quota": "cap"}},
    }
    return ReconfigProblem.from_dict(data)


# ------------------------------------------------------------------------------ rows, written here
@dataclass
class Rows:
    """``A·vec(X) ≤ b`` for every row of the problem, and the data the objectives need."""

    A: np.ndarray
    b: np.ndarray
    names: list[str]
    allowed: np.ndarray      # (n × C) slots that exist
    gpus: np.ndarray         # (C,) GPUs of each configuration (from its label)
    cpus: np.ndarray         # (C,) cores of each configuration (from its label)
    ctype: np.ndarray        # (C,) node type of each configuration (from its label)
    T: np.ndarray            # (n × C) throughputs the objectives use
    ref: np.ndarray          # (n,) reference throughputs
    steps: np.ndarray
    since: np.ndarray
    weights: np.ndarray
    arrival_rank: np.ndarray

    @property
    def shape(self) -> tuple[int, int]:
        return self.allowed.shape

    def violations(self, X: np.ndarray, tol: float = 1e-6) -> list[str]:
        out = []
        if np.any(X < -tol) or np.any(X > 1 + tol):
            out.append("X outside [0, 1]")
        if np.any(np.abs(X[~self.allowed]) > tol):
            out.append("X on a slot that does not exist")
        use = self.A @ X.ravel()
        bad = use > self.b + tol * np.maximum(1.0, np.abs(self.b))
        out += [f"{self.names[i]}: {use[i]:.6g} > {self.b[i]:.6g}" for i in np.flatnonzero(bad)]
        return out


def independent_rows(problem: ReconfigProblem, space: MultiResourceSpace) -> Rows:
    """Rows from the problem's definition; only the slot set and per-slot data (throughputs, host
    bytes) come from the space."""
    spec = problem.reconfig
    assert spec is not None
    n, C = space.single_mask.shape
    parts = np.array([lab.split("|") for lab in space.configs.labels.tolist()])
    ctype = parts[:, 0]
    gpus = np.char.lstrip(parts[:, 1], "g").astype(float)  # "g4" → 4
    cpus = np.char.lstrip(parts[:, 2], "c").astype(float)  # "c32" → 32
    jobs = space.jobs.labels.tolist()
    rows, b, names = [], [], []

    def add(coef: np.ndarray, bound: float, name: str) -> None:
        rows.append(np.where(space.single_mask, coef, 0.0).ravel())
        b.append(bound)
        names.append(name)

    for m, jid in enumerate(jobs):  # job time
        e = np.zeros((n, C))
        e[m] = 1.0
        add(e, 1.0, f"time.{jid}")
    H = space.H / GiB
    for t in ("a100", "v100"):
        on = (ctype == t)[None, :] * np.ones((n, 1))
        wt = problem.cluster[t]
        nodes = wt.count / wt.gpus_per_server
        node = spec.node_types[t]
        add(on * gpus, float(wt.count), f"{t}.gpus")
        add(on * cpus, nodes * node.cpus_per_node, f"{t}.cpus")
        add(on * H, nodes * node.host_mem_per_node / GiB, f"{t}.host_mem_gib")
    mine = np.array([j in ADMITTED for j in jobs], float)[:, None]
    add(mine * gpus, QUOTA_GPUS, "quota.prod.gpus")
    add(mine * cpus, QUOTA_CPUS, "quota.prod.cpus")
    meets = space.single_mask & (space.T_raw >= space.ref_thr[:, None] * (1 - 1e-12))
    for jid in sorted(ADMITTED):  # the guarantee, as −Σ_{S_m} X ≤ −(1 − 1e-7)
        m = jobs.index(jid)
        e = np.zeros((n, C))
        e[m] = -meets[m].astype(float)
        add(e, -(1.0 - 1e-7), f"sla.{jid}")
    arrival = np.array([j.arrival for j in problem.jobs], float)
    rank = np.empty(n, np.int64)
    rank[np.lexsort((np.arange(n), arrival))] = np.arange(n)
    return Rows(np.array(rows), np.array(b), names, space.single_mask.copy(), gpus, cpus, ctype,
                np.where(space.single_mask, space.T, 0.0), space.ref_thr.copy(),
                np.array([j.steps_remaining for j in problem.jobs], float),
                np.array([j.time_since_start for j in problem.jobs], float),
                np.array([j.weight for j in problem.jobs], float), rank)


#: HiGHS's default feasibility tolerances (1e-7) leave these LPs ~1e-5 short of their optimum
TIGHT = {"primal_feasibility_tolerance": 1e-9, "dual_feasibility_tolerance": 1e-9}


def lp_max(R: Rows, cx: np.ndarray, extra: int = 0, ce: np.ndarray | None = None,
           A_extra: np.ndarray | None = None, b_extra: np.ndarray | None = None,
           e_bounds: list[tuple[float | None, float | None]] | None = None,
           ) -> tuple[float, np.ndarray, np.ndarray]:
    """``max cx·x + ce·e`` over ``x = vec(X)`` within the rows (plus ``A_extra·[x, e] ≤ b_extra``).
    Returns (optimum, X, e)."""
    n, C = R.shape
    A = np.hstack([R.A, np.zeros((R.A.shape[0], extra))])
    b = R.b
    if A_extra is not None:
        A, b = np.vstack([A, A_extra]), np.concatenate([b, b_extra])
    c = np.concatenate([cx.ravel(), np.zeros(extra) if ce is None else ce])
    bounds = [(0.0, 1.0 if ok else 0.0) for ok in R.allowed.ravel()] + (e_bounds or [(None, None)] * extra)
    res = linprog(-c, A_ub=A, b_ub=b, bounds=bounds, method="highs", options=TIGHT)
    assert res.status == 0, res.message
    return -res.fun, res.x[:n * C].reshape(n, C), res.x[n * C:]


def per_job(R: Rows, data: np.ndarray) -> np.ndarray:
    """(n × n·C) matrix with row m = data[m, :] on job m's slots (``thr(m) = row·x``)."""
    n, C = R.shape
    M = np.zeros((n, n, C))
    M[np.arange(n), np.arange(n)] = data
    return M.reshape(n, n * C)


def lex_levels(R: Rows, order: np.ndarray, fastest: np.ndarray) -> np.ndarray:
    """Shortest-job-first, written here: lexicographically maximize ``thr(m)/fastest_m`` in order."""
    n, C = R.shape
    Tn = per_job(R, R.T / fastest[:, None])
    levels = np.zeros(n)
    fixed_A, fixed_b = [], []
    for m in order:
        A = np.array(fixed_A) if fixed_A else None
        v, _, _ = lp_max(R, Tn[m], A_extra=A, b_extra=np.array(fixed_b) if fixed_b else None)
        levels[m] = v
        fixed_A.append(-Tn[m])
        fixed_b.append(-(v - 1e-7 * max(1.0, v)))
    return levels


def cost_per_slot(R: Rows) -> np.ndarray:
    """$/h of job m on configuration c: price of the node type × the configuration's GPUs."""
    price = np.array([PRICES[t] for t in R.ctype])
    return np.where(R.allowed, (price * R.gpus)[None, :], 0.0)


# ------------------------------------------------------------------------------ fixtures
@pytest.fixture(scope="module")
def problem() -> ReconfigProblem:
    return reconfig_problem()


@pytest.fixture(scope="module")
def R(problem: ReconfigProblem) -> Rows:
    sp = MultiResourceSpace(problem)
    assert set(sp.jobs.labels[sp.sla_jobs].tolist()) == ADMITTED and sp.sla_feasible
    return independent_rows(problem, sp)


def solve(problem: ReconfigProblem, name: str, **options: object) -> PolicyResult:
    res = get_policy(name, **options).solve(problem)
    assert isinstance(res.space, MultiResourceSpace), name
    return res


def assert_within_rows(R: Rows, res: PolicyResult) -> None:
    """Every row holds, as recomputed here and as ``space.check`` sees it."""
    assert R.violations(res.X) == [], (res.policy, res.status, res.message)
    assert res.space.check(res.X) == [], (res.policy, res.space.check(res.X))


# ------------------------------------------------------------------------------ the policies


def check_max_sum(problem: ReconfigProblem, R: Rows, res: PolicyResult, normalize: bool) -> None:
    coef = R.T / (R.ref[:, None] if normalize else 1.0)
    opt, _, _ = lp_max(R, coef)
    assert res.objective == pytest.approx(opt, rel=1e-6)
    assert float(np.sum(coef * res.X)) == pytest.approx(opt, rel=1e-6)


def check_max_min(problem: ReconfigProblem, R: Rows, res: PolicyResult, agnostic: bool = False) -> None:
    n, C = R.shape
    T = R.allowed.astype(float) if agnostic else R.T
    norm = 1.0 / (R.weights * (1.0 if agnostic else R.ref))   # scale factors are 1 here
    # max t s.t. t − norm_m·thr(m) ≤ 0
    A = np.hstack([-per_job(R, T * norm[:, None]), np.ones((n, 1))])
    opt, _, _ = lp_max(R, np.zeros((n, C)), 1, np.ones(1), A, np.zeros(n))
    assert res.objective == pytest.approx(opt, rel=1e-6)
    got = np.min(np.sum(T * res.X, axis=1) * norm)
    assert got == pytest.approx(opt, rel=1e-6)


def makespan_optimum(R: Rows) -> float:
    n, C = R.shape
    # max z s.t. s_m·z − thr(m) ≤ 0 (z = 1/makespan)
    A = np.hstack([-per_job(R, R.T), R.steps[:, None]])
    z, _, _ = lp_max(R, np.zeros((n, C)), 1, np.ones(1), A, np.zeros(n), [(0.0, None)])
    return 1.0 / z


def check_makespan(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    opt = makespan_optimum(R)
    achieved = float(np.max(R.steps / np.sum(R.T * res.X, axis=1)))
    assert res.objective == pytest.approx(opt, rel=1e-6)
    assert achieved == pytest.approx(opt, rel=1e-6)


def budget_for(R: Rows) -> float:
    """A budget that binds: 80% of what the makespan-optimal allocation with the least cost pays."""
    n, C = R.shape
    M = makespan_optimum(R)
    cost = cost_per_slot(R)
    # least cost rate among allocations with makespan ≤ M(1 + 1e-6): thr(m) ≥ s_m/M
    A = -per_job(R, R.T)
    c_min, _, _ = lp_max(R, -cost, A_extra=A, b_extra=-R.steps / (M * (1 + 1e-6)))
    return 0.8 * (-c_min) * M / 3600.0


def check_makespan_under_budget(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    n, C = R.shape
    B = budget_for(R)
    cost = cost_per_slot(R)
    # max z s.t. s_m z − thr(m) ≤ 0, Σ cost·x/3600 − B z ≤ 0
    A = np.vstack([np.hstack([-per_job(R, R.T), R.steps[:, None]]),
                   np.concatenate([cost.ravel() / 3600.0, [-B]])[None, :]])
    z, _, _ = lp_max(R, np.zeros((n, C)), 1, np.ones(1), A, np.zeros(n + 1), [(0.0, None)])
    assert res.ok, res.message
    assert res.objective == pytest.approx(1.0 / z, rel=1e-6)
    makespan = float(np.max(R.steps / np.sum(R.T * res.X, axis=1)))
    # the budget binds: it is spent exactly, and the makespan without it is shorter
    assert makespan * float(np.sum(cost * res.X)) / 3600.0 == pytest.approx(B, rel=1e-6)
    assert makespan > makespan_optimum(R) * (1 + 1e-7)


def ftf_optimum(R: Rows, T: np.ndarray, iso: np.ndarray) -> float:
    """min max_m ρ_m by bisection on ρ over feasibility LPs: thr(m) ≥ s_m/(ρ·D_m − t_m)."""
    n, C = R.shape
    s, t = R.steps, R.since
    D = t + s / iso
    A = -per_job(R, T)

    def feasible(rho: float) -> bool:
        den = rho * D - t
        if np.any(den <= 0):
            return False
        try:
            lp_max(R, np.zeros((n, C)), A_extra=A, b_extra=-s / den)
        except AssertionError:
            return False
        return True

    lo, hi = 0.0, 1.0
    assert feasible(hi)  # the isolated allocation has ρ = 1
    while hi - lo > 1e-9 * hi:
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if feasible(mid) else (mid, hi)
    return hi


def check_ftf(problem: ReconfigProblem, R: Rows, res: PolicyResult, agnostic: bool = False) -> None:
    sp = res.space
    T = R.allowed.astype(float) if agnostic else R.T
    iso = np.sum(T * sp.isolated_allocation(), axis=1)
    assert np.all(iso > 0)
    opt = ftf_optimum(R, T, iso)
    rho = (R.since + R.steps / np.sum(T * res.X, axis=1)) / (R.since + R.steps / iso)
    assert float(np.max(rho)) == pytest.approx(opt, rel=1e-6)
    assert res.objective == pytest.approx(opt, rel=1e-6)


def check_fifo(problem: ReconfigProblem, R: Rows, res: PolicyResult, agnostic: bool = False) -> None:
    n, C = R.shape
    T = R.allowed.astype(float) if agnostic else R.T
    w = (n - R.arrival_rank) / T.max(axis=1)
    opt, _, _ = lp_max(R, T * w[:, None])
    assert res.objective == pytest.approx(opt, rel=1e-6)
    assert float(np.sum(T * w[:, None] * res.X)) == pytest.approx(opt, rel=1e-6)


def check_fluid_srpt(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    coef = R.T * (R.weights / R.steps)[:, None]
    opt, _, _ = lp_max(R, coef)
    assert res.objective == pytest.approx(opt, rel=1e-6)


def check_fluid_srpt_floor(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    # stage 1: E* = max useful work Σ thr/eff (eff: best throughput per GPU); stage 2: max Σ w·thr/s
    # s.t. useful work ≥ efficiency·E*
    eff = np.max(np.where(R.allowed, R.T / R.gpus[None, :], 0.0), axis=1)
    useful = np.where(R.allowed, R.T / eff[:, None], 0.0)
    E, _, _ = lp_max(R, useful)
    assert res.extra["floor_levels"]["efficiency"] == pytest.approx(E, rel=1e-6)
    level = res.extra["efficiency"]
    coef = R.T * (R.weights / R.steps)[:, None]
    opt, _, _ = lp_max(R, coef, A_extra=-useful.ravel()[None, :], b_extra=np.array([-level * E * (1 - 1e-7)]))
    assert res.objective == pytest.approx(opt, rel=1e-6)
    assert float(np.sum(useful * res.X)) >= level * E * (1 - 1e-6)


def check_min_cost(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    # Gavel's linear form: each slot's throughput per $/h of the GPUs its configuration occupies
    cost = cost_per_slot(R)
    coef = np.where(R.allowed, R.T / np.where(R.allowed, cost, 1.0), 0.0)
    opt, _, _ = lp_max(R, coef)
    assert res.objective == pytest.approx(opt, rel=1e-6)
    assert float(np.sum(coef * res.X)) == pytest.approx(opt, rel=1e-6)
    # the space's cost rate is price × the configuration's GPUs
    assert float(np.sum(res.space.cost_matrix() @ res.X.ravel())) == pytest.approx(float(np.sum(cost * res.X)))


def ratio_optimum(R: Rows, slo: np.ndarray | None = None) -> float:
    """Charnes–Cooper written here: max Σ thr(Y) s.t. Σ cost(Y) = 1, A·Y − b·τ ≤ 0 (+ SLO rows)."""
    n, C = R.shape
    cost = cost_per_slot(R).ravel()
    A = np.hstack([R.A, -R.b[:, None]])
    b = np.zeros(R.A.shape[0])
    if slo is not None:  # thr(m) ≥ r_m τ for the SLO jobs (r = 0 elsewhere)
        on = slo > 0
        A = np.vstack([A, np.hstack([-per_job(R, R.T)[on], slo[on][:, None]])])
        b = np.concatenate([b, np.zeros(int(on.sum()))])
    c = np.concatenate([R.T.ravel(), [0.0]])
    bounds = [(0.0, None if ok else 0.0) for ok in R.allowed.ravel()] + [(0.0, None)]
    r = linprog(-c, A_ub=A, b_ub=b, A_eq=np.concatenate([cost, [0.0]])[None, :], b_eq=[1.0],
                bounds=bounds, method="highs", options=TIGHT)
    assert r.status == 0, r.message
    return -r.fun


def check_min_cost_ratio(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    opt = ratio_optimum(R)
    ratio = float(np.sum(R.T * res.X)) / float(np.sum(cost_per_slot(R) * res.X))
    assert res.objective == pytest.approx(opt, rel=1e-6)
    assert ratio == pytest.approx(opt, rel=1e-6)


def check_isolated(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    np.testing.assert_array_equal(res.X, res.space.isolated_allocation())
    assert np.all(np.sum(R.T * res.X, axis=1) > 0)


def check_gandiva(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    # no pair rows over configurations: Gandiva's equal time shares are the space's equal share
    np.testing.assert_array_equal(res.X, res.space.isolated_allocation())
    assert res.extra["pairs_used"] == 0 and res.objective is None


def allox_cost(R: Rows) -> float:
    """AlloX's matching optimum, written here for this problem: 16 GPUs ≥ 5 jobs, 8 per type, so
    every job takes the head of a queue (level 1) on the type of its least processing time
    ``min_{c on t} g_c·s_m/T[m,c]`` (GPU-seconds of its most GPU-efficient configuration)."""
    n, C = R.shape
    with np.errstate(divide="ignore"):
        p = np.where(R.allowed, R.gpus[None, :] * R.steps[:, None] / np.where(R.allowed, R.T, 1.0), np.inf)
    return float(np.sum(p.min(axis=1)))


def check_allox(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    assert res.objective == pytest.approx(allox_cost(R), rel=1e-9)
    assert res.extra["jobs_considered"] == R.shape[0]
    # the matching does not see the guarantees: the allocation was moved within every row
    assert res.extra["projected"] is True and res.extra["projection_distance"] > 0
    flow = solve(problem, "allox", method="flow")
    assert flow.objective == pytest.approx(res.objective, rel=1e-9)
    assert R.violations(flow.X) == []


def check_sjf(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    fastest = R.T.max(axis=1)
    d = R.steps / fastest
    order = np.lexsort((np.arange(d.size), R.arrival_rank, d))
    want = lex_levels(R, order, fastest)
    got = np.sum(R.T * res.X, axis=1) / fastest
    np.testing.assert_allclose(got, want, atol=1e-6)
    assert res.objective == pytest.approx(R.steps[order[0]] / (want[order[0]] * fastest[order[0]]), rel=1e-6)
    lp_only = solve(problem, "shortest_job_first", method="lp")
    np.testing.assert_allclose(np.sum(R.T * lp_only.X, axis=1) / fastest, want, atol=1e-6)


def check_water_filling(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    # the first level of the water-filling is the max-min optimum
    check_max_min(problem, R, res)


def check_milp_water_filling(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    n, C = R.shape
    norm = 1.0 / (R.weights * R.ref)
    A = np.hstack([-per_job(R, R.T * norm[:, None]), np.ones((n, 1))])
    opt, _, _ = lp_max(R, np.zeros((n, C)), 1, np.ones(1), A, np.zeros(n))
    # Gavel's stopping rule may leave jobs unsettled (status `stopped`, objective in extra): the first
    # level — the max-min optimum — is reached either way
    value = res.objective if res.objective is not None else res.extra["water_filling"]["objective_of_allocation"]
    assert value == pytest.approx(opt, rel=1e-3)   # its published margin is 1e-4


def check_hierarchical(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    u = np.sum(R.T * res.X, axis=1) / R.ref     # normalized throughputs (scale factors 1)
    tenants = np.array([j.entity for j in problem.jobs])
    want = min(float(u[tenants == e].sum()) / problem.entities[e].weight for e in ("prod", "research"))
    assert res.objective == pytest.approx(want, rel=1e-6)


def check_baseline(problem: ReconfigProblem, R: Rows, res: PolicyResult) -> None:
    # integral: one configuration per running job; the objective is Σ thr/r of the placed jobs,
    # at most the LP optimum of that sum over the same rows
    assert set(np.unique(res.X)) <= {0.0, 1.0}
    thr = np.array([res.effective_throughputs[j] for j in res.space.jobs.labels.tolist()])
    assert res.objective == pytest.approx(float(np.sum(thr / R.ref)), rel=1e-9)
    opt, _, _ = lp_max(R, R.T / R.ref[:, None])
    assert res.objective <= opt * (1 + 1e-6)


# name → (options, check) for every registered policy; a check gets (problem, rows, result).
# No policy refuses execution-plan spaces: each has a reading over configurations (see the docs).
CASES: dict[str, tuple[dict[str, object] | None, object]] = {
    "max_sum_throughput": ({}, lambda p, R, r: check_max_sum(p, R, r, False)),
    "max_min_fairness": ({}, check_max_min),
    "max_min_fairness_agnostic": ({}, lambda p, R, r: check_max_min(p, R, r, True)),
    "makespan": ({}, check_makespan),
    "finish_time_fairness": ({}, check_ftf),
    "finish_time_fairness_agnostic": ({}, lambda p, R, r: check_ftf(p, R, r, True)),
    "fifo": ({}, check_fifo),
    "fifo_agnostic": ({}, lambda p, R, r: check_fifo(p, R, r, True)),
    "min_cost": ({}, check_min_cost),
    "min_cost_slo": ({}, check_min_cost),          # no SLO in this problem: min_cost's optimum
    "shortest_job_first": ({}, check_sjf),
    "allox": ({}, check_allox),
    "gandiva": ({}, check_gandiva),
    "isolated": ({}, check_isolated),
    "fluid_srpt": ({}, check_fluid_srpt),
    "fluid_srpt_floor": ({}, check_fluid_srpt_floor),
    "makespan_under_budget": (None, check_makespan_under_budget),  # budget from the problem
    "max_min_fairness_water_filling": ({}, check_water_filling),
    "hierarchical": ({}, check_hierarchical),
    "water_filling_milp": ({}, check_milp_water_filling),
    "rubick_greedy": ({}, check_baseline),
    "synergy_like": ({}, check_baseline),
    "sia_like": ({}, check_baseline),
}
EXTRA_CASES = [("max_sum_throughput", {"normalize": True}, lambda p, R, r: check_max_sum(p, R, r, True)),
               ("makespan", {"fill": True}, check_makespan),
               ("min_cost", {"exact_ratio": True}, check_min_cost_ratio),
               ("max_min_fairness_water_filling", {"aggregate": False}, check_water_filling),
               ("hierarchical", {"aggregate": False}, check_hierarchical)]
REGISTERED = [p["name"] for p in list_policies()]
#: policies whose mechanism cannot respect rows beyond job time and capacity (they refuse, clearly)
BASE_SPACE_ONLY = {"max_min_fairness_strategy_proof"}


def _params() -> list[object]:
    out = []
    for name in REGISTERED:  # every registered policy, including ones without a cross-check here
        opts, check = CASES.get(name, ({}, None))
        out.append(pytest.param(name, opts, check, id=name))
    for name, opts, check in EXTRA_CASES:
        out.append(pytest.param(name, opts, check, id=f"{name}-{'-'.join(f'{k}={v}' for k, v in opts.items())}"))
    return out


@pytest.mark.parametrize("name, options, check", _params())
def test_policy_over_execution_plans(problem: ReconfigProblem, R: Rows, name: str,
                                     options: dict[str, object] | None, check: object) -> None:
    if options is None:  # makespan_under_budget: a budget that binds on this problem
        options = {"budget": budget_for(R)}
    if name in BASE_SPACE_ONLY:  # documented refusal: a clear error naming the policy
        with pytest.raises(InputError, match="base allocation space"):
            solve(problem, name, **options)
        return
    res = solve(problem, name, **options)
    allowed = {Status.OPTIMAL} | ({Status.STOPPED} if name == "water_filling_milp" else set())
    assert res.status in allowed, (name, res.status, res.message)
    # rows of the space the policy solved over (the Synergy-/Sia-like baselines restrict the
    # configurations: cores only / pure data parallelism)
    rows = independent_rows(problem, res.space)
    assert_within_rows(rows, res)
    if check is not None:  # a policy registered after this file was written: its rows are checked
        check(problem, rows, res)  # type: ignore[operator]


# ------------------------------------------------------------------------------ min_cost_slo with an SLO
def slo_rows(R: Rows, required: float) -> tuple[np.ndarray, np.ndarray]:
    """``thr(j1) ≥ required`` as ``−thr(j1) ≤ −required``."""
    m = 1  # j1
    return -per_job(R, R.T)[m][None, :], np.array([-required])


@pytest.mark.parametrize("exact_ratio", [False, True])
def test_min_cost_slo_meets_an_slo_that_binds(exact_ratio: bool) -> None:
    slo = 600.0  # j1 needs 3000/600 = 5 steps/s; min_cost alone gives it about 1.6
    problem = reconfig_problem(slo_seconds=slo)
    res = solve(problem, "min_cost_slo", exact_ratio=exact_ratio)
    assert res.status is Status.OPTIMAL, res.message
    R = independent_rows(problem, res.space)
    assert_within_rows(R, res)
    required = R.steps[1] / slo
    assert float(np.sum(R.T[1] * res.X[1])) >= required * (1 - 1e-6)
    free = solve(problem, "min_cost", exact_ratio=exact_ratio)
    if exact_ratio:
        r = np.zeros(R.shape[0])
        r[1] = required
        opt = ratio_optimum(R, r)
        assert res.objective == pytest.approx(opt, rel=1e-6)
        assert float(np.sum(R.T * res.X)) / float(np.sum(cost_per_slot(R) * res.X)) == pytest.approx(opt, rel=1e-6)
    else:
        cost = cost_per_slot(R)
        coef = np.where(R.allowed, R.T / np.where(R.allowed, cost, 1.0), 0.0)
        A, b = slo_rows(R, required)
        opt, _, _ = lp_max(R, coef, A_extra=A, b_extra=b)
        assert res.objective == pytest.approx(opt, rel=1e-6)
    assert res.objective < free.objective * (1 - 1e-6)  # the SLO costs something


def test_min_cost_slo_infeasible_slo_is_reported_and_rows_hold() -> None:
    slo = 200.0  # 15 steps/s: more than j1 can get on any configuration within the rows
    problem = reconfig_problem(slo_seconds=slo)
    res = solve(problem, "min_cost_slo")
    R = independent_rows(problem, res.space)
    best = np.zeros_like(R.T)
    best[1] = R.T[1]
    v_max, _, _ = lp_max(R, best)
    required = R.steps[1] / slo
    assert v_max < required
    assert res.status is Status.INFEASIBLE and "j1" in res.message
    (viol,) = res.extra["slo_violations"]
    assert viol["job"] == "j1"
    assert viol["shortfall_fraction"] == pytest.approx(1 - v_max / required, rel=1e-6)
    assert_within_rows(R, res)
    # best-effort fallback: j1 at its best throughput, then the cost objective
    assert float(np.sum(R.T[1] * res.X[1])) == pytest.approx(v_max, rel=1e-6)
    cost = cost_per_slot(R)
    coef = np.where(R.allowed, R.T / np.where(R.allowed, cost, 1.0), 0.0)
    A, b = slo_rows(R, v_max * (1 - 1e-6))
    opt, _, _ = lp_max(R, coef, A_extra=A, b_extra=b)
    assert res.extra["fallback_objective"] == pytest.approx(opt, rel=1e-5)


# ------------------------------------------------------------------------------ refusals
@pytest.mark.parametrize("name", ["max_min_fairness", "gandiva", "allox", "shortest_job_first", "min_cost"])
def test_space_sharing_is_refused_over_execution_plans(problem: ReconfigProblem, name: str) -> None:
    # pairs of jobs sharing GPUs are not modelled for reconfigurable jobs: a clear InputError
    from policyopt.errors import InputError
    with pytest.raises(InputError, match="space sharing") as err:
        get_policy(name, space_sharing=True).solve(problem)
    assert err.value.field == "options.space_sharing"


# ------------------------------------------------------------------------------ the generic helpers
def test_homogenized_rows_are_the_spaces_rows_times_tau() -> None:
    """``add_homogenized_allocation`` on a space that adds a ranged row and a tighter variable
    bound: the Charnes–Cooper LP built from it has the optimum of the same LP written here."""
    from policyopt import Problem
    from policyopt.allocation import AllocationSpace
    from policyopt.formulations._common import add_homogenized_allocation
    from policyopt.modeling import Model
    from policyopt.solver_api import SolverOptions, get_solver

    class Ranged(AllocationSpace):
        """Base rows, plus ``0.3 ≤ Σ X ≤ 0.9`` and ``X ≤ 0.5`` (neither implied by job time)."""

        def add_allocation(self, model: Model, name: str = "X"):  # type: ignore[no-untyped-def]
            X = super().add_allocation(model, name)
            X.upper[...] = 0.5
            model.add_constraints(X.sum().between(0.3, 0.9), f"{name}_total")
            return X

    p = Problem.from_dict({"cluster": {"worker_types": {"a": {"count": 2, "price_per_hour": 3.0},
                                                        "b": {"count": 1, "price_per_hour": 1.0}}},
                           "jobs": [{"id": "x", "throughputs": {"a": 9.0, "b": 2.0}},
                                    {"id": "y", "throughputs": {"a": 4.0, "b": 3.0}}]})
    space = Ranged(p)
    model = Model("cc")
    Y, tau = add_homogenized_allocation(space, model)
    model.add_constraints(space.cost_rate(Y).sum() == 1.0, "normalization")
    model.maximize(space.throughput(Y).sum())
    raw = get_solver(None).solve(model.compile(), SolverOptions())
    X = Y.value(raw.x) / float(tau.value(raw.x).ravel()[0])
    assert X.max() <= 0.5 + 1e-9 and 0.3 - 1e-9 <= X.sum() <= 0.9 + 1e-9
    # the same ratio LP written here: x = (x_a, x_b, y_a, y_b), cost = price × 1 worker
    T, price = np.array([9.0, 2.0, 4.0, 3.0]), np.array([3.0, 1.0, 3.0, 1.0])
    A = np.array([[1, 1, 0, 0, -1], [0, 0, 1, 1, -1],          # job time ≤ τ
                  [1, 0, 1, 0, -2], [0, 1, 0, 1, -1],          # capacity ≤ count·τ
                  [1, 1, 1, 1, -0.9], [-1, -1, -1, -1, 0.3]],  # 0.3τ ≤ Σ ≤ 0.9τ
                 float)
    A = np.vstack([A, np.hstack([np.eye(4), -0.5 * np.ones((4, 1))])])  # Y ≤ 0.5τ
    r = linprog(-np.r_[T, 0.0], A_ub=A, b_ub=np.zeros(A.shape[0]), A_eq=np.r_[price, 0.0][None, :], b_eq=[1.0],
                bounds=[(0, None)] * 5, method="highs")
    assert r.status == 0
    assert raw.objective == pytest.approx(-r.fun, rel=1e-9)
    assert float(np.sum(space.T * X)) / float(np.sum(price.reshape(2, 2) * X)) == pytest.approx(-r.fun, rel=1e-9)
    # the tighter bound is not implied by a row: it became rows; Y ≤ τ from job time did not
    assert "Y_bound_ub" in model.blocks and "Y_total_lower" in model.blocks
