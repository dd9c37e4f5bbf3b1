"""KlDivTargetBackward: its oracle (autograd of F.kl_div with respect to the target), specs, bench baseline and
the size of its cancelling terms."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng, summed_back
from . import input_gradient, torch_and_functional
from .kl_div_backward import shapes_of_gradients

OP = "KlDivTargetBackward"


def oracle(grad_output, input, target, *, reduction, log_target):
    _, F = torch_and_functional()
    return input_gradient(F.kl_div, grad_output, input, target, of="target", reduction=reduction,
                          log_target=bool(log_target))


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray:
    """`log(t) + 1 - x` (times exp(t) with log_target): a result much smaller than its terms carries their
    rounding; summed back to target's shape."""
    g, x, t = (np.asarray(a, np.float64) for a in inputs)
    full = np.broadcast_shapes(g.shape, x.shape, t.shape)
    with np.errstate(all="ignore"):  # log(0), exp overflow: the expected value is not finite there
        if attrs["log_target"]:
            terms = np.exp(t) * (np.abs(t) + 1 + np.abs(x))
        else:
            terms = np.abs(np.log(np.abs(t))) + 1 + np.abs(x)
        terms = np.broadcast_to(terms * np.abs(g), full)
    if attrs["reduction"] == "batchmean":
        terms = terms / (x.shape[0] if x.ndim and x.shape[0] else 1)
    return summed_back(terms, t.shape, attrs["reduction"])


def eager(t: dict, reduction: str):
    """The formula autograd evaluates: (log(t) + 1 - x) * g, scaled."""
    torch, _ = torch_and_functional()
    scale = 1 / t["target"].numel() if reduction == "mean" else 1.0
    return lambda: torch.log(t["target"]).add_(1).sub_(t["input"]).mul_(t["grad_output"]).mul_(scale)


def specs() -> list[Spec]:
    r = rng(24)
    x = np.log(r.dirichlet(np.ones(5), size=4))
    t = r.dirichlet(np.ones(5), size=4)
    specs = []
    for red in ("none", "mean", "sum", "batchmean"):
        specs += shapes_of_gradients("kl_div_target_backward", OP, r, x, t, "target", red)
        # NaN where a probability target is 0, negative, infinite or NaN (PyTorch's autograd); extremes of each
        # (not a subnormal target: autograd's g * t / t rounds g * t into the subnormals there)
        specs.append(Spec(f"kl_div_target_backward_target_edges_{red}", OP,
                          [grad(red, (7,), r), r.normal(size=7),
                           np.array([0.0, -0.5, np.inf, np.nan, 1e-300, 1e300, 1e-30])],
                          {"reduction": red, "log_target": 0}))
        specs.append(Spec(f"kl_div_target_backward_log_target_edges_{red}", OP,
                          [grad(red, (6,), r), np.array([-1.0, -2.0, np.inf, -3.0, 0.5, -np.inf]),
                           np.array([-800.0, 700.0, -1.0, np.inf, -np.inf, 0.0])],
                          {"reduction": red, "log_target": 1}))
    specs.append(Spec("kl_div_target_backward_default_attrs", OP, [np.array(1.0), x, t], {}))
    return specs
