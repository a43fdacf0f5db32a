"""Water-filling max-min fairness: exact, LP-only, re-solved in place.

Notation: ``u_m = sf_m·thr(m)/thr(m, X_equal)`` is job m's normalized throughput (what
``max_min_fairness`` maximizes the minimum of, before dividing by the weight).

**What is computed.** Jobs sit in *groups* with weights ``W_g``. In a ``fairness`` group every
active (not yet bottlenecked) job ``m`` rises at rate ``W_g·ω_m/Ω_g`` (``ω_m`` its own weight,
``Ω_g`` the sum over the group's active jobs), so ``u_m/ω_m`` is common to its active jobs; in a
``fifo`` group only the earliest job that is not yet bottlenecked rises, at rate ``W_g``. Water
rises in *levels*; a job is *bottlenecked* when it cannot exceed its level while every other job
keeps at least its own; bottlenecked jobs freeze, rates are recomputed, the next level starts.
``max_min_fairness_water_filling`` is one fairness group with ``ω = w`` (the weighted leximin
allocation of ``u/w``); ``hierarchical`` makes one group per entity (:mod:`.hierarchical`);
``water_filling_milp`` is the published method (an LP and a bottleneck MILP per level).

**Level LP** — one model, loaded once; between levels only bounds change::

    max Δ  s.t.  u_m/ω_m − λ_k(m) + e_m ≥ 0         A_m   (e_m ∈ [0,0] active, [0,∞) otherwise)
                 λ_g − μ_m ≥ 0                        L_m   (fairness member; μ_m free active, 0 otherwise)
                 Σ_{m∈g} ω_m μ_m − W_g·Δ + e'_g ≥ Ω_g·β_g   G_g  (fairness group)
                 λ_k − W_g·Δ + e'_k ≥ β_k             G_k   (one level column per fifo job)
                 u_m − s_m ≥ ℓ_m                       F_m   (frozen: its level; −∞ otherwise)
                 X feasible: time ≤ 1 per job, capacity per type

With the active μ's equal to ``λ_g``, ``G_g`` reads ``λ_g ≥ β_g + (W_g/Ω_g)·Δ``: the changing rate
``W_g/Ω_g`` never enters the matrix, so freezing a job is a bound change (``e_m`` opens, ``μ_m``
fixes at 0, ``Ω_g·β_g`` moves), and the previous basis stays primal feasible for a warm primal
simplex re-solve (the first, cold LP uses interior point + crossover).

**Why it is exact: certificates, never guesses.** A job is frozen only with a proof:

1. *LP duals.* Let ``y`` be optimal duals. ``Δ`` is free, so ``Σ W·y_G = 1``, and ``λ``/``μ`` are
   free, so ``y_G`` flows to the ``A`` rows: some active job has ``y_A_m > 0``. For any point that
   satisfies every row with ``Δ = Δ*``, the Lagrangian bound gives ``Δ* + Σ_i y_i·slack_i ≤ Δ*``,
   so ``y_A_m > 0`` forces ``slack_A_m = 0``: job m cannot exceed its level — it is bottlenecked.
   Each level LP freezes at least one job (≤ n LPs in all).
2. *Caps.* ``u_m ≤ c_m = ν_m·(largest throughput of any slot m can use)`` always; a job at its cap
   is bottlenecked.
3. *Symmetry.* Interchangeable jobs (same fairness group, weight, scale factor, throughputs, no
   pairs) are merged into one class with multiplicity ``q`` before the LP is built: averaging any
   allocation over their permutations keeps every constraint and level, so the water-filling
   allocation treats them alike (exact; often shrinks the LP tenfold).
4. *Exceed tests.* When a level is stuck (``Δ* ≈ 0``: a bottlenecked job the vertex dual did not
   reveal), one LP with ``Δ = 0`` maximizes ``Σ s_m`` over candidates held at their levels; optimum
   0 proves none of them can exceed — first for the rest of the groups that just lost a member,
   later for everyone. A fifo job that froze at 0 triggers the same test for its group's waiting
   jobs (their columns opened for the test): if none can gain more than ``1e-6`` (u units), all
   freeze at 0 (levels only rise, so each would on its turn).
5. *Speculative fifo chains.* After levels froze fifo jobs only at their caps twice in a row, the
   next ``L`` cap events of all fifo groups together (in the order in which their water would reach
   them if every job ahead reached its cap) are speculated in one LP: per group the jobs of those
   events are held at their caps and the one after them rises. If every group's water reached its
   chain's last job, each held job hit its cap at a lower water level where every requirement was
   lower (the feasible requirements are closed downwards) — the step is exact; otherwise it is
   re-solved with each chain cut to the events its water did reach (that LP's optimum is at least
   the first one's, so it lands). ``L`` doubles on success, is cut to what landed on a failure
   and halves when a fifo job freezes below its cap.

**Keeping the LPs small.** Two exact reductions:

6. *Compaction* (``compact``, no space sharing). A job frozen at 0, or at its cap on a unique
   single-job slot type (``u_m ≥ c_m`` forces its whole time onto that type), takes no further part:
   its allocation is fixed, so once a third of the model has settled the LP is rebuilt without those
   jobs and with the capacity they use removed. Waiting fifo jobs hold nothing and enter no row, so
   only a window of each group (``fifo_window``, at least 4× its speculative chain) is in the model;
   the window is refilled when it runs short. A zero test that finds every waiting job of a group in
   the model stuck also settles the group's jobs waiting outside it, by its capacity prices ``y_t``:
   adding job m could raise the test's optimum ``z*`` by at most
   ``max(0, max_c (ν_m·T_mc − y_t(c)·sf_m))`` (the reduced-cost bound of column generation, with the
   new floor row's dual 1); where ``z*`` plus that is ≤ ``1e-6`` it freezes at 0 (fifo order, up to
   the first job that might gain; no pair rows). Long fifo chains — most jobs wait, then end at their
   cap or at 0 — thus solve LPs over a few hundred jobs instead of thousands.
7. *Pair pricing* (``pair_columns``, space sharing). Each job's best pairs start open; after every
   LP, closed pair columns with a positive reduced cost ``c_j − yᵀA_j`` are opened and the LP re-solved
   (warm) until none is left. Then ``x`` and ``y`` are optimal for the LP over every pair column, so
   the certificates above hold unchanged (column generation); only a small share of the pair
   columns ever opens (``extra["water_filling"]["pair_columns_priced"]``).

Numerics: requirements for the next LP are set from the LP's allocation made exactly feasible
(clipped, scaled into the time and capacity rows), so every re-solve has a feasible point; a job
counts as able to exceed its level when it can gain more than ``1e-8·max(1, level)``. Results agree
with the level-by-level method (``fifo_lookahead=1, aggregate=False, compact=False``) to 1e-7
relative on most random hierarchical instances — small levels (~0.1) can differ by ~1e-7 absolute
where they are ill-conditioned: there a change of at most 1e-9 relative in the at-cap floors moves
the level-by-level result itself by up to ~5e-6 relative — and with the MILP method to its ``1e-4``
margin.
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import numpy as np

from policyopt.allocation import AllocationSpace
from policyopt.modeling import Model
from policyopt.policy import Option, Policy, register_policy
from policyopt.problem import Problem
from policyopt.result import PolicyResult, Status, Timings
from policyopt.solver_api import Feature

from ._wf_common import _floor_at
from ._wf_engine import FAIRNESS, FIFO, FillGroup, FillOutcome, WaterFillingEngine, normalized_throughput

__all__ = [
    "FAIRNESS",
    "FIFO",
    "WATER_FILLING_OPTIONS",
    "FillGroup",
    "FillOutcome",
    "MaxMinFairnessWaterFilling",
    "WaterFillingEngine",
    "WaterFillingMILP",
    "WaterFillingPolicy",
    "gavel_weights",
    "normalized_throughput",
]


# ---------------------------------------------------------------------------------------- policies
WATER_FILLING_OPTIONS: tuple[Option, ...] = (
    Option("certify", str, "duals", "duals: exceed tests only on stuck levels; duals+slack: after every "
           "level (slower; for checking)", ("duals", "duals+slack")),
    Option("record_trace", bool, False, "keep the guaranteed levels after every iteration in extra"),
    Option("aggregate", bool, True, "merge interchangeable jobs of a fairness group into one class (exact)"),
    Option("fifo_lookahead", int, 256, "longest speculative fifo chain; at most this minus 1 cap events "
           "of all fifo groups together per level LP (1 = one fifo job per level LP)"),
    Option("pair_columns", str, "auto", "space-sharing pair columns: all (every pair in every LP), price "
           "(column generation: each job's best pairs first, the rest admitted on positive reduced cost — "
           "exact), auto (price when there are more than 4 pairs per job)", ("auto", "all", "price")),
    Option("compact", bool, True, "rebuild the level LP without settled jobs (frozen at 0, or at their cap on "
           "a unique type) and with only a window of each fifo group's waiting jobs (exact; no space sharing)"),
    Option("fifo_window", int, 32, "with compact: waiting jobs of each fifo group held in the level LP (at "
           "least 4× the current speculative chain)"),
    Option("polish", bool, False, "finish with one LP maximizing Σ u_m over the final levels (removes the "
           "≤1e-8 relative slack the tolerances may leave; slow on large degenerate models)"),
)


class WaterFillingPolicy(Policy):
    """Shared pipeline of the water-filling policies: groups → engine → result."""

    objective_sense = "max"

    def groups(self, problem: Problem, space: AllocationSpace) -> tuple[list[FillGroup], np.ndarray]:
        raise NotImplementedError

    def objective(self, space: AllocationSpace, u: np.ndarray, groups: list[FillGroup], omega: np.ndarray) -> float:
        return float(np.min(u / omega)) if u.size else 0.0

    def solve(self, problem: Problem) -> PolicyResult:
        t0 = time.perf_counter()
        space = self.make_space(problem)
        groups, omega = self.groups(problem, space)
        nu = normalized_throughput(space)
        build0 = time.perf_counter() - t0
        engine = WaterFillingEngine(space, nu, groups, omega, self.get_solver(Feature.LP | Feature.DUALS),
                                    self.solver_options(), certify=self.config["certify"],
                                    record_trace=self.config["record_trace"], polish=self.config["polish"],
                                    max_lookahead=self.config["fifo_lookahead"], aggregate=self.config["aggregate"],
                                    pair_columns=self.config["pair_columns"], compact=self.config["compact"],
                                    window=self.config["fifo_window"])
        out = engine.run()
        timings = out.timings
        timings.build += build0
        u = space.throughput_values(out.X) * nu
        extra: dict[str, Any] = {"water_filling": out.summary()}
        if out.trace is not None:
            labels = space.jobs.labels.tolist()
            extra["water_filling"]["trace"] = [dict(zip(labels, t.tolist())) for t in out.trace]
        if out.status is Status.OPTIMAL:
            return self.result(space, out.X, out.status, self.objective(space, u, groups, omega),
                               "highs" if engine.solver.name == "highs" else engine.solver.name, timings, **extra)
        Xf, msg = self.fallback(space, None, None)
        return self.result(space, Xf, out.status, None, engine.solver.name, timings,
                           f"{out.message}; {msg}", **extra)


@register_policy("max_min_fairness_water_filling")
class MaxMinFairnessWaterFilling(WaterFillingPolicy):
    """Max-min fairness made Pareto-efficient: weighted water-filling (leximin of sf·thr/(w·thr(X_equal)))."""

    options = WATER_FILLING_OPTIONS
    pop_combine = "min"

    def groups(self, problem: Problem, space: AllocationSpace) -> tuple[list[FillGroup], np.ndarray]:
        return [FillGroup("all", FAIRNESS, 1.0, np.arange(len(space.jobs)))], space.weights.copy()


def entity_objective(u: np.ndarray, groups: Sequence[FillGroup]) -> float:
    """``min_g (Σ_{m∈g} u_m)/W_g``: the entity-level fairness value of a hierarchical allocation."""
    vals = [float(u[g.members].sum()) / g.weight for g in groups]
    return min(vals) if vals else 0.0


# ---------------------------------------------------------------------------------------- reference
def gavel_weights(groups: Sequence[FillGroup], omega: np.ndarray, frozen: np.ndarray) -> np.ndarray:
    """Gavel's per-iteration job weights: a fairness entity's weight split among its unfrozen jobs in
    proportion to their own weights; a fifo entity's weight to its first unfrozen job."""
    w = np.zeros(omega.size)
    for g in groups:
        mem = g.members
        live = mem[~frozen[mem]]
        if not live.size:
            continue
        if g.kind == FAIRNESS:
            w[live] = g.weight * omega[live] / omega[live].sum()
        else:
            w[live[0]] = g.weight
    return w


