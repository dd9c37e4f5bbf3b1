"""Kernel of SigmoidFocalLoss: w * alpha_t * q**gamma * ce per element, q = 1 - p_t (the engine reduces it).

With e = exp(-|x|) and `a` the coefficient of |x| in the logits loss (1 - y where x > 0, y elsewhere):

    ce = a * |x| + log1p(e)             (BCE with logits: nothing cancels, finite for every finite x)
    q  = (a + (1 - a) * e) / (1 + e)    (1 - p_t: both terms >= 0 for y in [0, 1], no cancellation)

so q is accurate to a few ulps wherever it is representable. q**gamma is q's products for a whole gamma up to
15 (the usual 2 among them), else pow: float32 computes it as exp(gamma * log q) in float64, float64 calls libm's
pow (a correctly rounded log inside; exp(gamma * log q) in float64 would lose |gamma * log q| ulps).
"""

from __future__ import annotations

import math

import numba
import numpy as np
from numba import types
from numba.extending import overload

from ..halves import load, store
from ..mathf import exp, log, log1p_unit
from ..native import fmuladd, like, select
from ..registry import kernel

_inline = numba.njit(error_model="numpy")  # LLVM inlines these into the loops


@_inline
def whole_gamma(gamma):
    """Whether q**gamma is taken as products (gamma a whole number up to 15): its bits, else -1."""
    return int(gamma) if gamma == math.floor(gamma) and 0 <= gamma <= 15 else -1


@_inline
def power_bits(q, bits):
    """q**bits for 0 <= bits <= 15, by squaring: the bits are the same for every element, so the selects are
    uniform and the loop stays vectorised; q**2 is one rounding."""
    one = like(q, 1)
    q2 = q * q
    q4 = q2 * q2
    q8 = q4 * q4
    low = select((bits & 1) != 0, q, one) * select((bits & 2) != 0, q2, one)
    return low * select((bits & 4) != 0, q4, one) * select((bits & 8) != 0, q8, one)


def power(q, gamma):
    """q**gamma for a float64 gamma > 0 that `whole_gamma` refuses, as pow takes it: for a negative q (a target
    outside [0, 1]) a real number where gamma is whole, NaN where it is fractional."""


@overload(power)
def _power(q, gamma):
    if q == types.float32:  # in float64: exp(gamma * log |q|) then loses nothing a float32 holds
        def in_float64(q, gamma):
            magnitude = exp(gamma * log(abs(np.float64(q))))
            whole = gamma == math.floor(gamma)
            odd = whole and gamma - 2.0 * math.floor(0.5 * gamma) != 0  # the same for every element
            signed = select(odd, -magnitude, magnitude)
            return np.float32(select(q < 0, select(whole, signed, np.nan), magnitude))
        return in_float64
    if q == types.float64:
        return lambda q, gamma: q ** gamma
    return None


@_inline
def terms(xk, yk, e):
    """(a, ce, q) of the module's formula for a logit, its target and e = exp(-|x|)."""
    zero, one = like(xk, 0), like(xk, 1)
    a = select(xk > zero, one - yk, yk)
    # a zero coefficient makes its term 0 also at x = +-inf (the loss's limit; the decomposition's unless_zero)
    ce = select(a == zero, zero, a * abs(xk)) + log1p_unit(e)
    q = fmuladd(one - a, e, a) / (one + e)
    return a, ce, q


@_inline
def alpha_t(yk, alpha):
    """alpha * y + (1 - alpha) * (1 - y), or 1 where alpha < 0 (torchvision's alpha = -1: no balancing)."""
    al = like(yk, alpha)
    one = like(yk, 1)
    return select(alpha < 0, one, fmuladd(al, yk, (one - al) * (one - yk)))


@_inline
def focal(ce, q_gamma, balance):
    """ce * q**gamma * alpha_t, with the loss's limits where the logit is infinite (ce = inf, a > 0): 0 where
    alpha_t is 0 (the loss is 0 at every logit), else inf, also where q**gamma underflowed to 0."""
    zero, inf = like(ce, 0), like(ce, np.inf)
    return select(balance == zero, zero, select(ce == inf, inf, ce * q_gamma * balance))


@_inline
def _store(out, k, loss, wk):
    zero = like(wk, 0)
    store(out, k, select(wk == zero, zero, loss * wk))  # a zero weight gives 0, also where the loss is inf


@kernel("SigmoidFocalLoss", reads=("input", "target", "weight"), task_elements=1 << 14)
@numba.njit(error_model="numpy", nogil=True)
def sigmoid_focal_loss(x, y, w, _a, _b, out, m, scale, params, tmp):
    alpha, gamma = params[0], params[1]
    bits = whole_gamma(gamma)
    for k in range(m):
        tmp[k] = exp(-abs(load(x[k])))
    if bits >= 0:
        for k in range(m):
            xk, yk = load(x[k]), load(y[k])
            _, ce, q = terms(xk, yk, tmp[k])
            _store(out, k, focal(ce, power_bits(q, bits), alpha_t(yk, alpha)), load(w[k]))
    else:
        for k in range(m):
            xk, yk = load(x[k]), load(y[k])
            _, ce, q = terms(xk, yk, tmp[k])
            _store(out, k, focal(ce, power(q, gamma), alpha_t(yk, alpha)), load(w[k]))
