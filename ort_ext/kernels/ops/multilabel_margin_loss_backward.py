"""Kernel of MultilabelMarginLossBackward: the row written once, a class that is none of the row's labels getting
coef / C times the number of its margins above 0 (the labels' margins gathered once), a label -coef / C times
its own (times the times it is listed, counted a mask word at a time as the forward's); the margins in float64."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load, store_rounded
from ..labels import MASK_BYTES, MASK_CLASSES, MASK_WORDS, fill_mask, is_label, label_count
from ..native import stack, view
from ..registry import row_kernel
from .multilabel_margin_loss import count_above

_MARGINS = 256
_MARGINS_BYTES = 8 * _MARGINS  # a constant: `stack` takes a literal


@row_kernel("MultilabelMarginLossBackward", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def multilabel_margin_loss_backward(x, t, s, c, params, coef, out):
    k = label_count(t, s, c)
    mask = view(stack(MASK_BYTES), MASK_WORDS, np.uint64)  # in this frame: alive while the row is computed
    fill_mask(t, s, k, c, mask)
    unit = coef / c
    # the labels' margins 1 - x[y_j], gathered once where they fit on the stack
    margins = view(stack(_MARGINS_BYTES), _MARGINS, np.float64)
    for j in range(min(k, _MARGINS)):
        margins[j] = 1.0 - np.float64(load(x[t[j * s] * s]))
    for i in range(c):  # the classes that are no label: a count over the labels
        if is_label(t, s, k, c, mask, i):
            continue
        xi, count = np.float64(load(x[i * s])), 0
        if k <= _MARGINS:
            for j in range(k):
                count += 1 if margins[j] + xi > 0.0 else 0
        else:
            for j in range(k):
                count += 1 if 1.0 - np.float64(load(x[t[j * s] * s])) + xi > 0.0 else 0
        store_rounded(out, i * s, unit * count)
    for j in range(k):  # each label once, however often listed: a count over the classes that are no label
        y, listed, first = t[j * s], 0, True
        for m in range(k):
            if t[m * s] == y:
                listed += 1
                first = first and m >= j
        if not first:
            continue
        margin, count = 1.0 - np.float64(load(x[y * s])), 0
        if c <= MASK_CLASSES:
            count = count_above(x, s, margin, mask, c)
        else:  # a row wider than the mask: its labels scanned
            for i in range(c):
                if margin + np.float64(load(x[i * s])) > 0.0 and not is_label(t, s, k, c, mask, i):
                    count += 1
        store_rounded(out, y * s, -unit * (listed * count))
