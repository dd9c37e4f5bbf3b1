"""MseLoss: its oracle, specs and bench baseline."""

from __future__ import annotations

import warnings

import numpy as np

from ..specs import Spec, pointwise_forms, rng
from . import result, tensor, torch_and_functional

OP = "MseLoss"


def oracle(input, target, *, reduction):
    _, F = torch_and_functional()
    with warnings.catch_warnings():  # torch warns when target's size differs from input's: tested on purpose
        warnings.simplefilter("ignore", UserWarning)
        return result(F.mse_loss(tensor(input), tensor(target), reduction=reduction))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.mse_loss(t["input"], t["target"], reduction=reduction)


def specs() -> list[Spec]:
    r = rng(15)
    x, y = r.normal(size=(4, 5)), r.normal(size=(4, 5))
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        specs += pointwise_forms("mse", OP, r, x, y, a)
        specs.append(Spec(f"mse_extremes_{red}", OP, [np.array([np.inf, -np.inf, np.inf, 1e30, -3.0, 0.0, 2.0]),
                                                      np.array([1.0, 2.0, np.inf, -1e30, -3.0, 0.0, 2.0 + 2**-20])],
                          a, 7 if red != "none" else 0))
    specs.append(Spec("mse_default_reduction", OP, [x, y], {}, 20))
    return specs
