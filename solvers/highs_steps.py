"""A few primal simplex steps on HiGHS's factorization, taken outside HiGHS, certified.

After HiGHS solved a loaded LP by simplex, its optimal basis ``B`` and the factorization of ``B``
stay in HiGHS. A second stage that only changes costs and column bounds (max-min fairness's
``fill``: new costs, the epigraph ``t`` held at ``t ≥ t*(1 − 10⁻⁹)``) starts from that basis,
primal feasible, and usually needs one to three primal simplex steps. A HiGHS run for them costs its
fixed work (checking the model, setting up the simplex, a rebuild, a KKT check: ~2.5 ms at 4,099
rows), plus pushing the new costs in and the old ones back. :func:`reoptimize` takes the steps
here instead, without changing the loaded model:

* variables are the columns and the rows' logicals ``s = −A·x`` (HiGHS's convention: the basis
  matrix holds ``A``'s column for a basic column and ``e_i`` for row ``i``'s logical; a logical's
  bounds are ``[−row_upper, −row_lower]``);
* prices ``y`` solve ``Bᵀ y = c_B`` and directions ``α`` solve ``B α = a_q`` through HiGHS's
  factorization (``getBasisTransposeSolve``, ``getBasisSolve``), with each step's basis change
  applied as a product-form update ``B_k = B_{k−1} (I + (α − e_p) e_pᵀ)``;
* Dantzig's rule picks the entering variable (largest reduced cost ``d = c − Aᵀ y`` of a
  nonbasic variable that can move the improving way); the ratio test keeps every basic variable
  within its bounds (ties broken by the largest ``|α|``), or the entering variable flips bound.

The answer is certified on the whole LP before it is returned, whatever the arithmetic on the way:
the point meets every column bound and row (recomputed as ``A·x``) to :data:`TOL`, and the reduced
costs of the last prices are ``0`` on basic variables and of the optimal sign on nonbasic ones
(``d > TOL`` only at an upper bound, ``d < −TOL`` only at a lower one) — so no feasible
direction improves the objective by more than the tolerances allow. ``None`` (the caller runs
HiGHS) when HiGHS's last run was not a simplex solve ending optimal, the start is not feasible
under the new bounds, a direction is unbounded, the certificate fails, or more than
:data:`MAX_STEPS` steps are needed.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from policyopt.standard_form import any_nonzero, matvec, rmatvec

#: most steps before HiGHS is asked instead (the fill stage takes 0–3 at 2,048 jobs)
MAX_STEPS = 6
#: fewest rows for which the steps are taken: on smaller LPs a HiGHS run is cheaper than the steps'
#: fixed Python work (cold max-min at 32 jobs, 67 rows: 1.44–1.49 ms with HiGHS's run, 1.51–1.64 with
#: the steps)
MIN_ROWS = 128
#: primal (bounds, rows) and dual (reduced costs) tolerance of the certificate
TOL = 1e-9
#: smallest |α| a basic variable may leave the basis on
PIVOT_TOL = 1e-9


@dataclass
class Steps:
    """A certified optimum: the point (columns), the steps taken, the objective ``c·x``, and the
    basic variables it ended with by basis position (``j < n`` a column, ``n + i`` row ``i``'s logical)."""

    x: np.ndarray
    steps: int
    objective: float
    basic: np.ndarray | None = None


def ready(model: Any, runs_before: int) -> bool:
    """Whether ``model`` (a loaded HiGHS model) holds the optimal basis of a simplex run made since
    it had ``runs_before`` runs, with its factorization (:func:`factored`), and has at least
    :data:`MIN_ROWS` rows."""
    if getattr(model, "runs", None) is None or model.runs <= runs_before or model.sf.num_rows < MIN_ROWS:
        return False
    return factored(model)


def factored(model: Any) -> bool:
    """Whether ``model`` (a loaded HiGHS model, passed to HiGHS) holds the optimal basis of its last
    run, a simplex solve of the model as passed, with its factorization (HiGHS keeps it after a
    simplex solve; after an interior point solve it has none, and asking for it then is not safe)."""
    if not getattr(model, "_passed", False):
        return False
    h, hs = model._h, model._hs
    if h.getModelStatus() != hs.HighsModelStatus.kOptimal:
        return False
    solver = h.getOptionValue("solver")
    solver = solver[1] if isinstance(solver, tuple) else solver
    if solver != "simplex":
        return False
    if h.getModelPresolveStatus() not in (hs.HighsPresolveStatus.kNotPresolved, hs.HighsPresolveStatus.kNotReduced):
        return False  # (the run solved a presolved LP: its factorization is of that LP)
    ok, ipm = h.getInfoValue("ipm_iteration_count")
    ok2, valid = h.getInfoValue("basis_validity")
    return ok == hs.HighsStatus.kOk and ipm == 0 and ok2 == hs.HighsStatus.kOk and valid == 1 \
        and h.getNumCol() == model.sf.num_cols and h.getNumRow() == model.sf.num_rows


def basic_variables(model: Any) -> np.ndarray | None:
    """HiGHS's basic variables of ``model``'s last run by basis position (``j ≥ 0`` a column,
    ``−1 − i`` row ``i``'s logical), or ``None`` when HiGHS holds no factorization of it
    (:func:`factored`: after an interior point run ``getBasicVariables`` crashes the process) or
    the call fails. The one way the package reads them from a loaded model."""
    if not factored(model):
        return None
    ok, bv = model._h.getBasicVariables()
    return np.asarray(bv, np.int64) if ok == model._hs.HighsStatus.kOk else None


class _HighsFactor:
    """HiGHS's own factorization of its current basis (what :func:`reoptimize` solves with by
    default)."""

    def __init__(self, h: Any, hs: Any) -> None:
        self.h, self.hs = h, hs

    def basic_variables(self) -> np.ndarray | None:
        """HiGHS's basic variables by basis position (``j ≥ 0`` a column, ``−1 − i`` row ``i``'s logical)."""
        ok, bv = self.h.getBasicVariables()
        return np.asarray(bv, np.int64) if ok == self.hs.HighsStatus.kOk else None

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        """``B⁻¹ rhs``."""
        return np.array(self.h.getBasisSolve(rhs)[1], np.float64)

    def transpose_solve(self, rhs: np.ndarray) -> np.ndarray:
        """``B⁻ᵀ rhs``."""
        return np.asarray(self.h.getBasisTransposeSolve(rhs)[1], np.float64)


def reoptimize(model: Any, x: np.ndarray, c: np.ndarray, col_lower: np.ndarray, col_upper: np.ndarray,
               max_steps: int = MAX_STEPS, factor: Any = None) -> Steps | None:
    """Optimize ``c·x`` (in ``model.sf.sense``) over ``model.sf``'s rows and the column bounds
    ``col_lower ≤ x ≤ col_upper`` from HiGHS's current basis and its point ``x`` (the last run's),
    by at most ``max_steps`` primal simplex steps (module docstring). The loaded model is not
    changed. The caller checks :func:`ready` first. ``factor``: another factorization of a basis
    of ``model.sf`` to start from (``basic_variables()``, ``solve(rhs)``, ``transpose_solve(rhs)``
    as :class:`_HighsFactor`'s), whose point is ``x``; default HiGHS's."""
    sf = model.sf
    n, m = sf.num_cols, sf.num_rows
    if m == 0 or x.shape != (n,):
        return None
    fac = _HighsFactor(model._h, model._hs) if factor is None else factor
    bv = fac.basic_variables()
    if bv is None:
        return None
    var = np.where(bv >= 0, bv, n - 1 - bv)  # basis position → variable (row i's logical: n + i)
    basic = np.zeros(n + m, bool)
    basic[var] = True
    if bv.size != m or np.count_nonzero(basic) != m:
        return None
    A = sf.A
    sign = 1.0 if sf.sense == "max" else -1.0  # steps maximize sign·c
    cost = np.zeros(n + m)
    cost[:n] = sign * np.asarray(c, np.float64)
    lo = np.concatenate([col_lower, -sf.row_upper])
    hi = np.concatenate([col_upper, -sf.row_lower])
    v = np.concatenate([x, -matvec(A, x)])
    lo_out, hi_out = lo - TOL, hi + TOL  # (infinite bounds stay infinite)
    if any_nonzero(v < lo_out) or any_nonzero(v > hi_out):
        return None  # the basis is not primal feasible under the new bounds
    np.maximum(v, lo, out=v)  # (clip: numpy's Python-level wrapper avoided, as any/all below)
    np.minimum(v, hi, out=v)
    # nonbasic variables free to move up / down (changed only where a variable leaves or enters)
    up_ok = (v < hi - TOL) & ~basic
    down_ok = (v > lo + TOL) & ~basic
    etas: list[tuple[int, np.ndarray]] = []

    def ftran(rhs: np.ndarray) -> np.ndarray:
        s = fac.solve(rhs)
        for p, al in etas:
            sp = s[p] / al[p]
            s -= sp * al
            s[p] = sp
        return s

    def btran(rhs: np.ndarray) -> np.ndarray:
        w = rhs.copy()
        for p, al in reversed(etas):
            w[p] = (w[p] - (al @ w - al[p] * w[p])) / al[p]
        return fac.transpose_solve(w)

    d = np.empty(n + m)
    score = np.empty(n + m)
    rhs = np.zeros(m)
    for step in range(max_steps + 1):
        y = btran(cost[var])
        np.subtract(cost[:n], rmatvec(A, y), out=d[:n])
        np.negative(y, out=d[n:])
        # improving and free to move that way: d > 0 below the upper bound, d < 0 above the lower
        movable = (d > TOL) & up_ok
        movable |= (d < -TOL) & down_ok
        np.abs(d, out=score)
        score *= movable
        q = int(score.argmax())
        if score[q] == 0.0:
            got = _certified(sf, v[:n].copy(), lo, hi, lo_out, hi_out, d, basic, c, step)
            if got is not None:
                got.basic = var.copy()
            return got
        if step == max_steps:
            return None
        s = 1.0 if d[q] > 0 else -1.0
        rhs[:] = 0.0
        if q < n:
            a, b = A.indptr[q], A.indptr[q + 1]
            rhs[A.indices[a:b]] = A.data[a:b]
        else:
            rhs[q - n] = 1.0
        al = ftran(rhs)
        delta = al * -s  # change of the basic variables per unit step of the entering one
        # room of each basic variable the way it moves, over |delta| (rows with |α| ≤ PIVOT_TOL: none)
        down = delta < 0
        room = np.where(down, v[var] - lo[var], hi[var] - v[var])
        np.maximum(room, 0.0, out=room)
        mag = np.abs(delta)
        lim = np.divide(room, mag, out=np.full(m, np.inf), where=mag > PIVOT_TOL)
        theta = float(np.minimum.reduce(lim))
        own = float(hi[q] - lo[q])
        if own <= theta:  # the entering variable reaches its other bound first: a bound flip
            if not np.isfinite(own):
                return None  # unbounded along q
            v[var] += own * delta
            v[q] = hi[q] if s > 0 else lo[q]
            up_ok[q], down_ok[q] = s < 0, s > 0
            continue
        tie = (lim <= theta + 1e-12 * max(1.0, theta)).nonzero()[0]
        p = int(tie[np.argmax(mag[tie])])
        theta = float(lim[p])
        v[var] += theta * delta
        v[q] += theta * s
        leave = int(var[p])
        v[leave] = lo[leave] if down[p] else hi[leave]
        basic[leave], basic[q] = False, True
        up_ok[q] = down_ok[q] = False
        up_ok[leave], down_ok[leave] = v[leave] < hi[leave] - TOL, v[leave] > lo[leave] + TOL
        var[p] = q
        etas.append((p, al))
    return None


def _certified(sf: Any, x: np.ndarray, lo: np.ndarray, hi: np.ndarray, lo_out: np.ndarray, hi_out: np.ndarray,
               d: np.ndarray, basic: np.ndarray, c: np.ndarray, steps: int) -> Steps | None:
    """``x`` if it meets every bound and row to :data:`TOL` (``lo``/``hi``: the bounds of the
    columns and logicals, ``lo_out``/``hi_out`` the same widened by it) and the reduced costs ``d``
    of its basis are optimal there (module docstring: ``0`` on basic variables, ``d > TOL`` only
    within :data:`TOL` of an upper bound, ``d < −TOL`` only within it of a lower one); else
    ``None``."""
    v = np.concatenate([x, -matvec(sf.A, x)])
    if any_nonzero(v < lo_out) or any_nonzero(v > hi_out):
        return None
    if any_nonzero(np.abs(d[basic]) > TOL):
        return None
    wrong = (d > TOL) & (v < hi - TOL)
    wrong |= (d < -TOL) & (v > lo + TOL)
    wrong &= ~basic
    if any_nonzero(wrong):
        return None
    return Steps(x, steps, float(np.add.reduce(np.asarray(c, np.float64) * x)))
