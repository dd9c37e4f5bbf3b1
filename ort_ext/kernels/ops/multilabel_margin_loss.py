"""Kernel of MultilabelMarginLoss: per label y_j of the row, a pass over its classes summing the margins
1 - x[y_j] + x[i] above 0 at the classes i that are none of its labels, in float64; the sum over C."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load
from ..labels import MASK_BYTES, MASK_WORDS, fill_mask, is_label, label_count
from ..native import stack, view
from ..registry import row_kernel


@row_kernel("MultilabelMarginLoss", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def multilabel_margin_loss(x, t, s, c, params):
    k = label_count(t, s, c)
    mask = view(stack(MASK_BYTES), MASK_WORDS, np.uint64)  # in this frame: alive while the row is computed
    fill_mask(t, s, k, c, mask)
    total = 0.0
    for j in range(k):
        margin = 1.0 - np.float64(load(x[t[j * s] * s]))
        for i in range(c):
            z = margin + np.float64(load(x[i * s]))
            if z > 0.0 and not is_label(t, s, k, c, mask, i):  # a NaN margin adds nothing (z > 0 is false)
                total += z
    return total / c
