r"""POP over reconfigurable problems: the :class:`~policyopt.pop.PopAdapter` of
:class:`~.spec.ReconfigProblem`.

:func:`policyopt.pop.pop` handles every problem; :meth:`ReconfigProblem.pop_adapter` returns a
:class:`ReconfigPopAdapter`, which changes what differs from plain problems:

* **admission first**: the full problem's admission of guaranteed jobs (arrival order, requested
  resources within the tenant's quota and the cluster — exactly :class:`~.space.MultiResourceSpace`'s
  rule, computed by that class over the guaranteed jobs with their requested configuration only) is
  decided once, before splitting. Guaranteed jobs it does not admit run best-effort in their group
  (as they do in the full problem) and keep the full problem's report;
* **strata and units**: jobs are stratified by (admitted-guaranteed / queued-guaranteed /
  best-effort, requested GPUs, model, tenant), so every group gets its share of the guarantees; nodes
  are split whole (a unit is ``gpus_per_server`` GPUs), so each group's nodes follow its GPUs;
* **nodes follow demand**: once the jobs are dealt, each type's nodes are re-split in proportion to
  what the groups need (:meth:`ReconfigPopAdapter.split_capacity`). Job ``m`` has the reference
  throughput ``r_m`` (requested resources and plan) and a best throughput per GPU
  ``e_m = max_c thr_c / g_c`` over its configurations; reaching a normalized throughput ``z``
  costs it ``w_m·z`` GPUs with ``w_m = ω_m·r_m/e_m`` (``ω_m`` its weight). An admitted guaranteed
  job needs ``a_m = min{g_c : thr_c ≥ r_m}`` GPUs for its SLA whatever ``z`` is. With ``A_g``,
  ``W_g`` the sums over group ``g`` (``a`` of its admitted jobs, ``w`` of the others) and ``C``
  the type's GPUs, every group reaches the same level ``z* = (C − ΣA)/ΣW`` when it gets
  ``A_g + z*·W_g`` GPUs — an even split instead leaves the group with the most demand at a lower
  level, which is the merged objective of max-min fairness. Nodes are whole: each group gets
  ``⌊(A_g + z*·W_g)/n⌋`` nodes (at least what its admitted jobs request), and the rest go one by
  one to the group of lowest ``(C_g − A_g)/W_g``. ``e_m`` and ``a_m`` come from the configurations
  of one representative job per (model, node type, GPUs, cores) request, the job's own requested
  configuration included (an estimate where the plan changes the configuration set: modes
  ``resources``, ``dp_only``);
* **the partition is checked**: the admitted guaranteed jobs of a group must fit, by their requested
  GPUs, cores and host memory, on the group's nodes of their type; otherwise ``k`` is lowered
  (reported in ``k_reason``);
* **each group's problem keeps the** ``reconfig`` **section**, and tenant quotas are split:
  group ``g`` of tenant ``τ`` gets, per resource ``r``,

  .. math:: Q_{τ,r,g} = R_{τ,r,g}\,(1 + 10^{-12}) + \max(0,\ Q_{τ,r} − R_{τ,r})\cdot s_g

  with ``R`` the requested resources of the admitted guaranteed jobs (``R_g`` those in group
  ``g``) and ``s_g`` the group's share of the cluster's GPUs (the 1e-12 pad absorbs rounding in the
  sequential admission). ``Σ_g Q_g = Q`` and every group admits exactly its share of the full
  problem's admitted jobs, so the merged allocation satisfies the full problem's quota rows as well
  as its GPU, core and host-memory rows (each group's nodes are its own);
* **each sub-problem is solved over the policy's registered space** (:class:`~.space.MultiResourceSpace`;
  its normalizer, the reference throughput, does not depend on the cluster);
* **the merged result** holds the union of the groups' allocations by configuration label (every
  label is a configuration of the full problem's space: :func:`allocation_array` maps them onto it)
  and ``extra["sla_report"]``: every guaranteed job, with ``met`` and, when not met, the reason —
  the shortfall is reported, never hidden. ``extra["pop"]["sla"]`` counts them. The merged result
  has no ``X``/``space`` (building the full space would cost about as much as one sub-problem's
  solve); build it with :func:`allocation_array` when needed.

``ReconfigPop`` and ``reconfig_pop`` are kept as aliases of :class:`~policyopt.pop.PopPolicy` and
:func:`~policyopt.pop.pop`.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.errors import InputError
from policyopt.policy import Policy
from policyopt.pop import Partition, PartResult, PopAdapter, PopPolicy, pop
from policyopt.problem import Problem
from policyopt.result import PolicyResult

from .catalog import reference_throughputs
from .space import MultiResourceSpace
from .spec import GiB, Quota, ReconfigProblem

__all__ = ["ReconfigPopAdapter", "allocation_array", "ReconfigPop", "reconfig_pop"]

RESOURCES = ("gpus", "cpus", "host_mem")
QUOTA_PAD = 1e-12
_WARMED: set[Any] = set()  # (models, node types, GPUs per node, options) whose grids this process cached


class ReconfigPopAdapter(PopAdapter):
    """POP's adapter for :class:`ReconfigProblem` (see the module docstring)."""

    overrides_space = False  # sub-problems are solved over the policy's registered space

    def __init__(self, problem: Problem) -> None:
        if not isinstance(problem, ReconfigProblem) or problem.reconfig is None:
            raise InputError("problem", type(problem).__name__, "ReconfigPopAdapter needs a ReconfigProblem")
        super().__init__(problem)
        self.spec = problem.reconfig
        n = len(problem.jobs)
        wts = problem.cluster.worker_types
        self.gpn = np.array([w.gpus_per_server if w.name in self.spec.node_types and w.gpus_per_server else 1
                             for w in wts], np.int64)
        tpos = {w.name: i for i, w in enumerate(wts)}
        rjobs = [self.spec.jobs[j.id] for j in problem.jobs]
        self.job_type = np.array([tpos[r.node_type] for r in rjobs], np.int64)
        self.tenant = np.array([j.entity or "" for j in problem.jobs], dtype=object)
        self.guaranteed = np.array([r.guaranteed for r in rjobs], bool)
        self.admitted = np.zeros(n, bool)
        self.request = np.zeros((n, 3))  # requested GPUs, cores, host bytes (admission's vector)
        self.queued_reports: dict[str, dict[str, Any]] = {}
        self._demand_cache: tuple[np.ndarray, np.ndarray] | None = None
        self._admit()

    # ------------------------------------------------------------------ the full problem's admission
    def _admit(self) -> None:
        """The full problem's admission: :class:`MultiResourceSpace` over the guaranteed jobs, each
        with its requested configuration only (``reconfigure="none"``). Admission depends on nothing
        else: arrival order (each job's key is its arrival, else its position in the full problem —
        made explicit when only some jobs have arrivals), requests, quotas and the cluster."""
        gidx = np.flatnonzero(self.guaranteed)
        if not gidx.size:
            return
        jobs = self.problem.jobs
        g_jobs = [jobs[i] for i in gidx.tolist()]
        missing = [j.arrival is None for j in g_jobs]
        if any(missing) and not all(missing):  # only then do positions in the full problem matter
            g_jobs = [replace(j, arrival=float(i)) if j.arrival is None else j for i, j in zip(gidx.tolist(), g_jobs)]
        only = ReconfigProblem(self.problem.cluster, tuple(g_jobs), (), self.problem.entities, (),
                               reconfig=replace(self.spec, jobs={j.id: self.spec.jobs[j.id] for j in g_jobs},
                                                options=replace(self.spec.options, reconfigure="none")))
        space = MultiResourceSpace(only)
        jf = space.jobs_frame
        gpus = jf["gpus"].to_numpy(float)
        self.request[gidx] = np.column_stack([gpus, jf["cpus"].to_numpy(float),
                                              space.ref_host + self.spec.options.host_mem_per_gpu * gpus])
        self.admitted[gidx[space.sla_jobs]] = True
        self.queued_reports = {str(r["job"]): r for r in space.sla_report if not r["admitted"]}

    # ------------------------------------------------------------------ partition
    def strata_priority(self) -> np.ndarray:
        """0: admitted guaranteed, 1: guaranteed but not admitted, 2: best-effort. Each class is
        dealt round-robin as one block, by increasing requested GPUs, so the admitted jobs' GPU
        requests of two groups differ by at most the largest request."""
        return np.where(self.admitted, 0, np.where(self.guaranteed, 1, 2))

    def strata_labels(self) -> list[str]:
        """(model, tenant) per job (after the class and the requested GPUs)."""
        return [f"{self.spec.jobs[j.id].model}|{t}" for j, t in zip(self.problem.jobs, self.tenant.tolist())]

    def capacity_units(self) -> np.ndarray:
        """Whole nodes: ``gpus_per_server`` GPUs of each reconfig node type."""
        return self.gpn

    def group_capacity(self, counts: np.ndarray) -> np.ndarray:
        """``(k × types × 3)``: GPUs, cores and host bytes of each group's nodes."""
        names = self.problem.cluster.names
        per_node = np.array([[self.spec.node_types[t].cpus_per_node, self.spec.node_types[t].host_mem_per_node]
                             if t in self.spec.node_types else [0.0, 0.0] for t in names])
        nodes = counts / self.gpn[None, :]
        return np.concatenate([counts[:, :, None].astype(float), nodes[:, :, None] * per_node[None, :, :]], axis=2)

    def split_capacity(self, group: np.ndarray, counts: np.ndarray) -> np.ndarray:
        """Whole nodes of each type in proportion to the groups' demand (module docstring):
        ``A_g + z*·W_g`` GPUs, at least the admitted jobs' requests, rounded to nodes so that the
        lowest ``(C_g − A_g)/W_g`` is as high as the units allow. Types without demand keep
        ``counts``."""
        a, w = self._demand()
        k, types = counts.shape
        out = counts.copy()
        for t in range(types):
            on = self.job_type == t
            n = int(self.gpn[t])
            units = int(counts[:, t].sum()) // n
            A = np.bincount(group[on], a[on], k)
            W = np.bincount(group[on], w[on], k)
            if units == 0 or W.sum() <= 0:
                continue
            C = float(units * n)
            z = (C - A.sum()) / W.sum()
            if z <= 0:
                continue
            need = np.bincount(group[on & self.admitted], self.request[on & self.admitted, 0], k)
            u = np.maximum(np.floor((A + z * W) / n), np.ceil(need / n - 1e-9)).astype(np.int64)
            if u.sum() > units:
                continue
            for _ in range(units - int(u.sum())):  # at most k leftover units: to the lowest level
                level = np.where(W > 0, (u * n - A) / np.where(W > 0, W, 1.0), np.inf)
                u[int(np.argmin(level))] += 1
            out[:, t] = u * n
            out[int(np.argmin(out[:, t])), t] += int(counts[:, t].sum()) - units * n  # a partial node
        return out

    def check_partition(self, group: np.ndarray, counts: np.ndarray) -> str | None:
        """The admitted guaranteed jobs of every group fit its nodes by their requests."""
        k, types = counts.shape
        need = np.zeros((k, types, 3))
        adm = np.flatnonzero(self.admitted)
        np.add.at(need, (group[adm], self.job_type[adm]), self.request[adm])
        cap = self.group_capacity(counts)
        over = need > cap * (1 + 1e-9) + 1e-9
        if not over.any():
            return None
        p, t, r = (int(v[0]) for v in np.nonzero(over))
        unit = GiB if r == 2 else 1.0
        return (f"group {p}'s guaranteed jobs (admitted in the full problem) request {need[p, t, r] / unit:.6g} "
                f"{('GPUs', 'cores', 'GiB of host memory')[r]} of {self.problem.cluster.names[t]}, "
                f"more than its {cap[p, t, r] / unit:.6g}")

    def _demand(self) -> tuple[np.ndarray, np.ndarray]:
        """Per job: ``a_m`` (admitted guaranteed jobs; 0 for others) and ``w_m`` (0 for admitted
        jobs), GPUs (module docstring). One :class:`MultiResourceSpace` over one best-effort
        representative per (model, node type, GPUs, cores) request; reference throughputs of every
        distinct requested configuration in one vectorized evaluation."""
        if self._demand_cache is not None:
            return self._demand_cache
        prob, spec = self.problem, self.spec
        rjobs = [spec.jobs[j.id] for j in prob.jobs]
        keys = [(r.model, r.node_type, r.gpus, r.cpus) for r in rjobs]
        _, first, rep_of = np.unique(np.array([str(k) for k in keys], dtype=object).astype(str),
                                     return_index=True, return_inverse=True)
        reps = [prob.jobs[i] for i in first.tolist()]
        rep_spec = replace(spec, jobs={j.id: replace(spec.jobs[j.id], guaranteed=False, current=None)
                                       for j in reps}, quotas={})
        rsp = MultiResourceSpace(ReconfigProblem(prob.cluster, tuple(reps), (), prob.entities, (),
                                                 reconfig=rep_spec))
        gpus_c = rsp.cfg_gpus.astype(float)
        thr = np.where(rsp.single_mask, rsp.T_raw, 0.0)          # (reps × configs)
        gpn = {w.name: int(w.gpus_per_server) for w in prob.cluster.worker_types
               if w.name in spec.node_types and w.gpus_per_server}
        ref = reference_throughputs(spec, list(prob.job_ids), gpn)  # every job's own request
        g_req = np.array([r.gpus for r in rjobs], float)
        eff = np.maximum((thr / gpus_c[None, :]).max(axis=1)[rep_of.ravel()], ref / g_req)
        w = np.asarray(prob.arrays.weights, float) * ref / eff
        a = np.zeros(len(rjobs))
        adm = np.flatnonzero(self.admitted)
        if adm.size:
            ok = thr[rep_of.ravel()[adm]] >= ref[adm, None] * (1 - 1e-12)
            a[adm] = np.minimum(np.where(ok, gpus_c[None, :], np.inf).min(axis=1), g_req[adm])
        w[self.admitted] = 0.0
        self._demand_cache = (a, w)
        return a, w

    # ------------------------------------------------------------------ sub-problems
    def group_quotas(self, members: np.ndarray, share: float, tenants: set[str]) -> dict[str, Quota]:
        """Quotas of a group (module docstring): its admitted jobs' requests plus ``share`` of the
        slack, for the tenants present in the group."""
        mine = np.zeros(len(self.problem.jobs), bool)
        mine[members] = True
        out = {}
        for name, q in self.spec.quotas.items():
            if name not in tenants:
                continue
            of_tenant = self.admitted & (self.tenant == name)
            total = self.request[of_tenant].sum(axis=0)
            group = self.request[of_tenant & mine].sum(axis=0)
            lim = [getattr(q, r) for r in RESOURCES]
            out[name] = Quota(*(None if v is None else float(g * (1 + QUOTA_PAD) + max(0.0, v - t) * share)
                                for v, g, t in zip(lim, group.tolist(), total.tolist())))
        return out

    def sub_problem(self, part: Partition, members: np.ndarray, p: int) -> Problem:
        """Group ``p``'s :class:`ReconfigProblem`: its jobs with their reconfig entries (guaranteed
        jobs the full problem does not admit marked best-effort), its nodes, its quotas."""
        prob = self.problem
        jobs = tuple(prob.jobs[i] for i in members.tolist())
        ids = {j.id for j in jobs}
        rjobs = {j.id: (replace(self.spec.jobs[j.id], guaranteed=False) if g and not a else self.spec.jobs[j.id])
                 for j, g, a in zip(jobs, self.guaranteed[members].tolist(), self.admitted[members].tolist())}
        tenants = {j.entity for j in jobs if j.entity is not None} | set(prob.entities)
        share = float(part.counts[p].sum()) / float(max(part.counts.sum(), 1))
        spec = replace(self.spec, jobs=rjobs, quotas=self.group_quotas(members, share, tenants))
        coloc = tuple(c for c in prob.colocated if c.jobs[0] in ids and c.jobs[1] in ids)
        return ReconfigProblem(self.group_cluster(part.counts[p]), jobs, coloc, prob.entities,
                               prob.colocated_types, reconfig=spec)

    def prepare_workers(self) -> None:
        """Build the space of one job per model once here, so the per-model configuration grids
        (cached by :func:`~.catalog.model_grid`) are computed once in this process instead of once
        per group, every round."""
        first: dict[str, int] = {}
        for i, j in enumerate(self.problem.jobs):
            first.setdefault(self.spec.jobs[j.id].model, i)
        key = (tuple(sorted((m, self.spec.models[m]) for m in first)), tuple(sorted(self.spec.node_types.items())),
               tuple(self.gpn.tolist()), self.spec.options)
        if key in _WARMED:  # this process has these grids cached already
            return
        members = np.array(sorted(first.values()), np.int64)
        counts = np.array([[w.count for w in self.problem.cluster.worker_types]], np.int64)
        part = Partition(1, 1, 0, {}, counts, self.problem.cluster.names)
        MultiResourceSpace(self.sub_problem(part, members, 0))
        _WARMED.add(key)

    @classmethod
    def make_space(cls, policy: Policy, context: Any, sub: Problem) -> AllocationSpace:
        """The policy's own space (the registered :class:`MultiResourceSpace`)."""
        return type(policy).make_space(policy, sub)

    @classmethod
    def part_report(cls, result: PolicyResult) -> dict[str, Any]:
        """The group's SLA report (the policy's, else its space's)."""
        rep = result.extra.get("sla_report")
        if rep is None:
            rep = getattr(result.space, "sla_report", [])
        return {"sla_report": list(rep)}

    # ------------------------------------------------------------------ merge
    def finish(self, result: PolicyResult, parts: list[PartResult]) -> None:
        """``extra["sla_report"]`` over every guaranteed job (the groups' reports, plus the full
        problem's for jobs it does not admit) and ``extra["pop"]["sla"]`` counts."""
        reports: dict[str, dict[str, Any]] = {}
        for p in parts:
            for r in p.report.get("sla_report", []):
                reports[r["job"]] = r
        reports.update(self.queued_reports)
        ordered = [reports[j] for j in self.problem.job_ids if j in reports]
        result.extra["sla_report"] = ordered
        admitted_ids = set(np.asarray(self.problem.job_ids, dtype=object)[self.admitted].tolist())
        result.extra["pop"] = {"sla": {
            "guaranteed": int(self.guaranteed.sum()), "admitted_full": int(self.admitted.sum()),
            "admitted": sum(bool(r["admitted"]) for r in ordered), "met": sum(bool(r["met"]) for r in ordered),
            "not_met": [r["job"] for r in ordered if r["job"] in admitted_ids and not r["met"]]}}


def allocation_array(space: AllocationSpace, allocation: dict[str, dict[str, float]]) -> np.ndarray:
    """``(rows × configs)`` array of an ``{job: {configuration label: fraction}}`` allocation over
    ``space`` (e.g. a merged POP result over the full problem's :class:`MultiResourceSpace`);
    unknown jobs or labels raise ``UnknownNameError``."""
    jobs = list(allocation)
    counts = [len(allocation[j]) for j in jobs]
    rows = np.repeat(space.jobs.positions(jobs), counts)
    labels = [c for j in jobs for c in allocation[j]]
    vals = np.fromiter((f for j in jobs for f in allocation[j].values()), float, len(labels))
    X = np.zeros((len(space.rows), len(space.configs)))
    X[rows, space.configs.positions(labels)] = vals
    return X


#: compatibility aliases: POP over reconfigurable problems is :func:`policyopt.pop.pop`
ReconfigPop = PopPolicy


def reconfig_pop(policy: Any, k: int, seed: int = 0, **kwargs: Any) -> PopPolicy:
    """Alias of :func:`policyopt.pop.pop` (which handles reconfigurable problems itself)."""
    return pop(policy, k, seed, **kwargs)
