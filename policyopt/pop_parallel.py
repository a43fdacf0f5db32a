"""Running POP's groups: one sub-problem at a time in this process, or in a pool of processes.

:func:`_solve_group` cuts group ``p`` out of the full problem (its adapter's
:meth:`~policyopt.pop_adapter.PopAdapter.sub_problem`) and solves it with the wrapped policy,
returning a :class:`~policyopt.pop_adapter.PartResult` timed from the cut (wall and CPU seconds).

Parallel execution (:func:`_run_parallel`; ``workers`` processes: this one and ``workers − 1`` pool
processes): the groups form one queue, largest first, from which every process takes the next group
when it is free (self-scheduling, so a process slowed down by other load takes fewer). The pool
processes are started with ``forkserver`` (``spawn`` where there is none), never ``fork``: this
process may already run HiGHS's thread pool, and forking a multi-threaded process can deadlock the
child (Python 3.12 warns about it). Each pool process receives the full problem, the partition and
the policy once (pickled) and cuts its own sub-problems; only each group's allocation, throughputs
and a small report come back. Before the pool starts the adapter may warm caches that then travel
with it (:meth:`~policyopt.pop_adapter.PopAdapter.prepare_workers`). An exception raised in a pool
process reaches the caller intact (:func:`_carry`); a pool that breaks (e.g. a script without the
``__main__`` guard) leaves its groups to this process, with a warning that says why.
"""
from __future__ import annotations

import copy
import functools
import logging
import multiprocessing as mp
import os
import pickle
import time
from concurrent.futures import ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any

import numpy as np

from .policy import Policy
from .pop_adapter import PartResult, PopAdapter
from .pop_partition import Partition
from .problem import Problem

log = logging.getLogger("policyopt.pop")  # POP's logger, under the name of the public module

__all__ = ["START_METHOD"]

def _solve_sub(policy: Policy, adapter_cls: type[PopAdapter], context: Any, sub: Problem,
               t0: float, c0: float) -> PartResult:
    """Solve one sub-problem with ``policy`` over ``adapter_cls.make_space`` (in-process or in a
    worker); ``t0``/``c0`` = wall/CPU clocks when the part's work began."""
    pol = copy.copy(policy)
    pol.config = dict(policy.config)
    if adapter_cls.overrides_space:
        pol.make_space = functools.partial(adapter_cls.make_space, pol, context)  # type: ignore[method-assign]
    res = pol.solve(sub)
    X = jobs = configs = None
    if res.X is not None and res.space is not None:
        n = len(res.space.jobs)
        X, jobs, configs = np.asarray(res.X)[:n], res.space.jobs.labels.tolist(), res.space.configs.labels.tolist()
    return PartResult(res.status, res.objective, res.allocation, res.colocated_allocation,
                      res.effective_throughputs, res.timings, res.message, time.perf_counter() - t0,
                      time.process_time() - c0, res.solver, jobs, configs, X, adapter_cls.part_report(res))


def _solve_group(policy: Policy, adapter: PopAdapter, part: Partition, members: list[np.ndarray],
                 p: int) -> PartResult:
    """Cut group ``p`` out of the full problem and solve it (timed from the cut)."""
    t0, c0 = time.perf_counter(), time.process_time()
    sub = adapter.sub_problem(part, members[p], p)
    res = _solve_sub(policy, type(adapter), adapter.context(), sub, t0, c0)
    res.group = p
    return res


#: what every process of a parallel run works from: (policy, adapter, partition, members, queue order, shared
#: counter); set in this process by _run_parallel and in each pool process by _worker_init
_SHARED: tuple[Policy, PopAdapter, Partition, list[np.ndarray], list[int], Any] | None = None
#: start method of the pool processes: a fresh process (never ``fork``: module docstring)
START_METHOD = "forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn"
#: modules the fork server imports once, so each pool process starts without importing them again
_PRELOAD = ["numpy", "scipy.sparse", "highspy", "policyopt", "policyopt.pop", "policyopt.formulations"]


