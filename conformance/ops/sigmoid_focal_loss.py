"""SigmoidFocalLoss: its oracle (torchvision's formula, in forms that do not cancel), specs, bench baseline and
the oracle's gamma-amplified rounding."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, rng
from . import result, tensor, torch_and_functional

OP = "SigmoidFocalLoss"
# the attribute settings the cases run: the defaults, balancing off, gamma 0 (the balanced cross entropy),
# fractional and whole gammas (the kernels' two ways of taking the power)
SETTINGS = {"default": {}, "alpha_off_gamma1.5": {"alpha": -1.0, "gamma": 1.5},
            "gamma0": {"alpha": 0.75, "gamma": 0.0}, "gamma0.5": {"alpha": 0.5, "gamma": 0.5},
            "gamma3": {"alpha": 0.25, "gamma": 3.0}}
EXTREME_LOGITS = np.array([-1e4, -200, -100.5, -20, -1e-3, 0, 1e-3, 20, 100.5, 200, 1e4])


def focal(x, y, alpha: float, gamma: float):
    """torchvision.ops.sigmoid_focal_loss's loss per element, in float64, with its `1 - p_t` written as
    p * (1 - y) + sigmoid(-x) * y and its cross entropy as a sum of softplus terms (the same values; torchvision's
    forms cancel for a confident prediction, which would make the oracle the least accurate party). `alpha` and
    `gamma` as the float32 attributes hold them."""
    torch, _ = torch_and_functional()
    alpha, gamma = float(np.float32(alpha)), float(np.float32(gamma))
    p, zero = torch.sigmoid(x), torch.zeros((), dtype=torch.float64)
    ce = (1 - y) * torch.logaddexp(zero, x) + y * torch.logaddexp(zero, -x)
    loss = ce * (p * (1 - y) + torch.sigmoid(-x) * y) ** gamma
    if alpha >= 0:
        loss = (alpha * y + (1 - alpha) * (1 - y)) * loss
    return loss


def oracle(input, target, weight=None, *, reduction, alpha, gamma):
    torch, _ = torch_and_functional()
    x, y, w = map(tensor, (input, target, weight))
    loss = focal(x, y, alpha, gamma)
    # the loss's limit at an infinite logit (the operator's doc), where PyTorch's formula gives NaN
    side = torch.where(x > 0, 1 - y, y)
    a = float(np.float32(alpha))
    balance = torch.ones_like(y) if a < 0 else a * y + (1 - a) * (1 - y)
    loss = torch.where(torch.isinf(x), torch.where((side == 0) | (balance == 0), 0.0, torch.inf), loss)
    if w is not None:
        loss = torch.where(w == 0, 0.0, loss * w)
    return result({"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction])


def float64_terms(x: np.ndarray, y: np.ndarray, alpha: float) -> tuple[np.ndarray, ...]:
    """(p, |1 - p_t|, the cross entropy, |alpha_t|) in numpy float64, for the allowances (not the oracle)."""
    with np.errstate(all="ignore"):
        p = 1 / (1 + np.exp(-x))
        q = np.abs(p * (1 - y) + (1 - p) * y)
        ce = (1 - y) * np.logaddexp(0, x) + y * np.logaddexp(0, -x)
    return p, q, ce, 1.0 if alpha < 0 else np.abs(alpha * y + (1 - alpha) * (1 - y))


def oracle_error(inputs: list, attrs: dict) -> np.ndarray | float:
    """The oracle's q**gamma carries gamma times the rounding of its q = 1 - p_t (a few float64 ulps, as any
    implementation's q): 4 * gamma ulps of the loss."""
    x, y, w = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    alpha, gamma = float(np.float32(attrs["alpha"])), float(np.float32(attrs["gamma"]))
    _, q, ce, balance = float64_terms(x, y, alpha)
    with np.errstate(all="ignore"):
        loss = np.abs(ce * balance * q**gamma * (w if w is not None else 1.0))
    bound = np.where(np.isfinite(loss), 4 * gamma * np.finfo(np.float64).eps * loss, 0.0)
    if attrs["reduction"] == "none":
        return bound
    return float(bound.sum() / (max(bound.size, 1) if attrs["reduction"] == "mean" else 1))


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray | float:
    """A target outside [0, 1] gives the formula's terms opposite signs (in ce = a|x| + log1p(e), in
    q = (a + (1 - a) e) / (1 + e), in alpha_t), so every implementation's result carries the rounding of the
    terms: the loss times the largest ratio of a factor's terms to the factor, q's amplified by gamma. Inside
    the domain every ratio is 1 and nothing cancels: 0 there."""
    x, y, w = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    alpha, gamma = float(np.float32(attrs["alpha"])), float(np.float32(attrs["gamma"]))
    with np.errstate(all="ignore"):
        e = np.exp(-np.abs(x))
        a = np.where(x > 0, 1 - y, y)
        ce_terms, ce = np.abs(a) * np.abs(x) + np.log1p(e), a * np.abs(x) + np.log1p(e)
        q_terms, q = np.abs(a) + np.abs(1 - a) * e, a + (1 - a) * e
        if alpha < 0:
            b_terms = b = np.ones_like(y)
        else:
            b_terms, b = np.abs(alpha * y) + np.abs((1 - alpha) * (1 - y)), alpha * y + (1 - alpha) * (1 - y)
        loss = np.abs(ce * (q / (1 + e)) ** gamma * b * (1.0 if w is None else w))
        ratio = np.maximum.reduce([ce_terms / np.abs(ce), 1 + gamma * (q_terms / np.abs(q) - 1), b_terms / np.abs(b)])
        terms = np.where((ratio > 1) & np.isfinite(loss * ratio), loss * ratio, 0.0)
    if attrs["reduction"] == "none":
        return terms
    return float(terms.sum() / (max(terms.size, 1) if attrs["reduction"] == "mean" else 1))


