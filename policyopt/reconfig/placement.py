r"""Per-node placement, rounding of fractional allocations, and the greedy growth engine.

:class:`NodePool` holds every node's free GPUs, cores and host bytes. A configuration of ``g``
GPUs is placed

* *consolidated*: ``g ≤ G`` (GPUs per node) on one node (best fit: the node left with the fewest
  free GPUs), ``g > G`` on ``ceil(g/G)`` nodes with all their GPUs free;
* *spread* (when allowed and consolidated fails): over the fewest nodes whose free GPUs add up to
  ``g``; for ``g ≤ G`` the job then communicates over the inter-node link and runs the best plan for
  that placement (:func:`~policyopt.reconfig.catalog.spread_variant`) — "best plan per placement".

Cores and host bytes go to each node in proportion to the GPUs placed there.

:func:`integralize` turns a fractional ``X`` (one policy's LP optimum) into one configuration per job
for a round: guaranteed jobs first on a configuration meeting their SLA target, then the others by
priority (``Σ_c X[m,c]``, optionally divided by the share of time already received), each on its
largest-``X`` configuration that can be placed, then fewer-GPU ones; finally :class:`Greedy` grows
jobs into what is left (``fill``). An LP vertex has at most as many fractional jobs as coupling rows,
so with enough capacity the rounding loses little. With ``reconfig.options.quota = "reserve"`` (the
default) the tenant quotas admit the guarantees and then no longer bound the rounding (the LP's
work-conserving stage decided how far a guaranteed job goes past its quota); under ``"cap"``, or for
a policy with ``idle_capacity_helps = False``, they bound it throughout.

:class:`Greedy` is also the engine of the ``rubick_greedy`` / ``synergy_like`` baselines: admission
in a given order, growth by the best marginal normalized throughput per resource unit, and
shrinking of the lowest-slope job above its minimum when that raises the total or is needed for a
guarantee. :meth:`Greedy.lift_quotas` ends the quotas' hold (the baselines' quota-free growth phase
under ``"reserve"``).
"""
from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

from .catalog import spread_variant
from .space import MultiResourceSpace

if TYPE_CHECKING:
    from policyopt.perfmodel import Plan

__all__ = ["Placement", "NodePool", "Assignment", "Greedy", "integralize"]


@dataclass(frozen=True)
class Placement:
    """Where one job runs: node type, (node, GPUs, cores, host bytes) per node, the plan's column
    and the throughput the placement gives (steps/s; lower than the column's when spread)."""

    node_type: int
    col: int
    nodes: tuple[int, ...]
    gpus: tuple[int, ...]
    cpus: tuple[float, ...]
    host: tuple[float, ...]
    thr: float
    spread: bool = False
    spread_plan: dict | None = None  # plan columns of the spread variant when it differs


