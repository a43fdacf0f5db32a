r"""Choosing which configurations to profile: greedy optimal experimental design.

With only 7 runs for 7 parameters, *which* runs are measured decides what the fit can tell
apart. At a prior guess k⁰ the sensitivity of row i is the gradient of log T_iter with respect to
log k (finite differences, all rows at once)::

    J_ij = ∂ log T_iter(row_i; k) / ∂ log k_j   at k = k⁰

Linearized, with log-normal noise σ_n and a prior of standard deviation σ_p on each log k, the
posterior precision after profiling the set S is A = (σ_n/σ_p)²·I + Σ_{i∈S} J_iᵀJ_i (in units of
1/σ_n²). Rows are added greedily:

* ``"i-optimal"`` (default): minimize the *average prediction variance over all candidate rows*,
  tr(J A⁻¹ Jᵀ)/n = tr(A⁻¹ S)/n with S = JᵀJ. By Sherman–Morrison adding row j lowers it by
  (j A⁻¹ S A⁻¹ jᵀ)/(1 + j A⁻¹ jᵀ) — a 7×7 computation per candidate. Parameters that no
  configuration is sensitive to (e.g. k_opt for a 30B model) are then left alone instead of
  spending runs on them.
* ``"d-optimal"``: maximize det(A); the gain of row j is log(1 + j A⁻¹ jᵀ).

Coverage: the linearization at k⁰ can call a parameter negligible everywhere (k_opt for a
13B model: |J| ≤ 0.01 on every candidate) although a fit from few runs is free to move it by
orders of magnitude, which then matters on the plans where that term is largest. So after the
greedy steps, every parameter j with some sensitivity (max_i |J_ij| > ``cover_floor``) that no
chosen row covers (|J_ij| ≥ ½·max_i |J_ij|) gets its most sensitive candidate row in place of
the last greedy pick of the same kind, parameters with the smallest maximal sensitivity first.

Rows with the same sensitivities as a chosen row (the same plan with a CPU count that does not
enter its time) are not chosen again. A quota of ``n_offload`` rows is drawn from the
``zero = offload`` rows (the only ones that inform k_opt_off, k_off and k_swap) and the rest from
the others.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from policyopt.errors import InputError, UnknownNameError

from .model import compute_terms, iter_time_from_terms
from .params import PARAM_NAMES, PerfParams
from .table import validate_table

__all__ = ["log_sensitivities", "design_samples"]


def log_sensitivities(configs: pd.DataFrame, prior: PerfParams, rel_step: float = 1e-4
                      ) -> np.ndarray:
    """(n, 7) matrix J_ij = ∂ log T_i / ∂ log k_j at ``prior`` (forward differences).

    A parameter that is 0 at the prior has J = 0 (no relative sensitivity).
    """
    clean = validate_table(configs)
    terms = compute_terms(clean)
    k0 = prior.as_array()
    base = np.log(iter_time_from_terms(terms, k0))
    bumped = k0[None, :] * (1.0 + rel_step * np.eye(k0.size))  # one bumped set per parameter
    logs = np.stack([np.log(iter_time_from_terms(terms, kb)) for kb in bumped], axis=1)
    return (logs - base[:, None]) / np.log1p(rel_step)


def design_samples(configs: pd.DataFrame, prior: PerfParams, *, n: int = len(PARAM_NAMES),
                   n_offload: int = 3, criterion: str = "i-optimal", noise: float = 0.03,
                   prior_sd: float = 3.0, cover_floor: float = 1e-4) -> np.ndarray:
    """Row positions of ``configs`` to profile (n rows, ``n_offload`` of them with offload).

    ``noise`` is σ_n (relative measurement noise), ``prior_sd`` σ_p (of each log k);
    ``cover_floor`` the sensitivity below which a parameter needs no covering row (see the
    module docstring).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise InputError("n", n, "must be an integer >= 1")
    if isinstance(n_offload, bool) or not isinstance(n_offload, int) or not 0 <= n_offload <= n:
        raise InputError("n_offload", n_offload, f"must be an integer in [0, {n}]")
    if criterion not in ("i-optimal", "d-optimal"):
        raise UnknownNameError("criterion", criterion, ("i-optimal", "d-optimal"))
    for name, value in (("noise", noise), ("prior_sd", prior_sd)):
        if not (isinstance(value, (int, float)) and value > 0):
            raise InputError(name, value, "must be > 0")
    clean = validate_table(configs)
    offload = (clean["zero"] == "offload").to_numpy()
    if offload.sum() < n_offload:
        raise InputError("configs.zero", int(offload.sum()),
                         f"fewer offload candidates than the {n_offload} requested")
    if (~offload).sum() < n - n_offload:
        raise InputError("configs.zero", int((~offload).sum()),
                         f"fewer non-offload candidates than the {n - n_offload} requested")
    J = log_sensitivities(clean, prior)
    info = (noise / prior_sd) ** 2 * np.eye(J.shape[1])
    pool_info = J.T @ J
    quota = {True: n_offload, False: n - n_offload}
    chosen: list[int] = []
    available = np.ones(len(clean), dtype=bool)
    while len(chosen) < n:
        allowed = available & np.where(offload, quota[True] > 0, quota[False] > 0)
        inv = np.linalg.inv(info)
        leverage = np.einsum("ij,jk,ik->i", J, inv, J)
        if criterion == "d-optimal":
            gain = np.log1p(leverage)
        else:
            gain = np.einsum("ij,jk,ik->i", J, inv @ pool_info @ inv, J) / (1.0 + leverage)
        i = int(np.argmax(np.where(allowed, gain, -np.inf)))
        chosen.append(i)
        available = _take(i, J, available, quota, offload)
        info = info + np.outer(J[i], J[i])
    _cover(chosen, J, offload, cover_floor)
    return np.array(chosen, dtype=np.int64)


