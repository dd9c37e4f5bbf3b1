"""Kernel of BinaryCrossEntropyWithLogitsTargetBackward: (p * softplus(-x) - softplus(x)) * g * w, times 1/numel
for mean, as (p - 1) * log1p(exp(-|x|)) - x * (1 or p by x's side): no overflow, no cancellation at p = 1
(where it is -x, PyTorch's formula without pos_weight). The target's values are never read."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..mathf import exp, log1p_unit
from ..native import like, select
from ..registry import kernel


@kernel("BinaryCrossEntropyWithLogitsTargetBackward", reads=("grad_output", "input", "weight", "pos_weight"),
        task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy_with_logits_target_backward(g, x, _y, w, p, out, m, scale, _params, tmp):
    weighted = False  # a pos_weight other than 1 in this tile (an absent one reads as ones): else -x * g * w
    for k in range(m):
        weighted |= load(p[k]) != like(scale, 1)
    if not weighted:
        for k in range(m):
            store(out, k, -load(x[k]) * (load(g[k]) * scale) * load(w[k]))
        return
    for k in range(m):
        tmp[k] = exp(-abs(load(x[k])))
    for k in range(m):
        xk, pk = load(x[k]), load(p[k])
        slope = select(xk < like(xk, 0), -pk * xk, -xk)
        store(out, k, ((pk - like(xk, 1)) * log1p_unit(tmp[k]) + slope) * (load(g[k]) * scale) * load(w[k]))
