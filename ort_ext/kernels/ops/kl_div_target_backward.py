"""Kernel of KlDivTargetBackward: (log(t) + 1 - x) * g (NaN where log(t) is not finite), or exp(t) * (t + 1 -
x) * g with log_target, scaled; the engine sums it back to target's shape where input broadcast target up."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import holds_float16, load, store
from ..mathf import exp, log, log_normal
from ..native import like, select
from ..registry import kernel


@kernel("KlDivTargetBackward", reads=("grad_output", "input", "target"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def kl_div_target_backward(g, x, t, _a, _b, out, m, scale, params, tmp):
    if params[0]:  # log_target
        for k in range(m):
            tk = load(t[k])
            store(out, k, exp(tk) * ((tk + like(tk, 1) - load(x[k])) * (load(g[k]) * scale)))  # exp(t) last: it grows
    else:
        for k in range(m):
            tk = load(t[k])
            log_t = log_normal(tk) if holds_float16(t) else log(tk)
            d = select(abs(log_t) < like(tk, np.inf), log_t + like(tk, 1) - load(x[k]), like(tk, np.nan))
            store(out, k, d * (load(g[k]) * scale))
