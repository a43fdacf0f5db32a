r"""Where the jobs of a reconfiguration-aware simulation run, and node relabeling.

A decision places each running job on node slices (:data:`NodeSlice`: node type, node index, GPUs,
cores, host bytes); :class:`_Run` is what one job runs while the decision holds (configuration,
plan, resources, throughput, slices).

**Node relabeling** (step 3 of a round, :mod:`policyopt.sim.reconfig_sim`): nodes of a type are
identical, so a new placement's node indices may be permuted. :func:`relabel_nodes` finds, per node
type, the permutation ``π`` (new node index → relabeled index) that maximizes

    ``Σ_{jobs k in keep} Σ_{i,j} [π(j) = i]·min(g_k,i^prev, g_k,j^new)``

— the GPUs of continuing jobs that stay on the nodes they held — as a linear assignment; only nodes
with the same GPU count are exchanged. :func:`_renamed` applies it to a job's run (and to its
``current`` configuration, the next decision's input). A job that keeps its configuration but still
lands on other nodes is *migrated*.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np

if TYPE_CHECKING:  # the runtimes import each other only inside functions (tests/test_import_graph.py)
    from ..reconfig.spec import CurrentConfig

__all__ = ["relabel_nodes", "NodeSlice"]

#: one node slice of a placement: (node type index, node index, GPUs, cores, host bytes)
NodeSlice = tuple[int, int, int, float, float]


@dataclass(frozen=True)
class _Run:
    """What one job runs while a decision holds."""

    node_type: str
    config: str
    plan: str
    gpus: int
    cpus: float
    host: float
    thr: float
    reconfigured: bool
    current: CurrentConfig | None
    slices: tuple[NodeSlice, ...]

    def where(self) -> tuple[tuple[int, int, int], ...]:
        return tuple(sorted((s[0], s[1], s[2]) for s in self.slices))


def _renamed(run: _Run, perms: Sequence[np.ndarray]) -> _Run:
    """``run`` on the relabeled nodes; its ``current`` (the next decision's input) names them too."""
    slices = tuple((sl[0], int(perms[sl[0]][sl[1]]), *sl[2:]) for sl in run.slices)
    cur = run.current
    if cur is not None and cur.node_ids is not None:
        cur = replace(cur, node_ids=tuple(sl[1] for sl in slices))
    return replace(run, slices=slices, current=cur)


def relabel_nodes(prev: Mapping[Any, Sequence[NodeSlice]], new: Mapping[Any, Sequence[NodeSlice]],
                  keep: Sequence[Any], node_gpus: Sequence[np.ndarray]) -> list[np.ndarray]:
    """Per node type, the permutation ``π`` (new node index → relabeled index) that maximizes
    ``Σ_{jobs k in keep} Σ_{i,j} [π(j) = i]·min(g_k,i^prev, g_k,j^new)`` — the GPUs of continuing
    jobs that stay on the nodes they held (a linear assignment; only nodes with the same GPU count
    are exchanged). ``node_gpus[t]`` holds the GPUs of every node of type ``t``."""
    from scipy.optimize import linear_sum_assignment

    perms = [np.arange(len(g)) for g in node_gpus]
    rows = [(k, s[0], s[1], s[2]) for k in keep for s in prev.get(k, ())]
    cols = [(k, s[0], s[1], s[2]) for k in keep for s in new.get(k, ())]
    if not rows or not cols:
        return perms
    import pandas as pd

    a = pd.DataFrame(rows, columns=["job", "type", "old", "g_old"])
    b = pd.DataFrame(cols, columns=["job", "type", "new", "g_new"])
    pairs = a.merge(b, on=["job", "type"])
    for t, caps in enumerate(node_gpus):
        sel = pairs[pairs["type"] == t]
        if sel.empty:
            continue
        W = np.zeros((caps.size, caps.size))
        np.add.at(W, (sel["old"].to_numpy(int), sel["new"].to_numpy(int)),
                  np.minimum(sel["g_old"].to_numpy(float), sel["g_new"].to_numpy(float)))
        W[caps[:, None] != caps[None, :]] = -1e9  # never swap nodes of different sizes
        old, new_idx = linear_sum_assignment(W, maximize=True)
        perm = np.empty(caps.size, np.int64)
        perm[new_idx] = old
        perms[t] = perm
    return perms
