"""Save and restore a :class:`RoundMechanism` as a JSON-serializable dict.

Used by everything that must survive a restart (the HTTP service's SQLite sessions, the
executor's state file): ``from_state(to_state(m))`` schedules exactly like ``m``. Arrays travel as
base64 of their bytes (exact).
"""
from __future__ import annotations

import base64
import random
from typing import Any, Mapping

import numpy as np

from policyopt.errors import InputError
from policyopt.mechanism.rounds import RoundMechanism

__all__ = ["mechanism_to_state", "mechanism_from_state", "with_worker_counts"]


def _cap_to_json(cap: float) -> float | None:
    return None if not np.isfinite(cap) else float(cap)


def _rng_to_json(rng: random.Random) -> list[Any]:
    """``random.Random.getstate()`` as JSON lists (exact: integers, and a float or null)."""
    version, internal, gauss = rng.getstate()
    return [version, list(internal), gauss]


def _rng_from_json(rng: random.Random, data: Any) -> None:
    version, internal, gauss = data
    rng.setstate((int(version), tuple(int(v) for v in internal), gauss))


def _pack(a: np.ndarray) -> dict[str, Any]:
    """A float64/bool array as base64 of its bytes (exact, and fast to encode and decode)."""
    arr = np.ascontiguousarray(a)
    return {"dtype": arr.dtype.str, "shape": list(arr.shape), "data": base64.b64encode(arr.tobytes()).decode()}


def _unpack(d: Mapping[str, Any]) -> np.ndarray:
    return np.frombuffer(base64.b64decode(d["data"]), dtype=np.dtype(d["dtype"])).reshape(d["shape"]).copy()


def mechanism_to_state(mech: RoundMechanism) -> dict[str, Any]:
    """A JSON-serializable snapshot of ``mech`` (an allocation must be installed)."""
    st = mech._state  # noqa: SLF001 - see the module docstring
    if st is None:
        raise InputError("mechanism", None, "no allocation installed")
    arr = st.arrays
    return {
        "worker_counts": mech.worker_counts,
        "round_length": mech.round_length,
        "deficit_cap": _cap_to_json(mech.deficit_cap),
        "work_conserving": mech.work_conserving,
        "renewal_credit": mech.renewal_credit,
        "ordering": mech.ordering,
        "shuffle_types": mech.shuffle_types,
        "shuffle_seed": mech.shuffle_seed,
        "shuffler": _rng_to_json(mech._shuffler),  # noqa: SLF001
        "runnable": None if st.runnable is None else _pack(st.runnable),
        "scale_factors": {j: int(s) for j, s in mech._scale_factors.items()},  # noqa: SLF001
        "num_resets": mech.num_resets,
        "last_type": {j: arr.worker_types[c] for j, c in mech._last_type.items()},  # noqa: SLF001
        "last_partner": dict(mech._last_partner),  # noqa: SLF001
        "job_ids": list(arr.job_ids),
        "pairs": [list(c) for c in arr.combos[arr.num_singles:]],
        "x": _pack(arr.x),
        "received": _pack(st.received),
        "deficit": _pack(st.deficit),
        "active": _pack(st.active.astype(bool)),
        "elapsed": st.elapsed,
    }


def _new_mechanism(state: Mapping[str, Any], counts: Mapping[str, int]) -> RoundMechanism:
    cap = state["deficit_cap"]
    return RoundMechanism(counts, round_length=float(state["round_length"]),
                          deficit_cap=float("inf") if cap is None else float(cap),
                          work_conserving=bool(state["work_conserving"]),
                          renewal_credit=float(state.get("renewal_credit", 0.0)),
                          ordering=str(state.get("ordering", "default")),
                          shuffle_types=bool(state.get("shuffle_types", False)),
                          shuffle_seed=int(state.get("shuffle_seed", 0)),
                          scale_factors=state["scale_factors"])


def mechanism_from_state(state: Mapping[str, Any]) -> RoundMechanism:
    """Inverse of :func:`mechanism_to_state`: ``priorities()`` and ``schedule_round()`` of the
    result equal those of the mechanism that was saved."""
    mech = _new_mechanism(state, state["worker_counts"])
    types = list(mech.worker_types)
    x = _unpack(state["x"])
    n = len(state["job_ids"])
    allocation = {j: dict(zip(types, row)) for j, row in zip(state["job_ids"], x[:n].tolist())}
    colocated = [{"jobs": pair, "worker_type": t, "fraction": f}
                 for pair, row in zip(state["pairs"], x[n:].tolist()) for t, f in zip(types, row)]
    mech.set_allocation(allocation, colocated)
    st = mech._state  # noqa: SLF001
    if st is None:
        raise RuntimeError("the mechanism has no allocation state after set_allocation")
    combos = tuple((j,) for j in state["job_ids"]) + tuple(tuple(p) for p in state["pairs"])
    if st.arrays.combos != combos or not np.array_equal(st.arrays.x, x):
        raise RuntimeError("the mechanism's allocation arrays did not rebuild identically")
    st.received, st.deficit = _unpack(state["received"]), _unpack(state["deficit"])
    st.active = _unpack(state["active"])
    if state.get("runnable") is not None:
        st.runnable = _unpack(state["runnable"])
    if state.get("shuffler") is not None:
        _rng_from_json(mech._shuffler, state["shuffler"])  # noqa: SLF001
    st.elapsed = float(state["elapsed"])
    index = {t: i for i, t in enumerate(mech.worker_types)}
    mech._last_type = {j: index[t] for j, t in state["last_type"].items()}  # noqa: SLF001
    mech._last_partner = dict(state.get("last_partner", {}))  # noqa: SLF001
    mech.num_resets = int(state["num_resets"])
    return mech


def with_worker_counts(mech: RoundMechanism, counts: Mapping[str, int]) -> RoundMechanism:
    """A mechanism over ``counts`` (same worker types) that carries ``mech``'s state into the next
    ``set_allocation`` (deficits are carried there, as after any reset)."""
    if tuple(counts) != mech.worker_types:
        raise InputError("worker_counts", dict(counts), f"worker types must stay {list(mech.worker_types)}")
    state = mechanism_to_state(mech)
    new = _new_mechanism(state, counts)
    new._state = mech._state  # noqa: SLF001
    new._last_type = dict(mech._last_type)  # noqa: SLF001
    new._last_partner = dict(mech._last_partner)  # noqa: SLF001
    new._shuffler = mech._shuffler  # noqa: SLF001
    new.num_resets = mech.num_resets
    return new
