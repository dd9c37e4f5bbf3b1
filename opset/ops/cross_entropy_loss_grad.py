"""CrossEntropyLossGrad: gradient of CrossEntropyLoss with respect to its logits (aclnnCrossEntropyLossGrad)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import CLASSES, GRAD_INPUT, Aclnn, Input, OpDef
from .cross_entropy_loss import DEFINITION as FORWARD
from .cross_entropy_loss import smoothing, spread_share
from .nll_loss import GRAD_OUTPUT, TARGET, WEIGHT

DOC = """\
Gradient of `CrossEntropyLoss(input, target, weight)` with respect to the logits `input`, with p = softmax(input,
axis=1), c = target and e the label smoothing:

    grad_input[n, k, d...] = a * (1 - e) * weight[c] * (p[n, k, d...] - [k == c])
                           + b * (e / C) * (sum_j weight[j] * p[n, k, d...] - weight[k])

with a = b = grad_output[n, d...] for `none`, grad_output for `sum`, and for `mean` grad_output divided by the
rows' total weight (as the loss); 0 in the rows whose target is ignore_index, whatever their logits (PyTorch's
autograd gives NaN there where the row's softmax is undefined: every logit -inf, or a NaN or +inf among them).
It is computed from the logits (the softmax again), so nothing of the forward's size need be kept.
"""


def decompose(b: Builder, g: str, x: str, t: str, weight: str) -> str:
    # p times each row's total coefficient, less the smoothed target: (1 - e) * w[c] at c, plus (e / C) * w[k]
    rows, (e, kept) = b.rows, smoothing(b)
    p = b.op("Softmax", x, axis=1)
    if not weight:  # p - ((1 - e) * one_hot + e / C): the coefficients sum to 1
        share = spread_share(b, e)
        c, known = rows.static_classes, b.attrs.get("label_smoothing")
        hit = b.const(1.0 - known + known / c) if c and known is not None else b.op("Add", kept, share)
        return rows.unless_ignored(b.op("Mul", b.op("Sub", p, b.op("Where", rows.one_hot, hit, share)), rows.fed))
    picked = b.op("Mul", kept, rows.weight)  # (1 - e) * w[c] per row
    spread = b.op("Mul", spread_share(b, e), rows.along_classes(weight))  # (e / C) * w[k] per class
    total = b.op("Add", picked, b.op("Mul", spread_share(b, e), b.op("ReduceSum", weight, keepdims=1)))
    target = b.op("Where", rows.one_hot, b.op("Add", picked, spread), spread)
    return rows.unless_ignored(b.op("Mul", b.op("Sub", b.op("Mul", p, total), target), rows.fed))


DEFINITION = OpDef(
    name="CrossEntropyLossGrad",
    summary="Gradient of the softmax cross entropy with respect to the logits.",
    doc=DOC,
    inputs=(
        GRAD_OUTPUT,
        Input("input", "Logits, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES),
        TARGET,
        WEIGHT,
    ),
    output=GRAD_INPUT,
    attributes=FORWARD.attributes,
    decompose=decompose,
    output_shape="input",
    torch=("lossops::cross_entropy_backward",),
    # aclnn's takes the forward's log-probabilities where the node takes logits: the same gradient, since the
    # softmax of log-probabilities is the softmax of their logits
    aclnn=Aclnn("aclnnCrossEntropyLossGrad", ("gradLoss", "logProb", "target", "weightOptional"),
                {"910": False, "310P": False, "A2": True, "A3": True, "950": True},
                scalars=(("ignoreIndex", "ignore_index"), ("labelSmoothing", "label_smoothing")), ranks=(2,),
                reduction="name", forward_outputs=("logProb",), only=(("labelSmoothing", 0.0),)),
)
