"""Warm primal re-solves (``LoadedModel.use_warm_primal``, used by the formulations' ``LoadedLP``):
HiGHS runs primal simplex without its bound perturbation under an iteration cap of
``1000 + 10 (rows + columns)`` sized at each run; a run that stalls at the cap is repeated with the
perturbation (counted); a named algorithm afterwards gets HiGHS's defaults back. Every answer
equals a cold dual simplex solve of the same LP."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp
from highs_runs import option, record_highs_runs

from policyopt import Problem, SolverOptions, get_policy, get_solver
from policyopt.examples import load_example
from policyopt.formulations._common import LoadedLP
from policyopt.modeling import Model
from policyopt.result import Timings
from policyopt.solver_api import LoadedModel
from policyopt.solvers import highs

OPTIONS = ("simplex_strategy", "primal_simplex_bound_perturbation_multiplier", "simplex_iteration_limit")
NO_CAP = 2**31 - 1


def loaded_lp(problem: Problem) -> LoadedLP:
    pol = get_policy("max_sum_throughput")
    space = pol.make_space(problem)
    m = Model()
    pol.build(m, space, space.add_allocation(m))
    return LoadedLP(pol, m, Timings())


def dual_simplex(lp: LoadedLP) -> Any:
    return get_solver("highs").load(lp.loaded.sf.copy(), SolverOptions(algorithm="simplex")).solve()


def cap(sf: Any) -> int:
    return highs._UNPERTURBED_MIN_ITERATIONS + highs._UNPERTURBED_ITERATIONS_PER_DIM * (sf.num_rows + sf.num_cols)


def test_warm_primal_cap_is_sized_at_each_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """After rows are added the cap is that of the grown LP (it was the size at ``use_warm_primal``)."""
    lp = loaded_lp(load_example("small"))
    x = lp.solve().x
    assert x is not None
    lp.use_warm_primal()
    assert lp.warm_primal
    calls = record_highs_runs(monkeypatch, *OPTIONS)
    n = lp.loaded.sf.num_cols
    rows = lp.add_rows(sp.csr_matrix(np.ones((1, n))), -np.inf, float(x.sum()) * 0.9)  # cuts the last point
    res = lp.solve()
    assert calls == [(4, 0.0, cap(lp.loaded.sf))] and rows.tolist() == [lp.loaded.sf.num_rows - 1]
    ref = dual_simplex(lp)
    assert res.ok and ref.ok and res.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)


def test_a_stall_at_the_cap_is_repeated_perturbed_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cap at 0: each warm run stops at once and is repeated with the perturbation, no cap; the
    next run is capped again. ``set_algorithm`` afterwards: HiGHS's dual simplex and defaults."""
    lp = loaded_lp(load_example("small"))
    assert lp.solve().ok
    lp.use_warm_primal()
    monkeypatch.setattr(highs, "_UNPERTURBED_MIN_ITERATIONS", 0)
    monkeypatch.setattr(highs, "_UNPERTURBED_ITERATIONS_PER_DIM", 0)
    calls = record_highs_runs(monkeypatch, *OPTIONS, model=lambda m: m is lp.loaded)
    cols = np.arange(lp.loaded.sf.num_cols)
    rng = np.random.default_rng(0)
    for _ in range(2):  # new costs: the last basis stays feasible, not optimal (a few primal pivots)
        lp.set_costs(cols, rng.uniform(0.0, 1.0, cols.size))
        res = lp.solve()
        ref = dual_simplex(lp)
        assert res.ok and ref.ok and res.objective == pytest.approx(ref.objective, rel=1e-9, abs=1e-12)
    assert [c[1:] for c in calls if c[0]] == [(4, 0.0, 0), (4, 1.0, NO_CAP)] * 2
    assert lp.stall_retries == 2 and lp.loaded.stall_retries == 2
    lp.loaded.set_algorithm("simplex")
    h = lp.loaded.h
    assert [option(h, o) for o in OPTIONS] == [1, 1.0, NO_CAP]


def test_backends_without_the_mode_solve_by_simplex() -> None:
    """``use_warm_primal`` of a backend without it: ``set_algorithm("simplex")``, nothing counted."""
    class Plain(LoadedModel):
        def solve(self) -> Any:
            raise AssertionError("not solved here")

    sf = get_solver("highs").load(loaded_lp(load_example("small")).sf, SolverOptions()).sf
    plain = Plain(sf, SolverOptions())
    assert plain.use_warm_primal() is False
    assert plain.options.algorithm == "simplex" and plain.stall_retries == 0


def test_the_recording_backend_passes_the_mode_and_its_count_through(monkeypatch: pytest.MonkeyPatch) -> None:
    """``policyopt.bench.export``'s recorder: ``use_warm_primal`` reaches HiGHS, ``stall_retries`` is its count."""
    from policyopt.bench.export import RecordingSolver

    sf = loaded_lp(load_example("small")).sf
    rec = RecordingSolver(get_solver("highs")).load(sf.copy(), SolverOptions())
    assert rec.solve().ok and rec.use_warm_primal() is True
    monkeypatch.setattr(highs, "_UNPERTURBED_MIN_ITERATIONS", 0)
    monkeypatch.setattr(highs, "_UNPERTURBED_ITERATIONS_PER_DIM", 0)
    rec.set_costs(np.arange(sf.num_cols), np.random.default_rng(1).uniform(0.0, 1.0, sf.num_cols))
    assert rec.resolve().ok
    assert rec.stall_retries == 1 == rec._inner.stall_retries  # type: ignore[attr-defined]
