"""KlDiv: its oracle, specs, bench baseline and the size of its cancelling terms."""

from __future__ import annotations

import warnings

import numpy as np

from ..specs import Spec, rng
from . import result, tensor, torch_and_functional

OP = "KlDiv"


def oracle(input, target, *, reduction, log_target):
    _, F = torch_and_functional()
    with warnings.catch_warnings():  # torch warns that 'mean' is not 'batchmean'; we test both on purpose
        warnings.simplefilter("ignore", UserWarning)
        return result(F.kl_div(tensor(input), tensor(target), reduction=reduction, log_target=bool(log_target)))


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray | float:
    """KlDiv is `xlogy(t, t) - t * x`: a result much smaller than its terms carries their rounding."""
    x, t = (np.asarray(a, np.float64) for a in inputs)
    with np.errstate(all="ignore"):
        if attrs["log_target"]:
            terms = np.exp(t) * (np.abs(t) + np.abs(x))
        else:
            terms = np.abs(np.where(t == 0, 0.0, t * np.log(np.abs(t) + (t == 0)))) + np.abs(t * x)
    reduction, shape = attrs["reduction"], np.asarray(inputs[0]).shape
    if reduction == "none":
        return terms
    total = float(terms.sum())
    if reduction == "mean":
        return total / terms.size if terms.size else 0.0
    if reduction == "batchmean" and shape:
        return total / shape[0] if shape[0] else 0.0
    return total


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    # 'mean' is what the operator's mean means (over every element); PyTorch's warning that it prefers
    # 'batchmean' is not for this comparison
    warnings.filterwarnings("ignore", message="reduction: 'mean' divides", category=UserWarning)
    return lambda: F.kl_div(t["input"], t["target"], reduction=reduction)


def specs() -> list[Spec]:
    r = rng(11)
    lx, t = np.log(r.dirichlet(np.ones(5), size=4)), r.dirichlet(np.ones(5), size=4)
    specs = []
    for red in ("none", "mean", "sum", "batchmean"):
        for lt in (0, 1):
            a = {"reduction": red, "log_target": lt}
            tt = np.log(t) if lt else t
            s = lx.size if red != "none" else 0
            specs += [
                Spec(f"kl_div_plain_{red}_lt{lt}", OP, [lx, tt], a, s),
                Spec(f"kl_div_target_batch1_{red}_lt{lt}", OP, [lx, tt[:1]], a, s),
                Spec(f"kl_div_rank0_{red}_lt{lt}", OP, [np.array(-1.2), np.array(0.3)], a),
                Spec(f"kl_div_empty_{red}_lt{lt}", OP, [np.zeros((0, 5)), np.zeros((0, 5))], a),
            ]
        specs.append(Spec(f"kl_div_target_zero_{red}", OP, [lx[:2, :3], np.array([[0.0, 0.5, 0.5], [0.0, 0.0, 1.0]])],
                          {"reduction": red, "log_target": 0}, 6 if red != "none" else 0))
    return specs
