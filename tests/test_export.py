"""``policyopt export`` / ``import-solution``: HiGHS reading the exported file reaches the same optimum
as ``policyopt solve`` (1e-9 relative) for every registered policy on ``gavel-small`` — or the
export is refused with the reason (multi-stage, no LP, wrong problem kind)."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from policyopt.bench.export import (
    ExportError,
    capture,
    export_policy,
    import_solution,
    read_side,
    read_solution,
)
from policyopt.errors import InputError, PolicyOptError
from policyopt.examples import example_dict, load_example
from policyopt.policy import get_policy, list_policies
from policyopt.problem import Problem

highspy = pytest.importorskip("highspy")

#: options a policy needs on gavel-small (its required options; max-min fairness without its
#: second "fill" LP is one model — with it, two, and refused)
OPTIONS = {"makespan_under_budget": {"budget": 2000.0}, "max_min_fairness": {"fill": False},
           "max_min_fairness_agnostic": {"fill": False}}
#: policies that must be exportable as one model on gavel-small
SINGLE = {"max_min_fairness", "max_min_fairness_agnostic", "max_sum_throughput", "makespan", "fifo",
          "fifo_agnostic", "min_cost", "min_cost_slo", "fluid_srpt", "makespan_under_budget",
          "finish_time_fairness"}


def rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(b), 1e-12)


def highs_solve_file(model: Path, sol: Path, mip_gap: float = 1e-9) -> float:
    """Read an exported file with HiGHS (a fresh instance), solve, write a raw solution file."""
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.setOptionValue("mip_rel_gap", mip_gap)
    assert h.readModel(str(model)) != highspy.HighsStatus.kError
    h.run()
    assert h.getModelStatus() == highspy.HighsModelStatus.kOptimal
    h.writeSolution(str(sol), 0)
    return float(h.getInfo().objective_function_value)


@pytest.fixture(scope="module")
def problem() -> Problem:
    return load_example("gavel-small")


@pytest.mark.parametrize("name", [p["name"] for p in list_policies()])
def test_every_policy_round_trip_or_explained(name: str, problem: Problem, tmp_path: Path) -> None:
    opts = OPTIONS.get(name, {})
    out = tmp_path / "m.mps"
    try:
        written = export_policy(name, problem, out, options=opts, source={"example": "gavel-small"})
    except ExportError as exc:  # multi-stage or no model: the reason is given
        assert name not in SINGLE
        assert "sequence of" in str(exc) or "solves no LP" in str(exc)
        if "sequence of" in str(exc):
            _check_stages(name, problem, opts, tmp_path)
        return
    except InputError as exc:  # the policy does not apply to this problem (it says why)
        assert name not in SINGLE
        assert "reconfig" in str(exc) or "entities" in str(exc)
        return
    (model, side_path), = written
    side = read_side(model)
    assert side_path.exists() and side["policy"] == name and side["stages"] == 1
    lp_obj = highs_solve_file(model, tmp_path / "m.sol")
    assert rel(lp_obj, side["reference"]["objective"]) <= 1e-9
    imported = import_solution([model], [tmp_path / "m.sol"])
    solved = get_policy(name, **opts).solve(problem)
    assert imported.status.value == "optimal" and solved.status.value == "optimal"
    assert rel(imported.objective, solved.objective) <= 1e-9, (imported.objective, solved.objective)
    assert imported.extra["import"][0]["rel_gap"] <= 1e-9


def _check_stages(name: str, problem: Problem, opts: dict, tmp_path: Path) -> None:
    """Every stage of a multi-stage policy can be written; HiGHS on the file = the stage's optimum."""
    caps = capture(get_policy(name, **opts), problem)[0].captures
    assert len(caps) > 1
    for k in sorted({0, len(caps) - 1}):
        (model, _), = export_policy(name, problem, tmp_path / f"s{k}.mps", options=opts, stage=k)
        obj = highs_solve_file(model, tmp_path / f"s{k}.sol")
        assert rel(obj, caps[k].objective) <= 1e-9
        with pytest.raises(InputError, match="stage"):
            import_solution([model], [tmp_path / f"s{k}.sol"], problem)


