"""SoftMarginLossBackward: its oracle (autograd of F.soft_margin_loss), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ...opset.spec import REDUCTIONS
from ..specs import Spec, grad, pointwise_backward_forms, rng, summed_back
from . import tensor, torch_and_functional
from .soft_margin_loss import extremes

OP = "SoftMarginLossBackward"


def oracle(grad_output, input, target, *, reduction):
    torch, F = torch_and_functional()
    x, y, g = tensor(input), tensor(target), tensor(grad_output)
    shape = torch.broadcast_shapes(x.shape, y.shape)
    xb = x.expand(shape).clone().requires_grad_(True)  # aten's kernel broadcasts target only
    loss = F.soft_margin_loss(xb, y.expand(shape), reduction=reduction)
    (gb,) = torch.autograd.grad(loss, xb, g.expand(loss.shape))
    # lossops' one departure from PyTorch (the operator's doc): where exp(t), t = -x * y, overflows, aten's
    # exp(t) / (1 + exp(t)) is inf / inf = NaN; sigmoid(t) is 1 there, as torch._decomp's formula gives
    t = -xb.detach() * y
    scale = 1.0 / max(xb.numel(), 1) if reduction == "mean" else 1.0
    gb = torch.where(torch.isinf(torch.exp(t)), -y * g * scale, gb)
    return gb.sum_to_size(x.shape).numpy()


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray:
    """|y * sigmoid(t) * g| <= |y * g|, summed back to input's shape, where terms of either sign cancel."""
    g, x, y = (np.asarray(a, np.float64) for a in inputs)
    with np.errstate(invalid="ignore"):  # 0 * inf: the expected value is NaN there
        terms = np.broadcast_to(g, np.broadcast_shapes(x.shape, y.shape)) * y
    return summed_back(terms, x.shape, attrs["reduction"])


def eager(t: dict, reduction: str):
    """aten's own backward kernel, as PyTorch's autograd calls it."""
    torch, _ = torch_and_functional()
    x, g, code = t["input"], t["grad_output"], REDUCTIONS.index(reduction)
    return lambda: torch.ops.aten.soft_margin_loss_backward(g.expand(x.shape), x, t["target"], code)


def specs() -> list[Spec]:
    r = rng(20)
    x, y = r.normal(scale=2, size=(4, 5)), r.choice([-1.0, 1.0], size=(4, 5))
    xe, ye = extremes()
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        specs += pointwise_backward_forms("soft_margin_backward", OP, r, x, y, a)
        specs.append(Spec(f"soft_margin_backward_extremes_{red}", OP, [grad(red, xe.shape, r), xe, ye], a))
    specs.append(Spec("soft_margin_backward_scalar_grad_none", OP, [np.array(0.5), x, y], {"reduction": "none"}))
    specs.append(Spec("soft_margin_backward_default_reduction", OP, [np.array(1.0), x, y], {}))
    return specs
