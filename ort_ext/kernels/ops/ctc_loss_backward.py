"""Kernel of CtcLossBackward: alpha after every frame kept (the forward recursion), then beta backwards in time,
two rows in turn (each with two -inf pads after its states, which it reads); at each frame the states' alpha +
beta summed per class (from their maximum) and the gradient's row written once: a * (exp(lp) - exp(log(sum) + top
+ loss - lp)), in float64."""

from __future__ import annotations

import numba
import numpy as np

from ..halves import load, store_rounded
from ..mathf import exp, log
from ..native import select
from ..registry import sequence_kernel
from ..sequences import NEVER, alpha_start, alpha_step, emissions, final_loss, logsumexp3


@numba.njit(error_model="numpy", nogil=True)
def _beta_step(later, now, penalty, states, emit, last):
    """now[s] = logsumexp(later[s], later[s + 1], later[s + 2] + penalty[s + 2]) + emit[s], or at the sequence's
    last frame (`last`) emit at its last two states and -inf at the others."""
    if last:
        for s in range(states):
            now[s] = emit[s] if s >= states - 2 else NEVER
        return
    for s in range(states):
        skip = later[s + 2] + penalty[s + 2] if s + 2 < states else NEVER
        now[s] = logsumexp3(later[s], later[s + 1], skip) + emit[s]


@sequence_kernel("CtcLossBackward")
@numba.njit(error_model="numpy", nogil=True)
def ctc_loss_backward(lp, out, stride, frames, frames_all, c, ext, penalty, emit, length, rows, alphas, per_class,
                      coef, params):
    states = 2 * length + 1
    size = ext.size + 2
    start = rows[:size]
    alpha_start(start, states)
    before = start
    for t in range(frames):  # alphas[t]: after frame t, two -inf pads first
        row = alphas[t * size:(t + 1) * size]
        row[0] = row[1] = NEVER
        emissions(lp[t * stride:], ext, states, emit)
        alpha_step(before, row, penalty, states, emit)
        before = row
    loss = final_loss(before, length)
    zero = params[1] != 0 and loss == np.inf
    later, now = rows[size:2 * size], rows[2 * size:]  # beta after the frame and at it, two -inf pads last
    for s in range(size):
        later[s] = now[s] = NEVER
    for t in range(frames_all - 1, -1, -1):
        grad = out[t * stride:t * stride + c]
        if t >= frames or zero:
            for k in range(c):
                store_rounded(grad, k, 0.0)
            continue
        lpt = lp[t * stride:t * stride + c]
        emissions(lpt, ext, states, emit)
        _beta_step(later, now, penalty, states, emit, t == frames - 1)
        alpha = alphas[t * size + 2:(t + 1) * size]
        top = NEVER
        for s in range(states):
            top = select(alpha[s] + now[s] > top, alpha[s] + now[s], top)
        top = 0.0 if top == NEVER else top
        for k in range(c):
            per_class[k] = 0.0
        for s in range(states):  # the exponentials in vector lanes (emit is free now), then added per class
            emit[s] = exp(alpha[s] + now[s] - top)
        for s in range(states):
            per_class[ext[s]] += emit[s]
        for k in range(c):
            x = np.float64(load(lpt[k]))
            store_rounded(grad, k, (exp(x) - exp(log(per_class[k]) + top + loss - x)) * coef)
        later, now = now, later
