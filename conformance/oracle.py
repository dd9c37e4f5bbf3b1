"""PyTorch in float64: the independent oracle every backend is held to (needed only to generate goldens)."""

from __future__ import annotations

import warnings
from collections.abc import Callable

import numpy as np
import torch
import torch.nn.functional as F

from ..opset.spec import REDUCTIONS

# operator name -> its oracle: f(*inputs, **attributes) -> float64 output (tests/test_registry.py checks
# that every operator has one)
ORACLES: dict[str, Callable[..., np.ndarray]] = {}


def oracle(op_name: str) -> Callable[[Callable], Callable]:
    """Register the decorated function as the PyTorch oracle of `op_name`."""

    def register(function: Callable) -> Callable:
        ORACLES[op_name] = function
        return function

    return register


def _t(a: np.ndarray | None) -> torch.Tensor | None:
    return None if a is None else torch.from_numpy(np.asarray(a, dtype=np.float64))


@oracle("BinaryCrossEntropyWithLogits")
def binary_cross_entropy_with_logits(input, target, weight=None, pos_weight=None, *, reduction):
    x, y, w, p = map(_t, (input, target, weight, pos_weight))
    loss = F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p, reduction="none")
    # lossops' one departure from PyTorch (the operator's doc): at an infinite logit with a finite target the
    # loss's limit, the coefficient of x's side times inf (0 where it is 0), where PyTorch's formula gives NaN
    one = torch.ones((), dtype=torch.float64)
    side = torch.where(x > 0, 1 - y, (one if p is None else p) * y)
    limit = torch.where(side == 0, 0.0, side * torch.inf)
    if w is not None:
        limit = torch.where(w == 0, 0.0, limit * w)
    loss = torch.where(torch.isinf(x) & torch.isfinite(y), limit.expand(loss.shape), loss)
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction].numpy()


@oracle("BinaryCrossEntropyBackward")
def binary_cross_entropy_backward(grad_output, input, target, weight=None, *, reduction):
    g, x, y, w = map(_t, (grad_output, input, target, weight))
    # aten's own backward kernel (the op torch_npu dispatches to aclnnBinaryCrossEntropyBackward)
    g, y = g.expand(x.shape), y.expand(x.shape)
    w = None if w is None else w.expand(x.shape)
    return torch.ops.aten.binary_cross_entropy_backward(g, x, y, w, REDUCTIONS.index(reduction)).numpy()


@oracle("KlDivBackward")
def kl_div_backward(grad_output, input, target, *, reduction, log_target):
    x = _t(input).requires_grad_(True)
    t, g = _t(target), _t(grad_output)
    with warnings.catch_warnings():  # torch warns that 'mean' is not 'batchmean'; we test both on purpose
        warnings.simplefilter("ignore", UserWarning)
        loss = F.kl_div(x, t, reduction=reduction, log_target=bool(log_target))
    (grad,) = torch.autograd.grad(loss, x, g.expand(loss.shape))
    return grad.numpy()


@oracle("BinaryCrossEntropy")
def binary_cross_entropy(input, target, weight=None, *, reduction):
    x, y, w = map(_t, (input, target, weight))
    return F.binary_cross_entropy(x, y, weight=None if w is None else w.expand(x.shape), reduction=reduction).numpy()


@oracle("KlDiv")
def kl_div(input, target, *, reduction, log_target):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return F.kl_div(_t(input), _t(target), reduction=reduction, log_target=bool(log_target)).numpy()


@oracle("BinaryCrossEntropyWithLogitsBackward")
def binary_cross_entropy_with_logits_backward(grad_output, input, target, weight=None, pos_weight=None, *,
                                              reduction):
    x = _t(input).requires_grad_(True)
    y, w, p, g = map(_t, (target, weight, pos_weight, grad_output))
    loss = F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p, reduction=reduction)
    (grad,) = torch.autograd.grad(loss, x, g.expand(loss.shape))
    return grad.numpy()



def _focal(x, y, alpha, gamma):
    """torchvision.ops.sigmoid_focal_loss's loss per element, in float64, with its `1 - p_t` written as
    p * (1 - y) + sigmoid(-x) * y and its cross entropy as a sum of softplus terms (the same values; torchvision's
    forms cancel for a confident prediction, which would make the oracle the least accurate party). `alpha` and
    `gamma` as the float32 attributes hold them."""
    alpha, gamma = float(np.float32(alpha)), float(np.float32(gamma))
    p, zero = torch.sigmoid(x), torch.zeros((), dtype=torch.float64)
    # the cross entropy as (1 - y) * softplus(x) + y * softplus(-x): torch's binary_cross_entropy_with_logits
    # cancels for x << 0 (tolerance.oracle_error), these terms do not
    ce = (1 - y) * torch.logaddexp(zero, x) + y * torch.logaddexp(zero, -x)
    loss = ce * (p * (1 - y) + torch.sigmoid(-x) * y) ** gamma
    if alpha >= 0:
        loss = (alpha * y + (1 - alpha) * (1 - y)) * loss
    return loss


@oracle("SigmoidFocalLoss")
def sigmoid_focal_loss(input, target, weight=None, *, reduction, alpha, gamma):
    x, y, w = map(_t, (input, target, weight))
    loss = _focal(x, y, alpha, gamma)
    # the loss's limit at an infinite logit (the operator's doc), where PyTorch's formula gives NaN
    side = torch.where(x > 0, 1 - y, y)
    limit = torch.where(side == 0, 0.0, torch.inf)
    loss = torch.where(torch.isinf(x), limit, loss)
    if w is not None:
        loss = torch.where(w == 0, 0.0, loss * w)
    return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction].numpy()


@oracle("SigmoidFocalLossGrad")
def sigmoid_focal_loss_grad(grad_output, input, target, weight=None, *, reduction, alpha, gamma):
    x = _t(input).requires_grad_(True)
    y, w, g = map(_t, (target, weight, grad_output))
    loss = _focal(x, y, alpha, gamma)
    if w is not None:
        loss = loss * w
    loss = {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]
    (grad,) = torch.autograd.grad(loss, x, g.expand(loss.shape))
    # at an infinite logit the gradient's limit (the operator's doc): s * alpha_t * a**gamma * a, where PyTorch
    # gives NaN; a = 0 makes it 0
    x = x.detach()
    a = torch.where(x > 0, 1 - y, y)
    alpha_f, gamma_f = float(np.float32(alpha)), float(np.float32(gamma))
    balance = torch.ones(()) if alpha_f < 0 else alpha_f * y + (1 - alpha_f) * (1 - y)
    limit = torch.sign(x) * balance * a**gamma_f * a * g.expand(x.shape) * (1.0 if w is None else w)
    if reduction == "mean":
        limit = limit / max(x.numel(), 1)
    return torch.where(torch.isinf(x), limit, grad).numpy()
