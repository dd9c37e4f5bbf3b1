"""Kernel of MseLossBackward: 2 * (x - y) * g, scaled (aten's order); the engine sums it back to input's shape
where target broadcast input up."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..native import like
from ..registry import kernel


@kernel("MseLossBackward", reads=("grad_output", "input", "target"), task_elements=1 << 16)
@numba.njit(error_model="numpy", nogil=True)
def mse_loss_backward(g, x, y, _a, _b, out, m, scale, _params, tmp):
    for k in range(m):
        xk = load(x[k])
        store(out, k, like(xk, 2) * (xk - load(y[k])) * load(g[k]) * scale)
