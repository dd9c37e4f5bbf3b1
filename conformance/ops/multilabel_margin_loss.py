"""MultilabelMarginLoss: its oracle (PyTorch's multilabel_margin_loss), specs and bench baseline."""

from __future__ import annotations

import math

import numpy as np

from ..specs import Spec, indices, label_lists, rng
from . import result, tensor, torch_and_functional

OP = "MultilabelMarginLoss"


def as_rows(input, target):
    """(input, target) as PyTorch's (rows, C) tensors: axis 1 moved last, the other axes flattened."""
    x, t = tensor(input), indices(target)
    c = x.shape[1]
    return x.movedim(1, -1).reshape(-1, c), t.movedim(1, -1).reshape(-1, c)


def oracle(input, target, *, reduction):
    _, F = torch_and_functional()
    x, t = as_rows(input, target)
    rows_shape = (input.shape[0], *input.shape[2:])
    if x.shape[0] == 0 or x.shape[1] == 0:  # PyTorch refuses no class, and its mean of no row reads garbage
        loss = x.sum(1)  # 0 per row (differentiable: autograd follows an oracle)
        if reduction == "mean":
            return result(loss.sum() * math.nan if x.shape[0] == 0 else loss.mean())
        return result(loss.sum() if reduction == "sum" else loss.reshape(rows_shape))
    loss = F.multilabel_margin_loss(x, t, reduction=reduction)
    return result(loss.reshape(rows_shape) if reduction == "none" else loss)


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.multilabel_margin_loss(t["input"], t["target"], reduction=reduction)


def term_magnitude(inputs: list, attrs: dict) -> np.ndarray | float:
    """A margin 1 - x[y] + x[i] much smaller than its terms carries their rounding: per row, the sum of
    1 + |x[y]| + |x[i]| over the margins above 0, divided by C."""
    x = np.moveaxis(np.asarray(inputs[0], np.float64), 1, -1)
    t = np.moveaxis(np.asarray(inputs[1]), 1, -1)
    c = x.shape[-1]
    rows_x, rows_t = x.reshape(-1, c), t.reshape(-1, c)
    per_row = np.zeros(rows_x.shape[0])
    with np.errstate(all="ignore"):
        for n, (xs, ts) in enumerate(zip(rows_x, rows_t, strict=True)):
            ended = np.flatnonzero(ts < 0)
            labels = ts[:ended[0] if ended.size else c]
            others = np.setdiff1d(np.arange(c), labels)
            z = 1.0 - xs[labels][:, None] + xs[others][None, :]
            sizes = 1.0 + np.abs(xs[labels])[:, None] + np.abs(xs[others])[None, :]
            per_row[n] = np.nan_to_num(np.sum(np.where(z > 0, sizes, 0.0)), posinf=0.0) / max(c, 1)
    if attrs["reduction"] != "none":
        return per_row.sum() / (max(per_row.size, 1) if attrs["reduction"] == "mean" else 1)
    return per_row.reshape(x.shape[:-1])


def forms(r: np.random.Generator) -> list[tuple[str, list, dict, int]]:
    """(form, [input, target], attributes, terms summed): (N, C) and (N, C, d1, d2), rows of no label and of every
    class, a label listed twice, margins of exactly 0, extreme and infinite scores, NaN scores (at a label and at
    another class), one class, an empty batch."""
    x, t = r.normal(scale=1.0, size=(4, 5)), label_lists(r, (4, 5))
    t[0, :3] = [2, 0, -1]  # two labels, then -1
    t[1, :] = -1  # no label
    x4 = r.normal(size=(2, 3, 4, 2))
    t4 = label_lists(r, (2, 3, 4, 2), 2)
    every = np.array([[3, 1, 0, 2, 4], [0, 1, 2, 3, 4]])  # every class a label: nothing to compare with
    twice = np.array([[1, 1, -1, 4, 4], [3, 0, 3, -1, 2]])  # a label listed twice counts twice
    boundary = np.array([[2.0, 1.0, 0.0, 1.5, 3.0], [0.5, -0.5, 0.5, 1.5, -1.0]])  # margins of 0 and of 1
    near = np.array([[0, -1, 0, 0, 0], [0, 3, -1, 2, 2]])
    extreme = np.array([[1e4, -1e4, 0.0, 3.0, -3.0], [np.inf, 0.0, 1.0, -np.inf, 2.0]])
    extreme_t = np.array([[1, 3, -1, 0, 0], [1, 2, -1, -1, -1]])
    nan = np.array([[np.nan, 0.0, 1.0, 2.0, 3.0], [0.5, np.nan, -1.0, 2.0, 0.0]])  # a NaN margin adds nothing
    nan_t = np.array([[1, -1, 0, 0, 0], [1, 4, -1, 0, 0]])
    out = []
    for red in ("none", "mean", "sum"):
        a, n = {"reduction": red}, 4 * 25 if red != "none" else 25
        out += [
            (f"plain_{red}", [x, t], a, n),
            (f"rank4_{red}", [x4, t4], a, 16 * 9 if red != "none" else 9),
            (f"every_class_{red}", [x[:2], every], a, 0),
            (f"listed_twice_{red}", [x[:2], twice], a, 2 * 25 if red != "none" else 25),
            (f"margin_zero_{red}", [boundary, near], a, 2 * 25 if red != "none" else 25),
            (f"extreme_{red}", [extreme, extreme_t], a, 2 * 25 if red != "none" else 25),
            (f"nan_scores_{red}", [nan, nan_t], a, 2 * 25 if red != "none" else 25),
            (f"one_class_{red}", [np.zeros((3, 1)), np.array([[0], [-1], [0]])], a, 0),
            (f"empty_{red}", [np.zeros((0, 5)), np.zeros((0, 5), np.int64)], a, 0),
        ]
    out.append(("default_attributes", [x, t], {}, 4 * 25))
    return out


def specs() -> list[Spec]:
    r = rng(27)
    return [Spec(f"multilabel_margin_loss_{form}", OP, inputs, attrs, summed)
            for form, inputs, attrs, summed in forms(r)]
