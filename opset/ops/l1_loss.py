"""L1Loss: the mean absolute error, the forward of L1LossBackward (aclnnL1Loss)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import PREDICTIONS, REDUCED_OUTPUT, TARGETS, Aclnn, Gradient, OpDef
from .l1_loss_backward import DEFINITION as BACKWARD

DOC = """\
The absolute error between `input` and `target`, over their broadcast shape:

    loss = |input - target|

`mean` divides the sum by its number of elements (NaN for an empty one, as PyTorch), `sum` of an empty one is
0. Infinities follow the formula: an infinite `input` or `target` gives +inf, both infinite with the same sign
NaN, as PyTorch. Its gradient with respect to `input` is L1LossBackward. float16 and bfloat16 compute in
float32.
"""


def decompose(b: Builder, x: str, y: str) -> str:
    return b.op("Abs", b.op("Sub", x, y))


DEFINITION = OpDef(
    name="L1Loss",
    summary="Mean absolute error loss (the forward of L1LossBackward).",
    doc=DOC,
    inputs=(PREDICTIONS, TARGETS),
    output=REDUCED_OUTPUT,
    attributes=BACKWARD.attributes,
    decompose=decompose,
    reduces=True,
    torch=("lossops::l1_loss",),  # aten's l1_loss decomposes before export: a custom op keeps it one node
    aclnn=Aclnn("aclnnL1Loss", ("self", "target"), {"910": True, "310P": True, "A2": True, "A3": True, "950": True}),
    gradient=Gradient("L1LossBackward", ("grad_output", "input", "target")),
)
