"""Kernel of BinaryCrossEntropy: -w * (y * max(log x, -100) + (1 - y) * max(log1p(-x), -100))."""

from __future__ import annotations

import numba

from ....opset.ops.binary_cross_entropy import LOG_CLAMP
from ..halves import complement_exact, load, store
from ..mathf import log, log1p
from ..native import like, select
from ..registry import kernel


@kernel("BinaryCrossEntropy", reads=("input", "target", "weight"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def binary_cross_entropy(x, y, w, _a, _b, out, m, scale, _params, tmp):
    for k in range(m):
        xk, yk = load(x[k]), load(y[k])
        clamp = like(xk, LOG_CLAMP)
        log_x = log(xk)
        log_x = select(log_x < clamp, clamp, log_x)  # a clamp that keeps NaN (x outside [0, 1] is not checked)
        one = like(xk, 1)
        log_1mx = log(one - xk) if complement_exact(x) else log1p(-xk)  # log1p's correction is 0 there
        log_1mx = select(log_1mx < clamp, clamp, log_1mx)
        store(out, k, -(yk * log_x + (one - yk) * log_1mx) * load(w[k]))
