"""Benchmark: water-filling and hierarchical policies on Gavel-like workloads.

Workload (Gavel's generator): cluster with N/4 GPUs of each of v100/p100/k80; jobs drawn from
``../shared/data/gavel/simulation_throughputs.json``: scale factor 1/2/4/8 with probability
70/10/15/5 %, a model uniformly among those measured at that scale factor, duration
``60·10^U(1.5,3)`` s w.p. 0.8 else ``60·10^U(3,4)`` s (steps = duration × v100 throughput).

Prints the load average, then per size: build/compile/solve seconds (the policy's own wall-clock
timings of the last solve), the time of the whole solve (``--clock wall|cpu``; with ``--repeat N``
the best of N solves after one warm-up, all N listed), number of levels and LP solves, and for the
hierarchical policy the total normalized throughput against a static per-entity split of the
cluster (each entity gets ``W_s/ΣW`` of every type and water-fills inside its share).

The published method (``water_filling_milp``, ``--milp-sizes``) may end by Gavel's stopping rule or
its MILP node budget: its rows then show status ``stopped`` and the objective of the allocation it
returned (``--milp-sizes 0``: Gavel's own multilevel test input, :func:`gavel_multilevel_problem`).
With ``--fresh-process`` each of its runs is made in a new process, which reports its own
peak resident memory (``ru_maxrss``) and CPU seconds; ``--mip-node-limit`` sets its node budget.

Run::

    python benchmarks/water_filling_bench.py                 # default sizes
    python benchmarks/water_filling_bench.py --sizes 256 2048 --pairs-sizes 64 256
    python benchmarks/water_filling_bench.py --sizes --pairs-sizes --milp-sizes 256 --fresh-process
    python benchmarks/water_filling_bench.py --sizes 2048 --entities "3 fifo" --pairs-sizes --milp-sizes \
        --clock cpu --repeat 3 --no-static-split      # the all-FIFO case, CPU seconds, best of 3
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from typing import Any, Sequence

import numpy as np

from policyopt import Cluster, Entity, Job, Problem, get_policy
from policyopt.data.gavel import GavelThroughputs, load_gavel
from policyopt.formulations.hierarchical import entity_groups
from policyopt.formulations.water_filling import FillGroup, WaterFillingEngine, normalized_throughput

SF_CHOICES = np.array([1, 2, 4, 8])
SF_PROBS = np.array([0.70, 0.10, 0.15, 0.05])


def gavel_job_types(data: GavelThroughputs, n: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Job-type indices and steps for ``n`` jobs drawn the way Gavel's generator draws them."""
    sfs = rng.choice(SF_CHOICES, size=n, p=SF_PROBS)
    types = np.empty(n, np.int64)
    for s in SF_CHOICES:
        pick = np.flatnonzero(sfs == s)
        cand = data.types_with_scale(int(s))
        types[pick] = cand[rng.integers(0, cand.size, pick.size)]
    long = rng.random(n) >= 0.8
    dur = 60.0 * np.where(long, 10 ** rng.uniform(3, 4, n), 10 ** rng.uniform(1.5, 3, n))
    v100 = data.configs.index("v100")
    steps = dur * np.maximum(data.alone[types, v100], 1e-3)
    return types, steps


