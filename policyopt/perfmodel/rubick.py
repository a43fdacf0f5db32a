r"""Rubick's published A800 measurements as sample / configuration tables.

Rubick's artifact (``AlibabaPAI/reconfigurable-dl-scheduler``, Apache-2.0,
``artifact/71_performance_model``) holds, per model, profiling samples
(``model/profile/<model>/config.csv`` + ``data.csv``, rows paired by position) and validation
scripts whose ``actual_result`` lists are measured iteration times of execution plans.
:func:`convert_artifact` turns those files into the converted copy kept in
``benchmarks/data/rubick/`` (``samples.csv``, ``validation.json``, ``reported.csv``);
:func:`load_rubick` reads the copy back and :func:`samples_table` / :func:`configs_table` map it
onto the columns of docs/perf-model.md.

Conventions of the artifact (read from its code): times in ms; ``parameter_size`` in MiB of
parameter *count* (count / 2^20); ``seq_hid`` = hidden·seq·layers; a validation call
``throughput(ps, fwd, g, b, threads, bw, seq_hid, StrategyParams(α_f, α_b, α_c, tp, pp, zero))``
predicts ``α_f·fwd + (α_b − 1)·k_bwd·fwd + …`` with ``fwd`` the forward time of one micro-step on
one GPU, so α_b is the GA step count a and α_f = a·(1 + gc) (GC recomputes each forward);
``zero``: 0 = none, 1 = ZeRO-Offload, 2 = ZeRO-DP. ``throughput_3D(ps, fwd, pp, tp, nodes,
gpus_per_node, batch, hidden·seq, layers)`` is a plan with dp = nodes·gpus_per_node/(tp·pp).

Mapping onto our table: ``params`` = PARAMETER_SIZE·2^20, (hidden, seq, layers) from the factors
of ``SEQ_HID``, ``global_batch`` = BATCH_SIZE, ``fwd_time_1gpu`` = the script's
``profile_fwd_time`` (ms → s) where it states one within a factor 2 of the samples (llama7b's
script states 3 ms against ~3000 ms measured), else the median of ``forward_time·gpus`` over
the model's samples; plans as above with ``micro_batches`` = 1 (the artifact states no
micro-batch count; its measured times do not fall with pp, as with one micro-batch);
``cpus`` = threads per GPU; samples of ``llama30b`` are the artifact's copy of the ``llama7b``
rows and keep the LLaMA-7B spec (its forward time scaled for LLaMA-30B by the ratio of forward
FLOPs ``b·s·(2P + 4·l·s·h)``: weights plus attention scores, with the script's shape);
``nodes`` = ⌈g/8⌉ (throughput) or the node count (3D); bandwidths :data:`A800_BANDWIDTH`
(bytes/s) are what one GPU gets from the testbed's nominal figures (400 GB/s NVLink, 100 GB/s
RDMA per node, PCIe 4.0): NVLink's 400 GB/s counts both directions, so 200 GB/s per direction at
about 75% all-reduce efficiency = 150 GB/s; the node's 100 GB/s of RDMA is shared by its 8 GPUs
when a whole node communicates = 12.5 GB/s per GPU; a PCIe 4.0 x16 uplink (about 25 GB/s)
shared by the two GPUs of a PCIe switch during offload = 12 GB/s (the same figures as the
``a100`` node type of :mod:`policyopt.reconfig.examples`).
"""
from __future__ import annotations

import ast
import json
import math
import re
from pathlib import Path
from typing import Any, Callable, Mapping

import numpy as np
import pandas as pd

from policyopt.errors import InputError

__all__ = ["RUBICK_MODELS", "A800_BANDWIDTH", "GPUS_PER_NODE", "ELEMENT_BYTES", "convert_artifact",
           "load_rubick", "samples_table", "configs_table", "RubickData"]

