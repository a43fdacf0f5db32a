"""The optional backends (OR-Tools GLOP/PDLP, SCIP, Clarabel direct, cuOpt) against the hand-checked
bank and against HiGHS on policy problems. Tolerance: 1e-6 relative on objectives for every backend
(for the first-order PDLP too: it runs at 1e-8 relative gap here); cuOpt runs only with a GPU."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest
from problem_bank import BANK

from policyopt import SolverOptions, Status, get_solver
from policyopt.errors import SolverError, SolverNotAvailableError
from policyopt.solver_api import Feature

LP_ONLY = {"ortools": "ortools", "ortools:pdlp": "ortools", "clarabel": "clarabel"}
BACKENDS = {**LP_ONLY, "scip": "pyscipopt"}
FIRST_ORDER = {"ortools:pdlp"}


def _installed(backend: str) -> bool:
    return importlib.util.find_spec(BACKENDS[backend]) is not None


def _params(backends: dict[str, str]) -> list:
    return [pytest.param(b, marks=pytest.mark.skipif(not _installed(b), reason=f"{m} is not installed"))
            for b, m in backends.items()]


@pytest.mark.parametrize("backend", _params(BACKENDS))
@pytest.mark.parametrize("case", BANK, ids=[c.name for c in BANK])
def test_bank(backend: str, case) -> None:
    model = case.build()
    sf = model.compile()
    solver = get_solver(backend)
    if sf.is_mip and backend in LP_ONLY:
        with pytest.raises(SolverError, match="LPs only"):
            solver.solve(sf, SolverOptions())
        return
    res = solver.solve(sf, SolverOptions())
    if case.status is Status.UNBOUNDED and backend in FIRST_ORDER:
        assert res.status in (Status.UNBOUNDED, Status.ERROR)  # PDLP: NOT_SOLVED (documented)
        return
    assert res.status is case.status, (backend, case.name, res.status, res.message)
    if case.status is not Status.OPTIMAL:
        return
    assert res.objective == pytest.approx(case.objective, rel=1e-6, abs=1e-6)
    for name, values in case.primal.items():
        got = model.variables[name].value(res.x).ravel()
        np.testing.assert_allclose(got, values, rtol=1e-6, atol=1e-6, err_msg=f"{backend} {case.name} {name}")
    assert sf.violation(res.x) < 1e-6
    if case.duals and solver.supports(Feature.DUALS):
        assert res.row_duals is not None
        for block, values in case.duals.items():
            got = model.blocks[block].value(res.row_duals).ravel()
            np.testing.assert_allclose(got, values, rtol=1e-6, atol=1e-6, err_msg=f"{backend} {case.name} {block}")


POLICIES = ["max_min_fairness", "max_sum_throughput", "makespan", "fifo", "min_cost", "finish_time_fairness"]


@pytest.fixture(scope="module")
def problems(gavel):
    from policyopt.bench.harness import gavel_problem

    return {"plain": gavel_problem(48, seed=1), "shared": gavel_problem(24, seed=2, space_sharing=True)}


@pytest.mark.parametrize("backend", _params(BACKENDS))
def test_policies_agree_with_highs(backend: str, problems) -> None:
    from policyopt.policy import get_policy

    for kind, prob in problems.items():
        opts = {"space_sharing": kind == "shared"}
        for name in POLICIES:
            ref = get_policy(name, solver="highs", **opts).solve(prob)
            got = get_policy(name, solver=backend, **opts).solve(prob)
            assert got.status is Status.OPTIMAL, (backend, name, kind, got.message)
            assert got.objective == pytest.approx(ref.objective, rel=1e-6), (backend, name, kind)


@pytest.mark.skipif(importlib.util.find_spec("pyscipopt") is None, reason="pyscipopt is not installed")
def test_scip_milps_agree_with_highs() -> None:
    """The water-filling MILP reference (bottleneck MILPs per level) and its captured MILP stages."""
    from policyopt.bench.export import capture
    from policyopt.examples import load_example
    from policyopt.policy import get_policy

    prob = load_example("gavel-small")
    ref = get_policy("water_filling_milp", solver="highs").solve(prob)
    got = get_policy("water_filling_milp", solver="scip").solve(prob)
    assert got.objective == pytest.approx(ref.objective, rel=1e-6)
    mips = [c for c in capture(get_policy("water_filling_milp"), prob)[0].captures if c.sf.is_mip]
    assert mips
    for c in mips:
        res = get_solver("scip").solve(c.sf, SolverOptions())
        assert res.status is Status.OPTIMAL and res.objective == pytest.approx(c.objective, rel=1e-6, abs=1e-9)


def test_cuopt_skipped_with_reason_or_agrees() -> None:
    """Without the package or a GPU: not available, and the error says which; with both: the bank."""
    from policyopt.solvers.cuopt_backend import unavailable_reason

    reason = unavailable_reason()
    if reason is not None:
        assert "cuopt" in reason or "GPU" in reason
        with pytest.raises(SolverNotAvailableError, match="not available here"):
            get_solver("cuopt")
        pytest.skip(f"cuOpt not run: {reason}")
    for case in BANK:  # pragma: no cover - needs an NVIDIA GPU and cuopt-cu12
        res = get_solver("cuopt").solve(case.build().compile(), SolverOptions())
        if case.status is Status.OPTIMAL:
            assert res.objective == pytest.approx(case.objective, rel=1e-6, abs=1e-6)


def test_solvers_cli_lists_new_backends(capsys: pytest.CaptureFixture[str]) -> None:
    from policyopt.cli import main

    assert main(["solvers"]) == 0
    out = capsys.readouterr().out
    entries: dict[str, str] = {}  # one entry per backend, continuation lines indented
    for ln in out.splitlines():
        if ln and not ln[0].isspace():
            name = ln.split()[0]
            entries[name] = ln
        elif entries:
            entries[name] += " " + ln.strip()
    for name, flags in (("ortools", "LP, DUALS, TIME_LIMIT."), ("scip", "LP, MILP, TIME_LIMIT."),
                        ("clarabel", "LP, DUALS, TIME_LIMIT."), ("cuopt", "LP, MILP, DUALS, TIME_LIMIT.")):
        assert flags in entries[name], entries.get(name)


def test_lp_only_backends_refuse_milps_by_feature() -> None:
    for b in ("ortools", "clarabel"):
        if _installed(b):
            with pytest.raises(SolverNotAvailableError, match="does not support"):
                get_solver(b, require=Feature.MILP)
