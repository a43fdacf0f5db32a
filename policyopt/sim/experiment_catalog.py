"""The published policy comparisons as data: :class:`Experiment` (traces, arms, cluster, what the paper
reported), the catalogue :data:`EXPERIMENTS`, the published setup's constants (:data:`GAVEL_SIMULATOR`,
:data:`GAVEL_AGNOSTIC_SOLVE`, :data:`GAVEL_FTF_AGNOSTIC`, the published rate sweeps) and :func:`scaled`,
which turns an experiment into its published-scale / shortened / continued-arrivals form.

Running them: :mod:`policyopt.sim.experiment_runner`; the command line: :mod:`policyopt.sim.experiments`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

__all__ = ["Arm", "Experiment", "EXPERIMENTS", "GAVEL_SIMULATOR", "GAVEL_LP_SOLVE", "GAVEL_AGNOSTIC_SOLVE",
           "GAVEL_FTF_AGNOSTIC", "AGNOSTIC_PROPORTIONAL",
           "SCALES", "KEEP_ARRIVING_EXTRA", "KEEP_ARRIVING_MAX_CHUNKS", "scaled", "missing_policies"]


@dataclass(frozen=True)
class Arm:
    """One side of a comparison: a label and :class:`~policyopt.sim.simulator.SimConfig` overrides."""

    label: str
    config: dict[str, Any]


@dataclass(frozen=True)
class Experiment:
    """A comparison: traces (per seed and rate), arms, cluster, and what the paper reported."""

    name: str
    title: str
    published: str
    cluster: str
    trace: dict[str, Any]
    arms: tuple[Arm, ...]
    baseline: str
    treatment: str
    rates: tuple[float | None, ...] = (None,)
    common: dict[str, Any] = field(default_factory=dict)
    seeds: tuple[int, ...] = (0, 1, 2)
    metrics: tuple[str, ...] = ("avg_jct_hours",)
    extra_comparisons: tuple[tuple[str, str], ...] = ()  # more (baseline, treatment) pairs to report
    notes: str = ""
    #: the published setup (``--scale published``): overrides of cluster / trace / rates / common, and
    #: ``arms``: per-arm config overrides by label
    published_scale: dict[str, Any] | None = None
    #: named variants (``--variant NAME``): per-arm config overrides by label, applied at either scale on
    #: top of the scale's own (``policy_options`` merged key by key)
    variants: dict[str, dict[str, dict[str, Any]]] = field(default_factory=dict)

    def comparisons(self) -> list[tuple[str, str]]:
        return [(self.baseline, self.treatment), *self.extra_comparisons]

    def required_policies(self) -> list[str]:
        """Registered policy names the arms use (``static_split:`` / ``round:`` prefixes removed)."""
        names = []
        for arm in self.arms:
            p = str(arm.config.get("policy", self.common.get("policy", "")))
            for prefix in ("static_split:", "round:"):
                if p.startswith(prefix):
                    p = p[len(prefix):]
            names.append(p)
        return names


def missing_policies(exp: Experiment) -> list[str]:
    """Names an experiment needs that are neither registered policies nor round-stage policies."""
    from ..placement import PRIORITY_POLICIES
    from ..policy import list_policies

    known = {p["name"] for p in list_policies()} | set(PRIORITY_POLICIES.names())
    return sorted({n for n in exp.required_policies() if n not in known})


# ----------------------------------------------------------------------------------------- definitions
_GAVEL = "v100=12,p100=12,k80=12"  # 1/3 of the published 36 GPUs per type
_WINDOW = {"window": (0.4, 0.8), "until": "window", "migration": "none"}

#: the published scale: 36 GPUs per type, 6,000 jobs, measured jobs [4000, 5000) (+0.5: floor(a*N) is exact)
_PUB_JOBS = 6000
_PUB_CLUSTER = "v100=36,p100=36,k80=36"
#: Gavel's simulator runs every job at its consolidated throughput whatever its placement (it reads
#: ``throughputs[worker_type][(job_type, scale_factor)]``, never the ``*_unconsolidated`` entries); one
#: server of 36 GPUs per type lets the placer consolidate every job, so the published setup does too
#: (with 4-GPU servers an 8-GPU job always spans two and runs up to 9x slower: LM, batch size 10)
_PUB_SERVERS = {"gpus_per_server": 36}
#: Gavel's simulator's semantics, under which the published numbers were measured: a restart costs
#: nothing (its simulator charges no checkpoint / restore), the allocation is recomputed after arrivals
#: and completions at most once every 1,920 s (``Scheduler(minimum_time_between_allocation_resets=1920)``),
#: no migration minimization (it places jobs afresh each round without relabeling)
GAVEL_SIMULATOR = {"recompute_interval": 1920.0, "checkpoint_seconds": 0.0, "restore_seconds": 0.0,
                   "migration": "none", "keep_types": False}
_PUB_COMMON = {**_PUB_SERVERS, **GAVEL_SIMULATOR}
#: an LP solved as Gavel solves it (ECOS: the centre of the face of optima; our default solve, a vertex,
#: made the agnostic max-min arm 14 % slower than Gavel's own simulator on the published multi-GPU trace,
#: 2.1 jobs/h, seed 1; Clarabel without fill 0.2 %; the aware arm's default solve, a vertex then the fill
#: stage, 28 % faster than Gavel's at 2.5 jobs/h, Clarabel without fill 2.6 % slower)
GAVEL_LP_SOLVE = {"solver": "cvxpy:CLARABEL", "fill": False}
#: the published multi-GPU setup's agnostic arm; FTF's agnostic arm also sees V100 rates as Gavel's
GAVEL_AGNOSTIC_SOLVE = GAVEL_LP_SOLVE
GAVEL_FTF_AGNOSTIC = {"solver": "cvxpy:CLARABEL", "reference": "fastest"}
_PUB_WINDOW = {"window": (4000.5 / _PUB_JOBS, 5000.5 / _PUB_JOBS), "until": "window", **_PUB_COMMON}
#: ``--variant gavel_solve`` (LAS): both LPs solved as Gavel solves them, the aware arm too
_GAVEL_SOLVE_BOTH = {"aware": {"policy_options": GAVEL_LP_SOLVE}, "agnostic": {"policy_options": GAVEL_LP_SOLVE}}
#: ``--variant gavel_order`` (``las_multi``): both LPs solved as Gavel's and both arms realized by Gavel's round
#: ordering (``SimConfig(ordering="gavel")``: per-type walks, shuffled per round for the agnostic arm); with it our
#: agnostic arm agrees with Gavel's simulator past the agnostic capacity (2.6 jobs/h, published seed 1)
_GAVEL_ORDER_BOTH = {arm: {**o, "ordering": "gavel"} for arm, o in _GAVEL_SOLVE_BOTH.items()}
#: the published single-GPU setup's agnostic arm: the agnostic LP's optimum defined in closed form
#: (``max_min_fairness_agnostic -o optimum=proportional``: every job's time share split over the types in
#: proportion to their counts, the same on every solver path). Its LP has a whole face of optima; the
#: vertex our default solve returned moved with solver changes (0.4 jobs/h: 30.8-33.1 h, later 43.0-44.7 h)
AGNOSTIC_PROPORTIONAL = {"optimum": "proportional"}
#: ``las_single`` ``gavel_solve``: as ``_GAVEL_SOLVE_BOTH``, the agnostic arm solved, not in closed form;
#: ``las_single`` ``vertex``: the agnostic arm as published before the closed form (our default solve)
_LAS_SINGLE_VARIANTS: dict[str, dict[str, dict[str, Any]]] = {
    "gavel_solve": {**_GAVEL_SOLVE_BOTH, "agnostic": {"policy_options": {**GAVEL_LP_SOLVE, "optimum": "solver"}}},
    "vertex": {"agnostic": {"policy_options": {"optimum": "solver"}}}}
#: Gavel's sweeps: np.linspace(0, 6, 16)[1:] (single-GPU) and np.linspace(0, 3, 11)[1:] (multi-GPU) jobs/hour
_PUB_RATES_SINGLE = tuple(round(0.4 * k, 1) for k in range(1, 16))
_PUB_RATES_MULTI = tuple(round(0.3 * k, 1) for k in range(1, 11))

#: space sharing as the makespan experiment poses it: the LP over jobs and job pairs, each job's 4 best partners
_SPACE_SHARING = {"space_sharing": True, "policy_options": {"pair_top_k": 4}}

EXPERIMENTS: dict[str, Experiment] = {e.name: e for e in [
    Experiment(
        "las_single", "LAS: heterogeneity-aware vs agnostic, single-GPU jobs",
        "Gavel (OSDI'20) Fig. 8: up to 3.5x lower average JCT at high load (36 GPUs/type, jobs 4000-5000)",
        _GAVEL, {"generator": "gavel", "jobs": 300, "multi_gpu": False},
        (Arm("aware", {"policy": "max_min_fairness"}), Arm("agnostic", {"policy": "max_min_fairness_agnostic"})),
        baseline="agnostic", treatment="aware", rates=(1.5, 2.5, 3.5), common=dict(_WINDOW),
        metrics=("avg_jct_hours", "p99_jct_hours", "utilization"),
        published_scale={"cluster": _PUB_CLUSTER, "jobs": _PUB_JOBS, "rates": _PUB_RATES_SINGLE,
                         "common": _PUB_WINDOW, "arms": {"agnostic": {"policy_options": AGNOSTIC_PROPORTIONAL}}},
        variants=_LAS_SINGLE_VARIANTS),
    Experiment(
        "las_multi", "LAS: heterogeneity-aware vs agnostic, multi-GPU jobs (1/2/4/8 GPUs at 70/10/15/5 %)",
        "Gavel (OSDI'20) Fig. 9: up to 2.2x lower average JCT at high load",
        _GAVEL, {"generator": "gavel", "jobs": 240, "multi_gpu": True},
        (Arm("aware", {"policy": "max_min_fairness"}), Arm("agnostic", {"policy": "max_min_fairness_agnostic"})),
        baseline="agnostic", treatment="aware", rates=(0.6, 1.0, 1.4), common=dict(_WINDOW),
        metrics=("avg_jct_hours", "p99_jct_hours", "utilization"),
        published_scale={"cluster": _PUB_CLUSTER, "jobs": _PUB_JOBS, "rates": _PUB_RATES_MULTI,
                         "common": _PUB_WINDOW, "arms": {"agnostic": {"policy_options": GAVEL_AGNOSTIC_SOLVE}}},
        variants={"gavel_solve": _GAVEL_SOLVE_BOTH, "gavel_order": _GAVEL_ORDER_BOTH}),
    Experiment(
        "makespan", "Makespan policy vs FIFO on a static trace (all jobs at t=0), with and without space sharing",
        "Gavel (OSDI'20) Fig. 10: makespan policy 2.5x lower makespan than FIFO",
        _GAVEL, {"generator": "gavel", "jobs": 60, "multi_gpu": True, "static": True},
        (Arm("makespan", {"policy": "makespan"}),
         Arm("makespan+ss", {"policy": "makespan", **_SPACE_SHARING}),
         Arm("fifo (aware LP)", {"policy": "fifo"}),
         Arm("fifo_agnostic", {"policy": "fifo_agnostic"})),
        baseline="fifo_agnostic", treatment="makespan", common={"migration": "none"},
        metrics=("makespan_hours", "avg_jct_hours", "utilization"),
        extra_comparisons=(("fifo_agnostic", "makespan+ss"), ("fifo (aware LP)", "makespan")),
        # Gavel's run_sweep_static.py -c 36:36:36 -a 0 -b 500 -n 6: 100-500 jobs; the largest by default
        published_scale={"cluster": _PUB_CLUSTER, "jobs": 500, "rates": (None,), "common": dict(_PUB_COMMON)}),
    Experiment(
        "ftf", "Finish-time fairness (Themis): heterogeneity-aware vs agnostic",
        "Gavel (OSDI'20) Fig. 11: ~3x lower average JCT and 2.8x better FTF",
        _GAVEL, {"generator": "gavel", "jobs": 300, "multi_gpu": False},
        (Arm("aware", {"policy": "finish_time_fairness"}),
         Arm("agnostic", {"policy": "finish_time_fairness_agnostic"})),
        baseline="agnostic", treatment="aware", rates=(3.0,), common=dict(_WINDOW),
        metrics=("avg_jct_hours", "rho_mean", "rho_p99"),
        # Gavel's artifact runs FTF on the continuous-multiple trace (run_sweep_continuous.py ... -b 3.0 -n 11 -m);
        # its simulator gives the GPUs FTF's optimum leaves idle to jobs of zero priority (backfill)
        published_scale={"cluster": _PUB_CLUSTER, "jobs": _PUB_JOBS, "rates": _PUB_RATES_MULTI,
                         "common": {**_PUB_WINDOW, "backfill": True},
                         "trace": {"multi_gpu": True}, "arms": {"agnostic": {"policy_options": GAVEL_FTF_AGNOSTIC}}}),
    Experiment(
        "fifo", "FIFO: heterogeneity-agnostic vs aware, with and without space sharing, single-GPU jobs",
        "Gavel's artifact figure single_gpu_fifo (36 GPUs/type, jobs 4000-5000, mean of seeds 0-2): agnostic FIFO "
        "92.0 h, aware 24.1 h (3.8x), aware with space sharing 20.1 h (4.6x) at 4.8 jobs/h",
        _GAVEL, {"generator": "gavel", "jobs": 300, "multi_gpu": False},
        (Arm("aware", {"policy": "fifo"}), Arm("aware+ss", {"policy": "fifo", **_SPACE_SHARING}),
         Arm("agnostic", {"policy": "fifo_agnostic"})),
        baseline="agnostic", treatment="aware", rates=(1.5, 2.5, 3.5), common=dict(_WINDOW),
        metrics=("avg_jct_hours", "p99_jct_hours", "utilization"),
        extra_comparisons=(("agnostic", "aware+ss"), ("aware", "aware+ss")),
        notes="the figure's arms are Gavel's fifo / fifo_perf / fifo_packed; ours are the FIFO LP (agnostic, "
              "aware) and the aware LP over job pairs (space sharing)",
        # Gavel's sweep of the continuous-single trace (run_sweep_continuous.py -a 0 -b 6 -n 16), as LAS's
        published_scale={"cluster": _PUB_CLUSTER, "jobs": _PUB_JOBS, "rates": _PUB_RATES_SINGLE,
                         "common": _PUB_WINDOW}),
    Experiment(
        "cost", "Cost: min_cost and min_cost_slo vs max_sum_throughput (SLO = 1.2/2/10 x duration)",
        "Gavel (OSDI'20) sec. 7.3: min cost ~1.4x cheaper, ~35% of jobs miss SLOs; "
        "with SLOs no violations at ~1.2x cheaper",
        _GAVEL, {"generator": "gavel", "jobs": 150, "multi_gpu": False, "slo_factors": (1.2, 2.0, 10.0)},
        (Arm("max_sum_throughput", {"policy": "max_sum_throughput"}), Arm("min_cost", {"policy": "min_cost"}),
         Arm("min_cost_slo", {"policy": "min_cost_slo"}),
         Arm("min_cost_slo+margin", {"policy": "min_cost_slo", "slo_margin_seconds": 720.0})),
        baseline="max_sum_throughput", treatment="min_cost", rates=(1.5,), common={"migration": "none"},
        metrics=("total_cost", "slo_violation_fraction", "avg_jct_hours"),
        extra_comparisons=(("max_sum_throughput", "min_cost_slo"), ("max_sum_throughput", "min_cost_slo+margin")),
        notes="min_cost_slo+margin poses each deadline 720 s (two rounds) earlier than it is",
        # Gavel's artifact has no sweep for it: its simulator draws SLO factor 1.2 / 2 / 10 (p = .33 / .34 / .33)
        # x duration and prices from spot-price logs it does not publish (its fixed GCP prices 0.74 / 0.43 /
        # 0.135 $/h have our prices' ratios); so the published cluster and semantics, the trace scaled with it
        published_scale={"cluster": _PUB_CLUSTER, "jobs": 450, "rates": (4.5,), "common": dict(_PUB_COMMON)}),
    Experiment(
        "hierarchical", "Hierarchical water-filling vs a static per-entity split (entity weights 1, 2, 3)",
        "Gavel (OSDI'20) sec. 7.4: ~17% higher total effective throughput",
        _GAVEL, {"generator": "gavel", "jobs": 150, "multi_gpu": False, "entities": {"a": 1.0, "b": 2.0, "c": 3.0},
                 "entity_probabilities": (0.5, 0.3, 0.2)},
        (Arm("hierarchical", {"policy": "hierarchical"}),
         Arm("static split", {"policy": "static_split:max_min_fairness_water_filling"})),
        baseline="static split", treatment="hierarchical", rates=(3.0, 5.0),
        common={"migration": "none", "max_seconds": "arrivals", "entities": {"a": 1.0, "b": 2.0, "c": 3.0}},
        metrics=("norm_throughput", "avg_jct_hours", "utilization"),
        notes="entity a (weight 1) submits 50% of the jobs, b (weight 2) 30%, c (weight 3) 20%; simulated until "
              "the last arrival; throughput = time average over the second half of that period"),
    Experiment(
        "tesserae", "Tesserae-style LAS: + packing + migration minimization vs LAS alone and vs the simple rule",
        "Tesserae: up to 1.62x lower average JCT, 36% fewer migrations than the simple rule",
        "v100=16,p100=16,k80=16", {"generator": "shockwave", "jobs": 400},
        (Arm("LAS", {"packing": False, "migration": "none"}),
         Arm("LAS+pack+matching", {"packing": True, "migration": "matching"}),
         Arm("LAS+pack+simple", {"packing": True, "migration": "simple"}),
         Arm("LAS+pack+tesserae", {"packing": True, "migration": "tesserae"})),
        baseline="LAS", treatment="LAS+pack+matching", rates=(30.0, 50.0),
        common={"policy": "las", "renew_leases": False, "checkpoint_seconds": 30.0, "restore_seconds": 30.0},
        metrics=("avg_jct_hours", "migrations", "utilization"),
        extra_comparisons=(("LAS+pack+simple", "LAS+pack+matching"), ("LAS+pack+tesserae", "LAS+pack+matching"))),
]}


SCALES = ("small", "published")
#: ``keep_arriving``: jobs added per job of the trace, per chunk of the continuation
KEEP_ARRIVING_EXTRA = 2
#: a run whose window outlasts its arrivals runs again with more chunks (Gavel generates jobs until the
#: window has finished), up to this many (then its row's ``arrivals_cover_window`` is false)
KEEP_ARRIVING_MAX_CHUNKS = 40


def _with_overrides(config: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``config`` updated by ``override``, their ``policy_options`` merged key by key."""
    out = {**config, **override}
    if "policy_options" in config and "policy_options" in override:
        out["policy_options"] = {**config["policy_options"], **override["policy_options"]}
    return out


