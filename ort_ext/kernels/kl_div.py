"""Kernel of KlDiv: xlogy(t, t) - t * x, or exp(t) * (t - x), then reduced."""

from __future__ import annotations

import math

import numpy as np

from .common import Alloc, InvalidInput, compute_dtype, same_dtype


def kl_div(input: np.ndarray, target: np.ndarray, *, reduction: str, log_target: int,
           alloc: Alloc | None = None) -> np.ndarray:
    dtype = same_dtype(input=input, target=target)
    try:
        full = np.broadcast_shapes(input.shape, target.shape)
    except ValueError:
        raise InvalidInput(f"inputs 'input' {input.shape} and 'target' {target.shape} do not broadcast") from None
    ct = compute_dtype(dtype)
    x, t = input.astype(ct, copy=False), target.astype(ct, copy=False)
    with np.errstate(all="ignore"):
        if log_target:
            loss = np.exp(t) * (t - x)
        else:
            loss = np.where(t == 0, ct.type(0), t * np.log(t)) - t * x  # xlogy(t, t): 0 at t == 0
    loss = np.broadcast_to(loss, full)
    alloc = alloc or (lambda s: np.empty(s, dtype))
    if reduction == "none":
        out = alloc(full)
        np.copyto(out, loss, casting="unsafe")
        return out
    total = math.fsum(np.add.reduce(loss, axis=None, keepdims=True).ravel()) if loss.size else 0.0
    if reduction == "mean":
        total = total / loss.size if loss.size else math.nan
    elif reduction == "batchmean" and input.ndim:
        total = total / input.shape[0] if input.shape[0] else math.nan
    out = alloc(())
    out[...] = total
    return out
