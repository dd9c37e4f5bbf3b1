"""exp, log and log1p in float32 and float64, written so that LLVM vectorises the loops that call them.

numba has no vector math library since 0.62 (LLVM 20 dropped SVML): `np.exp` in a numba loop is a libm call
per element and the loop stays scalar (measured: 4.7 ns per element for exp alone). These are branch-free:
range reduction, a polynomial, and selects for the special values, all of which become AVX2 instructions.
Measured on this machine's Zen 3: exp 0.5-0.7 and log1p-on-[0, 1] 0.35 ns per float32 element on one core.

Methods (textbook ones, e.g. Muller, "Elementary Functions", ch. 11):
- exp(x) = 2**k * exp(r), k = round(x / ln2), r = x - k*ln2 in two parts (Cody and Waite) so that
  |r| <= ln2/2 exactly; exp(r) by its Taylor polynomial, which at that |r| is already below the last bit
  (degree 7 for float32: 5e-9; degree 13 for float64: 4e-18); 2**k as two factors so that k down to
  the subnormal range and up to overflow stays representable.
- log(x) = e*ln2 + log(m), m in [sqrt(1/2), sqrt(2)). float64: log(m) = 2*atanh(s), s = (m-1)/(m+1),
  |s| <= 0.1716, by the series 2s + 2s*z*(1/3 + z/5 + ...), z = s^2, to below the last bit (10 terms after
  2s): the correction is under 1 % of 2s, so its roundings hardly count and one fused multiply-add adds it.
  float32: with r = m - 1 (exact), log(m) = r + (r^3*Q(r) - r^2/2), Q of degree 8 fitted to
  (log1p(r) - r + r^2/2)/r^3 on Chebyshev nodes (the fit's error is 4e-9 of the result): no division, whose
  vector form occupies the same two ports as every other 512-bit operation, and the error below 1 ulp.
- log1p(u) with v = 1 + u and c = u - (v - 1), the part of u that rounding 1 + u lost: float64 as
  log(v) + c/v; float32 as e*ln2 + log(1 + r) with v = m*2**e as in log and r = (m - 1) + c/2**e, so that
  neither divides (r is u itself when e = 0).
- log1p of e in [0, 1] (softplus' log1p(exp(-|x|))): in float32, e * P(e) with P of degree 9 fitted to
  log1p(e)/e on Chebyshev nodes (near-minimax, 5e-9 relative before rounding): no division, and full relative
  accuracy for tiny e. Against the atanh form below (which float64 keeps) it measured 0.35 against 0.56 ns per
  element, and BCE-with-logits' float32 loop 1.16-1.28x faster. The atanh form: the same series on
  s = e/(2+e), or on s = (e-1)/(e+3) plus ln2 when e > sqrt(2)-1, so that |s| <= 0.1716.
Error bounds are tested over the whole float32 range and across the float64 range (tests/test_mathf.py).
"""

from __future__ import annotations

from decimal import Decimal, getcontext

import numba
import numpy as np
from numba import types
from numba.extending import overload

from .native import bits32, bits64, float32_of, float64_of, fmuladd, like, product_error32, select, small_int_to

getcontext().prec = 50
_LN2 = Decimal(2).ln()


def _split(value: Decimal, bits: int) -> tuple[float, float]:
    """value = hi + lo with hi holding `bits` significant bits, so that k*hi is exact for |k| < 2**(53-bits)."""
    mantissa, exponent = np.frexp(float(value))
    hi = float(np.ldexp(np.floor(mantissa * 2.0**bits) / 2.0**bits, exponent))
    return hi, float(value - Decimal(hi))


_LN2_HI_32, _LN2_LO_32 = (np.float32(v) for v in _split(_LN2, 16))  # k*hi exact for |k| < 2**8 in float32
_LN2_HI_64, _LN2_LO_64 = _split(_LN2, 32)
LN2_64 = float(_LN2)
_LOG2E_32, _LOG2E_64 = np.float32(float(1 / _LN2)), float(1 / _LN2)
_SQRT2_32, _SQRT2_64 = np.float32(np.sqrt(2.0)), float(np.sqrt(2.0))
_SQRT2_M1_64 = float(np.sqrt(2.0) - 1)

