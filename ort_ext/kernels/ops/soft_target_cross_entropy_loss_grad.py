"""Kernel of SoftTargetCrossEntropyLossGrad: the row's sum of exponentials and of the target's terms in one pass
(rows.row_soft_sums), then the row written once: coef * (p[k] * sum_j q[j] - q[k]), q = weight * smoothed target."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..mathf import exp
from ..native import like
from ..registry import row_kernel
from ..rows import row_soft_sums


@row_kernel("SoftTargetCrossEntropyLossGrad", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def soft_target_cross_entropy_loss_grad(x, t, s, c, w, weighted, params, coef, out):
    e = params[0]
    shift, total, mass, _ = row_soft_sums(x, t, s, c, w, weighted, e)
    scale = like(shift, coef * mass / total)  # p[k] * coef * sum_j q[j] = exp(x[k] - shift) * scale
    kept, spread = like(shift, coef * (1.0 - e)), like(shift, coef * e / c)
    for k in range(c):
        q = kept * load(t[k * s]) + spread
        if weighted:
            q *= load(w[k])
        store(out, k * s, exp(load(x[k * s]) - shift) * scale - q)
