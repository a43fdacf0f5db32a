r"""The rows of the multi-resource space beyond job time and GPU capacity: CPU cores, host memory,
tenant quotas and SLAs — how they are built, admitted, added to a model and checked.

:class:`MultiResourceRows` is the second layer of :class:`~policyopt.reconfig.space.MultiResourceSpace`
(over :class:`~.space_configs.JobConfigurations`; not used on its own). Rows added by
:meth:`MultiResourceSpace.add_allocation <policyopt.reconfig.space.MultiResourceSpace.add_allocation>`
(``X`` is the variable name):

* ``X_job_time``: ``Σ_c X[m,c] ≤ 1``;
* ``X_capacity`` (per node type ``t``): ``Σ_{m,c on t} g_c·X[m,c] ≤ GPUs_t``;
* ``X_resources``: per node type ``Σ c_c·X ≤ cores_t`` and ``Σ H[m,c]·X ≤ host_t`` (GiB), per tenant
  quota ``Σ_{m∈tenant} (g_c | c_c | H[m,c])·X ≤ quota`` (with ``options.quota = "reserve"``, the default, the
  policy decides under these rows, then idle capacity flows past them: :mod:`.work_conservation`;
  :meth:`~policyopt.reconfig.space.MultiResourceSpace.check` then does not hold them);
* ``X_sla`` (admitted guaranteed jobs): ``Σ_{c∈S_m} X[m,c] ≥ 1 − u*_m``, ``S_m`` the configurations
  at least as fast as the reference ``r_m`` (requested resources, original plan) — the job runs all
  the time at ``≥ r_m``, so ``thr(m) ≥ (1 − u*_m)·r_m`` — with ``u*`` the least total shortfall
  (``u* = 0`` whenever all guarantees can be met together). Guaranteed jobs are admitted in arrival
  order while their requested resources fit their tenant's quota; ``sla_report`` lists every
  guaranteed job with ``admitted``, ``met`` and the reason when not met.

The SLA rows hold ``(1 − u*_m)·(1 − SLA_TOL)`` (:data:`SLA_TOL`: solver tolerance).
"""
from __future__ import annotations

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import IndexSet, LinExpr, Model, Triplets, Variable

from .space_configs import JobConfigurations
from .spec import GiB

__all__ = ["MultiResourceRows", "SLA_TOL"]

#: Relative slack on SLA rows (solver tolerance).
SLA_TOL = 1e-7


class MultiResourceRows(JobConfigurations):
    """Resource, quota and SLA rows of :class:`~policyopt.reconfig.space.MultiResourceSpace`
    (module docstring): their matrices, the admission of guaranteed jobs, the least SLA shortfall,
    the rows added to a model and the check of an allocation against them."""

    nodes_per_type: np.ndarray
    sla_ok: np.ndarray
    sla_jobs: np.ndarray
    queued_guaranteed: np.ndarray

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
