"""Kernel of KlDiv: xlogy(t, t) - t * x, or exp(t) * (t - x) with log_target (the engine reduces it)."""

from __future__ import annotations

import numba

from ..halves import holds_float16, load, store
from ..mathf import exp, log, log_normal
from ..native import like, select
from ..registry import kernel


@kernel("KlDiv", reads=("input", "target"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def kl_div(x, t, _a, _b, _c, out, m, scale, params, tmp):
    if params[0]:  # log_target
        for k in range(m):
            tk = load(t[k])
            store(out, k, exp(tk) * (tk - load(x[k])))
    else:
        for k in range(m):
            tk = load(t[k])
            zero = like(tk, 0)
            log_t = log_normal(tk) if holds_float16(t) else log(tk)
            t_log_t = select(tk == zero, zero, tk * log_t)  # xlogy(t, t): 0 at t == 0
            store(out, k, t_log_t - tk * load(x[k]))