def _take(i: int, J: np.ndarray, available: np.ndarray, quota: dict[bool, int],
          offload: np.ndarray) -> np.ndarray:
    """Book row ``i`` as chosen (its quota); returns the rows still available."""
    # rows whose sensitivities equal row i's (e.g. a non-offload plan with another CPU
    # count) would repeat the same measurement: profile distinct configurations instead
    quota[bool(offload[i])] -= 1
    return available & ~np.all(np.isclose(J, J[i], rtol=1e-9, atol=1e-12), axis=1)


def _cover(chosen: list[int], J: np.ndarray, offload: np.ndarray, floor: float) -> None:
    """Swap rows into ``chosen`` (in place) until every sensitive parameter is covered.

    Parameter j is covered when a chosen row has |J_ij| ≥ ½·max_i |J_ij|; an uncovered one
    (smallest maximal sensitivity first) gets its most sensitive candidate row, which replaces
    the last greedy pick of the same kind (offload or not), the one that added least.
    """
    sens = np.abs(J)
    top = sens.max(axis=0)
    fixed: list[int] = []
    for j in np.argsort(top):
        if top[j] <= floor or sens[chosen, j].max() >= 0.5 * top[j]:
            continue
        redundant = np.zeros(len(J), dtype=bool)
        for i in chosen:
            redundant |= np.all(np.isclose(J, J[i], rtol=1e-9, atol=1e-12), axis=1)
        kinds = {bool(offload[i]) for i in chosen if i not in fixed}
        ok = ~redundant & np.isin(offload, list(kinds))
        if not ok.any():
            continue
        c = int(np.argmax(np.where(ok, sens[:, j], -np.inf)))
        if sens[c, j] < 0.5 * top[j]:
            continue
        out = next(i for i in reversed(chosen) if i not in fixed and offload[i] == offload[c])
        chosen[chosen.index(out)] = c
        fixed.append(c)
