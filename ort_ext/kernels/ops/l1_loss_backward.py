"""Kernel of L1LossBackward: sign(x - y) * g (0 at 0 and NaN, as PyTorch's autograd), scaled; the engine sums it
back to input's shape where target broadcast input up."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..native import like, select
from ..registry import kernel


@kernel("L1LossBackward", reads=("grad_output", "input", "target"), task_elements=1 << 16, prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def l1_loss_backward(g, x, y, _a, _b, out, m, scale, _params, tmp):
    for k in range(m):
        d = load(x[k]) - load(y[k])
        zero, one = like(d, 0), like(d, 1)
        sign = select(d > zero, one, select(d < zero, -one, zero))
        store(out, k, sign * (load(g[k]) * scale))
