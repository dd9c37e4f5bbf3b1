"""Kernel of MultilabelMarginLoss: per label y_j of the row, a pass over its classes summing the margins
1 - x[y_j] + x[i] above 0 at the classes i that are none of its labels, in float64; the sum over C. The pass
reads the label mask a 64-class word at a time, so that it runs in vector lanes (only the sum is reassociated)."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load
from ..labels import MASK_BYTES, MASK_CLASSES, MASK_WORDS, fill_mask, is_label, label_count
from ..native import stack, view
from ..registry import row_kernel


@numba.njit(error_model="numpy", nogil=True, fastmath={"reassoc"})
def _margins_above(x, s, margin, mask, c):
    """sum over the classes i of the row that are no label (mask bit 0) of max(0, margin + x[i]) (a NaN adds
    nothing), in float64."""
    total = 0.0
    for word in range(c // 64):
        bits, base = mask[word], word * 64
        for b in range(64):
            z = margin + np.float64(load(x[(base + b) * s]))
            total += z if z > 0.0 and (bits >> np.uint64(b)) & np.uint64(1) == 0 else 0.0
    for i in range(c - c % 64, c):
        z = margin + np.float64(load(x[i * s]))
        total += z if z > 0.0 and (mask[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) == 0 else 0.0
    return total


@numba.njit(error_model="numpy", nogil=True, fastmath={"reassoc"})
def count_above(x, s, margin, mask, c):
    """The number of the classes i of the row that are no label (mask bit 0) whose margin + x[i] is above 0.
    `_margins_above`'s loop with another term: one loop choosing its term by a flag made the gradient slower."""
    count = 0
    for word in range(c // 64):
        bits, base = mask[word], word * 64
        for b in range(64):
            z = margin + np.float64(load(x[(base + b) * s]))
            count += 1 if z > 0.0 and (bits >> np.uint64(b)) & np.uint64(1) == 0 else 0
    for i in range(c - c % 64, c):
        z = margin + np.float64(load(x[i * s]))
        count += 1 if z > 0.0 and (mask[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) == 0 else 0
    return count


@row_kernel("MultilabelMarginLoss", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def multilabel_margin_loss(x, t, s, c, params):
    k = label_count(t, s, c)
    mask = view(stack(MASK_BYTES), MASK_WORDS, np.uint64)  # in this frame: alive while the row is computed
    fill_mask(t, s, k, c, mask)
    total = 0.0
    for j in range(k):
        margin = 1.0 - np.float64(load(x[t[j * s] * s]))
        if c <= MASK_CLASSES:
            total += _margins_above(x, s, margin, mask, c)
            continue
        for i in range(c):  # a row wider than the mask: its labels scanned
            z = margin + np.float64(load(x[i * s]))
            if z > 0.0 and not is_label(t, s, k, c, mask, i):
                total += z
    return total / c
