r"""Which configurations (columns) each job of a reconfigurable problem has, and their data.

:class:`JobConfigurations` is the first layer of :class:`~policyopt.reconfig.space.MultiResourceSpace`
(it is not used on its own): from the problem's jobs it builds the *slots* — every (job,
configuration) pair with its throughput ``T[m, c] = 1/T_iter`` (steps/s, from the performance
model), GPUs ``g_c``, CPU cores ``c_c``, nodes and host bytes ``H[m, c]`` — and indexes them into
the dense ``(jobs × configs)`` arrays. A configuration ``c = (node type, GPUs g_c, CPU cores c_c,
nodes, plan)`` is labelled ``"<type>|g<g>|c<c>|n<nodes>|<plan>"``.

Which configurations a job has (``options.reconfigure``, see :mod:`.catalog` for the grid):

* ``all`` — per (node type, g, c) the fastest memory-feasible plan (and the fastest without
  offload), over the GPU/CPU grid;
* ``plans`` — every best plan at the requested (node type, g, c) (Rubick-E);
* ``resources`` — the original plan's strategy (tp, pp, micro-batches, GA, GC, ZeRO) with
  ``dp = g/(tp·pp)`` over the grid (Rubick-R);
* ``none`` — the requested resources with the original plan only (Rubick-N);
* ``dp_only`` — pure data-parallel plans (tp = pp = 1, no ZeRO/GC, any GA) over the grid for jobs
  whose original plan is pure DP, else the request only (Sia-like);
* ``cpus_only`` — the original plan and GPUs with any CPU count of the grid (Synergy-like).

Every job's set also holds its *reference* configuration (requested resources, original plan) and,
when running, its *current* one; dominated configurations (another one of the same job and node type
with no more GPUs, cores and host bytes and at least the throughput) are dropped, the current one
never. Plans that do not fit in memory never appear, nor configurations with more GPUs than their
node type has.

Reconfiguration cost, as a **constraint**: a running job with ``(T − (N+1)·δ)/T < threshold`` may not
be reconfigured — its only configuration is its current one (it may still be paused: ``X ≤ 1``).
Optionally also in the **objective**: with ``options.round_seconds = L``, every configuration other
than a running job's current one has its throughput scaled by ``max(0, 1 − δ/L)`` (one
checkpoint-restore per round amortized), so every policy weighs the cost; SLA rows use the
unscaled throughput ``T_raw``.
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.modeling import IndexSet
from policyopt.perfmodel.table import PLAN_COLUMNS

from .catalog import (best_per_resources, model_grid, plan_label, plan_rows, prune_dominated,
                      reference_rows)
from .spec import ReconfigSpec

__all__ = ["JobConfigurations"]

_FAMILY = ["tp", "pp", "micro_batches", "ga_steps", "gc", "zero"]


class JobConfigurations(AllocationSpace):
    """The columns of :class:`~policyopt.reconfig.space.MultiResourceSpace`: per job its request and
    history (``jobs_frame``), its candidate configurations (``slots``) and the dense arrays indexed
    by configuration (module docstring). Set up by ``MultiResourceSpace.__init__``."""

    spec: ReconfigSpec
    reconfigure: str
    gpn: dict[str, int]
    jobs_frame: pd.DataFrame

    # ------------------------------------------------------------------ jobs and slots
    def _jobs_frame(self) -> pd.DataFrame:
        """One row per job: request, original plan, history, current configuration."""
        spec, opts = self.spec, self.spec.options
        recs = []
        for i, job in enumerate(self.problem.jobs):  # one record per job (input parsing)
            rj = spec.jobs[job.id]
            cur = rj.current
            T = job.time_since_start if rj.trained_seconds is None else rj.trained_seconds
            rec: dict[str, Any] = {
                "job": i, "job_id": job.id, "model": rj.model, "node_type": rj.node_type,
                "gpus": rj.gpus, "cpus": rj.cpus, "guaranteed": rj.guaranteed,
                "tenant": job.entity, "N": rj.reconfigurations, "T": T,
                "delta": rj.checkpoint_seconds, "running": cur is not None,
                **{c: (int(v) if c == "gc" else v) for c, v in
                   zip(PLAN_COLUMNS, _plan_tuple(rj.plan))},
            }
            if cur is not None:
                rec.update({"cur_node_type": cur.node_type, "cur_gpus": cur.gpus,
                            "cur_cpus": cur.cpus, "cur_nodes": cur.nodes or
                            -(-cur.gpus // self.gpn.get(cur.node_type, cur.gpus)),
                            **{f"cur_{c}": (int(v) if c == "gc" else v) for c, v in
                               zip(PLAN_COLUMNS, _plan_tuple(cur.plan))}})
            recs.append(rec)
        df = pd.DataFrame(recs)
        if "cur_node_type" not in df:
            for c in ["cur_node_type", "cur_gpus", "cur_cpus", "cur_nodes"] + [f"cur_{c}" for c in PLAN_COLUMNS]:
                df[c] = np.nan
        missing = sorted(set(df["node_type"]) - set(self.gpn))
        if missing:
            raise InputError(f"cluster.worker_types.{missing[0]}.gpus_per_server", None,
                             "node types of a reconfig problem need gpus_per_server")
        T, N, d = df["T"].to_numpy(float), df["N"].to_numpy(float), df["delta"].to_numpy(float)
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = np.where(T > 0, (T - (N + 1) * d) / T, np.where(d > 0, -np.inf, 1.0))
        df["eligible"] = ~df["running"].to_numpy(bool) | (ratio >= opts.threshold)
        df["consolidated_nodes"] = -(-df["gpus"] // df["node_type"].map(self.gpn))
        return df

    def _build_slots(self) -> pd.DataFrame:
        """Every (job, configuration) pair with throughput and resources, pruned (vectorized)."""
        jf, opts = self.jobs_frame, self.spec.options
        # reference configurations (requested resources, original plan), one evaluation per combo
        ref = jf[["job", "model", "node_type", "gpus", "cpus"] + list(PLAN_COLUMNS)].copy()
        ref["nodes"] = jf["consolidated_nodes"]
        ref_ev = self._evaluate_unique(ref)
        bad = ~ref_ev["feasible"].to_numpy(bool)
        if bad.any():
            j = jf.iloc[int(np.flatnonzero(bad)[0])]
            raise InputError(f"reconfig.jobs.{j['job_id']}.plan", _label_of(j),
                             "the original plan does not fit in memory (or its cores do not fit on "
                             "the nodes) with the requested resources")
        self.ref_thr = 1.0 / ref_ev["iter_time"].to_numpy(float)
        self.ref_host = ref_ev["plan_host_bytes"].to_numpy(float)
        parts = [ref_ev.assign(kind=1)]
        # current configurations of running jobs
        run = jf[jf["running"]]
        if len(run):
            cur = pd.DataFrame({"job": run["job"], "model": run["model"],
                                "node_type": run["cur_node_type"], "gpus": run["cur_gpus"],
                                "cpus": run["cur_cpus"], "nodes": run["cur_nodes"],
                                **{c: run[f"cur_{c}"] for c in PLAN_COLUMNS}})
            for c in ("gpus", "cpus", "nodes", "dp", "tp", "pp", "micro_batches", "ga_steps", "gc"):
                cur[c] = cur[c].astype(np.int64)
            cur_ev = self._evaluate_unique(cur)
            bad = ~cur_ev["feasible"].to_numpy(bool)
            if bad.any():
                j = run.iloc[int(np.flatnonzero(bad)[0])]
                raise InputError(f"reconfig.jobs.{j['job_id']}.current", j["cur_node_type"],
                                 "the current configuration does not fit in memory per the model")
            parts.append(cur_ev.assign(kind=0))
        parts.append(self._mode_slots().assign(kind=2))
        slots = pd.concat([p for p in parts if len(p)], ignore_index=True)
        slots = slots.astype({**{c: np.int64 for c in ("job", "gpus", "cpus", "nodes", "dp", "tp", "pp",
                                                        "micro_batches", "ga_steps", "gc", "kind")},
                              "iter_time": float, "gpu_bytes": float, "plan_host_bytes": float,
                              "feasible": bool, "zero": str})
        slots = slots[slots["feasible"].to_numpy()]
        # eligibility: a running job that may not reconfigure keeps only its current configuration
        pinned = jf["running"].to_numpy(bool) & ~jf["eligible"].to_numpy(bool)
        slots = slots[~pinned[slots["job"].to_numpy()] | (slots["kind"].to_numpy() == 0)]
        # capacity: no more GPUs than the node type has
        cap = dict(zip(self.worker_types.labels.tolist(), self.counts))
        slots = slots[slots["gpus"].to_numpy() <= slots["node_type"].map(cap).to_numpy()]
        slots = slots.assign(label=slots["node_type"].astype(str) + "|g" + slots["gpus"].astype(str)
                             + "|c" + slots["cpus"].astype(str) + "|n" + slots["nodes"].astype(str)
                             + "|" + plan_label(slots))
        slots = slots.sort_values(["job", "kind"], kind="stable").drop_duplicates(["job", "label"])
        slots["thr"] = 1.0 / slots["iter_time"].to_numpy(float)
        slots["host_bytes"] = slots["plan_host_bytes"].to_numpy(float) + opts.host_mem_per_gpu * slots["gpus"]
        slots["keep"] = slots["kind"].to_numpy() == 0
        none = np.setdiff1d(np.arange(len(jf)), slots["job"].to_numpy())
        if none.size:
            j = jf.iloc[int(none[0])]
            raise InputError(f"jobs[{j['job_id']}]", {"gpus": int(j["gpus"]), "node_type": j["node_type"]},
                             "the job fits no configuration (no plan fits in memory on any GPU count the "
                             "cluster has, or it may not reconfigure and its current one does not fit)")
        return prune_dominated(slots, "job", "keep")

    def _evaluate_unique(self, rows: pd.DataFrame) -> pd.DataFrame:
        """Evaluate rows with ``job`` and configuration columns, once per distinct configuration."""
        keys = ["model", "node_type", "gpus", "cpus", "nodes"] + list(PLAN_COLUMNS)
        uniq = rows[keys].drop_duplicates().reset_index(drop=True)
        ev = reference_rows(self.spec, self.gpn, uniq)
        return rows[["job"] + keys].merge(ev, on=keys, how="left")

    def _mode_slots(self) -> pd.DataFrame:
        """Candidate configurations of the reconfiguration mode (grouped merges, no per-job loop)."""
        jf, spec, opts, mode = self.jobs_frame, self.spec, self.spec.options, self.reconfigure
        empty = pd.DataFrame(columns=["job", "model", "node_type", "gpus", "cpus", "nodes"]
                             + list(PLAN_COLUMNS) + ["iter_time", "gpu_bytes", "plan_host_bytes", "feasible"])
        if mode == "none":
            return empty
        frames = []
        if mode in ("all", "resources", "dp_only"):
            types = list(self.gpn)
            grids = [best_per_resources(model_grid(spec.models[m], spec.node_types[t], self.gpn[t], opts))
                     if mode == "all" else model_grid(spec.models[m], spec.node_types[t], self.gpn[t], opts)
                     for m in jf["model"].unique() for t in types]
            grid = pd.concat(grids, ignore_index=True) if grids else empty
            if mode == "all":
                frames.append(jf[["job", "model"]].merge(grid, on="model"))
            elif mode == "resources":
                fam = jf[["job", "model"] + _FAMILY]
                frames.append(fam.merge(grid, on=["model"] + _FAMILY))
            else:  # dp_only: pure data-parallel jobs scale over pure data-parallel plans
                pure = jf[(jf["tp"] == 1) & (jf["pp"] == 1) & (jf["zero"] == "none") & (jf["gc"] == 0)]
                dp = grid[(grid["tp"] == 1) & (grid["pp"] == 1) & (grid["zero"] == "none") & (grid["gc"] == 0)]
                dp = best_per_resources(dp, ("model", "node_type", "gpus", "cpus"))
                frames.append(pure[["job", "model"]].merge(dp, on="model"))
        elif mode == "plans":
            combos = jf[["model", "node_type", "gpus", "cpus", "consolidated_nodes"]].drop_duplicates()
            tabs = []
            for m, t, g, c, nd in combos.itertuples(index=False):  # one per distinct request
                tab = best_per_resources(plan_rows(spec.models[m], spec.node_types[t], self.gpn[t], opts,
                                                   int(g), int(c), int(nd)))
                tabs.append(tab)
            grid = pd.concat(tabs, ignore_index=True) if tabs else empty
            frames.append(jf[["job", "model", "node_type", "gpus", "cpus"]].merge(
                grid, on=["model", "node_type", "gpus", "cpus"]))
        elif mode == "cpus_only":
            rows = []
            for t in self.gpn:
                sub = jf[jf["node_type"] == t]
                if sub.empty:
                    continue
                node = spec.node_types[t]
                cpus = np.asarray(opts.cpus_per_gpu, np.int64)
                g = sub["gpus"].to_numpy(np.int64)
                cand = np.minimum(g[:, None] * cpus[None, :], (sub["consolidated_nodes"].to_numpy()[:, None]
                                                               * node.cpus_per_node))
                rep = sub.loc[sub.index.repeat(cpus.size)].copy()
                rep["cpus"] = cand.ravel()
                rows.append(rep)
            if rows:
                cand = pd.concat(rows, ignore_index=True)
                cand["nodes"] = cand["consolidated_nodes"]
                frames.append(self._evaluate_unique(cand[["job", "model", "node_type", "gpus", "cpus",
                                                          "nodes"] + list(PLAN_COLUMNS)]))
        out = [f for f in frames if len(f)]
        if not out:
            return empty
        res = pd.concat(out, ignore_index=True)
        if "feasible" not in res:
            res["feasible"] = True
        return res[list(empty.columns)]

    def _index_slots(self, slots: pd.DataFrame) -> None:
        """Configuration index set (union of labels) and the dense (jobs × configs) arrays."""
        n = len(self.jobs)
        codes, labels = pd.factorize(slots["label"], sort=True)
        self.configs = IndexSet("configs", labels.to_numpy(dtype=object).astype(str))
        C = len(self.configs)
        first = np.unique(codes, return_index=True)[1]
        cfg = slots.iloc[first].reset_index(drop=True)
        self.config_table = cfg[["label", "node_type", "gpus", "cpus", "nodes"] + list(PLAN_COLUMNS)]
        self.cfg_gpus = cfg["gpus"].to_numpy(float)
        self.cfg_cpus = cfg["cpus"].to_numpy(float)
        self.cfg_nodes = cfg["nodes"].to_numpy(np.int64)
        self.config_type = self.worker_types.positions(cfg["node_type"].tolist())
        gpn_c = self.gpus_per_server[self.config_type]
        self.config_unconsolidated = self.cfg_nodes > np.ceil(self.cfg_gpus / gpn_c)
        jj = slots["job"].to_numpy(np.int64)
        cc = codes.astype(np.int64)
        thr_raw = slots["thr"].to_numpy(float)
        self.T_raw = np.zeros((n, C))
        self.T_raw[jj, cc] = thr_raw
        self.H = np.zeros((n, C))
        self.H[jj, cc] = slots["host_bytes"].to_numpy(float)
        self.single_mask = self.T_raw > 0
        # current configuration per job (-1: not running / not in the space)
        self.current_col = np.full(n, -1, np.int64)
        is_cur = slots["kind"].to_numpy() == 0
        self.current_col[jj[is_cur]] = cc[is_cur]
        # reconfiguration cost amortized over a round (objective), SLA rows use T_raw
        T = self.T_raw.copy()
        L = self.spec.options.round_seconds
        if L is not None:
            jf = self.jobs_frame
            factor = np.clip(1.0 - jf["delta"].to_numpy(float) / L, 0.0, 1.0)
            running = jf["running"].to_numpy(bool)
            other = np.ones((n, C), bool)
            other[np.flatnonzero(self.current_col >= 0), self.current_col[self.current_col >= 0]] = False
            scale = np.where(running[:, None] & other, factor[:, None], 1.0)
            T = T * scale
            self.single_mask = self.single_mask & (T > 0)
        self.T = T
        self.slots = slots.assign(col=cc).reset_index(drop=True)


def _plan_tuple(plan: Any) -> tuple[Any, ...]:
    return (plan.dp, plan.tp, plan.pp, plan.micro_batches, plan.ga_steps, plan.gc, plan.zero)


def _plan_from_row(r: pd.Series) -> Any:
    from policyopt.perfmodel import Plan
    return Plan(dp=int(r["dp"]), tp=int(r["tp"]), pp=int(r["pp"]), micro_batches=int(r["micro_batches"]),
                ga_steps=int(r["ga_steps"]), gc=bool(r["gc"]), zero=str(r["zero"]))


def _label_of(row: pd.Series) -> str:
    return _plan_from_row(row).label
