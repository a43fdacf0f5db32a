"""Rubick's own performance model, run from its repository, on the same 99 validation points.

Used by ``benchmarks/perfmodel_rubick.py --rubick-repo PATH``: the peer's code
(``sched/morphling_sched/pred_throughput.py``, which needs the ``autograd`` package) is loaded
from the path the user gives; nothing of it is copied here. Its fit (``fit_perf_params``) and
predictions (``ThroughputFunction.throughput`` / ``throughput_3D``) run on the validation points
of the converted copy (``benchmarks/data/rubick``) under three protocols:

* ``published``: exactly what the artifact's validation scripts do. Each model is fitted on its
  own ``profile/<model>`` rows (read with the artifact's convention: rows keyed by their
  configuration, a later duplicate replacing an earlier one) with the script's ``ENV_PARAMS``;
  the two LLaMA scripts predict with the parameters of ``profile/history.csv`` instead
  (``validate(..., history_data=True)``); every point gets the forward-time argument the script
  passes. For 47 of the 99 points that is a per-plan measured forward rather than one derived
  from the samples (all 31 TP/PP points, bert's 12 data-parallel points on 2–8 GPUs, roberta's 3
  one-GPU points, one gpt2 point), and for llama7b's 4 ZeRO-Offload+GC points it is 3 ms/g
  (the script's ``profile_fwd_time``, against about 3 s measured in its samples).
* ``fitted LLaMA``: as ``published``, but the LLaMA models predict with the parameters fitted on
  their own samples (what "fitted on the samples" means for them).
* ``samples only``: as ``fitted LLaMA``, and every forward-time argument is the one the samples
  give, the same forward our model is given (``fwd_time_1gpu`` F of
  :meth:`policyopt.perfmodel.rubick.RubickData.fwd_time_1gpu`): ``F/(g·α_b)`` for a
  data-parallel call (one GPU's share of one GA step, the convention of the scripts' own
  data-parallel points, e.g. gpt2 ZeRO-DP+GA: 1100/(1·8) = 137.5 ms) and ``F/(d·t)`` for a
  TP/PP call (d = nodes·gpus_per_node/(t·p); with one micro-batch the p stages run in turn).
  This is the protocol the issue sets for our model: fitted on the samples only.
"""
from __future__ import annotations

import ast
import csv
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pandas as pd

from policyopt.errors import InputError
from policyopt.perfmodel.rubick import RUBICK_MODELS, RubickData

_MODEL_DIR = "artifact/71_performance_model/model"
_PEER_MODULE = "sched/morphling_sched/pred_throughput.py"
PROTOCOLS = ("published", "fitted LLaMA", "samples only")


def load_peer(repo: Path) -> ModuleType:
    """Import the peer's ``pred_throughput`` module from its repository (needs autograd)."""
    path = repo / _PEER_MODULE
    if not path.is_file():
        raise InputError("rubick_repo", str(repo), f"no {_PEER_MODULE} in it")
    if importlib.util.find_spec("autograd") is None:
        raise InputError("rubick_repo", str(repo),
                         "its model imports the autograd package: pip install autograd")
    spec = importlib.util.spec_from_file_location("rubick_pred_throughput", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def script_settings(repo: Path, model: str) -> dict[str, Any]:
    """ENV_PARAMS, the profile folder and whether ``validate`` defaults to history.csv."""
    tree = ast.parse((repo / _MODEL_DIR / f"{RUBICK_MODELS[model]}.py").read_text())
    out: dict[str, Any] = {"history": None}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            name, value = stmt.targets[0].id, stmt.value
            if name == "ENV_PARAMS" and isinstance(value, ast.Call):
                out["env"] = tuple(float(ast.literal_eval(a)) for a in value.args)
            elif name == "BASE_DIR":
                out["profile"] = str(ast.literal_eval(value)).strip("./").rstrip("/")
        if isinstance(stmt, ast.FunctionDef) and stmt.name == "validate":
            names = [a.arg for a in stmt.args.args][-len(stmt.args.defaults):]
            defaults = dict(zip(names, (ast.literal_eval(d) for d in stmt.args.defaults)))
            if defaults.get("history_data"):
                # t5's script defaults to True but never reads the file
                call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call)
                             and isinstance(n.func, ast.Name)
                             and n.func.id == "load_perf_params_from_csv"), None)
                if call is not None:
                    out["history"] = str(ast.literal_eval(call.args[1]))
    if "env" not in out or "profile" not in out:
        raise InputError(f"rubick_repo.{RUBICK_MODELS[model]}", "ENV_PARAMS/BASE_DIR", "not found")
    return out


