r"""Configurations of reconfigurable jobs, evaluated with the performance model (vectorized).

A *configuration* is (node type, GPUs ``g``, CPU cores ``c``, plan, placement). Its throughput is
``1/T_iter`` steps/s from :func:`~policyopt.perfmodel.evaluate_candidates`, its resource vector is
``(g, c, H)`` with host bytes ``H = host_bytes(plan) + host_mem_per_gpu·g`` (the plan's offloaded
optimizer state plus a per-GPU working set), and it exists only when the memory model says the plan
fits (GPU bytes and plan host bytes within ``usable_fraction`` of capacity) — OOM plans are never
configurations.

Grid per (model, node type): ``g`` in ``options.gpu_counts``; ``c = g·k`` for ``k`` in
``options.cpus_per_gpu``, capped at the cores of the ``ceil(g / gpus_per_node)`` nodes touched;
plans from :func:`~policyopt.perfmodel.enumerate_plans`. Per (g, c) two plans are kept: the fastest,
and the fastest without offload when it differs (less host memory) — the upper envelope is then
taken over (g, c, H) per job (:func:`prune_dominated`).

Placement: ``nodes = ceil(g / gpus_per_node)`` (consolidated) unless stated; a job of ``2 ≤ g ≤
gpus_per_node`` GPUs spread over two nodes communicates over ``bw_inter``
(:func:`spread_variant`). Everything is cached per (model, node type, options), so rounds of a
simulation re-use the evaluations.
"""
from __future__ import annotations

from functools import lru_cache
from typing import Iterable, Mapping

import numpy as np
import pandas as pd

from policyopt.errors import InputError
from policyopt.perfmodel import Plan, enumerate_plans, evaluate_candidates
from policyopt.perfmodel.table import CONFIG_COLUMNS, PLAN_COLUMNS

from .spec import ModelEntry, NodeType, ReconfigOptions, ReconfigSpec

__all__ = ["SLOT_COLUMNS", "evaluate_rows", "model_grid", "best_per_resources", "plan_rows",
           "reference_rows", "spread_variant", "prune_dominated", "reference_steps_per_second", "reference_throughputs",
           "plan_label"]

#: Columns of a configuration row.
SLOT_COLUMNS: tuple[str, ...] = ("model", "node_type", "gpus", "cpus", "nodes") + PLAN_COLUMNS + (
    "iter_time", "gpu_bytes", "plan_host_bytes")


def plan_label(df: pd.DataFrame) -> pd.Series:
    """``Plan.label`` for every row of a table with the plan columns (vectorized)."""
    s = lambda c: df[c].astype(np.int64).astype(str)  # noqa: E731
    return ("dp" + s("dp") + ".tp" + s("tp") + ".pp" + s("pp") + ".m" + s("micro_batches") + ".a"
            + s("ga_steps") + np.where(df["gc"].astype(bool), ".gc", "") + ".zero-"
            + df["zero"].astype(str))


def evaluate_rows(rows: pd.DataFrame, models: Mapping[str, ModelEntry],
                  node: NodeType, gpus_per_node: int, usable_fraction: float) -> pd.DataFrame:
    """Performance and memory of configuration rows of one node type.

    ``rows``: ``model, gpus, cpus, nodes`` and the plan columns. Returns them with ``iter_time``
    (s), ``gpu_bytes`` (per GPU), ``plan_host_bytes`` (job) and ``feasible`` (memory fits and the
    cores fit on the nodes).
    """
    if rows.empty:
        out = rows.copy()
        for c in ("iter_time", "gpu_bytes", "plan_host_bytes"):
            out[c] = pd.Series(dtype=float)
        out["feasible"] = pd.Series(dtype=bool)
        return out
    table = rows.reset_index(drop=True).copy()
    names = table["model"].to_numpy()
    for col in ("params", "layers", "hidden", "seq_len", "global_batch", "fwd_time_1gpu",
                "bytes_per_param", "heads"):
        lookup = {m: getattr(e.spec, col) for m, e in models.items()}
        table[col] = pd.Series(names).map(lookup).to_numpy()
    table["bw_intra"], table["bw_inter"], table["bw_pcie"] = node.bw_intra, node.bw_inter, node.bw_pcie
    table["gpu_mem_bytes"] = node.gpu_mem_bytes
    table["host_mem_bytes"] = table["nodes"] * node.host_mem_per_node
    table["placeable"] = table["cpus"] <= table["nodes"] * node.cpus_per_node
    params = {m: e.params for m, e in models.items()}
    ev = evaluate_candidates(table[list(CONFIG_COLUMNS) + ["heads", "gpu_mem_bytes", "host_mem_bytes",
                                                           "placeable"]],
                             params, usable_fraction=usable_fraction)
    out = rows.reset_index(drop=True).copy()
    out["iter_time"] = ev["iter_time"].to_numpy()
    out["gpu_bytes"] = ev["gpu_bytes"].to_numpy()
    out["plan_host_bytes"] = ev["host_bytes"].to_numpy()
    out["feasible"] = ev["feasible"].to_numpy()
    return out