class NodePool:
    """Free GPUs / cores / host bytes of every node of every node type of a space."""

    def __init__(self, space: MultiResourceSpace, allow_spread: bool = True) -> None:
        self.space = space
        self.allow_spread = allow_spread
        self.gpn = space.gpus_per_server.astype(np.int64)
        self.free_gpu: list[np.ndarray] = []
        self.free_cpu: list[np.ndarray] = []
        self.free_mem: list[np.ndarray] = []
        self.cap_cpu: list[float] = []
        self.cap_mem: list[float] = []
        spec = space.spec
        for t, name in enumerate(space.worker_types.labels.tolist()):
            count = int(round(space.counts[t]))
            gpn = int(self.gpn[t])
            full, rest = divmod(count, gpn)
            gpus = np.array([gpn] * full + ([rest] if rest else []), np.int64)
            node = spec.node_types.get(name)
            cpn = node.cpus_per_node if node else 0
            mem = node.host_mem_per_node if node else 0.0
            self.free_gpu.append(gpus.copy())
            self.free_cpu.append(gpus * (cpn / gpn))
            self.free_mem.append(gpus * (mem / gpn))
            self.cap_cpu.append(float(cpn))
            self.cap_mem.append(float(mem))
        # tenant quota use
        self.quota_left = {name: np.array([np.inf if v is None else float(v) for v in
                                           (q.gpus, q.cpus, q.host_mem)]) for name, q in spec.quotas.items()}
        # quotas bound the admitted guaranteed jobs (the tenant's reservation), each charged at most
        # its quota_charge_cap (a job pinned past its quota under "reserve": its request)
        self.tenant = np.where(np.isin(np.arange(len(space.jobs)), space.sla_jobs),
                               space.jobs_frame["tenant"].to_numpy(dtype=object), None)
        self.charge_cap = space.quota_charge_cap()
        # running jobs' current nodes (``CurrentConfig.node_ids``), for a job on its current column
        self.home: dict[int, tuple[int, ...]] = {}
        for m, jid in enumerate(space.jobs.labels.tolist()):
            cur = spec.jobs[jid].current
            col = int(space.current_col[m])
            if cur is not None and cur.node_ids is not None and col >= 0:
                t = int(space.config_type[col])
                if max(cur.node_ids) < self.free_gpu[t].size:
                    self.home[m] = tuple(int(x) for x in cur.node_ids)

    # ------------------------------------------------------------------ quotas
    def _quota_of(self, job: int) -> np.ndarray | None:
        """What is left of the job's tenant quota (None: the job is not guaranteed, or no quota)."""
        tenant = self.tenant[job]
        return None if tenant is None else self.quota_left.get(str(tenant))

    def _quota_ok(self, job: int, g: float, c: float, h: float) -> bool:
        q = self._quota_of(job)
        return q is None or bool(np.all(np.minimum([g, c, h], self.charge_cap[job]) <= q + 1e-9))

    def _quota_use(self, job: int, g: float, c: float, h: float, sign: float) -> None:
        q = self._quota_of(job)
        if q is not None:
            q -= sign * np.minimum([g, c, h], self.charge_cap[job])

    # ------------------------------------------------------------------ placement
    def place(self, job: int, col: int) -> Placement | None:
        """Reserve resources for ``job`` on configuration ``col``; None when nothing fits. A running
        job on its current configuration goes to its current nodes first when they have room."""
        sp = self.space
        t = int(sp.config_type[col])
        g, c = int(sp.cfg_gpus[col]), float(sp.cfg_cpus[col])
        h = float(sp.H[job, col])
        if not self._quota_ok(job, g, c, h):
            return None
        gpn = int(self.gpn[t])
        fg, fc, fm = self.free_gpu[t], self.free_cpu[t], self.free_mem[t]
        #: (nodes, GPUs, cores, host bytes per node, throughput, spread, plan)
        placed: tuple[tuple[int, ...], tuple[int, ...], tuple[float, ...], tuple[float, ...], float, bool,
                      Any] | None = None
        home = self.home.get(job, ()) if col == sp.current_col[job] else ()
        if g <= gpn:
            ok = np.flatnonzero((fg >= g) & (fc >= c - 1e-9) & (fm >= h - 1e-6))
            if ok.size:
                at_home = np.isin(ok, home) if len(home) == 1 else np.zeros(ok.size, bool)
                best = ok[np.lexsort((fg[ok] - g, ~at_home))[0]]
                placed = ((int(best),), (g,), (c,), (h,), float(sp.T[job, col]), False, None)
        else:
            k = -(-g // gpn)
            share = np.full(k, gpn, np.int64)
            share[-1] = g - gpn * (k - 1)
            ok = np.flatnonzero((fg == gpn) & (fc >= c * gpn / g - 1e-9) & (fm >= h * gpn / g - 1e-6))
            if ok.size >= k:
                if len(home) == k and np.isin(home, ok).all():  # its current nodes, in their order
                    ok = np.concatenate([np.asarray(home, np.int64), ok[~np.isin(ok, home)]])
                placed = (tuple(int(x) for x in ok[:k]), tuple(int(x) for x in share),
                          tuple(float(c * s / g) for s in share), tuple(float(h * s / g) for s in share),
                          float(sp.T[job, col]), False, None)
        if placed is None and self.allow_spread:
            placed = self._spread(job, col, t, g, c, h)
        if placed is None:
            return None
        nodes, gs, cs, hs, thr, spread, plan = placed
        for nd, gi, ci, hi in zip(nodes, gs, cs, hs):
            fg[nd] -= gi
            fc[nd] -= ci
            fm[nd] -= hi
        self._quota_use(job, g, c, h, +1.0)
        return Placement(t, col, nodes, gs, cs, hs, thr, spread, plan)

    def _spread(self, job: int, col: int, t: int, g: int, c: float, h: float) -> tuple | None:
        """Fewest nodes whose free GPUs add up to ``g`` with proportional cores and host bytes."""
        fg, fc, fm = self.free_gpu[t], self.free_cpu[t], self.free_mem[t]
        if fg.sum() < g or g < 2:
            return None
        # per node GPUs it could contribute, limited by proportional cores and memory
        per_gpu_c, per_gpu_h = c / g, h / g
        cap = np.minimum(fg, np.floor(np.minimum(fc / max(per_gpu_c, 1e-12) + 1e-9,
                                                 fm / max(per_gpu_h, 1e-12) + 1e-6))).astype(np.int64)
        order = np.argsort(-cap, kind="stable")
        cum = np.cumsum(cap[order])
        if cum[-1] < g:
            return None
        k = int(np.searchsorted(cum, g) + 1)
        nodes = order[:k]
        gs = cap[nodes].copy()
        gs[-1] -= cum[k - 1] - g
        keep = gs > 0
        nodes, gs = nodes[keep], gs[keep]
        if nodes.size < 2:
            return None
        sp = self.space
        thr, plan = float(sp.T[job, col]), None
        gpn = int(self.gpn[t])
        if g <= gpn:  # now inter-node: best plan for this placement (or the same plan if fixed)
            row = sp.config_table.iloc[col]
            spec = sp.spec
            name = sp.worker_types.labels[t]
            model = sp.jobs_frame["model"].iat[job]
            fixed = None if sp.reconfigure in ("all", "plans") else _plan_of(row)
            best = spread_variant(spec.models[model], spec.node_types[name], gpn, spec.options, g, int(c), fixed)
            if best is None:
                return None
            factor = sp.T[job, col] / sp.T_raw[job, col] if sp.T_raw[job, col] > 0 else 1.0
            thr = float(factor / best["iter_time"])
            plan = {k: best[k] for k in ("dp", "tp", "pp", "micro_batches", "ga_steps", "gc", "zero")}
        return (tuple(int(x) for x in nodes), tuple(int(x) for x in gs), tuple(float(c * x / g) for x in gs),
                tuple(float(h * x / g) for x in gs), thr, True, plan)

    def snapshot(self) -> tuple:
        """A copy of the free capacities (for exact undo)."""
        return ([a.copy() for a in self.free_gpu], [a.copy() for a in self.free_cpu],
                [a.copy() for a in self.free_mem], {k: v.copy() for k, v in self.quota_left.items()})

    def restore(self, snap: tuple) -> None:
        g, c, m, q = snap
        self.free_gpu = [a.copy() for a in g]
        self.free_cpu = [a.copy() for a in c]
        self.free_mem = [a.copy() for a in m]
        self.quota_left = {k: v.copy() for k, v in q.items()}

    def reserve(self, job: int, p: Placement) -> None:
        """Take exactly the resources of placement ``p`` (the inverse of :meth:`release`)."""
        t = p.node_type
        for nd, gi, ci, hi in zip(p.nodes, p.gpus, p.cpus, p.host):
            self.free_gpu[t][nd] -= gi
            self.free_cpu[t][nd] -= ci
            self.free_mem[t][nd] -= hi
        self._quota_use(job, float(sum(p.gpus)), float(sum(p.cpus)), float(sum(p.host)), +1.0)

    def release(self, job: int, p: Placement) -> None:
        """Give a placement's resources back."""
        t = p.node_type
        for nd, gi, ci, hi in zip(p.nodes, p.gpus, p.cpus, p.host):
            self.free_gpu[t][nd] += gi
            self.free_cpu[t][nd] += ci
            self.free_mem[t][nd] += hi
        self._quota_use(job, float(sum(p.gpus)), float(sum(p.cpus)), float(sum(p.host)), -1.0)


def _plan_of(row: Any) -> "Plan":
    from policyopt.perfmodel import Plan
    return Plan(dp=int(row["dp"]), tp=int(row["tp"]), pp=int(row["pp"]), micro_batches=int(row["micro_batches"]),
                ga_steps=int(row["ga_steps"]), gc=bool(row["gc"]), zero=str(row["zero"]))


@dataclass
class Assignment:
    """One configuration (or none) per job, with its placement."""

    placements: dict[int, Placement] = field(default_factory=dict)

    def X(self, space: MultiResourceSpace) -> np.ndarray:
        """The 0/1 allocation matrix of the assignment."""
        X = np.zeros((len(space.jobs), len(space.configs)))
        for m, p in self.placements.items():
            X[m, p.col] = 1.0
        return X

    def throughputs(self, n: int) -> np.ndarray:
        out = np.zeros(n)
        for m, p in self.placements.items():
            out[m] = p.thr
        return out


class Greedy:
    """Admission, growth and shrinking over a space's per-job configuration lists.

    Value of job ``m`` on column ``c``: the normalized throughput ``T[m,c]/r_m``. Resource cost of a
    column: ``g_c + c_c/(cores per GPU of its node) + H[m,c]/(host bytes per GPU)`` (GPU-equivalents),
    so a slope is normalized throughput per GPU-equivalent. Shrinking moves a job one step down
    (to its most valuable cheaper column, never below its minimum; guaranteed jobs only among
    SLA-meeting columns); each attempt shrinks at most ``max_shrink_steps`` times.
    """

    def __init__(self, space: MultiResourceSpace, pool: NodePool | None = None,
                 max_shrink_steps: int = 16) -> None:
        self.space = space
        self.pool = pool or NodePool(space)
        self.assign = Assignment()
        self.max_shrink_steps = max_shrink_steps
        sp = space
        n = len(sp.jobs)
        self.value = np.where(sp.single_mask, sp.T / sp.ref_thr[:, None], 0.0)
        t = sp.config_type
        cpg = np.array([self.pool.cap_cpu[k] / max(self.pool.gpn[k], 1) for k in range(len(sp.worker_types))])
        hpg = np.array([self.pool.cap_mem[k] / max(self.pool.gpn[k], 1) for k in range(len(sp.worker_types))])
        self.cost = (sp.cfg_gpus[None, :] + sp.cfg_cpus[None, :] / np.maximum(cpg[t], 1e-12)[None, :]
                     + sp.H / np.maximum(hpg[t], 1e-12)[None, :])
        self.cols = [np.flatnonzero(sp.single_mask[m]) for m in range(n)]
        self.sla_ok = sp.sla_ok
        # admitted guaranteed jobs that have an SLA-meeting configuration are placed only on those
        self.guaranteed = np.zeros(n, bool)
        self.guaranteed[sp.sla_jobs] = True
        self.guaranteed &= self.sla_ok.any(axis=1)
        self.allowed = np.where(self.guaranteed[:, None], self.sla_ok, sp.single_mask)
        self.minimum = self._minimum_cols()
        self.cur_col = np.full(n, -1, np.int64)
        self.cur_val = np.zeros(n)
        self.floor = np.where(self.minimum >= 0, self.cost[np.arange(n), np.maximum(self.minimum, 0)], np.inf)
        # per placed job: its one-step-down column and the value lost per unit of cost freed
        self.down_col = np.full(n, -1, np.int64)
        self.down_slope = np.full(n, np.inf)

    def _minimum_cols(self) -> np.ndarray:
        """Each job's minimum: guaranteed — cheapest column meeting its SLA; others — cheapest."""
        cost = np.where(self.allowed, self.cost - 1e-9 * self.value, np.inf)
        out = np.argmin(cost, axis=1)
        out[~self.allowed.any(axis=1)] = -1
        return out

    def lift_quotas(self) -> None:
        """From now on tenant quotas no longer bound placements (what is placed keeps its place)."""
        self.pool.quota_left = {}

    # ------------------------------------------------------------------ state
    def col_of(self, m: int) -> int:
        return int(self.cur_col[m])

    def val_of(self, m: int) -> float:
        return float(self.cur_val[m])

    def _record(self, m: int, p: Placement | None) -> None:
        if p is None:
            self.assign.placements.pop(m, None)
            self.cur_col[m], self.cur_val[m] = -1, 0.0
            self.down_col[m], self.down_slope[m] = -1, np.inf
            return
        self.assign.placements[m] = p
        c = p.col
        self.cur_col[m], self.cur_val[m] = c, p.thr / self.space.ref_thr[m]
        cols = self.cols[m]
        cost = self.cost[m, cols]
        cand = self.allowed[m, cols] & (cost < self.cost[m, c] - 1e-12) & (cost >= self.floor[m] - 1e-12)
        if not cand.any():
            self.down_col[m], self.down_slope[m] = -1, np.inf
            return
        lower = cols[cand]
        d = int(lower[np.argmax(self.value[m, lower] - 1e-9 * self.cost[m, lower])])
        freed = self.cost[m, c] - self.cost[m, d]
        self.down_col[m] = d
        self.down_slope[m] = (self.cur_val[m] - self.value[m, d]) / max(freed, 1e-12)

    def try_set(self, m: int, col: int) -> bool:
        """Move job ``m`` to column ``col`` (-1: remove) if it can be placed; keeps it otherwise."""
        old = self.assign.placements.get(m)
        if old is not None:
            self.pool.release(m, old)
            self._record(m, None)
        if col < 0:
            return True
        p = self.pool.place(m, col)
        if p is not None and self.guaranteed[m] and p.thr < self.space.ref_thr[m] * (1 - 1e-9):
            self.pool.release(m, p)  # a spread placement too slow for the guarantee
            p = None
        if p is None:
            if old is not None:  # put the old placement back exactly
                self.pool.reserve(m, old)
                self._record(m, old)
            return False
        self._record(m, p)
        return True

    def _put_back(self, m: int, old: Placement | None) -> None:
        """Undo a move of job ``m``: release its placement and re-take ``old`` exactly."""
        new = self.assign.placements.get(m)
        if new is not None:
            self.pool.release(m, new)
            self._record(m, None)
        if old is not None:
            self.pool.reserve(m, old)
            self._record(m, old)

    def admit(self, order: Sequence[int], candidates: Mapping[int, Sequence[int]] | None = None,
              shrink: bool = True) -> None:
        """Place jobs in ``order`` on their first placeable candidate (default: their minimum).
        With ``shrink``: when nothing fits, shrink lowest-slope jobs above their minimum if that is
        needed for a guarantee or the admitted job's value exceeds the loss."""
        for m in order:
            m = int(m)
            cands = list(candidates[m]) if candidates is not None and m in candidates else (
                [int(self.minimum[m])] if self.minimum[m] >= 0 else [])
            if any(self.try_set(m, c) for c in cands):
                continue
            if shrink and cands:
                self._make_room(m, cands[0])

    def _make_room(self, m: int, col: int) -> bool:
        """Shrink lowest-slope jobs (one step each time) until ``m`` fits on ``col``; keep the change
        if ``m`` is guaranteed or its gain beats the total loss, else restore the state exactly."""
        gain = float(self.value[m, col]) - self.val_of(m)
        snap = self.pool.snapshot()
        saved_placements = dict(self.assign.placements)
        saved = (self.cur_col.copy(), self.cur_val.copy(), self.down_col.copy(), self.down_slope.copy())
        loss = 0.0
        excluded = np.zeros(len(self.space.jobs), bool)
        excluded[m] = True
        for _ in range(self.max_shrink_steps + 1):
            if self.try_set(m, col):
                if self.guaranteed[m] or gain > loss + 1e-12:
                    return True
                break
            victim = self._lowest_slope(excluded)
            if victim is None:
                break
            k, down = victim
            before = self.val_of(k)
            if not self.try_set(k, down):
                excluded[k] = True
                continue
            loss += before - self.val_of(k)
            if not self.guaranteed[m] and loss >= gain:
                break
        self.pool.restore(snap)
        self.assign.placements = saved_placements
        self.cur_col, self.cur_val, self.down_col, self.down_slope = saved
        return False

    def _lowest_slope(self, excluded: np.ndarray) -> tuple[int, int] | None:
        """The placed job whose one-step shrink loses the least value per unit of cost freed —
        (job, lower column) — or None."""
        slope = np.where(excluded, np.inf, self.down_slope)
        k = int(np.argmin(slope))
        if not np.isfinite(slope[k]):
            return None
        return k, int(self.down_col[k])

    def grow(self, jobs: Sequence[int] | None = None, shrink: bool = False,
             max_moves: int | None = None) -> int:
        """Repeatedly apply the upgrade with the best gain per extra cost that can be placed
        (pending jobs start from any allowed column); with ``shrink``, the best blocked upgrades
        (at most 2 per job) may then shrink lower-slope jobs when the gain exceeds the loss.
        Returns the number of moves."""
        sp = self.space
        pool_jobs = np.arange(len(sp.jobs)) if jobs is None else np.asarray(jobs, np.int64)
        version = np.zeros(len(sp.jobs), np.int64)
        heap: list[tuple[float, int, int, int]] = []
        for m in pool_jobs.tolist():
            heap.extend(self._upgrades(m, int(version[m])))
        heapq.heapify(heap)
        moves = 0
        blocked: list[tuple[float, int, int]] = []
        while heap and (max_moves is None or moves < max_moves):
            s, m, c, ver = heapq.heappop(heap)
            if ver != version[m] or self.value[m, c] <= self.val_of(m) + 1e-12:
                continue
            before, old = self.val_of(m), self.assign.placements.get(m)
            if self.try_set(m, c):
                if self.val_of(m) <= before + 1e-12:  # placed spread and slower: undo
                    self._put_back(m, old)
                    continue
                moves += 1
                version[m] += 1
                for item in self._upgrades(m, int(version[m])):
                    heapq.heappush(heap, item)
            elif shrink:
                blocked.append((s, m, c))
        if shrink:
            for _s, m, c in sorted(blocked)[: 2 * len(sp.jobs)]:
                if self.value[m, c] > self.val_of(m) + 1e-12 and self._make_room(m, c):
                    moves += 1
        return moves

    def _upgrades(self, m: int, ver: int) -> list[tuple[float, int, int, int]]:
        """Heap items ``(−slope, job, column, version)`` for every better allowed column of ``m``."""
        c0 = self.col_of(m)
        cols = self.cols[m]
        cols = cols[self.allowed[m, cols]]
        v0 = self.val_of(m)
        better = cols[self.value[m, cols] > v0 + 1e-12]
        if better.size == 0:
            return []
        base = self.cost[m, c0] if c0 >= 0 else 0.0
        extra = self.cost[m, better] - base
        gain = self.value[m, better] - v0
        slope = np.where(extra > 1e-12, gain / np.maximum(extra, 1e-12), 1e12 * gain)
        return [(-s, m, int(c), ver) for s, c in zip(slope.tolist(), better.tolist())]


def integralize(space: MultiResourceSpace, X: np.ndarray, priority: np.ndarray | None = None,
                fill: bool = True, allow_spread: bool = True, reserve: bool | None = None) -> Assignment:
    """One configuration per job for a round from a fractional allocation (module docstring).
    ``reserve``: the quotas admit the guarantees, then no longer bound the rounding (default:
    :meth:`~.space.MultiResourceSpace.quotas_reserve`, i.e. ``options.quota == "reserve"``)."""
    sp = space
    n = len(sp.jobs)
    g = Greedy(sp, NodePool(sp, allow_spread))
    Xs = np.where(sp.single_mask, X[:n], 0.0)
    share = Xs.sum(axis=1)
    prio = share if priority is None else priority
    gj = np.flatnonzero(g.guaranteed)
    top_g = np.array([np.max(np.where(g.sla_ok[m] & (Xs[m] > 1e-6), sp.cfg_gpus, 0.0)) for m in gj.tolist()])
    order_g = gj[np.argsort(-top_g, kind="stable")]  # largest first (packing)
    rest = np.flatnonzero(~g.guaranteed)
    rest = rest[share[rest] > 1e-6]
    rest = rest[np.lexsort((-Xs[rest].max(axis=1), -prio[rest]))]
    cands: dict[int, list[int]] = {}
    for m in np.concatenate([order_g, rest]).tolist():
        cols = g.cols[m]
        if g.guaranteed[m]:
            cols = cols[g.sla_ok[m, cols]]
        x = Xs[m, cols]
        chosen = cols[np.argsort(-x, kind="stable")]
        chosen = chosen[x[np.argsort(-x, kind="stable")] > 1e-6]
        top = int(chosen[0]) if chosen.size else int(cols[np.argmax(sp.T[m, cols])]) if cols.size else -1
        if top < 0:
            cands[m] = []
            continue
        # then fewer-GPU-or-equal alternatives, fastest first
        alt = cols[(sp.cfg_gpus[cols] <= sp.cfg_gpus[top]) & ~np.isin(cols, chosen)]
        alt = alt[np.argsort(-sp.T[m, alt], kind="stable")]
        cands[m] = [int(c) for c in np.concatenate([chosen, alt])]
    # guarantees first at their cheapest SLA-meeting configuration (packs whenever that allocation
    # does), then each guaranteed job moves to its LP choice if it still fits, then the others
    g.admit(order_g.tolist(), shrink=False)
    if sp.quotas_reserve() if reserve is None else reserve:  # quotas admitted the guarantees; the LP may pass them
        g.lift_quotas()
    for m in order_g.tolist():
        for c in cands[m]:
            if g.col_of(m) == c or sp.cfg_gpus[c] < sp.cfg_gpus[max(g.col_of(m), 0)] or g.try_set(m, c):
                break
    g.admit(rest.tolist(), cands, shrink=False)
    if fill:
        g.grow()
    return g.assign
