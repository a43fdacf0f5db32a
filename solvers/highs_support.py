"""Process-wide HiGHS plumbing for :mod:`policyopt.solvers.highs`: the banner swallowed once per
process, HiGHS's model statuses mapped to :class:`~policyopt.result.Status`, checked calls, a
per-thread pool of cleared ``Highs`` objects, and the vectorized CSC splice behind in-place model
updates.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any

import numpy as np

from policyopt.errors import SolverError
from policyopt.standard_form import csc_of_arrays
from policyopt.result import Status

_BANNER_LOCK = threading.Lock()
_BANNER_SILENCED_PID: int | None = None


def silence_banner() -> None:
    """Swallow the two-line banner HiGHS writes to stdout when the first ``Highs()`` of a process
    is created (before ``output_flag`` can be set).

    highspy prints it once per process, so the first object is created here with file descriptor 1
    pointed at ``/dev/null`` (C-level writes included); later objects, ours or another library's
    (PuLP's and cvxpy's HiGHS interfaces), print nothing. Idempotent and cheap after the first call;
    called again in a forked child it does nothing (the child inherits the parent's state).
    """
    global _BANNER_SILENCED_PID
    if _BANNER_SILENCED_PID is not None:
        return
    import highspy

    with _BANNER_LOCK:
        if _BANNER_SILENCED_PID is not None:
            return
        try:
            sys.stdout.flush()
        except (OSError, ValueError):  # closed or broken stdout: nothing buffered to keep in order
            pass
        try:
            saved = os.dup(1)
        except OSError:  # no fd 1 (a daemon): the banner has nowhere to go anyway
            first = highspy.Highs()
        else:
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, 1)
                first = highspy.Highs()
                _flush_c_stdout()
            finally:
                os.dup2(saved, 1)
                os.close(saved)
                os.close(devnull)
        # the object that printed the banner serves this thread's first model (creating one: ~0.1 ms)
        _POOL.__dict__.setdefault("free", []).append(first)
        _BANNER_SILENCED_PID = os.getpid()


def _flush_c_stdout() -> None:
    """``fflush(NULL)``: the C library buffers stdout when it is a pipe, so the banner must leave
    the buffer while fd 1 still points at ``/dev/null``."""
    import ctypes

    try:
        ctypes.CDLL(None).fflush(None)
    except (OSError, AttributeError, TypeError):  # no C library to ask (not expected on Linux/macOS)
        pass


_STATUS_MAP: dict[Any, Status] = {}


def _status_map(hs: Any) -> dict[Any, Status]:
    """HiGHS model statuses → :class:`Status` (built once)."""
    if not _STATUS_MAP:
        S = hs.HighsModelStatus
        _STATUS_MAP.update({S.kOptimal: Status.OPTIMAL, S.kInfeasible: Status.INFEASIBLE,
                            S.kUnbounded: Status.UNBOUNDED, S.kUnboundedOrInfeasible: Status.INFEASIBLE,
                            S.kTimeLimit: Status.TIME_LIMIT, S.kIterationLimit: Status.TIME_LIMIT,
                            S.kSolutionLimit: Status.STOPPED,  # a MIP node/leaf/solution budget
                            S.kModelEmpty: Status.OPTIMAL})
    return _STATUS_MAP


def _check(status: Any, call: str) -> None:
    if status == _k_error():
        raise SolverError(f"HiGHS {call} returned kError")


#: the HiGHS info values a run's result reads (by ``getInfoValue``: a copy of the whole ``HighsInfo``
#: costs ~5 µs)
_INFO_FIELDS = ("max_primal_infeasibility", "simplex_iteration_count", "ipm_iteration_count",
                "primal_solution_status", "objective_function_value")


def _info_values(h: Any, hs: Any) -> tuple[Any, ...]:
    """:data:`_INFO_FIELDS` of HiGHS's info after a run (``getInfo`` where an info value is not
    valid: its defaults)."""
    ok = hs.HighsStatus.kOk
    out = []
    for name in _INFO_FIELDS:
        status, value = h.getInfoValue(name)
        if status != ok:
            info = h.getInfo()
            return tuple(getattr(info, k, 0) for k in _INFO_FIELDS)
        out.append(value)
    return tuple(out)


def _of_shape(v: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``v`` as float64 of ``shape`` (broadcast only when it is not already: ``np.broadcast_to`` is a
    Python-level helper of a few µs)."""
    a = np.asarray(v, np.float64)
    return a if a.shape == shape else np.broadcast_to(a, shape)


_K_ERROR: list[Any] = []


def _k_error() -> Any:
    """``highspy.HighsStatus.kError`` (looked up once: ``_check`` runs on every HiGHS call)."""
    if not _K_ERROR:
        import highspy

        _K_ERROR.append(highspy.HighsStatus.kError)
    return _K_ERROR[0]


