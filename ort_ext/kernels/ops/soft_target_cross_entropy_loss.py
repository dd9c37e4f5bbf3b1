"""Kernel of SoftTargetCrossEntropyLoss: one pass for the row's sum of exponentials and the target's terms
(rows.row_soft_sums): sum_k q[k] * (lse - x[k]) = sum_k q[k] * (shift - x[k]) + log(sum) * sum_k q[k]."""

from __future__ import annotations

import numba

from ..mathf import log
from ..registry import row_kernel
from ..rows import row_soft_sums


@row_kernel("SoftTargetCrossEntropyLoss", task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def soft_target_cross_entropy_loss(x, t, s, c, w, weighted, params):
    total, mass, below = row_soft_sums(x, t, s, c, w, weighted, params[0])
    return below + log(total) * mass
