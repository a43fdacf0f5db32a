r"""Plan enumeration, best feasible plan, and the resource sensitivity curve.

For g GPUs the plan space is every (d, t, p) with d·t·p = g, t <= min(max_tp, gpus_per_node) and
t | hidden, p | layers; m = f·p micro-batches for p > 1 (f in ``micro_batch_factors``; m = 1 for
p = 1); a in ``ga_steps``; gc in {0, 1}; zero in {none, dp, offload} (ZeRO only with t = p = 1,
as in DeepSpeed's ZeRO-2/Offload with pure data parallelism); and d·a·m must divide the global
batch. Plans whose memory (:mod:`.memory`) exceeds the GPU or host capacity are dropped; the
best plan maximizes throughput = global_batch / T_iter (samples/s).

The sensitivity curve gives, for every (GPU count, CPU count) pair, the best feasible plan and
its throughput; :func:`upper_envelope` keeps only the non-dominated pairs (no other pair with at
most as many GPUs and CPUs reaches at least the same throughput).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping, Sequence

import numpy as np
import pandas as pd

from policyopt.errors import InputError

from .memory import fits_memory, memory_table
from .model import compute_terms, iter_time_from_terms, param_matrix
from .params import PerfParams
from .plans import ZERO_MODES, ClusterSpec, ModelSpec, Plan, Resources
from .table import CONFIG_COLUMNS, PLAN_COLUMNS, row_to_objects, validate_table

__all__ = ["PlanSpace", "BestPlan", "enumerate_plans", "candidate_table", "evaluate_candidates",
           "best_plan", "sensitivity_curve", "upper_envelope"]


@dataclass(frozen=True)
class PlanSpace:
    """Which plans are enumerated (see the module docstring)."""

    ga_steps: tuple[int, ...] = (1, 2, 4, 8)
    micro_batch_factors: tuple[int, ...] = (1, 2, 4)
    gc: tuple[bool, ...] = (False, True)
    zero: tuple[str, ...] = ZERO_MODES
    max_tp: int = 8
    zero_pure_dp_only: bool = True

    def __post_init__(self) -> None:
        for name in ("ga_steps", "micro_batch_factors"):
            values = getattr(self, name)
            if not values or any(isinstance(v, bool) or not isinstance(v, int) or v < 1
                                 for v in values):
                raise InputError(f"space.{name}", values, "must be non-empty integers >= 1")
        bad = [z for z in self.zero if z not in ZERO_MODES]
        if bad or not self.zero:
            raise InputError("space.zero", self.zero, f"must be a non-empty subset of {ZERO_MODES}")
        if not self.gc or any(not isinstance(v, bool) for v in self.gc):
            raise InputError("space.gc", self.gc, "must be a non-empty tuple of bools")
        if isinstance(self.max_tp, bool) or not isinstance(self.max_tp, int) or self.max_tp < 1:
            raise InputError("space.max_tp", self.max_tp, "must be an integer >= 1")


def enumerate_plans(spec: ModelSpec, gpus: int, space: PlanSpace | None = None, *,
                    gpus_per_node: int | None = None) -> pd.DataFrame:
    """All plans of the space for ``gpus`` GPUs as a table with the :data:`PLAN_COLUMNS`."""
    space = space or PlanSpace()
    if isinstance(gpus, bool) or not isinstance(gpus, (int, np.integer)) or gpus < 1:
        raise InputError("gpus", gpus, "must be an integer >= 1")
    g = int(gpus)
    divisors = np.flatnonzero(g % np.arange(1, g + 1) == 0) + 1
    zero_idx = np.arange(len(space.zero))
    t, p, a, f, gc, z = (arr.ravel() for arr in np.meshgrid(
        divisors, divisors, np.array(space.ga_steps), np.array(space.micro_batch_factors),
        np.array(space.gc, dtype=np.int64), zero_idx, indexing="ij"))
    max_tp = min(space.max_tp, gpus_per_node or space.max_tp)
    zero = np.array(space.zero, dtype=object)[z]
    m = np.where(p > 1, f * p, 1)
    # a TP rank holds whole attention heads (Megatron: heads % t = 0); without a head count the
    # hidden size must split evenly
    shards = (spec.heads % t == 0) if spec.heads else (spec.hidden % t == 0)
    keep = ((g % (t * p) == 0) & (t <= max_tp) & shards
            & (spec.layers % p == 0) & ((p > 1) | (f == space.micro_batch_factors[0])))
    d = np.where(g % (t * p) == 0, g // (t * p), 1)  # rows with t·p ∤ g are dropped by keep
    keep &= spec.global_batch % (d * a * m) == 0
    if space.zero_pure_dp_only:
        keep &= (zero == "none") | ((t == 1) & (p == 1))
    plans = pd.DataFrame({"dp": d, "tp": t, "pp": p, "micro_batches": m, "ga_steps": a,
                          "gc": gc, "zero": zero})[keep]
    return plans.drop_duplicates().reset_index(drop=True)


def candidate_table(spec: ModelSpec, cluster: ClusterSpec, gpu_counts: Sequence[int],
                    cpu_counts: Sequence[int] | None = None, space: PlanSpace | None = None
                    ) -> pd.DataFrame:
    """Every (plan × GPU count × CPU count) configuration, with capacity columns.

    Columns: :data:`CONFIG_COLUMNS` plus ``gpu_mem_bytes`` (per GPU), ``host_mem_bytes`` (job)
    and ``placeable`` (False when the CPU count exceeds the cores of the nodes touched).
    ``cpu_counts`` = None gives each GPU count its proportional share of the node's cores.
    """
    if len(gpu_counts) == 0:
        raise InputError("gpu_counts", list(gpu_counts), "must not be empty")
    if cpu_counts is not None and len(cpu_counts) == 0:
        raise InputError("cpu_counts", list(cpu_counts), "must not be empty")
    frames = []
    for g in gpu_counts:
        plans = enumerate_plans(spec, g, space, gpus_per_node=cluster.gpus_per_node)
        nodes = cluster.nodes_for(int(g))
        cpus = ([max(1, int(g) * cluster.cpus_per_node // cluster.gpus_per_node)]
                if cpu_counts is None else list(cpu_counts))
        for c in cpus:
            if isinstance(c, bool) or not isinstance(c, (int, np.integer)) or c < 1:
                raise InputError("cpu_counts", c, "must hold integers >= 1")
        res = pd.DataFrame({"gpus": int(g), "cpus": np.asarray(cpus, dtype=np.int64),
                            "nodes": nodes})
        frames.append(plans.merge(res, how="cross"))
    table = pd.concat(frames, ignore_index=True)
    for name, value in spec.to_row().items():
        table[name] = value
    table["bw_intra"], table["bw_inter"] = cluster.bw_intra, cluster.bw_inter
    table["bw_pcie"] = cluster.bw_pcie
    table["gpu_mem_bytes"] = cluster.gpu_mem_bytes
    table["host_mem_bytes"] = table["nodes"] * cluster.host_mem_per_node
    table["placeable"] = table["cpus"] <= table["nodes"] * cluster.cpus_per_node
    optional = [c for c in ("heads",) if c in table.columns]  # memory-only spec columns
    return table[list(CONFIG_COLUMNS) + optional + ["gpu_mem_bytes", "host_mem_bytes",
                                                    "placeable"]]


def evaluate_candidates(table: pd.DataFrame, params: PerfParams | Mapping[str, PerfParams],
                        *, usable_fraction: float = 0.9) -> pd.DataFrame:
    """Add ``iter_time``, ``throughput``, memory columns and ``feasible`` to a candidate table.

    ``feasible`` = fits in memory (``usable_fraction`` of capacity) and placeable.
    """
    clean = validate_table(table, "candidates")
    k = param_matrix(clean["model"], params, "candidates")
    out = clean.copy()
    out["iter_time"] = iter_time_from_terms(compute_terms(clean), k)
    out["throughput"] = out["global_batch"] / out["iter_time"]
    mem = memory_table(clean)
    out = pd.concat([out, mem], axis=1)
    ok = fits_memory(mem, clean["gpu_mem_bytes"].to_numpy(dtype=float),
                     clean["host_mem_bytes"].to_numpy(dtype=float), usable_fraction)
    placeable = clean["placeable"].to_numpy(dtype=bool) if "placeable" in clean else True
    out["feasible"] = ok & placeable
    return out


@dataclass(frozen=True)
class BestPlan:
    """The best feasible plan for given resources."""

    plan: Plan
    resources: Resources
    iter_time: float
    throughput: float  # samples/s
    gpu_bytes: float
    host_bytes: float
    alternatives: int = field(default=0)  # feasible plans considered


def best_plan(spec: ModelSpec, params: PerfParams, gpus: int, cpus: int, *,
              cluster: ClusterSpec, space: PlanSpace | None = None,
              usable_fraction: float = 0.9) -> BestPlan | None:
    """The highest-throughput feasible plan of ``spec`` on ``gpus`` GPUs and ``cpus`` cores.

    Returns None when no plan of the space fits in memory.
    """
    resources = cluster.resources(gpus, cpus)  # validates the counts and the placement
    table = evaluate_candidates(candidate_table(spec, cluster, [gpus], [cpus], space), params,
                                usable_fraction=usable_fraction)
    feasible = table[table["feasible"]]
    if feasible.empty:
        return None
    row = feasible.loc[feasible["throughput"].idxmax()]
    _, plan = row_to_objects(row)
    return BestPlan(plan=plan, resources=resources, iter_time=float(row["iter_time"]),
                    throughput=float(row["throughput"]), gpu_bytes=float(row["gpu_bytes"]),
                    host_bytes=float(row["host_bytes"]), alternatives=len(feasible))


def sensitivity_curve(spec: ModelSpec, params: PerfParams, cluster: ClusterSpec,
                      gpu_counts: Sequence[int], cpu_counts: Sequence[int] | None = None, *,
                      space: PlanSpace | None = None, usable_fraction: float = 0.9
                      ) -> pd.DataFrame:
    """Best feasible plan and throughput for every (GPU count, CPU count) pair.

    One row per pair, sorted by ``gpus, cpus``: ``gpus, cpus, nodes, feasible``, the plan
    columns (``dp, tp, pp, micro_batches, ga_steps, gc, zero``; missing when infeasible),
    ``plan`` (label), ``iter_time``, ``throughput`` (0 when infeasible), ``gpu_bytes``,
    ``host_bytes``, ``n_feasible`` (plans that fit).
    """
    table = evaluate_candidates(candidate_table(spec, cluster, gpu_counts, cpu_counts, space),
                                params, usable_fraction=usable_fraction)
    keys = ["gpus", "cpus"]
    pairs = table[keys + ["nodes"]].drop_duplicates(keys)
    feasible = table[table["feasible"]]
    counts = feasible.groupby(keys).size().rename("n_feasible").reset_index()
    best = feasible.loc[feasible.groupby(keys)["throughput"].idxmax()] if len(feasible) else \
        feasible
    cols = keys + list(PLAN_COLUMNS) + ["iter_time", "throughput", "gpu_bytes", "host_bytes"]
    curve = pairs.merge(best[cols], on=keys, how="left").merge(counts, on=keys, how="left")
    curve["feasible"] = curve["iter_time"].notna()
    curve["n_feasible"] = curve["n_feasible"].fillna(0).astype(np.int64)
    curve["throughput"] = curve["throughput"].fillna(0.0)
    labels = ("dp" + curve["dp"].astype("Int64").astype(str) + ".tp"
              + curve["tp"].astype("Int64").astype(str) + ".pp"
              + curve["pp"].astype("Int64").astype(str) + ".m"
              + curve["micro_batches"].astype("Int64").astype(str) + ".a"
              + curve["ga_steps"].astype("Int64").astype(str)
              + np.where(curve["gc"] == 1, ".gc", "") + ".zero-" + curve["zero"].astype(str))
    curve["plan"] = np.where(curve["feasible"], labels, "")
    order = keys + ["nodes", "feasible"] + list(PLAN_COLUMNS) + [
        "plan", "iter_time", "throughput", "gpu_bytes", "host_bytes", "n_feasible"]
    return curve[order].sort_values(keys).reset_index(drop=True)


def upper_envelope(curve: pd.DataFrame) -> pd.DataFrame:
    """Feasible rows of a sensitivity curve that no other row dominates.

    Row j dominates row i when gpus_j <= gpus_i, cpus_j <= cpus_i and throughput_j >=
    throughput_i with at least one strict inequality; among exact ties the first row is kept.
    """
    missing = [c for c in ("gpus", "cpus", "throughput") if c not in curve.columns]
    if missing:
        raise InputError(f"curve.{missing[0]}", missing, "missing column(s)")
    rows = curve[curve["feasible"]] if "feasible" in curve.columns else curve
    rows = rows.reset_index(drop=True)
    g = rows["gpus"].to_numpy(dtype=float)
    c = rows["cpus"].to_numpy(dtype=float)
    x = rows["throughput"].to_numpy(dtype=float)
    # pairwise[j, i]: j weakly better than i everywhere
    weak = (g[:, None] <= g[None, :]) & (c[:, None] <= c[None, :]) & (x[:, None] >= x[None, :])
    strict = (g[:, None] < g[None, :]) | (c[:, None] < c[None, :]) | (x[:, None] > x[None, :])
    n = len(rows)
    earlier_tie = weak & ~strict & (np.arange(n)[:, None] < np.arange(n)[None, :])
    dominated = ((weak & strict) | earlier_tie).any(axis=0)
    return rows[~dominated].reset_index(drop=True)
