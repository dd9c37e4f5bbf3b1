"""SmoothL1Loss: its oracle, specs and bench baseline."""

from __future__ import annotations

import warnings

import numpy as np

from ..specs import Spec, pointwise_forms, rng
from . import result, tensor, torch_and_functional

OP = "SmoothL1Loss"

# beta as the float32 attribute holds it; the cases' values are exact in float32
BETAS = {"beta0.5": {"beta": 0.5}, "beta0": {"beta": 0.0}}


def oracle(input, target, *, reduction, beta):
    _, F = torch_and_functional()
    with warnings.catch_warnings():  # torch warns when target's size differs from input's: tested on purpose
        warnings.simplefilter("ignore", UserWarning)
        return result(F.smooth_l1_loss(tensor(input), tensor(target), reduction=reduction,
                                       beta=float(np.float32(beta))))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.smooth_l1_loss(t["input"], t["target"], reduction=reduction)


def extremes() -> tuple[np.ndarray, np.ndarray]:
    """Differences at and around the beta of every case (0.5 and 1), at 0, infinite and huge; a NaN."""
    x = np.array([1.5, -0.5, 0.75, 0.25, 3.0, 0.0, np.inf, -np.inf, 1e30, np.nan, 2.0 + 2**-20])
    y = np.array([0.5, 0.5, 0.25, 0.75, 3.0, 0.0, 1.0, np.inf, -1e30, 1.0, 1.0])
    return x, y


def specs() -> list[Spec]:
    r = rng(17)
    x, y = r.normal(size=(4, 5)), r.normal(size=(4, 5))
    xe, ye = extremes()
    specs = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        s = 20 if red != "none" else 0
        specs += pointwise_forms("smooth_l1", OP, r, x, y, a)
        specs.append(Spec(f"smooth_l1_extremes_{red}", OP, [xe, ye], a, xe.size if red != "none" else 0))
        for name, beta in BETAS.items():
            specs += [
                Spec(f"smooth_l1_{name}_plain_{red}", OP, [x, y], {**a, **beta}, s),
                Spec(f"smooth_l1_{name}_extremes_{red}", OP, [xe, ye], {**a, **beta}, xe.size if red != "none" else 0),
            ]
    specs.append(Spec("smooth_l1_default_reduction", OP, [x, y], {}, 20))
    return specs
