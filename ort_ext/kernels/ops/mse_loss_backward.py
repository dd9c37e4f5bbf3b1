"""Kernel of MseLossBackward: (x - y) * (2 * g * scale), aten's order (its 2 / N first), so that a mean's answer
does not overflow where it is finite; the engine sums it back to input's shape where target broadcast input up."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..native import like
from ..registry import kernel


@kernel("MseLossBackward", reads=("grad_output", "input", "target"), task_elements=1 << 16, prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def mse_loss_backward(g, x, y, _a, _b, out, m, scale, _params, tmp):
    for k in range(m):
        xk = load(x[k])
        store(out, k, (xk - load(y[k])) * (like(xk, 2) * (load(g[k]) * scale)))
