"""Kernel of BinaryCrossEntropyWithLogits: loss = w * ((1 - y) * softplus(x) + p * y * softplus(-x))."""

from __future__ import annotations

import numba

from . import kernel
from .halves import load, store
from .mathf import exp, log1p_unit
from .native import fmuladd, like, select


@kernel("BinaryCrossEntropyWithLogits", reads=("input", "target", "weight", "pos_weight"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy_with_logits(x, y, w, p, _, out, m, scale, flag, tmp):
    # Two passes over the tile: exp alone, then the rest. One fused pass was 20-30 % slower here (measured:
    # the two polynomials' dependency chains outgrow the scheduler; split, each vectorises fully).
    for k in range(m):
        tmp[k] = exp(-abs(load(x[k])))
    for k in range(m):
        xk, yk = load(x[k]), load(y[k])
        zero = like(xk, 0)
        a, b = like(xk, 1) - yk, load(p[k]) * yk
        # softplus(+-x) = max(+-x, 0) + L with L = log1p(exp(-|x|)), finite for every x, and only one of the
        # maxima is non-zero: loss = c * |x| + (a + b) * L, c the coefficient of the side x is on. A zero c makes
        # its term 0 even at x = +-inf: the loss's limit there (OPS.md), where 0 * inf would be NaN.
        c = select(xk > zero, a, b)
        linear = select(c == zero, zero, c * abs(xk))
        loss = fmuladd(a + b, log1p_unit(tmp[k]), linear)
        wk = load(w[k])
        store(out, k, select(wk == zero, zero, loss * wk))
