"""``max_min_fairness_agnostic -o optimum=proportional``: the agnostic max-min LP's optimum defined in
closed form. The LP has a whole face of optima (every split of a job's time over the types is
optimal when every throughput reads 1), and which point a solve returns depends on the solver's path;
the closed form is one allocation, the same whatever solver options are given, and an optimum of
the LP (feasible, its objective equal to the LP's)."""
from __future__ import annotations

import numpy as np
import pytest

import policyopt
from policyopt import Problem, available_solvers

TYPES = ("v100", "p100", "k80")


def gavel_like(seed: int, n: int, counts: tuple[int, int, int] = (36, 36, 36), multi_gpu: bool = False,
               weighted: bool = False) -> Problem:
    """``n`` jobs with random positive throughputs on every type (seeded), scale factors 1 (or 1/2/4/8 at
    Gavel's 70/10/15/5 %), weights 1 (or among 0.5, 1, 2)."""
    rng = np.random.default_rng(seed)
    thr = rng.uniform(0.5, 5.0, (n, len(TYPES)))
    sf = rng.choice([1, 2, 4, 8], n, p=[0.7, 0.1, 0.15, 0.05]) if multi_gpu else np.ones(n, int)
    w = rng.choice([0.5, 1.0, 2.0], n) if weighted else np.ones(n)
    jobs = [{"id": f"j{i}", "throughputs": dict(zip(TYPES, thr[i].tolist())), "scale_factor": int(sf[i]),
             "weight": float(w[i])} for i in range(n)]
    return Problem.from_dict({"cluster": {"worker_types": {t: {"count": c} for t, c in zip(TYPES, counts)}},
                              "jobs": jobs})


def _paths() -> list[dict]:
    """Solver paths: HiGHS's default, simplex and IPM, and each cvxpy backend installed, without fill too."""
    paths: list[dict] = [{}, {"algorithm": "simplex"}, {"algorithm": "ipm"}, {"fill": False}]
    if "cvxpy" in available_solvers():
        import cvxpy

        paths += [{"solver": f"cvxpy:{s}", "fill": False} for s in ("CLARABEL", "ECOS", "HIGHS")
                  if s in cvxpy.installed_solvers()]
    return paths


def _published_agnostic_options() -> dict:
    """The policy options of the published single-GPU setup's agnostic arm."""
    from policyopt.sim import experiments as ex

    arms = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS["las_single"], "published").arms}
    assert arms["agnostic"]["policy"] == "max_min_fairness_agnostic"
    return dict(arms["agnostic"].get("policy_options", {}))


@pytest.mark.parametrize("n", [40, 150])  # fewer jobs than GPUs (every share 1), more (shares C/n)
def test_published_agnostic_arm_is_the_same_on_every_solver_path(n: int) -> None:
    """Fails with the agnostic arm solved (a vertex): HiGHS's simplex, its IPM and an interior-point
    backend return different optima of the same LP (checked below, so the test keeps its teeth)."""
    p = gavel_like(0, n)
    opts = _published_agnostic_options()
    results = [policyopt.solve(p, "max_min_fairness_agnostic", **{**opts, **path}) for path in _paths()]
    for r in results:
        assert r.status.value == "optimal"
        np.testing.assert_allclose(r.X, results[0].X, rtol=0, atol=1e-9)
    solved = [policyopt.solve(p, "max_min_fairness_agnostic", **path).X for path in _paths()]
    assert max(float(np.abs(x - solved[0]).max()) for x in solved) > 0.01  # the solved optima differ


@pytest.mark.parametrize("seed,n,counts,multi_gpu,weighted", [
    (1, 5, (36, 36, 36), False, False), (2, 150, (36, 36, 36), False, False), (3, 30, (12, 12, 12), True, False),
    (4, 80, (12, 12, 12), True, True), (5, 300, (36, 36, 36), True, True), (6, 60, (8, 16, 24), False, True),
    (7, 20, (8, 16, 24), True, False), (8, 90, (36, 0, 36), False, False)])
