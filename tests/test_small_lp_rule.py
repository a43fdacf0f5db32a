"""``algorithm="auto"`` on small cold LPs (fewer than ``PRIMAL_MAX_COLS`` columns, feasible at zero):
primal simplex without presolve at 1e-10 tolerances, its point checked against every row and bound
(1e-9) and re-solved with presolve when it misses one. Every result is cross-checked against HiGHS
dual simplex with presolve on the whole LP (objective to 1e-7 relative, allocation feasible to 1e-9)."""
from __future__ import annotations

import numpy as np
import pytest
from highs_runs import record_highs_runs
import scipy.sparse as sp

from policyopt import Cluster, Problem, SolverOptions, get_policy, get_solver
from policyopt.solver_api import PRIMAL_MAX_COLS, STRUCTURED_MIN_COLS_DEGENERATE, auto_algorithm, zero_feasible
from policyopt.standard_form import StandardForm


def gavel_problem(gavel, n: int, seed: int) -> Problem:  # type: ignore[no-untyped-def]
    from policyopt.sim.traces import gavel_trace, parse_job_type

    trace = gavel_trace(gavel, n, static=True, multi_gpu=True, seed=seed)
    types = [gavel.type_index(*parse_job_type(j.job_type)) for j in trace]
    return gavel.problem(types, Cluster.from_counts({t: max(n // 4, 1) for t in ("v100", "p100", "k80")},
                                                    gpus_per_server=4,
                                                    prices={"v100": 3.06, "p100": 1.46, "k80": 0.90}))


def compiled(policy: str, problem: Problem) -> StandardForm:
    """The first LP ``policy`` hands its backend for ``problem`` (a copy, as loaded)."""
    from policyopt.solvers.highs import HighsSolver

    forms: list[StandardForm] = []

    class Recording(HighsSolver):
        def load(self, sf: StandardForm, options: SolverOptions):  # type: ignore[no-untyped-def]
            forms.append(sf.copy())
            return super().load(sf, options)

    pol = get_policy(policy)
    pol.config["solver"] = Recording()
    pol.solve(problem)
    return forms[0]


@pytest.mark.parametrize("policy", ["max_sum_throughput", "max_min_fairness", "min_cost", "fifo", "makespan"])
@pytest.mark.parametrize("n,seed", [(16, 0), (64, 1), (120, 2)])
def test_small_lps_match_dual_simplex_with_presolve(gavel, policy: str, n: int, seed: int) -> None:  # type: ignore[no-untyped-def]
    sf = compiled(policy, gavel_problem(gavel, n, seed))
    assert sf.num_cols < PRIMAL_MAX_COLS and zero_feasible(sf)
    expected = "primal"
    degenerate = get_policy(policy).degenerate_lp
    assert auto_algorithm(sf, structured=False, degenerate=degenerate, small_primal=True) == expected
    loaded = get_solver("highs").load(sf.copy(), SolverOptions(degenerate=degenerate))
    fast = loaded.solve()
    if str(fast.options.get("fast_path", "")).startswith("aggregated"):
        # a max-min epigraph LP from STRUCTURED_MIN_COLS_DEGENERATE columns tries the fast path first
        assert degenerate and sf.num_cols >= STRUCTURED_MIN_COLS_DEGENERATE
    else:
        assert loaded.h.getOptionValue("presolve")[1] == "off"  # type: ignore[attr-defined]
        assert loaded.h.getOptionValue("simplex_strategy")[1] == 4  # type: ignore[attr-defined]
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    assert fast.ok and ref.ok
    assert fast.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-9)
    assert sf.violation(fast.x) <= 1e-9
    assert "small_lp_check" not in fast.options


def test_point_outside_a_row_is_re_solved_with_presolve(gavel, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """The check after the primal run sees a violation (forced here: a negative tolerance): the LP is
    solved again from scratch by dual simplex with presolve, and that answer is returned."""
    from policyopt.solvers import highs

    sf = compiled("max_sum_throughput", gavel_problem(gavel, 32, 4))
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    monkeypatch.setattr(highs, "_FEAS_TOL", -1.0)
    loaded = get_solver("highs").load(sf.copy(), SolverOptions())
    res = loaded.solve()
    assert "re-solved with presolve" in res.options["small_lp_check"]
    assert loaded.h.getOptionValue("presolve")[1] == "choose"  # type: ignore[attr-defined]
    assert loaded.h.getOptionValue("simplex_strategy")[1] == 1  # type: ignore[attr-defined]
    assert res.ok and res.objective == pytest.approx(ref.objective, rel=1e-9)
    assert sf.violation(res.x) <= 1e-9


def test_highs_infeasibility_is_the_points_violation(gavel) -> None:  # type: ignore[no-untyped-def]
    """The check reads HiGHS's largest primal infeasibility of its point: the same number as
    ``StandardForm.violation`` of that point — here on points that miss rows by 2–12 (dual simplex
    stopped after a few iterations) and on optimal ones."""
    seen = []
    for policy in ("max_min_fairness", "min_cost_slo"):
        sf = compiled(policy, gavel_problem(gavel, 32, 5))
        for limit in (1, 3, 10, 1000):
            loaded = get_solver("highs").load(sf.copy(), SolverOptions(
                extra={"simplex_iteration_limit": limit, "simplex_strategy": 1, "presolve": "off"}))
            loaded.solve()
            x = np.array(loaded.h.getSolution().col_value)  # type: ignore[attr-defined]
            assert loaded._max_infeasibility == pytest.approx(sf.violation(x), rel=1e-9, abs=1e-12)
            seen.append(loaded._max_infeasibility)
    assert max(seen) > 1.0 and min(seen) < 1e-9


def test_lp_infeasible_at_zero_keeps_dual_simplex_with_presolve() -> None:
    """Rows that zero does not meet (a throughput floor): no primal start; dual simplex with presolve."""
    A = sp.csc_matrix(np.array([[1.0, 1.0], [1.0, -1.0]]))
    sf = StandardForm(sense="max", c=np.array([1.0, 2.0]), offset=0.0, col_lower=np.zeros(2),
                      col_upper=np.ones(2), integrality=np.zeros(2, np.int32), A=A,
                      row_lower=np.array([0.5, -np.inf]), row_upper=np.array([1.5, 0.25]), row_scale=np.ones(2))
    assert not zero_feasible(sf)
    assert auto_algorithm(sf, structured=False, small_primal=True) == "simplex"
    sf.row_lower[0] = 0.0  # now zero meets every row
    assert zero_feasible(sf)
    assert auto_algorithm(sf, structured=False, small_primal=True) == "primal"
    assert auto_algorithm(sf, warm=True, structured=False, small_primal=True) == "simplex"  # warm: dual simplex
    # callers that hand the answer on as SolverOptions.algorithm (no "primal" there) keep dual simplex
    assert auto_algorithm(sf, structured=False) == "simplex"
    res = get_solver("highs").load(sf, SolverOptions()).solve()
    assert res.ok and res.objective == pytest.approx(2.5, rel=1e-12)  # x = (0.5, 1): x₁ + x₂ ≤ 1.5 binds
    assert np.allclose(res.x, [0.5, 1.0], atol=1e-12)


@pytest.mark.parametrize("stall", [False, True])
@pytest.mark.parametrize("policy,n,seed", [("max_sum_throughput", 64, 0), ("makespan", 48, 3), ("min_cost", 64, 6)])
def test_small_cold_primal_runs_without_bound_perturbation(gavel, monkeypatch: pytest.MonkeyPatch, stall: bool,  # type: ignore[no-untyped-def]
                                                           policy: str, n: int, seed: int) -> None:
    """A small cold LP feasible at zero (not hinted degenerate) runs primal simplex from the slack
    basis without HiGHS's bound perturbation, under the iteration cap of warm primal re-solves;
    ``stall``: the cap at 0 iterations, so the run stops at once and is repeated with the
    perturbation. Either way the answer is HiGHS dual simplex's with presolve (objective 1e-7
    relative, every row and bound to 1e-9)."""
    from policyopt.solvers import highs

    if stall:
        monkeypatch.setattr(highs, "_UNPERTURBED_MIN_ITERATIONS", 0)
        monkeypatch.setattr(highs, "_UNPERTURBED_ITERATIONS_PER_DIM", 0)
    sf = compiled(policy, gavel_problem(gavel, n, seed))
    assert sf.num_cols < PRIMAL_MAX_COLS and zero_feasible(sf)
    calls = record_highs_runs(monkeypatch, "simplex_strategy", "primal_simplex_bound_perturbation_multiplier",
                              "simplex_iteration_limit")
    res = get_solver("highs").load(sf.copy(), SolverOptions()).solve()
    assert calls[0][:2] == (4, 0.0) and calls[0][2] < 2**31 - 1, calls
    if stall:
        assert calls[1:] == [(4, 1.0, 2**31 - 1)], calls
    else:
        assert len(calls) == 1, calls
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    assert res.ok and ref.ok
    assert res.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-9)
    assert sf.violation(res.x) <= 1e-9
    # a degenerate-hinted LP (max-min's epigraph) keeps the perturbation on its cold run
    calls.clear()
    get_solver("highs").load(sf.copy(), SolverOptions(degenerate=True)).solve()
    assert calls[0][1] == 1.0, calls


def test_a_named_algorithm_after_an_auto_run_gets_highs_defaults(gavel) -> None:  # type: ignore[no-untyped-def]
    """After an ``auto`` run without bound perturbation under a cap (a small cold LP feasible at
    zero), switching the model to a named algorithm restores HiGHS's perturbation and lifts the cap
    (a caller that turns them off itself, as ``use_warm_primal`` does, then owns them); its
    re-solve still answers as dual simplex does."""
    sf = compiled("max_sum_throughput", gavel_problem(gavel, 64, 0))
    model = get_solver("highs").load(sf.copy(), SolverOptions())
    assert model.solve().ok

    def value(name: str) -> object:
        v = model.h.getOptionValue(name)  # type: ignore[attr-defined]
        return v[1] if isinstance(v, tuple) else v

    assert value("primal_simplex_bound_perturbation_multiplier") == 0.0  # the auto run's
    assert value("simplex_iteration_limit") < 2**31 - 1
    model.set_algorithm("simplex")
    assert value("primal_simplex_bound_perturbation_multiplier") == 1.0
    assert value("dual_simplex_cost_perturbation_multiplier") == 1.0
    assert value("simplex_iteration_limit") == 2**31 - 1
    res = model.resolve()
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    assert res.ok and ref.ok and res.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-9)


