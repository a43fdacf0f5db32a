"""``--variant``: named per-arm overrides of an experiment. ``las_multi --variant gavel_solve`` solves the
aware arm's LP as Gavel's simulator solves it (Clarabel, the centre of the face of optima, no fill),
as the published setup already solves the agnostic arm's."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from bench_scripts import load_benchmark

def _interior_options() -> dict:
    """The benchmark's ``interior`` variant: the solve measured against Gavel's own simulator."""
    module = load_benchmark("gavel_sim_compare.py", "gavel_sim_compare_variants")
    return dict(module.VARIANTS["interior"]["policy_options"])


def test_gavel_solve_variant_overrides_the_aware_arm_only_where_asked() -> None:
    from policyopt.sim import experiment_catalog
    from policyopt.sim import experiments as ex

    interior = _interior_options()
    for name in ("las_single", "las_multi"):
        plain = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS[name], "published").arms}
        var = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS[name], "published", variant="gavel_solve").arms}
        assert "policy_options" not in plain["aware"]  # the published setup keeps our default aware solve
        # las_single's published agnostic arm has a closed-form optimum; gavel_solve solves it
        solved = {**interior, "optimum": "solver"} if name == "las_single" else interior
        assert var["aware"]["policy_options"] == interior and var["agnostic"]["policy_options"] == solved
        assert var["aware"]["policy"] == "max_min_fairness"
        small = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS[name], variant="gavel_solve").arms}
        assert small["aware"]["policy_options"] == interior and small["agnostic"]["policy_options"] == solved
    pub = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS["las_single"], "published").arms}
    assert pub["agnostic"]["policy_options"] == {"optimum": "proportional"}
    vertex = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS["las_single"], "published", variant="vertex").arms}
    assert vertex["agnostic"]["policy_options"] == {"optimum": "solver"} and vertex["aware"] == pub["aware"]
    # policy_options merge key by key: the published FTF agnostic arm keeps its reference with a variant's
    assert experiment_catalog._with_overrides({"policy_options": {"reference": "fastest"}},
                                              {"policy_options": {"fill": False}}) == \
        {"policy_options": {"reference": "fastest", "fill": False}}


def test_gavel_order_variant_is_gavel_solve_with_gavels_ordering() -> None:
    from policyopt.sim import experiments as ex

    solve = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS["las_multi"], "published", variant="gavel_solve").arms}
    order = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS["las_multi"], "published", variant="gavel_order").arms}
    plain = {a.label: a.config for a in ex.scaled(ex.EXPERIMENTS["las_multi"], "published").arms}
    for arm in ("aware", "agnostic"):
        assert order[arm] == {**solve[arm], "ordering": "gavel"}
        assert "ordering" not in plain[arm]


def test_variant_errors_name_the_field() -> None:
    from policyopt.errors import InputError
    from policyopt.sim import experiments as ex

    with pytest.raises(InputError, match="variant.*gavel_solve"):
        ex.scaled(ex.EXPERIMENTS["las_multi"], "published", variant="fastest")
    with pytest.raises(InputError, match="variant.*no variants"):
        ex.scaled(ex.EXPERIMENTS["makespan"], variant="gavel_solve")
    assert ex.main(["las_multi", "--scale", "published", "--variant", "fastest"]) == 2


def test_gavel_solve_run_equals_the_aware_lp_solved_as_gavels(gavel, tmp_path: Path) -> None:
    """Small form (108 GPUs, 15 multi-GPU jobs at 6 jobs/h): ``--variant gavel_solve`` writes its own
    files, and its aware row's window JCTs equal a run of the simulator with the benchmark's ``interior``
    solve written out here."""
    from policyopt.sim import experiments as ex
    from policyopt.sim.simulator import SimConfig, Simulator

    args = ["las_multi", "--scale", "published", "--jobs", "15", "--rates", "6", "--seeds", "0",
            "--variant", "gavel_solve", "--output", str(tmp_path)]
    assert ex.main(args) == 0
    df = pd.read_csv(tmp_path / "las_multi_published_gavel_solve.csv")
    assert list(df["arm"]) == ["aware", "agnostic"]
    summary = json.loads((tmp_path / "las_multi_published_gavel_solve.json").read_text())
    assert summary["command"].endswith("--seeds 0 --scale published --jobs 15 --rates 6.0 --variant gavel_solve")
    assert summary["arm_configs"]["aware"]["policy_options"] == _interior_options()
    assert not (tmp_path / "las_multi_published.csv").exists()
    (tmp_path / "las_multi_published_gavel_solve_bars.png").unlink()
    assert ex.main(["las_multi", "--replot", "--scale", "published", "--variant", "gavel_solve",
                    "--output", str(tmp_path)]) == 0
    assert (tmp_path / "las_multi_published_gavel_solve_bars.png").exists()

    exp = ex.scaled(ex.EXPERIMENTS["las_multi"], "published", jobs=15, rates=[6.0], variant="gavel_solve")
    _, keep = ex._run_one((exp, 0, 6.0, 0))
    cfg = SimConfig(policy="max_min_fairness", policy_options=_interior_options(), seed=0,
                    window=exp.common["window"], until="window", gpus_per_server=36, migration="none",
                    keep_types=False, checkpoint_seconds=0.0, restore_seconds=0.0, recompute_interval=1920.0)
    ref = Simulator(exp.cluster, cfg, gavel).run(ex._make_trace(exp, 0, 6.0, gavel))
    jct = ref.jobs.loc[ref.jobs["in_window"], "jct"].to_numpy(float)
    assert len(jct) == len(keep["jct"]) > 0
    np.testing.assert_allclose(keep["jct"], jct, rtol=1e-12)
    assert df["avg_jct_hours"].iloc[0] == pytest.approx(float(np.mean(jct)) / 3600, rel=1e-12)
