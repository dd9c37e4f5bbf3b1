"""MseLoss: its oracle, specs and bench baseline."""

from __future__ import annotations

import warnings

import numpy as np

from ..specs import Spec, rng
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
        s = 20 if red != "none" else 0
        specs += [
            Spec(f"mse_plain_{red}", OP, [x, y], a, s),
            Spec(f"mse_target_row_{red}", OP, [x, y[:1]], a, s),
            Spec(f"mse_input_row_{red}", OP, [x[:1], y], a, s),
            Spec(f"mse_rank3_{red}", OP, [r.normal(size=(2, 3, 5)), r.normal(size=(3, 1))], a,
                 30 if red != "none" else 0),
            Spec(f"mse_rank0_{red}", OP, [np.array(1.5), np.array(-0.25)], a),
            Spec(f"mse_empty_{red}", OP, [np.zeros((0, 5)), np.zeros((0, 5))], a),
            Spec(f"mse_extremes_{red}", OP, [np.array([np.inf, -np.inf, np.inf, 1e30, -3.0, 0.0, 2.0]),
                                             np.array([1.0, 2.0, np.inf, -1e30, -3.0, 0.0, 2.0 + 2**-20])], a,
                 7 if red != "none" else 0),
        ]
    specs.append(Spec("mse_default_reduction", OP, [x, y], {}, 20))
    return specs
