"""BinaryCrossEntropyWithLogitsTargetBackward: its oracle (autograd with respect to the target), specs, bench
baseline and the size of its cancelling terms."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng
from . import input_gradient, torch_and_functional

OP = "BinaryCrossEntropyWithLogitsTargetBackward"


def oracle(grad_output, input, target, weight=None, pos_weight=None, *, reduction):
    _, F = torch_and_functional()
    return input_gradient(F.binary_cross_entropy_with_logits, grad_output, input, target, of="target",
                          weight=weight, pos_weight=pos_weight, reduction=reduction)


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray:
    """PyTorch computes `p * softplus(-x) - softplus(x)` (log-sigmoids), whose terms cancel near x = 0; without
    pos_weight its `-x` cancels nothing."""
    g, x, _, w, p = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    with np.errstate(all="ignore"):  # infinite logits: the expected value is itself infinite
        terms = np.abs(x) if p is None else np.abs(p) * np.logaddexp(0, -x) + np.logaddexp(0, x)
        terms = terms * np.abs(g) * (1.0 if w is None else np.abs(w))
    if attrs["reduction"] == "mean":
        terms = terms / max(x.size, 1)
    return np.broadcast_to(terms, x.shape)


def eager(t: dict, reduction: str):
    """The formula autograd evaluates without pos_weight: -x * g, scaled."""
    torch, _ = torch_and_functional()
    scale = 1 / t["input"].numel() if reduction == "mean" else 1.0
    return lambda: torch.mul(t["input"], t["grad_output"]).mul_(-scale)


def specs() -> list[Spec]:
    r = rng(26)
    logits, y = r.normal(scale=3, size=(4, 5)), r.uniform(size=(4, 5))
    specs = []
    for red in ("none", "mean", "sum"):
        g, a = grad(red, (4, 5), r), {"reduction": red}
        specs += [
            Spec(f"bce_with_logits_target_backward_plain_{red}", OP, [g, logits, y, None, None], a),
            Spec(f"bce_with_logits_target_backward_pos_weight_{red}", OP,
                 [g, logits, y, None, r.uniform(0.5, 3, size=5)], a),
            Spec(f"bce_with_logits_target_backward_weights_{red}", OP,
                 [g, logits, y, r.uniform(size=(4, 1)), r.uniform(0.5, 3, size=5)], a),
            Spec(f"bce_with_logits_target_backward_rank0_{red}", OP,
                 [np.array(0.5), np.array(-1.5), np.array(1.0), None, np.array(2.0)], a),
            Spec(f"bce_with_logits_target_backward_empty_{red}", OP,
                 [np.array(1.0), np.zeros((0, 5)), np.zeros((0, 5)), None, np.ones(5)], a),
            Spec(f"bce_with_logits_target_backward_extreme_{red}", OP,
                 [grad(red, (8,), r), np.array([-np.inf, -1e4, -200, -1e-9, 1e-9, 200, 1e4, np.inf]),
                  np.full(8, 0.5), None, np.array([2.0, 0.5, 3.0, 1.0, 4.0, 0.25, 1.0, 2.0])], a),
        ]
    return specs
