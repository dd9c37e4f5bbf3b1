"""BinaryCrossEntropyWithLogitsBackward: its oracle (autograd), specs, bench baseline and the size of its
cancelling terms."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng
from . import tensor, torch_and_functional

OP = "BinaryCrossEntropyWithLogitsBackward"


def oracle(grad_output, input, target, weight=None, pos_weight=None, *, reduction):
    torch, F = torch_and_functional()
    x = tensor(input).requires_grad_(True)
    y, w, p, g = map(tensor, (target, weight, pos_weight, grad_output))
    loss = F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p, reduction=reduction)
    (result,) = torch.autograd.grad(loss, x, g.expand(loss.shape))
    return result.numpy()


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray:
    """`c * sigmoid(x) - p * y`: a result much smaller than its terms carries their rounding."""
    g, x, y, w, p = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    p = 1.0 if p is None else p
    w = 1.0 if w is None else np.abs(w)
    with np.errstate(all="ignore"):  # infinite targets: the expected value is itself infinite
        terms = (np.abs(p * y + 1 - y) + np.abs(p * y)) * np.abs(g) * w
    if attrs["reduction"] == "mean":
        terms = terms / max(np.asarray(x).size, 1)
    return np.broadcast_to(terms, np.asarray(x).shape)


def eager(t: dict, reduction: str):
    """The formula autograd evaluates without pos_weight: (sigmoid(x) - y) * g, scaled."""
    torch, _ = torch_and_functional()
    scale = 1 / t["input"].numel() if reduction == "mean" else 1.0
    return lambda: torch.sigmoid(t["input"]).sub_(t["target"]).mul_(t["grad_output"]).mul_(scale)


def specs() -> list[Spec]:
    r = rng(12)
    logits, y = r.normal(scale=3, size=(4, 5)), r.uniform(size=(4, 5))
    specs = []
    for red in ("none", "mean", "sum"):
        g = grad(red, (4, 5), r)
        specs += [
            Spec(f"bce_with_logits_backward_plain_{red}", OP, [g, logits, y, None, None], {"reduction": red}),
            Spec(f"bce_with_logits_backward_weights_{red}", OP,
                 [g, logits, y, r.uniform(size=(4, 1)), r.uniform(0.5, 3, size=5)], {"reduction": red}),
            Spec(f"bce_with_logits_backward_rank0_{red}", OP,
                 [np.array(0.5), np.array(-1.5), np.array(1.0), None, None], {"reduction": red}),
            Spec(f"bce_with_logits_backward_extreme_{red}", OP,
                 [grad(red, (6,), r), np.array([-1e4, -200, -20, 20, 200, 1e4]), np.array([0.0, 1, 0.5, 0.5, 0, 1]),
                  None, None], {"reduction": red}),
        ]
    for red in ("none", "mean", "sum"):  # infinite targets give what PyTorch gives (the operator's doc)
        specs.append(Spec(f"bce_with_logits_backward_infinite_targets_{red}", OP,
                          [grad(red, (5,), rng(8)), np.array([-3.0, 0.0, 3.0, -1e4, 1e4]),
                           np.array([np.inf, -np.inf, -np.inf, np.inf, 1e37]), None, None], {"reduction": red}))
    return specs
