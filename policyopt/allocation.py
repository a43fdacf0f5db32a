"""The allocation space of a :class:`~policyopt.problem.Problem`: the domain layer policies write in.

Rows of the allocation ``X`` are *combinations*: every job alone (``n`` rows) and, with space
sharing, every viable pair of jobs sharing workers (``p`` rows, labelled ``"a|b"``). Columns are
*configurations*: the physical worker types and the placement variants (``<type>_unconsolidated``).
``X[r, c]`` is the fraction of time combination ``r`` spends on configuration ``c``.

Expressions (all :class:`~policyopt.modeling.LinExpr` over ``jobs``, built as one sparse matrix):

* effective throughput ``thr(m) = Σ_c T[m,c]·X[m,c] + Σ_{pairs k∋m} Σ_c T[k,c,m]·X[k,c]``;
* equal-share throughput ``thr(m, X_equal)`` with ``X_equal[m,c] = count_c / Σ count`` (numeric);
* cost rate ``Σ_c price_c·sf_m·X[m,c]`` ($/h; a pair's cost is split evenly between its two jobs).

Constraints added by :meth:`AllocationSpace.add_allocation`:

* ``0 ≤ X ≤ 1``; slots where the combination cannot run (zero throughput, more workers than the
  type has, a consolidated configuration for a job that cannot fit one server when the data has
  its unconsolidated throughput) do not exist;
* per job, total time over all its rows: ``Σ_{r∋m} Σ_c X[r,c] ≤ 1``;
* per physical type ``t``: ``Σ_r sf_r Σ_{c on t} X[r,c] ≤ count_t`` (a pair occupies one set of
  ``sf`` workers; consolidated and unconsolidated configurations share the same GPUs).

Pair rows, their exact pruning and their generation at scale from a type-level table are
described in :mod:`policyopt.pair_candidates`.
"""
from __future__ import annotations

import copy
import functools
from typing import Any

import numpy as np

from .errors import InputError
from .modeling import IndexSet, LinExpr, Model, Triplets, Variable
from .pair_candidates import PairPruning, build_pairs
from .problem import Problem, physical_type

__all__ = ["PairPruning", "AllocationSpace", "FEASIBILITY_TOL"]

#: every allocation a policy returns meets its time and capacity rows to this, relative to
#: ``max(1, rhs)`` (:meth:`AllocationSpace.make_feasible`)
FEASIBILITY_TOL = 1e-9


