"""Gavel's measured throughputs (shipped in ``policyopt/data/gavel_throughputs/``, MIT licence).

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
from typing import Sequence

import numpy as np

from ..errors import InputError, UnknownNameError
from ..problem import Cluster, Colocation, Job, Problem, TypeColocation, physical_type

__all__ = ["GavelThroughputs", "find_gavel_dir", "load_gavel", "PACKAGED_DIR", "GAVEL_DIR_ENV"]


#: the copy shipped with the package (MIT; ``LICENSE.gavel`` and ``README.md`` beside the tables)
PACKAGED_DIR = Path(__file__).resolve().parent / "gavel_throughputs"
GAVEL_DIR_ENV = "POLICYOPT_GAVEL_DIR"
_FILES = {"simulation": "simulation_throughputs.json", "physical": "physical_cluster_throughputs.json"}


def find_gavel_dir() -> Path:
    """The directory of Gavel's throughput tables: ``$POLICYOPT_GAVEL_DIR`` when set (it must be
    an existing directory: a wrong override is an error, never silently replaced), else the copy
    shipped with the package (``policyopt/data/gavel_throughputs``)."""
    env = os.environ.get(GAVEL_DIR_ENV)
    if env:
        path = Path(env).expanduser()
        if not path.is_dir():
            raise InputError(GAVEL_DIR_ENV, env, "is not a directory (unset it to use the tables shipped "
                                                 "with policyopt)")
        return path.resolve()
    if not (PACKAGED_DIR / _FILES["simulation"]).exists():
        raise InputError("gavel_data_dir", str(PACKAGED_DIR), "the Gavel tables shipped with policyopt are "
                         f"missing (a broken install?); set {GAVEL_DIR_ENV} to a directory holding them")
    return PACKAGED_DIR


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

    def type_label(self, t: int) -> str:
        """The ``job_type`` label of job type ``t``: ``"<model>#<scale factor>"`` (as in ``policyopt.sim``)."""
        model, sf = self.job_types[t]
        return f"{model}#{sf}"

    def problem(self, job_types: Sequence[int], cluster: Cluster | dict[str, int], *,
                steps: Sequence[float] | None = None, weights: Sequence[float] | None = None,
                time_since_start: Sequence[float] | None = None, ids: Sequence[str] | None = None,
                colocated: bool | str = False, consolidation: bool = True,
                arrivals: Sequence[float] | None = None) -> Problem:
        """A :class:`Problem` with one job per entry of ``job_types`` (indices into ``job_types``).

        ``colocated``: ``False`` (no space-sharing data); ``"types"`` — every job gets its
        ``job_type`` label (:meth:`type_label`) and the problem a ``colocated_types`` table with one
        entry per pair of job types present and configuration the data measured with non-zero
        throughputs (size independent of the number of jobs; expanded vectorized, with pruning, by
        :class:`~policyopt.allocation.AllocationSpace`); ``True`` — one explicit
        :class:`~policyopt.problem.Colocation` per pair of jobs (O(n²) entries: small problems only;
        the pairs are found with numpy, the entries are Python objects).
        ``consolidation=True`` also gives multi-GPU jobs their ``<type>_unconsolidated`` throughput.
        """
        if isinstance(cluster, dict):
            cluster = Cluster.from_counts(cluster)
        if colocated not in (False, True, "types"):
            raise InputError("colocated", colocated, "must be False, True or 'types'")
        names = cluster.names
        jt = np.asarray(job_types, dtype=np.int64)
        n = jt.size
        ids = list(ids) if ids is not None else [str(i) for i in range(n)]
        cfg_keep = [i for i, c in enumerate(self.configs)
                    if physical_type(c) in names and (consolidation or physical_type(c) == c)]
        by_type = colocated == "types"
        jobs = []
        for k, t in enumerate(jt.tolist()):
            sf = self.job_types[t][1]
            thr = {self.configs[c]: float(self.alone[t, c]) for c in cfg_keep
                   if self.alone[t, c] > 0 and (sf > 1 or physical_type(self.configs[c]) == self.configs[c])}
            if not thr:  # keep the job valid: it can at least run where the file says 0 → skip type
                raise InputError(f"jobs[{ids[k]}].job_type", self.job_types[t], "has no non-zero throughput")
            jobs.append(Job(ids[k], thr, scale_factor=sf,
                            weight=1.0 if weights is None else float(weights[k]),
                            steps_remaining=1000.0 if steps is None else float(steps[k]),
                            time_since_start=0.0 if time_since_start is None else float(time_since_start[k]),
                            arrival=None if arrivals is None else float(arrivals[k]),
                            job_type=self.type_label(t) if by_type else None))
        colocs: list[Colocation] = []
        type_colocs: list[TypeColocation] = []
        cfg = np.asarray(cfg_keep, np.int64)
        if by_type:
            present = np.unique(jt)
            sub = self.paired[np.ix_(present, present, cfg)]  # (p, p, configs, 2)
            ia, ib, ic = np.nonzero((sub[..., 0] > 0) & (sub[..., 1] > 0))
            keep = ia <= ib  # the file is symmetric; one entry per unordered pair of types
            for x, y, c in zip(ia[keep], ib[keep], ic[keep]):
                ta, tb = sub[x, y, c]
                type_colocs.append(TypeColocation((self.type_label(int(present[x])), self.type_label(int(present[y]))),
                                                  self.configs[int(cfg[c])], (float(ta), float(tb))))
        elif colocated:
            a, b = np.triu_indices(n, k=1)
            for c in cfg_keep:
                pt = self.paired[jt[a], jt[b], c]
                nz = np.flatnonzero((pt[:, 0] > 0) & (pt[:, 1] > 0))
                for i in nz.tolist():
                    colocs.append(Colocation((ids[a[i]], ids[b[i]]), self.configs[c],
                                             (float(pt[i, 0]), float(pt[i, 1]))))
        return Problem(cluster, tuple(jobs), tuple(colocs), colocated_types=tuple(type_colocs))


def _parse_key(key: str) -> tuple[str, int]:
    model, sf = ast.literal_eval(key)
    return str(model), int(sf)


def load_gavel(path: str | Path | None = None, which: str = "simulation") -> GavelThroughputs:
    """Load ``path``, or ``simulation_throughputs.json`` (``which="simulation"``, default) or
    ``physical_cluster_throughputs.json`` (``which="physical"``) from :func:`find_gavel_dir`."""
    if path is None:
        if which not in _FILES:
            raise UnknownNameError("which", which, _FILES)
        path = find_gavel_dir() / _FILES[which]
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
