"""Compilation of a :class:`~policyopt.modeling.Model` to a :class:`~policyopt.standard_form.StandardForm`
in one vectorized pass (what :meth:`Model.compile <policyopt.modeling.Model.compile>` does).

Columns: each variable's existing slots (``cols ≥ 0``) take its bounds and integrality. Rows: every
constraint block's triplet blocks are stacked once (row ``start + r`` for a block's element ``r``)
and converted to one CSC matrix ``A`` (duplicates summed); row bounds are the blocks' bounds in
order. Optional row scaling: row ``i`` is multiplied by ``s_i = 2^{−rint(log₂ max_j |a_ij|)}``
(rows, bounds and the kept factors alike: ``s_i·lower_i ≤ s_i·(A x)_i ≤ s_i·upper_i`` has the
same solutions, and a power of two changes no mantissa). The objective ``c`` sums the objective
expression's coefficients per column; its constant is the form's offset.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .modeling_arrays import _csc
from .standard_form import StandardForm

if TYPE_CHECKING:  # (modeling imports this module)
    from .modeling import Model

__all__ = ["compile_model"]


def compile_model(model: "Model", scale_rows: bool = True) -> StandardForm:
    """The standard form of ``model`` (module docstring); ``scale_rows``: scale each row by a power
    of two close to ``1/max|a_ij|`` and keep the factors (``row_scale``) so row activities and
    duals are mapped back exactly."""
    n = model.num_cols
    lower = np.empty(n)
    upper = np.empty(n)
    integrality = np.zeros(n, np.int8)
    col_blocks: dict[str, tuple[int, int]] = {}
    for var in model.variables.values():
        m = var.mask
        if var.first is not None:  # consecutive columns (Model.add_variables): slices, no scatter
            lo_v = var.lower[m]
            a, b = var.first, var.first + lo_v.size
            lower[a:b] = lo_v
            upper[a:b] = var.upper[m]
            if var.integer:
                integrality[a:b] = 1
            if b > a:
                col_blocks[var.name] = (a, b)
            continue
        c = var.cols[m]
        lower[c] = var.lower[m]
        upper[c] = var.upper[m]
        if var.integer:
            integrality[c] = 1
        if c.size:
            col_blocks[var.name] = (int(c.min()), int(c.max()) + 1)
    blocks = list(model.blocks.values())
    num_rows = model.num_rows
    if blocks:
        terms = [(b.start, t) for b in blocks for t in b.terms]  # every block's triplets, stacked once
        rows = np.concatenate([t[0] + start for start, t in terms])
        cols = np.concatenate([t[1] for _, t in terms])
        vals = np.concatenate([t[2] for _, t in terms])
        rlo = np.concatenate([b.lower for b in blocks])
        rhi = np.concatenate([b.upper for b in blocks])
    else:
        rows = cols = np.zeros(0, np.int64)
        vals = rlo = rhi = np.zeros(0)
    scale = np.ones(num_rows)
    if scale_rows and num_rows and vals.size:
        # scale the triplets before the one COO → CSC conversion (any positive factor is valid;
        # with duplicate entries the factor is merely less tight)
        absmax = np.zeros(num_rows)
        np.maximum.at(absmax, rows, np.abs(vals))
        nz = absmax > 0
        scale[nz] = np.exp2(-np.rint(np.log2(absmax[nz])))  # (rint: round's C core, no wrapper)
        vals = vals * scale[rows]
        rlo = rlo * scale
        rhi = rhi * scale
    A = _csc(rows, cols, vals, (num_rows, n))  # sums duplicates
    obj = model.objective
    c = np.bincount(obj.cols, weights=obj.coefs, minlength=n).astype(np.float64, copy=False)
    integrality.flags.writeable = False  # (no code changes it in place; StandardForm.is_mip is kept)
    return StandardForm(
        sense=model.sense, c=c, offset=float(obj.const), col_lower=lower, col_upper=upper,
        integrality=integrality, A=A, row_lower=rlo, row_upper=rhi, row_scale=scale,
        col_blocks=col_blocks,
        row_blocks={b.name: (b.start, b.stop) for b in blocks}, row_scale_applied=scale_rows,
    )
