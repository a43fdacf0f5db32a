r"""The multi-resource, reconfiguration-aware allocation space.

:class:`MultiResourceSpace` is an :class:`~policyopt.allocation.AllocationSpace` whose columns are
*configurations* ``c = (node type, GPUs g_c, CPU cores c_c, nodes, plan)`` (labelled
``"<type>|g<g>|c<c>|n<nodes>|<plan>"``) and whose rows are jobs. ``X[m, c]`` is the fraction of
time job ``m`` runs with configuration ``c``; ``T[m, c] = 1/T_iter`` (steps/s) from the
performance model. Registered with :func:`~policyopt.policy.register_space` for
:class:`~policyopt.reconfig.spec.ReconfigProblem`, so every policy runs over it unchanged.

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
never. Plans that do not fit in memory never appear.

Rows added by :meth:`MultiResourceSpace.add_allocation` (``X`` is the variable name):

* ``X_job_time``: ``Σ_c X[m,c] ≤ 1``;
* ``X_capacity`` (per node type ``t``): ``Σ_{m,c on t} g_c·X[m,c] ≤ GPUs_t``;
* ``X_resources``: per node type ``Σ c_c·X ≤ cores_t`` and ``Σ H[m,c]·X ≤ host_t`` (GiB), per tenant
  quota ``Σ_{m∈tenant} (g_c | c_c | H[m,c])·X ≤ quota`` (with ``options.quota = "reserve"``, the default, the
  policy decides under these rows, then idle capacity flows past them: :mod:`.work_conservation`;
  :meth:`~MultiResourceSpace.check` then does not hold them);
* ``X_sla`` (admitted guaranteed jobs): ``Σ_{c∈S_m} X[m,c] ≥ 1 − u*_m``, ``S_m`` the configurations
  at least as fast as the reference ``r_m`` (requested resources, original plan) — the job runs all
  the time at ``≥ r_m``, so ``thr(m) ≥ (1 − u*_m)·r_m`` — with ``u*`` the least total shortfall
  (``u* = 0`` whenever all guarantees can be met together). Guaranteed jobs are admitted in arrival
  order while their requested resources fit their tenant's quota; :attr:`MultiResourceSpace.sla_report`
  lists every guaranteed job with ``admitted``, ``met`` and the reason when not met.

Reconfiguration cost, as a **constraint**: a running job with ``(T − (N+1)·δ)/T < threshold`` may not
be reconfigured — its only configuration is its current one (it may still be paused: ``X ≤ 1``).
Optionally also in the **objective**: with ``options.round_seconds = L``, every configuration other
than a running job's current one has its throughput scaled by ``max(0, 1 − δ/L)`` (one
checkpoint-restore per round amortized), so every policy weighs the cost; SLA rows use the
unscaled throughput.

Normalization (``thr(m, X_equal)``, used by fairness policies): the reference throughput ``r_m``,
so a normalized throughput is the speedup over what the job asked for. Scale factors are 1 (each
configuration carries its own GPU count).
"""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from policyopt.allocation import AllocationSpace, PairPruning
from policyopt.errors import InputError
from policyopt.modeling import IndexSet, LinExpr, Model, Triplets, Variable
from policyopt.perfmodel.table import PLAN_COLUMNS
from policyopt.policy import register_space
from policyopt.problem import Problem

from .catalog import (best_per_resources, model_grid, plan_label, plan_rows, prune_dominated,
                      reference_rows)
from .spec import GiB, RECONFIGURE_MODES, ReconfigProblem

__all__ = ["MultiResourceSpace", "SLA_TOL"]

#: Relative slack on SLA rows (solver tolerance).
SLA_TOL = 1e-7
_FAMILY = ["tp", "pp", "micro_batches", "ga_steps", "gc", "zero"]


