"""MseLossBackward: gradient of the mean squared error w.r.t. the input (aclnnMseLossBackward)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import GRAD_INPUT, GRAD_OUTPUT, PREDICTIONS, TARGETS, Aclnn, OpDef, reduction

DOC = """\
Gradient of `mse_loss(input, target, reduction)` with respect to `input`. With `B` the broadcast shape of
`input` and `target` and `g` the `grad_output` broadcast to `B`:

    d = 2 * (input - target) * g

divided by the number of elements of `B` for `mean` (aclnn's page and aten's kernel divide by `input`'s, the
same number when `target` does not enlarge `input`; PyTorch's autograd of a broadcasting `mse_loss` divides
by `B`'s), and summed over the axes that broadcasting added to or stretched in `input`, so that `grad_input`
has `input`'s shape. float16 and bfloat16 are computed in float32 and rounded once.
"""


def decompose(b: Builder, g: str, x: str, y: str) -> str:
    # the 2 with g (already divided by N for a mean), as aten's (2 / N) * (x - y) * g: no 2 * x overflows
    return b.op("Mul", b.op("Sub", x, y), b.op("Mul", b.const(2.0), g))  # over F: x and y span it, g fits it


DEFINITION = OpDef(
    name="MseLossBackward",
    summary="Gradient of the mean squared error with respect to the input.",
    doc=DOC,
    inputs=(GRAD_OUTPUT, PREDICTIONS, TARGETS),
    output=GRAD_INPUT,
    attributes=(reduction(),),
    decompose=decompose,
    output_shape="input",
    torch=("aten::mse_loss_backward",),
    aclnn=Aclnn("aclnnMseLossBackward", ("gradOutput", "self", "target"),
                {"910": True, "310P": True, "A2": True, "A3": True, "950": True}),
)
