"""Cross-backend agreement: every optimizing policy gives the same optimum with HiGHS and cvxpy
(Clarabel) — and PuLP where installed — on random small problems (with and without space sharing).
Iterative policies (finish-time fairness, SJF, budget bisection, SLO fallback) exercise the
in-place update path of each backend (HiGHS updates in place; cvxpy/PuLP rebuild)."""
from __future__ import annotations

import numpy as np
import pytest
from highs_runs import record_highs_runs

import policyopt
from policyopt import available_solvers

from test_policies_properties import random_problem

SEEDS = [11, 23, 37]
POLICIES = [("max_sum_throughput", {}), ("makespan", {}), ("finish_time_fairness", {}),
            ("finish_time_fairness_agnostic", {}), ("fifo", {}), ("fifo_agnostic", {}), ("min_cost", {}),
            ("min_cost", {"exact_ratio": True}), ("min_cost_slo", {}), ("makespan_under_budget", {"budget": 40.0}),
            ("makespan_under_budget", {"budget": 40.0, "method": "bisection"})]
OTHERS = [s for s in ("cvxpy", "pulp") if s in available_solvers()]


def _same(a: policyopt.PolicyResult, b: policyopt.PolicyResult, rel: float) -> None:
    assert a.status == b.status
    if a.objective is None:
        assert b.objective is None
        for key in ("fallback_objective", "min_budget"):
            if key in a.extra and a.extra[key] is not None:
                assert b.extra[key] == pytest.approx(a.extra[key], rel=rel)
        return
    assert b.objective == pytest.approx(a.objective, rel=rel, abs=1e-9)


@pytest.mark.skipif(not OTHERS, reason="no second backend installed (pip install 'policyopt[solvers]')")
@pytest.mark.parametrize("solver", OTHERS)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("space_sharing", [False, True])
def test_backends_agree(solver: str, seed: int, space_sharing: bool) -> None:
    p = random_problem(seed, n_max=4)
    rel = 1e-6 if solver == "cvxpy" else 1e-5
    for name, opts in POLICIES:
        if solver == "pulp" and name.startswith("finish_time"):
            continue  # CBC's duals on degenerate vertices make Newton fall back to slow bisection
        ref = policyopt.solve(p, name, space_sharing=space_sharing, **opts)
        other = policyopt.solve(p, name, space_sharing=space_sharing, solver=solver, **opts)
        _same(ref, other, rel)


@pytest.mark.skipif("cvxpy" not in available_solvers(), reason="cvxpy not installed")
@pytest.mark.parametrize("seed", SEEDS)
def test_shortest_job_first_levels_agree(seed: int) -> None:
    """The lexicographic levels (normalized throughputs in SJF order) agree across backends."""
    p = random_problem(seed, n_max=4)
    a = policyopt.solve(p, "shortest_job_first")
    b = policyopt.solve(p, "shortest_job_first", solver="cvxpy")
    fastest = {j.id: max(j.throughputs.values()) for j in p.jobs}
    assert list(a.extra["durations"]) == list(b.extra["durations"])
    got = np.array([[a.effective_throughputs[j] / fastest[j], b.effective_throughputs[j] / fastest[j]]
                    for j in a.extra["durations"]])
    np.testing.assert_allclose(got[:, 0], got[:, 1], atol=2e-5)


def test_ftf_dual_sign_convention() -> None:
    """The Newton step relies on HiGHS's dual convention (sensitivity of the optimum to the row's
    active bound): check it by finite differences on the FTF slack LP's rows."""
    p = random_problem(5, n_max=4)
    res = policyopt.solve(p, "finish_time_fairness")
    assert res.extra["relative_gap"] <= 1e-7
    # the policy's lower bound is certified by the tangent, so it must not exceed the objective
    assert res.extra["lower_bound"] <= res.objective * (1 + 1e-9)
    from policyopt.modeling import Model
    from policyopt.solver_api import SolverOptions, get_solver

    space = res.space
    model = Model("fd")
    X = space.add_allocation(model)
    lam = model.add_variable("lam")
    thr = space.throughput(X)
    model.add_constraints(thr - lam.expr() >= 1.0, "rows")
    model.maximize(lam)
    sf = model.compile()
    loaded = get_solver("highs").load(sf, SolverOptions(algorithm="simplex"))
    base = loaded.solve()
    rows = np.arange(model.blocks["rows"].start, model.blocks["rows"].stop)
    i = int(rows[np.argmin(base.row_duals[rows])])  # an active row (dual < 0)
    h = 1e-4
    loaded.set_row_bounds(np.array([i]), np.array([1.0 + h]), np.array([np.inf]))
    bumped = loaded.solve()
    fd = (bumped.objective - base.objective) / h
    assert base.row_duals[i] < 0
    assert fd == pytest.approx(base.row_duals[i], rel=1e-3, abs=1e-6)


@pytest.mark.parametrize("seed", SEEDS)
def test_allox_flow_equals_matching(seed: int) -> None:
    """The transportation-LP fast path reaches the assignment's optimum (total unimodularity)."""
    p = random_problem(seed, n_max=6)
    a = policyopt.solve(p, "allox", method="matching", alpha=1.0)
    b = policyopt.solve(p, "allox", method="flow", alpha=1.0)
    assert b.objective == pytest.approx(a.objective, rel=1e-9)
    assert not b.space.check(b.X)


