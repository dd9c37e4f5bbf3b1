"""Kernel of CrossEntropyLoss: a row's log-sum-exp from its sum of exponentials (one pass: rows.row_exp_sum),
then (1 - e) * weight[c] * (lse - x[c]) + (e / C) * sum_k weight[k] * (lse - x[k])."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load
from ..mathf import log
from ..registry import row_kernel
from ..rows import row_exp_sum, row_max, row_sum_below


@row_kernel("CrossEntropyLoss", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def cross_entropy_loss(x, s, c, t, w, weighted, wt, spread, params):
    shift, total = row_exp_sum(x, s, c, t, x, False)
    xt = np.float64(load(x[t * s]))
    lse = np.float64(shift) + log(total)  # mathf's: the wheel's code calls no libm
    loss = wt * ((np.float64(shift) - xt) + log(total))  # shift - x[t] is 0 but where the pass was redone
    e = params[1]
    if e == 0.0:  # no smoothing term, even where a logit is -inf (it would be inf), as PyTorch
        return loss
    # sum_k weight[k] * (lse - x[k]) = sum_k weight[k] * (top - x[k]) + (lse - top) * sum_k weight[k], with top the
    # row's maximum: terms of one sign
    top = row_max(x, s, c)
    smooth = row_sum_below(x, s, c, top, w, weighted) + (lse - np.float64(top)) * spread
    return (1.0 - e) * loss + e / c * smooth
