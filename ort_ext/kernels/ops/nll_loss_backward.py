"""Kernel of NLLLossBackward: a row's gradient is -weight[c] * grad_output at its class c, 0 elsewhere."""

from __future__ import annotations

import numba

from ..halves import load, store, store_rounded
from ..native import like
from ..registry import row_kernel


@row_kernel("NLLLossBackward", task_elements=1 << 16)
@numba.njit(error_model="numpy", nogil=True)
def nll_loss_backward(x, s, c, t, _w, _weighted, wt, _spread, _params, coef, out):
    zero = like(load(x[0]), 0)
    for k in range(c):
        store(out, k * s, zero)
    store_rounded(out, t * s, -wt * coef)