def gavel_problem(n: int, seed: int = 0, *, colocated: bool = False, data: GavelThroughputs | None = None,
                  gpus_per_type: int | None = None) -> Problem:
    """A Gavel-like problem: ``n`` jobs on a cluster with ``n/4`` (or ``gpus_per_type``) GPUs of each type."""
    data = data or load_gavel()
    rng = np.random.default_rng(seed)
    types, steps = gavel_job_types(data, n, rng)
    per = gpus_per_type if gpus_per_type is not None else max(n // 4, 8)
    cluster = Cluster.from_counts({"v100": per, "p100": per, "k80": per}, gpus_per_server=4)
    return data.problem(types, cluster, steps=steps, colocated="types" if colocated else False)


def with_entities(problem: Problem, weights: Sequence[float], policies: Sequence[str], seed: int = 0,
                  by: str = "random") -> Problem:
    """Assign jobs to entities ``e0, e1, ...``: ``random`` — uniformly at random (seeded), so every
    entity has the same job mix; ``speedup`` — by quantile of the job's v100/k80 throughput ratio
    (e0 holds the jobs that gain most from a V100), so the entities' mixes differ."""
    rng = np.random.default_rng(seed)
    names = [f"e{i}" for i in range(len(weights))]
    if by == "random":
        owner = rng.integers(0, len(names), len(problem.jobs))
    else:
        ratio = np.array([j.throughputs.get("v100", 0.0) / max(j.throughputs.get("k80", 0.0), 1e-9)
                          for j in problem.jobs])
        rank = np.argsort(np.argsort(-ratio + 1e-12 * rng.random(ratio.size)))
        owner = rank * len(names) // len(problem.jobs)
    jobs = tuple(replace(j, entity=names[o]) for j, o in zip(problem.jobs, owner))
    ents = {nm: Entity(nm, w, p) for nm, w, p in zip(names, weights, policies)}
    return Problem(problem.cluster, jobs, problem.colocated, ents, problem.colocated_types)


def static_split_total(problem: Problem, agnostic: bool = False) -> tuple[float, float]:
    """Total normalized throughput Σ u_m when each entity gets ``W_s/ΣW`` of every type (fractional
    GPU time) and water-fills its own jobs there with its own policy; normalizers cluster-wide.
    ``agnostic``: inside its share an entity sees every throughput as 1 (it shares time, not
    speed); the total is measured with the real throughputs. Returns (total, seconds)."""
    t0 = time.perf_counter()
    pol = get_policy("hierarchical")
    space = pol.make_space(problem)
    nu = normalized_throughput(space)
    groups, omega = entity_groups(problem, space)
    W = sum(g.weight for g in groups)
    total = 0.0
    for g in groups:
        sub = problem.with_jobs([problem.jobs[i] for i in g.members])
        sub_space = pol.make_space(sub)
        seen, nu_seen = sub_space, nu[g.members]
        if agnostic:
            ones = [replace(j, throughputs={c: 1.0 for c, t in j.throughputs.items() if t > 0}) for j in sub.jobs]
            seen = pol.make_space(sub.with_jobs(ones))
            nu_seen = normalized_throughput(seen)
        eng = WaterFillingEngine(seen, nu_seen, [FillGroup(g.name, g.kind, 1.0, np.arange(g.members.size))],
                                 omega[g.members], pol.get_solver(), pol.solver_options(),
                                 capacity=space.counts * g.weight / W)
        out = eng.run()
        assert out.status.value == "optimal", out.message
        total += float((sub_space.throughput_values(out.X) * nu[g.members]).sum())
    return total, time.perf_counter() - t0


def load_average() -> str:
    """The 1-, 5- and 15-minute load averages (``os.getloadavg``), or ``n/a``."""
    try:
        return " ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def run_policy(name: str, problem: Problem, *, clock: str = "wall", repeat: int = 1, **options: Any) -> dict[str, Any]:
    """Solve ``problem`` with policy ``name``; ``repeat`` > 1: one untimed warm-up solve, then the
    best of ``repeat`` timed solves (``times_s`` lists them all). ``clock``: ``wall`` (perf_counter)
    or ``cpu`` (this process's CPU time, all threads)."""
    pol = get_policy(name, **options)
    now = time.process_time if clock == "cpu" else time.perf_counter
    if repeat > 1:
        pol.solve(problem)
    times = []
    for _ in range(max(1, repeat)):
        t0 = now()
        res = pol.solve(problem)
        times.append(now() - t0)
    wall = min(times)
    wf = res.extra.get("water_filling", {})
    space = res.space
    u = space.throughput_values(res.X) * normalized_throughput(space)
    return {"policy": name, "jobs": len(problem.jobs), "pairs": space.num_pairs, "status": res.status.value,
            "wall_s": wall, "build_s": res.timings.build, "compile_s": res.timings.compile,
            "solve_s": res.timings.solve, "levels": wf.get("iterations"), "lp_solves": wf.get("lp_solves"),
            "objective": res.objective, "total_u": float(u.sum()), "violations": space.check(res.X),
            "compactions": wf.get("compactions"), "priced": wf.get("pair_columns_priced"),
            "objective_of_allocation": wf.get("objective_of_allocation"), "message": res.message,
            "unfrozen_at_stop": wf.get("unfrozen_at_stop"), "node_limit_hits": wf.get("milp_node_limit_hits"),
            "times_s": times}


def gavel_multilevel_problem(seed: int = 0, num_jobs: int = 300, num_entities: int = 10,
                             gpus_per_type: int = 64) -> Problem:
    """The input of Gavel's ``scheduler/tests/water_filling_tests_hierarchical.py`` (its first
    problem for ``random.seed(seed)``): each entity draws its policy (fifo or fairness) and weight
    1–5; each job three uniform throughputs sorted ascending for k80 < p100 < v100, scale factor
    1, 2 or 4, a random entity and priority 1–5 (1 in a fifo entity); 64 GPUs of each type.
    Python's ``random`` draws in Gavel's order, so the numbers are Gavel's."""
    import random

    rng = random.Random(seed)
    entities: dict[str, Entity] = {}
    for i in range(num_entities):
        policy = ["fifo", "fairness"][rng.randint(0, 1)]
        entities[f"entity{i}"] = Entity(f"entity{i}", float(rng.randint(1, 5)), policy)
    types = ["k80", "p100", "v100"]
    jobs = []
    for i in range(num_jobs):
        thr = sorted(rng.random() for _ in types)
        sf = 2 ** rng.randint(0, 2)
        ent = f"entity{rng.randint(0, num_entities - 1)}"
        weight = float(rng.randint(1, 5))
        if entities[ent].policy == "fifo":
            weight = 1.0
        jobs.append(Job(str(i), dict(zip(types, thr)), sf, weight, entity=ent))
    cluster = Cluster.from_counts(dict.fromkeys(types, gpus_per_type), gpus_per_server=4)
    return Problem(cluster, tuple(jobs), entities=entities)


def _milp_case(n: int, seed: int, options: dict[str, Any]) -> dict[str, Any]:
    """``water_filling_milp(hierarchical=True)`` on the n-job "2 fair + 1 fifo" case (``n = 0``:
    Gavel's own multilevel test input), with this process's CPU seconds and peak resident memory
    (MB) — meant to run in a fresh process."""
    if n == 0:
        hp = gavel_multilevel_problem(seed)
    else:
        spec = ENTITY_SETS["2 fair + 1 fifo"]
        hp = with_entities(gavel_problem(n, seed), [w for w, _ in spec], [p for _, p in spec], seed)
    c0 = time.process_time()
    row = run_policy("water_filling_milp", hp, hierarchical=True, **options)
    row["cpu_s"] = time.process_time() - c0
    row["peak_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return row


def milp_in_fresh_process(n: int, seed: int, options: dict[str, Any]) -> dict[str, Any]:
    """:func:`_milp_case` in a new (spawned) process: its peak memory is this run's alone."""
    with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(_milp_case, n, seed, options).result()


ENTITY_SETS = {
    "2 fair + 1 fifo": [(1.0, "fairness"), (2.0, "fairness"), (3.0, "fifo")],
    "2 fair + 2 fifo": [(1.0, "fairness"), (2.0, "fairness"), (3.0, "fifo"), (1.0, "fifo")],
    "3 fair": [(1.0, "fairness"), (2.0, "fairness"), (3.0, "fairness")],
    "3 fifo": [(1.0, "fifo"), (2.0, "fifo"), (3.0, "fifo")],
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", type=int, nargs="*", default=[256, 1024, 2048])
    ap.add_argument("--pairs-sizes", type=int, nargs="*", default=[64, 128, 256])
    ap.add_argument("--milp-sizes", type=int, nargs="*", default=[16, 32, 64],
                    help="jobs of the water_filling_milp cases; 0 = Gavel's own multilevel test input (300 jobs)")
    ap.add_argument("--entities", nargs="+", default=list(ENTITY_SETS), choices=list(ENTITY_SETS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fresh-process", action="store_true",
                    help="run each water_filling_milp case in a new process and report its peak memory")
    ap.add_argument("--mip-node-limit", type=int, default=None,
                    help="water_filling_milp's branch-and-bound node budget per MILP (default: the policy's)")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time column of the policy rows: wall clock or this process's CPU seconds")
    ap.add_argument("--repeat", type=int, default=1,
                    help="policy rows: best of this many timed solves after one warm-up (all listed)")
    ap.add_argument("--no-static-split", action="store_true", help="skip the static-split comparison table")
    args = ap.parse_args(argv)
    if args.repeat < 1:
        ap.error(f"--repeat: must be at least 1 (got {args.repeat})")
    data = load_gavel()
    timing = {"clock": args.clock, "repeat": args.repeat}
    print(f"load average at start: {load_average()}", flush=True)
    print(f"| policy | entities | jobs | pairs | levels | LPs | compactions | pair cols priced | build s | compile s | "
          f"solve s | {args.clock} s | objective |{' all runs s |' if args.repeat > 1 else ''}")
    print(f"|---|---|---|---|---|---|---|---|---|---|---|---|---|{'---|' if args.repeat > 1 else ''}")

    def show(r: dict[str, Any], ents: str) -> None:
        assert not r["violations"], r["violations"]
        runs = f" {' '.join(f'{t:.3f}' for t in r['times_s'])} |" if args.repeat > 1 and "times_s" in r else ""
        print(f"| {r['policy']} | {ents} | {r['jobs']} | {r['pairs']} | {r['levels']} | {r['lp_solves']} | "
              f"{r['compactions'] if r['compactions'] is not None else '-'} | "
              f"{r['priced'] if r['priced'] is not None else '-'} | "
              f"{r['build_s']:.3f} | {r['compile_s']:.3f} | {r['solve_s']:.3f} | {r['wall_s']:.3f} | "
              f"{objective_cell(r)} |{runs}", flush=True)

    def objective_cell(r: dict[str, Any]) -> str:
        if r["objective"] is not None:
            return f"{r['objective']:.4f}"
        return f"{r['status']}: {r['objective_of_allocation']:.4f}"  # the allocation's value, not proven

    milp_options = {} if args.mip_node_limit is None else {"mip_node_limit": args.mip_node_limit}
    stops = []

    for n in args.milp_sizes:  # the published method (LP + MILP per level) against ours
        if n == 0:  # Gavel's own multilevel test input
            hp, label = gavel_multilevel_problem(args.seed), "Gavel's multilevel test (10 entities)"
        else:
            spec = ENTITY_SETS["2 fair + 1 fifo"]
            hp = with_entities(gavel_problem(n, args.seed, data=data), [w for w, _ in spec], [p for _, p in spec],
                               args.seed)
            label = "2 fair + 1 fifo"
        if args.fresh_process:
            ref = milp_in_fresh_process(n, args.seed, milp_options)
        else:
            ref = run_policy("water_filling_milp", hp, hierarchical=True, **milp_options)
        show(ref, label)
        show(run_policy("hierarchical", hp, **timing), label)
        stops.append(ref)
    for n in args.sizes:
        base = gavel_problem(n, args.seed, data=data)
        show(run_policy("max_min_fairness_water_filling", base, **timing), "-")
        for name in args.entities:
            spec = ENTITY_SETS[name]
            hp = with_entities(base, [w for w, _ in spec], [p for _, p in spec], args.seed)
            show(run_policy("hierarchical", hp, **timing), name)
    for n in args.pairs_sizes:
        base = gavel_problem(n, args.seed, data=data, colocated=True)
        show(run_policy("max_min_fairness_water_filling", base, space_sharing=True, **timing), "-")
        for name in ("2 fair + 1 fifo", "3 fair", "3 fifo"):
            spec = ENTITY_SETS[name]
            hp = with_entities(base, [w for w, _ in spec], [p for _, p in spec], args.seed)
            show(run_policy("hierarchical", hp, space_sharing=True, **timing), name)
    if stops:
        print()
        print("water_filling_milp(hierarchical=True): how it ended (0 jobs = Gavel's multilevel test input)")
        print("| jobs | status | jobs never settled | MILPs at the node limit | wall s | CPU s | peak memory MB "
              "| message |")
        print("|---|---|---|---|---|---|---|---|")
        for r in stops:
            cpu = f"{r['cpu_s']:.1f}" if "cpu_s" in r else "-"
            mem = f"{r['peak_rss_mb']:.0f}" if "peak_rss_mb" in r else "-"
            print(f"| {r['jobs']} | {r['status']} | {r['unfrozen_at_stop']} | {r['node_limit_hits']} | "
                  f"{r['wall_s']:.1f} | {cpu} | {mem} | {r['message']} |", flush=True)
    if not args.sizes or args.no_static_split:
        print(f"load average at end: {load_average()}")
        return 0
    print()
    print("Hierarchical vs a static per-entity split (Σ u_m, u = sf·thr/thr(X_equal), cluster-wide):")
    print("| jobs | entities | jobs to entities | hierarchical Σu | static split Σu | gain | "
          "static split, agnostic Σu | gain |")
    print("|---|---|---|---|---|---|---|---|")
    for n in args.sizes:
        base = gavel_problem(n, args.seed, data=data)
        for name in args.entities:
            for by in ("random", "speedup"):
                spec = ENTITY_SETS[name]
                hp = with_entities(base, [w for w, _ in spec], [p for _, p in spec], args.seed, by=by)
                h = run_policy("hierarchical", hp)
                s_tot, _ = static_split_total(hp)
                a_tot, _ = static_split_total(hp, agnostic=True)
                print(f"| {n} | {name} | {by} | {h['total_u']:.2f} | {s_tot:.2f} | "
                      f"{100 * (h['total_u'] / s_tot - 1):+.1f}% | {a_tot:.2f} | "
                      f"{100 * (h['total_u'] / a_tot - 1):+.1f}% |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