# Taylor coefficients 1/j! of exp, and 1/(2j+1) (from j = 1) of (atanh(s)/s - 1)/s^2 in s^2 (float64's log)
_EXP_32 = tuple(np.float32(1 / np.prod(np.arange(1, j + 1, dtype=np.float64))) for j in range(8))
_EXP_64 = tuple(float(1 / np.prod(np.arange(1, j + 1, dtype=np.float64))) for j in range(14))
_ATANH_64 = tuple(1 / (2 * j + 1) for j in range(1, 12))


def _chebyshev_fit(f, lo: float, hi: float, degree: int) -> tuple[np.float32, ...]:
    """float32 monomial coefficients of the least-squares fit of f on 4000 Chebyshev nodes of [lo, hi]: close
    to the minimax polynomial, and reproducible (no iteration)."""
    t = np.cos(np.linspace(0.0, np.pi, 4000))
    x = lo + (t + 1) * (hi - lo) / 2
    fit = np.polynomial.Chebyshev.fit(x, f(x), degree, domain=[lo, hi])
    return tuple(np.float32(c) for c in fit.convert(kind=np.polynomial.Polynomial).coef)  # in x itself


def _log1p_cubic_term(r: np.ndarray) -> np.ndarray:
    """(log1p(r) - r + r^2/2) / r^3 for |r| < 1/2, summed as its series (no cancellation near r = 0)."""
    n = np.arange(3, 64)
    return ((-1.0) ** (n + 1) / n * r[:, None] ** (n - 3)).sum(axis=1)


_LOG_M_32 = _chebyshev_fit(_log1p_cubic_term, float(_SQRT2_32) / 2 - 1, float(_SQRT2_32) - 1, 8)

# log1p(e)/e on [0, 1] (1 at e = 0)
_LOG1P_OVER_E_32 = _chebyshev_fit(lambda e: np.log1p(e) / np.where(e == 0, 1.0, e) + (e == 0), 0.0, 1.0, 9)

_inline = numba.njit(error_model="numpy")  # LLVM inlines these into the loops


# --- polynomials (Estrin's scheme: shorter dependency chains than Horner's, so faster) ---------------

@_inline
def _poly8(r, c):
    r2 = r * r
    r4 = r2 * r2
    lo = fmuladd(fmuladd(c[3], r, c[2]), r2, fmuladd(c[1], r, c[0]))
    hi = fmuladd(fmuladd(c[7], r, c[6]), r2, fmuladd(c[5], r, c[4]))
    return fmuladd(hi, r4, lo)


@_inline
def _poly9(r, c):
    r2 = r * r
    r4 = r2 * r2
    lo = fmuladd(fmuladd(c[3], r, c[2]), r2, fmuladd(c[1], r, c[0]))
    hi = fmuladd(fmuladd(c[7], r, c[6]), r2, fmuladd(c[5], r, c[4]))
    return fmuladd(fmuladd(c[8], r4, hi), r4, lo)


@_inline
def _poly14(r, c):
    r2 = r * r
    r4 = r2 * r2
    r8 = r4 * r4
    a = fmuladd(fmuladd(c[3], r, c[2]), r2, fmuladd(c[1], r, c[0]))
    b = fmuladd(fmuladd(c[7], r, c[6]), r2, fmuladd(c[5], r, c[4]))
    c8 = fmuladd(fmuladd(c[11], r, c[10]), r2, fmuladd(c[9], r, c[8]))
    d = fmuladd(c[13], r, c[12])
    return fmuladd(fmuladd(d, r4, c8), r8, fmuladd(b, r4, a))


@_inline
def _two_atanh64(s):
    """2*atanh(s) = 2s + 2s*z*poly(z), z = s^2, the small correction added by one fused multiply-add."""
    two_s = s + s
    z = s * s
    return fmuladd(two_s * z, _poly11(z, _ATANH_64), two_s)


@_inline
def _poly11(z, c):
    z2 = z * z
    z4 = z2 * z2
    z8 = z4 * z4
    a = fmuladd(fmuladd(c[3], z, c[2]), z2, fmuladd(c[1], z, c[0]))
    b = fmuladd(fmuladd(c[7], z, c[6]), z2, fmuladd(c[5], z, c[4]))
    d = fmuladd(fmuladd(c[10], z, c[9]), z, c[8])
    return fmuladd(d, z8, fmuladd(b, z4, a))


# --- exp --------------------------------------------------------------------------------------------------

