"""Kernel of BinaryCrossEntropyWithLogits: loss = w * ((1 - y) * softplus(x) + p * y * softplus(-x))."""

from __future__ import annotations

import numba

from . import kernel
from .halves import load, store
from .mathf import exp, log1p_unit
from .native import like, select


@kernel("BinaryCrossEntropyWithLogits", reads=("input", "target", "weight", "pos_weight"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy_with_logits(x, y, w, p, _, out, m, scale, flag, tmp):
    # Two passes over the tile: exp alone, then the rest. One fused pass was 20-30 % slower here (measured:
    # the two polynomials' dependency chains outgrow the scheduler; split, each vectorises fully).
    for k in range(m):
        tmp[k] = exp(-abs(load(x[k])))
    for k in range(m):
        xk, yk = load(x[k]), load(y[k])
        zero, one = like(xk, 0), like(xk, 1)
        log_term = log1p_unit(tmp[k])  # log1p(exp(-|x|)): softplus(x) = max(x, 0) + this, finite for every x
        softplus_x = select(xk < zero, zero, xk) + log_term
        softplus_neg_x = select(xk > zero, zero, -xk) + log_term
        a, b = one - yk, load(p[k]) * yk
        # A zero coefficient or weight makes its term 0 even where softplus is inf (x = +-inf): the loss's
        # limit there (OPS.md), where 0 * inf would be NaN.
        loss = select(a == zero, zero, a * softplus_x) + select(b == zero, zero, b * softplus_neg_x)
        wk = load(w[k])
        store(out, k, select(wk == zero, zero, loss * wk))
