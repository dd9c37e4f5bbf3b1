"""CtcLossBackward: its oracle (autograd through PyTorch's ctc_loss), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng
from . import torch_and_functional
from .ctc_loss import oracle as forward
from .ctc_loss import specs as forward_specs

OP = "CtcLossBackward"


def oracle(grad_output, log_probs, targets, input_lengths, target_lengths, **attributes):
    torch, _ = torch_and_functional()
    x = torch.from_numpy(np.asarray(log_probs, np.float64)).requires_grad_(True)
    loss = forward(x, targets, input_lengths, target_lengths, **attributes)
    (g,) = torch.autograd.grad(loss, x, torch.from_numpy(np.asarray(grad_output, np.float64)).expand(loss.shape),
                               allow_unused=True)
    return np.zeros(np.shape(log_probs)) if g is None else g.numpy()


def _terms(inputs: list, attrs: dict) -> tuple[np.ndarray, np.ndarray]:
    """(a * exp(log_probs), a * the posterior of the frame's class) per element, the gradient being their
    difference (a: the loss's gradient for the sequence), the latter from the oracle's gradient."""
    g, lp, _, _, tl = (np.asarray(x) for x in inputs)
    a = np.asarray(g, np.float64) * np.ones(lp.shape[1])
    if attrs.get("reduction", "mean") == "mean":
        a = a / np.maximum(tl, 1) / max(lp.shape[1], 1)
    with np.errstate(all="ignore"):
        first = a[None, :, None] * np.exp(lp.astype(np.float64))
        return first, first - oracle(*inputs, **attrs)


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray:
    """The two terms cancel where a frame's class is certain: their size, per element."""
    first, second = _terms(inputs, attrs)
    return np.nan_to_num(np.abs(first) + np.abs(second), nan=0.0, posinf=0.0)


def oracle_error(inputs: list, attrs: dict) -> np.ndarray:
    """The posterior is exp(log(alpha * beta) + loss - log_probs): the oracle rounds that exponent, whose terms
    are about |loss| + |log_probs| in size, so the term carries that size times 2**-52 (a long sequence's loss is
    large)."""
    _, second = _terms(inputs, attrs)
    _, lp, t, il, tl = inputs
    losses = forward(lp, t, il, tl, **{**attrs, "reduction": "none"})
    with np.errstate(all="ignore"):
        size = np.abs(np.asarray(losses, np.float64))[None, :, None] + np.abs(np.asarray(lp, np.float64)) + 1.0
        return np.nan_to_num(4 * 2.0**-52 * size * np.abs(second), nan=0.0, posinf=0.0)


def eager(t: dict, reduction: str):
    torch, F = torch_and_functional()
    x = t["log_probs"].detach().requires_grad_(True)
    loss = F.ctc_loss(x, t["targets"], t["input_lengths"], t["target_lengths"], reduction=reduction)
    g = t["grad_output"].expand(loss.shape)
    return lambda: torch.autograd.grad(loss, x, g, retain_graph=True)


def specs() -> list[Spec]:
    r = rng(30)
    return [Spec(s.id.replace("ctc_loss_", "ctc_loss_backward_", 1), OP,
                 [grad(s.attrs.get("reduction", "mean"), s.inputs[0].shape[1:2], r), *s.inputs], s.attrs, s.summed)
            for s in forward_specs()]
