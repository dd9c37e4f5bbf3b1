"""Kernel of BinaryCrossEntropyWithLogitsBackward: ((1 + (p - 1)*y) * sigmoid(x) - p*y) * g * w, times 1/numel
for mean. sigmoid from exp(-|x|), accurate for every logit."""

from __future__ import annotations

import numba

from ..halves import load, store, widened
from ..mathf import exp
from ..native import like, select
from ..registry import kernel

_inline = numba.njit(error_model="numpy")  # LLVM inlines it into the loops


@_inline
def _gradient(xk, yk, pk, e):
    """The gradient before g * w, from e = exp(-|x|)."""
    one = like(xk, 1)
    sigmoid = select(xk >= like(xk, 0), one, e) / (one + e)
    # (p * y + 1 - y) as 1 + (p - 1) * y: no inf - inf for an infinite target at p = 1 (PyTorch gives -+inf)
    s = one + select(pk == one, like(xk, 0), (pk - one) * yk)
    return s * sigmoid - pk * yk


@kernel("BinaryCrossEntropyWithLogitsBackward", reads=("grad_output", "input", "target", "weight", "pos_weight"),
        task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy_with_logits_backward(g, x, y, w, p, out, m, scale, _params, tmp):
    # float16 and bfloat16 run faster with exp alone over the tile first; float32 and float64 in one loop
    # (level in cache, faster from memory: docs/speed.md)
    if widened(x):
        for k in range(m):
            tmp[k] = exp(-abs(load(x[k])))
        for k in range(m):
            grad = _gradient(load(x[k]), load(y[k]), load(p[k]), tmp[k])
            store(out, k, grad * (load(g[k]) * scale) * load(w[k]))
    else:
        for k in range(m):
            xk = load(x[k])
            grad = _gradient(xk, load(y[k]), load(p[k]), exp(-abs(xk)))
            store(out, k, grad * (load(g[k]) * scale) * load(w[k]))