#: per thread, ``Highs`` objects of models that were garbage collected, cleared for reuse: creating
#: and destroying one costs ~0.1 ms, a fixed cost of every small solve (a 64-job max-sum LP solves in
#: ~0.3 ms); only objects that held at most _POOL_MAX_COLS columns are kept, at most _POOL_SIZE
_POOL = threading.local()
_POOL_SIZE = 4
_POOL_MAX_COLS = 50_000


def _acquire_highs(highspy: Any) -> Any:
    free = _POOL.__dict__.get("free")
    return free.pop() if free else highspy.Highs()


def _release_highs(h: Any, num_cols: int) -> None:
    """Clear ``h`` (model, solver state, options back to HiGHS's defaults) and keep it for reuse."""
    free = _POOL.__dict__.setdefault("free", [])
    if len(free) >= _POOL_SIZE or num_cols > _POOL_MAX_COLS:
        return
    h.clearModel()
    h.resetOptions()
    free.append(h)


#: per thread: the ``threads`` of the HiGHS scheduler this thread's runs started (HiGHS ≥ 1.12
#: keeps one scheduler per calling thread, started by its first run with that run's ``threads``,
#: 0 meaning its default count, and refuses a later run whose nonzero ``threads`` differs);
#: absent while none is known
_SCHEDULER = threading.local()


def run_threads(highspy: Any, asked: int | None, serial: bool) -> int:
    """The ``threads`` option for a HiGHS run in this thread: ``asked`` when given, else 0 (HiGHS's
    default count) — except that a run that cannot use worker threads (``serial``: an LP by simplex
    or IPX) starts the thread's scheduler with one thread when none is known, since HiGHS's worker
    threads, started with the scheduler, spin for ~40–50 ms of CPU waiting for tasks that such runs
    never give them. A later run with other needs (``asked`` threads, or a MIP with HiGHS's default
    count) starts a new scheduler (``Highs.resetThreadScheduler``) once; a serial run beside a
    known scheduler takes it as it is (0). With HiGHS before per-thread schedulers: ``asked`` or 0,
    nothing reset."""
    reset = getattr(highspy.Highs, "resetThreadScheduler", None)
    if reset is None:
        return 0 if asked is None else int(asked)
    have = getattr(_SCHEDULER, "threads", None)
    if asked is None and serial:
        if have is not None:
            return 0
        want = 1  # (an unknown scheduler of another caller, if any, is reset: HiGHS would refuse 1)
    else:
        want = 0 if asked is None else int(asked)
        if have == want or (want == 0 and have is not None and have != 1):
            return want
        if want == 0 and have is None:  # HiGHS starts its default (or keeps another caller's)
            _SCHEDULER.threads = 0
            return 0
    reset(True)
    _SCHEDULER.threads = want
    return want


def _splice_csc(A: Any, keep_cols: np.ndarray, keep_rows: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                vals: np.ndarray, n_rows: int, n_cols: int) -> Any:
    """``A`` (CSC, sorted row indices) without the columns and rows outside ``keep_*`` (renumbered in
    order), with the entries ``(rows, cols, vals)`` added — new rows and columns numbered after the
    kept ones, and no new entry in a kept row *and* a kept column, so each new entry goes after a
    column's kept entries: one ``np.insert`` at the column ends. Vectorized, ``O(nnz)``; a
    deletion-free update (an arrival) does not touch the kept entries' indices."""
    import scipy.sparse as sp

    counts = A.indptr[1:] - A.indptr[:-1]  # (np.diff's Python wrapper costs ~10 µs here)
    indices, data = A.indices, A.data
    if not keep_cols.all():
        m = np.repeat(keep_cols, counts)
        indices, data, counts = indices[m], data[m], counts[keep_cols]
    if not keep_rows.all():
        m = keep_rows[indices]
        col_of = np.repeat(np.arange(counts.size), counts)[m]
        indices, data = (keep_rows.cumsum() - 1)[indices[m]], data[m]
        counts = np.bincount(col_of, minlength=counts.size)
    nkc = counts.size
    per_col = np.zeros(n_cols, np.int64)
    per_col[:nkc] = counts
    if rows.size:
        o = np.lexsort((rows, cols))
        rows, cols, vals = rows[o], cols[o], vals[o]
        ends = counts.cumsum()  # end of each kept column's entries (and of them all)
        at = ends[np.minimum(cols, nkc - 1)] if nkc else np.zeros(cols.size, np.int64)
        at = np.where(cols < nkc, at, ends[-1] if nkc else 0)
        # np.insert(indices, at, rows) by one scatter (its Python wrapper costs ~20 µs a call):
        # ``at`` is non-decreasing, so the k-th new entry lands at at[k] + k, the kept ones around it
        pos = at + np.arange(at.size)
        old = np.ones(indices.size + at.size, bool)
        old[pos] = False
        out_i, out_d = np.empty(old.size, indices.dtype), np.empty(old.size, data.dtype)
        out_i[pos], out_d[pos] = rows, vals
        out_i[old], out_d[old] = indices, data
        indices, data = out_i, out_d
        per_col += np.bincount(cols, minlength=n_cols)
    indptr = np.zeros(n_cols + 1, np.int64)
    per_col.cumsum(out=indptr[1:])
    nnz = int(indptr[-1])
    data = np.asarray(data, np.float64)
    if max(nnz, n_rows, n_cols) < 2**31 - 1:  # canonical: sorted rows per column, no duplicates
        return csc_of_arrays(data, indices.astype(np.int32, copy=False), indptr.astype(np.int32), (n_rows, n_cols))
    out = sp.csc_matrix((data, indices.astype(np.int64, copy=False), indptr), shape=(n_rows, n_cols))
    out.has_sorted_indices = True
    return out