def test_auto_cold_ipm_then_warm_simplex(monkeypatch: pytest.MonkeyPatch) -> None:
    """``algorithm="auto"`` (one rule, ``solver_api.auto_algorithm``): finish-time fairness solves
    cold by interior point on a large LP, then re-solves warm by simplex — same optimum."""
    from policyopt import solver_api
    from policyopt.solvers.highs import HighsModel

    calls: list[str] = []
    run = HighsModel._run_highs

    def recording_run(self: HighsModel):  # type: ignore[no-untyped-def]
        v = self.h.getOptionValue("solver")
        calls.append(v[1] if isinstance(v, tuple) else v)  # (status, value) in newer highspy
        return run(self)

    p = random_problem(0, n_max=5)  # two Newton LPs
    ref = policyopt.solve(p, "finish_time_fairness", algorithm="simplex")
    monkeypatch.setattr(solver_api, "IPM_MIN_COLS_DEGENERATE", 0)  # finish-time fairness: a max-min epigraph
    monkeypatch.setattr(HighsModel, "_run_highs", recording_run)
    res = policyopt.solve(p, "finish_time_fairness")
    assert calls[0] == "ipm" and len(calls) >= 2 and set(calls[1:]) == {"simplex"}, calls
    assert res.objective == pytest.approx(ref.objective, rel=1e-7)


def test_auto_cold_primal_simplex_for_degenerate_lps(monkeypatch: pytest.MonkeyPatch) -> None:
    """``algorithm="auto"`` below the interior-point threshold: a cold max-min epigraph LP
    (finish-time fairness, a ``degenerate`` policy) by primal simplex without presolve, its warm
    re-solves by simplex; makespan's cold LP by dual simplex with presolve — or, below
    ``PRIMAL_MAX_COLS`` columns and feasible at zero, by primal simplex without presolve. Same optima
    as ``algorithm=simplex``."""
    from policyopt import solver_api

    p = random_problem(0, n_max=5)  # two Newton LPs
    ref = {name: policyopt.solve(p, name, algorithm="simplex") for name in ("finish_time_fairness", "makespan")}
    calls = record_highs_runs(monkeypatch, "solver", "simplex_strategy", "presolve")
    res = policyopt.solve(p, "finish_time_fairness")
    assert calls[0] == ("simplex", 4, "off") and len(calls) >= 2, calls
    assert {c[0] for c in calls[1:]} == {"simplex"}, calls  # warm: primal or dual (next test)
    assert res.objective == pytest.approx(ref["finish_time_fairness"].objective, rel=1e-7)
    calls.clear()
    res = policyopt.solve(p, "makespan")
    assert calls == [("simplex", 4, "off")], calls  # a small LP feasible at zero (PRIMAL_MAX_COLS)
    assert res.objective == pytest.approx(ref["makespan"].objective, rel=1e-7)
    calls.clear()
    monkeypatch.setattr(solver_api, "PRIMAL_MAX_COLS", 0)
    res = policyopt.solve(p, "makespan")
    assert calls == [("simplex", 1, "choose")], calls
    assert res.objective == pytest.approx(ref["makespan"].objective, rel=1e-7)


@pytest.mark.usefixtures("no_transport_route")  # (the modeling-layer path at this size)
@pytest.mark.parametrize("stall", [False, True])
def test_auto_warm_primal_when_the_last_solution_stays_feasible(monkeypatch: pytest.MonkeyPatch, stall: bool) -> None:
    """Max-min fairness's second stage (``t`` held at ``t*``, new costs: the first optimum stays
    feasible) re-solves by primal simplex without bound perturbation; a bound the last solution
    violates sends the next re-solve back to the dual simplex. ``stall``: the iteration cap at 0, so
    the unperturbed solve stops at once and is repeated with the perturbation — same optimum."""
    from policyopt.solvers import highs

    if stall:
        monkeypatch.setattr(highs, "_UNPERTURBED_MIN_ITERATIONS", 0)
        monkeypatch.setattr(highs, "_UNPERTURBED_ITERATIONS_PER_DIM", 0)
    p = random_problem(3, n_max=6)
    ref = policyopt.solve(p, "max_min_fairness", algorithm="simplex")
    calls = record_highs_runs(monkeypatch, "solver", "simplex_strategy", "primal_simplex_bound_perturbation_multiplier")
    res = policyopt.solve(p, "max_min_fairness")
    assert res.objective == pytest.approx(ref.objective, rel=1e-9)
    assert res.extra["fill"]["normalized_throughput_after"] == pytest.approx(
        ref.extra["fill"]["normalized_throughput_after"], rel=1e-7)
    assert calls[0] == ("simplex", 4, 1.0) and calls[1] == ("simplex", 4, 0.0), calls
    assert len(calls) == (3 if stall else 2) and (not stall or calls[2] == ("simplex", 4, 1.0)), calls
    # a bound the last solution violates: the next re-solve is by dual simplex, perturbation back on
    from policyopt import Model, SolverOptions, get_solver

    pol = policyopt.get_policy("max_min_fairness")
    space = pol.make_space(p)
    model = Model("mmf")
    X = space.add_allocation(model)
    t = pol.build(model, space, X)
    loaded = get_solver("highs").load(model.compile(), SolverOptions(degenerate=True))
    first = loaded.solve()
    tcol = t.cols.ravel()
    calls.clear()
    loaded.set_col_bounds(tcol, np.array([-np.inf]), np.array([first.x[tcol][0] / 2]))
    half = loaded.solve()
    assert calls == [("simplex", 1, 1.0)], calls
    assert half.objective == pytest.approx(first.objective / 2, rel=1e-9)
