"""A row's label list (MultilabelMarginLoss's target): its length and which classes it holds, as the row
functions read them. Membership is a bit per class in a stack buffer where the row has at most MASK_CLASSES
classes (filled in O(C / 64 + K), read in O(1)); a wider row scans its labels instead (O(K) a class)."""

from __future__ import annotations

import numba
import numpy as np

_jit = numba.njit(error_model="numpy", nogil=True)

MASK_WORDS = 1024
MASK_CLASSES = 64 * MASK_WORDS
MASK_BYTES = 8 * MASK_WORDS  # a constant: `stack` takes a literal


@_jit
def label_count(t, s, c):
    """The number of labels of the row t[0], t[s], ...: the values before its first negative one."""
    for j in range(c):
        if t[j * s] < 0:
            return j
    return c


@_jit
def fill_mask(t, s, k, c, mask):
    """Set the bits of the row's k labels in `mask` (MASK_WORDS words), where the row has at most MASK_CLASSES
    classes; nothing otherwise (`is_label` then scans)."""
    if c <= MASK_CLASSES:
        for word in range((c + 63) // 64):
            mask[word] = 0
        for j in range(k):
            y = t[j * s]
            mask[y >> 6] |= np.uint64(1) << np.uint64(y & 63)


@_jit
def is_label(t, s, k, c, mask, i):
    """Whether class i is one of the row's k labels."""
    if c <= MASK_CLASSES:
        return (mask[i >> 6] >> np.uint64(i & 63)) & np.uint64(1) != 0
    for j in range(k):
        if t[j * s] == i:
            return True
    return False
