"""Kernel of KlDivBackward: d = -t * g (or -exp(t) * g), scaled, summed back to input's shape."""

from __future__ import annotations

import math

import numpy as np

from .common import Alloc, InvalidInput, as_compute, check_fits, compute_dtype, same_dtype, store


def kl_div_backward(
    grad_output: np.ndarray, input: np.ndarray, target: np.ndarray,
    *, reduction: str, log_target: int, alloc: Alloc | None = None,
) -> np.ndarray:
    dtype = same_dtype(grad_output=grad_output, input=input, target=target)
    try:
        full = np.broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise InvalidInput(f"inputs 'input' {input.shape} and 'target' {target.shape} do not broadcast") from None
    check_fits("grad_output", grad_output, full)
    ct = compute_dtype(dtype)
    g, t = as_compute(grad_output, ct), as_compute(target, ct)

    d = np.multiply(np.exp(t) if log_target else t, g, out=np.empty(np.broadcast_shapes(t.shape, g.shape), ct))
    np.negative(d, out=d)
    d = _sum_to(d, input.shape)
    if reduction == "mean":
        d /= ct.type(math.prod(full) or 1)  # an empty B has nothing to scale
    elif reduction == "batchmean" and input.ndim:
        d /= ct.type(input.shape[0] or 1)
    alloc = alloc or (lambda s: np.empty(s, dtype))
    return store(d, alloc(input.shape))  # store broadcasts d where input is larger than target and g


def _sum_to(d: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
    """Sum `d` over the axes that broadcasting added to or stretched in `shape` (extent 1 there)."""
    if d.ndim < len(shape):
        d = d.reshape((1,) * (len(shape) - d.ndim) + d.shape)
    lead = d.ndim - len(shape)
    axes = tuple(range(lead)) + tuple(lead + i for i, n in enumerate(shape) if n == 1 and d.shape[lead + i] != 1)
    if axes:
        d = d.sum(axis=axes, keepdims=True)
    return d.reshape(d.shape[lead:])
