"""SmoothL1LossBackward: its oracle (autograd of F.smooth_l1_loss), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ...opset.spec import REDUCTIONS
from ..specs import Spec, grad, pointwise_backward_forms, rng, summed_back
from . import input_gradient, torch_and_functional
from .smooth_l1_loss import BETAS, extremes

OP = "SmoothL1LossBackward"


def oracle(grad_output, input, target, *, reduction, beta):
    _, F = torch_and_functional()
    return input_gradient(F.smooth_l1_loss, grad_output, input, target, reduction=reduction,
                          beta=float(np.float32(beta)))


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray:
    """|slope * g| <= |g|, summed back to input's shape, where terms of either sign cancel."""
    g, x, y = (np.asarray(a, np.float64) for a in inputs)
    return summed_back(np.broadcast_to(g, np.broadcast_shapes(x.shape, y.shape)), x.shape, attrs["reduction"])


def eager(t: dict, reduction: str):
    """aten's own backward kernel, as PyTorch's autograd calls it."""
    torch, _ = torch_and_functional()
    x, g, code = t["input"], t["grad_output"], REDUCTIONS.index(reduction)
    return lambda: torch.ops.aten.smooth_l1_loss_backward(g.expand(x.shape), x, t["target"], code, 1.0)


def specs() -> list[Spec]:
    r = rng(18)
    x, y = r.normal(size=(4, 5)), r.normal(size=(4, 5))
    xe, ye = extremes()
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        specs += pointwise_backward_forms("smooth_l1_backward", OP, r, x, y, a)
        specs.append(Spec(f"smooth_l1_backward_extremes_{red}", OP, [grad(red, xe.shape, r), xe, ye], a))
        for name, beta in BETAS.items():
            specs += [
                Spec(f"smooth_l1_backward_{name}_plain_{red}", OP, [grad(red, (4, 5), r), x, y], {**a, **beta}),
                Spec(f"smooth_l1_backward_{name}_extremes_{red}", OP, [grad(red, xe.shape, r), xe, ye],
                     {**a, **beta}),
            ]
    specs.append(Spec("smooth_l1_backward_scalar_grad_none", OP, [np.array(0.5), x, y], {"reduction": "none"}))
    specs.append(Spec("smooth_l1_backward_default_reduction", OP, [np.array(1.0), x, y], {}))
    return specs