#: Model folder name -> validation script (without ``.py``) in ``artifact/71_performance_model/model``.
RUBICK_MODELS: dict[str, str] = {
    "vit": "validate_vit", "roberta": "validate_roberta", "bert": "validate_bert",
    "t5": "validation_t5", "gpt2": "validate_gpt", "llama7b": "validate_llama7B",
    "llama30b": "validate_llama30B",
}
#: Per-GPU bandwidths of the 8 × 8 A800 cluster, bytes/s: NVLink, RDMA, PCIe (see the module
#: docstring for how they follow from the nominal 400 GB/s, 100 GB/s per node and PCIe 4.0).
A800_BANDWIDTH: dict[str, float] = {"bw_intra": 150e9, "bw_inter": 12.5e9, "bw_pcie": 12e9}
GPUS_PER_NODE = 8
#: Bytes per communicated / offloaded element (``bytes_per_param``) of every Rubick model: the
#: artifact trains in fp32. Its job files (``benchmark/models/<model>/morphlingjob.yaml``) run
#: Megatron-LM (bert, gpt2, t5) without ``--fp16`` / ``--bf16`` and Hugging Face scripts (vit,
#: roberta) without ``--fp16``; its DeepSpeed configs set ``"fp16": {"enabled": false}``; and
#: Rubick's own formula counts 4-byte elements for the gradient and TP traffic. The LLaMA job
#: files state no command; 4 is kept for them too (Megatron-LM all-reduces fp32 gradient
#: buffers also under bf16, where it forces ``accumulate_allreduce_grads_in_fp32``).
ELEMENT_BYTES = 4.0
_ZERO = {0: "none", 1: "offload", 2: "dp"}
_MODEL_DIR = "artifact/71_performance_model/model"


# --------------------------------------------------------------------------- conversion

