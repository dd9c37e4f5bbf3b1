"""Kernel of BinaryCrossEntropyWithLogits: loss = w * ((1 - y) * softplus(x) + p * y * softplus(-x))."""

from __future__ import annotations

import numba

from ..halves import load, store
from ..mathf import exp, log1p_unit
from ..native import fmuladd, like, select
from ..registry import kernel


@kernel("BinaryCrossEntropyWithLogits", reads=("input", "target", "weight", "pos_weight"), task_elements=1 << 14,
        prefetch=True)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy_with_logits(x, y, w, p, _, out, m, scale, _params, tmp):
    # Two passes over the tile: exp alone, then the rest. One fused pass was slower (the two
    # polynomials' dependency chains outgrow the scheduler; split, each vectorises fully).
    for k in range(m):
        tmp[k] = exp(-abs(load(x[k])))
    for k in range(m):
        xk, yk, pk = load(x[k]), load(y[k]), load(p[k])
        zero, one = like(xk, 0), like(xk, 1)
        # softplus(+-x) = max(+-x, 0) + L with L = log1p(exp(-|x|)), finite for every x, and only one of the
        # maxima is non-zero: loss = c * |x| + s * L, c the coefficient of the side x is on (1 - y or p * y) and
        # s = (1 - y) + p * y written as 1 + (p - 1) * y, which does not cancel for a large target. A zero factor
        # makes its term 0 even where the other is infinite: the loss's limit at x = +-inf and, as PyTorch,
        # no NaN from (p - 1) * y at p = 1 and an infinite target (docs/operators.md).
        c = select(xk > zero, one - yk, pk * yk)
        linear = select(c == zero, zero, c * abs(xk))
        s = one + select(pk == one, zero, (pk - one) * yk)
        ln = log1p_unit(tmp[k])
        loss = select(ln == zero, linear, fmuladd(s, ln, linear))
        wk = load(w[k])
        store(out, k, select(wk == zero, zero, loss * wk))