def test_two_stage_max_min_fairness_is_explained(problem: Problem, tmp_path: Path) -> None:
    """Default max-min fairness adds a second LP: refused as a whole, both stages exportable."""
    with pytest.raises(ExportError, match="sequence of 2"):
        export_policy("max_min_fairness", problem, tmp_path / "m.mps")
    _check_stages("max_min_fairness", problem, {}, tmp_path)


def test_recording_passes_every_model_update_through(problem: Problem) -> None:
    """The recorder must not change what the policy computes: every LoadedModel method reaches the
    real backend (cutting planes through add_rows, bases, bounds, costs)."""
    from policyopt.bench.export import _RecordingModel
    from policyopt.solver_api import LoadedModel

    public = {n for n in vars(LoadedModel) if not n.startswith("_") and callable(getattr(LoadedModel, n))}
    assert public - {"resolve"} <= set(vars(_RecordingModel)), public - set(vars(_RecordingModel))
    for name in ("max_min_fairness", "max_min_fairness_strategy_proof", "max_min_fairness_water_filling"):
        try:
            policy = get_policy(name)
        except InputError:
            continue
        direct = policy.solve(problem)
        recorded = capture(policy, problem)[0].result
        assert recorded.objective == pytest.approx(direct.objective, rel=1e-9, abs=1e-12), name


def test_hierarchical_is_explained(tmp_path: Path) -> None:
    d = example_dict("gavel-small")
    d["entities"] = {"a": {"weight": 1.0}, "b": {"weight": 2.0}}
    for i, j in enumerate(d["jobs"]):
        j["entity"] = "ab"[i % 2]
    prob = Problem.from_dict(d)
    with pytest.raises(ExportError, match="sequence of"):
        export_policy("hierarchical", prob, tmp_path / "h.mps")


def test_lp_format_space_sharing_and_column_map(problem: Problem, tmp_path: Path) -> None:
    opts = {"space_sharing": True, "fill": False}
    (model, _), = export_policy("max_min_fairness", problem, tmp_path / "m.lp", fmt="lp", options=opts,
                                source={"example": "gavel-small"})
    assert model.read_text().lstrip().startswith("\\") or "max" in model.read_text()[:200]
    side = read_side(model)
    amap = side["allocation_columns"]
    assert any(len(r) == 2 for r in amap["rows"])  # pairs sharing workers are columns too
    obj = highs_solve_file(model, tmp_path / "m.sol")
    solved = get_policy("max_min_fairness", **opts).solve(problem)
    imported = import_solution([model], [tmp_path / "m.sol"])
    assert rel(imported.objective, solved.objective) <= 1e-9 and rel(obj, side["reference"]["objective"]) <= 1e-9
    # the side file's map alone rebuilds the allocation from the solver's column values
    x = read_solution(tmp_path / "m.sol", side["num_cols"])
    X = np.zeros((len(amap["rows"]), len(amap["configurations"])))
    X[amap["row"], amap["configuration"]] = x[amap["first_column"] + np.arange(len(amap["row"]))]
    assert imported.X is not None
    assert np.allclose(np.clip(X, 0, 1), imported.X, atol=1e-9)


def test_pop_writes_one_file_per_part(problem: Problem, tmp_path: Path) -> None:
    from policyopt.pop import pop

    written = export_policy("max_sum_throughput", problem, tmp_path / "p.mps", pop_k=2, seed=3,
                            source={"example": "gavel-small"})
    assert [m.name for m, _ in written] == ["p.part0.mps", "p.part1.mps"]
    sols = []
    for k, (m, _) in enumerate(written):
        sols.append(tmp_path / f"p{k}.sol")
        highs_solve_file(m, sols[-1])
    imported = import_solution([m for m, _ in written], sols)
    solved = pop(get_policy("max_sum_throughput"), k=2, seed=3, parallel=False).solve(problem)
    assert rel(imported.objective, solved.objective) <= 1e-9
    with pytest.raises(ExportError, match="not the exported one"):  # a part left out
        import_solution([written[0][0]], [sols[0]])
    other = export_policy("max_sum_throughput", problem, tmp_path / "q.mps", pop_k=2, seed=4)
    with pytest.raises(InputError, match="different export"):
        import_solution([written[0][0], other[1][0]], sols, problem)


