"""Kernel of KlDivBackward: d = -t * g (or -exp(t) * g with log_target), scaled; the engine sums it back to
input's shape where target broadcast input up (the input's own data is never read)."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..mathf import exp
from ..registry import kernel


@kernel("KlDivBackward", reads=("grad_output", "target"), task_elements=1 << 16)
@numba.njit(error_model="numpy", nogil=True)
def kl_div_backward(g, _x, t, _a, _b, out, m, scale, params, tmp):
    if params[0]:  # log_target
        for k in range(m):
            store(out, k, -(exp(load(t[k])) * (load(g[k]) * scale)))
    else:
        for k in range(m):
            store(out, k, -(load(t[k]) * (load(g[k]) * scale)))