class MultiResourceSpace(AllocationSpace):
    """Configurations (node type, GPUs, CPUs, plan, placement) × jobs with multi-resource rows."""

    def __init__(self, problem: Problem, space_sharing: bool = False,
                 pruning: PairPruning | None = None, *, reconfigure: str | None = None) -> None:
        if not isinstance(problem, ReconfigProblem) or problem.reconfig is None:
            raise InputError("problem", type(problem).__name__, "MultiResourceSpace needs a ReconfigProblem")
        if space_sharing:
            raise InputError("options.space_sharing", True,
                             "space sharing is not modelled for reconfigurable jobs")
        mode = problem.reconfig.options.reconfigure if reconfigure is None else reconfigure
        if mode not in RECONFIGURE_MODES:
            from policyopt.errors import UnknownNameError
            raise UnknownNameError("reconfigure", mode, RECONFIGURE_MODES)
        self.problem = problem
        self.spec = problem.reconfig
        self.reconfigure = mode
        self.space_sharing = False
        self.pruning = pruning or PairPruning()
        cl = problem.cluster
        self.jobs = IndexSet("jobs", problem.job_ids)
        self.worker_types = IndexSet("worker_types", cl.names)
        n = len(self.jobs)
        self.counts = np.array([w.count for w in cl.worker_types], dtype=np.float64)
        self.gpus_per_server = np.array([w.gpus_per_server or max(w.count, 1) for w in cl.worker_types], float)
        self.prices = np.array([np.nan if w.price_per_hour is None else w.price_per_hour
                                for w in cl.worker_types], dtype=np.float64)
        self.gpn = {w.name: int(w.gpus_per_server) for w in cl.worker_types
                    if w.name in self.spec.node_types and w.gpus_per_server}
        self.nodes_per_type = np.array([w.count / self.gpn[w.name] if w.name in self.gpn else 0.0
                                        for w in cl.worker_types])
        arr = problem.arrays
        self.scale = np.ones(n)
        self.weights = arr.weights
        self.steps = arr.steps
        self.time_since_start = arr.time_since_start
        self.jobs_frame = self._jobs_frame()
        slots = self._build_slots()
        self._index_slots(slots)
        # no pair rows
        C = len(self.configs)
        self.pair_jobs = np.zeros((0, 2), np.int64)
        self.Tp = np.zeros((0, C, 2))
        self.pair_mask = np.zeros((0, C), bool)
        self.rows = IndexSet("rows", self.jobs.labels.tolist())
        self.row_scale = self.scale.copy()
        self.mask = self.single_mask
        self._thr_matrix: Triplets | None = None
        self.sla_ok = self.single_mask & (self.T_raw >= self.ref_thr[:, None] * (1 - 1e-12))
        guaranteed = np.flatnonzero(self.jobs_frame["guaranteed"].to_numpy(bool))
        self.sla_jobs = self._admit(guaranteed)
        self.queued_guaranteed = np.setdiff1d(guaranteed, self.sla_jobs)
        self._build_resources()
        self._check_slas()

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

    # ------------------------------------------------------------------ resource rows
    def _build_resources(self) -> None:
        """``resources`` rows (CPU and host memory per node type, tenant quotas) and their limits.

        A tenant's quota bounds what its admitted guaranteed jobs use (its reservation); its other
        jobs run best-effort on what is left."""
        spec = self.spec
        names: list[str] = []
        limits: list[float] = []
        rows, cols, vals = [], [], []
        flat, jj, cc = self.slot_index(self.single_mask)
        cfg_type = self.config_type[cc]
        r = 0
        for t, name in enumerate(self.worker_types.labels.tolist()):
            if name not in spec.node_types:
                continue
            node = spec.node_types[name]
            on = cfg_type == t
            for res, per_node, coef in (("cpus", node.cpus_per_node, self.cfg_cpus[cc[on]]),
                                        ("host_mem_gib", node.host_mem_per_node / GiB,
                                         self.H[jj[on], cc[on]] / GiB)):
                names.append(f"{name}.{res}")
                limits.append(self.nodes_per_type[t] * per_node)
                rows.append(np.full(on.sum(), r))
                cols.append(flat[on])
                vals.append(coef)
                r += 1
        tenant = self.jobs_frame["tenant"].to_numpy(dtype=object)
        in_quota = np.zeros(len(self.jobs), bool)
        in_quota[self.sla_jobs] = True
        most = self.quota_charge_cap()[jj]
        for name, q in spec.quotas.items():
            mine = (tenant[jj] == name) & in_quota[jj]
            for res, lim, coef in (("gpus", q.gpus, np.minimum(self.cfg_gpus[cc], most[:, 0])),
                                   ("cpus", q.cpus, np.minimum(self.cfg_cpus[cc], most[:, 1])),
                                   ("host_mem_gib", None if q.host_mem is None else q.host_mem / GiB,
                                    np.minimum(self.H[jj, cc], most[:, 2]) / GiB)):
                if lim is None:
                    continue
                names.append(f"quota.{name}.{res}")
                limits.append(float(lim))
                rows.append(np.full(mine.sum(), r))
                cols.append(flat[mine])
                vals.append(coef[mine])
                r += 1
        self.resources = IndexSet("resources", names)
        self.resource_limits = np.asarray(limits, float)
        self._resource_matrix = Triplets(
            np.concatenate(rows) if rows else np.zeros(0, np.int64),
            np.concatenate(cols) if cols else np.zeros(0, np.int64),
            np.concatenate(vals) if vals else np.zeros(0), (len(names), len(self.rows) * len(self.configs)))

    def quota_charge_cap(self) -> np.ndarray:
        """``(jobs × 3)``: the most a job's configuration is charged against its tenant's quota (GPUs,
        cores, host bytes). Under ``options.quota = "reserve"`` a running job pinned to its current
        configuration by the reconfiguration rule is charged at most its *request* (what admission
        reserved for it): what it holds beyond that is idle capacity that flowed on to it in an
        earlier round, and charging it in full would make its own guarantee infeasible. ``inf``
        for every other job, and for all jobs under ``"cap"``."""
        n = len(self.jobs)
        out = np.full((n, 3), np.inf)
        if self.spec.options.quota != "reserve" or n == 0:
            return out
        jf = self.jobs_frame
        pinned = jf["running"].to_numpy(bool) & ~jf["eligible"].to_numpy(bool)
        gpus = jf["gpus"].to_numpy(float)
        request = np.column_stack([gpus, jf["cpus"].to_numpy(float),
                                   self.ref_host + self.spec.options.host_mem_per_gpu * gpus])
        out[pinned] = request[pinned]
        return out

    def quota_rows(self) -> np.ndarray:
        """Mask over ``resources``: the tenant quota rows (``quota.<tenant>.<resource>``)."""
        return np.char.startswith(np.asarray(self.resources.labels, dtype=str), "quota.")

    def resource_matrix(self) -> Triplets:
        """``(resources × rows·configs)``: CPU cores / host GiB / quota usage of each slot."""
        return self._resource_matrix

    def slot_workers(self, rows: np.ndarray, configs: np.ndarray) -> np.ndarray:
        """The GPUs ``g_c`` configuration ``c`` uses (capacity and cost rows follow from this)."""
        return self.cfg_gpus[configs]

    def sla_matrix(self) -> Triplets:
        """``(admitted guaranteed jobs × rows·configs)``: 1 on the configurations ``S_m`` that meet
        the job's reference throughput (``T_raw[m,c] ≥ r_m``), so a row is the time on ``S_m``."""
        C = len(self.configs)
        pos = self.sla_jobs
        k, cc = np.nonzero(self.sla_ok[pos])
        return Triplets(k, pos[k] * C + cc, np.ones(k.size), (pos.size, len(self.rows) * C))

    # ------------------------------------------------------------------ SLAs
    def _check_slas(self) -> None:
        """The least total SLA shortfall ``u*`` of the admitted guaranteed jobs, and ``sla_report``.

        Admission (:meth:`_admit`, quota): guaranteed jobs in arrival order while the sum of their
        *requested* GPUs, cores and host bytes fits their tenant's quota and the cluster; the others
        are not guaranteed this round (``sla_report`` says so) and run best-effort on spare capacity.

        Guarantee of an admitted job ``m``: it runs all the time on configurations at least as fast
        as its reference, ``Σ_{c∈S_m} X[m,c] ≥ 1 − u*_m`` (this implies ``thr(m) ≥ (1 − u*_m)·r_m``;
        averaging a faster and a slower configuration over time is not a guarantee). ``u*``: fast
        path — every admitted job on its cheapest configuration in ``S_m``, if that fits every row
        (``u* = 0``); else the LP ``min Σ u`` s.t. ``Σ_{S_m} X + u_m ≥ 1``, job time, resource rows.
        """
        n = len(self.jobs)
        admitted = self.sla_jobs
        self.sla_shortfall = np.zeros(admitted.size)
        self.sla_allocation = np.zeros((n, len(self.configs)))
        if admitted.size:
            X0 = self._cheapest_sla_allocation()
            if X0 is not None and not self._violations(X0, sla=False, quotas=True):
                self.sla_allocation = X0
            else:
                self._solve_shortfall()
        self.sla_target = (1.0 - self.sla_shortfall) * (1.0 - SLA_TOL)
        self.sla_feasible = bool(np.all(self.sla_shortfall <= 1e-9))
        report = {int(m): {"job": str(self.jobs.labels[m]), "required": float(self.ref_thr[m]),
                           "admitted": True, "time_share": float(1.0 - u), "met": bool(u <= 1e-9),
                           **({} if u <= 1e-9 else {"reason": "resources: the guarantees cannot all be met "
                                                    "together (least total shortfall)"})}
                  for m, u in zip(admitted.tolist(), self.sla_shortfall.tolist())}
        for m in self.queued_guaranteed.tolist():
            report[m] = {"job": str(self.jobs.labels[m]), "required": float(self.ref_thr[m]), "admitted": False,
                         "time_share": 0.0, "met": False,
                         "reason": "quota: the requested resources exceed what the tenant's quota "
                                   "(or the cluster) has left after earlier guaranteed jobs"}
        self.sla_report = [report[m] for m in sorted(report)]

    def _admit(self, guaranteed: np.ndarray) -> np.ndarray:
        """Guaranteed jobs admitted in arrival order by requested resources (see _check_slas)."""
        if guaranteed.size == 0:
            return guaranteed
        jf = self.jobs_frame
        arr = np.array([np.nan if j.arrival is None else j.arrival for j in self.problem.jobs], float)
        key = np.where(np.isnan(arr), np.arange(arr.size, dtype=float), arr)
        order = guaranteed[np.argsort(key[guaranteed], kind="stable")]
        req = np.stack([jf["gpus"].to_numpy(float), jf["cpus"].to_numpy(float),
                        self.ref_host + self.spec.options.host_mem_per_gpu * jf["gpus"].to_numpy(float)], axis=1)
        tenant = jf["tenant"].to_numpy(dtype=object)
        t_of = {name: i for i, name in enumerate(self.worker_types.labels.tolist())}
        type_idx = np.array([t_of[t] for t in jf["node_type"]])
        cap = np.stack([self.counts, self.nodes_per_type * np.array(
            [self.spec.node_types[t].cpus_per_node if t in self.spec.node_types else 0.0
             for t in self.worker_types.labels.tolist()]), self.nodes_per_type * np.array(
            [self.spec.node_types[t].host_mem_per_node if t in self.spec.node_types else 0.0
             for t in self.worker_types.labels.tolist()])], axis=1)
        left_q = {name: np.array([np.inf if v is None else float(v) for v in (q.gpus, q.cpus, q.host_mem)])
                  for name, q in self.spec.quotas.items()}
        keep = []
        for m in order.tolist():  # sequential by definition (arrival order)
            q = left_q.get(tenant[m])
            t = type_idx[m]
            if np.all(req[m] <= cap[t] + 1e-9) and (q is None or np.all(req[m] <= q + 1e-9)):
                cap[t] -= req[m]
                if q is not None:
                    q -= req[m]
                keep.append(m)
        return np.array(sorted(keep), np.int64)

    def _cheapest_sla_allocation(self) -> np.ndarray | None:
        """Each admitted guaranteed job on its fewest-GPU (then cores, host) configuration in
        ``S_m``; None when some job has none."""
        n, C = len(self.jobs), len(self.configs)
        ok = self.sla_ok[self.sla_jobs]
        if not ok.any(axis=1).all():
            return None
        key = np.where(ok, self.cfg_gpus[None, :] * 1e6 + self.cfg_cpus[None, :] + self.H[self.sla_jobs] / 1e15,
                       np.inf)
        X = np.zeros((n, C))
        X[self.sla_jobs, np.argmin(key, axis=1)] = 1.0
        return X

    def _solve_shortfall(self) -> None:
        from policyopt.solver_api import SolverOptions, get_solver  # late: avoid import cycles
        model = Model("sla_shortfall")
        X = self._add_rows(model, "X", sla=False)
        pos = self.sla_jobs
        u = model.add_variables("u", (IndexSet("sla_jobs", self.jobs.labels[pos]),), 0.0, 1.0)
        sla = LinExpr.from_matrix(self.sla_matrix(), X, (u.dims[0],))
        model.add_constraints(sla + u.expr() >= 1.0, "sla")
        model.minimize(u.sum())
        raw = get_solver(None).solve(model.compile(), SolverOptions())
        if raw.x is None:
            self.sla_shortfall = np.ones(pos.size)
            return
        self.sla_shortfall = np.clip(u.value(raw.x), 0.0, 1.0)
        self.sla_shortfall[self.sla_shortfall < 1e-9] = 0.0
        self.sla_allocation = np.clip(X.value(raw.x), 0.0, 1.0)

    # ------------------------------------------------------------------ model building
    def _add_rows(self, model: Model, name: str, sla: bool, quotas: bool = True) -> Variable:
        X = model.add_variables(name, (self.rows, self.configs), 0.0, 1.0, mask=self.mask)
        model.add_constraints(LinExpr.from_matrix(self.membership_matrix(), X, (self.jobs,)) <= 1.0,
                              f"{name}_job_time")
        model.add_constraints(LinExpr.from_matrix(self.capacity_matrix(), X, (self.worker_types,))
                              <= self.counts, f"{name}_capacity")
        keep = np.ones(len(self.resources), bool) if quotas else ~self.quota_rows()
        if keep.any():
            M = self.resource_matrix()
            pos = np.cumsum(keep) - 1
            on = keep[M.rows]
            rows = IndexSet("resources", self.resources.labels[keep])
            sub = Triplets(pos[M.rows[on]], M.cols[on], M.vals[on], (int(keep.sum()), M.shape[1]))
            model.add_constraints(LinExpr.from_matrix(sub, X, (rows,)) <= self.resource_limits[keep],
                                  f"{name}_resources")
        if sla and self.sla_jobs.size:
            dim = IndexSet("sla_jobs", self.jobs.labels[self.sla_jobs])
            model.add_constraints(LinExpr.from_matrix(self.sla_matrix(), X, (dim,)) >= self.sla_target,
                                  f"{name}_sla")
        return X

    def add_allocation(self, model: Model, name: str = "X", *, quotas: bool = True) -> Variable:
        """``X`` with job-time, GPU-capacity, CPU/host-memory/quota and SLA rows (module docstring);
        ``quotas=False`` leaves the tenant quota rows out."""
        return self._add_rows(model, name, sla=True, quotas=quotas)

    def quotas_reserve(self, policy: Any = None) -> bool:
        """Whether tenant quotas only reserve for ``policy`` (``options.quota = "reserve"``, the
        default, and the policy's ``idle_capacity_helps``; a POP wrapper answers for its inner
        policy): capacity its allocation leaves idle may then flow past them."""
        inner = getattr(policy, "inner", policy)
        return self.spec.options.quota == "reserve" and bool(getattr(inner, "idle_capacity_helps", True))

    def after_solve(self, policy: Any, result: Any) -> Any:
        """With ``options.quota = "reserve"`` (the default): capacity the policy's allocation leaves
        idle flows on to the jobs the quotas held back (:func:`~.work_conservation.conserve_work`)."""
        if not self.quotas_reserve(policy):
            return result
        from .work_conservation import conserve_work

        return conserve_work(self, policy, result)

    # ------------------------------------------------------------------ numeric helpers
    def equal_share_throughput(self, T: np.ndarray | None = None) -> np.ndarray:
        """The normalizer ``thr(m, X_equal)``: the reference throughput ``r_m`` (requested resources,
        original plan). Under other data ``T`` (e.g. the agnostic all-ones), each job's best ``T``."""
        if T is None or T is self.T:
            return self.ref_thr.copy()
        best = np.max(np.where(self.single_mask, T, 0.0), axis=1)
        return np.where(best > 0, best, 1.0)

    def isolated_allocation(self) -> np.ndarray:
        """A feasible baseline ``X_iso`` (n × configs), Gavel's equal share in multi-resource form:
        admitted guaranteed jobs as in :attr:`sla_allocation` (their guarantees met); every other
        job on its *base* configuration (the fewest-GPU one meeting its reference throughput, else
        its fastest) for the fraction ``min(1, min_r left_r/(k_r·use_r(m)))``, ``left_r`` what the
        guarantees leave of capacity row ``r`` and ``k_r`` the number of those jobs using it.
        Within every row; positive for every job unless the guarantees take a whole resource."""
        X = self.sla_allocation.copy()
        n, C = X.shape
        jobs = np.setdiff1d(np.arange(n), self.sla_jobs)
        base = self._base_configs()[jobs]
        ok = base >= 0
        jobs, base = jobs[ok], base[ok]
        if jobs.size == 0:
            return X
        M = self._all_rows_matrix()
        limit = np.concatenate([self.counts, self.resource_limits])
        left = np.maximum(limit - M @ X.ravel(), 0.0)
        use = M.tocsr().tocsc()[:, jobs * C + base].toarray()  # (rows × jobs)
        k = np.maximum((use > 0).sum(axis=1), 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            frac = np.where(use > 0, (left / k)[:, None] / use, np.inf).min(axis=0)
        X[jobs, base] = np.clip(frac, 0.0, 1.0) * (1 - 1e-9)
        return X

    def _base_configs(self) -> np.ndarray:
        """Per job: the fewest-GPU configuration with ``T_raw ≥ r_m``, else the fastest (-1: none)."""
        n = len(self.jobs)
        meets = self.single_mask & (self.T_raw >= self.ref_thr[:, None] * (1 - 1e-12))
        g = np.where(meets, self.cfg_gpus[None, :] + 1e-6 * self.cfg_cpus[None, :], np.inf)
        out = np.where(meets.any(axis=1), np.argmin(g, axis=1),
                       np.argmax(np.where(self.single_mask, self.T_raw, -1.0), axis=1))
        out[~self.single_mask.any(axis=1)] = -1
        return out.astype(np.int64) if n else np.zeros(0, np.int64)

    def _all_rows_matrix(self) -> Triplets:
        """GPU capacity rows stacked over the resource rows."""
        a, b = self.capacity_matrix(), self.resource_matrix()
        return Triplets(np.concatenate([a.rows, b.rows + a.shape[0]]), np.concatenate([a.cols, b.cols]),
                        np.concatenate([a.vals, b.vals]), (a.shape[0] + b.shape[0], a.shape[1]))

    def usage(self, X: np.ndarray) -> dict[str, float]:
        """Resource use of an allocation per row (GPUs per type, then the resource rows)."""
        vals = self._all_rows_matrix() @ X.ravel()
        names = [f"{t}.gpus" for t in self.worker_types.labels.tolist()] + self.resources.labels.tolist()
        return dict(zip(names, vals.tolist()))

    def _violations(self, X: np.ndarray, tol: float = 1e-6, sla: bool = True, quotas: bool = False) -> list[str]:
        """Rows ``X`` breaks; quota rows only under ``"cap"`` or with ``quotas`` (the policy's stage)."""
        problems = AllocationSpace.check(self, X, tol)
        if len(self.resources):
            use = self.resource_matrix() @ X.ravel()
            over = use > self.resource_limits + tol * np.maximum(1.0, self.resource_limits)
            if self.spec.options.quota == "reserve" and not quotas:  # idle capacity may flow past a quota
                over &= ~self.quota_rows()
            for i in np.flatnonzero(over):
                problems.append(f"{self.resources.labels[i]} exceeded: {use[i]:.6g} > {self.resource_limits[i]:.6g}")
        if sla and self.sla_jobs.size:
            ratio = self.sla_matrix() @ X.ravel()
            short = ratio < self.sla_target - tol
            for k in np.flatnonzero(short):
                problems.append(f"SLA of job {self.jobs.labels[self.sla_jobs[k]]} not met: time at "
                                f"or above its reference {ratio[k]:.6g} < {self.sla_target[k]:.6g}")
        return problems

    def check(self, X: np.ndarray, tol: float = 1e-6) -> list[str]:
        """Violations of every row (time, GPUs, CPUs, host memory, quotas, SLAs); [] = feasible."""
        return self._violations(X, tol, sla=True)

    def config_of(self, col: int) -> dict[str, Any]:
        """The configuration of column ``col`` as a dict (node type, gpus, cpus, nodes, plan)."""
        r = self.config_table.iloc[int(col)]
        return {"node_type": str(r["node_type"]), "gpus": int(r["gpus"]), "cpus": int(r["cpus"]),
                "nodes": int(r["nodes"]), "plan": _plan_from_row(r)}


def _plan_tuple(plan: Any) -> tuple[Any, ...]:
    return (plan.dp, plan.tp, plan.pp, plan.micro_batches, plan.ga_steps, plan.gc, plan.zero)


def _plan_from_row(r: pd.Series) -> Any:
    from policyopt.perfmodel import Plan
    return Plan(dp=int(r["dp"]), tp=int(r["tp"]), pp=int(r["pp"]), micro_batches=int(r["micro_batches"]),
                ga_steps=int(r["ga_steps"]), gc=bool(r["gc"]), zero=str(r["zero"]))


def _label_of(row: pd.Series) -> str:
    return _plan_from_row(row).label


def _accepts(problem: Problem) -> bool:
    return isinstance(problem, ReconfigProblem) and problem.reconfig is not None


register_space(_accepts, MultiResourceSpace)
