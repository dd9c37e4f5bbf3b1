"""Kernel of BinaryCrossEntropy: -w * (y * max(log x, -100) + (1 - y) * max(log1p(-x), -100))."""

from __future__ import annotations

import numpy as np

from .common import (
    Alloc,
    InvalidInput,
    check_fits,
    compute_dtype,
    emit,
    load,
    operand,
    reduced,
    result_buffer,
    same_dtype,
)
from .parallel import Index, for_each_block, scratch

LOG_CLAMP = -100.0  # PyTorch's


def binary_cross_entropy(input: np.ndarray, target: np.ndarray, weight: np.ndarray | None,
                         *, reduction: str, alloc: Alloc | None = None) -> np.ndarray:
    dtype = same_dtype(input=input, target=target, weight=weight)
    if target.shape != input.shape:
        raise InvalidInput(f"input 'target' has shape {target.shape}; expected exactly input's shape {input.shape}")
    check_fits("weight", weight, input.shape)
    shape, ct = input.shape, compute_dtype(dtype)
    x, y, w = (operand(a, shape, ct) for a in (input, target, weight))
    alloc = alloc or (lambda s: np.empty(s, dtype))
    out = alloc(shape) if reduction == "none" else None

    def block(ix: Index) -> float | None:
        xb, yb = load(x[ix], ct), load(y[ix], ct)
        negative = np.negative(xb, out=scratch(xb.shape, ct))
        np.log1p(negative, out=negative)
        np.maximum(negative, ct.type(LOG_CLAMP), out=negative)
        negative *= np.subtract(1, yb, out=scratch(xb.shape, ct))
        loss = np.log(xb, out=result_buffer(None if out is None else out[ix], ct, xb.shape))
        np.maximum(loss, ct.type(LOG_CLAMP), out=loss)
        loss *= yb
        loss += negative
        np.negative(loss, out=loss)
        if w is not None:
            loss *= w[ix]
        return emit(loss, out, ix)

    partial = for_each_block(shape, block)
    return out if out is not None else reduced(partial, reduction, shape, alloc)
