"""Kernel of CrossEntropyLossGrad: a row's softmax p from its sum of exponentials (rows.row_exp_sum), written once as
coef * (p[k] * ((1 - e) * weight[c] + (e / C) * sum_j weight[j]) - (e / C) * weight[k]), less
coef * (1 - e) * weight[c] at the target c."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load, store, store_rounded
from ..mathf import exp
from ..native import like
from ..registry import row_kernel
from ..rows import exact, row_exp_sum


@row_kernel("CrossEntropyLossGrad", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def cross_entropy_loss_grad(x, s, c, t, w, weighted, wt, spread, params, coef, out):
    e = params[1]
    hit = coef * (1.0 - e) * wt  # the target's own term
    share = coef * e / c  # the smoothed term's, per unit of weight
    a = hit + share * spread  # what p[k] is multiplied by
    if exact(out):  # float and double: the exponentials are kept in the gradient's row, then scaled in place
        top, total = row_exp_sum(x, s, c, t, out, True)
        scale, spread_k = like(top, a / total), like(top, share)
        if weighted:
            for k in range(c):
                out[k * s] = out[k * s] * scale - spread_k * load(w[k])
        else:
            for k in range(c):
                out[k * s] = out[k * s] * scale - spread_k
    else:  # float16 and bfloat16 would round them: computed again
        top, total = row_exp_sum(x, s, c, t, x, False)
        scale, spread_k = like(top, a / total), like(top, share)
        if weighted:
            for k in range(c):
                store(out, k * s, exp(load(x[k * s]) - top) * scale - spread_k * load(w[k]))
        else:
            for k in range(c):
                store(out, k * s, exp(load(x[k * s]) - top) * scale - spread_k)
    # the target's value again, in float64: p[c] * a - hit cancels where p[c] is near 1
    p = exp(np.float64(load(x[t * s])) - np.float64(top)) / total
    store_rounded(out, t * s, p * a - share * wt - hit)
