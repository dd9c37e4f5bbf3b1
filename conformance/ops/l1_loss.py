"""L1Loss: its oracle, specs and bench baseline."""

from __future__ import annotations

import warnings

from ..specs import Spec, pointwise_forms, rng
from . import result, tensor, torch_and_functional
from .smooth_l1_loss import extremes

OP = "L1Loss"


def oracle(input, target, *, reduction):
    _, F = torch_and_functional()
    with warnings.catch_warnings():  # torch warns when target's size differs from input's: tested on purpose
        warnings.simplefilter("ignore", UserWarning)
        return result(F.l1_loss(tensor(input), tensor(target), reduction=reduction))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.l1_loss(t["input"], t["target"], reduction=reduction)


def specs() -> list[Spec]:
    r = rng(21)
    x, y = r.normal(size=(4, 5)), r.normal(size=(4, 5))
    xe, ye = extremes()
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        specs += pointwise_forms("l1", OP, r, x, y, a)
        specs.append(Spec(f"l1_extremes_{red}", OP, [xe, ye], a, xe.size if red != "none" else 0))
    specs.append(Spec("l1_default_reduction", OP, [x, y], {}, 20))
    return specs
