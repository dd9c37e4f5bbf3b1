"""SoftTargetCrossEntropyLoss: softmax cross entropy of class logits against class probabilities (PyTorch's
cross_entropy with a floating-point target; aclnn has no such operator)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import CLASSES, EXACT, PROBABILITY, Attribute, Gradient, Input, OpDef
from .cross_entropy_loss import LABEL_SMOOTHING, smoothing, spread_share
from .nll_loss import WEIGHT

DOC = """\
Cross entropy of logits `input`, shape (N, C, d1, ...), against class probabilities `target` of the same shape
(soft labels: a teacher's softmax, mixup's blend), with label smoothing e, as PyTorch's `cross_entropy` with a
floating-point target:

    logp = log_softmax(input, axis=1)
    q = (1 - e) * target + e / C
    loss[n, d...] = -sum_k weight[k] * q[n, k, d...] * logp[n, k, d...]

`mean` divides the sum by the number of rows N * d1 * ... (whatever the weights, as PyTorch; NaN for no row).
The target is not checked to sum to 1. A class whose logit is -inf gives NaN where its target is 0 (0 * -inf, as
PyTorch). Its gradient with respect to `input` is SoftTargetCrossEntropyLossGrad. float16 and bfloat16 compute
in float32. Class indices as targets are CrossEntropyLoss.
"""

TARGET = Input("target", "Class probabilities, exactly `input`'s shape: (N, C, d1, ...).", shape=EXACT,
               domain=PROBABILITY)

REDUCTION = Attribute("reduction", "Specifies the reduction to apply to the output: 'none' (one loss per row), 'mean' "
                      "(the sum divided by the number of rows) or 'sum'.", "mean", allowed=("none", "mean", "sum"))


def weighted_target(b: Builder, t: str, weight: str) -> str:
    """weight[k] * ((1 - e) * target + e / C), over input's shape."""
    if b.attrs.get("label_smoothing") != 0:
        e, kept = smoothing(b)
        t = b.op("Add", b.op("Mul", t, kept), spread_share(b, e))
    return b.op("Mul", t, b.rows.along_classes(weight)) if weight else t


def decompose(b: Builder, x: str, t: str, weight: str) -> str:
    terms = b.op("Mul", b.op("LogSoftmax", x, axis=1), weighted_target(b, t, weight))
    return b.op("Neg", b.op("ReduceSum", terms, b.ints([1]), keepdims=1))


DEFINITION = OpDef(
    name="SoftTargetCrossEntropyLoss",
    summary="Softmax cross entropy of class logits against class probabilities, with class weights and label "
            "smoothing.",
    doc=DOC,
    inputs=(Input("input", "Logits, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES), TARGET, WEIGHT),
    output=Input("output", "`input`'s shape without its class axis for `none`; a scalar otherwise."),
    attributes=(REDUCTION, LABEL_SMOOTHING),
    decompose=decompose,
    reduces=True,
    torch=("lossops::soft_target_cross_entropy",),
    gradient=Gradient("SoftTargetCrossEntropyLossGrad", ("grad_output", "input", "target", "weight")),
)
