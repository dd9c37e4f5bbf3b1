"""Kernel of CtcLoss: the forward recursion over the sequence's frames, two rows of states in turn, then the
loss from the last two states (sequences.final_loss); 0 for an infinite loss with zero_infinity."""

from __future__ import annotations

import numba
import numpy as np

from ..registry import sequence_kernel
from ..sequences import alpha_start, alpha_step, emissions, final_loss


@sequence_kernel("CtcLoss")
@numba.njit(error_model="numpy", nogil=True)
def ctc_loss(lp, stride, frames, ext, penalty, emit, length, rows, params):
    states = 2 * length + 1
    size = ext.size + 2
    before, after = rows[:size], rows[size:]
    alpha_start(before, states)
    alpha_start(after, states)  # its two pads
    for t in range(frames):
        emissions(lp[t * stride:], ext, states, emit)
        alpha_step(before, after, penalty, states, emit)
        before, after = after, before
    loss = final_loss(before, length)
    return 0.0 if params[1] != 0 and loss == np.inf else loss
