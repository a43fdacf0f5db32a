"""Gavel's measured throughputs (``../shared/data/gavel/``, MIT licence).

File format: ``{worker_type: {"('<model>', <sf>)": {"null": alone_steps_per_s,
"('<other>', <sf>)": [this_job, other_job]}}}``; worker types ``k80, p100, v100`` and
``<type>_unconsolidated`` for multi-GPU jobs spread across servers.

:class:`GavelThroughputs` holds them as dense arrays indexed by *job type* = (model, scale factor):
``alone[type, config]`` and ``paired[type_a, type_b, config, 2]`` (0 where not measured), which is
what the trace generators and benchmarks need to build problems of thousands of jobs quickly.
"""
from __future__ import annotations

import ast
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np

from ..errors import InputError
from ..problem import Cluster, Colocation, Job, Problem, physical_type

__all__ = ["GavelThroughputs", "find_gavel_dir", "load_gavel"]


def find_gavel_dir(start: str | Path | None = None) -> Path:
    """Locate ``shared/data/gavel``: ``$POLICYOPT_GAVEL_DIR``, then ``../shared/data/gavel`` relative to
    the project root (or ``start``) and its parents. Raises ``InputError`` naming where it looked."""
    env = os.environ.get("POLICYOPT_GAVEL_DIR")
    candidates: list[Path] = [Path(env)] if env else []
    roots = [Path(start) if start else Path.cwd(), Path(__file__).resolve().parents[2]]
    for root in roots:
        for p in [root, *root.parents][:4]:
            candidates.append(p / ".." / "shared" / "data" / "gavel")
            candidates.append(p / "shared" / "data" / "gavel")
    for c in candidates:
        if (c / "simulation_throughputs.json").exists():
            return c.resolve()
    raise InputError("gavel_data_dir", [str(c) for c in candidates[:4]],
                     "Gavel throughput data not found: expected ../shared/data/gavel/simulation_throughputs.json "
                     "beside the project checkout (or set POLICYOPT_GAVEL_DIR)")


@dataclass
class GavelThroughputs:
    """Dense view of a Gavel throughput file."""

    job_types: list[tuple[str, int]]          # (model, scale factor)
    configs: list[str]                         # worker types incl. *_unconsolidated
    alone: np.ndarray                          # (types, configs)
    paired: np.ndarray                         # (types, types, configs, 2)

    @property
    def worker_types(self) -> list[str]:
        return [c for c in self.configs if physical_type(c) == c]

    def type_index(self, model: str, scale_factor: int) -> int:
        try:
            return self.job_types.index((model, scale_factor))
        except ValueError:
            raise InputError("job_type", (model, scale_factor), "not in the Gavel throughput file") from None

    def types_with_scale(self, scale_factor: int) -> np.ndarray:
        return np.array([i for i, (_, s) in enumerate(self.job_types) if s == scale_factor], np.int64)

    def problem(self, job_types: Sequence[int], cluster: Cluster | dict[str, int], *,
                steps: Sequence[float] | None = None, weights: Sequence[float] | None = None,
                time_since_start: Sequence[float] | None = None, ids: Sequence[str] | None = None,
                colocated: bool = False, consolidation: bool = True) -> Problem:
        """A :class:`Problem` with one job per entry of ``job_types`` (indices into ``job_types``).

        ``colocated=True`` adds a colocation entry for every pair of jobs with equal scale factors
        that the data measured with non-zero throughputs (O(n²): use for small problems).
        ``consolidation=True`` also gives multi-GPU jobs their ``<type>_unconsolidated`` throughput.
        """
        if isinstance(cluster, dict):
            cluster = Cluster.from_counts(cluster)
        names = cluster.names
        n = len(job_types)
        ids = list(ids) if ids is not None else [str(i) for i in range(n)]
        cfg_keep = [i for i, c in enumerate(self.configs)
                    if physical_type(c) in names and (consolidation or physical_type(c) == c)]
        jobs = []
        for k, t in enumerate(job_types):
            sf = self.job_types[t][1]
            thr = {self.configs[c]: float(self.alone[t, c]) for c in cfg_keep
                   if self.alone[t, c] > 0 and (sf > 1 or physical_type(self.configs[c]) == self.configs[c])}
            if not thr:  # keep the job valid: it can at least run where the file says 0 → skip type
                raise InputError(f"jobs[{ids[k]}].job_type", self.job_types[t], "has no non-zero throughput")
            jobs.append(Job(ids[k], thr, scale_factor=sf,
                            weight=1.0 if weights is None else float(weights[k]),
                            steps_remaining=1000.0 if steps is None else float(steps[k]),
                            time_since_start=0.0 if time_since_start is None else float(time_since_start[k])))
        colocs: list[Colocation] = []
        if colocated:
            jt = np.asarray(job_types)
            for a in range(n):
                for b in range(a + 1, n):
                    for c in cfg_keep:
                        ta, tb = self.paired[jt[a], jt[b], c]
                        if ta > 0 and tb > 0:
                            colocs.append(Colocation((ids[a], ids[b]), self.configs[c], (float(ta), float(tb))))
        return Problem(cluster, tuple(jobs), tuple(colocs))


def _parse_key(key: str) -> tuple[str, int]:
    model, sf = ast.literal_eval(key)
    return str(model), int(sf)


def load_gavel(path: str | Path | None = None, which: str = "simulation") -> GavelThroughputs:
    """Load ``simulation_throughputs.json`` (default) or ``physical_cluster_throughputs.json``."""
    if path is None:
        path = find_gavel_dir() / f"{'simulation' if which == 'simulation' else 'physical_cluster'}_throughputs.json"
    path = Path(path)
    if not path.exists():
        raise InputError("gavel_file", str(path), "file not found")
    try:
        raw = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(str(path), f"line {exc.lineno}", f"malformed JSON: {exc.msg}") from None
    configs = list(raw)
    types: list[tuple[str, int]] = []
    for wt in configs:
        for key in raw[wt]:
            jt = _parse_key(key)
            if jt not in types:
                types.append(jt)
    types.sort(key=lambda x: (x[1], x[0]))
    pos = {t: i for i, t in enumerate(types)}
    nt, nc = len(types), len(configs)
    alone = np.zeros((nt, nc))
    paired = np.zeros((nt, nt, nc, 2))
    for c, wt in enumerate(configs):
        for key, entry in raw[wt].items():
            a = pos[_parse_key(key)]
            for other, val in entry.items():
                if other == "null":
                    alone[a, c] = float(val)
                else:
                    b = pos[_parse_key(other)]
                    paired[a, b, c] = [float(val[0]), float(val[1])]
    return GavelThroughputs(types, configs, alone, paired)


def iter_pairs(n: int) -> Iterable[tuple[int, int]]:
    for a in range(n):
        for b in range(a + 1, n):
            yield a, b
