"""BinaryCrossEntropy: its oracle, specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, rng
from . import result, tensor, torch_and_functional

OP = "BinaryCrossEntropy"


def oracle(input, target, weight=None, *, reduction):
    _, F = torch_and_functional()
    x, y, w = map(tensor, (input, target, weight))
    return result(F.binary_cross_entropy(x, y, weight=None if w is None else w.expand(x.shape), reduction=reduction))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.binary_cross_entropy(t["input"], t["target"], reduction=reduction)


def specs() -> list[Spec]:
    r = rng(10)
    p, y = r.uniform(0.02, 0.98, size=(4, 5)), r.uniform(size=(4, 5))
    specs = []
    for red in ("none", "mean", "sum"):
        s = p.size if red != "none" else 0
        specs += [
            Spec(f"bce_plain_{red}", OP, [p, y, None], {"reduction": red}, s),
            Spec(f"bce_weight_class_{red}", OP, [p, y, r.uniform(size=5)], {"reduction": red}, s),
            Spec(f"bce_rank0_{red}", OP, [np.array(0.3), np.array(1.0), None], {"reduction": red}),
            Spec(f"bce_empty_{red}", OP, [np.zeros((0, 2)), np.zeros((0, 2)), None], {"reduction": red}),
            Spec(f"bce_edges_{red}", OP, [np.array([0.0, 1.0, 1e-7, 1 - 1e-7, 0.5]),
                                          np.array([1.0, 0.0, 0.0, 1.0, 0.5]), None], {"reduction": red}, 5),
        ]
    return specs
