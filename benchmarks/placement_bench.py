"""Placement benchmarks: migrations (matching vs simple rule) and per-round stage times.

Run:  python benchmarks/placement_bench.py [--rounds 200] [--seed 0] [--quick]

1. Migrations: a simulated cluster with random job arrivals/departures; every round LAS selects
   jobs, the matching packer pairs pending jobs (Gavel co-location throughputs), the placer plans
   from scratch (biggest first, best fit, no lease renewal), and each migration strategy relabels
   that plan against *its own* previous placement. A job is migrated when it runs in two
   consecutive rounds on different GPUs. Also shown: the lease-renewing placer without relabeling.
2. Timing: select + pack + place + migrate for 2,048 active jobs on 256 GPUs and 8,192 jobs on
   1,024 GPUs (second of two rounds, so lease renewal and migration minimization have a previous
   placement); median over repetitions.
3. Timing of the round mechanism (allocation with singles and pairs) at the same sizes.

Throughputs come from ``../shared/data/gavel/simulation_throughputs.json`` (relative to the repo
root); without it the script says so and uses a seeded synthetic table.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from policyopt.mechanism import RoundMechanism
from policyopt.placement import (
    ClusterLayout,
    ConsolidatingPlacer,
    JobInfo,
    LeastAttainedService,
    MatchingMigration,
    MatchingPacker,
    NoMigrationMinimization,
    PairThroughputTable,
    Placement,
    RoundPipeline,
    SimpleRuleMigration,
    TesseraeMigration,
    migrated_jobs,
)

REPO = Path(__file__).resolve().parents[1]
GAVEL = REPO.parent / "shared" / "data" / "gavel" / "simulation_throughputs.json"
TYPES = ("v100", "p100", "k80")


@dataclass
class Workload:
    """Model names (with scale factor) and a pair-throughput table over them."""

    models: list[str]
    scale: dict[str, int]
    raw: dict
    source: str

    def table(self, job_model: dict[str, str]) -> PairThroughputTable:
        return PairThroughputTable.from_gavel(self.raw, job_model)


def load_workload(seed: int) -> Workload:
    """Gavel's throughputs for k80/p100/v100, or a seeded synthetic table if the file is missing."""
    if GAVEL.exists():
        raw = json.loads(GAVEL.read_text())
        raw = {t: raw[t] for t in TYPES}
        models = sorted(raw["v100"])
        scale = {m: int(m.rsplit(",", 1)[1].strip(" )")) for m in models}
        return Workload(models, scale, raw, str(GAVEL))
    print(f"NOTE: {GAVEL} not found; using a synthetic seeded throughput table", file=sys.stderr)
    rng = np.random.default_rng(seed)
    models = [f"('m{i}', {s})" for s in (1, 2, 4, 8) for i in range(10)]  # Gavel's key format
    scale = {m: int(m.rsplit(",", 1)[1].strip(" )")) for m in models}
    raw: dict = {}
    for t in TYPES:
        raw[t] = {}
        for m in models:
            alone = float(rng.uniform(1, 10))
            raw[t][m] = {"null": alone}
        for m in models:
            for o in models:
                if scale[m] == scale[o] and rng.random() < 0.8:
                    raw[t][m][o] = [raw[t][m]["null"] * rng.uniform(0.3, 0.8),
                                    raw[t][o]["null"] * rng.uniform(0.3, 0.8)]
    return Workload(models, scale, raw, "synthetic")


def layout_for(num_gpus: int, gpus_per_server: int = 8) -> ClusterLayout:
    """Three worker types sharing ``num_gpus`` GPUs (v100 gets the rounding remainder)."""
    servers = num_gpus // gpus_per_server
    third = servers // 3
    return ClusterLayout.from_servers({"v100": (servers - 2 * third, gpus_per_server),
                                       "p100": (third, gpus_per_server), "k80": (third, gpus_per_server)})


def random_jobs(rng: np.random.Generator, wl: Workload, n: int, start: int = 0,
                now: float = 0.0) -> tuple[list[JobInfo], dict[str, str]]:
    """``n`` jobs with random models; ~70% single-GPU (scale factors 1/2/4/8 as 70/15/10/5 %)."""
    by_sf = {s: [m for m in wl.models if wl.scale[m] == s] for s in (1, 2, 4, 8)}
    sfs = rng.choice([1, 2, 4, 8], size=n, p=[0.7, 0.15, 0.1, 0.05])
    jobs, model = [], {}
    for i, s in enumerate(sfs.tolist()):
        jid = f"j{start + i}"
        m = by_sf[s][int(rng.integers(len(by_sf[s])))]
        model[jid] = m
        jobs.append(JobInfo(jid, s, arrival_time=now, attained_service=float(rng.uniform(0, 3600)),
                            high_priority=bool(rng.random() < 0.01)))
    return jobs, model