def eager(t: dict, reduction: str):
    """torchvision's formula, alpha 0.25 and gamma 2 (the defaults)."""
    torch, F = torch_and_functional()
    x, y = t["input"], t["target"]

    def run():
        p = torch.sigmoid(x)
        ce = F.binary_cross_entropy_with_logits(x, y, reduction="none")
        loss = (0.25 * y + 0.75 * (1 - y)) * ce * (1 - (p * y + (1 - p) * (1 - y))) ** 2
        return {"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction]

    return run


def specs() -> list[Spec]:
    """Each attribute setting, weights (full, per class), soft and hard targets, rank 0 and 3, empty inputs,
    extreme and infinite logits."""
    r = rng(13)
    x = r.normal(scale=3, size=(4, 6))
    y = np.where(r.uniform(size=(4, 6)) < 0.5, r.uniform(size=(4, 6)), np.round(r.uniform(size=(4, 6))))
    specs = []
    for red in ("none", "mean", "sum"):
        s = x.size if red != "none" else 0
        a = {"reduction": red}
        specs += [Spec(f"sigmoid_focal_loss_{name}_{red}", OP, [x, y, None], {**a, **attrs}, s)
                  for name, attrs in SETTINGS.items()]
        specs += [
            Spec(f"sigmoid_focal_loss_weight_full_{red}", OP, [x, y, r.uniform(size=(4, 6))], a, s),
            Spec(f"sigmoid_focal_loss_weight_class_{red}", OP, [x, y, r.uniform(size=6)], a, s),
            Spec(f"sigmoid_focal_loss_rank0_{red}", OP, [np.array(-0.7), np.array(1.0), None], a),
            Spec(f"sigmoid_focal_loss_empty_{red}", OP, [np.zeros((0, 6)), np.zeros((0, 6)), np.ones(6)], a),
            Spec(f"sigmoid_focal_loss_rank3_{red}", OP, [r.normal(size=(2, 3, 4)), r.uniform(size=(2, 3, 4)),
                                                         r.uniform(size=4)], a, s),
        ]
    for target in (0.0, 1.0, 0.5):
        specs.append(Spec(f"sigmoid_focal_loss_extreme_target{target}", OP,
                          [EXTREME_LOGITS, np.full(EXTREME_LOGITS.shape, target), None], {"reduction": "none"}))
    x_inf, y_fin = np.repeat([-np.inf, np.inf], 3), np.tile([0.0, 0.25, 1.0], 2)
    specs.append(Spec("sigmoid_focal_loss_infinite_logits", OP, [x_inf, y_fin, np.tile([0.0, 2.0, 1.0], 2)],
                      {"reduction": "none"}))
    # limits where a factor besides ce is 0 or underflows: alpha_t = 0 (alpha 1, y 0), and q**15 = (1e-8)**15
    # (0 in float32) at x = -inf
    specs.append(Spec("sigmoid_focal_loss_infinite_logits_alpha1_gamma15", OP,
                      [np.array([np.inf, np.inf, -np.inf, -np.inf, -np.inf]), np.array([0.0, 0.5, 1e-8, 1.0, 0.0]),
                       None], {"reduction": "none", "alpha": 1.0, "gamma": 15.0}))
    # targets outside [0, 1] make 1 - p_t negative: its power is real for a whole gamma (products up to 15, pow
    # above), NaN for a fractional one
    y_out = np.array([-0.5, 1.5, 2.0, -1.0, 0.5, 3.0])
    x_out = r.normal(size=6)
    for gamma in (3.0, 16.0, 17.0, 2.5):
        specs.append(Spec(f"sigmoid_focal_loss_target_outside_gamma{gamma:g}", OP, [x_out, y_out, None],
                          {"reduction": "none", "gamma": gamma}))
    return specs
