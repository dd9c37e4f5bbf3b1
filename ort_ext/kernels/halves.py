"""float16 and bfloat16 in the compiled loops: numba has neither type, so they are stored as uint16 (float16)
and int16 (bfloat16) and converted on the bits, one element at a time inside the loops.

`load(v)` widens a stored element to its compute type (float32 for both; float32/float64 stay as they are);
`store(out, k, v)` rounds a compute-type value into the storage (nearest even, bit-exact with numpy's and
ml_dtypes' casts); `store_rounded(out, k, x)` rounds a float64 (a reduced total) into the storage once;
`widened(v)` and `holds_float16(v)` say what an array's storage makes exact in its compute type.
With F16C (x86-64) or on aarch64, float16 uses LLVM's own half conversions (one vcvtph2ps/vcvtps2ph per
vector: 0.19 against 0.64 ns per element for the bit version, measured); without F16C, LLVM would call
compiler-rt functions that numba does not link, so the bit versions below are used.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic, overload

from .native import bits32, float32_of, has_feature, machine_flag, select
from .targets import ARCH


@numba.njit
def half_to_float(h):
    """float16 bits -> float32, exact: the exponent is rebased by one multiply by 2**112, which also turns
    subnormal halves into normal floats; inputs that were inf/NaN land at >= 2**16 and get exponent 255."""
    h = np.int64(h)
    f = float32_of((h & 0x7FFF) << 13) * np.float32(2.0**112)
    b = select(f >= np.float32(65536.0), bits32(f) | 0x7F800000, bits32(f))
    return float32_of(b | ((h & 0x8000) << 16))


@numba.njit
def float_to_half(f):
    """float32 -> float16 bits, rounding to nearest even (bit-exact with numpy's cast; F. Giesen's method).
    Branch-free (selects), so that the loops around it vectorise."""
    b = bits32(f)
    sign = b & 0x80000000
    m = b ^ sign
    normal = (m - 0x37FFF001 + ((m >> 13) & 1)) >> 13  # rebias by -112 << 23, add just under half an ulp (+1 if odd)
    subnormal = bits32(float32_of(m) + np.float32(0.5)) - 0x3F000000  # the FPU rounds to a multiple of 2**-24
    special = select(m > 0x7F800000, np.int64(0x7E00), np.int64(0x7C00))  # NaN, else inf (65520 and up)
    h = select(m < 0x38800000, subnormal, normal)
    h = select(m >= 0x47800000, special, h)
    return np.uint16(h | (sign >> 16))


@intrinsic
def float_to_bfloat(typingctx, f):
    """float32 -> bfloat16 bits, rounding to nearest even; NaN stays a quiet NaN. Written in 32-bit integer
    IR: numba's own integer arithmetic is 64-bit, which vectorised at a quarter of the width (measured: 0.9
    against 0.3 ns per element for float16 in BCE backward)."""
    if f != types.float32:
        return None

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        b = builder.bitcast(args[0], i32)
        upper = builder.lshr(b, ir.Constant(i32, 16))
        odd = builder.and_(upper, ir.Constant(i32, 1))
        rounded = builder.lshr(builder.add(builder.add(b, ir.Constant(i32, 0x7FFF)), odd), ir.Constant(i32, 16))
        is_nan = builder.icmp_unsigned(">", builder.and_(b, ir.Constant(i32, 0x7FFFFFFF)), ir.Constant(i32, 0x7F800000))
        quiet = builder.or_(upper, ir.Constant(i32, 0x40))
        return builder.trunc(builder.select(is_nan, quiet, rounded), ir.IntType(16))

    return types.int16(f), codegen


@intrinsic
def _bfloat_to_float(typingctx, b):
    """bfloat16 bits -> float32: the bits are the float's upper half (32-bit integer IR, as above)."""
    if b != types.int16:
        return None

    def codegen(context, builder, sig, args):
        i32 = ir.IntType(32)
        wide = builder.shl(builder.zext(args[0], i32), ir.Constant(i32, 16))
        return builder.bitcast(wide, ir.FloatType())

    return types.float32(b), codegen


def hardware_half(arch: str, features: str | None) -> bool:
    """Whether float16 uses LLVM's half conversions when numba compiles for `arch` with `features`
    (native.has_feature)."""
    return has_feature(arch, features, "f16c")


