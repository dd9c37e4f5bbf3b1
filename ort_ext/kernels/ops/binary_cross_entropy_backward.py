"""Kernel of BinaryCrossEntropyBackward: g * (x - y) / max(x * (1 - x), 1e-12) * w, times 1/numel for mean."""

from __future__ import annotations

import numba

from ....opset.ops.binary_cross_entropy_backward import EPSILON
from ..halves import load, store
from ..native import like, select
from ..registry import kernel


@kernel("BinaryCrossEntropyBackward", reads=("grad_output", "input", "target", "weight"), task_elements=1 << 16,
        prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy_backward(g, x, y, w, _, out, m, scale, _params, tmp):
    for k in range(m):
        xk = load(x[k])
        d = (like(xk, 1) - xk) * xk
        eps = like(xk, EPSILON)  # PyTorch's clamp, in the compute precision
        d = select(d < eps, eps, d)
        store(out, k, (xk - load(y[k])) * (load(g[k]) * scale) / d * load(w[k]))
