"""A reduced (aggregated) LP solved by interior point holds no simplex factorization: reading its
basic variables (``getBasicVariables``) then crashed the process inside HiGHS. Max-min fairness with
space sharing at 512 Gavel jobs is such a case (its reduced LP, ~8,000 columns, goes to interior point
+ crossover; the ``fill`` stage then asked for the first stage's basis). Run in a child process so
that a crash fails this test instead of the whole run."""
from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

_SCRIPT = textwrap.dedent("""
    import importlib.util, sys
    spec = importlib.util.spec_from_file_location("policies_bench", sys.argv[1])
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    from policyopt.data import load_gavel
    from policyopt.policy import get_policy
    from policyopt.solvers.highs import HighsModel

    problem = bench.workload(load_gavel(), 512, seed=0, colocated=True)
    ipm_runs = []
    run = HighsModel._run

    def spy(self):
        ipm_runs.append(self.options.algorithm == "ipm")
        return run(self)

    HighsModel._run = spy
    pol = get_policy("max_min_fairness", space_sharing=True, pair_top_k=8)
    first = pol.solve(problem)
    again = pol.solve(problem)  # (the kept model re-solved)
    ref = get_policy("max_min_fairness", space_sharing=True, pair_top_k=8, algorithm="simplex").solve(problem)
    print(first.status.value, again.status.value, any(ipm_runs), first.objective, again.objective, ref.objective)
""")


def test_a_reduced_lp_solved_by_interior_point_is_not_asked_for_its_basis() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT, str(ROOT / "benchmarks" / "policies_bench.py")],
                         capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert out.returncode == 0, f"exit {out.returncode}: {out.stderr[-2000:]}"
    s1, s2, ipm, a, b, ref = out.stdout.split()
    assert (s1, s2) == ("optimal", "optimal")
    assert ipm == "True"  # (the case this test is about: an interior point run of the reduced LP)
    for v in (float(a), float(b)):
        assert abs(v - float(ref)) <= 1e-7 * max(1.0, abs(float(ref)))