def _grid_cpus(g: int, gpus_per_node: int, node: NodeType, cpus_per_gpu: tuple[int, ...]
               ) -> np.ndarray:
    cap = -(-g // gpus_per_node) * node.cpus_per_node
    return np.unique(np.minimum(g * np.asarray(cpus_per_gpu, np.int64), cap))


@lru_cache(maxsize=256)
def model_grid(entry: ModelEntry, node: NodeType, gpus_per_node: int,
               options: ReconfigOptions) -> pd.DataFrame:
    """Every feasible (plan × g × c) of one model on one node type, consolidated placement."""
    frames = []
    for g in options.gpu_counts:
        plans = enumerate_plans(entry.spec, g, options.plan_space, gpus_per_node=gpus_per_node)
        if plans.empty:
            continue
        res = pd.DataFrame({"gpus": g, "cpus": _grid_cpus(g, gpus_per_node, node, options.cpus_per_gpu),
                            "nodes": -(-g // gpus_per_node)})
        frames.append(plans.merge(res, how="cross"))
    if not frames:
        return pd.DataFrame(columns=list(SLOT_COLUMNS) + ["feasible"])
    rows = pd.concat(frames, ignore_index=True)
    rows.insert(0, "model", entry.spec.name)
    ev = evaluate_rows(rows, {entry.spec.name: entry}, node, gpus_per_node, options.usable_fraction)
    ev = ev[ev["feasible"]].reset_index(drop=True)
    ev.insert(1, "node_type", node.name)
    return ev[list(SLOT_COLUMNS)]


def best_per_resources(table: pd.DataFrame, keys: Iterable[str] = ("gpus", "cpus")) -> pd.DataFrame:
    """Per resource point: the fastest plan and, if different, the fastest plan without offload.

    The second keeps a low-host-memory alternative when host memory is the scarce resource.
    """
    keys = list(keys)
    if table.empty:
        return table.copy()
    t = table.sort_values(keys + ["iter_time"], kind="stable")
    fastest = t.drop_duplicates(keys)
    no_off = t[t["zero"] != "offload"].drop_duplicates(keys)
    return pd.concat([fastest, no_off]).drop_duplicates(
        keys + list(PLAN_COLUMNS)).reset_index(drop=True)


@lru_cache(maxsize=4096)
def plan_rows(entry: ModelEntry, node: NodeType, gpus_per_node: int, options: ReconfigOptions,
              gpus: int, cpus: int, nodes: int) -> pd.DataFrame:
    """Every feasible plan of one model at exactly (g, c, nodes) — for fixed-resource modes and
    for spread placements (``nodes`` > consolidated)."""
    plans = enumerate_plans(entry.spec, gpus, options.plan_space, gpus_per_node=gpus_per_node)
    plans = plans.assign(gpus=gpus, cpus=cpus, nodes=nodes)
    plans.insert(0, "model", entry.spec.name)
    ev = evaluate_rows(plans, {entry.spec.name: entry}, node, gpus_per_node, options.usable_fraction)
    ev = ev[ev["feasible"]].reset_index(drop=True)
    ev.insert(1, "node_type", node.name)
    return ev[list(SLOT_COLUMNS)]


def reference_rows(spec: ReconfigSpec, gpus_per_node: Mapping[str, int], rows: pd.DataFrame
                   ) -> pd.DataFrame:
    """Evaluate given (model, node type, g, c, nodes, plan) rows, grouped by node type (one
    vectorized call per type). Keeps the input order and adds ``feasible``."""
    out = []
    for nt, grp in rows.groupby("node_type", sort=False):
        node = spec.node_types[str(nt)]
        ev = evaluate_rows(grp.drop(columns=["node_type"]), spec.models, node,
                           gpus_per_node[str(nt)], spec.options.usable_fraction)
        ev.index = grp.index
        ev.insert(1, "node_type", nt)
        out.append(ev)
    return pd.concat(out).loc[rows.index] if out else rows.assign(feasible=pd.Series(dtype=bool))


def spread_variant(entry: ModelEntry, node: NodeType, gpus_per_node: int, options: ReconfigOptions,
                   gpus: int, cpus: int, plan: Plan | None) -> pd.Series | None:
    """Best configuration of ``gpus ≤ gpus_per_node`` GPUs spread over two nodes (inter-node
    bandwidth): the fastest feasible plan when ``plan`` is None (plans may change), else ``plan``
    itself. None when nothing fits."""
    rows = plan_rows(entry, node, gpus_per_node, options, gpus, cpus, 2)
    if plan is not None:
        sel = np.ones(len(rows), bool)
        for col, val in (("dp", plan.dp), ("tp", plan.tp), ("pp", plan.pp),
                         ("micro_batches", plan.micro_batches), ("ga_steps", plan.ga_steps),
                         ("gc", int(plan.gc)), ("zero", plan.zero)):
            sel &= rows[col].to_numpy() == val
        rows = rows[sel]
    if rows.empty:
        return None
    return rows.loc[rows["iter_time"].idxmin()]


def prune_dominated(slots: pd.DataFrame, group: str = "job", keep: str | None = "keep") -> pd.DataFrame:
    """Drop configurations another configuration of the same group and node type dominates.

    ``i`` is dominated when some ``j`` has ``gpus_j ≤ gpus_i``, ``cpus_j ≤ cpus_i``,
    ``host_j ≤ host_i`` and ``thr_j ≥ thr_i`` with one strict (exact ties: the first is kept).
    Rows with ``keep`` True are never dropped. Vectorized: groups are padded to one 3-D array.
    """
    if slots.empty:
        return slots
    s = slots.reset_index(drop=True)
    gkey = s[group].astype(str) + "\x00" + s["node_type"].astype(str)
    codes, _ = pd.factorize(gkey)
    order = np.argsort(codes, kind="stable")
    codes_s = codes[order]
    starts = np.r_[0, np.flatnonzero(np.diff(codes_s)) + 1]
    sizes = np.diff(np.r_[starts, codes_s.size])
    pos = np.arange(codes_s.size) - np.repeat(starts, sizes)
    G, K = starts.size, int(sizes.max())
    attrs = np.stack([s["gpus"].to_numpy(float), s["cpus"].to_numpy(float),
                      s["host_bytes"].to_numpy(float), -s["thr"].to_numpy(float)], axis=1)[order]
    pad = np.full((G, K, 4), np.inf)
    pad[codes_s, pos] = attrs
    valid = np.zeros((G, K), bool)
    valid[codes_s, pos] = True
    # weak[g, j, i]: j at most i in every coordinate (resources and -throughput)
    weak = np.all(pad[:, :, None, :] <= pad[:, None, :, :], axis=3)
    strict = np.any(pad[:, :, None, :] < pad[:, None, :, :], axis=3)
    tie_earlier = weak & ~strict & (np.arange(K)[:, None] < np.arange(K)[None, :])[None]
    dom = ((weak & strict) | tie_earlier) & valid[:, :, None] & valid[:, None, :]
    dominated_s = dom.any(axis=1)[codes_s, pos]
    dominated = np.zeros(len(s), bool)
    dominated[order] = dominated_s
    if keep is not None and keep in s:
        dominated &= ~s[keep].to_numpy(bool)
    return s[~dominated].reset_index(drop=True)


def reference_throughputs(spec: ReconfigSpec, job_ids: list[str], gpus_per_node: Mapping[str, int]
                          ) -> np.ndarray:
    """``1/T_iter`` (steps/s) of each job's requested resources with its original plan
    (consolidated), one vectorized evaluation per node type. Raises InputError naming the first
    job whose original plan does not fit in memory there."""
    if not job_ids:
        return np.zeros(0)
    recs = []
    for jid in job_ids:  # one record per job (input gathering)
        rj = spec.jobs[jid]
        p = rj.plan
        recs.append((rj.model, rj.node_type, rj.gpus, rj.cpus, -(-rj.gpus // gpus_per_node[rj.node_type]),
                     p.dp, p.tp, p.pp, p.micro_batches, p.ga_steps, int(p.gc), p.zero))
    rows = pd.DataFrame(recs, columns=["model", "node_type", "gpus", "cpus", "nodes"] + list(PLAN_COLUMNS))
    keys = list(rows.columns)
    uniq = rows.drop_duplicates().reset_index(drop=True)
    ev = reference_rows(spec, gpus_per_node, uniq)
    merged = rows.merge(ev, on=keys, how="left")
    bad = ~merged["feasible"].to_numpy(bool)
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise InputError(f"reconfig.jobs.{job_ids[i]}.plan", spec.jobs[job_ids[i]].plan.label,
                         "the original plan does not fit in memory (or the cores do not fit on "
                         "the nodes) with the requested resources")
    return 1.0 / merged["iter_time"].to_numpy(float)


def reference_steps_per_second(spec: ReconfigSpec, job_id: str, gpus_per_node: int) -> float:
    """``1/T_iter`` of a job's requested resources with its original plan (consolidated).

    Raises InputError when the original plan does not fit in memory there (an OOM request).
    """
    rj = spec.jobs[job_id]
    p = rj.plan
    row = pd.DataFrame([{"model": rj.model, "gpus": rj.gpus, "cpus": rj.cpus,
                         "nodes": -(-rj.gpus // gpus_per_node), "dp": p.dp, "tp": p.tp,
                         "pp": p.pp, "micro_batches": p.micro_batches, "ga_steps": p.ga_steps,
                         "gc": int(p.gc), "zero": p.zero}])
    ev = evaluate_rows(row, spec.models, spec.node_types[rj.node_type], gpus_per_node,
                       spec.options.usable_fraction)
    if not bool(ev["feasible"].iloc[0]):
        raise InputError(f"reconfig.jobs.{job_id}.plan", p.label,
                         "the original plan does not fit in memory (or the cores do not fit on "
                         "the nodes) with the requested resources")
    return float(1.0 / ev["iter_time"].iloc[0])