# ---------------------------------------------------------------------------- migrations
def simulate_migrations(wl: Workload, num_gpus: int, rounds: int, seed: int, load: float = 2.0) -> dict[str, list[int]]:
    """Migrations per round for each strategy on the same sequence of round assignments."""
    rng = np.random.default_rng(seed)
    layout = layout_for(num_gpus)
    n0 = int(load * num_gpus)
    jobs, model = random_jobs(rng, wl, n0)
    next_id = n0
    table_model = dict(model)
    lengths = {j.job_id: int(rng.geometric(1 / 20)) for j in jobs}  # rounds of service needed
    policy = LeastAttainedService()
    scratch, sticky = ConsolidatingPlacer(renew=False), ConsolidatingPlacer(renew=True)
    # (placer, migration minimizer) per strategy; each keeps its own previous placement
    strategies = {
        "scratch+none": (scratch, NoMigrationMinimization()),
        "scratch+simple": (scratch, SimpleRuleMigration()),
        "scratch+tesserae": (scratch, TesseraeMigration()),
        "scratch+matching": (scratch, MatchingMigration()),
        "renew+none": (sticky, NoMigrationMinimization()),
        "renew+matching": (sticky, MatchingMigration()),
    }
    prev: dict[str, Placement | None] = {k: None for k in strategies}
    moved: dict[str, list[int]] = {k: [] for k in strategies}
    round_len = 360.0
    for r in range(rounds):
        now = r * round_len
        # arrivals: Poisson with mean = expected departures (running jobs / mean length)
        arrivals = int(rng.poisson(max(1.0, len(jobs) / 20 / 4)))
        new, m_new = random_jobs(rng, wl, arrivals, next_id, now)
        next_id += arrivals
        table_model.update(m_new)
        for j in new:
            lengths[j.job_id] = int(rng.geometric(1 / 20))
        jobs.extend(new)
        packer = MatchingPacker(wl.table(table_model))
        by_id = {j.job_id: j for j in jobs}
        selection = policy.select(jobs, layout.worker_counts())
        assignment = packer.pack(selection, by_id)
        plan = scratch.place(layout, assignment, None)
        for name, (placer, strat) in strategies.items():
            base = plan if placer is scratch else placer.place(layout, assignment, prev[name])
            placed = strat.relabel(prev[name], base)
            moved[name].append(len(migrated_jobs(prev[name], placed)))
            prev[name] = placed
        # service accounting and departures
        running = assignment.running_jobs()
        updated = []
        for j in jobs:
            if j.job_id in running:
                lengths[j.job_id] -= 1
                j = replace(j, attained_service=j.attained_service + round_len * j.scale_factor)
                if lengths[j.job_id] <= 0:
                    continue  # completed
            updated.append(j)
        jobs = updated
    return moved


# ---------------------------------------------------------------------------- timing
def time_rounds(wl: Workload, num_jobs: int, num_gpus: int, seed: int, reps: int) -> dict[str, float]:
    """Median stage times (seconds) of the second of two rounds, over ``reps`` repetitions."""
    samples: dict[str, list[float]] = {}
    for rep in range(reps):
        rng = np.random.default_rng(seed + rep)
        layout = layout_for(num_gpus)
        jobs, model = random_jobs(rng, wl, num_jobs)
        pipe = RoundPipeline(layout, LeastAttainedService(), ConsolidatingPlacer(renew=True),
                             MatchingPacker(wl.table(model)), MatchingMigration())
        first = pipe.run_round(jobs)
        running = first.assignment.running_jobs()
        jobs = [replace(j, attained_service=j.attained_service + 360.0 * j.scale_factor) if j.job_id in running else j
                for j in jobs]
        res = pipe.run_round(jobs)
        _ = res.placement  # the second round is the timed one
        for k, v in res.timings.items():
            samples.setdefault(k, []).append(v)
        samples.setdefault("migrated", []).append(float(len(res.migrated)))
        samples.setdefault("running", []).append(float(len(res.assignment.running_jobs())))
    return {k: statistics.median(v) for k, v in samples.items()}


def time_relabelings(wl: Workload, num_jobs: int, num_gpus: int, seed: int, reps: int) -> dict[str, float]:
    """Median seconds per relabeling (and jobs moved) of each rule on the same pair of plans: two
    consecutive LAS rounds placed from scratch (no lease renewal), so the relabeling has work to do."""
    rules = {"simple": SimpleRuleMigration(), "tesserae": TesseraeMigration(), "matching": MatchingMigration()}
    samples: dict[str, list[float]] = {}
    for rep in range(reps):
        rng = np.random.default_rng(seed + rep)
        layout = layout_for(num_gpus)
        jobs, model = random_jobs(rng, wl, num_jobs)
        pipe = RoundPipeline(layout, LeastAttainedService(), ConsolidatingPlacer(renew=False),
                             MatchingPacker(wl.table(model)), NoMigrationMinimization())
        old = pipe.run_round(jobs).placement
        running = set(old.gpus)
        jobs = [replace(j, attained_service=j.attained_service + 360.0 * j.scale_factor
                        * float(rng.uniform(0.5, 1.5))) if j.job_id in running else j for j in jobs]
        new = pipe.run_round(jobs).placement
        for name, rule in rules.items():
            t0 = time.perf_counter()
            relabeled = rule.relabel(old, new)
            samples.setdefault(name, []).append(time.perf_counter() - t0)
            samples.setdefault(f"{name}_moved", []).append(float(len(migrated_jobs(old, relabeled))))
    return {k: statistics.median(v) for k, v in samples.items()}


