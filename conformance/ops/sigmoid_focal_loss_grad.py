"""SigmoidFocalLossGrad: its oracle (autograd of the forward's oracle), specs, bench baseline and allowances."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, grad, rng
from . import tensor, torch_and_functional
from .sigmoid_focal_loss import EXTREME_LOGITS, SETTINGS, float64_terms, focal

OP = "SigmoidFocalLossGrad"


def oracle(grad_output, input, target, weight=None, *, reduction, alpha, gamma):
    torch, _ = torch_and_functional()
    x = tensor(input).requires_grad_(True)
    y, w, g = map(tensor, (target, weight, grad_output))
    loss = focal(x, y, alpha, gamma)
    if w is not None:
        loss = loss * w
    loss = {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]
    (result,) = torch.autograd.grad(loss, x, g.expand(loss.shape))
    # at an infinite logit the gradient's limit (the operator's doc): s * alpha_t * a**gamma * a, where PyTorch
    # gives NaN; a = 0 makes it 0
    x = x.detach()
    a = torch.where(x > 0, 1 - y, y)
    alpha_f, gamma_f = float(np.float32(alpha)), float(np.float32(gamma))
    balance = torch.ones(()) if alpha_f < 0 else alpha_f * y + (1 - alpha_f) * (1 - y)
    limit = torch.sign(x) * balance * a**gamma_f * a * g.expand(x.shape) * (1.0 if w is None else w)
    if reduction == "mean":
        limit = limit / max(x.numel(), 1)
    return torch.where(torch.isinf(x), limit, result).numpy()


def _terms(inputs: list, attrs: dict) -> np.ndarray:
    """|g| * w * alpha_t * q**gamma * (q + |gamma * ce * r * (1 - 2y)|): the size of the gradient's terms (torch's
    autograd computes p - y as (1 - y) * p - y * (1 - p), terms whose sum is q)."""
    g, x, y, w = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    w = 1.0 if w is None else np.abs(w)
    alpha, gamma = float(np.float32(attrs["alpha"])), float(np.float32(attrs["gamma"]))
    p, q, ce, balance = float64_terms(x, y, alpha)
    with np.errstate(all="ignore"):
        focus = np.where(q > 0, gamma * ce * p * (1 - p) / q * np.abs(1 - 2 * y), 0.0)
        terms = np.abs(g) * w * balance * q**gamma * (q + focus)
    terms = np.where(np.isfinite(terms), terms, 0.0)
    if attrs["reduction"] == "mean":
        terms = terms / max(np.asarray(x).size, 1)
    return np.broadcast_to(terms, np.asarray(x).shape)


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray:
    """`(p - y) * q**gamma + gamma * ce * q**(gamma - 1) * p * (1 - p) * (1 - 2y)`: its terms cancel where a soft
    target's gradient crosses 0."""
    return _terms(inputs, attrs)


def oracle_error(inputs: list, attrs: dict) -> np.ndarray:
    """The oracle's q**gamma carries gamma times the rounding of its q: 4 * gamma ulps of the terms."""
    return 4 * float(np.float32(attrs["gamma"])) * np.finfo(np.float64).eps * _terms(inputs, attrs)


def eager(t: dict, reduction: str):
    """The gradient's closed form in torch ops, alpha 0.25 and gamma 2."""
    torch, F = torch_and_functional()
    x, y, g = t["input"], t["target"], t["grad_output"]
    scale = 1 / x.numel() if reduction == "mean" else 1.0

    def run():
        p, q = torch.sigmoid(x), torch.sigmoid(x) * (1 - y) + torch.sigmoid(-x) * y
        ce = F.binary_cross_entropy_with_logits(x, y, reduction="none")
        focus = 2 * ce * p * (1 - p) * (1 - 2 * y)
        return (0.25 * y + 0.75 * (1 - y)) * ((p - y) * q * q + focus * q) * g * scale

    return run


def specs() -> list[Spec]:
    """As the forward's, with grad_output a scalar for mean and sum."""
    r = rng(14)
    x = r.normal(scale=3, size=(4, 6))
    y = np.where(r.uniform(size=(4, 6)) < 0.5, r.uniform(size=(4, 6)), np.round(r.uniform(size=(4, 6))))
    specs = []
    for red in ("none", "mean", "sum"):
        g, a = grad(red, x.shape, r), {"reduction": red}
        specs += [Spec(f"sigmoid_focal_loss_grad_{name}_{red}", OP, [g, x, y, None], {**a, **attrs})
                  for name, attrs in SETTINGS.items()]
        specs += [
            Spec(f"sigmoid_focal_loss_grad_weight_full_{red}", OP, [g, x, y, r.uniform(size=(4, 6))], a),
            Spec(f"sigmoid_focal_loss_grad_weight_class_{red}", OP, [g, x, y, r.uniform(size=6)], a),
            Spec(f"sigmoid_focal_loss_grad_rank0_{red}", OP, [np.array(1.5), np.array(-0.7), np.array(1.0), None], a),
            Spec(f"sigmoid_focal_loss_grad_empty_{red}", OP,
                 [np.array(1.0), np.zeros((0, 6)), np.zeros((0, 6)), None], a),
        ]
    for target in (0.0, 1.0, 0.5):
        specs.append(Spec(f"sigmoid_focal_loss_grad_extreme_target{target}", OP,
                          [np.ones(EXTREME_LOGITS.shape), EXTREME_LOGITS, np.full(EXTREME_LOGITS.shape, target), None],
                          {"reduction": "none"}))
    specs.append(Spec("sigmoid_focal_loss_grad_infinite_logits", OP,
                      [np.ones(6), np.repeat([-np.inf, np.inf], 3), np.tile([0.0, 0.25, 1.0], 2), None],
                      {"reduction": "none"}))
    return specs
