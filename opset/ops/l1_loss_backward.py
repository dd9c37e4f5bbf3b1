"""L1LossBackward: gradient of the L1 loss w.r.t. the input (aclnnL1LossBackward)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import GRAD_INPUT, GRAD_OUTPUT, PREDICTIONS, TARGETS, Aclnn, OpDef, reduction

DOC = """\
Gradient of `l1_loss(input, target, reduction)` with respect to `input`. With `B` the broadcast shape of
`input` and `target`, `g` the `grad_output` broadcast to `B` and `d = input - target`:

    grad = sign(d) * g        (0 where d is 0 or NaN)

divided by the number of elements of `B` for `mean`, and summed over the axes that broadcasting added to or
stretched in `input`, so that `grad_input` has `input`'s shape. This is what PyTorch's autograd computes for
`F.l1_loss` (aten has no backward operator for it: `abs`'s gradient is `sgn`, 0 at 0 and at NaN). float16
and bfloat16 are computed in float32 and rounded once.
"""


def decompose(b: Builder, g: str, x: str, y: str) -> str:
    d = b.op("Sub", x, y)  # over F: input and target span it
    zero = b.const(0.0)
    # Where and Less: Sign's value at NaN differs between consumers, and OpenVINO's Greater is true for NaN
    below = b.op("Where", b.op("Less", d, zero), b.const(-1.0), zero)
    sign = b.op("Where", b.op("Less", zero, d), b.const(1.0), below)
    return b.op("Mul", sign, g)  # g fits F


DEFINITION = OpDef(
    name="L1LossBackward",
    summary="Gradient of the L1 loss with respect to the input.",
    doc=DOC,
    inputs=(GRAD_OUTPUT, PREDICTIONS, TARGETS),
    output=GRAD_INPUT,
    attributes=(reduction(),),
    decompose=decompose,
    output_shape="input",
    torch=("lossops::l1_loss_backward",),  # no aten operator exists for it
    aclnn=Aclnn("aclnnL1LossBackward", ("gradOutput", "self", "target"),
                {"910": True, "310P": True, "A2": True, "A3": True, "950": True}),
)
