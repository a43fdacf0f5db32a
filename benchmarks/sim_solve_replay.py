"""The simulator's policy-solve phase on its own: the problems a simulation poses, solved again in
order by one policy object, CPU seconds of the solves only.

    python benchmarks/sim_solve_replay.py record problems.json [--jobs 2000] [--rate 5.6] [--seed 0]
    python benchmarks/sim_solve_replay.py replay problems.json [--policy max_min_fairness] [--first K]

``record`` simulates a Gavel single-GPU trace on 108 GPUs (36 per type; the form of
``benchmarks/sim_scale.py``: window ``0.667:0.833``, until the window's jobs finish, migration
``matching``) under ``max_min_fairness`` and writes every problem its policy was asked to solve
(``Problem.to_dict``). ``replay`` solves them in the recorded order with one policy object — as the
simulator does, so a policy may carry state (warm starts) from one problem to the next — and prints
the mean CPU milliseconds per solve and the sum of the objectives (equal across code versions that
solve the same LPs). The recorded file is plain problem JSON, so the same file can be replayed by
another checkout of the library (run this script with that checkout first on ``PYTHONPATH``) side by
side, on the same inputs.
"""
from __future__ import annotations

import argparse
import json
import time

import numpy as np


def record(path: str, jobs: int, rate: float, seed: int) -> None:
    """Simulate ``jobs`` Gavel jobs at ``rate`` jobs/hour (trace ``seed``) under ``max_min_fairness``
    and write every problem its policy was asked to solve, in order, to ``path`` (a JSON list of
    ``Problem.to_dict``)."""
    from policyopt.data.gavel import load_gavel
    from policyopt.policy import get_policy
    from policyopt.sim.simulator import SimConfig, Simulator
    from policyopt.sim.traces import gavel_trace

    table = load_gavel()
    trace = gavel_trace(table, jobs, rate, seed=seed)
    posed: list[dict] = []
    cls = type(get_policy("max_min_fairness"))  # the simulator makes its own instance by name
    solve = cls.solve

    def recording(self, problem):  # type: ignore[no-untyped-def]
        posed.append(problem.to_dict())
        return solve(self, problem)

    cls.solve = recording  # type: ignore[method-assign]
    try:
        cfg = SimConfig(policy="max_min_fairness", migration="matching", seed=seed, window=(0.667, 0.833),
                        until="window")
        Simulator("v100=36,p100=36,k80=36", cfg, table).run(trace)
    finally:
        cls.solve = solve  # type: ignore[method-assign]
    for p in posed:  # zero isolated time is the default: older versions of the format do not know the key
        for j in p["jobs"]:
            if not j.get("isolated_time"):
                j.pop("isolated_time", None)
    with open(path, "w") as f:
        json.dump(posed, f)
    sizes = [len(p["jobs"]) for p in posed]
    print(f"wrote {len(posed)} problems ({np.mean(sizes):.0f} jobs on average, at most {max(sizes)}) to {path}")


def replay(path: str, policy: str, first: int | None) -> None:
    """Solve the problems recorded in ``path`` (the first ``first``, or all) in order with one
    ``policy`` object; print the mean CPU milliseconds per solve (``time.process_time`` around each
    ``solve``) and the sum of the objectives."""
    import policyopt
    from policyopt.policy import get_policy
    from policyopt.problem import Problem

    with open(path) as f:
        data = json.load(f)
    problems = [Problem.from_dict(d) for d in data[:first]]
    if not problems:
        raise SystemExit(f"{path}: no problems to replay (the file holds {len(data)})")
    pol = get_policy(policy)
    cpu, objective = 0.0, 0.0
    for p in problems:
        c0 = time.process_time()
        res = pol.solve(p)
        cpu += time.process_time() - c0
        objective += float(res.objective) if res.objective is not None else 0.0
    print(f"{policyopt.__file__}: {len(problems)} solves, {cpu / len(problems) * 1e3:.3f} ms CPU per solve; "
          f"sum of objectives {objective:.9f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("mode", choices=("record", "replay"))
    ap.add_argument("path")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--rate", type=float, default=5.6, help="jobs/hour")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--policy", default="max_min_fairness")
    ap.add_argument("--first", type=int, default=None, help="replay only the first K problems")
    args = ap.parse_args()
    if args.first is not None and args.first < 1:
        ap.error(f"--first must be >= 1 (got {args.first})")
    if args.mode == "record":
        record(args.path, args.jobs, args.rate, args.seed)
    else:
        replay(args.path, args.policy, args.first)


if __name__ == "__main__":
    main()
