"""Backend conformance: every available backend on the problem bank (hand-checked optima)."""
from __future__ import annotations

import numpy as np
import pytest

from policyopt import SolverOptions, Status, available_solvers, get_solver
from problem_bank import BANK

BACKENDS = ["highs", "highs:ipm", "highs:simplex", "cvxpy", "pulp", "pulp:HiGHS"]


def _available(name: str) -> bool:
    return name.partition(":")[0] in available_solvers()


@pytest.mark.parametrize("backend", [b for b in BACKENDS if _available(b)])
@pytest.mark.parametrize("case", BANK, ids=[c.name for c in BANK])
def test_bank(backend: str, case) -> None:
    model = case.build()
    sf = model.compile()
    res = get_solver(backend).solve(sf, SolverOptions())
    assert res.status is case.status, (backend, case.name, res.status, res.message)
    if case.status is not Status.OPTIMAL:
        return
    assert res.objective == pytest.approx(case.objective, rel=1e-6, abs=1e-6)
    for name, values in case.primal.items():
        got = model.variables[name].value(res.x).ravel()
        np.testing.assert_allclose(got, values, rtol=1e-6, atol=1e-6, err_msg=f"{backend} {case.name} {name}")
    assert sf.violation(res.x) < 1e-6
    if case.duals and res.row_duals is not None:
        for block, values in case.duals.items():
            got = model.blocks[block].value(res.row_duals).ravel()
            np.testing.assert_allclose(got, values, rtol=1e-6, atol=1e-6,
                                       err_msg=f"{backend} {case.name} duals {block}")


def test_backends_report_duals() -> None:
    """HiGHS and cvxpy must return duals for LPs (capability flag DUALS)."""
    case = BANK[0]
    for name in ("highs", "cvxpy"):
        if _available(name):
            res = get_solver(name).solve(case.build().compile())
            assert res.row_duals is not None, name


def test_inplace_update_equals_rebuild() -> None:
    """Updating bounds/costs on a loaded model gives the same optimum as rebuilding."""
    from problem_bank import _lp_ranged

    for name in [b for b in ("highs", "cvxpy", "pulp") if _available(b)]:
        model = _lp_ranged()
        sf = model.compile()
        loaded = get_solver(name).load(sf, SolverOptions())
        assert loaded.solve().objective == pytest.approx(11.0, abs=1e-6)
        cols = np.arange(2)
        loaded.set_col_bounds(cols, np.zeros(2), np.array([1.0, 10.0]))  # x <= 1 → (1, 3): 9
        assert loaded.solve().objective == pytest.approx(9.0, abs=1e-6)
        loaded.set_costs(cols, np.array([1.0, 5.0]))  # max x + 5y → (0, 4): 20
        assert loaded.solve().objective == pytest.approx(20.0, abs=1e-6)
        row = np.array([model.blocks["range"].start])
        loaded.set_row_bounds(row, np.array([1.0]), np.array([2.0]))  # x + y <= 2 → 10
        assert loaded.solve().objective == pytest.approx(10.0, abs=1e-6)
        # the original standard form is untouched by a backend that rebuilds
        rebuilt = get_solver(name).solve(_lp_ranged().compile())
        assert rebuilt.objective == pytest.approx(11.0, abs=1e-6)


def test_time_limit_status_is_documented() -> None:
    """A tiny time limit on a hard MILP gives TIME_LIMIT (or OPTIMAL if solved that fast)."""
    from policyopt import IndexSet, Model

    rng = np.random.default_rng(0)
    n = 60
    m = Model("hard")
    x = m.add_variables("x", (IndexSet("i", range(n)),), 0.0, 1.0, integer=True)
    w = rng.integers(50, 100, n).astype(float)
    m.add_constraints(x.dot(w, "i") <= w.sum() / 2 + 0.5, "cap")
    m.add_constraints(x.dot(rng.integers(50, 100, n).astype(float), "i") <= w.sum() / 2 + 0.5, "cap2")
    m.maximize(x.dot(w + rng.random(n), "i"))
    res = get_solver("highs").solve(m.compile(), SolverOptions(time_limit=0.01))
    assert res.status in (Status.TIME_LIMIT, Status.OPTIMAL)
    if res.status is Status.TIME_LIMIT and res.x is not None:
        assert m.compile().violation(res.x) < 1e-6


def test_unknown_solver_and_option_errors() -> None:
    from policyopt import InputError, SolverError, UnknownNameError

    with pytest.raises(UnknownNameError, match="solver"):
        get_solver("gurobi-nope")
    with pytest.raises(InputError, match="algorithm"):
        SolverOptions(algorithm="barrier")
    with pytest.raises(SolverError, match="no_such_option"):
        get_solver("highs").solve(BANK[0].build().compile(), SolverOptions(extra={"no_such_option": 1}))
