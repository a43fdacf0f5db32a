"""Primal simplex steps on HiGHS's factorization (``policyopt.solvers.highs_steps``): after a
simplex solve, new costs and column bounds re-optimized outside HiGHS, certified on the whole LP.
Every answer is checked against HiGHS's simplex on the same LP (objective to 1e-9 relative, every
row and bound to 1e-9); max-min fairness's ``fill`` stage taken this way against the same stage
run by HiGHS."""
from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from policyopt import Cluster, Job, Problem, SolverOptions, get_policy, incremental
from policyopt.solvers import highs_steps
from policyopt.solvers.highs import HighsModel
from policyopt.standard_form import StandardForm

SIMPLEX = SolverOptions(algorithm="simplex", extra={"presolve": "off"})


def random_lp(rng: np.random.Generator, n: int, m: int) -> StandardForm:
    """``max c·x`` over ``0 ≤ x ≤ u`` (``u`` finite: bounded) and ``m`` rows ``A x ≤ b`` with
    nonnegative entries (``x = 0`` feasible), a fifth of the rows also bounded below by 0."""
    density = min(1.0, 4.0 / m)
    A = sp.random(m, n, density=density, random_state=np.random.RandomState(int(rng.integers(2**31))),
                  data_rvs=lambda k: rng.uniform(0.1, 2.0, k), format="csc")
    b = rng.uniform(1.0, 5.0, m)
    lo = np.where(rng.random(m) < 0.2, 0.0, -np.inf)
    return StandardForm(sense="max", c=rng.uniform(-1.0, 3.0, n), offset=0.0, col_lower=np.zeros(n),
                        col_upper=rng.choice([1.0, 2.0, 5.0], n), integrality=np.zeros(n, np.int8), A=A,
                        row_lower=lo, row_upper=b, row_scale=np.ones(m))


def reference(sf: StandardForm, c: np.ndarray, lower: np.ndarray, upper: np.ndarray) -> float:
    lp = dataclasses.replace(sf.copy(), c=c.copy(), col_lower=lower.copy(), col_upper=upper.copy())
    r = HighsModel(lp, SolverOptions(algorithm="simplex")).solve()
    assert r.ok and r.objective is not None
    return float(r.objective)


def solved(sf: StandardForm) -> tuple[HighsModel, np.ndarray, int]:
    model = HighsModel(sf.copy(), SIMPLEX)
    runs = model.runs
    r = model.solve()
    assert r.ok and r.x is not None
    return model, r.x, runs


