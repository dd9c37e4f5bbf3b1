"""CrossEntropyLoss: softmax cross entropy of class logits (aclnnCrossEntropyLoss's loss)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import CLASSES, IGNORE_INDEX, Aclnn, Attribute, Gradient, Input, OpDef, class_reduction
from .nll_loss import TARGET, WEIGHT

DOC = """\
Cross entropy of logits `input`, shape (N, C, d1, ...), for class indices `target`, shape (N, d1, ...), with
label smoothing e, as PyTorch's `cross_entropy`:

    logp = log_softmax(input, axis=1)
    loss[n, d...] = (1 - e) * -weight[c] * logp[n, c, d...] + (e / C) * -sum_k weight[k] * logp[n, k, d...]

where c = target[n, d...]; 0 where c is ignore_index. `mean` divides the sum by the sum of `weight[c]` over the
rows not ignored (their number without `weight`; NaN when every row is ignored, as PyTorch). A target outside
[0, C) that is not ignore_index is an error. Its gradient with respect to `input` is CrossEntropyLossGrad.
float16 and bfloat16 compute in float32. Probabilities as targets are SoftTargetCrossEntropyLoss.
"""

LABEL_SMOOTHING = Attribute("label_smoothing", "The share e of the target's probability spread evenly over the C "
                            "classes.", 0.0, low=0.0, high=1.0, examples=(0.25,))


def decompose(b: Builder, x: str, t: str, weight: str) -> str:
    rows = b.rows
    logp = b.op("LogSoftmax", x, axis=1)
    nll = b.op("Neg", b.times(rows.picked(logp), rows.weight))
    if b.attrs.get("label_smoothing") == 0:  # a node's expansion (a function serves every value)
        return nll
    e, kept = smoothing(b)
    spread = logp if not weight else b.op("Mul", logp, rows.along_classes(weight))
    smooth = b.op("Neg", b.op("ReduceSum", spread, b.ints([1]), keepdims=1))
    smoothed = b.op("Mul", spread_share(b, e), smooth)
    if "label_smoothing" not in b.attrs:  # 0 without smoothing, even where a logit is -inf (its term is then inf)
        smoothed = b.unless_zero(e, smoothed)
    return b.op("Add", b.op("Mul", kept, nll), smoothed)


def spread_share(b: Builder, e: str) -> str:
    """e / C: a constant where both are known."""
    if "label_smoothing" in b.attrs:
        return b.rows.classes(float(b.attrs["label_smoothing"]))
    return b.op("Mul", e, b.rows.classes(1.0))


def smoothing(b: Builder) -> tuple[str, str]:
    """(e, 1 - e) of the label smoothing e: constants where the node's value is known."""
    if "label_smoothing" in b.attrs:
        e = float(b.attrs["label_smoothing"])
        return b.const(e), b.const(1.0 - e)
    e = b.param("label_smoothing")
    return e, b.op("Sub", b.const(1.0), e)


DEFINITION = OpDef(
    name="CrossEntropyLoss",
    summary="Softmax cross entropy of class logits, with class weights, ignore_index and label smoothing.",
    doc=DOC,
    inputs=(Input("input", "Logits, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES), TARGET, WEIGHT),
    output=Input("output", "`target`'s shape for `none`; a scalar otherwise."),
    attributes=(class_reduction(), IGNORE_INDEX, LABEL_SMOOTHING),
    decompose=decompose,
    reduces=True,
    torch=("aten::cross_entropy_loss", "lossops::cross_entropy"),
    # its reduction is a string (char *reductionOptional); it also returns the log-probabilities for its backward
    aclnn=Aclnn("aclnnCrossEntropyLoss", ("input", "target", "weightOptional"),
                {"910": False, "310P": False, "A2": True, "A3": True, "950": True},
                scalars=(("ignoreIndex", "ignore_index"), ("labelSmoothing", "label_smoothing")), ranks=(2,),
                extra_outputs=("logProbOut", "zlossOut", "lseForZlossOut"), reduction="name"),
    gradient=Gradient("CrossEntropyLossGrad", ("grad_output", "input", "target", "weight")),
)
