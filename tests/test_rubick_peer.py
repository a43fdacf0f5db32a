"""benchmarks/rubick_peer.py: running Rubick's own model from its repository."""
from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

from policyopt.errors import InputError
from policyopt.perfmodel.rubick import load_rubick

ROOT = Path(__file__).resolve().parents[1]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("rubick_peer", ROOT / "benchmarks" / "rubick_peer.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def data():
    return load_rubick(ROOT / "benchmarks" / "data" / "rubick")


def test_samples_forward_is_the_scripts_own_rule_where_they_derive_it(data) -> None:
    """F/(g·α_b) and F/(d·t) reproduce every forward argument the validation scripts derive
    from their profiled forward; the 51 others are per-plan inputs (47 measured, llama7b's 4
    offload points at 3 ms/g)."""
    peer = _bench()
    differ: dict[tuple[str, str], int] = {}
    for _, pt in data.points.iterrows():
        f_ms = data.fwd_time_1gpu(str(pt["model"]))[0] * 1e3
        if not np.isclose(peer.samples_forward(pt, f_ms), pt["args"][1], rtol=1e-9):
            key = (str(pt["model"]), str(pt["call"]))
            differ[key] = differ.get(key, 0) + 1
    assert differ == {("bert", "throughput"): 12, ("roberta", "throughput"): 3,
                      ("gpt2", "throughput"): 1, ("llama7b", "throughput"): 4,
                      ("t5", "throughput_3D"): 8, ("gpt2", "throughput_3D"): 8,
                      ("llama7b", "throughput_3D"): 9, ("llama30b", "throughput_3D"): 6}
    # a hand case: t5's (pp 8, tp 2) plan on 16 GPUs has d = 1: F/(1·2) = 338/2 ms
    t5 = data.points[(data.points["model"] == "t5") & (data.points["call"] == "throughput_3D")]
    pt = next(p for _, p in t5.iterrows() if p["args"][3] == 2)
    assert peer.samples_forward(pt, 338.0) == pytest.approx(169.0)


def _fake_repo(root: Path, body: str) -> Path:
    folder = root / "artifact" / "71_performance_model" / "model"
    folder.mkdir(parents=True)
    for script in ("validate_vit", "validation_t5", "validate_llama7B"):
        (folder / f"{script}.py").write_text(body.replace("NAME", script))
    return root


def test_script_settings_read_env_profile_and_history(tmp_path: Path) -> None:
    peer = _bench()
    repo = _fake_repo(tmp_path, 'BASE_DIR = "./profile/x/"\nENV_PARAMS = tp.EnvParams(64, 34.5)\n'
                                "def validate(p, history_data=True):\n"
                                "    if history_data:\n"
                                '        q = load_perf_params_from_csv(H, "llama7B")\n')
    got = peer.script_settings(repo, "llama7b")
    assert got == {"history": "llama7B", "env": (64.0, 34.5), "profile": "profile/x"}
    # t5's script defaults history_data to True but never reads the file
    (repo / "artifact/71_performance_model/model/validation_t5.py").write_text(
        'BASE_DIR = "./profile/t5/"\nENV_PARAMS = tp.EnvParams(64.0, 88.5)\n'
        "def validate(p, history_data=True):\n    return p\n")
    assert peer.script_settings(repo, "t5")["history"] is None
    (repo / "artifact/71_performance_model/model/validate_vit.py").write_text("X = 1\n")
    with pytest.raises(InputError, match="ENV_PARAMS"):
        peer.script_settings(repo, "vit")


def test_missing_peer_module_is_named(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="rubick_repo.*pred_throughput.py"):
        _bench().load_peer(tmp_path)


@pytest.mark.skipif(not os.environ.get("POLICYOPT_RUBICK_REPO")
                    or importlib.util.find_spec("autograd") is None,
                    reason="needs POLICYOPT_RUBICK_REPO (a checkout of Rubick's repository) and autograd")
def test_published_protocol_reproduces_the_reported_errors(data) -> None:
    peer = _bench()
    pred = peer.peer_predictions(Path(os.environ["POLICYOPT_RUBICK_REPO"]), data)
    err = (np.abs(pred["published"] / pred["actual"] - 1) * 100).groupby(
        [pred["model"], pred["plan"]]).agg(["mean", "max"])
    rep = data.reported.set_index(["model", "plan"])
    joined = err.join(rep, how="inner")
    assert len(joined) == 22
    assert np.allclose(joined["mean"], joined["reported_mean_pct"], atol=0.06)
    assert np.allclose(joined["max"], joined["reported_max_pct"], atol=0.06)
    # on the samples only, the same model is far off on the TP/PP plans of t5
    t5 = pred[(pred["model"] == "t5") & pred["plan"].str.contains("TP")]
    assert (np.abs(t5["samples only"] / t5["actual"] - 1) > 0.4).all()