def test_milp_stage_round_trip(problem: Problem, tmp_path: Path) -> None:
    caps = capture(get_policy("water_filling_milp"), problem)[0].captures
    k = next(i for i, c in enumerate(caps) if c.sf.is_mip)
    (model, _), = export_policy("water_filling_milp", problem, tmp_path / "w.mps", stage=k)
    assert "MARKER" in model.read_text()
    assert rel(highs_solve_file(model, tmp_path / "w.sol"), caps[k].objective) <= 1e-9


def test_solution_file_styles_and_errors(problem: Problem, tmp_path: Path) -> None:
    (model, _), = export_policy("max_sum_throughput", problem, tmp_path / "m.mps", source={"example": "gavel-small"})
    highs_solve_file(model, tmp_path / "m.sol")
    side = read_side(model)
    x = read_solution(tmp_path / "m.sol", side["num_cols"])
    ref = import_solution([model], [tmp_path / "m.sol"]).objective
    nz = np.flatnonzero(x)
    # Gurobi/SCIP style (zeros omitted, a header), CBC style (index name value reduced-cost), JSON
    (tmp_path / "g.sol").write_text("# Objective value = 1\n" + "".join(f"c{j} {float(x[j])!r}\n" for j in nz))
    (tmp_path / "c.sol").write_text("Optimal - objective value 1\n"
                                    + "".join(f"{j:7d} c{j} {float(x[j])!r} 0\n" for j in nz))
    (tmp_path / "j.sol").write_text(json.dumps({"x": x.tolist()}))
    for f in ("g.sol", "c.sol", "j.sol"):
        assert rel(import_solution([model], [tmp_path / f]).objective, ref) <= 1e-12
    (tmp_path / "bad.sol").write_text(f"c{side['num_cols'] + 5} 1.0\n")
    with pytest.raises(InputError, match="does not exist"):
        import_solution([model], [tmp_path / "bad.sol"])
    (tmp_path / "empty.sol").write_text("nothing here\n")
    with pytest.raises(InputError, match="no column values"):
        import_solution([model], [tmp_path / "empty.sol"])
    # an infeasible point is not passed off as optimal: the policy's documented fallback is used
    (tmp_path / "inf.sol").write_text("".join(f"c{j} 5.0\n" for j in range(side["num_cols"])))
    res = import_solution([model], [tmp_path / "inf.sol"])
    assert res.status.value == "error" and "fallback" in res.message
    other = load_example("small")
    with pytest.raises(InputError, match="different problem"):
        import_solution([model], [tmp_path / "m.sol"], other)


def test_cli_export_import(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policyopt.cli import main

    out = tmp_path / "m.mps"
    assert main(["export", "--policy", "makespan", "--example", "gavel-small", "--output", str(out)]) == 0
    highs_solve_file(out, tmp_path / "m.sol")
    res = tmp_path / "r.json"
    assert main(["import-solution", "--problem", str(out), "--solution", str(tmp_path / "m.sol"),
                 "--output", str(res)]) == 0
    solved = get_policy("makespan").solve(load_example("gavel-small"))
    assert rel(json.loads(res.read_text())["objective"], solved.objective) <= 1e-9
    capsys.readouterr()
    assert main(["export", "--policy", "max_min_fairness_water_filling", "--example", "gavel-small",
                 "--output", str(tmp_path / "w.mps")]) == 2
    err = capsys.readouterr().err
    assert "sequence of" in err and "--stage" in err and "Traceback" not in err
    argv = ["export", "--policy", "isolated", "--example", "gavel-small", "--output", str(tmp_path / "i.mps")]
    assert main(argv) == 2
    assert "solves no LP" in capsys.readouterr().err
    assert isinstance(ExportError("x"), PolicyOptError)
