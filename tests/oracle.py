"""PyTorch in float64: the independent oracle every backend is held to."""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F

REDUCTION_CODES = {"none": 0, "mean": 1, "sum": 2}


def _t(a: np.ndarray | None) -> torch.Tensor | None:
    return None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64))


def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, *, reduction):
    x, y, w, p = map(_t, (input, target, weight, pos_weight))
    return F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p, reduction=reduction).numpy()


def binary_cross_entropy_backward(grad_output, input, target, weight=None, *, reduction):
    g, x, y, w = map(_t, (grad_output, input, target, weight))
    # aten's own backward kernel (the op torch_npu dispatches to aclnnBinaryCrossEntropyBackward)
    g, y = g.expand(x.shape), y.expand(x.shape)
    w = None if w is None else w.expand(x.shape)
    return torch.ops.aten.binary_cross_entropy_backward(g, x, y, w, REDUCTION_CODES[reduction]).numpy()


def kl_div_backward(grad_output, input, target, *, reduction, log_target):
    x = _t(input).requires_grad_(True)
    t, g = _t(target), _t(grad_output)
    with warnings.catch_warnings():  # torch warns that 'mean' is not 'batchmean'; we test both on purpose
        warnings.simplefilter("ignore", UserWarning)
        loss = F.kl_div(x, t, reduction=reduction, log_target=bool(log_target))
    (grad,) = torch.autograd.grad(loss, x, g.expand(loss.shape))
    return grad.numpy()


def oracle_error(op: str, inputs: list, attrs: dict) -> np.ndarray | float:
    """An absolute bound on the oracle's own rounding error, where PyTorch's formula cancels.

    PyTorch computes BCE-with-logits as `(1 - y) * x + (1 + (p - 1) * y) * softplus(-x)`: for x << 0 and
    y = 0 the two terms are about |x| each and cancel, so its float64 result is off by up to a few float64
    ulps of |x| (e.g. it returns 0 for x = -100.5, where the loss is exp(-100.5) = 2.2e-44). lossops' form
    has no cancellation; this bound keeps the comparison honest there and is ~1e-14 relative elsewhere.
    """
    if op != "BinaryCrossEntropyWithLogits":
        return 0.0
    x, y, w, p = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    w = 1.0 if w is None else np.abs(w)
    p = 1.0 if p is None else p
    magnitude = (np.abs((1 - y) * x) + np.abs(1 + (p - 1) * y) * np.logaddexp(0, -x)) * w
    bound = 4 * np.finfo(np.float64).eps * magnitude
    if attrs["reduction"] == "none":
        return bound
    return float(bound.sum() / (max(bound.size, 1) if attrs["reduction"] == "mean" else 1))


ORACLES = {
    "BinaryCrossEntropyWithLogits": binary_cross_entropy_with_logits,
    "BinaryCrossEntropyBackward": binary_cross_entropy_backward,
    "KlDivBackward": kl_div_backward,
}