def time_mechanism(num_jobs: int, num_gpus: int, seed: int, rounds: int = 20) -> dict[str, float]:
    """RoundMechanism: set_allocation time and median schedule_round + record_round time.

    Every job gets half its budget alone (spread over the types in proportion to their size) and
    half in a pair with another job of the same scale factor (disjoint pairs)."""
    rng = np.random.default_rng(seed)
    counts = {"v100": num_gpus // 2, "p100": num_gpus // 4, "k80": num_gpus - num_gpus // 2 - num_gpus // 4}
    sf = {f"j{i}": int(s) for i, s in enumerate(rng.choice([1, 2, 4, 8], size=num_jobs, p=[0.7, 0.15, 0.1, 0.05]))}
    total = sum(sf.values())
    alloc = {j: {t: 0.5 * c / total for t, c in counts.items()} for j in sf}
    colocated = []
    for s_ in (1, 2, 4, 8):
        same = [j for j in sf if sf[j] == s_]
        same = [same[i] for i in rng.permutation(len(same))]
        for a, b in zip(same[0::2], same[1::2]):
            colocated += [{"jobs": [a, b], "worker_type": t, "fraction": 0.5 * c / total} for t, c in counts.items()]
    mech = RoundMechanism(counts)
    t0 = time.perf_counter()
    mech.set_allocation(alloc, colocated, sf)
    t_set = time.perf_counter() - t0
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        mech.record_round(mech.schedule_round())
        times.append(time.perf_counter() - t0)
    return {"set": t_set, "round": statistics.median(times), "combos": float(len(mech.arrays.combos))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=200)
    ap.add_argument("--gpus", type=int, default=128, help="GPUs in the migration simulation")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="small sizes (smoke test)")
    args = ap.parse_args(argv)
    wl = load_workload(args.seed)
    print(f"throughputs: {wl.source}")
    rounds = 20 if args.quick else args.rounds
    t = time.perf_counter()
    moved = simulate_migrations(wl, 32 if args.quick else args.gpus, rounds, args.seed)
    print(f"\nMigrations over {rounds} rounds, {32 if args.quick else args.gpus} GPUs "
          f"(simulated in {time.perf_counter() - t:.1f} s)")
    print(f"{'placer+relabeling':<18} {'total':>7} {'per round':>10} {'vs scratch+simple':>18}")
    base = max(sum(moved["scratch+simple"]), 1)
    for name, per_round in moved.items():
        tot = sum(per_round)
        print(f"{name:<18} {tot:>7d} {tot / rounds:>10.2f} {tot / base:>18.3f}")
    sizes = [(256, 32)] if args.quick else [(2048, 256), (8192, 1024)]
    print("\nStage times, second round (median of %d), seconds" % args.reps)
    print(f"{'jobs':>6} {'GPUs':>5} {'running':>8} {'select':>8} {'pack':>8} {'place':>8} {'migrate':>8} "
          f"{'pack+place+migr':>16} {'total':>8} {'migrated':>9}")
    for n, g in sizes:
        s = time_rounds(wl, n, g, args.seed, args.reps)
        ppm = s["pack"] + s["place"] + s["migrate"]
        print(f"{n:>6d} {g:>5d} {s['running']:>8.0f} {s['select']:>8.4f} {s['pack']:>8.4f} {s['place']:>8.4f} "
              f"{s['migrate']:>8.4f} {ppm:>16.4f} {s['total']:>8.4f} {s['migrated']:>9.0f}")
    print("\nTime per relabeling, plans from scratch (median of %d), seconds [jobs moved]" % args.reps)
    print(f"{'jobs':>6} {'GPUs':>5} {'simple':>16} {'tesserae':>16} {'matching':>16} {'matching/tesserae':>18}")
    for n, g in sizes:
        r = time_relabelings(wl, n, g, args.seed, args.reps)
        cells = "".join(f"{r[k]:>9.4f} [{r[k + '_moved']:>4.0f}]" for k in ("simple", "tesserae", "matching"))
        print(f"{n:>6d} {g:>5d} {cells} {r['matching'] / r['tesserae']:>18.2f}")
    print("\nRound mechanism (job and pair rows x 3 worker types), seconds")
    print(f"{'jobs':>6} {'GPUs':>5} {'rows':>6} {'set_allocation':>15} {'schedule+record (median)':>25}")
    for n, g in sizes:
        m = time_mechanism(n, g, args.seed)
        print(f"{n:>6d} {g:>5d} {m['combos']:>6.0f} {m['set']:>15.4f} {m['round']:>25.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