@register_policy("water_filling_milp")
class WaterFillingMILP(WaterFillingPolicy):
    """Reference: the published water-filling (an LP and a bottleneck MILP per level, rebuilt each time).

    Iteration: weights ``w`` from :func:`gavel_weights`; LP ``max t`` s.t. ``(u_m − b_m)/w_m ≥ t`` for
    active jobs (``w_m > 0``, not frozen) and ``u_m ≥ lower_m`` for all (frozen: their level;
    others: ``b_m``); then ``b_m += w_m·t``. MILP: binaries ``z_m`` for active jobs, ``max Σ z``
    s.t. ``u ≥ lower``, ``u_m − M·z_m ≥ b_m·slack + ε − M`` (``z_m = 1 ⇒ u_m ≥ b_m·slack + ε``) and
    ``u_m − M·z_m ≤ b_m·slack + ε`` (``z_m = 0 ⇒`` it cannot), ``slack = 1.0001`` (Gavel's margin),
    ``M = 2(max_m ν_m·max throughput + 1)``. Active jobs with ``z_m = 0`` are frozen at ``b_m``;
    stop when no job is frozen or all are.

    Deviation from Gavel's code, on purpose: it also applied the ``z = 0`` rows (with ``ε = 1e-5``
    strict) to frozen and waiting jobs, which makes the MILP infeasible whenever such a job sits
    below ``ε/(slack − 1) = 0.1`` (always for waiting fifo jobs, at 0); its exception handler then
    froze every active job. Here the big-M rows exist only for active jobs.
    ``hierarchical=true`` takes groups from the problem's entities (as ``hierarchical``).
    """

    options = (Option("hierarchical", bool, False, "use the problem's entities (else one fairness group)"),
               Option("margin", float, 1.0001, "relative improvement that counts as 'can improve' (Gavel's slack)"),
               Option("epsilon", float, 1e-6, "absolute improvement added to the margin"),
               Option("mip_node_limit", int, 10_000, "branch-and-bound nodes per bottleneck MILP (HiGHS): bounds "
                      "its memory; when hit, the MILP's best point is used and the result is `stopped`"))
    pop_combine = "min"

    def groups(self, problem: Problem, space: AllocationSpace) -> tuple[list[FillGroup], np.ndarray]:
        if self.config["hierarchical"]:
            from .hierarchical import entity_groups

            return entity_groups(problem, space)
        return [FillGroup("all", FAIRNESS, 1.0, np.arange(len(space.jobs)))], space.weights.copy()

    def objective(self, space: AllocationSpace, u: np.ndarray, groups: list[FillGroup], omega: np.ndarray) -> float:
        if self.config["hierarchical"]:
            return entity_objective(u, groups)
        return super().objective(space, u, groups, omega)

    def solve(self, problem: Problem) -> PolicyResult:
        timings = Timings()
        space = self.make_space(problem)
        groups, omega = self.groups(problem, space)
        is_fifo = np.zeros(len(space.jobs), bool)
        for g in groups:
            if g.kind == FIFO:
                is_fifo[g.members] = True
        omega = np.where(is_fifo, 1.0, omega)
        nu = normalized_throughput(space)
        n = len(space.jobs)
        thr_max = np.concatenate([space.T.max(axis=1), np.zeros(1)]).max()
        if space.num_pairs:
            thr_max = max(thr_max, float(space.Tp.max()))
        M = 2.0 * (float(nu.max()) * float(thr_max) + 1.0)
        margin, eps = float(self.config["margin"]), float(self.config["epsilon"])
        solver = self.get_solver(Feature.MILP)
        opts = self.solver_options().with_(algorithm="auto")
        if solver.name == "highs":  # the node budget bounds branch-and-bound memory
            opts = opts.with_(extra={**opts.extra, "mip_max_nodes": int(self.config["mip_node_limit"])})
        frozen = np.zeros(n, bool)
        b = np.zeros(n)
        level = np.zeros(n)
        X_last = None
        iterations, milps = 0, 0
        status, message = Status.OPTIMAL, ""
        budget_hits = 0
        while not frozen.all():
            w = gavel_weights(groups, omega, frozen)
            active = ~frozen & (w > 0)
            if not active.any():
                break
            lower = np.where(frozen, level, b)
            # level LP
            t0 = time.perf_counter()
            model = Model("wf_milp_lp")
            X = space.add_allocation(model)
            u = space.throughput(X) * nu
            pos = np.flatnonzero(active)
            model.add_constraints(u >= lower, "floor")
            tvar = model.maximize_min((u.select("jobs", pos) - b[pos]) * (1.0 / w[pos]), "t")
            sf = model.compile()
            t1 = time.perf_counter()
            raw = solver.solve(sf, opts)
            timings.build += t1 - t0
            timings.solve += raw.timings.solve
            iterations += 1
            if not raw.ok or raw.x is None:
                status, message = raw.status, f"level LP {iterations}: {raw.status.value}"
                break
            X_last = X.value(raw.x)
            t = max(float(tvar.value(raw.x).ravel()[0]), 0.0)
            u_lp = space.throughput_values(X_last) * nu
            # requirements never above what the LP solution delivers (see _floor_at)
            b = np.where(active, _floor_at(b + w * t, u_lp), b)
            level = np.where(frozen, _floor_at(level, u_lp), level)
            lower = np.where(frozen, level, b)
            # bottleneck MILP
            t0 = time.perf_counter()
            mm = Model("wf_milp_bottleneck")
            X2 = space.add_allocation(mm)
            u2 = space.throughput(X2) * nu
            # floors relaxed by 1e-6 (relative): HiGHS's MIP presolve rejects floors that the LP
            # solution meets only to within its tolerance; far below the 1e-4 improvement margin
            mm.add_constraints(u2 >= lower * (1.0 - 1e-6) - 1e-9, "floor")
            z = mm.add_variables("z", (space.jobs,), 0.0, 1.0, integer=True, mask=active)
            ua = u2.select("jobs", pos)
            za = z.expr().select("jobs", pos)
            target = b[pos] * margin + eps
            mm.add_constraints((ua - za * M) >= target - M, "improve_if_z")
            mm.add_constraints((ua - za * M) <= target, "cannot_if_not_z")
            mm.maximize(z.sum())
            sf2 = mm.compile()
            t1 = time.perf_counter()
            raw2 = solver.solve(sf2, opts)
            milps += 1
            timings.build += t1 - t0
            timings.solve += raw2.timings.solve
            if raw2.status is Status.STOPPED and raw2.x is not None:
                budget_hits += 1  # the node budget: its best point decides, without a proof
            elif not raw2.ok or raw2.x is None:
                status, message = raw2.status, f"bottleneck MILP {milps}: {raw2.status.value}"
                break
            zv = z.value(raw2.x)
            newly = active & (zv < 0.5)
            if not newly.any():
                break  # Gavel's stopping rule: no job found bottlenecked
            frozen |= newly
            level[newly] = b[newly]
        if X_last is None or status is not Status.OPTIMAL:
            Xf, msg = self.fallback(space, None, None)
            return self.result(space, Xf, status, None, solver.name, timings, f"{message}; {msg}")
        u_final = space.throughput_values(X_last) * nu
        unfrozen = int((~frozen).sum())
        info: dict[str, Any] = {"iterations": iterations, "milp_solves": milps, "unfrozen_at_stop": unfrozen,
                "milp_node_limit_hits": budget_hits}
        objective = self.objective(space, u_final, groups, omega)
        reasons = []
        if unfrozen:
            reasons.append(f"Gavel's stopping rule ended it with {unfrozen} of {n} jobs never settled (the "
                           f"bottleneck MILP found none of the active jobs bottlenecked at a "
                           f"{margin:g}× + {eps:g} margin): their levels may be below the water-filling optimum")
        if budget_hits:
            reasons.append(f"{budget_hits} bottleneck MILP(s) stopped at the node limit "
                           f"({self.config['mip_node_limit']}): their frozen sets are not proven")
        if reasons:  # objective null as for every non-optimal result; the allocation's value in extra
            info["objective_of_allocation"] = objective
            return self.result(space, X_last, Status.STOPPED, None, solver.name, timings,
                               "stopped: " + "; ".join(reasons) + " (the allocation is feasible)",
                               water_filling=info)
        return self.result(space, X_last, status, objective, solver.name, timings, water_filling=info)
