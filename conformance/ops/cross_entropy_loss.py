"""CrossEntropyLoss: its oracle, specs and bench baseline."""

from __future__ import annotations

import numpy as np

from ..specs import Spec, class_forms, indices, rng
from . import result, tensor, torch_and_functional

OP = "CrossEntropyLoss"


def oracle(input, target, weight=None, *, reduction, ignore_index, label_smoothing):
    _, F = torch_and_functional()
    return result(F.cross_entropy(tensor(input), indices(target), tensor(weight), reduction=reduction,
                                  ignore_index=ignore_index, label_smoothing=label_smoothing))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.cross_entropy(t["input"], t["target"], reduction=reduction)


def logits(p: np.ndarray) -> np.ndarray:
    """Logits of probabilities `p`, shifted per row (softmax does not see it)."""
    return 2.0 * np.log(p) + 1.5


def row_terms(inputs: list, attrs: dict) -> tuple[np.ndarray, ...]:
    """(p, per-class weights along axis 1, each row's weight, the rows not ignored, the size of what log_softmax
    subtracts per class, each row's target class on axis 1), in float64, for `term_magnitude`."""
    x, t, w = (None if a is None else np.asarray(a) for a in [*inputs, None][:3])
    x = x.astype(np.float64)
    c = x.shape[1]
    w = np.ones(c) if w is None else w.astype(np.float64)
    with np.errstate(all="ignore"):
        shifted = x - np.max(x, axis=1, keepdims=True)
        total = np.sum(np.exp(shifted), axis=1, keepdims=True)
        # log(total) of a total near 1 (a confident row) keeps only its rounding: an absolute error of a unit
        p, sizes = np.exp(shifted) / total, np.abs(shifted) + np.abs(np.log(total)) + 1.0
    kept = t != attrs["ignore_index"]
    index = np.expand_dims(np.where(kept, t, 0), 1)
    along = w.reshape((1, c) + (1,) * (x.ndim - 2))
    return p, along, np.where(kept, w[np.where(kept, t, 0)], 0.0), kept, sizes, index


def reduced(per_row: np.ndarray, row_weight: np.ndarray, kept: np.ndarray, reduction: str):
    """A per-row size as the loss reduces it (the mean over the rows' total weight, at least one)."""
    if reduction == "none":
        return per_row
    total = float(per_row.sum())
    return total / max(float(row_weight.sum()), 1e-300) if reduction == "mean" and kept.any() else total


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray | float:
    """log_softmax subtracts the row's log-sum-exp from each logit: a loss much smaller than those (a confident
    row) carries their rounding."""
    _, along, row_weight, kept, sizes, index = row_terms(inputs, attrs)
    e = attrs["label_smoothing"]
    with np.errstate(all="ignore"):
        own = np.take_along_axis(sizes, index, axis=1)[:, 0]
        spread = np.sum(sizes * along, axis=1) / sizes.shape[1] if e else 0.0
        per_row = np.where(kept, (1 - e) * row_weight * own + e * spread, 0.0)
    # where the terms overflow (the largest inputs), the result is held to PyTorch's as it is
    return np.nan_to_num(reduced(per_row, row_weight, kept, attrs["reduction"]), nan=0.0, posinf=0.0)


def specs() -> list[Spec]:
    r = rng(23)
    forms = class_forms(r, logits)
    smoothed = [(f"{form}_smoothing", inputs, {**attrs, "label_smoothing": 0.25}, n)
                for form, inputs, attrs, n in forms if form.split("_")[0] in ("plain", "weight", "rank4", "masked")
                or form.startswith("all_ignored")]
    return [Spec(f"cross_entropy_{form}", OP, inputs, attrs, summed) for form, inputs, attrs, summed in
            forms + smoothed]
