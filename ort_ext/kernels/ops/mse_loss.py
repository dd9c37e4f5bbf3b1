"""Kernel of MseLoss: (x - y)^2; the engine reduces it."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..registry import kernel


@kernel("MseLoss", reads=("input", "target"), task_elements=1 << 16, prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def mse_loss(x, y, _a, _b, _c, out, m, scale, _params, tmp):
    for k in range(m):
        d = load(x[k]) - load(y[k])
        store(out, k, d * d)