def test_an_unperturbed_run_without_an_answer_is_repeated_perturbed(gavel, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A capped run without perturbation that ends without an answer (HiGHS's 'Unknown', mapped to
    ``error``; injected here on the first run) is repeated with HiGHS's perturbation and no cap, as
    a stall at the cap is; the answer is dual simplex's."""
    from dataclasses import replace

    from policyopt.result import Status
    from policyopt.solvers import highs

    sf = compiled("max_sum_throughput", gavel_problem(gavel, 64, 0))
    runs: list[float] = []
    run = highs.HighsModel._run_highs

    def failing_first(self: highs.HighsModel):  # type: ignore[no-untyped-def]
        v = self.h.getOptionValue("primal_simplex_bound_perturbation_multiplier")
        runs.append(v[1] if isinstance(v, tuple) else v)
        res = run(self)
        return replace(res, status=Status.ERROR, x=None) if len(runs) == 1 else res

    monkeypatch.setattr(highs.HighsModel, "_run_highs", failing_first)
    res = get_solver("highs").load(sf.copy(), SolverOptions()).solve()
    assert runs == [0.0, 1.0], runs
    ref = get_solver("highs").load(sf.copy(), SolverOptions(algorithm="simplex")).solve()
    assert res.ok and ref.ok and res.objective == pytest.approx(ref.objective, rel=1e-7, abs=1e-9)
    assert sf.violation(res.x) <= 1e-9
