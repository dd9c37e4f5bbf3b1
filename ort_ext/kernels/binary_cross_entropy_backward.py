"""Kernel of BinaryCrossEntropyBackward: g * w * (x - y) / max(x * (1 - x), 1e-12), / numel for mean."""

from __future__ import annotations

import math

import numpy as np

from .common import Alloc, check_fits, compute_dtype, finish, load, operand, result_buffer, same_dtype
from .parallel import Index, for_each_block

EPSILON = np.float32(1e-12)  # PyTorch's clamp, a C float (9.99999996e-13 when computing in double)


def binary_cross_entropy_backward(
    grad_output: np.ndarray, input: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
    *, reduction: str, alloc: Alloc | None = None,
) -> np.ndarray:
    dtype = same_dtype(grad_output=grad_output, input=input, target=target, weight=weight)
    for name, a in (("grad_output", grad_output), ("target", target), ("weight", weight)):
        check_fits(name, a, input.shape)
    shape, ct = input.shape, compute_dtype(dtype)
    g, x, y, w = (operand(a, shape, ct) for a in (grad_output, input, target, weight))
    scale = ct.type(1 / math.prod(shape)) if reduction == "mean" and math.prod(shape) else None
    out = (alloc or (lambda s: np.empty(s, dtype)))(shape)

    def block(ix: Index) -> None:
        xb, yb = load(x[ix], ct), load(y[ix], ct)
        denominator = np.subtract(1, xb, out=np.empty(xb.shape, ct))
        denominator *= xb
        np.maximum(denominator, ct.type(EPSILON), out=denominator)
        grad = np.subtract(xb, yb, out=result_buffer(out[ix], ct, xb.shape))
        grad *= load(g[ix], ct)
        grad /= denominator
        if w is not None:
            grad *= w[ix]
        if scale is not None:
            grad *= scale
        finish(grad, out[ix])

    for_each_block(shape, block)
    return out
