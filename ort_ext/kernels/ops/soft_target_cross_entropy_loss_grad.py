"""Kernel of SoftTargetCrossEntropyLossGrad: the row's maximum, its sum of exponentials and of the target's terms
(rows.row_soft_pass; for float and double the exponentials kept in the gradient's row), then the row written once:
coef * (p[k] * sum_j q[j] - q[k]), q = weight * smoothed target, in float64 for float and double."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load, store, store_rounded
from ..mathf import exp
from ..native import like
from ..registry import row_kernel
from ..rows import exact, row_max, row_soft_pass


@row_kernel("SoftTargetCrossEntropyLossGrad", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def soft_target_cross_entropy_loss_grad(x, t, s, c, w, weighted, params, coef, out):
    e = params[0]
    # shifted by the row's maximum (not the loss's first logit): the largest p's arguments to exp then round least
    shift = row_max(x, s, c)
    keep = exact(out)  # float and double: the exponentials are kept in the gradient's row, then scaled in place
    total, mass, _ = row_soft_pass(x, t, s, c, shift, w, weighted, e, out, keep)
    scale = coef * mass / total  # p[k] * coef * sum_j q[j] = exp(x[k] - shift) * scale
    kept, spread = coef * (1.0 - e), coef * e / c
    if keep:  # in float64, rounded once: p[k] * sum_j q[j] - q[k] cancels where p is near q
        for k in range(c):
            q = kept * np.float64(load(t[k * s])) + spread
            if weighted:
                q *= np.float64(load(w[k]))
            store_rounded(out, k * s, np.float64(out[k * s]) * scale - q)
    else:  # float16 and bfloat16 would round the exponentials: computed again, in float32
        scale32, kept32, spread32 = like(shift, scale), like(shift, kept), like(shift, spread)
        for k in range(c):
            q32 = kept32 * load(t[k * s]) + spread32
            if weighted:
                q32 *= load(w[k])
            store(out, k * s, exp(load(x[k * s]) - shift) * scale32 - q32)