@_inline
def _exp32(x):
    # below -104 the result is 0, selected rather than computed: a product that underflows to 0 costs an x86
    # microcode assist (about a hundred cycles), and log-domain recursions take exp(-inf) at most of their states
    under = x < np.float32(-104.0)
    xc = select(under, np.float32(0.0), min(x, np.float32(89.0)))  # beyond 89: inf, from the scaling below
    k = np.floor(fmuladd(xc, _LOG2E_32, np.float32(0.5)))
    r = fmuladd(k, -_LN2_LO_32, fmuladd(k, -_LN2_HI_32, xc))
    p = _poly8(r, _EXP_32)
    ki = np.int32(k)  # int32, not int64: AVX2 has no vector conversion of floats to int64
    half = ki >> 1
    y = p * float32_of((half + 127) << 23) * float32_of((ki - half + 127) << 23)
    return select(under, np.float32(0.0), select(x == x, y, x))


@_inline
def _exp64(x):
    under = x < -746.0  # 0, selected (as in _exp32)
    xc = select(under, 0.0, min(x, 710.0))
    k = np.floor(fmuladd(xc, _LOG2E_64, 0.5))
    r = fmuladd(k, -_LN2_LO_64, fmuladd(k, -_LN2_HI_64, xc))
    p = _poly14(r, _EXP_64)
    ki = np.int32(k)
    half = ki >> 1
    y = p * float64_of((half + 1023) << 52) * float64_of((ki - half + 1023) << 52)
    return select(under, 0.0, select(x == x, y, x))


# --- log, log1p --------------------------------------------------------------------------------------------

@_inline
def _log32(x):
    return _log32_of(x, True)


@_inline
def _log32_normal(x):
    return _log32_of(x, False)


@_inline
def _log32_of(x, subnormals):
    tiny = x < np.float32(1.1754944e-38)  # subnormal (or 0, negative): scale into the normal range first
    if not subnormals:  # a constant where this is inlined: the scaling folds away
        tiny = False
    e, m, _ = _exponent_mantissa32(select(tiny, x * np.float32(8388608.0), x))
    e = e - select(tiny, np.int64(23), np.int64(0))
    y = _log32_reduced(small_int_to(e, m), m - np.float32(1.0))
    y = select(x == 0, np.float32(-np.inf), y)
    y = select(x < 0, np.float32(np.nan), y)
    return select((x != x) | (x == np.inf), x, y)


@_inline
def _exponent_mantissa32(x):
    """x = m * 2**e for a positive normal x, m in [sqrt(1/2), sqrt(2)); also 2**-e (0 for x >= 2**127)."""
    b = bits32(x)
    m = float32_of((b & 0x7FFFFF) | 0x3F800000)  # [1, 2)
    big = m > _SQRT2_32
    half = select(big, np.float32(0.5), np.float32(1.0))
    # 32-bit integer operations only: LLVM keeps int64 ones (numba's type) at half the vector width
    inverse = float32_of(0x7F000000 - (b & 0x7F800000)) * half
    return ((b >> 23) & 0xFF) - 127 + select(big, np.int64(1), np.int64(0)), m * half, inverse


@_inline
def _log32_reduced(ef, r):
    """ef*ln2 + log1p(r) for r in [sqrt(1/2) - 1, sqrt(2) - 1]."""
    r2 = r * r
    log_m = r + fmuladd(r2 * r, _poly9(r, _LOG_M_32), np.float32(-0.5) * r2)
    return fmuladd(ef, _LN2_HI_32, fmuladd(ef, _LN2_LO_32, log_m))


@_inline
def _log1p32(u):
    v = u + np.float32(1.0)  # never subnormal for u >= -1
    c = u - (v - np.float32(1.0))  # what rounding 1 + u lost: exact up to u = 2**24, beyond that it hardly counts
    e, m, inverse = _exponent_mantissa32(v)
    # log1p(u) = e*ln2 + log(m + c/2**e), and m + c/2**e is 1 + r with r = (m - 1) + c/2**e (r = u when e = 0)
    r = (m - np.float32(1.0)) + c * inverse
    # below 2**-24 log1p(u) is u to the last bit; r**3 would fall into the subnormals (slow on x86)
    tiny = abs(u) < np.float32(2.0**-24)
    y = _log32_reduced(small_int_to(e, m), select(tiny, np.float32(0.0), r))
    y = select(tiny, u, y)
    y = select(v == 0, np.float32(-np.inf), y)
    y = select(u < np.float32(-1.0), np.float32(np.nan), y)
    return select((u != u) | (u == np.inf), u, y)


