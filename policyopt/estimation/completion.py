"""Low-rank matrix completion with row/column biases (numpy, seeded).

Model of a partly observed matrix ``Z`` (observed where ``mask``)::

    Ẑ[r, k] = μ + b_r + c_k + U_r · V_k          (U: R × q, V: C × q, q = rank)

``μ`` is the mean of the observed entries; rank 0 is the additive (row + column effect) model.

* :func:`als` — alternating least squares on
  ``Σ_{(r,k)∈Ω} (Z_rk − Ẑ_rk)² + λ(‖U‖² + ‖V‖² + ‖b‖² + ‖c‖²)``: with ``V, c`` fixed each row's
  ``θ_r = [U_r, b_r]`` solves the ridge system ``(Σ_k m_rk f_k f_kᵀ + λI) θ_r = Σ_k m_rk (Z_rk − μ − c_k) f_k``
  with ``f_k = [V_k, 1]`` (all rows at once, one batched solve), then the same for columns.
* :func:`soft_impute` — Mazumder, Hastie & Tibshirani (2010) on the residual after the rank-0
  fit: ``W ← S_λ(P_Ω(Z − B) + P_Ω⊥(W))`` with ``S_λ`` the singular-value soft threshold
  ``σ_i ↦ max(σ_i − λ, 0)``, iterated to a fixed point (optionally capped at ``max_rank``); then
  optionally (``debias``) the kept singular values are re-fitted by least squares on the observed
  entries.
* :func:`select` — hyper-parameters by K-fold validation over *groups* of entries (a pair
  measurement gives two entries; they are held out together).

Both fits return a :class:`CompletionFit`, usable as a warm start (also after rows/columns were
appended: :meth:`CompletionFit.resized`).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from ..errors import InputError

__all__ = ["CompletionFit", "als", "soft_impute", "fit_completion", "select", "default_grid", "check_matrix"]


@dataclass
class CompletionFit:
    """``Ẑ = μ + b_r + c_k + U Vᵀ`` (see the module docstring)."""

    mu: float
    row_bias: np.ndarray
    col_bias: np.ndarray
    U: np.ndarray
    V: np.ndarray
    info: dict[str, Any] = field(default_factory=dict)

    @property
    def rank(self) -> int:
        return int(self.U.shape[1])

    def predict(self) -> np.ndarray:
        """The completed matrix ``Ẑ`` (R × C)."""
        return self.mu + self.row_bias[:, None] + self.col_bias[None, :] + self.U @ self.V.T

    def resized(self, rows: int, cols: int, seed: int = 0) -> "CompletionFit":
        """A copy with rows/columns appended (new biases 0, new factors small seeded noise)."""
        rng = np.random.default_rng(seed)
        q = self.rank
        r0, c0 = self.U.shape[0], self.V.shape[0]
        if rows < r0 or cols < c0:
            raise InputError("shape", (rows, cols), f"cannot shrink a fit of shape {(r0, c0)}")
        U = np.vstack([self.U, 0.01 * rng.standard_normal((rows - r0, q))])
        V = np.vstack([self.V, 0.01 * rng.standard_normal((cols - c0, q))])
        return CompletionFit(self.mu, np.r_[self.row_bias, np.zeros(rows - r0)],
                             np.r_[self.col_bias, np.zeros(cols - c0)], U, V, dict(self.info))


def check_matrix(values: np.ndarray, mask: np.ndarray, field_: str = "values") -> tuple[np.ndarray, np.ndarray]:
    """Validate a partly observed matrix: 2-D, ``mask`` boolean of the same shape, observed finite."""
    Z = np.asarray(values, dtype=np.float64)
    M = np.asarray(mask)
    if Z.ndim != 2:
        raise InputError(field_, Z.shape, "must be a 2-D matrix")
    if M.shape != Z.shape:
        raise InputError("mask", M.shape, f"must have the shape of {field_} {Z.shape}")
    if M.dtype != bool:
        raise InputError("mask", str(M.dtype), "must be a boolean array")
    if not np.all(np.isfinite(Z[M])):
        bad = np.argwhere(M & ~np.isfinite(Z))[0].tolist()
        raise InputError(f"{field_}[{bad[0]}][{bad[1]}]", float(Z[tuple(bad)]), "observed entries must be finite")
    if not M.any():
        raise InputError("mask", int(M.sum()), "at least one entry must be observed")
    return Z, M


def _ridge_rows(Y: np.ndarray, M: np.ndarray, F: np.ndarray, reg: float) -> np.ndarray:
    """Per row ``r``: ``argmin_θ Σ_k M_rk (Y_rk − θ·F_k)² + reg‖θ‖²`` for all rows in one batched solve."""
    d = F.shape[1]
    Mf = M.astype(np.float64)
    G = np.einsum("rk,ki,kj->rij", Mf, F, F) + reg * np.eye(d)[None]
    rhs = np.einsum("rk,ki->ri", Mf * Y, F)
    return np.linalg.solve(G, rhs[..., None])[..., 0]


def als(values: np.ndarray, mask: np.ndarray, rank: int, reg: float = 0.1, *, sweeps: int = 100,
        tol: float = 1e-7, seed: int = 0, init: CompletionFit | None = None) -> CompletionFit:
    """Alternating least squares with biases (module docstring); ``init`` warm-starts (same shape)."""
    Z, M = check_matrix(values, mask)
    if not isinstance(rank, (int, np.integer)) or rank < 0:
        raise InputError("rank", rank, "must be an integer >= 0")
    if not np.isfinite(reg) or reg < 0:
        raise InputError("reg", reg, "must be a finite number >= 0")
    R, C = Z.shape
    Zo = np.where(M, Z, 0.0)
    if init is not None and init.U.shape == (R, rank) and init.V.shape == (C, rank):
        mu, b, c, U, V = init.mu, init.row_bias.copy(), init.col_bias.copy(), init.U.copy(), init.V.copy()
    else:
        rng = np.random.default_rng(seed)
        mu = float(Zo[M].mean())
        b, c = np.zeros(R), np.zeros(C)
        U, V = 0.1 * rng.standard_normal((R, rank)), 0.1 * rng.standard_normal((C, rank))
    reg_eff = max(reg, 1e-9)  # keeps empty rows/columns solvable (they go to 0)
    prev = np.inf
    it = 0
    for it in range(1, sweeps + 1):  # noqa: B007 - the sweep count is reported after the loop
        th = _ridge_rows(Zo - mu - c[None, :], M, np.hstack([V, np.ones((C, 1))]), reg_eff)
        U, b = th[:, :rank], th[:, rank]
        th = _ridge_rows((Zo - mu - b[:, None]).T, M.T, np.hstack([U, np.ones((R, 1))]), reg_eff)
        V, c = th[:, :rank], th[:, rank]
        resid = np.where(M, Zo - (mu + b[:, None] + c[None, :] + U @ V.T), 0.0)
        loss = float((resid ** 2).sum() + reg * ((U ** 2).sum() + (V ** 2).sum() + (b ** 2).sum() + (c ** 2).sum()))
        if np.isfinite(prev) and prev - loss <= tol * prev:
            break
        prev = loss
    return CompletionFit(mu, b, c, U, V, {"method": "als", "rank": int(rank), "reg": float(reg),
                                          "sweeps": it, "loss": loss})


def soft_impute(values: np.ndarray, mask: np.ndarray, shrink: float, *, max_rank: int | None = None,
                bias_reg: float = 0.1, iters: int = 300, tol: float = 1e-6,
                init: CompletionFit | None = None, debias: bool = False) -> CompletionFit:
    """Soft-impute on the residual of the rank-0 (bias) fit; ``shrink`` = λ of ``S_λ`` in absolute
    units of the residual's singular values; ``init`` warm-starts the low-rank part. ``debias``: then
    re-fit the kept singular values by least squares on the observed entries (the subspace from the
    soft threshold, the scale without its shrinkage)."""
    Z, M = check_matrix(values, mask)
    if not np.isfinite(shrink) or shrink < 0:
        raise InputError("shrink", shrink, "must be a finite number >= 0")
    if max_rank is not None and (not isinstance(max_rank, (int, np.integer)) or max_rank < 0):
        raise InputError("max_rank", max_rank, "must be an integer >= 0 or None")
    base = als(Z, M, 0, bias_reg)  # the rank-0 part is refitted (cheap) so new rows get their biases
    B = base.predict()
    Rz = np.where(M, Z - B, 0.0)
    W = (init.U @ init.V.T) if init is not None and init.U.shape[0] == Z.shape[0] and init.V.shape[0] == Z.shape[1] \
        else np.zeros_like(Z)
    u = s = vt = None
    it = 0
    for it in range(1, iters + 1):  # noqa: B007 - the iteration count is reported after the loop
        filled = np.where(M, Rz, W)
        u, s, vt = np.linalg.svd(filled, full_matrices=False)
        s = np.maximum(s - shrink, 0.0)
        if max_rank is not None:
            s[max_rank:] = 0.0
        W_new = (u * s) @ vt
        delta = float(((W_new - W) ** 2).sum()) / max(float((W ** 2).sum()), 1e-12)
        W = W_new
        if delta < tol:
            break
    assert u is not None and s is not None and vt is not None
    q = int((s > 0).sum())
    if debias and q:
        # re-fit the q singular values by least squares on the observed residuals (undoes the shrinkage)
        i, k = np.nonzero(M)
        F = u[i, :q] * vt[:q, k].T
        s = np.linalg.lstsq(F, Rz[i, k], rcond=None)[0]
        flip = s < 0  # keep a valid SVD form: negative values flip the left vector
        u = u[:, :q] * np.where(flip, -1.0, 1.0)
        s = np.abs(s)
    root = np.sqrt(s[:q])
    return CompletionFit(base.mu, base.row_bias, base.col_bias, u[:, :q] * root, vt[:q].T * root,
                         {"method": "soft_impute", "shrink": float(shrink), "rank": q, "iters": it,
                          "max_rank": max_rank})


def fit_completion(values: np.ndarray, mask: np.ndarray, method: str, params: dict[str, Any], *,
                   seed: int = 0, init: CompletionFit | None = None, sweeps: int | None = None) -> CompletionFit:
    """Dispatch to :func:`als` (``params``: rank, reg) or :func:`soft_impute` (shrink, max_rank)."""
    if method == "als":
        kw: dict[str, Any] = {} if sweeps is None else {"sweeps": sweeps}
        return als(values, mask, int(params["rank"]), float(params["reg"]), seed=seed, init=init, **kw)
    if method == "soft_impute":
        kw = {} if sweeps is None else {"iters": sweeps}
        return soft_impute(values, mask, float(params["shrink"]), max_rank=params.get("max_rank"), init=init, **kw)
    raise InputError("method", method, "must be 'als' or 'soft_impute'")


def select(values: np.ndarray, mask: np.ndarray, method: str, grid: Sequence[dict[str, Any]], *,
           groups: np.ndarray | None = None, folds: int = 3, seed: int = 0,
           bounds: tuple[float, float] | None = None) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Pick the ``grid`` entry with the lowest K-fold validation RMSE.

    ``groups`` (same shape as ``mask``, ints) keeps entries of one group in the same fold (default:
    each entry its own group). Predictions are clipped to ``bounds`` before scoring. Returns the best
    parameters and one row per candidate ``{**params, "rmse": ...}``.
    """
    Z, M = check_matrix(values, mask)
    if not grid:
        raise InputError("grid", list(grid), "needs at least one candidate")
    if folds < 2:
        raise InputError("folds", folds, "must be >= 2")
    g = np.arange(Z.size).reshape(Z.shape) if groups is None else np.asarray(groups)
    if g.shape != Z.shape:
        raise InputError("groups", g.shape, f"must have the shape of values {Z.shape}")
    uniq, inv = np.unique(g[M], return_inverse=True)
    rng = np.random.default_rng(seed)
    fold_of_group = rng.permutation(uniq.size) % folds
    fold = np.full(Z.shape, -1)
    fold[M] = fold_of_group[inv]
    table = []
    for params in grid:
        sq, cnt = 0.0, 0
        for f in range(folds):
            test = fold == f
            train = M & ~test
            if not train.any() or not test.any():
                continue
            pred = fit_completion(Z, train, method, params, seed=seed).predict()
            if bounds is not None:
                pred = np.clip(pred, *bounds)
            sq += float(((pred - Z)[test] ** 2).sum())
            cnt += int(test.sum())
        table.append({**params, "rmse": float(np.sqrt(sq / max(cnt, 1)))})
    best = min(range(len(grid)), key=lambda i: table[i]["rmse"])
    return dict(grid[best]), table


def default_grid(method: str, values: np.ndarray | None = None, mask: np.ndarray | None = None,
                 ranks: Iterable[int] = (0, 1, 2, 3, 5), regs: Iterable[float] = (0.3, 1.0, 3.0),
                 shrink_fractions: Iterable[float] = (0.02, 0.05, 0.1, 0.2, 0.4)) -> list[dict[str, Any]]:
    """Candidate hyper-parameters: ALS ranks × regularizations; soft-impute thresholds as fractions of
    the top singular value of the zero-filled residual of the bias fit."""
    if method == "als":
        return [{"rank": int(r), "reg": float(l)} for r in ranks for l in regs]
    if method == "soft_impute":
        if values is None or mask is None:
            raise InputError("values", None, "soft-impute's grid is relative to the data: pass values and mask")
        Z, M = check_matrix(values, mask)
        resid = np.where(M, Z - als(Z, M, 0, 0.1).predict(), 0.0)
        top = float(np.linalg.svd(resid, compute_uv=False)[0]) if resid.size else 1.0
        return [{"shrink": float(f * top), "max_rank": None} for f in shrink_fractions]
    raise InputError("method", method, "must be 'als' or 'soft_impute'")

