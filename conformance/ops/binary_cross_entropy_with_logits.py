"""BinaryCrossEntropyWithLogits: its oracle, specs, bench baseline and the oracle's cancellation allowance."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, rng
from . import result, tensor, torch_and_functional

OP = "BinaryCrossEntropyWithLogits"


def oracle(input, target, weight=None, pos_weight=None, *, reduction):
    torch, F = torch_and_functional()
    x, y, w, p = map(tensor, (input, target, weight, pos_weight))
    loss = F.binary_cross_entropy_with_logits(x, y, weight=w, pos_weight=p, reduction="none")
    # lossops' one departure from PyTorch (the operator's doc): at an infinite logit with a finite target the
    # loss's limit, the coefficient of x's side times inf (0 where it is 0), where PyTorch's formula gives NaN
    one, y_ = torch.ones((), dtype=torch.float64), y.detach()  # no gradient through the limit (inf * 0)
    side = torch.where(x > 0, 1 - y_, (one if p is None else p) * y_)
    limit = torch.where(side == 0, 0.0, side * torch.inf)
    if w is not None:
        limit = torch.where(w == 0, 0.0, limit * w)
    loss = torch.where(torch.isinf(x) & torch.isfinite(y), limit.expand(loss.shape), loss)
    return result({"none": loss, "sum": loss.sum(), "mean": loss.mean()}[reduction])


def oracle_error(inputs: list, attrs: dict) -> np.ndarray | float:
    """PyTorch computes BCE-with-logits as `(1 - y) * x + (1 + (p - 1) * y) * softplus(-x)`: for x << 0 and
    y = 0 the two terms are about |x| each and cancel, so its float64 result is off by up to a few float64
    ulps of |x| (e.g. it returns 0 for x = -100.5, where the loss is exp(-100.5) = 2.2e-44). lossops' form
    has no cancellation; this bound keeps the comparison honest there and is ~1e-14 relative elsewhere."""
    x, y, w, p = (None if a is None else np.asarray(a, np.float64) for a in inputs)
    w = 1.0 if w is None else np.abs(w)
    p = 1.0 if p is None else p
    with np.errstate(all="ignore"):
        magnitude = (np.abs((1 - y) * x) + np.abs(1 + (p - 1) * y) * np.logaddexp(0, -x)) * w
    # none where the terms are infinite: the expected value there is a limit (exact) or itself not finite
    bound = np.where(np.isfinite(magnitude), 4 * np.finfo(np.float64).eps * magnitude, 0.0)
    if attrs["reduction"] == "none":
        return bound
    return float(bound.sum() / (max(bound.size, 1) if attrs["reduction"] == "mean" else 1))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.binary_cross_entropy_with_logits(t["input"], t["target"], reduction=reduction)


def specs() -> list[Spec]:
    r = rng(1)
    x, y = r.normal(scale=3, size=(4, 5)), r.uniform(size=(4, 5))
    specs = []
    for red in ("none", "mean", "sum"):
        s = x.size if red != "none" else 0
        specs += [
            Spec(f"bce_with_logits_plain_{red}", OP, [x, y, None, None], {"reduction": red}, s),
            Spec(f"bce_with_logits_weight_full_{red}", OP, [x, y, r.uniform(size=(4, 5)), None],
                 {"reduction": red}, s),
            Spec(f"bce_with_logits_weight_scalar_{red}", OP, [x, y, np.array(0.7), None], {"reduction": red}, s),
            Spec(f"bce_with_logits_weight_class_{red}", OP, [x, y, r.uniform(size=5), None], {"reduction": red}, s),
            Spec(f"bce_with_logits_pos_weight_{red}", OP, [x, y, None, r.uniform(0.5, 3, size=5)],
                 {"reduction": red}, s),
            Spec(f"bce_with_logits_both_{red}", OP, [x, y, r.uniform(size=(4, 1)), r.uniform(0.5, 3, size=5)],
                 {"reduction": red}, s),
            Spec(f"bce_with_logits_rank0_{red}", OP, [np.array(0.3), np.array(1.0), None, None], {"reduction": red}),
            Spec(f"bce_with_logits_empty_{red}", OP, [np.zeros((0, 5)), np.zeros((0, 5)), None, np.ones(5)],
                 {"reduction": red}),
            Spec(f"bce_with_logits_rank3_{red}", OP, [r.normal(size=(2, 3, 4)), r.uniform(size=(2, 3, 4)), None,
                                                r.uniform(size=4)], {"reduction": red}, s),
        ]
    extreme = np.array([-1e4, -200, -100.5, -20, -1e-3, 0, 1e-3, 20, 100.5, 200, 1e4])
    for target in (0.0, 1.0, 0.5):
        specs.append(Spec(f"bce_with_logits_extreme_target{target}", OP,
                          [extreme, np.full(extreme.shape, target), None, None], {"reduction": "none"}))
    specs.append(Spec("bce_with_logits_extreme_mean", OP, [extreme, np.full(extreme.shape, 0.25), None, None], {},
                      extreme.size))
    # infinite logits give the loss's limit; infinite and huge targets what PyTorch gives (the operator's doc)
    inf = np.inf
    x_inf, y_fin = np.repeat([-inf, inf], 4), np.tile([0.0, 0.25, 1.0, 1.5], 2)
    specs.append(Spec("bce_with_logits_infinite_logits", OP, [x_inf, y_fin, None, None], {"reduction": "none"}))
    specs.append(Spec("bce_with_logits_infinite_logits_weighted", OP,
                      [x_inf, y_fin, np.tile([0.0, 2.0], 4), np.full(8, 3.0)], {"reduction": "none"}))
    specs.append(Spec("bce_with_logits_infinite_targets", OP,
                      [np.array([-3.0, 0.5, 3.0, -inf, inf, -2.0, 0.0]),
                       np.array([inf, -inf, inf, inf, -inf, -inf, inf]), None, None], {"reduction": "none"}))
    specs.append(Spec("bce_with_logits_huge_targets", OP,
                      [np.array([0.0, -2.0, 2.0, 0.0]), np.array([3e38, -3e38, 3e38, -1e30]), None, None],
                      {"reduction": "none"}))
    specs.append(Spec("bce_with_logits_default_reduction", OP, [x, y, None, None], {}, x.size))
    return specs
