"""Kernel of SoftMarginLossBackward: -y * sigmoid(-x * y) * g, scaled; sigmoid from exp(-|t|), accurate for
every t; the engine sums it back to input's shape where target broadcast input up."""

from __future__ import annotations

import numba

from ..halves import load, store, widened
from ..mathf import exp, product_error
from ..native import like, select
from ..registry import kernel


@kernel("SoftMarginLossBackward", reads=("grad_output", "input", "target"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def soft_margin_loss_backward(g, x, y, _a, _b, out, m, scale, _params, tmp):
    for k in range(m):
        xk, yk = load(x[k]), load(y[k])
        p = xk * yk
        zero, one = like(p, 0), like(p, 1)
        e = exp(-abs(p))
        if not widened(x):  # exp(-|x * y|) of the exact product, as the forward's (float16, bfloat16: exact already)
            err = product_error(xk, yk, p)
            e = e - e * select(p > zero, err, -err)
        sigmoid = select(p <= zero, one, e) / (one + e)  # sigmoid(-p); a NaN p: NaN through e
        store(out, k, -yk * sigmoid * (load(g[k]) * scale))
