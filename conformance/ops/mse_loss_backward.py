"""MseLossBackward: its oracle (autograd of F.mse_loss), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ...opset.spec import REDUCTIONS
from ..specs import Spec, grad, pointwise_backward_forms, rng
from . import input_gradient, torch_and_functional

OP = "MseLossBackward"


def oracle(grad_output, input, target, *, reduction):
    _, F = torch_and_functional()
    return input_gradient(F.mse_loss, grad_output, input, target, reduction=reduction)


def eager(t: dict, reduction: str):
    """aten's own backward kernel, as PyTorch's autograd calls it."""
    torch, _ = torch_and_functional()
    x, g, code = t["input"], t["grad_output"], REDUCTIONS.index(reduction)
    return lambda: torch.ops.aten.mse_loss_backward(g.expand(x.shape), x, t["target"], code)


def specs() -> list[Spec]:
    r = rng(16)
    x, y = r.normal(size=(4, 5)), r.normal(size=(4, 5))
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        specs += pointwise_backward_forms("mse_backward", OP, r, x, y, a)
        specs.append(Spec(f"mse_backward_extremes_{red}", OP,
                          [grad(red, (6,), r), np.array([np.inf, -np.inf, 1e30, -3.0, 0.0, 2.0]),
                           np.array([1.0, np.inf, -1e30, -3.0, 0.0, 2.0 + 2**-20])], a))
    specs.append(Spec("mse_backward_scalar_grad_none", OP, [np.array(0.5), x, y], {"reduction": "none"}))
    specs.append(Spec("mse_backward_default_reduction", OP, [np.array(1.0), x, y], {}))
    return specs
