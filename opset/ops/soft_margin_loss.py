"""SoftMarginLoss: the two-class logistic loss of a margin, the forward of SoftMarginLossBackward
(aclnnSoftMarginLoss)."""

from __future__ import annotations

from ..builder import Builder
from ..log1p import log1p
from ..spec import PREDICTIONS, REDUCED_OUTPUT, TARGETS, Aclnn, Gradient, OpDef
from .soft_margin_loss_backward import DEFINITION as BACKWARD
from .soft_margin_loss_backward import margin

DOC = """\
The logistic loss of the margin `input * target` (targets are usually -1 and 1), over their broadcast shape:

    loss = log(1 + exp(-input * target))

computed as `max(t, 0) + log1p(exp(-|t|))` with `t = -input * target`, so that a loss that is finite is
returned: PyTorch's kernel (and aclnn's formula) take `exp(t)` first and give +inf beyond t = 88.7 in float32
and 709.8 in float64, where lossops gives t plus a term below its last bit. An infinite `t` gives +inf or 0,
a NaN one (0 times inf) NaN, as PyTorch. float32, float16 and bfloat16 compute in float32 with the margin's
rounding error carried (`exp(-|t|)` turns one ulp of `t` into |t| ulps), so they are accurate against PyTorch
float64 of the same inputs; float64 rounds the margin as PyTorch float64 does. `mean` divides the sum by its
number of elements (NaN for an empty one, as PyTorch), `sum` of an empty one is 0. Its gradient with respect
to `input` is SoftMarginLossBackward.
"""


def decompose(b: Builder, x: str, y: str) -> str:
    p, e = margin(b, x, y)
    zero = b.const(0.0)
    # max(t, 0) as a Where: a NaN t gives 0 here and NaN from log1p(e), on every consumer (Max's NaN handling
    # differs between them)
    return b.op("Add", b.op("Where", b.op("Less", p, zero), b.op("Neg", p), zero), log1p(b, e))


DEFINITION = OpDef(
    name="SoftMarginLoss",
    summary="Soft margin loss: log(1 + exp(-input * target)) (the forward of SoftMarginLossBackward).",
    doc=DOC,
    inputs=(PREDICTIONS, TARGETS),
    output=REDUCED_OUTPUT,
    attributes=BACKWARD.attributes,
    decompose=decompose,
    reduces=True,
    torch=("aten::soft_margin_loss",),
    aclnn=Aclnn("aclnnSoftMarginLoss", ("self", "target"), {"910": True, "310P": True, "A2": True, "A3": True,
                                                            "950": False}),
    gradient=Gradient("SoftMarginLossBackward", ("grad_output", "input", "target")),
)
