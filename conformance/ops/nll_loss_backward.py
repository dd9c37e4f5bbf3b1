"""NLLLossBackward: its oracle (autograd through PyTorch's nll_loss), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, class_forms, grad, indices, rng
from . import tensor, torch_and_functional

OP = "NLLLossBackward"


def oracle(grad_output, input, target, weight=None, *, reduction, ignore_index):
    torch, F = torch_and_functional()
    x = tensor(input).requires_grad_(True)
    loss = F.nll_loss(x, indices(target), tensor(weight), reduction=reduction, ignore_index=ignore_index)
    (g,) = torch.autograd.grad(loss, x, tensor(grad_output).expand(loss.shape))
    return g.numpy()


def eager(t: dict, reduction: str):
    torch, _ = torch_and_functional()
    x, target, g, code = t["input"], t["target"], t["grad_output"], ("none", "mean", "sum").index(reduction)
    total = torch.tensor(float(x.shape[0]), dtype=x.dtype)
    return lambda: torch.ops.aten.nll_loss_backward(g, x, target, None, code, -100, total)


def specs() -> list[Spec]:
    r = rng(22)
    return [Spec(f"nll_loss_backward_{form}", OP, [grad(attrs.get("reduction", "mean"), inputs[0].shape[:1] +
                                                        inputs[0].shape[2:], r), *inputs], attrs)
            for form, inputs, attrs, _ in class_forms(r, np.log)]