@pytest.mark.parametrize("seed", range(24))
def test_steps_reach_highs_optimum(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """New costs (the old ones perturbed, or replaced) and a tightened lower bound on a basic
    column: the certified answer equals HiGHS's simplex on the changed LP; the loaded model and
    HiGHS's costs are unchanged."""
    monkeypatch.setattr(highs_steps, "MIN_ROWS", 0)
    rng = np.random.default_rng(seed)
    sf = random_lp(rng, int(rng.integers(20, 120)), int(rng.integers(10, 60)))
    model, x, runs = solved(sf)
    assert highs_steps.ready(model, runs)
    c = sf.c + rng.normal(0.0, 0.3, sf.num_cols) if seed % 2 else rng.uniform(-1.0, 3.0, sf.num_cols)
    lower = sf.col_lower.copy()
    inner = np.flatnonzero((x > 1e-6) & (x < sf.col_upper - 1e-6))
    if inner.size:  # (held at ≥ half its value: the basis stays feasible, as fill's t ≥ t*(1 − 1e-9))
        lower[inner[0]] = x[inner[0]] / 2
    got = highs_steps.reoptimize(model, x, c, lower, sf.col_upper, max_steps=200)
    assert got is not None
    ref = reference(sf, c, lower, sf.col_upper)
    assert got.objective == pytest.approx(ref, rel=1e-9, abs=1e-9)
    assert float(c @ got.x) == pytest.approx(ref, rel=1e-9, abs=1e-9)
    checked = dataclasses.replace(sf, col_lower=lower)
    assert checked.violation(got.x) <= 1e-9
    assert np.array_equal(model.sf.c, sf.c) and np.array_equal(np.asarray(model.h.getLp().col_cost_), sf.c)


def test_declines_after_interior_point_and_when_infeasible(monkeypatch: pytest.MonkeyPatch) -> None:
    """No factorization after an interior point solve (asking HiGHS for it there is not safe): not
    ready. A start that the new bounds cut off: ``None``. Too few steps allowed: ``None``."""
    monkeypatch.setattr(highs_steps, "MIN_ROWS", 0)
    sf = random_lp(np.random.default_rng(7), 80, 40)
    ipm = HighsModel(sf.copy(), SolverOptions(algorithm="ipm"))
    runs = ipm.runs
    assert ipm.solve().ok
    assert not highs_steps.ready(ipm, runs)
    model, x, runs = solved(sf)
    assert highs_steps.ready(model, runs) and not highs_steps.ready(model, model.runs)
    j = int(np.argmax(x))
    lower = sf.col_lower.copy()
    lower[j] = x[j] + 0.5
    assert highs_steps.reoptimize(model, x, sf.c, lower, sf.col_upper) is None
    c = -sf.c  # the old optimum is far from the new one
    assert highs_steps.reoptimize(model, x, c, sf.col_lower, sf.col_upper, max_steps=0) is None


class _WrongPrices:
    """HiGHS with ``getBasisTransposeSolve`` answering slightly wrong prices."""

    def __init__(self, h: Any) -> None:
        self._h = h

    def __getattr__(self, name: str) -> Any:
        return getattr(self._h, name)

    def getBasisTransposeSolve(self, rhs: np.ndarray) -> Any:
        status, y = self._h.getBasisTransposeSolve(rhs)
        return status, np.asarray(y) + 1e-6


def test_the_certificate_refuses_wrong_prices(monkeypatch: pytest.MonkeyPatch) -> None:
    """Prices that do not solve ``Bᵀ y = c_B``: the certificate (reduced costs of basic variables
    0) refuses the answer, even where the steps themselves found nothing to improve."""
    monkeypatch.setattr(highs_steps, "MIN_ROWS", 0)
    sf = random_lp(np.random.default_rng(3), 60, 30)
    model, x, runs = solved(sf)
    assert highs_steps.reoptimize(model, x, sf.c, sf.col_lower, sf.col_upper) is not None  # (0 steps)
    monkeypatch.setattr(model, "_h", _WrongPrices(model._h))
    assert highs_steps.reoptimize(model, x, sf.c, sf.col_lower, sf.col_upper) is None


def _problems(n: int, seed: int) -> list[Problem]:
    """``n`` distinct jobs on three types, then arrivals and completions (one or two at a time)."""
    rng = np.random.default_rng(seed)
    cluster = Cluster.from_counts({"v100": n // 5, "p100": n // 5, "k80": n // 5})
    jobs = [Job(f"j{i}", {"v100": float(rng.uniform(2, 10)), "p100": float(rng.uniform(1, 6)),
                          "k80": float(rng.uniform(0.5, 3))}, scale_factor=int(rng.choice([1, 1, 2])))
            for i in range(n + 6)]
    live = jobs[:n]
    seq = [Problem(cluster, tuple(live))]
    for k in range(6):
        if k % 3 == 2:
            live = live[:3] + live[4:]
        else:
            live = live + [jobs[n + k]]
        seq.append(Problem(cluster, tuple(live)))
    return seq


@pytest.mark.usefixtures("no_transport_route")  # (the modeling-layer path at this size)
@pytest.mark.parametrize("seed", [0, 1])
def test_max_min_fill_by_steps_equals_the_highs_run(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A kept max-min model's re-solves (arrivals, completions): the fill stage is taken by steps
    (``extra["fill"]["steps"]``) and reaches the total normalized throughput that HiGHS's own run
    of the stage reaches on the same LP, at the same level t*; the point is feasible."""
    seq = _problems(90, seed)
    steps = get_policy("max_min_fairness")
    with monkeypatch.context() as mp:
        mp.setattr(highs_steps, "MIN_ROWS", 10**9)  # HiGHS runs the fill stage
        runs = get_policy("max_min_fairness")
        ref = [runs.solve(p) for p in seq]
        assert all(r.extra["fill"]["steps"] is None for r in ref)
    got = [steps.solve(p) for p in seq]
    st = incremental.state(steps)
    assert st is not None and st.updates == len(seq) - 1
    assert sum(g.extra["fill"]["steps"] is not None for g in got[1:]) >= len(seq) - 2
    for p, g, r in zip(seq, got, ref):
        assert g.objective == pytest.approx(r.objective, rel=1e-9)
        assert g.extra["fill"]["normalized_throughput_after"] == pytest.approx(
            r.extra["fill"]["normalized_throughput_after"], rel=1e-9)
        space = steps.make_space(p)
        X = np.array([[g.allocation[j.id].get(c, 0.0) for c in space.configs.labels] for j in p.jobs])
        assert space.check(X, tol=1e-9) == []


def test_after_an_interior_point_cold_solve_the_fill_goes_to_highs(monkeypatch: pytest.MonkeyPatch) -> None:
    """1,400 jobs: the cold max-min LP is solved by interior point, which leaves HiGHS no
    factorization, so its fill stage is HiGHS's run (the steps are not tried there); the kept
    model's re-solves (dual simplex) take the steps, and reach HiGHS's total normalized throughput."""
    seq = _problems(1400, 2)[:4]
    pol = get_policy("max_min_fairness")
    got = [pol.solve(p) for p in seq]
    assert got[0].extra["fill"]["steps"] is None
    assert all(g.extra["fill"]["steps"] is not None for g in got[1:])
    with monkeypatch.context() as mp:
        mp.setattr(highs_steps, "MIN_ROWS", 10**9)
        ref_pol = get_policy("max_min_fairness")
        ref = [ref_pol.solve(p) for p in seq]
    for g, r in zip(got, ref):
        assert g.objective == pytest.approx(r.objective, rel=1e-9)
        assert g.extra["fill"]["normalized_throughput_after"] == pytest.approx(
            r.extra["fill"]["normalized_throughput_after"], rel=1e-9)
