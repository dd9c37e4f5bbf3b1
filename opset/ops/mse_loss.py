"""MseLoss: the mean squared error, the forward of MseLossBackward (aclnnMseLoss)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import PREDICTIONS, REDUCED_OUTPUT, TARGETS, Aclnn, Gradient, OpDef
from .mse_loss_backward import DEFINITION as BACKWARD

DOC = """\
The squared error between `input` and `target`, over their broadcast shape:

    loss = (input - target)^2

`mean` divides the sum by its number of elements (NaN for an empty one, as PyTorch), `sum` of an empty one is
0. Infinities follow the formula: an infinite `input` or `target` gives +inf, both infinite with the same sign
NaN, as PyTorch. Its gradient with respect to `input` is MseLossBackward. float16 and bfloat16 compute in
float32.
"""


def decompose(b: Builder, x: str, y: str) -> str:
    d = b.op("Sub", x, y)
    return b.op("Mul", d, d)


DEFINITION = OpDef(
    name="MseLoss",
    summary="Mean squared error loss (the forward of MseLossBackward).",
    doc=DOC,
    inputs=(PREDICTIONS, TARGETS),
    output=REDUCED_OUTPUT,
    attributes=BACKWARD.attributes,
    decompose=decompose,
    reduces=True,
    torch=("aten::mse_loss",),
    aclnn=Aclnn("aclnnMseLoss", ("self", "target"), {"910": True, "310P": True, "A2": True, "A3": True, "950": True}),
    gradient=Gradient("MseLossBackward", ("grad_output", "input", "target")),
)
