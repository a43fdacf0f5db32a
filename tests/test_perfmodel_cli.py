"""`perf-model fit` / `perf-model predict` round trip through argparse and CSV/JSON files."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policyopt.errors import InputError
from policyopt.perfmodel import CONFIG_COLUMNS, SAMPLE_COLUMNS, load_params, predict_iter_time
from policyopt.perfmodel.cli import add_subparser, main
from policyopt.perfmodel.synthetic import run_experiment


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="policyopt")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


def test_fit_predict_round_trip(tmp_path: Path) -> None:
    small, big = run_experiment("gpt-86m", 0), run_experiment("gpt-13b", 1)
    samples = pd.concat([small.train, big.train], ignore_index=True)[list(SAMPLE_COLUMNS)]
    samples.to_csv(tmp_path / "samples.csv", index=False)
    configs = pd.concat([small.test, big.test], ignore_index=True)[list(CONFIG_COLUMNS)]
    configs["note"] = "extra columns are kept"
    configs.to_csv(tmp_path / "configs.csv", index=False)

    assert _run(["perf-model", "fit", "--samples", str(tmp_path / "samples.csv"),
                 "--output", str(tmp_path / "params.json"), "--starts", "4"]) == 0
    doc = json.loads((tmp_path / "params.json").read_text())
    assert set(doc["models"]) == {"gpt-86m", "gpt-13b"}
    assert doc["models"]["gpt-13b"]["fit"]["n_samples"] == 7
    params = load_params(tmp_path / "params.json")

    assert _run(["perf-model", "predict", "--params", str(tmp_path / "params.json"),
                 "--configs", str(tmp_path / "configs.csv"),
                 "--output", str(tmp_path / "pred.csv")]) == 0
    pred = pd.read_csv(tmp_path / "pred.csv", keep_default_na=False)
    assert list(pred.columns) == list(configs.columns) + ["pred_iter_time"]
    assert (pred["zero"].isin(["none", "dp", "offload"])).all()
    np.testing.assert_allclose(pred["pred_iter_time"], predict_iter_time(configs, params),
                               rtol=1e-8)
    observed = pd.concat([small.test, big.test], ignore_index=True)["iter_time"]
    err = np.abs(pred["pred_iter_time"] / observed - 1)
    assert err.mean() < 0.05 and err.max() < 0.10


def test_bad_input_is_one_line_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = run_experiment("gpt-86m", 2).train[list(SAMPLE_COLUMNS)]
    train = good.copy()
    train.loc[3, "dp"] = 5  # d·t·p ≠ gpus
    train.to_csv(tmp_path / "bad.csv", index=False)
    code = main(["perf-model", "fit", "--samples", str(tmp_path / "bad.csv"),
                 "--output", str(tmp_path / "p.json")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err and "samples[3].dp" in err and "5" in err
    assert not (tmp_path / "p.json").exists()
    with pytest.raises(InputError) as exc:
        _run(["perf-model", "predict", "--params", str(tmp_path / "missing.json"),
              "--configs", str(tmp_path / "bad.csv"), "--output", str(tmp_path / "o.csv")])
    assert exc.value.field == "params_file"
    # fewer samples than parameters
    good.iloc[:5].to_csv(tmp_path / "few.csv", index=False)
    with pytest.raises(InputError, match="at least 7 samples"):
        _run(["perf-model", "fit", "--samples", str(tmp_path / "few.csv"),
              "--output", str(tmp_path / "p.json")])


def test_predict_profiled_runs_set_fwd_scale_on_model_parallel_rows(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`predict --profiled RUNS.csv`: a model-parallel run measured 3x slower in the forward than
    the samples' engine gives its model fwd_scale 3 on its tp·pp > 1 rows (not on data-parallel
    rows, nor where fwd_scale is given); a data-parallel run is refused."""
    exp = run_experiment("gpt-1.3b", 0)
    exp.train[list(SAMPLE_COLUMNS)].to_csv(tmp_path / "samples.csv", index=False)
    assert _run(["perf-model", "fit", "--samples", str(tmp_path / "samples.csv"),
                 "--output", str(tmp_path / "params.json"), "--starts", "2"]) == 0
    params = load_params(tmp_path / "params.json")
    configs = exp.test[list(CONFIG_COLUMNS)].reset_index(drop=True)
    mp = (configs["tp"] * configs["pp"] > 1).to_numpy()
    assert mp.any() and (~mp).any()
    run = configs[mp].head(1).reset_index(drop=True)
    run["iter_time"] = predict_iter_time(run.assign(fwd_scale=3.0), params)
    run.to_csv(tmp_path / "runs.csv", index=False)
    configs["fwd_scale"] = ""
    given = int(np.flatnonzero(mp)[-1])
    configs.loc[given, "fwd_scale"] = "1.5"
    configs.to_csv(tmp_path / "configs.csv", index=False)
    assert _run(["perf-model", "predict", "--params", str(tmp_path / "params.json"),
                 "--configs", str(tmp_path / "configs.csv"), "--profiled",
                 str(tmp_path / "runs.csv"), "--output", str(tmp_path / "pred.csv")]) == 0
    assert "gpt-1.3b: fwd_scale 3 from its profiled runs" in capsys.readouterr().out
    pred = pd.read_csv(tmp_path / "pred.csv")
    want = np.where(mp, 3.0, np.nan)
    want[given] = 1.5
    np.testing.assert_allclose(pred["fwd_scale"], want, rtol=1e-6)
    np.testing.assert_allclose(pred["pred_iter_time"],
                               predict_iter_time(configs.assign(fwd_scale=want), params), rtol=1e-8)
    configs[~mp].head(1).assign(iter_time=1.0).to_csv(tmp_path / "dp.csv", index=False)
    with pytest.raises(InputError, match=r"profiled\[0\]\.tp.*model-parallel"):
        _run(["perf-model", "predict", "--params", str(tmp_path / "params.json"),
              "--configs", str(tmp_path / "configs.csv"), "--profiled", str(tmp_path / "dp.csv"),
              "--output", str(tmp_path / "pred2.csv")])
