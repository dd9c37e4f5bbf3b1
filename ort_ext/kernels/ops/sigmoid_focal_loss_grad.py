"""Kernel of SigmoidFocalLossGrad: the gradient of the focal loss w.r.t. the logits, times grad_output and weight
(and 1/numel for mean). In the terms of the forward's kernel (sigmoid_focal_loss.py), with s = +1 where x > 0
and -1 elsewhere, and r = p * (1 - p) / q = e / ((1 + e) * (a + (1 - a) * e)):

    d loss / dx = s * alpha_t * q**gamma * ((a - e / (1 + e)) - gamma * ce * r * (1 - 2a))

(p - y = s * (a - e / (1 + e)), dq/dx = p * (1 - p) * (1 - 2y) and 1 - 2y = -s * (1 - 2a)): r <= 1 for y in
[0, 1], so nothing overflows, and every factor is accurate for every finite logit.
"""

from __future__ import annotations

import numba

from ..halves import load, store
from ..mathf import exp
from ..native import like, select
from ..registry import kernel
from .sigmoid_focal_loss import alpha_t, power, power_bits, terms, whole_gamma

_inline = numba.njit(error_model="numpy")


@_inline
def _bracket(xk, yk, e, gamma):
    """(s * ((a - e / (1 + e)) - gamma * ce * r * (1 - 2a)), q)."""
    zero, one = like(xk, 0), like(xk, 1)
    a, ce, q = terms(xk, yk, e)
    d = one + e
    r = select(a == zero, one / d, e / (d * (a + (one - a) * e)))
    # r is 0 where x is infinite: the focusing term's limit is 0 there, where ce is inf
    focus = select(r == zero, zero, like(xk, gamma) * ce * r * (one - (a + a)))
    bracket = (a - e / d) - focus
    return select(xk > zero, bracket, -bracket), q


@kernel("SigmoidFocalLossGrad", reads=("grad_output", "input", "target", "weight"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def sigmoid_focal_loss_grad(g, x, y, w, _, out, m, scale, params, tmp):
    alpha, gamma = params[0], params[1]
    bits = whole_gamma(gamma)
    for k in range(m):
        tmp[k] = exp(-abs(load(x[k])))
    if bits >= 0:
        for k in range(m):
            xk, yk = load(x[k]), load(y[k])
            bracket, q = _bracket(xk, yk, tmp[k], gamma)
            grad = bracket * power_bits(q, bits) * alpha_t(yk, alpha)
            store(out, k, grad * (load(g[k]) * scale) * load(w[k]))
    else:
        for k in range(m):
            xk, yk = load(x[k]), load(y[k])
            bracket, q = _bracket(xk, yk, tmp[k], gamma)
            grad = bracket * power(q, gamma) * alpha_t(yk, alpha)
            store(out, k, grad * (load(g[k]) * scale) * load(w[k]))
