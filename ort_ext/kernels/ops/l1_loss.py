"""Kernel of L1Loss: |x - y|; the engine reduces it."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..registry import kernel


@kernel("L1Loss", reads=("input", "target"), task_elements=1 << 16, prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def l1_loss(x, y, _a, _b, _c, out, m, scale, _params, tmp):
    for k in range(m):
        store(out, k, abs(load(x[k]) - load(y[k])))
