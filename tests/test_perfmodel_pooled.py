"""Pooled fit across models (`perf-model fit --pool/--fix`): shared truths, 3-sample models."""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from policyopt.errors import InputError, UnknownNameError
from policyopt.perfmodel import SAMPLE_COLUMNS, predict_iter_time
from policyopt.perfmodel.cli import add_subparser
from policyopt.perfmodel.design import design_samples
from policyopt.perfmodel.params import PerfParams
from policyopt.perfmodel.pooled import fit_pooled, parse_assignments
from policyopt.perfmodel.synthetic import NOMINAL_PARAMS, feasible_pool, simulate_runs, SHAPES

SHARED = ("k_opt", "k_opt_off", "k_off", "k_swap", "k_sync")


def _run(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="policyopt")
    add_subparser(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    return args.func(args)


@pytest.fixture(scope="module")
def runs():
    """Two models on one cluster with the same hardware parameters and their own k_bwd/k_const:
    the big one with 9 samples (3 offload), the small one with 3 samples (1 offload)."""
    rng = np.random.default_rng(3)
    truths = {"gpt-1.3b": PerfParams(**{**NOMINAL_PARAMS.to_dict(), "k_bwd": 2.3,
                                        "k_const": 0.03}),
              "gpt-86m": PerfParams(**{**NOMINAL_PARAMS.to_dict(), "k_bwd": 1.7,
                                       "k_const": 0.01})}
    train, test = [], []
    for (name, truth), (n, n_off) in zip(truths.items(), ((9, 3), (3, 1))):
        pool = feasible_pool(SHAPES[name])
        idx = design_samples(pool, NOMINAL_PARAMS, n=n, n_offload=n_off, noise=0.01)
        rest = np.setdiff1d(np.arange(len(pool)), idx)
        held = rng.choice(rest, 15, replace=False)
        sim = simulate_runs(pool.iloc[np.concatenate([idx, held])], truth, rng, noise=0.01)
        train.append(sim.iloc[:n])
        test.append(sim.iloc[n:])
    return truths, pd.concat(train, ignore_index=True), pd.concat(test, ignore_index=True)


def test_three_samples_fit_with_pooled_hardware(runs) -> None:
    truths, train, test = runs
    fit = fit_pooled(train[list(SAMPLE_COLUMNS)], SHARED, n_starts=4)
    assert fit.n_samples == {"gpt-1.3b": 9, "gpt-86m": 3}
    assert fit.pooled == SHARED and fit.info("gpt-86m")["pooled"] == list(SHARED)
    for name in SHARED:  # one value for both models
        assert getattr(fit.params["gpt-86m"], name) == getattr(fit.params["gpt-1.3b"], name)
    small = test[test["model"] == "gpt-86m"]
    err = np.abs(predict_iter_time(small, fit.params) / small["true_iter_time"] - 1)
    assert err.mean() < 0.05, err
    assert fit.params["gpt-86m"].k_bwd == pytest.approx(1.7, rel=0.15)


def test_too_little_information_names_what_is_missing(runs) -> None:
    _, train, _ = runs
    small = train[train["model"] == "gpt-86m"]
    # Per model: 3 samples cannot fit 7 parameters.
    with pytest.raises(InputError, match="at least 7 samples"):
        from policyopt.perfmodel.fit import fit_model
        fit_model(small)
    # Pooled, but 4 parameters left to the 3-sample model.
    with pytest.raises(InputError, match=r"samples\(model=gpt-86m\).*need at least 4 samples"):
        fit_pooled(train, ("k_opt_off",), fixed={"k_off": 2.0, "k_sync": 3.0})
    no_off = train[train["zero"] != "offload"]
    with pytest.raises(InputError, match="k_opt_off.*zero = offload.*--pool k_opt_off"):
        fit_pooled(no_off, ("k_opt", "k_sync", "k_bwd", "k_const"), fixed={"k_off": 1.0,
                                                                          "k_swap": 1.0})
    with pytest.raises(InputError, match="no sample of any model depends on it"):
        fit_pooled(no_off, ("k_opt_off", "k_opt"))
    with pytest.raises(InputError, match="pool it or fix it, not both"):
        fit_pooled(train, ("k_opt",), fixed={"k_opt": 1e-11})
    with pytest.raises(UnknownNameError):
        fit_pooled(train, ("k_nope",))
    with pytest.raises(InputError, match="NAME=VALUE"):
        parse_assignments("k_off")


def test_cli_pooled_mode_reports_and_declares(runs, tmp_path: Path, capsys) -> None:
    _, train, _ = runs
    train[list(SAMPLE_COLUMNS)].to_csv(tmp_path / "samples.csv", index=False)
    assert _run(["perf-model", "fit", "--samples", str(tmp_path / "samples.csv"),
                 "--output", str(tmp_path / "params.json"), "--starts", "2",
                 "--pool", "k_opt,k_opt_off,k_swap,k_sync", "--fix", "k_off=2"]) == 0
    out = capsys.readouterr().out
    assert "pooled k_opt, k_opt_off, k_swap, k_sync" in out and "fixed k_off=2" in out
    doc = json.loads((tmp_path / "params.json").read_text())
    info = doc["models"]["gpt-86m"]["fit"]
    assert info["mode"] == "pooled" and info["fixed"] == {"k_off": 2.0}
    assert info["pooled"] == ["k_opt", "k_opt_off", "k_swap", "k_sync"]
    assert doc["models"]["gpt-86m"]["params"]["k_off"] == 2.0
    # per-model mode with --fix: declared too
    big = train[train["model"] == "gpt-1.3b"]
    big[list(SAMPLE_COLUMNS)].to_csv(tmp_path / "big.csv", index=False)
    assert _run(["perf-model", "fit", "--samples", str(tmp_path / "big.csv"),
                 "--output", str(tmp_path / "p2.json"), "--starts", "2", "--fix",
                 "k_swap=1.5"]) == 0
    doc = json.loads((tmp_path / "p2.json").read_text())
    assert doc["models"]["gpt-1.3b"]["fit"]["fixed"] == {"k_swap": 1.5}
    assert doc["models"]["gpt-1.3b"]["params"]["k_swap"] == 1.5