def _worker_init(payload: bytes, counter: Any) -> None:
    """A pool process: unpickle the shared state (one pickle for all workers) and keep the counter."""
    global _SHARED
    policy, adapter, part, members, order = pickle.loads(payload)
    _SHARED = (policy, adapter, part, members, order, counter)


class _Carried(Exception):
    """An exception raised in a worker, carried back as (class, args, attributes): some exceptions
    (e.g. :class:`InputError`, whose ``__init__`` takes three arguments) do not survive pickling."""

    def rebuild(self) -> BaseException:
        cls, args, state = self.args
        exc = cls.__new__(cls)
        exc.args = args
        exc.__dict__.update(state)
        return exc


def _carry(exc: Exception) -> Exception:
    """``exc`` if it survives pickling, else a :class:`_Carried` copy of it."""
    try:
        pickle.loads(pickle.dumps(exc))
        return exc
    except Exception:  # noqa: BLE001 - any failure to round-trip means: carry it
        return _Carried(type(exc), exc.args, dict(exc.__dict__))


def _drain(worker: int) -> list[PartResult]:
    """Solve groups taken one at a time from the shared queue (``order`` and a shared counter) until
    it is empty; ``worker`` 0 is the parent process."""
    assert _SHARED is not None
    policy, adapter, part, members, order, counter = _SHARED
    out: list[PartResult] = []
    while True:
        with counter.get_lock():
            i = counter.value
            counter.value = i + 1
        if i >= len(order):
            return out
        try:
            r = _solve_group(policy, adapter, part, members, order[i])
        except Exception as exc:
            if worker == 0:
                raise
            raise _carry(exc) from None
        r.worker = worker
        out.append(r)


def _run_parallel(policy: Policy, adapter: PopAdapter, part: Partition, members: list[np.ndarray],
                  todo: list[int], workers: int) -> list[PartResult]:
    """Solve groups ``todo`` in ``workers`` processes — this one and ``workers − 1`` pool processes
    (``forkserver``/``spawn``: module docstring) — that take groups from one shared queue, largest
    first (self-scheduling: a process slowed down by other load simply takes fewer groups). Each
    pool process gets the full problem, the partition and the policy once and cuts its own
    sub-problems; only results come back. Results in ``todo`` order."""
    global _SHARED
    order = sorted(todo, key=lambda p: -members[p].size)
    ctx = mp.get_context(START_METHOD)
    if START_METHOD == "forkserver":
        ctx.set_forkserver_preload(_PRELOAD)
    adapter.prepare_workers()
    counter = ctx.Value("i", 0)
    payload = pickle.dumps((policy, adapter, part, members, order), protocol=pickle.HIGHEST_PROTOCOL)
    _SHARED = (policy, adapter, part, members, order, counter)
    try:
        with ProcessPoolExecutor(max_workers=workers - 1, mp_context=ctx, initializer=_worker_init,
                                 initargs=(payload, counter)) as ex:
            futures = [ex.submit(_drain, w) for w in range(1, workers)]
            try:
                done = _drain(0)
                for f in futures:
                    try:
                        done += f.result()
                    except BrokenProcessPool as exc:  # e.g. a script without the __main__ guard
                        log.warning("POP: a pool process died (%s); its groups are solved in this process. "
                                    "Scripts that run POP in parallel need the `if __name__ == '__main__':` "
                                    "guard (the pool processes import the main module).", exc)
                solved = {r.group for r in done}
                for p in order:
                    if p not in solved:
                        r = _solve_group(policy, adapter, part, members, p)
                        r.worker = 0
                        done.append(r)
            except BaseException as exc:
                with counter.get_lock():  # empty the queue: the other processes stop early
                    counter.value = len(order)
                if isinstance(exc, _Carried):
                    raise exc.rebuild() from None
                raise
    finally:
        _SHARED = None
    out = {r.group: r for r in done}
    return [out[p] for p in todo]



def _cpu_count() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - platforms without sched_getaffinity
        return os.cpu_count() or 1
