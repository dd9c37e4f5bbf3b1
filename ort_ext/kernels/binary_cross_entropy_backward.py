"""Kernel of BinaryCrossEntropyBackward: g * (x - y) / max(x * (1 - x), 1e-12) * w, / numel for mean."""

from __future__ import annotations

import math

import numpy as np

from . import fused
from .common import Alloc, check_fits, compute_dtype, same_dtype

EPSILON = np.float32(1e-12)  # PyTorch's clamp, a C float (9.99999996e-13 when computing in double)


def binary_cross_entropy_backward(
    grad_output: np.ndarray, input: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
    *, reduction: str, alloc: Alloc | None = None,
) -> np.ndarray:
    dtype = same_dtype(grad_output=grad_output, input=input, target=target, weight=weight)
    for name, a in (("grad_output", grad_output), ("target", target), ("weight", weight)):
        check_fits(name, a, input.shape)
    shape, ct = input.shape, compute_dtype(dtype)
    n = math.prod(shape)
    scale = ct.type(1 / n) if reduction == "mean" and n else ct.type(1)  # times 1 is exact
    out = (alloc or (lambda s: np.empty(s, dtype)))(shape)
    g, x, y, w = (fused.operand(a, shape, dtype) for a in (grad_output, input, target, weight))
    fused.run(fused.bce_backward, shape, out, g, x, y, w, scale=scale, eps=ct.type(EPSILON))
    return out