def scaled(exp: Experiment, scale: str = "small", jobs: int | None = None,
           rates: Sequence[float] | None = None, keep_arriving: bool = False,
           variant: str | None = None) -> Experiment:
    """``exp`` at ``scale`` (``small``: as defined; ``published``: its ``published_scale``), with the
    trace cut to ``jobs`` and the rates replaced by ``rates`` when given (quick looks and tests).

    ``variant``: one of ``exp.variants``, whose per-arm overrides apply on top of the scale's (e.g.
    ``las_multi`` ``gavel_solve``: the aware arm's LP solved as Gavel solves it, as the published
    setup's agnostic arm is).

    ``keep_arriving``: the trace is continued by chunks of ``KEEP_ARRIVING_EXTRA`` times as many jobs
    again (:func:`continue_arrivals`, the same generator and rate), the measured window keeping its job
    positions, so that new jobs keep arriving until the window has finished (the published
    methodology, Gavel's ``jobs_to_complete``; Poisson traces only): a run whose window outlasts its
    arrivals runs again with more chunks (at most ``KEEP_ARRIVING_MAX_CHUNKS``)."""
    from dataclasses import replace

    from ..errors import InputError, UnknownNameError

    if scale not in SCALES:
        raise UnknownNameError("scale", scale, SCALES)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 10):
        raise InputError("jobs", jobs, "must be an integer >= 10")
    if rates is not None and (not rates or any(not (isinstance(r, (int, float)) and r > 0) for r in rates)):
        raise InputError("rates", rates, "must be positive job rates (jobs/hour)")
    if scale == "published":
        pub = exp.published_scale
        if pub is None:
            with_pub = [n for n, e in EXPERIMENTS.items() if e.published_scale is not None]
            raise InputError("scale", scale, f"experiment {exp.name!r} has no published-scale setup yet "
                                             f"(those with one: {', '.join(with_pub)})")
        exp = replace(exp, cluster=pub["cluster"], trace={**exp.trace, "jobs": pub["jobs"], **pub.get("trace", {})},
                      rates=tuple(pub["rates"]), common={**exp.common, **pub["common"]},
                      arms=tuple(Arm(a.label, _with_overrides(a.config, pub.get("arms", {}).get(a.label, {})))
                                 for a in exp.arms))
    if variant is not None:
        if variant not in exp.variants:
            raise InputError("variant", variant, f"experiment {exp.name!r} has "
                             + (f"the variants {', '.join(exp.variants)}" if exp.variants else "no variants"))
        over = exp.variants[variant]
        exp = replace(exp, arms=tuple(Arm(a.label, _with_overrides(a.config, over.get(a.label, {})))
                                      for a in exp.arms))
    if jobs is not None:
        exp = replace(exp, trace={**exp.trace, "jobs": jobs})
    if rates is not None:
        exp = replace(exp, rates=tuple(float(r) for r in rates))
    if keep_arriving:
        if exp.trace.get("generator") != "gavel" or exp.trace.get("static") or None in exp.rates \
                or exp.common.get("until") != "window":
            raise InputError("keep_arriving", True, f"experiment {exp.name!r} is not a Poisson trace measured over "
                                                    "a window (until='window')")
        exp = replace(exp, trace={**exp.trace, "extra_jobs": KEEP_ARRIVING_EXTRA * int(exp.trace["jobs"])})
    return exp
