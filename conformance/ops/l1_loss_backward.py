"""L1LossBackward: its oracle (autograd of F.l1_loss), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, pointwise_backward_forms, rng
from . import input_gradient, torch_and_functional
from .smooth_l1_loss import extremes
from .smooth_l1_loss_backward import term_magnitude  # noqa: F401 - |sign(d)| <= 1, as the slope there

OP = "L1LossBackward"


def oracle(grad_output, input, target, *, reduction):
    _, F = torch_and_functional()
    return input_gradient(F.l1_loss, grad_output, input, target, reduction=reduction)


def eager(t: dict, reduction: str):
    """What PyTorch's autograd computes for F.l1_loss (aten has no backward op for it): sgn(x - y) * g, scaled."""
    torch, _ = torch_and_functional()
    scale = 1 / t["input"].numel() if reduction == "mean" else 1.0
    return lambda: torch.sgn(t["input"] - t["target"]).mul_(t["grad_output"]).mul_(scale)


def specs() -> list[Spec]:
    r = rng(22)
    x, y = r.normal(size=(4, 5)), r.normal(size=(4, 5))
    xe, ye = extremes()
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        specs += pointwise_backward_forms("l1_backward", OP, r, x, y, a)
        specs.append(Spec(f"l1_backward_extremes_{red}", OP, [grad(red, xe.shape, r), xe, ye], a))
    specs.append(Spec("l1_backward_scalar_grad_none", OP, [np.array(0.5), x, y], {"reduction": "none"}))
    specs.append(Spec("l1_backward_default_reduction", OP, [np.array(1.0), x, y], {}))
    return specs
