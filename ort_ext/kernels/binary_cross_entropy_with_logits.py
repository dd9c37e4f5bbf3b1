"""Kernel of BinaryCrossEntropyWithLogits: loss = w * ((1 - y) * softplus(x) + p * y * softplus(-x))."""

from __future__ import annotations

import numpy as np

from .common import Alloc, InvalidInput, as_compute, check_fits, compute_dtype, reduce, same_dtype, store


def binary_cross_entropy_with_logits(
    input: np.ndarray, target: np.ndarray, weight: np.ndarray | None, pos_weight: np.ndarray | None,
    *, reduction: str, alloc: Alloc | None = None,
) -> np.ndarray:
    dtype = same_dtype(input=input, target=target, weight=weight, pos_weight=pos_weight)
    if target.shape != input.shape:
        raise InvalidInput(f"input 'target' has shape {target.shape}; expected exactly input's shape {input.shape}")
    check_fits("weight", weight, input.shape)
    check_fits("pos_weight", pos_weight, input.shape)
    ct = compute_dtype(dtype)
    x, y, w, p = (as_compute(a, ct) for a in (input, target, weight, pos_weight))

    # softplus(+-x) = max(+-x, 0) + log1p(exp(-|x|)): never overflows, and both loss terms are >= 0.
    # Buffers are allocated explicitly so that ufuncs write in place, rank 0 included.
    shape = input.shape
    e = np.abs(x, out=np.empty(shape, ct))
    np.negative(e, out=e)
    np.exp(e, out=e)
    np.log1p(e, out=e)
    positive = np.negative(x, out=np.empty(shape, ct))
    np.maximum(positive, 0, out=positive)
    positive += e  # softplus(-x)
    positive *= y
    if p is not None:
        positive *= p
    loss = np.maximum(x, 0, out=np.empty(shape, ct))
    loss += e  # softplus(x)
    loss *= np.subtract(1, y, out=e)
    loss += positive
    if w is not None:
        loss *= w

    alloc = alloc or (lambda s: np.empty(s, dtype))
    if reduction == "none":
        return store(loss, alloc(input.shape))
    return store(reduce(loss, reduction), alloc(()))