class AllocationSpace:
    """Index sets, throughput data and the sparse matrices of ``thr``, time and capacity rows."""

    def __init__(self, problem: Problem, space_sharing: bool = False,
                 pruning: PairPruning | None = None) -> None:
        self.problem = problem
        self.space_sharing = space_sharing
        self.pruning = pruning or PairPruning()
        cl = problem.cluster
        arr = problem.arrays
        self.jobs = IndexSet("jobs", arr.ids)
        (type_labels, cfg_labels, self.counts, self.gpus_per_server, self.prices, self.config_type,
         self.config_unconsolidated, self._variants) = _cluster_arrays(cl, arr.configs)
        self.worker_types = IndexSet("worker_types", type_labels)
        self.configs = IndexSet("configs", cfg_labels)
        C = len(self.configs)
        self.scale = arr.scale
        self.weights = arr.weights
        self.steps = arr.steps
        self.time_since_start = arr.time_since_start
        T = arr.T
        self.T = T
        # pairs
        self.pair_jobs = np.zeros((0, 2), np.int64)
        self.Tp = np.zeros((0, C, 2))
        self.pair_mask = np.zeros((0, C), bool)
        if space_sharing and (problem.colocated or problem.colocated_types):
            self._build_pairs()
        p = self.pair_jobs.shape[0]
        lab = self.jobs.labels.astype(str, copy=False)
        if p:
            pair_labels = np.char.add(np.char.add(lab[self.pair_jobs[:, 0]], "|"), lab[self.pair_jobs[:, 1]])
            self.rows = IndexSet("rows", np.concatenate([lab, pair_labels]))
        else:  # the rows are the jobs (reuse the label array; no re-conversion of n strings)
            self.rows = IndexSet("rows", lab)
        self.row_scale = np.concatenate([self.scale, self.scale[self.pair_jobs[:, 0]]]) if p else self.scale.copy()
        self._thr_matrix: Triplets | None = None

    # ------------------------------------------------------------------ masks and pairs
    @functools.cached_property
    def single_mask(self) -> np.ndarray:
        """``(n × configs)``: where each job can run alone (:meth:`_single_mask`), computed when first
        read (gathered from its class's row where :meth:`declare_classes` said so)."""
        cls = self.__dict__.get("_classes")
        if cls is not None:
            return cls[1].take(cls[0], axis=0)  # (take: ~4× fancy indexing's speed on rows)
        return self._single_mask()

    def class_rows(self, T: np.ndarray, scale: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:attr:`single_mask` and :meth:`equal_share_throughput` of jobs of data ``T`` (jobs ×
        configs) and scale factors ``scale`` on this space's cluster and configurations (both
        depend on a job's data only)."""
        mask = self.single_mask_of(T, scale)
        return mask, self._best_placement(T, mask) @ (self.counts / self.counts.sum())

    def declare_classes(self, group: np.ndarray, mask_rows: np.ndarray, equal_share: np.ndarray) -> None:
        """Declare that job ``j`` has the data of class ``group[j]``, whose :meth:`class_rows` (on a
        space of this cluster and these configurations) are ``mask_rows`` and ``equal_share`` (a
        caller that knows it, such as an aggregated re-solve): :attr:`single_mask` and
        :meth:`equal_share_throughput` are then gathered from them — the same numbers. Before
        either is read."""
        self.__dict__["_classes"] = (group, mask_rows, equal_share)

    def declared_classes(self) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """``(group, mask_rows, equal_share)`` given to :meth:`declare_classes` (job ``j`` of class
        ``group[j]``, whose :attr:`single_mask` row is ``mask_rows[group[j]]``), or ``None`` when
        none were declared or the space has pair rows (then :attr:`mask` is not the jobs' rows)."""
        cls = self.__dict__.get("_classes")
        return None if cls is None or self.num_pairs else cls

    @functools.cached_property
    def mask(self) -> np.ndarray:
        """``(rows × configs)``: :attr:`single_mask`, then the pair rows' :attr:`pair_mask`."""
        return np.vstack([self.single_mask, self.pair_mask]) if self.num_pairs else self.single_mask

    def _single_mask(self) -> np.ndarray:
        return self.single_mask_of(self.T, self.scale)

    def single_mask_of(self, T: np.ndarray, scale: np.ndarray) -> np.ndarray:
        """:attr:`single_mask` of jobs of throughputs ``T`` (jobs × configs) and scale factors
        ``scale`` on this space's cluster and configurations (a job's row depends on its data only)."""
        counts_c, c_u, c_p, gps_p, distinct = self._variants
        # built configurations × jobs, transposed at the end: a test broadcast over jobs × a few
        # configurations runs numpy's inner loop a few items at a time (~90 µs at 2,048 jobs × 6
        # configurations here), over one configuration's jobs at a time ~45 µs
        T_t = np.ascontiguousarray(T.T)
        mask = T_t > 0
        mask &= scale <= counts_c[:, None]
        # a consolidated slot is impossible when the job cannot fit on one server and the data gives
        # its unconsolidated throughput for that type (placement-sensitive configurations): per
        # unconsolidated configuration ``c_u[k]``, the first consolidated one of its type ``c_p[k]``
        # (found once per cluster, :func:`_cluster_arrays`), one vectorized test over those pairs × jobs
        if c_u.size:
            spread_only = (scale > gps_p[:, None]) & (T_t[c_u] > 0)
            if distinct:
                mask[c_p] &= ~spread_only
            else:  # a physical configuration backs several variants
                for k in range(c_p.size):
                    mask[c_p[k], spread_only[k]] = False
        return np.ascontiguousarray(mask.T)

    def _build_pairs(self) -> None:
        """Pair rows (:func:`policyopt.pair_candidates.build_pairs`)."""
        built = build_pairs(self)
        if built is not None:
            self.pair_jobs, self.Tp, self.pair_mask = built

    @property
    def num_pairs(self) -> int:
        return int(self.pair_jobs.shape[0])

    def slot_index(self, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(flat, r, c)``: the True entries of a 2-D ``mask`` (``single_mask``, ``pair_mask`` or
        ``mask``) in C order, ``flat = r·C + c``. Computed once per mask array and kept (every matrix
        of a build reads the same slots; ``np.nonzero`` over jobs × configurations dominates
        building them); the masks are never changed in place once a space is built."""
        cache: dict[int, tuple[np.ndarray, ...]] = self.__dict__.setdefault("_slot_cache", {})
        hit = cache.get(id(mask))
        if hit is None or hit[0] is not mask:
            flat = np.flatnonzero(mask)
            r, c = np.divmod(flat, mask.shape[1])
            for a in (flat, r, c):
                a.flags.writeable = False  # shared by every matrix built from them
            hit = cache[id(mask)] = (mask, flat, r, c)
        return hit[1], hit[2], hit[3]

    # ------------------------------------------------------------------ numeric helpers
    def best_placement_throughput(self, T: np.ndarray | None = None) -> np.ndarray:
        """``(n × types)``: each job's throughput per physical type at its best allowed placement."""
        return self._best_placement(self.T if T is None else T, self.single_mask)

    def _best_placement(self, T: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """:meth:`best_placement_throughput` of the jobs of data ``T`` and mask rows ``mask``."""
        allowed = np.where(mask, T, 0.0)
        out = np.zeros((T.shape[0], len(self.worker_types)))
        for c, t in enumerate(self.config_type.tolist()):  # one vectorized max per configuration
            np.maximum(out[:, t], allowed[:, c], out=out[:, t])
        return out

    def equal_share_throughput(self, T: np.ndarray | None = None) -> np.ndarray:
        """``thr(m, X_equal)``, ``X_equal[m,t] = count_t/Σ count`` (best allowed placement per type).
        Under the space's own data (``T`` None or ``self.T``) computed once and handed out as copies
        (a max-min solve asks three times)."""
        own = T is None or T is self.T
        hit = self.__dict__.get("_eq_share") if own else None
        if hit is None:
            cls = self.__dict__.get("_classes") if own else None
            if cls is not None:  # (declare_classes: the class's, gathered)
                hit = cls[2].take(cls[0])
            else:
                hit = self.best_placement_throughput(T) @ (self.counts / self.counts.sum())
            if own:
                self.__dict__["_eq_share"] = hit
        return hit.copy()

    def isolated_allocation(self) -> np.ndarray:
        """``X_iso`` (n × configs): each of n jobs gets 1/n of every type divided by its scale
        factor, rows capped at 1; on each type it uses its best allowed placement. Feasible."""
        n = len(self.jobs)
        X = np.zeros((n, len(self.configs)))
        best_cfg = self.best_config_per_type()
        share = (self.counts[None, :] / n) / self.scale[:, None]  # (n × types)
        for t in range(len(self.worker_types)):
            cfg = best_cfg[:, t]
            ok = cfg >= 0
            X[np.flatnonzero(ok), cfg[ok]] = share[ok, t]
        tot = X.sum(axis=1)
        over = tot > 1
        X[over] /= tot[over, None]
        return X

    def best_config_per_type(self) -> np.ndarray:
        """``(n × types)`` index of each job's best allowed configuration on each type (-1: none)."""
        n, nt = len(self.jobs), len(self.worker_types)
        best = np.full((n, nt), -1, np.int64)
        bestv = np.zeros((n, nt))
        for c in range(len(self.configs)):
            t = self.config_type[c]
            v = np.where(self.single_mask[:, c], self.T[:, c], 0.0)
            better = v > bestv[:, t]
            best[better, t] = c
            bestv[better, t] = v[better]
        return best

    def throughput_values(self, X: np.ndarray, T: np.ndarray | None = None, Tp: np.ndarray | None = None) -> np.ndarray:
        """Numeric ``thr(m)`` for an allocation ``X`` of shape (rows × configs). Without pair rows,
        when the throughput matrix is not built yet, by a running sum over the configurations in
        order (each job's products added as the matrix product adds them: the same numbers)."""
        T_ = self.T if T is None else T
        if (not self.num_pairs and X.shape == T_.shape and X.shape[1]
                and not (T_ is self.T and self._thr_matrix is not None)
                and type(self).throughput_matrix is AllocationSpace.throughput_matrix):
            P = np.where(self.single_mask, T_ * X, 0.0)
            out = P[:, 0].copy()  # (column by column: ~7× faster than ``np.add.accumulate`` along rows)
            for c in range(1, P.shape[1]):
                out += P[:, c]
            return out + 0.0  # (+0.0: a sum of −0.0 reads 0.0, as from 0.0 up)
        M = self.throughput_matrix(T, Tp)
        return M @ X.ravel()

    # ------------------------------------------------------------------ sparse matrices
    def throughput_matrix(self, T: np.ndarray | None = None, Tp: np.ndarray | None = None) -> Triplets:
        """``(n × rows·configs)`` matrix with ``thr = M @ vec(X)`` (C order)."""
        own = (T is None or T is self.T) and (Tp is None or Tp is self.Tp)
        if own and self._thr_matrix is not None:
            return self._thr_matrix
        T_ = self.T if T is None else T
        Tp_ = self.Tp if Tp is None else Tp
        n, C = len(self.jobs), len(self.configs)
        R = len(self.rows)
        flat, jj, _ = self.slot_index(self.single_mask)
        rows = [jj]
        cols = [flat]
        vals = [np.take(T_, flat)]
        if self.num_pairs:
            _, kk, kc = self.slot_index(self.pair_mask)
            for side in (0, 1):
                rows.append(self.pair_jobs[kk, side])
                cols.append((n + kk) * C + kc)
                vals.append(Tp_[kk, kc, side])
        M = Triplets(_cat(rows), _cat(cols), _cat(vals), (n, R * C))
        if own:
            self._thr_matrix = M
        return M

    def membership_matrix(self) -> Triplets:
        """``(n × rows·configs)``: 1 where slot (r, c) belongs to a row containing job m."""
        n, C = len(self.jobs), len(self.configs)
        flat, jj, _ = self.slot_index(self.single_mask)
        rows, cols = [jj], [flat]
        if self.num_pairs:
            _, kk, kc = self.slot_index(self.pair_mask)
            for side in (0, 1):
                rows.append(self.pair_jobs[kk, side])
                cols.append((n + kk) * C + kc)
        r = _cat(rows)
        ones = _ones(r.size)  # a read-only view: no array of ones per slot
        return Triplets(r, _cat(cols), ones, (n, len(self.rows) * C))

    def slot_workers(self, rows: np.ndarray, configs: np.ndarray) -> np.ndarray:
        """Workers of type(c) that slot (r, c) occupies: the row's scale factor (a pair occupies one
        set). Subclasses whose configurations carry their own GPU counts override this one hook;
        capacity and cost rows follow."""
        return self.row_scale[rows]

    def capacity_matrix(self) -> Triplets:
        """``(types × rows·configs)``: workers of type(c) slot (r, c) occupies (:meth:`slot_workers`)."""
        C = len(self.configs)
        flat, rr, cc = self.slot_index(self.mask)
        return Triplets(self.config_type[cc], flat, self.slot_workers(rr, cc),
                        (len(self.worker_types), len(self.rows) * C))

    def cost_matrix(self) -> Triplets:
        """``(n × rows·configs)``: $/h of slot (r, c) charged to job m (price × workers; pairs split)."""
        if np.any(np.isnan(self.prices)):
            missing = [self.worker_types.labels[i] for i in np.flatnonzero(np.isnan(self.prices))]
            raise InputError(f"cluster.worker_types.{missing[0]}.price_per_hour", None,
                             "cost-aware policies need a price for every worker type")
        n, C = len(self.jobs), len(self.configs)
        price_c = self.prices[self.config_type]
        flat, jj, cc = self.slot_index(self.single_mask)
        rows, cols, vals = [jj], [flat], [price_c[cc] * self.slot_workers(jj, cc)]
        if self.num_pairs:
            _, kk, kc = self.slot_index(self.pair_mask)
            for side in (0, 1):
                rows.append(self.pair_jobs[kk, side])
                cols.append((n + kk) * C + kc)
                vals.append(0.5 * price_c[kc] * self.slot_workers(n + kk, kc))
        return Triplets(_cat(rows), _cat(cols), _cat(vals), (n, len(self.rows) * C))

    def project(self, X: np.ndarray, counts: np.ndarray | None = None) -> np.ndarray:
        """``X`` made exactly feasible for the time and capacity rows (a solver meets them only to
        its tolerance): clipped to [0, 1], each job's slots scaled so its time is ≤ 1, then each
        type's slots so its capacity (``counts``, default the cluster's) holds. Only scales down, so
        ``≤`` rows with nonnegative coefficients stay satisfied; changes ``X`` by about the solver's
        tolerance."""
        x = np.clip(X, 0.0, 1.0).ravel()
        mem = self.membership_matrix()
        busy = np.bincount(mem.rows, weights=x[mem.cols], minlength=len(self.jobs))
        f = np.minimum(1.0, 1.0 / np.maximum(busy, 1e-300))
        slot = np.ones(x.size)
        np.minimum.at(slot, mem.cols, f[mem.rows])
        x = x * slot
        cap = self.capacity_matrix()
        use = np.bincount(cap.rows, weights=cap.vals * x[cap.cols], minlength=len(self.worker_types))
        cap_t = np.asarray(self.counts if counts is None else counts, float)
        g = np.minimum(1.0, cap_t / np.maximum(use, 1e-300))
        scale = np.ones(x.size)
        np.minimum.at(scale, cap.cols, g[cap.rows])
        return (x * scale).reshape(X.shape)

    def rows_repairable(self) -> bool:
        """Whether :meth:`project` keeps every row of the space's model met: the space's rows are the
        base ones (time and capacity, nonnegative coefficients, ``≤``), so scaling ``X`` down keeps
        them all. False for subclasses that add rows (e.g. ``≥`` guarantees) or count workers their
        own way (:meth:`slot_workers`); :meth:`make_feasible` leaves their allocations as they are."""
        cls = type(self)
        return (cls.add_allocation is AllocationSpace.add_allocation
                and cls.slot_workers is AllocationSpace.slot_workers and cls.project is AllocationSpace.project)

    def make_feasible(self, X: np.ndarray, tol: float = FEASIBILITY_TOL) -> tuple[np.ndarray, dict[str, float] | None]:
        """``(X, None)`` — the same array, untouched — when the allocation ``X`` (rows × configs,
        already in [0, 1] and 0 off :attr:`mask`) meets every time row ``Σ_{r∋m} Σ_c X[r,c] ≤ 1`` and
        capacity row ``Σ_r sf_r Σ_{c on t} X[r,c] ≤ count_t`` to ``tol·max(1, rhs)``; else
        ``(project(X), report)``: :meth:`project` scales the offending jobs' and types' slots down
        until every such row holds exactly, and ``report`` gives the largest excess found
        (``time_excess``: ``max_m time_m − 1``; ``capacity_excess``: ``max_t (use_t − count_t)/max(1,
        count_t)``) and ``max_change``, the largest change of an entry of ``X``. A solver meets its rows
        only to its primal tolerance (HiGHS: 1e-7); this makes its answer exactly feasible. Spaces
        whose rows :meth:`project` does not keep (:meth:`rows_repairable`) get ``(X, None)``. Two
        matrix-vector products with ``X`` and a bincount (pairs: two) when nothing is exceeded."""
        if X.size == 0 or not self.rows_repairable():
            return X, None
        n = len(self.jobs)
        busy = X @ np.ones(X.shape[1])  # (each row's time; ~5× ``X.sum(axis=1)``'s speed on a few columns)
        time_m = busy[:n]
        if self.num_pairs:  # a pair row's time counts for both its jobs
            time_m = time_m + np.bincount(self.pair_jobs.ravel(), weights=np.repeat(busy[n:], 2), minlength=n)
        use = np.bincount(self.config_type, weights=self.row_scale @ X, minlength=len(self.worker_types))
        time_excess = float(time_m.max()) - 1.0
        cap_excess = float(np.max((use - self.counts) / np.maximum(1.0, self.counts)))
        if not (time_excess > tol or cap_excess > tol):  # (NaN: nothing to repair by scaling)
            return X, None
        Y = self.project(X)
        return Y, {"time_excess": time_excess, "capacity_excess": cap_excess,
                   "max_change": float(np.max(np.abs(Y - X)))}

    def restrict(self, jobs: np.ndarray, pairs: np.ndarray | None = None) -> "AllocationSpace":
        """The space of the jobs at positions ``jobs`` (in that order) on the same cluster, with the
        pair rows ``pairs`` (positions in ``pair_jobs``; default: every pair whose two jobs are kept).
        Rows are the kept jobs, then the kept pairs. Per-job arrays, masks and pair data are sliced,
        nothing is rebuilt; ``problem`` still refers to the whole problem. Only for spaces whose rows
        are the base ones (subclasses that add rows or count workers differently must override)."""
        cls = type(self)
        if (cls.add_allocation is not AllocationSpace.add_allocation
                or cls.slot_workers is not AllocationSpace.slot_workers):
            raise NotImplementedError(f"{cls.__name__}.restrict: the space adds its own rows")
        jobs = np.asarray(jobs, np.int64)
        n = len(self.jobs)
        inv = np.full(n, -1, np.int64)
        inv[jobs] = np.arange(jobs.size)
        if pairs is None:
            pairs = np.flatnonzero((inv[self.pair_jobs] >= 0).all(axis=1)) if self.num_pairs else np.zeros(0, np.int64)
        pairs = np.asarray(pairs, np.int64)
        pj = inv[self.pair_jobs[pairs]]
        if np.any(pj < 0):
            raise InputError("pairs", pairs[(pj < 0).any(axis=1)].tolist(), "pair rows need both jobs kept")
        sub = copy.copy(self)
        sub.jobs = IndexSet("jobs", self.jobs.labels[jobs])
        for name in ("T", "scale", "weights", "steps", "time_since_start", "single_mask"):
            setattr(sub, name, getattr(self, name)[jobs])
        sub.pair_jobs, sub.Tp, sub.pair_mask = pj.reshape(-1, 2), self.Tp[pairs], self.pair_mask[pairs]
        rows = np.concatenate([jobs, n + pairs])
        sub.rows = IndexSet("rows", self.rows.labels[rows])
        sub.row_scale, sub.mask = self.row_scale[rows], self.mask[rows]
        sub._thr_matrix = None
        sub.__dict__.pop("_slot_cache", None)
        sub.__dict__.pop("_eq_share", None)
        sub.__dict__.pop("_classes", None)  # (declare_classes: its group is over this space's jobs)
        return sub

    # ------------------------------------------------------------------ model building
    def add_allocation(self, model: Model, name: str = "X") -> Variable:
        """Add ``X`` (rows × configs, ``0 ≤ X ≤ 1`` on viable slots) with the per-job time rows
        and per-type capacity rows."""
        X = model.add_variables(name, (self.rows, self.configs), 0.0, 1.0, mask=self.mask)
        model.add_matrix_rows(self.membership_matrix(), X, (self.jobs,), 1.0, f"{name}_job_time")
        model.add_matrix_rows(self.capacity_matrix(), X, (self.worker_types,), self.counts, f"{name}_capacity")
        return X

    def throughput(self, X: Variable, T: np.ndarray | None = None, Tp: np.ndarray | None = None) -> LinExpr:
        """``thr(m)`` as an expression over ``jobs`` (optionally with other throughput data)."""
        return LinExpr.from_matrix(self.throughput_matrix(T, Tp), X, (self.jobs,))

    def cost_rate(self, X: Variable) -> LinExpr:
        """``cost(m) = Σ_c price_c·sf_m·X[m,c]`` ($/h) over ``jobs``."""
        return LinExpr.from_matrix(self.cost_matrix(), X, (self.jobs,))

    def agnostic_throughputs(self) -> tuple[np.ndarray, np.ndarray]:
        """Throughput data a heterogeneity-agnostic policy sees: 1 wherever the job can run (pairs:
        each job's packed/alone ratio, so sharing still reads as a fraction of a whole GPU)."""
        T1 = np.where(self.single_mask, 1.0, 0.0)
        Tp1 = self.Tp.copy()
        if self.num_pairs:
            with np.errstate(divide="ignore", invalid="ignore"):
                for side in (0, 1):
                    alone = self.T[self.pair_jobs[:, side]]
                    Tp1[:, :, side] = np.where(alone > 0, self.Tp[:, :, side] / alone, 0.0)
        return T1, Tp1

    # ------------------------------------------------------------------ reading results
    def split(self, X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(single rows, pair rows) of a full ``X`` array."""
        n = len(self.jobs)
        return X[:n], X[n:]

    def allocation_dict(self, X: np.ndarray) -> dict[str, dict[str, float]]:
        """``{job: {config: fraction}}`` for every configuration the job can use."""
        single, _ = self.split(X)
        mask = self.single_mask
        jj, cc = np.nonzero(mask)  # row-major: each job's slots are consecutive
        items = list(zip(np.asarray(self.configs.labels, dtype=object)[cc].tolist(), single[jj, cc].tolist()))
        ends = np.cumsum(mask.sum(axis=1)).tolist()
        starts = [0, *ends[:-1]]
        return {jid: dict(items[a:b]) for jid, a, b in zip(self.jobs.labels.tolist(), starts, ends)}

    def colocated_list(self, X: np.ndarray, tol: float = 1e-9) -> list[dict[str, Any]]:
        """``[{"jobs": [a, b], "worker_type": c, "fraction": f}]`` for pair slots with ``f > tol``."""
        _, pairs = self.split(X)
        if not self.num_pairs:
            return []
        kk, kc = np.nonzero((pairs > tol) & self.pair_mask)
        labels = self.jobs.labels
        cfgs = self.configs.labels
        return [{"jobs": [str(labels[self.pair_jobs[k, 0]]), str(labels[self.pair_jobs[k, 1]])],
                 "worker_type": str(cfgs[c]), "fraction": float(pairs[k, c])} for k, c in zip(kk, kc)]

    def full_from_single(self, X_single: np.ndarray) -> np.ndarray:
        """Embed an (n × configs) single-job allocation into the (rows × configs) space."""
        X = np.zeros((len(self.rows), len(self.configs)))
        X[: len(self.jobs)] = X_single
        return X

    def after_solve(self, policy: Any, result: Any) -> Any:
        """A stage a space may add after any policy's solve over it (called once per
        ``Policy.solve``, with the policy and its :class:`~policyopt.result.PolicyResult`); returns
        the result to hand back. Here: ``result`` unchanged."""
        return result

    def check(self, X: np.ndarray, tol: float = 1e-6) -> list[str]:
        """Violations of the allocation constraints by ``X`` (empty list = feasible)."""
        problems = []
        if np.any(X < -tol) or np.any(X > 1 + tol):
            problems.append("X outside [0, 1]")
        if np.any(np.abs(X[~self.mask]) > tol):
            problems.append("X non-zero on a slot that cannot run")
        t = self.membership_matrix() @ X.ravel()
        if np.any(t > 1 + tol):
            problems.append(f"job time > 1 (max {t.max():.6g})")
        cap = self.capacity_matrix() @ X.ravel()
        if np.any(cap > self.counts + tol * np.maximum(1, self.counts)):
            problems.append(f"capacity exceeded: {cap} > {self.counts}")
        return problems


#: per (cluster, configurations): the arrays every space of that cluster derives from it, read-only
#: and shared (a simulator or a scheduler poses thousands of problems on one cluster; ~15 small
#: conversions per space otherwise), emptied when it holds :data:`_CLUSTER_ARRAYS_MAX` pairs
_CLUSTER_ARRAYS: dict[tuple[Any, tuple[str, ...]], tuple[Any, ...]] = {}
_CLUSTER_ARRAYS_MAX = 64
#: the last lookup's (cluster object, configurations, arrays): the same cluster object asked again
#: (a scheduler's or a benchmark's next problem) is answered without hashing its records
_LAST_CLUSTER: tuple[Any, tuple[str, ...], tuple[Any, ...]] | None = None


def _cluster_arrays(cl: Any, configs: Any) -> tuple[Any, ...]:
    """``(type labels, configuration labels, counts, gpus per server, prices, type of each
    configuration, whether each configuration is an unconsolidated variant, variants)`` of a cluster
    and a problem's configurations (kept per pair: :data:`_CLUSTER_ARRAYS`); ``variants`` is what
    :meth:`AllocationSpace._single_mask` reads: each configuration's type count, the unconsolidated
    configurations ``c_u`` with the first consolidated configuration of their type ``c_p``, the
    GPUs per server of those types, and whether the ``c_p`` are distinct."""
    global _LAST_CLUSTER
    cfgs = tuple(configs)
    last = _LAST_CLUSTER
    if last is not None and last[0] is cl and last[1] == cfgs:  # (no hashing of the cluster's records)
        return last[2]
    key = (cl, cfgs)
    hit = _CLUSTER_ARRAYS.get(key)
    if hit is not None:
        _LAST_CLUSTER = (cl, cfgs, hit)
        return hit
    wts = cl.worker_types
    type_names = [w.name for w in wts]
    cfg_names = list(key[1])
    pos = {t: i for i, t in enumerate(type_names)}
    phys = [physical_type(c) for c in cfg_names]
    missing = [t for t in phys if t not in pos]
    if missing:  # (as IndexSet.position says it)
        IndexSet("worker_types", np.asarray(type_names)).position(missing[0])
    counts = [float(w.count) for w in wts]
    gps = [float(w.gpus_per_server or max(w.count, 1)) for w in wts]
    prices = [np.nan if w.price_per_hour is None else float(w.price_per_hour) for w in wts]
    ctype = [pos[t] for t in phys]
    unc = [c != t for c, t in zip(cfg_names, phys)]
    # per unconsolidated configuration, the first consolidated configuration of its type
    first_phys: dict[int, int] = {}
    for c, (t, u) in enumerate(zip(ctype, unc)):
        if not u:
            first_phys.setdefault(t, c)
    pairs = [(c, first_phys[t]) for c, (t, u) in enumerate(zip(ctype, unc)) if u and t in first_phys]
    c_u = [c for c, _ in pairs]
    c_p = [c for _, c in pairs]
    # one float and one integer array, sliced (a process's first call pays for each array made)
    K, C, P = len(wts), len(cfg_names), len(pairs)
    floats = np.array(counts + gps + prices + [counts[t] for t in ctype] + [gps[ctype[c]] for c in c_p], np.float64)
    ints = np.array(ctype + c_u + c_p, np.int64)
    names = np.array(type_names + cfg_names)
    flags = np.array(unc, bool)
    for a in (floats, ints, names, flags):
        a.flags.writeable = False  # (their slices below are read-only too)
    variants = (floats[3 * K:3 * K + C], ints[C:C + P], ints[C + P:], floats[3 * K + C:], len(set(c_p)) == P)
    hit = (names[:K], names[K:], floats[:K], floats[K:2 * K], floats[2 * K:3 * K], ints[:C], flags, variants)
    if len(_CLUSTER_ARRAYS) >= _CLUSTER_ARRAYS_MAX:
        _CLUSTER_ARRAYS.clear()  # (atomic: other threads may read and fill it meanwhile)
    _CLUSTER_ARRAYS[key] = hit
    _LAST_CLUSTER = (cl, cfgs, hit)
    return hit


_ONE = np.ones(1)
_ONE.flags.writeable = False


def _ones(n: int) -> np.ndarray:
    """``n`` ones as a read-only view of one number (stride 0; what ``np.broadcast_to(1.0, n)``
    gives, without its Python-level wrapper)."""
    return np.ndarray((n,), np.float64, _ONE, 0, (0,))


def _cat(parts: list[np.ndarray]) -> np.ndarray:
    """``np.concatenate(parts)`` without the copy when there is one part (no pair rows)."""
    return parts[0] if len(parts) == 1 else np.concatenate(parts)
