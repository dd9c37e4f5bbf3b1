"""Kernel of BinaryCrossEntropyWithLogitsBackward: ((1 + (p - 1)*y) * sigmoid(x) - p*y) * g * w, times 1/numel
for mean. sigmoid from exp(-|x|), accurate for every logit."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..mathf import exp
from ..native import like, select
from ..registry import kernel


@kernel("BinaryCrossEntropyWithLogitsBackward", reads=("grad_output", "input", "target", "weight", "pos_weight"),
        task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy_with_logits_backward(g, x, y, w, p, out, m, scale, _params, tmp):
    for k in range(m):
        tmp[k] = exp(-abs(load(x[k])))
    for k in range(m):
        xk, yk, e = load(x[k]), load(y[k]), tmp[k]
        one = like(xk, 1)
        sigmoid = select(xk >= like(xk, 0), one, e) / (one + e)
        pk = load(p[k])
        # (p * y + 1 - y) as 1 + (p - 1) * y: no inf - inf for an infinite target at p = 1 (PyTorch gives -+inf)
        s = one + select(pk == one, like(xk, 0), (pk - one) * yk)
        grad = s * sigmoid - pk * yk
        store(out, k, grad * (load(g[k]) * scale) * load(w[k]))
