"""Kernel of BinaryCrossEntropy: -w * (y * max(log x, -100) + (1 - y) * max(log1p(-x), -100))."""

from __future__ import annotations

import numba

from ....opset.ops.binary_cross_entropy import LOG_CLAMP
from ..halves import holds_float16, load, store
from ..mathf import log, log1p, log_normal
from ..native import like, select
from ..registry import kernel


@kernel("BinaryCrossEntropy", reads=("input", "target", "weight"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy(x, y, w, _a, _b, out, m, scale, _params, tmp):
    for k in range(m):
        xk, yk = load(x[k]), load(y[k])
        clamp = like(xk, LOG_CLAMP)
        one = like(xk, 1)
        if holds_float16(x):  # 1 - x is exact (log1p's correction is 0) and neither is subnormal
            log_x, log_1mx = log_normal(xk), log_normal(one - xk)
        else:
            log_x, log_1mx = log(xk), log1p(-xk)
        log_x = select(log_x < clamp, clamp, log_x)  # a clamp that keeps NaN (x outside [0, 1] is not checked)
        log_1mx = select(log_1mx < clamp, clamp, log_1mx)
        store(out, k, -(yk * log_x + (one - yk) * log_1mx) * load(w[k]))
