"""SoftTargetCrossEntropyLossGrad: its oracle (autograd through PyTorch's cross_entropy of probabilities), specs
and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng
from . import tensor, torch_and_functional
from .cross_entropy_loss_grad import eager  # noqa: F401 - F.cross_entropy takes probabilities alike
from .soft_target_cross_entropy_loss import row_terms
from .soft_target_cross_entropy_loss import specs as forward_specs

OP = "SoftTargetCrossEntropyLossGrad"


def oracle(grad_output, input, target, weight=None, *, reduction, label_smoothing):
    torch, F = torch_and_functional()
    x = tensor(input).requires_grad_(True)
    loss = F.cross_entropy(x, tensor(target), tensor(weight), reduction=reduction, label_smoothing=label_smoothing)
    (g,) = torch.autograd.grad(loss, x, tensor(grad_output).expand(loss.shape))
    return g.numpy()


def term_magnitude(inputs: list, attrs: dict):
    """p * sum(q) - q: where p is near q, the difference is much smaller than its terms."""
    g, rest = np.asarray(inputs[0], np.float64), inputs[1:]
    p, q, _ = row_terms(rest, attrs)
    if attrs["reduction"] == "mean":
        g = g / max(p.size // max(p.shape[1], 1), 1)
    fed = np.abs(g if attrs["reduction"] != "none" else np.expand_dims(g, 1))
    return fed * (p * np.abs(q).sum(axis=1, keepdims=True) + np.abs(q))


def specs() -> list[Spec]:
    r = rng(26)
    return [Spec(s.id.replace("soft_target_cross_entropy_", "soft_target_cross_entropy_grad_", 1), OP,
                 [grad(s.attrs.get("reduction", "mean"), s.inputs[0].shape[:1] + s.inputs[0].shape[2:], r),
                  *s.inputs], s.attrs) for s in forward_specs()]
