"""``policyopt bench suite``: fixed instances, agreement, shifted geometric means, performance profiles."""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policyopt.bench.suite import (
    FAMILIES,
    SuiteConfig,
    build_instance,
    performance_profile,
    run_suite,
    shifted_geomean,
    summarize_suite,
)
from policyopt.errors import InputError


def test_instances_are_fixed_and_distinct(gavel) -> None:
    a, b = build_instance("las", 256), build_instance("las", 256)
    assert a.sha256 == b.sha256 and a.sf.num_cols == b.sf.num_cols
    c = build_instance("max_sum", 256)
    assert c.sha256 != a.sha256
    h = build_instance("hierarchical", 256)
    assert h.stage == FAMILIES["hierarchical"].stage  # a later level LP of the water-filling
    assert build_instance("wf_milp", 256).sf.is_mip


def test_shifted_geomean_and_profile_by_hand() -> None:
    assert shifted_geomean(np.array([0.0, 10.0]), 10.0) == pytest.approx(math.sqrt(10 * 20) - 10)
    assert shifted_geomean(np.array([2.0, 2.0]), 1.0) == pytest.approx(2.0)
    runs = pd.DataFrame({"instance": ["p", "p", "q", "q"], "backend": ["a", "b", "a", "b"],
                         "seconds": [1.0, 3.0, 4.0, 2.0], "solved": [True, True, True, False],
                         "mip": [False] * 4, "status": ["optimal"] * 4})
    ratios, taus = performance_profile(runs)
    assert ratios.loc["p", "a"] == 1.0 and ratios.loc["p", "b"] == 3.0
    assert ratios.loc["q", "a"] == 1.0 and np.isinf(ratios.loc["q", "b"])
    assert list(taus) == [1.0, 3.0]
    summ = summarize_suite(runs, time_limit=10.0, shift=10.0).set_index("backend")
    assert summ.loc["a", "lp_solved"] == "2/2" and summ.loc["b", "lp_solved"] == "1/2"
    # unsolved counts as the time limit
    assert summ.loc["b", "lp_sgm_s"] == pytest.approx(shifted_geomean(np.array([3.0, 10.0]), 10.0))
    assert summ.loc["a", "lp_sgm_vs_best"] == 1.0 and summ.loc["a", "milp_solved"] == "0/0"


def test_run_suite_agrees_and_skips_unsupported(gavel) -> None:
    cfg = SuiteConfig(families=["las", "space_sharing", "wf_milp_last"], sizes=[256],
                      backends=["highs", "clarabel"], time_limit=20.0)  # generous: CI machines are loaded
    instances, runs = run_suite(cfg)
    assert len(instances) == 3
    lp = runs[~runs["mip"]]
    assert lp["solved"].all() and (lp["rel_diff"] <= 1e-6).all()
    milp = runs[runs["mip"]]
    assert set(milp["backend"]) == {"highs"}  # Clarabel is LP-only: not tried on the MILP
    # the last bottleneck MILP is solved within the limit, so the MILP performance profile has a point
    assert milp["solved"].all()
    ratios, taus = performance_profile(milp)
    assert np.isfinite(ratios.to_numpy()).all() and list(taus) == [1.0]


def test_cli_writes_table_and_profile(gavel, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from policyopt.cli import main

    out = tmp_path / "suite"
    assert main(["bench", "suite", "--output", str(out), "--sizes", "256", "--policies", "max_sum", "makespan",
                 "--backends", "highs", "clarabel", "--time-limit", "10"]) == 0
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["backend"]) == {"highs", "clarabel"} and (summary["lp_solved"] == "2/2").all()
    assert (out / "profile.png").stat().st_size > 0 and "| backend |" in (out / "summary.md").read_text()
    meta = json.loads((out / "suite.json").read_text())
    assert meta["suite_version"] == "2" and meta["sizes"] == [256]
    assert main(["bench", "suite", "--output", str(out), "--sizes", "300"]) == 2
    assert "--sizes" in capsys.readouterr().err
    assert main(["bench", "suite", "--output", str(out), "--policies", "nope"]) == 2
    with pytest.raises(InputError):
        SuiteConfig(time_limit=0).check()