def _eval(node: ast.AST, env: Mapping[str, float]) -> float:
    """Value of a numeric expression of constants, names in ``env`` and + − · /."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return float(node.value)
    if isinstance(node, ast.Name) and node.id in env:
        return float(env[node.id])
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, env)
    if isinstance(node, ast.BinOp):
        ops: dict[type, Callable[[float, float], float]] = {
            ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y,
            ast.Mult: lambda x, y: x * y, ast.Div: lambda x, y: x / y,
            ast.FloorDiv: lambda x, y: x // y}
        if type(node.op) in ops:
            return ops[type(node.op)](_eval(node.left, env), _eval(node.right, env))
    raise InputError("rubick.script", ast.unparse(node), "not a numeric expression")


def _factors(node: ast.AST) -> list[int]:
    """The integer factors of a product expression such as ``1024 * 512 * 24``."""
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return [node.value]
    raise InputError("rubick.SEQ_HID", ast.unparse(node), "not a product of integers")


def _call_name(node: ast.AST) -> str | None:
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        return node.func.attr
    return None


def _parse_script(source: str, model: str) -> dict[str, Any]:
    """Constants and validation points of one validation script (by walking its AST)."""
    tree = ast.parse(source)
    env: dict[str, float] = {}
    spec: dict[str, Any] = {"model": model}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
            name = stmt.targets[0].id
            if name == "SEQ_HID":
                spec["hidden"], spec["seq_len"], spec["layers"] = _factors(stmt.value)
            if name in ("PARAMETER_SIZE", "BATCH_SIZE", "SEQ_HID"):
                env[name] = _eval(stmt.value, env)
    spec["parameter_size_mib"] = env["PARAMETER_SIZE"]
    spec["batch_size"] = int(env["BATCH_SIZE"])
    validate = next(f for f in tree.body if isinstance(f, ast.FunctionDef) and f.name == "validate")
    points: list[dict[str, Any]] = []
    calls: dict[str, dict[str, Any]] = {}
    strategy: tuple[float, ...] | None = None
    order: list[str] = []
    pending: list[dict[str, Any]] = []
    for stmt in validate.body:
        if not isinstance(stmt, ast.Assign):
            continue
        target = stmt.targets[0]
        value = stmt.value
        if isinstance(target, ast.Name):
            kind = _call_name(value)
            if target.id == "profile_fwd_time":
                env["profile_fwd_time"] = _eval(value, env)
                spec["profile_fwd_time_ms"] = env["profile_fwd_time"]
            elif kind == "StrategyParams":
                assert isinstance(value, ast.Call)
                strategy = tuple(_eval(a, env) for a in value.args)
            elif kind in ("throughput", "throughput_3D"):
                assert isinstance(value, ast.Call)
                args = [_eval(a, env) for a in value.args[:-1] if not
                        (isinstance(a, ast.Name) and a.id == "stParams")]
                calls[target.id] = {"call": kind, "args": args,
                                    "strategy": strategy if kind == "throughput" else None}
            elif target.id == "predict_result":
                assert isinstance(value, ast.List)
                order = [e.id for e in value.elts if isinstance(e, ast.Name)]
            elif target.id == "actual_result":
                assert isinstance(value, ast.List)
                actual = [_eval(e, env) for e in value.elts]
                if len(actual) != len(order):
                    raise InputError(f"rubick.{model}.actual_result", actual,
                                     f"{len(order)} predictions listed")
                pending = [dict(calls[n], name=n, actual_ms=y) for n, y in zip(order, actual)]
        elif isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Constant):
            plan = str(target.slice.value)
            points.extend(dict(p, plan=plan) for p in pending)
    spec["points"] = points
    return spec


def _read_csv_text(text: str) -> pd.DataFrame:
    from io import StringIO
    return pd.read_csv(StringIO(text.lstrip("\ufeff")), skipinitialspace=True)


def _parse_reported(markdown: str) -> pd.DataFrame:
    """Rubick's reported mean / max error (%) per (model, plan) from the executed notebook."""
    rows: list[dict[str, Any]] = []
    model = None
    names = {"vit": "vit", "roberta": "roberta", "bert": "bert", "t5": "t5", "gpt-2": "gpt2",
             "gpt2": "gpt2", "llama-7b": "llama7b", "llama7b": "llama7b",
             "llama-30b": "llama30b", "llama30b": "llama30b"}
    for line in markdown.splitlines():
        head = re.match(r"##\s+(\S+)\s+Validation", line)
        if head:
            model = names.get(head.group(1).lower())
            continue
        cell = re.match(r"\s*\|\s*([A-Za-z+\-]+)\s*\|\s*([0-9.]+)\s*\|\s*([0-9.]+)\s*\|", line)
        if cell and model:
            rows.append({"model": model, "plan": cell.group(1),
                         "reported_mean_pct": float(cell.group(2)),
                         "reported_max_pct": float(cell.group(3))})
    return pd.DataFrame(rows)


