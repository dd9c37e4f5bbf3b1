"""The node spec every conformance case is made from, and the helpers the operators' case modules draw with."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..opset.spec import LABEL_LIST, LOG_PROBABILITY, POSITIVE, PROBABILITY


@dataclass
class Spec:
    """One lossops node: operator, float64 inputs (None: optional input absent), attributes. Its cases are
    named `test_<id>_<dtype>`: the id is written out in full where it is made, so a case name found in a report
    can be grepped in the sources (the shapes shared by pointwise losses: `<prefix>_<form>_<reduction>`,
    pointwise_forms below)."""

    id: str
    op: str
    inputs: list[np.ndarray | None]
    attrs: dict = field(default_factory=dict)
    summed: int = 0  # terms summed into each output element (reductions, KL's sum over broadcast axes)


def rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def grad(reduction: str, shape: tuple[int, ...], r: np.random.Generator) -> np.ndarray:
    """A grad_output: a scalar for a reduced loss, else the input's shape."""
    return r.normal(size=()) if reduction != "none" else r.normal(size=shape)


def draw(r: np.random.Generator, domain: str, shape: tuple[int, ...] | int) -> np.ndarray:
    """Random values from an input's domain (its record's `Input.domain`), away from the domain's edges."""
    if domain == PROBABILITY:
        return r.uniform(0.02, 0.98, shape)
    if domain == POSITIVE:
        return r.uniform(0.3, 2.0, shape)
    if domain == LOG_PROBABILITY:
        return np.log(r.uniform(0.01, 1.0, shape))
    if domain == LABEL_LIST:
        return label_lists(r, (shape,) if isinstance(shape, int) else shape)
    return r.normal(scale=3, size=shape)


def label_lists(r: np.random.Generator, shape: tuple[int, ...], most: int = 3) -> np.ndarray:
    """Multi-label targets (int64, `shape`, the classes on axis 1): each row up to `most` distinct labels (some
    rows none), then -1, then values that are not read (classes and -1)."""
    c = shape[1] if len(shape) > 1 else shape[0]
    rows = np.full((int(np.prod(shape)) // max(c, 1), c), -1, np.int64)
    for row in rows:
        k = int(r.integers(0, min(most, c) + 1))
        row[:k] = r.permutation(c)[:k]
        if k + 1 < c:
            row[k + 1:] = r.integers(-1, c, c - k - 1)
    if len(shape) < 2:
        return rows.reshape(shape)
    return np.ascontiguousarray(np.moveaxis(rows.reshape(shape[:1] + shape[2:] + (c,)), -1, 1))


def log_softmax(r: np.random.Generator, shape: tuple[int, ...], scale: float = 2.0) -> np.ndarray:
    """Log-probabilities over the last axis of random logits (a sequence loss's per-frame log_probs)."""
    logits = r.normal(scale=scale, size=shape)
    top = logits.max(-1, keepdims=True) if shape[-1] else 0.0
    return logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))


def target_sequences(r: np.random.Generator, lengths: np.ndarray, classes: int, blank: int,
                     width: int | None = None) -> np.ndarray:
    """int64 labels for each target length (classes other than blank): padded to `width` with values that are
    not read (a blank, a -1, any class), or concatenated where `width` is None."""
    choices = np.array([c for c in range(classes) if c != blank])
    rows = [r.choice(choices, int(n)) for n in lengths]
    if width is None:
        return np.concatenate([*rows, np.zeros(0, np.int64)]).astype(np.int64)
    padded = r.integers(-1, classes, (len(rows), width))
    for k, row in enumerate(rows):
        padded[k, :len(row)] = row
    return padded.astype(np.int64)


