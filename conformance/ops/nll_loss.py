"""NLLLoss: its oracle, specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, class_forms, indices, rng
from . import result, tensor, torch_and_functional

OP = "NLLLoss"


def oracle(input, target, weight=None, *, reduction, ignore_index):
    _, F = torch_and_functional()
    return result(F.nll_loss(tensor(input), indices(target), tensor(weight), reduction=reduction,
                             ignore_index=ignore_index))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.nll_loss(t["input"], t["target"], reduction=reduction)


def specs() -> list[Spec]:
    r = rng(21)
    return [Spec(f"nll_loss_{form}", OP, inputs, attrs, summed)
            for form, inputs, attrs, summed in class_forms(r, np.log)]
