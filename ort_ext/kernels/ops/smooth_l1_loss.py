"""Kernel of SmoothL1Loss: 0.5 * z * z / beta below beta, z - 0.5 * beta above, z = |x - y|; the engine reduces
it."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..native import like, select
from ..registry import kernel


@kernel("SmoothL1Loss", reads=("input", "target"), task_elements=1 << 16, prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def smooth_l1_loss(x, y, _a, _b, _c, out, m, scale, params, tmp):
    for k in range(m):
        xk = load(x[k])
        z = abs(xk - load(y[k]))
        beta, half = like(xk, params[0]), like(xk, 0.5)
        # 0.5 * z * (z / beta): z / beta < 1 below beta, so nothing overflows or underflows before the result does;
        # PyTorch's 0.5 * z * z / beta squares first (inf at a float32 beta of 1e30, 0 at 1e-30). Both sides
        # computed, one kept: at beta = 0 the quadratic side's 0/0 is never the result.
        store(out, k, select(z < beta, half * z * (z / beta), z - half * beta))
