"""SoftTargetCrossEntropyLoss: its oracle (PyTorch's cross_entropy of probabilities), specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, rng
from . import result, tensor, torch_and_functional
from .cross_entropy_loss import eager, logits  # noqa: F401 - F.cross_entropy takes probabilities alike

OP = "SoftTargetCrossEntropyLoss"


def oracle(input, target, weight=None, *, reduction, label_smoothing):
    _, F = torch_and_functional()
    return result(F.cross_entropy(tensor(input), tensor(target), tensor(weight), reduction=reduction,
                                  label_smoothing=label_smoothing))


def row_terms(inputs: list, attrs: dict) -> tuple[np.ndarray, ...]:
    """(p, weight * smoothed target, the size of what log_softmax subtracts per class), in float64, over input's
    shape, for `term_magnitude`."""
    x, t, w = (None if a is None else np.asarray(a, np.float64) for a in [*inputs, None][:3])
    c, e = x.shape[1], attrs["label_smoothing"]
    along = np.ones(c) if w is None else w
    q = ((1 - e) * t + e / max(c, 1)) * along.reshape((1, c) + (1,) * (x.ndim - 2))
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=1, keepdims=True)
        total = np.sum(np.exp(shifted), axis=1, keepdims=True)
        p, sizes = np.exp(shifted) / total, np.abs(shifted) + np.abs(np.log(total)) + 1.0
    return p, q, sizes


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray | float:
    """log_softmax subtracts the row's log-sum-exp from each logit: a loss much smaller than those (a confident
    row) carries their rounding."""
    _, q, sizes = row_terms(inputs, attrs)
    with np.errstate(all="ignore"):
        per_row = np.sum(np.abs(q) * sizes, axis=1)
    if attrs["reduction"] != "none":
        per_row = per_row.sum() / (max(per_row.size, 1) if attrs["reduction"] == "mean" else 1)
    return np.nan_to_num(per_row, nan=0.0, posinf=0.0)


def forms(r: np.random.Generator) -> list[tuple[str, list, dict, int]]:
    """(form, [input, target, weight], attributes, terms summed): (N, C) and (N, C, d1, d2), with and without
    weight, one-hot and unnormalised targets, extreme logits, one class, an empty batch, and -inf logits (NaN
    where their target is 0, as PyTorch)."""
    def probabilities(shape):
        p = r.dirichlet(np.ones(shape[1]), size=(shape[0], *shape[2:]))
        return np.ascontiguousarray(np.moveaxis(p, -1, 1))

    x, t, w = logits(probabilities((4, 5))), probabilities((4, 5)), r.uniform(0.3, 2.0, 5)
    x4, t4 = logits(probabilities((2, 3, 4, 2))), probabilities((2, 3, 4, 2))
    hot = np.eye(5)[[1, 4, 2, 0]]
    extreme = np.array([[60.0, -60.0, 0.0, 30.0, -30.0], [1e4, 0.0, -1e4, 5.0, 5.0]])
    masked = x.copy()
    masked[0, 0] = masked[2, :2] = -np.inf
    out = []
    for red in ("none", "mean", "sum"):
        a, n = {"reduction": red}, 4 if red != "none" else 0
        out += [
            (f"plain_{red}", [x, t, None], a, n),
            (f"weight_{red}", [x, t, w], a, n),
            (f"rank4_{red}", [x4, t4, None], a, 16 if red != "none" else 0),
            (f"rank4_weight_{red}", [x4, t4, w[:3]], a, 16 if red != "none" else 0),
            (f"one_hot_{red}", [x, hot, w], a, n),
            (f"unnormalised_{red}", [x, r.uniform(0.0, 2.0, (4, 5)), None], a, n),
            (f"extreme_{red}", [extreme, t[:2], None], a, 2 if red != "none" else 0),
            (f"one_class_{red}", [np.zeros((3, 1)), np.ones((3, 1)), None], a, 0),
            (f"empty_{red}", [np.zeros((0, 5)), np.zeros((0, 5)), w], a, 0),
            (f"masked_classes_{red}", [masked, t, None], a, n),
        ]
    out.append(("default_attributes", [x, t, None], {}, 4))
    return out


def specs() -> list[Spec]:
    r = rng(25)
    base = forms(r)
    smoothed = [(f"{form}_smoothing", inputs, {**attrs, "label_smoothing": 0.25}, n) for form, inputs, attrs, n in
                base if form.split("_")[0] in ("plain", "weight", "rank4", "masked", "one")]
    return [Spec(f"soft_target_cross_entropy_{form}", OP, inputs, attrs, summed) for form, inputs, attrs, summed
            in base + smoothed]