def test_closed_form_is_an_optimum_of_the_lp(seed: int, n: int, counts: tuple[int, int, int], multi_gpu: bool,
                                             weighted: bool) -> None:
    """Feasible, its smallest level equal to the LP's optimal value, time shares water-filled (every job
    below a share of 1 at one common level, jobs at 1 no higher), split over types by their counts."""
    p = gavel_like(seed, n, counts, multi_gpu, weighted)
    res = policyopt.solve(p, "max_min_fairness_agnostic", optimum="proportional")
    assert res.extra["optimum"] == "proportional" and res.solver == "closed form"
    lp = policyopt.solve(p, "max_min_fairness_agnostic", fill=False)
    space = res.space
    X = res.X[: len(space.jobs)]
    assert space.check(res.X, tol=1e-12) == []
    assert res.objective == pytest.approx(lp.objective, rel=1e-9, abs=1e-12)
    a = space.scale / (space.weights * space.equal_share_throughput(space.agnostic_throughputs()[0]))
    share = X.sum(axis=1)
    level = a * share
    assert level.min() == pytest.approx(lp.objective, rel=1e-9)
    counts_c = np.asarray(counts, float)
    np.testing.assert_allclose(X, share[:, None] * counts_c / counts_c.sum(), rtol=0, atol=1e-15)
    below = share < 1 - 1e-12
    if below.any():  # capacity used up; those jobs share one level, the saturated ones are not above it
        used = float(space.scale @ share)
        assert used == pytest.approx(counts_c.sum(), rel=1e-12)
        assert np.ptp(level[below]) <= 1e-12 * level[below].max()
        assert np.all(level[~below] <= level[below].max() * (1 + 1e-12))
    else:
        assert float(space.scale @ share) <= counts_c.sum()


def test_effective_throughputs_use_the_real_data() -> None:
    p = gavel_like(9, 10)
    res = policyopt.solve(p, "max_min_fairness_agnostic", optimum="proportional")
    T = res.space.T
    got = np.array([res.effective_throughputs[j] for j in res.space.jobs.labels])
    np.testing.assert_allclose(got, (T * res.X[:10]).sum(axis=1), rtol=1e-12)


def test_outside_the_closed_form_the_lp_is_solved_and_said() -> None:
    """An 8-GPU job on a cluster with 4 K80s cannot run there: the closed form does not apply."""
    p = gavel_like(10, 40, (12, 12, 4), multi_gpu=True)
    assert (p.arrays.scale > 4).any()
    res = policyopt.solve(p, "max_min_fairness_agnostic", optimum="proportional")
    assert res.status.value == "optimal" and res.extra["optimum"].startswith("solver:")
    assert res.objective == pytest.approx(policyopt.solve(p, "max_min_fairness_agnostic").objective, rel=1e-9)


def test_option_is_checked_and_the_default_is_unchanged() -> None:
    from policyopt.errors import InputError

    p = gavel_like(11, 8)
    with pytest.raises(InputError, match="optimum"):
        policyopt.solve(p, "max_min_fairness_agnostic", optimum="centre")
    assert "optimum" not in policyopt.solve(p, "max_min_fairness_agnostic").extra


def test_published_simulation_takes_the_closed_form_at_every_solve(monkeypatch: pytest.MonkeyPatch) -> None:
    """The published single-GPU setup's problems (one server of 36 GPUs per type) all fit the closed
    form: no solve of its agnostic arm falls back to the LP (small form: 60 jobs at 5.6 jobs/h)."""
    import policyopt.formulations.max_min_fairness as mmf
    from policyopt.sim import experiments as ex
    from policyopt.sim.experiment_runner import _run_one

    seen: list[bool] = []
    closed_form = mmf.proportional_optimum

    def counted(space, a):  # type: ignore[no-untyped-def]
        out = closed_form(space, a)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(mmf, "proportional_optimum", counted)
    exp = ex.scaled(ex.EXPERIMENTS["las_single"], "published", jobs=60, rates=[5.6], keep_arriving=True)
    row, _ = _run_one((exp, 0, 5.6, [a.label for a in exp.arms].index("agnostic")))
    assert row["completed"] > 0 and len(seen) > 10 and all(seen)
