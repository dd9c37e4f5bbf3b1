"""Kernel of SoftMarginLoss: softplus(t) = max(t, 0) + log1p(exp(-|t|)) at t = -x * y, finite wherever the
loss is; the engine reduces it."""

from __future__ import annotations

import numba

from ..halves import load, store, widened
from ..mathf import exp, log1p_unit, product_error
from ..native import like, select
from ..registry import kernel


@kernel("SoftMarginLoss", reads=("input", "target"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def soft_margin_loss(x, y, _a, _b, _c, out, m, scale, _params, tmp):
    # one pass (BinaryCrossEntropyWithLogits splits its larger loop in two; this one measured faster whole)
    for k in range(m):
        xk, yk = load(x[k]), load(y[k])
        p = xk * yk
        zero = like(p, 0)
        e = exp(-abs(p))
        if not widened(x):  # float16 and bfloat16 products are exact (or under- or overflow, where e is 1 or 0)
            # exp(-|t|) is ill-conditioned in t (|t| ulps of error per ulp of t): the product's rounding error,
            # to first order, makes it exp(-|x * y|) of the exact product
            err = product_error(xk, yk, p)
            e = e - e * select(p > zero, err, -err)
        store(out, k, select(p < zero, -p, zero) + log1p_unit(e))  # a NaN t: NaN from log1p_unit
