"""Kernel of SmoothL1LossBackward: the slope of the smooth L1 loss at d = x - y, times g, scaled; the engine
sums it back to input's shape where target broadcast input up."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..native import like, select
from ..registry import kernel


@kernel("SmoothL1LossBackward", reads=("grad_output", "input", "target"), task_elements=1 << 16, prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def smooth_l1_loss_backward(g, x, y, _a, _b, out, m, scale, params, tmp):
    for k in range(m):
        xk = load(x[k])
        d = xk - load(y[k])
        zero, one, beta = like(xk, 0), like(xk, 1), like(xk, params[0])
        slope = select(d <= -beta, -one, select(d >= beta, one, d / beta))  # aten's kernel; NaN stays NaN
        sign = select(d > zero, one, select(d < zero, -one, zero))  # beta = 0: L1's gradient, 0 at 0 and NaN
        store(out, k, select(beta == zero, sign, slope) * (load(g[k]) * scale))
