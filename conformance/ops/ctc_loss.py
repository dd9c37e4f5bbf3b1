"""CtcLoss: its oracle (PyTorch's ctc_loss), specs and bench baseline."""

from __future__ import annotations

import math

import numpy as np

from ..specs import Spec, log_softmax, rng
from ..specs import target_sequences as targets
from . import result, tensor, torch_and_functional

OP = "CtcLoss"


def oracle(log_probs, targets, input_lengths, target_lengths, *, blank=0, reduction="mean", zero_infinity=0):
    torch, F = torch_and_functional()
    lp = tensor(log_probs)
    tl = torch.tensor(np.asarray(target_lengths), dtype=torch.long)
    il = torch.tensor(np.asarray(input_lengths), dtype=torch.long)
    if lp.shape[0] == 0 or lp.shape[1] == 0:  # PyTorch refuses an empty log_probs: no frame, or no sequence
        # no frame: a sequence of no label is certain, any other impossible; made from lp (autograd follows it)
        impossible = torch.where(tl > 0, 0.0 if zero_infinity else math.inf, 0.0).to(torch.float64)
        loss = lp.sum((0, 2)) + impossible
        if reduction == "mean":
            return result((loss / tl.clamp(min=1)).sum() / loss.shape[0] if loss.shape[0] else loss.sum() * math.nan)
        return result(loss.sum() if reduction == "sum" else loss)
    t = torch.tensor(np.asarray(targets), dtype=torch.long)
    return result(F.ctc_loss(lp, t, il, tl, blank=int(blank), reduction=reduction, zero_infinity=bool(zero_infinity)))


def eager(t: dict, reduction: str):
    _, F = torch_and_functional()
    return lambda: F.ctc_loss(t["log_probs"], t["targets"], t["input_lengths"], t["target_lengths"],
                              reduction=reduction)


def forms(r: np.random.Generator) -> list[tuple[str, list, dict, int]]:
    """(form, [log_probs, targets, input_lengths, target_lengths], attributes, terms summed): padded and
    concatenated targets, another blank, repeated labels that need the blank between them, sequences of no
    frame and of no label, targets no alignment fits (inf, or 0 with zero_infinity), log(0) and very unlikely
    classes, log-probabilities that are not normalised, one class besides the blank, no sequence, no frame."""
    t12, n4 = 12, 4
    lp = log_softmax(r, (t12, n4, 5))
    tl, il = np.array([3, 0, 4, 2]), np.array([12, 9, 10, 5])
    padded, joined = targets(r, tl, 5, 0, 4), targets(r, tl, 5, 0)
    blank_last = targets(r, tl, 5, 4, 4)
    repeated = np.array([[2, 2, 2, 0], [1, 1, 3, 3], [4, 4, 4, 4], [3, 0, 0, 0]])
    tight_tl, tight_il = np.array([3, 4, 4, 1]), np.array([5, 6, 7, 1])  # 5 = 2 * 3 - 1, 6 = 4 + 2 blanks
    unlikely = lp.copy()
    unlikely[:, :, 3] = -np.inf  # class 3 never emitted: targets with it are impossible
    unlikely[:6, 1, 0] = -1e4
    raw = r.normal(scale=3.0, size=(t12, n4, 5))  # not normalised: PyTorch takes them as they are
    long_lp = log_softmax(r, (50, 3, 20), 3.0)
    long_tl = np.array([15, 7, 20])
    two = log_softmax(r, (6, 3, 2))
    summed = t12 * 9
    out = []
    for red in ("none", "mean", "sum"):
        a = {"reduction": red}
        many = summed * (n4 if red != "none" else 1)
        out += [
            (f"padded_{red}", [lp, padded, il, tl], a, many),
            (f"concatenated_{red}", [lp, joined, il, tl], a, many),
            (f"blank_last_{red}", [lp, blank_last, il, tl], {**a, "blank": 4}, many),
            (f"repeated_{red}", [lp, repeated, tight_il, tight_tl], a, many),
            (f"too_short_{red}", [lp, repeated, tight_il - 1, tight_tl], a, many),
            (f"too_short_zero_infinity_{red}", [lp, repeated, tight_il - 1, tight_tl], {**a, "zero_infinity": 1},
             many),
            (f"no_frames_no_labels_{red}", [lp, padded, np.array([0, 0, 12, 3]), np.array([0, 2, 4, 0])], a, many),
            (f"unlikely_{red}", [unlikely, padded, il, tl], {**a, "zero_infinity": 1}, many),
            (f"unlikely_infinite_{red}", [unlikely, padded, il, tl], a, many),
            (f"not_normalised_{red}", [raw, padded, il, tl], a, many),
            (f"long_{red}", [long_lp, targets(r, long_tl, 20, 0, 20), np.array([50, 31, 44]), long_tl], a,
             50 * 41 * (3 if red != "none" else 1)),
            (f"one_class_{red}", [two, np.ones((3, 2), np.int64), np.array([6, 3, 1]), np.array([2, 2, 0])], a,
             6 * 5 * (3 if red != "none" else 1)),
            (f"no_sequence_{red}", [np.zeros((5, 0, 4)), np.zeros((0, 3), np.int64), np.zeros(0, np.int64),
                                    np.zeros(0, np.int64)], a, 0),
            (f"no_frame_{red}", [np.zeros((0, 2, 4)), np.array([[1, 2], [0, 0]]), np.zeros(2, np.int64),
                                 np.array([2, 0])], a, 0),
        ]
    out.append(("default_attributes", [lp, padded, il, tl], {}, summed * n4))
    out.append(("small_sum", [log_softmax(r, (4, 2, 3)), np.array([[1, 2], [2, 2]]), np.array([4, 3]),
                              np.array([2, 1])], {"reduction": "sum"}, 4 * 5 * 2))  # the docs' worked example
    return out


def specs() -> list[Spec]:
    r = rng(29)
    return [Spec(f"ctc_loss_{form}", OP, inputs, attrs, summed) for form, inputs, attrs, summed in forms(r)]
