"""Tolerances per dtype, and the one comparison every numerical test uses.

A backend computes float16/bfloat16 in float32 and float32 in float32, then rounds once to T, so its error
against the float64 oracle is at most half an ulp of T from the final rounding plus a few float32 ulps of
compute error (exp/log1p and division are within 1-2 ulps in numpy and in ONNX Runtime). Hence:

- float64: 16 ulps = 2**-48 ≈ 3.6e-15 relative (exp/log1p/div are within 1-2 ulps; the rest is room for the
  decomposition's log1p identity and for float64 reductions);
- float32: 8 ulps = 2**-20 ≈ 9.5e-7 relative;
- float16: 1 ulp = 2**-10 relative (half an ulp of rounding plus the float32 error, far below an ulp);
- bfloat16: 1 ulp = 2**-7 relative.

Outputs that sum n terms (reductions, KL's sum over broadcast axes) carry the summation's rounding too:
their bound is relative to the largest magnitude in the output (terms of either sign may cancel) and adds
`sum_allowance`: float16, bfloat16 and float32 terms are summed in float64 by every lossops path, so 2·log2(n)
units of the compute type's roundoff are room to spare (a pairwise sum's bound is log2(n)·u). float64 terms
have no wider type to be summed in, and a backend may add them in sequence: onnxruntime's float64 ReduceSum
measured 83-98 units of roundoff over 2.6e5-3e5 terms, above the pairwise bound; a sequential sum's realistic
bound is sqrt(n)·u (Higham, Accuracy and Stability of Numerical Algorithms, 4.2), the allowance there.
An absolute floor of the dtype's smallest subnormal covers results that round into the subnormal range.
Infinities and NaNs must match exactly (after rounding the oracle to T, so an overflow to inf in float16
is expected, not excused).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import helper

from ..opset.spec import DTYPE_NAMES
from . import ops

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {name: np.dtype(helper.tensor_dtype_to_np_dtype(elem)) for name, elem in DTYPE_NAMES.items()}
RTOL = {"float64": 2.0**-48, "float32": 2.0**-20, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def bounds(dtype_name: str, summed: int, expected: np.ndarray) -> tuple[float, float]:
    """(rtol, atol) in numpy.testing.assert_allclose terms, for runners that take those (onnx's Runner)."""
    rtol = RTOL[dtype_name] + sum_allowance(dtype_name, summed)
    finite = np.abs(expected[np.isfinite(expected)].astype(np.float64))
    atol = smallest_subnormal(DTYPES[dtype_name])
    if summed > 1 and finite.size:
        atol += rtol * float(finite.max())
    return float(rtol), float(atol)


def sum_allowance(dtype_name: str, summed: int) -> float:
    """The relative error allowed for summing `summed` terms, beyond the dtype's own (see the module's doc)."""
    if summed <= 1:
        return 0.0
    if dtype_name == "float64":
        return float(max(2 * np.log2(summed), np.sqrt(summed))) * 2.0**-53
    return float(2 * np.log2(summed)) * 2.0**-24


def smallest_subnormal(dtype: np.dtype) -> float:
    return float(ml_dtypes.finfo(dtype).smallest_subnormal)


def ulp(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Size of one unit in the last place of `value` (float64) in `dtype` (infinite where `value` is)."""
    finfo = ml_dtypes.finfo(dtype)
    v = np.maximum(np.abs(np.asarray(value, np.float64)), float(finfo.smallest_normal))
    power = (v.view(np.int64) & 0x7FF0000000000000).view(np.float64)  # 2**floor(log2(v)): v's exponent bits alone
    return power * 2.0**-finfo.nmant


def compare(got: np.ndarray, ref: np.ndarray, dtype_name: str, summed: int = 0,
            oracle_error: np.ndarray | float = 0.0, output_dtype: np.dtype | None = None,
            magnitude: np.ndarray | float = 0.0) -> tuple[bool, float, str]:
    """(ok, error in ulps of T, message). `ref` is the oracle's value (float64, or already rounded to T);
    `oracle_error` widens the bound by the oracle's own error; `output_dtype` is the graph output's type
    when it differs from the precision `dtype_name` the lossops nodes computed at (graphs with Casts);
    `magnitude` is the size of the terms that cancel in the formula (`term_magnitude`), to which the
    relative bound applies where it exceeds the result."""
    dtype = DTYPES[dtype_name]
    got = np.asarray(got)
    if got.dtype != (output_dtype or dtype):
        return False, np.inf, f"dtype {got.dtype}, expected {output_dtype or dtype}"
    if got.shape != ref.shape:
        return False, np.inf, f"shape {got.shape}, expected {ref.shape}"
    g = got.astype(np.float64)
    with np.errstate(over="ignore"):  # the oracle rounded to T: where inf/NaN are expected
        rounded = ref.astype(dtype).astype(np.float64)
    special = ~np.isfinite(rounded)
    if not np.array_equal(g[special], rounded[special], equal_nan=True) or not np.all(np.isfinite(g[~special])):
        return False, np.inf, f"non-finite mismatch: got {g[special | ~np.isfinite(g)]}, expected {rounded[special]}"
    # the finite elements, flat (a selection copies: most outputs have no special values, so it is skipped)
    finite = slice(None) if not special.any() else ~special.ravel()
    oracle_error, magnitude = (x if np.ndim(x) == 0 else np.broadcast_to(x, ref.shape).reshape(-1)[finite]
                               for x in (oracle_error, magnitude))
    g, r = g.reshape(-1)[finite], ref.astype(np.float64, copy=False).reshape(-1)[finite]
    if g.size == 0:
        return True, 0.0, ""
    rtol = RTOL[dtype_name] + sum_allowance(dtype_name, summed)
    scale = np.maximum(np.abs(r), magnitude)
    if summed > 1:
        scale = np.maximum(scale, np.abs(r).max())
    bound = rtol * scale + smallest_subnormal(dtype) + oracle_error
    err = np.abs(g - r)
    # in ulps of the quantity the bound is relative to (the result, or the terms where they cancel)
    ulps = float((np.maximum(err - oracle_error, 0) / ulp(scale, dtype)).max())
    worst = int(np.argmax(err - bound))
    ok = bool(np.all(err <= bound))
    if ok:
        return True, ulps, ""
    return False, ulps, f"|{g[worst]} - {r[worst]}| = {err[worst]:.3g} > {bound[worst]:.3g} ({ulps:.2f} ulps)"


def oracle_error(op: str, inputs: list, attrs: dict) -> np.ndarray | float:
    """An absolute bound on the oracle's own rounding error, where PyTorch's formula cancels or amplifies it:
    the operator's `oracle_error` (conformance/ops/), 0 where it has none."""
    allowance = getattr(ops.module(op), "oracle_error", None)
    return 0.0 if allowance is None else allowance(inputs, attrs)


def term_magnitude(op: str, inputs: list, attrs: dict) -> np.ndarray | float:
    """The size of the terms whose difference the output is, where the operator's formula cancels (float64): a
    result much smaller than its terms carries the compute type's rounding of the terms, for every backend and
    for PyTorch alike, so the relative bound applies to the terms' size there. The operator's
    `term_magnitude` (conformance/ops/), 0 where it has none."""
    magnitude = getattr(ops.module(op), "term_magnitude", None)
    return 0.0 if magnitude is None else magnitude(inputs, attrs)
