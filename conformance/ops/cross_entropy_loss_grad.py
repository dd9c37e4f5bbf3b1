"""CrossEntropyLossGrad: its oracle (autograd through PyTorch's cross_entropy), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, indices, rng
from . import tensor, torch_and_functional
from .cross_entropy_loss import row_terms
from .cross_entropy_loss import specs as forward_specs

OP = "CrossEntropyLossGrad"


def oracle(grad_output, input, target, weight=None, *, reduction, ignore_index, label_smoothing):
    torch, F = torch_and_functional()
    x = tensor(input).requires_grad_(True)
    loss = F.cross_entropy(x, indices(target), tensor(weight), reduction=reduction, ignore_index=ignore_index,
                           label_smoothing=label_smoothing)
    (g,) = torch.autograd.grad(loss, x, tensor(grad_output).expand(loss.shape))
    # lossops' documented 0 in the ignored rows, where autograd gives NaN for a row whose softmax is undefined
    return np.where(np.expand_dims(np.asarray(target) == ignore_index, 1), 0.0, g.numpy())


def eager(t: dict, reduction: str):
    torch, F = torch_and_functional()
    x = t["input"].detach().requires_grad_(True)
    loss = F.cross_entropy(x, t["target"], reduction=reduction)
    g = t["grad_output"]
    return lambda: torch.autograd.grad(loss, x, g, retain_graph=True)


def term_magnitude(inputs: list, attrs: dict):
    """softmax minus one-hot: where p is near 1 at the target, the difference is much smaller than its terms."""
    g, rest = np.asarray(inputs[0], np.float64), inputs[1:]
    p, along, row_weight, kept, _, index = row_terms(rest, attrs)
    e, c = attrs["label_smoothing"], p.shape[1]
    if attrs["reduction"] == "mean":
        g = g / max(float(row_weight.sum()), 1e-300)
    fed = np.abs(np.expand_dims(np.where(kept, g, 0.0), 1))
    hot = np.zeros_like(p)
    np.put_along_axis(hot, index, 1.0, axis=1)
    first = (1 - e) * np.expand_dims(row_weight, 1) * (p + hot)
    second = e / c * (p * along.sum() + along)
    return np.where(np.expand_dims(kept, 1), fed * (first + second), 0.0)  # an ignored row's p may be NaN


def specs() -> list[Spec]:
    r = rng(24)
    return [Spec(s.id.replace("cross_entropy_", "cross_entropy_grad_", 1), OP,
                 [grad(s.attrs.get("reduction", "mean"), s.inputs[0].shape[:1] + s.inputs[0].shape[2:], r),
                  *s.inputs], s.attrs) for s in forward_specs()]