_SMALL = threading.local()
#: options of the dedicated object that solves the price path's small LPs (set once per thread):
#: dual simplex without presolve to tight tolerances (the answer is certified on the whole LP)
_SMALL_OPTIONS = {"output_flag": False, "solver": "simplex", "presolve": "off",
                  "primal_feasibility_tolerance": 1e-10, "dual_feasibility_tolerance": 1e-10}


def solve_small_lp(highspy: Any, sf: Any) -> tuple[np.ndarray, np.ndarray] | None:
    """A small LP (a :class:`~policyopt.standard_form.StandardForm` with finite or infinite bounds,
    no integers) by HiGHS's dual simplex on one object kept per thread: its optimal point and row
    duals (HiGHS's convention, ``d = c − Aᵀy``, rows as given), or ``None`` when not optimal. Leaner
    than a loaded model (no result record, no options set per call)."""
    h = getattr(_SMALL, "h", None)
    if h is None:
        h = highspy.Highs()
        for k, v in _SMALL_OPTIONS.items():
            _check(h.setOptionValue(k, v), f"setOptionValue({k!r})")
        _SMALL.h, _SMALL.threads = h, 0
    threads = run_threads(highspy, None, True)
    if threads != _SMALL.threads:
        _check(h.setOptionValue("threads", threads), "setOptionValue('threads')")
        _SMALL.threads = threads
    inf = highspy.kHighsInf
    A = sf.A
    sense = highspy.ObjSense.kMaximize if sf.sense == "max" else highspy.ObjSense.kMinimize
    _check(h.passModel(sf.num_cols, sf.num_rows, int(A.nnz), int(highspy.MatrixFormat.kColwise), int(sense),
                       float(sf.offset), np.ascontiguousarray(sf.c, np.float64),
                       np.where(np.isfinite(sf.col_lower), sf.col_lower, -inf),
                       np.where(np.isfinite(sf.col_upper), sf.col_upper, inf),
                       np.where(np.isfinite(sf.row_lower), sf.row_lower, -inf),
                       np.where(np.isfinite(sf.row_upper), sf.row_upper, inf),
                       A.indptr[:-1].astype(np.int32), A.indices.astype(np.int32),
                       np.ascontiguousarray(A.data, np.float64), np.zeros(sf.num_cols, np.int32)), "passModel")
    h.clearSolver()
    if h.run() == highspy.HighsStatus.kError or h.getModelStatus() != highspy.HighsModelStatus.kOptimal:
        return None
    sol = h.getSolution()
    if not (sol.value_valid and sol.dual_valid):
        return None
    return np.asarray(sol.col_value, np.float64), np.asarray(sol.row_dual, np.float64)


#: costs whose largest magnitude is below this are scaled up by a power of two (:func:`objective_scale`)
SMALL_COSTS = 2.0 ** -10


def objective_scale(c: np.ndarray) -> int:
    """HiGHS's ``user_objective_scale`` for costs ``c``: ``e`` with ``2**e · max|c|`` in [1, 2) when
    ``0 < max|c| <`` :data:`SMALL_COSTS`, else 0 (none). HiGHS's dual feasibility tolerance is absolute
    (1e-7): with all costs tiny (throughputs near the inputs' lower limit, 1e-9) it accepts a vertex
    whose reduced costs have the wrong sign by more than the costs themselves (max-sum throughput
    with throughputs of ~1e-8 stopped at the zero allocation). A power of two scales exactly; HiGHS
    reports the objective, duals and solution unscaled."""
    top = float(np.abs(c).max(initial=0.0))
    if not 0.0 < top < SMALL_COSTS:
        return 0
    return int(-np.floor(np.log2(top)))
