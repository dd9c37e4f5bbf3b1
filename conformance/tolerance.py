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
2·log2(n) units of roundoff of the compute type (a pairwise sum's error is at most log2(n)·u of the sum of
magnitudes; onnxruntime's float32 ReduceSum measured 20 ulps over 3e5 terms, inside this bound).
An absolute floor of the dtype's smallest subnormal covers results that round into the subnormal range.
Infinities and NaNs must match exactly (after rounding the oracle to T, so an overflow to inf in float16
is expected, not excused).
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
from onnx import helper

from ..opset.spec import DTYPE_NAMES

BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = {name: np.dtype(helper.tensor_dtype_to_np_dtype(elem)) for name, elem in DTYPE_NAMES.items()}
RTOL = {"float64": 2.0**-48, "float32": 2.0**-20, "float16": 2.0**-10, "bfloat16": 2.0**-7}


def bounds(dtype_name: str, summed: int, expected: np.ndarray) -> tuple[float, float]:
    """(rtol, atol) in numpy.testing.assert_allclose terms, for runners that take those (onnx's Runner)."""
    rtol = RTOL[dtype_name]
    if summed > 1:
        rtol += 2 * np.log2(summed) * (2.0**-53 if dtype_name == "float64" else 2.0**-24)
    finite = np.abs(expected[np.isfinite(expected)].astype(np.float64))
    atol = smallest_subnormal(DTYPES[dtype_name])
    if summed > 1 and finite.size:
        atol += rtol * float(finite.max())
    return float(rtol), float(atol)


def smallest_subnormal(dtype: np.dtype) -> float:
    return float(ml_dtypes.finfo(dtype).smallest_subnormal)


def ulp(value: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Size of one unit in the last place of `value` (float64) in `dtype`."""
    v = np.abs(value.astype(np.float64))
    exponent = np.floor(np.log2(np.maximum(v, float(ml_dtypes.finfo(dtype).smallest_normal))))
    return np.exp2(exponent - ml_dtypes.finfo(dtype).nmant)


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
    oracle_error = np.broadcast_to(oracle_error, ref.shape)[~special]
    magnitude = np.broadcast_to(magnitude, ref.shape)[~special]
    g, r = g[~special], ref[~special].astype(np.float64)
    if g.size == 0:
        return True, 0.0, ""
    rtol = RTOL[dtype_name]
    scale = np.maximum(np.abs(r), magnitude)
    if summed > 1:
        unit_roundoff = 2.0**-53 if dtype == np.float64 else 2.0**-24
        rtol += 2 * np.log2(summed) * unit_roundoff
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
    """An absolute bound on the oracle's own rounding error, where PyTorch's formula cancels.

    PyTorch computes BCE-with-logits as `(1 - y) * x + (1 + (p - 1) * y) * softplus(-x)`: for x << 0 and
    y = 0 the two terms are about |x| each and cancel, so its float64 result is off by up to a few float64
    ulps of |x| (e.g. it returns 0 for x = -100.5, where the loss is exp(-100.5) = 2.2e-44). lossops' form
    has no cancellation; this bound keeps the comparison honest there and is ~1e-14 relative elsewhere.
    """
    if op in ("SigmoidFocalLoss", "SigmoidFocalLossGrad"):
        return _focal_oracle_error(op, inputs, attrs)
    if op != "BinaryCrossEntropyWithLogits":
        return 0.0
    x, y, w, p = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    w = 1.0 if w is None else np.abs(w)
    p = 1.0 if p is None else p
    with np.errstate(all="ignore"):
        magnitude = (np.abs((1 - y) * x) + np.abs(1 + (p - 1) * y) * np.logaddexp(0, -x)) * w
    # none where the terms are infinite: the expected value there is a limit (exact) or itself not finite
    bound = np.where(np.isfinite(magnitude), 4 * np.finfo(np.float64).eps * magnitude, 0.0)
    if attrs["reduction"] == "none":
        return bound
    return float(bound.sum() / (max(bound.size, 1) if attrs["reduction"] == "mean" else 1))


def _focal_oracle_error(op: str, inputs: list, attrs: dict) -> np.ndarray | float:
    """The oracle's q**gamma carries gamma times the rounding of its q = 1 - p_t (a few float64 ulps, as any
    implementation's q): 4 * gamma ulps of the terms' size."""
    gamma = float(np.float32(attrs["gamma"]))
    if op == "SigmoidFocalLossGrad":
        bound = 4 * gamma * np.finfo(np.float64).eps * _focal_grad_terms(inputs, attrs)
        if attrs["reduction"] == "mean":
            bound = bound / max(np.asarray(inputs[1]).size, 1)
        return np.broadcast_to(bound, np.asarray(inputs[1]).shape)
    x, y, w = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    alpha = float(np.float32(attrs["alpha"]))
    with np.errstate(all="ignore"):
        p = 1 / (1 + np.exp(-x))
        q = np.abs(p * (1 - y) + (1 - p) * y)
        balance = 1.0 if alpha < 0 else np.abs(alpha * y + (1 - alpha) * (1 - y))
        ce = (1 - y) * np.logaddexp(0, x) + y * np.logaddexp(0, -x)
        loss = np.abs(ce * balance * q**gamma * (w if w is not None else 1.0))
    bound = np.where(np.isfinite(loss), 4 * gamma * np.finfo(np.float64).eps * loss, 0.0)
    if attrs["reduction"] == "none":
        return bound
    return float(bound.sum() / (max(bound.size, 1) if attrs["reduction"] == "mean" else 1))


def term_magnitude(op: str, inputs: list, attrs: dict) -> np.ndarray | float:
    """The size of the terms whose difference the output is, where the formula cancels (float64).

    KlDiv is `xlogy(t, t) - t * x`, BinaryCrossEntropyWithLogitsBackward `c * sigmoid(x) - p * y` and
    SigmoidFocalLossGrad `(p - y) * q**gamma + gamma * ce * q**(gamma - 1) * p * (1 - p) * (1 - 2y)`, whose two
    terms cancel where a soft target's gradient crosses 0: a result much smaller than its terms carries the
    compute type's rounding of the terms, for every backend and for PyTorch alike, so the relative bound applies
    to the terms' size there."""
    if op == "KlDiv":
        x, t = (np.asarray(a, np.float64) for a in inputs)
        with np.errstate(all="ignore"):
            if attrs["log_target"]:
                terms = np.exp(t) * (np.abs(t) + np.abs(x))
            else:
                terms = np.abs(np.where(t == 0, 0.0, t * np.log(np.abs(t) + (t == 0)))) + np.abs(t * x)
        return _reduced(terms, attrs["reduction"], np.asarray(inputs[0]).shape)
    if op == "BinaryCrossEntropyWithLogitsBackward":
        g, x, y, w, p = (None if a is None else np.asarray(a, np.float64) for a in inputs)
        p = 1.0 if p is None else p
        w = 1.0 if w is None else np.abs(w)
        with np.errstate(all="ignore"):  # infinite targets: the expected value is itself infinite
            terms = (np.abs(p * y + 1 - y) + np.abs(p * y)) * np.abs(g) * w
        if attrs["reduction"] == "mean":
            terms = terms / max(np.asarray(x).size, 1)
        return np.broadcast_to(terms, np.asarray(x).shape)
    if op == "SigmoidFocalLossGrad":
        # torch's autograd computes p - y as (1 - y) * p - y * (1 - p), terms whose sum is q
        terms = _focal_grad_terms(inputs, attrs)
        if attrs["reduction"] == "mean":
            terms = terms / max(np.asarray(inputs[1]).size, 1)
        return np.broadcast_to(terms, np.asarray(inputs[1]).shape)
    return 0.0


def _focal_grad_terms(inputs: list, attrs: dict) -> np.ndarray:
    """|g| * w * alpha_t * q**gamma * (q + |gamma * ce * r * (1 - 2y)|): the size of the focal gradient's terms."""
    g, x, y, w = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    w = 1.0 if w is None else np.abs(w)
    alpha, gamma = float(np.float32(attrs["alpha"])), float(np.float32(attrs["gamma"]))
    with np.errstate(all="ignore"):
        p = 1 / (1 + np.exp(-x))
        q = p * (1 - y) + (1 - p) * y
        ce = (1 - y) * np.logaddexp(0, x) + y * np.logaddexp(0, -x)
        focus = np.where(q > 0, gamma * ce * p * (1 - p) / q * np.abs(1 - 2 * y), 0.0)
        balance = 1.0 if alpha < 0 else alpha * y + (1 - alpha) * (1 - y)
        terms = np.abs(g) * w * balance * np.abs(q) ** gamma * (np.abs(q) + focus)
    return np.where(np.isfinite(terms), terms, 0.0)


def _reduced(terms: np.ndarray, reduction: str, input_shape: tuple[int, ...]) -> np.ndarray | float:
    if reduction == "none":
        return terms
    total = float(terms.sum())
    if reduction == "mean":
        return total / terms.size if terms.size else 0.0
    if reduction == "batchmean" and input_shape:
        return total / input_shape[0] if input_shape[0] else 0.0
    return total
