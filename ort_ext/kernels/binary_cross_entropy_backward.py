"""Kernel of BinaryCrossEntropyBackward: g * w * (x - y) / max(x * (1 - x), 1e-12), / numel for mean."""

from __future__ import annotations

import numpy as np

from .common import Alloc, as_compute, check_fits, compute_dtype, same_dtype, store

EPSILON = np.float32(1e-12)  # PyTorch's clamp, a C float (9.99999996e-13 when computing in double)


def binary_cross_entropy_backward(
    grad_output: np.ndarray, input: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
    *, reduction: str, alloc: Alloc | None = None,
) -> np.ndarray:
    dtype = same_dtype(grad_output=grad_output, input=input, target=target, weight=weight)
    for name, a in (("grad_output", grad_output), ("target", target), ("weight", weight)):
        check_fits(name, a, input.shape)
    ct = compute_dtype(dtype)
    g, x, y, w = (as_compute(a, ct) for a in (grad_output, input, target, weight))

    shape = input.shape
    denominator = np.subtract(1, x, out=np.empty(shape, ct))
    denominator *= x
    np.maximum(denominator, ct.type(EPSILON), out=denominator)
    grad = np.subtract(x, y, out=np.empty(shape, ct))
    grad *= g
    grad /= denominator
    if w is not None:
        grad *= w
    if reduction == "mean" and grad.size:
        grad /= ct.type(grad.size)
    alloc = alloc or (lambda s: np.empty(s, dtype))
    return store(grad, alloc(input.shape))