def convert_artifact(read: Callable[[str], str], out_dir: str | Path) -> dict[str, int]:
    """Convert the artifact (``read(path)`` returns a file's text) into ``out_dir``.

    Writes ``samples.csv`` (the profile rows of every model, artifact units, plus ``model``),
    ``validation.json`` (per model: constants and points with their plan call and measured ms)
    and ``reported.csv`` (Rubick's reported errors from ``validation.md``). Returns counts.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    frames, specs = [], []
    for model, script in RUBICK_MODELS.items():
        cfg = _read_csv_text(read(f"{_MODEL_DIR}/profile/{model}/config.csv"))
        data = _read_csv_text(read(f"{_MODEL_DIR}/profile/{model}/data.csv"))
        if len(cfg) != len(data):
            raise InputError(f"rubick.{model}.data.csv", len(data), f"{len(cfg)} config rows")
        both = pd.concat([cfg, data], axis=1)
        both["strategy"] = both["strategy"].astype(str)
        both.insert(0, "model", model)
        frames.append(both)
        specs.append(_parse_script(read(f"{_MODEL_DIR}/{script}.py"), model))
    samples = pd.concat(frames, ignore_index=True)
    samples.to_csv(out / "samples.csv", index=False)
    (out / "validation.json").write_text(json.dumps({"models": specs}, indent=1) + "\n")
    reported = _parse_reported(read("artifact/71_performance_model/validation.md"))
    reported.to_csv(out / "reported.csv", index=False)
    return {"samples": len(samples), "points": sum(len(s["points"]) for s in specs),
            "reported_groups": len(reported)}


# --------------------------------------------------------------------------- loading

class RubickData:
    """The converted copy: raw samples, model constants, validation points, reported errors."""

    def __init__(self, raw_samples: pd.DataFrame, specs: list[dict[str, Any]],
                 reported: pd.DataFrame) -> None:
        self.raw_samples = raw_samples
        self.specs = {s["model"]: s for s in specs}
        self.reported = reported

    @property
    def points(self) -> pd.DataFrame:
        """One row per validation point: model, plan, call, args, strategy, actual_ms."""
        rows = [dict(p, model=m) for m, s in self.specs.items() for p in s["points"]]
        return pd.DataFrame(rows)

    def fwd_time_1gpu(self, model: str) -> tuple[float, str]:
        """(seconds, source) of the model's one-GPU forward time of the global batch."""
        spec = self.specs[model]
        rows = self.raw_samples[self.raw_samples["model"] == model]
        owner = self.sample_owner(model)
        median = float(np.median(rows["forward_time"] * rows["gpus"])) / 1e3
        stated = spec.get("profile_fwd_time_ms", 0.0) / 1e3
        if owner == model and 0.5 <= stated / median <= 2.0:
            return stated, "profile_fwd_time"
        if owner == model:
            return median, "samples median"
        # Forward FLOPs per sample: 2·P·s for the weights plus 4·l·s²·h for the attention
        # scores (QKᵀ and their product with V), the standard transformer count.
        def flops(m: str) -> float:
            sp = self.specs[m]
            return (sp["batch_size"] * sp["seq_len"] * (2.0 * sp["parameter_size_mib"] * 2.0 ** 20
                    + 4.0 * sp["layers"] * sp["seq_len"] * sp["hidden"]))
        return median * flops(model) / flops(owner), f"{owner} samples median x FLOPs ratio"

    def sample_owner(self, model: str) -> str:
        """The model whose size the samples of ``model`` were measured with.

        The artifact's ``profile/llama30b`` rows are a copy of ``profile/llama7b`` (same
        ``parameter_size``): such rows belong to the model whose PARAMETER_SIZE matches.
        """
        ps = float(self.raw_samples.loc[self.raw_samples["model"] == model,
                                        "parameter_size"].median())
        return min(self.specs, key=lambda m: abs(self.specs[m]["parameter_size_mib"] - ps))


def load_rubick(directory: str | Path) -> RubickData:
    """Read the converted copy written by :func:`convert_artifact`."""
    d = Path(directory)
    for name in ("samples.csv", "validation.json", "reported.csv"):
        if not (d / name).is_file():
            raise InputError("rubick_dir", str(d / name), "file not found")
    raw = pd.read_csv(d / "samples.csv", dtype={"strategy": str})
    specs = json.loads((d / "validation.json").read_text())["models"]
    return RubickData(raw, specs, pd.read_csv(d / "reported.csv"))


def _spec_columns(data: RubickData, model: str) -> dict[str, Any]:
    spec = data.specs[model]
    return {"model": model, "params": spec["parameter_size_mib"] * 2.0 ** 20,
            "layers": spec["layers"], "hidden": spec["hidden"], "seq_len": spec["seq_len"],
            "global_batch": spec["batch_size"], "fwd_time_1gpu": data.fwd_time_1gpu(model)[0],
            "bytes_per_param": ELEMENT_BYTES}


