"""Fluid capacity of a cluster under Gavel's job generator: the highest arrival rate (jobs/hour) at
which a heterogeneity-aware, or a type-agnostic, allocation can keep up with the work::

    python -m policyopt.sim.capacity --cluster v100=36,p100=36,k80=36 [--multi-gpu]

Job classes ``k`` = (Gavel job type, scale factor ``s_k``), drawn with probability ``p_k`` (scale
factor 1/2/4/8 w.p. 0.7/0.1/0.15/0.05 with ``--multi-gpu``, else 1; then uniformly among the job types
of that scale factor that run on a V100, as :func:`~policyopt.sim.traces.gavel_trace` draws them).
A job's drawn duration ``D`` is its time on ``s_k`` V100s; ``r[k, c] = T[k, c] / T[k, v100]`` is its
speed on type ``c`` relative to that, so ``y`` GPU-seconds of type ``c`` do ``y · r[k, c] / s_k``
V100-seconds of its work. ``E[D] = 60 · (0.8 · (10^3 − 10^1.5) / (1.5 ln 10) + 0.2 · (10^4 − 10^3) / ln 10)`` s.

* **aware**: ``max λ`` s.t. ``Σ_c y[k, c] · r[k, c] / s_k ≥ λ · p_k · E[D]`` for every class and
  ``Σ_k y[k, c] ≤ 3600 · n_c`` (``y``: GPU-seconds of type ``c`` per hour given to class ``k``) — an LP;
* **agnostic**: every class's GPU time spread over the types in proportion to their counts
  ``f_c = n_c / Σ n`` (a type-blind allocation of a busy cluster), so
  ``λ = 3600 · Σ n / Σ_k p_k · E[D] · s_k / Σ_c f_c · r[k, c]``.

Below its capacity a policy can reach a steady state; above it its queue grows for as long as jobs
arrive. This is a bound on the long-run rate, not a JCT: rounds, gang scheduling of multi-GPU jobs
and the policy's own choices lower what is reached in simulation.
"""
from __future__ import annotations

import argparse
import json
from typing import Any, Sequence

import numpy as np

from ..data.gavel import GavelThroughputs

__all__ = ["mean_gavel_duration", "gavel_classes", "fluid_capacity", "main"]

_SCALE_P = {1: 0.7, 2: 0.1, 4: 0.15, 8: 0.05}


def mean_gavel_duration() -> float:
    """``E[D]`` in seconds of Gavel's duration draw ``60 · 10^U(1.5, 3)`` w.p. 0.8, else ``60 · 10^U(3, 4)``."""
    def mean_pow(a: float, b: float) -> float:
        return (10.0 ** b - 10.0 ** a) / ((b - a) * np.log(10.0))
    return 60.0 * (0.8 * mean_pow(1.5, 3.0) + 0.2 * mean_pow(3.0, 4.0))


def gavel_classes(table: GavelThroughputs, types: Sequence[str], multi_gpu: bool
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(p, s, r)``: class probabilities, scale factors and speeds relative to a V100 (classes × types)."""
    v100 = table.configs.index("v100")
    cols = [table.configs.index(t) for t in types]
    probs, scales, rows = [], [], []
    for sf, p_sf in (_SCALE_P.items() if multi_gpu else [(1, 1.0)]):
        cands = table.types_with_scale(sf)
        cands = cands[table.alone[cands, v100] > 0]
        for t in cands:
            probs.append(p_sf / len(cands))
            scales.append(sf)
            rows.append(table.alone[t, cols] / table.alone[t, v100])
    return np.array(probs), np.array(scales, float), np.array(rows, float)


def fluid_capacity(table: GavelThroughputs, counts: dict[str, int], multi_gpu: bool = False) -> dict[str, Any]:
    """Jobs/hour each allocation can sustain on ``counts`` (module docstring), and the aware LP's
    GPU-hours per hour by type."""
    from scipy.optimize import linprog

    types = list(counts)
    n = np.array([counts[t] for t in types], float)
    p, s, r = gavel_classes(table, types, multi_gpu)
    ed = mean_gavel_duration()
    K, C = r.shape
    # variables: y (K*C, row-major) then λ; maximize λ
    cost = np.zeros(K * C + 1)
    cost[-1] = -1.0
    work = np.zeros((K, K * C + 1))  # λ p_k E[D] - Σ_c y r / s ≤ 0
    for k in range(K):
        work[k, k * C:(k + 1) * C] = -r[k] / s[k]
        work[k, -1] = p[k] * ed
    cap = np.zeros((C, K * C + 1))
    for c in range(C):
        cap[c, c:K * C:C] = 1.0
    res = linprog(cost, A_ub=np.vstack([work, cap]), b_ub=np.concatenate([np.zeros(K), 3600.0 * n]),
                  bounds=[(0, None)] * (K * C + 1), method="highs")
    if res.status != 0:
        raise RuntimeError(f"capacity LP failed: {res.message}")
    y = res.x[:-1].reshape(K, C)
    f = n / n.sum()
    agnostic = 3600.0 * n.sum() / float((p * ed * s / (r @ f)).sum())
    return {"cluster": dict(counts), "multi_gpu": multi_gpu, "mean_duration_hours": ed / 3600.0,
            "mean_scale_factor": float((p * s).sum()), "aware_jobs_per_hour": float(res.x[-1]),
            "agnostic_jobs_per_hour": agnostic,
            "aware_gpu_share_by_type": {t: float(y[:, c].sum() / (3600.0 * n[c])) for c, t in enumerate(types)}}


def main(argv: Sequence[str] | None = None) -> int:
    from ..cluster_counts import parse_cluster
    from ..data.gavel import load_gavel

    ap = argparse.ArgumentParser(prog="python -m policyopt.sim.capacity", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", default="v100=36,p100=36,k80=36")
    ap.add_argument("--multi-gpu", action="store_true")
    args = ap.parse_args(argv)
    counts = parse_cluster(args.cluster)
    print(json.dumps(fluid_capacity(load_gavel(), counts, args.multi_gpu), indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
