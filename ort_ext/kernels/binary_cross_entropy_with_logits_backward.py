"""Kernel of BinaryCrossEntropyWithLogitsBackward: ((p * y + 1 - y) * sigmoid(x) - p * y) * g * w (/ n)."""

from __future__ import annotations

import math

import numpy as np

from .common import Alloc, InvalidInput, check_fits, compute_dtype, finish, load, operand, result_buffer, same_dtype
from .parallel import Index, for_each_block, scratch


def binary_cross_entropy_with_logits_backward(
    grad_output: np.ndarray, input: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
    pos_weight: np.ndarray | None, *, reduction: str, alloc: Alloc | None = None,
) -> np.ndarray:
    dtype = same_dtype(grad_output=grad_output, input=input, target=target, weight=weight, pos_weight=pos_weight)
    if target.shape != input.shape:
        raise InvalidInput(f"input 'target' has shape {target.shape}; expected exactly input's shape {input.shape}")
    for name, a in (("grad_output", grad_output), ("weight", weight), ("pos_weight", pos_weight)):
        check_fits(name, a, input.shape)
    shape, ct = input.shape, compute_dtype(dtype)
    g, x, y, w, p = (operand(a, shape, ct) for a in (grad_output, input, target, weight, pos_weight))
    scale = ct.type(1 / math.prod(shape)) if reduction == "mean" and math.prod(shape) else None
    out = (alloc or (lambda s: np.empty(s, dtype)))(shape)

    def block(ix: Index) -> None:
        xb, yb = load(x[ix], ct), load(y[ix], ct)
        sigmoid = np.negative(xb, out=scratch(xb.shape, ct))
        np.exp(sigmoid, out=sigmoid)
        sigmoid += 1
        np.reciprocal(sigmoid, out=sigmoid)
        p_y = yb * p[ix] if p is not None else np.array(yb, ct, copy=True)
        grad = np.subtract(p_y, yb, out=result_buffer(out[ix], ct, xb.shape))
        grad += 1  # p * y + 1 - y
        grad *= sigmoid
        grad -= p_y
        grad *= load(g[ix], ct)
        if w is not None:
            grad *= w[ix]
        if scale is not None:
            grad *= scale
        finish(grad, out[ix])

    for_each_block(shape, block)
    return out
