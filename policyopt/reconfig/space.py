r"""The multi-resource, reconfiguration-aware allocation space.

:class:`MultiResourceSpace` is an :class:`~policyopt.allocation.AllocationSpace` whose columns are
*configurations* ``c = (node type, GPUs g_c, CPU cores c_c, nodes, plan)`` (labelled
``"<type>|g<g>|c<c>|n<nodes>|<plan>"``) and whose rows are jobs. ``X[m, c]`` is the fraction of
time job ``m`` runs with configuration ``c``; ``T[m, c] = 1/T_iter`` (steps/s) from the
performance model. Registered with :func:`~policyopt.policy.register_space` for
:class:`~policyopt.reconfig.spec.ReconfigProblem`, so every policy runs over it unchanged.

It is built in two layers, each in its own module:

* :mod:`.space_configs` — which configurations each job has (``options.reconfigure``: ``all``,
  ``plans``, ``resources``, ``none``, ``dp_only``, ``cpus_only``), the reference and current ones,
  dominance pruning and the reconfiguration cost (the ``(T − (N+1)·δ)/T < threshold`` rule as a
  constraint, optionally ``max(0, 1 − δ/L)`` in the objective);
* :mod:`.space_rows` — the rows :meth:`MultiResourceSpace.add_allocation` adds: ``X_job_time``
  (``Σ_c X[m,c] ≤ 1``), ``X_capacity`` (GPUs per node type), ``X_resources`` (cores and host
  memory per node type, tenant quotas) and ``X_sla`` (``Σ_{c∈S_m} X[m,c] ≥ 1 − u*_m`` for admitted
  guaranteed jobs, ``u*`` the least total shortfall), with the admission of guaranteed jobs and
  :attr:`MultiResourceSpace.sla_report`.

This module holds the space itself: its construction, the model building and checks, and the
numeric helpers. Normalization (``thr(m, X_equal)``, used by fairness policies): the reference
throughput ``r_m``, so a normalized throughput is the speedup over what the job asked for. Scale
factors are 1 (each configuration carries its own GPU count).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from policyopt.allocation import PairPruning
from policyopt.errors import InputError
from policyopt.modeling import IndexSet, Model, Triplets, Variable
from policyopt.policy import register_space
from policyopt.problem import Problem

from .space_configs import _plan_from_row
from .space_rows import SLA_TOL as SLA_TOL
from .space_rows import MultiResourceRows
from .spec import RECONFIGURE_MODES, ReconfigProblem

__all__ = ["MultiResourceSpace", "SLA_TOL"]


class MultiResourceSpace(MultiResourceRows):
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

    def slot_workers(self, rows: np.ndarray, configs: np.ndarray) -> np.ndarray:
        """The GPUs ``g_c`` configuration ``c`` uses (capacity and cost rows follow from this)."""
        return self.cfg_gpus[configs]

    def add_allocation(self, model: Model, name: str = "X", *, quotas: bool = True) -> Variable:
        """``X`` with job-time, GPU-capacity, CPU/host-memory/quota and SLA rows (:mod:`.space_rows`);
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

    def check(self, X: np.ndarray, tol: float = 1e-6) -> list[str]:
        """Violations of every row (time, GPUs, CPUs, host memory, quotas, SLAs); [] = feasible."""
        return self._violations(X, tol, sla=True)

    def config_of(self, col: int) -> dict[str, Any]:
        """The configuration of column ``col`` as a dict (node type, gpus, cpus, nodes, plan)."""
        r = self.config_table.iloc[int(col)]
        return {"node_type": str(r["node_type"]), "gpus": int(r["gpus"]), "cpus": int(r["cpus"]),
                "nodes": int(r["nodes"]), "plan": _plan_from_row(r)}


def _accepts(problem: Problem) -> bool:
    return isinstance(problem, ReconfigProblem) and problem.reconfig is not None


register_space(_accepts, MultiResourceSpace)