def samples_table(data: RubickData, *, phases: bool = False) -> pd.DataFrame:
    """SAMPLES columns for every profiling sample (iter_time in s). All are DP plans.

    ``phases=True`` adds the artifact's measured phase times of the samples without offload as
    ``cc_time`` (its ``Tcc``: backward and synchronization after the forward) and ``opt_time``
    (``Topt``), in s. ZeRO-Offload rows keep them blank: the artifact splits those differently
    (LLaMA's CPU optimizer step falls inside ``Tcc``, its ``Topt`` is 1 ms).
    """
    raw = data.raw_samples
    strategy = raw["strategy"].astype(str).str.zfill(4)
    alpha_f = strategy.str[0].astype(int)
    alpha_b = strategy.str[1].astype(int)
    # Each row carries the spec of the model it was measured on (see RubickData.sample_owner)
    # under its own model name.
    rows = pd.DataFrame([dict(_spec_columns(data, data.sample_owner(m)), model=m)
                         for m in raw["model"]])
    rows["dp"] = raw["gpus"].to_numpy()
    rows["tp"] = 1
    rows["pp"] = 1
    rows["micro_batches"] = 1
    rows["ga_steps"] = alpha_b.to_numpy()
    rows["gc"] = (alpha_f > alpha_b).astype(int).to_numpy()
    rows["zero"] = raw["zero_type"].map(_ZERO).to_numpy()
    rows["gpus"] = raw["gpus"].to_numpy()
    rows["cpus"] = raw["num_cpu_threads"].to_numpy()
    rows["nodes"] = raw["nodes"].to_numpy()
    for k, v in A800_BANDWIDTH.items():
        rows[k] = v
    rows["iter_time"] = raw["iter_time"].to_numpy() / 1e3
    if phases:
        on_gpu = rows["zero"].to_numpy() != "offload"
        rows["cc_time"] = np.where(on_gpu, raw["Tcc"].to_numpy() / 1e3, np.nan)
        rows["opt_time"] = np.where(on_gpu, raw["Topt"].to_numpy() / 1e3, np.nan)
    return rows


def configs_table(data: RubickData) -> pd.DataFrame:
    """CONFIG columns for every validation point, plus ``plan``, ``actual`` (s), ``rubick_fwd``
    (the forward-time input Rubick's script fed its own model, s).

    ``dp_overlap`` (see :mod:`.model`): 1 for the data-parallel plans (``throughput`` calls: the
    artifact's DeepSpeed configurations set ``overlap_comm``), 0 for the TP/PP plans
    (``throughput_3D``): the artifact's tensor-parallel jobs run its Megatron-LM copy
    (``benchmark/models/train_code/megatron``; the gpt2, bert and t5 job files call its
    ``pretrain_*.py``, the LLaMA job files state no command), whose ``train_step`` all-reduces
    the data-parallel gradients (``allreduce_gradients``, ``local`` DDP, the default) after
    ``forward_backward_func`` has returned, and whose DeepSpeed pipeline engine reduces them
    after the pipeline flush.
    """
    rows = []
    for _, pt in data.points.iterrows():
        row = _spec_columns(data, pt["model"])
        args = pt["args"]
        if pt["call"] == "throughput":
            _, fwd, g, batch, threads, _bw, _sh = args
            a_f, a_b, _a_c, _tp, _pp, zero = pt["strategy"]
            g = int(g)
            row.update(dp=g, tp=1, pp=1, micro_batches=1, ga_steps=int(a_b),
                       gc=int(a_f > a_b), zero=_ZERO[int(zero)], gpus=g, cpus=int(threads),
                       nodes=math.ceil(g / GPUS_PER_NODE), global_batch=int(batch),
                       dp_overlap=1)
        else:
            _, fwd, pp, tp, nodes, per_node, batch, _sh, _layers = args
            g = int(nodes * per_node)
            row.update(dp=g // int(tp * pp), tp=int(tp), pp=int(pp), micro_batches=1,
                       ga_steps=1, gc=0, zero="none", gpus=g, cpus=1, nodes=int(nodes),
                       global_batch=int(batch), dp_overlap=0)
        row.update(A800_BANDWIDTH)
        row.update(plan=pt["plan"], call=pt["call"], actual=pt["actual_ms"] / 1e3,
                   rubick_fwd=fwd / 1e3)
        rows.append(row)
    return pd.DataFrame(rows)
