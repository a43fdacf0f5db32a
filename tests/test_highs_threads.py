"""HiGHS's thread scheduler (one per calling thread from HiGHS 1.12): an LP run that sets no
``threads`` starts it with one thread (no worker threads to spin), and a later run asking for
another count, or a MIP with HiGHS's default count, starts a new one instead of failing."""
from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.sparse as sp

from policyopt import SolverOptions, get_solver
from policyopt.standard_form import StandardForm

highspy = pytest.importorskip("highspy")
pytestmark = pytest.mark.skipif(not hasattr(highspy.Highs, "resetThreadScheduler"),
                                reason="HiGHS before per-thread schedulers")


def _lp(n: int = 12, integer: bool = False) -> StandardForm:
    """max Σ (1 + j mod 3)·x_j s.t. Σ x_j ≤ 4.5, x_0 + x_1 ≤ 1.5, 0 ≤ x ≤ 1 (integer: every x_j):
    13 (four columns of cost 3 and half of one of cost 2), 12 with integers."""
    A = sp.csc_matrix(np.vstack([np.ones(n), np.r_[1.0, 1.0, np.zeros(n - 2)]]))
    return StandardForm(sense="max", c=1.0 + np.arange(n) % 3, offset=0.0, col_lower=np.zeros(n),
                        col_upper=np.ones(n), integrality=np.full(n, int(integer), np.int32), A=A,
                        row_lower=np.full(2, -np.inf), row_upper=np.array([4.5, 1.5]), row_scale=np.ones(2))


def _in_new_thread(fn: Callable[[], Any]) -> Any:
    """``fn()`` in a fresh thread (a fresh HiGHS scheduler); its result, or its exception raised."""
    out: dict[str, Any] = {}

    def body() -> None:
        try:
            out["value"] = fn()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the calling thread
            out["error"] = exc

    t = threading.Thread(target=body)
    t.start()
    t.join(timeout=120)
    assert not t.is_alive()
    if "error" in out:
        raise out["error"]
    return out["value"]


def _solve(sf: StandardForm, **options: Any) -> float:
    res = get_solver("highs").load(sf, SolverOptions(algorithm="simplex", **options)).solve()
    assert res.ok, res.message
    return float(res.objective)


def test_threads_asked_after_a_default_lp_in_the_same_thread() -> None:
    """A solve with ``threads=k`` after one without, in one thread: both answer (HiGHS refuses a
    run whose ``threads`` differs from the thread's scheduler unless a new one is started)."""
    def body() -> list[float]:
        return [_solve(_lp()), _solve(_lp(), threads=2), _solve(_lp()), _solve(_lp(), threads=1),
                _solve(_lp(integer=True)), _solve(_lp())]

    objs = _in_new_thread(body)
    assert objs == pytest.approx([13.0, 13.0, 13.0, 13.0, 12.0, 13.0])


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="counts threads through /proc")
def test_an_lp_solve_starts_no_worker_threads() -> None:
    """An LP solve without ``threads`` leaves no HiGHS worker thread behind (they would spin for
    tens of milliseconds of CPU); a MIP after it gets HiGHS's default scheduler."""
    def tasks() -> set[str]:
        return set(os.listdir("/proc/self/task"))

    def body() -> tuple[set[str], set[str], float]:
        before = tasks()
        _solve(_lp())
        after = tasks()
        return before, after, _solve(_lp(integer=True))

    # (compared as sets of thread ids: a thread of the process ending meanwhile leaves no trace; one
    # started by something else meanwhile would, so the check is repeated before it fails)
    for _ in range(3):
        before, after_lp, mip = _in_new_thread(body)
        if not after_lp - before:
            break
    assert after_lp - before == set()
    assert mip == pytest.approx(12.0)
