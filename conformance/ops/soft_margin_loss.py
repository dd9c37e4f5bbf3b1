"""SoftMarginLoss: its oracle, specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, pointwise_forms, rng
from . import result, tensor, torch_and_functional

OP = "SoftMarginLoss"


def oracle(input, target, *, reduction):
    torch, F = torch_and_functional()
    x, y = torch.broadcast_tensors(tensor(input), tensor(target))  # aten's kernel broadcasts target only
    loss = F.soft_margin_loss(x, y, reduction="none")
    # lossops' one departure from PyTorch (the operator's doc): where exp(t) overflows, t = -x * y finite, the
    # loss is t (log1p(exp(t)) = t + log1p(exp(-t)), and exp(-t) < 1e-308 is far below t's last bit); PyTorch: inf
    t = -x * y
    loss = torch.where(torch.isinf(loss) & torch.isfinite(t), t, loss)
    return result({"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction])


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.soft_margin_loss(t["input"], t["target"], reduction=reduction)


def extremes() -> tuple[np.ndarray, np.ndarray]:
    """Margins across softplus' range: both signs, where exp(t) overflows in float32 (t > 88.7) and float64
    (t > 709.8), infinite, 0 times inf (NaN), a NaN; targets of +-1 and others."""
    x = np.array([0.0, 1e-3, -2.5, 2.5, 20.0, -20.0, -100.0, 100.0, -1e4, 1e30, np.inf, -np.inf, np.inf, 1.0,
                  1.0, np.nan])
    y = np.array([1.0, -1.0, 1.0, 0.5, -1.0, -1.0, 1.0, -1.0, 1.0, -1.0, 1.0, 1.0, 0.0, np.inf, -np.inf, 1.0])
    return x, y


def specs() -> list[Spec]:
    r = rng(19)
    x, y = r.normal(scale=2, size=(4, 5)), r.choice([-1.0, 1.0], size=(4, 5))
    xe, ye = extremes()
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        specs += pointwise_forms("soft_margin", OP, r, x, y, a)
        specs.append(Spec(f"soft_margin_extremes_{red}", OP, [xe, ye], a, xe.size if red != "none" else 0))
    specs.append(Spec("soft_margin_default_reduction", OP, [x, y], {}, 20))
    return specs