def _profile(repo: Path, folder: str) -> dict[tuple, tuple]:
    """The artifact's profile rows as its loader keys them (a later duplicate key wins)."""
    base = repo / _MODEL_DIR / folder
    with open(base / "config.csv", encoding="utf-8-sig") as f:
        configs = list(csv.DictReader(f))
    with open(base / "data.csv", encoding="utf-8-sig") as f:
        data = list(csv.DictReader(f))
    rows: dict[tuple, tuple] = {}
    for c, d in zip(configs, data):
        key = (int(c["nodes"]), int(c["gpus"]), float(c["parameter_size"]), int(c["batch_size"]),
               int(c["seq_hid"]), int(c["num_cpu_threads"]), int(c["zero_type"]),
               int(c["is_tp"]), int(c["is_pp"]))
        rows[key] = (int(d["forward_time"]), int(d["Tcc"]), int(d["Topt"]), int(d["iter_time"]),
                     [int(x) for x in d["strategy"]])
    return rows


def fit_peer(peer: ModuleType, repo: Path, folder: str, env: tuple[float, ...]) -> tuple:
    """The peer's fitted parameters for one profile folder, as its validation scripts call it."""
    prof = _profile(repo, folder)
    keys, vals = list(prof), list(prof.values())
    col = [np.array([k[i] for k in keys]) for i in range(9)]
    val = [np.array([v[i] for v in vals]) for i in range(4)]
    with np.errstate(all="ignore"):
        return tuple(peer.fit_perf_params(col[0], col[1], col[2], col[3], val[0], val[1], val[2],
                                          val[3], col[4], col[5], col[6], col[7], col[8],
                                          np.array([v[4] for v in vals]), peer.EnvParams(*env)))


def _history(repo: Path, name: str) -> tuple:
    table = pd.read_csv(repo / _MODEL_DIR / "profile" / "history.csv", encoding="utf-8-sig")
    row = table[table["model"].str.strip().str.lower() == name.strip().lower()]
    if row.empty:
        raise InputError("rubick_repo.history.csv", name, "model not found")
    return tuple(float(row.iloc[0][k]) for k in
                 ("k_bwd", "k_sync", "k_opt", "k_os_offload", "k_const", "k_off", "k_swap"))


def samples_forward(point: pd.Series, f_ms: float) -> float:
    """The forward-time argument the samples give a point (see the module docstring)."""
    args = point["args"]
    if point["call"] == "throughput":
        return f_ms / (float(args[2]) * float(point["strategy"][1]))
    _, _, pp, tp, nodes, per_node = args[:6]
    dp = (nodes * per_node) // (tp * pp)
    return f_ms / (dp * tp)


def peer_predictions(repo: Path, data: RubickData) -> pd.DataFrame:
    """Per validation point (``data.points`` order): the peer's predicted iteration time, in s,
    under each of :data:`PROTOCOLS`; columns ``model``, ``plan``, ``actual`` and one per protocol.
    """
    peer = load_peer(repo)
    points = data.points
    settings = {m: script_settings(repo, m) for m in data.specs}
    fitted = {m: fit_peer(peer, repo, s["profile"], s["env"]) for m, s in settings.items()}
    out = {p: np.full(len(points), np.nan) for p in PROTOCOLS}
    for i, pt in points.iterrows():
        m = str(pt["model"])
        s = settings[m]
        f_ms = data.fwd_time_1gpu(m)[0] * 1e3
        for protocol in PROTOCOLS:
            params = (_history(repo, s["history"]) if protocol == "published" and s["history"]
                      else fitted[m])
            fn = peer.ThroughputFunction(params, s["env"])
            args = list(pt["args"])
            if protocol == "samples only":
                args[1] = samples_forward(pt, f_ms)
            with np.errstate(all="ignore"):
                if pt["call"] == "throughput":
                    ms = fn.throughput(*args, peer.StrategyParams(*pt["strategy"]), True)
                else:
                    ps, fwd, pp, tp, nodes, per_node, batch, sh, layers = args
                    ms = fn.throughput_3D(ps, fwd, int(pp), int(tp), int(nodes), int(per_node),
                                          int(batch), int(sh), int(layers), True)
            out[protocol][i] = float(ms) / 1e3
    return pd.DataFrame({"model": points["model"], "plan": points["plan"],
                         "actual": points["actual_ms"] / 1e3, **out})