HARDWARE_HALF_FLAG = "lossops_hardware_half"
# Both conversions go into the IR, chosen by a machine flag (native.machine_flag) that LLVM's first passes fold
HARDWARE_HALF = hardware_half(ARCH, numba.config.CPU_FEATURES)  # NUMBA_CPU_FEATURES where set


@intrinsic
def _to_float(typingctx, h):
    """float16 bits -> float32: LLVM's half extension (one vcvtph2ps per vector with F16C; NaN payloads come out
    quieted) or `half_to_float`."""
    if h != types.uint16:
        return None

    def codegen(context, builder, sig, args):
        hardware = builder.fpext(builder.bitcast(args[0], ir.HalfType()), ir.FloatType())
        software = context.compile_internal(builder, half_to_float.py_func, sig, args)
        return builder.select(machine_flag(builder, HARDWARE_HALF_FLAG, HARDWARE_HALF), hardware, software)

    return types.float32(h), codegen


@intrinsic
def _to_half(typingctx, f):
    """float32 -> float16 bits, nearest even (like numpy's cast): LLVM's rounding or `float_to_half`."""
    if f != types.float32:
        return None

    def codegen(context, builder, sig, args):
        hardware = builder.bitcast(builder.fptrunc(args[0], ir.HalfType()), ir.IntType(16))
        software = context.compile_internal(builder, float_to_half.py_func, sig, args)
        return builder.select(machine_flag(builder, HARDWARE_HALF_FLAG, HARDWARE_HALF), hardware, software)

    return types.uint16(f), codegen


def load(v):
    """A stored element in its compute type."""


@overload(load)
def _load(v):
    if v == types.uint16:
        return lambda v: _to_float(v)
    if v == types.int16:
        return lambda v: _bfloat_to_float(v)
    return lambda v: v


def widened(v):
    """Whether array v's elements compute in a wider type than they are stored in (float16 and bfloat16 in
    float32): a product of two of them then has at most 22 significant bits, exact in float32 unless it
    over- or underflows (bfloat16 has float32's range)."""


@overload(widened, inline="always")
def _widened(v):
    narrow = isinstance(v, types.Array) and v.dtype in (types.uint16, types.int16)
    return lambda v: narrow


def holds_float16(v):
    """Whether array v stores float16, whose values are multiples of 2**-24 (in float32: none is subnormal, and
    1 - x is exact for x in [0, 1], float32's spacing just below 1 being 2**-24); bfloat16 has neither."""


@overload(holds_float16, inline="always")
def _holds_float16(v):
    half = isinstance(v, types.Array) and v.dtype == types.uint16
    return lambda v: half


def store(out, k, v):
    """out[k] = v (a compute-type value) rounded to out's storage."""


@overload(store)
def _store(out, k, v):
    if out.dtype == types.uint16:
        def half(out, k, v):
            out[k] = _to_half(v)
        return half
    if out.dtype == types.int16:
        def bfloat(out, k, v):
            out[k] = float_to_bfloat(v)
        return bfloat

    def same(out, k, v):
        out[k] = v
    return same


@numba.njit
def _to_odd_float32(x):
    """x (float64) -> float32 rounding to odd: truncate, then set the last bit if anything was cut off. A
    second rounding to a narrower type is then correct (Boldo and Melquiond, "When double rounding is odd")."""
    f = np.float32(x)
    if abs(np.float64(f)) > abs(x):  # rounded away from zero: step back one float32 toward zero
        f = float32_of(bits32(f) - 1)
    if np.float64(f) != x and x == x and abs(x) != np.inf:
        f = float32_of(bits32(f) | 1)
    return f


def store_rounded(out, k, x):
    """out[k] = x (a float64) rounded once to out's storage type."""


@overload(store_rounded)
def _store_rounded(out, k, x):
    if out.dtype in (types.uint16, types.int16):
        return lambda out, k, x: store(out, k, _to_odd_float32(x))
    if out.dtype == types.float32:
        def to_float32(out, k, x):
            out[k] = np.float32(x)
        return to_float32

    def same(out, k, x):
        out[k] = x
    return same