def sequence_batch(r: np.random.Generator, frames: int, batch: int, classes: int, most: int,
                   concatenated: bool = False) -> list[np.ndarray]:
    """A sequence loss's inputs (CTC, blank 0): log_probs (T, N, C), targets of 0 to `most` labels (padded to
    `most`, or concatenated), each sequence's frames (some fewer than T) and its target's length."""
    lengths = r.integers(0, most + 1, batch)
    frames_of = np.maximum(frames - r.integers(0, max(frames // 3, 1), batch), 0)
    return [log_softmax(r, (frames, batch, classes)),
            target_sequences(r, lengths, classes, 0, None if concatenated else most), frames_of.astype(np.int64),
            lengths.astype(np.int64)]


def indices(target):
    """A class loss's target as PyTorch takes it: int64 (the suite's cases hold it as int64 already)."""
    import torch

    return torch.tensor(np.asarray(target), dtype=torch.long)  # a copy: a stored golden is read-only


def class_forms(r: np.random.Generator, link) -> list[tuple[str, list, dict, int]]:
    """(form, [input, target, weight], attributes, terms summed) of the shapes and values every class loss is
    held to, `input` being `link` of probabilities (np.log: log-probabilities; a logit's link for logits): (N, C)
    and (N, C, d1, d2), with and without weight, ignored rows, a batch whose every row is ignored, ignore_index
    inside [0, C), a weight of 0, one class, an empty batch, and -inf at classes no target picks."""
    def probabilities(shape):
        p = r.dirichlet(np.ones(shape[1]), size=(shape[0], *shape[2:]))
        return np.ascontiguousarray(np.moveaxis(p, -1, 1))

    x, t, w = link(probabilities((4, 5))), np.array([1, 4, -100, 0]), r.uniform(0.3, 2.0, 5)
    x4, t4 = link(probabilities((2, 3, 4, 2))), r.integers(0, 3, (2, 4, 2))
    t4[0, 1, 1] = -100
    masked = x.copy()
    masked[0, 0] = masked[1, 2] = masked[2, :] = -np.inf  # at classes the targets do not pick, and an ignored row
    forms = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        n = 4 if red != "none" else 0
        forms += [
            (f"plain_{red}", [x, t, None], a, n),
            (f"weight_{red}", [x, t, w], a, n),
            (f"rank4_{red}", [x4, t4, None], a, 16 if red != "none" else 0),
            (f"rank4_weight_{red}", [x4, t4, w[:3]], a, 16 if red != "none" else 0),
            (f"all_ignored_{red}", [x[:3], np.full(3, -100), w], a, 0),
            (f"ignore_index0_{red}", [x, np.where(t < 0, 0, t), w], {**a, "ignore_index": 0}, n),
            (f"weight_zero_{red}", [x, t, np.array([1.0, 0.0, 2.0, 0.5, 0.0])], a, n),
            (f"one_class_{red}", [np.zeros((3, 1)), np.array([0, 0, -100]), None], a, 0),
            (f"empty_{red}", [np.zeros((0, 5)), np.zeros(0, np.int64), w], a, 0),
            (f"masked_classes_{red}", [masked, t, None], a, n),
        ]
    forms.append(("default_attributes", [x, t, None], {}, 4))
    return [(form, [a if a is None or a.dtype.kind == "f" else a.astype(np.int64) for a in inputs], attrs, n)
            for form, inputs, attrs, n in forms]


def summed_back(terms: np.ndarray, shape: tuple[int, ...], reduction: str) -> np.ndarray:
    """The size of a pointwise backward's terms at each element of its `grad_input` (an input of `shape`):
    |terms| over the broadcast shape, divided by its size for `mean`, summed over the axes that broadcasting
    added to or stretched in the input (for an operator's `term_magnitude`: terms of either sign that cancel
    there leave a result much smaller than them, with their rounding)."""
    terms = np.abs(terms)
    if reduction == "mean":
        terms = terms / max(terms.size, 1)
    extra = terms.ndim - len(shape)
    terms = terms.sum(axis=tuple(range(extra))) if extra else terms
    stretched = tuple(k for k, n in enumerate(shape) if n == 1 and terms.shape[k] != 1)
    return terms.sum(axis=stretched, keepdims=True) if stretched else terms


def pointwise_forms(prefix: str, op: str, r: np.random.Generator, x: np.ndarray, y: np.ndarray,
                    attrs: dict) -> list[Spec]:
    """The shapes every pointwise loss of `input` and `target` (4 x 5 `x` and `y`) is held to: equal shapes,
    either one as a broadcast row, rank 3 against a rank-2 target, rank 0 and empty."""
    red = attrs["reduction"]

    def summed(n: int) -> int:  # the elements a reduction sums
        return n if red != "none" else 0

    return [
        Spec(f"{prefix}_plain_{red}", op, [x, y], attrs, summed(20)),
        Spec(f"{prefix}_target_row_{red}", op, [x, y[:1]], attrs, summed(20)),
        Spec(f"{prefix}_input_row_{red}", op, [x[:1], y], attrs, summed(20)),
        Spec(f"{prefix}_rank3_{red}", op, [r.normal(size=(2, 3, 5)), r.normal(size=(3, 1))], attrs, summed(30)),
        Spec(f"{prefix}_rank0_{red}", op, [np.array(1.5), np.array(-0.25)], attrs),
        Spec(f"{prefix}_empty_{red}", op, [np.zeros((0, 5)), np.zeros((0, 5))], attrs),
    ]


def pointwise_backward_forms(prefix: str, op: str, r: np.random.Generator, x: np.ndarray, y: np.ndarray,
                             attrs: dict) -> list[Spec]:
    """pointwise_forms for the gradient of such a loss with respect to `input` (grad_output first: a scalar
    for a reduced loss; Spec.summed: the elements summed back to each element of a broadcast `input`)."""
    red = attrs["reduction"]
    return [
        Spec(f"{prefix}_plain_{red}", op, [grad(red, (4, 5), r), x, y], attrs),
        Spec(f"{prefix}_target_row_{red}", op, [grad(red, (4, 5), r), x, y[:1]], attrs),
        Spec(f"{prefix}_input_row_{red}", op, [grad(red, (4, 5), r), x[:1], y], attrs, 4),
        Spec(f"{prefix}_rank3_{red}", op, [grad(red, (2, 3, 5), r), r.normal(size=(3, 1)), r.normal(size=(2, 3, 5))],
             attrs, 10),
        Spec(f"{prefix}_rank0_{red}", op, [np.array(0.75), np.array(1.5), np.array(-0.25)], attrs),
        Spec(f"{prefix}_empty_{red}", op, [np.array(1.0), np.zeros((0, 5)), np.zeros((0, 5))], attrs),
    ]
