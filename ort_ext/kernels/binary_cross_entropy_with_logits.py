"""Kernel of BinaryCrossEntropyWithLogits: loss = w * ((1 - y) * softplus(x) + p * y * softplus(-x))."""

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


def binary_cross_entropy_with_logits(
    input: np.ndarray, target: np.ndarray, weight: np.ndarray | None, pos_weight: np.ndarray | None,
    *, reduction: str, alloc: Alloc | None = None,
) -> np.ndarray:
    dtype = same_dtype(input=input, target=target, weight=weight, pos_weight=pos_weight)
    if target.shape != input.shape:
        raise InvalidInput(f"input 'target' has shape {target.shape}; expected exactly input's shape {input.shape}")
    check_fits("weight", weight, input.shape)
    check_fits("pos_weight", pos_weight, input.shape)
    shape, ct = input.shape, compute_dtype(dtype)
    x, y, w, p = (operand(a, shape, ct) for a in (input, target, weight, pos_weight))
    alloc = alloc or (lambda s: np.empty(s, dtype))
    out = alloc(shape) if reduction == "none" else None

    def block(ix: Index) -> float | None:
        xb, yb = load(x[ix], ct), load(y[ix], ct)
        # softplus(+-x) = max(+-x, 0) + log1p(exp(-|x|)): never overflows, and both loss terms are >= 0.
        e = np.abs(xb, out=scratch(xb.shape, ct))
        np.negative(e, out=e)
        np.exp(e, out=e)
        np.log1p(e, out=e)
        positive = np.negative(xb, out=scratch(xb.shape, ct))
        np.maximum(positive, 0, out=positive)
        positive += e  # softplus(-x)
        positive *= yb
        if p is not None:
            positive *= p[ix]
        loss = np.maximum(xb, 0, out=result_buffer(None if out is None else out[ix], ct, xb.shape))
        loss += e  # softplus(x)
        loss *= np.subtract(1, yb, out=e)
        loss += positive
        if w is not None:
            loss *= w[ix]
        return emit(loss, out, ix)

    partial = for_each_block(shape, block)
    return out if out is not None else reduced(partial, reduction, shape, alloc)