@_inline
def _log64(x):
    tiny = x < 2.2250738585072014e-308
    xs = select(tiny, x * 4503599627370496.0, x)
    b = bits64(xs)
    e = ((b >> 52) & 0x7FF) - 1023 - select(tiny, np.int64(52), np.int64(0))
    m = float64_of((b & 0xFFFFFFFFFFFFF) | 0x3FF0000000000000)
    big = m > _SQRT2_64
    m = select(big, m * 0.5, m)
    ef = small_int_to(e + select(big, np.int64(1), np.int64(0)), m)
    log_m = _two_atanh64((m - 1.0) / (m + 1.0))
    y = fmuladd(ef, _LN2_HI_64, fmuladd(ef, _LN2_LO_64, log_m))
    y = select(x == 0, -np.inf, y)
    y = select(x < 0, np.nan, y)
    return select((x != x) | (x == np.inf), x, y)


@_inline
def _log1p_unit32(e):
    """log1p(e) for e in [0, 1] (NaN passes through)."""
    c = _LOG1P_OVER_E_32
    # below 2**-24 log1p(e) is e to the last bit; the polynomial would take e**4 into the subnormals there
    # (below 2**-126 from e = 6e-10, a logit of 21.2), which x86 computes about a hundred times slower
    tiny = e < np.float32(2.0**-24)
    z = select(tiny, np.float32(0), e)
    z2 = z * z
    z4 = z2 * z2
    lo = fmuladd(fmuladd(c[3], z, c[2]), z2, fmuladd(c[1], z, c[0]))
    mid = fmuladd(fmuladd(c[7], z, c[6]), z2, fmuladd(c[5], z, c[4]))
    hi = fmuladd(c[9], z, c[8])
    return select(tiny, e, z * fmuladd(fmuladd(hi, z4, mid), z4, lo))


@_inline
def _log1p_unit64(e):
    upper = e > _SQRT2_M1_64
    s = (e - select(upper, 1.0, 0.0)) / (e + select(upper, 3.0, 2.0))
    return _two_atanh64(s) + select(upper, LN2_64, 0.0)


def _by_precision(f32, f64):
    def select(x):
        if x == types.float32:
            return lambda x: f32(x)
        if x == types.float64:
            return lambda x: f64(x)
        return None

    return select


def exp(x):
    """e**x; 0 below the subnormal range, inf beyond the largest float, NaN for NaN."""


def log(x):
    """Natural log; -inf at 0, NaN below 0, inf at inf."""


def log_normal(x):
    """log(x) for an x that is never subnormal (float16's values in float32): without the scaling subnormals need."""


def log1p_unit(e):
    """log(1 + e) for 0 <= e <= 1."""


overload(exp)(_by_precision(_exp32, _exp64))
overload(log)(_by_precision(_log32, _log64))
overload(log_normal)(_by_precision(_log32_normal, _log64))
overload(log1p_unit)(_by_precision(_log1p_unit32, _log1p_unit64))


@_inline
def _log1p64(u):
    v = u + 1.0
    y = _log64(v) - ((v - 1.0) - u) / v
    y = select(v == 0.0, -np.inf, y)
    return select((v == 1.0) | (u == np.inf), u, y)


def log1p(u):
    """log(1 + u) for u >= -1, accurate for small u."""


overload(log1p)(_by_precision(_log1p32, _log1p64))


@_inline
def _product_error32(a, b, p):
    err = product_error32(a, b, p)
    return select(abs(err) < abs(p), err, like(p, 0))  # 0 where p overflowed, is 0 or NaN


@_inline
def _product_error64(a, b, p):
    return like(p, 0)


def product_error(a, b, p):
    """a * b - p for p = a * b: its rounding error in float32 (0 where p is not finite or 0); 0 in float64, where
    PyTorch's float64 rounds the product too (a loss of the product that is ill-conditioned in it, such as
    exp(-|a * b|), is then accurate to the last bits against PyTorch float64 of float32 inputs)."""


@overload(product_error, inline="always")
def _product_error(a, b, p):
    if p == types.float32:
        return lambda a, b, p: _product_error32(a, b, p)
    if p == types.float64:
        return lambda a, b, p: _product_error64(a, b, p)
    return None
