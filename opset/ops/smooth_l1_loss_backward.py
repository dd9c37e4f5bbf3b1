"""SmoothL1LossBackward: gradient of the smooth L1 loss w.r.t. the input (aclnnSmoothL1LossBackward)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import GRAD_INPUT, GRAD_OUTPUT, PREDICTIONS, TARGETS, Aclnn, Attribute, OpDef, reduction

DOC = """\
Gradient of `smooth_l1_loss(input, target, reduction, beta)` with respect to `input`. With `B` the broadcast
shape of `input` and `target`, `g` the `grad_output` broadcast to `B` and `d = input - target`:

    slope = -1 where d <= -beta, 1 where d >= beta, d / beta between      (beta > 0; NaN where d is NaN)
    slope = sign(d), 0 where d is 0 or NaN                                (beta = 0: the L1 loss's gradient)
    grad  = slope * g

divided by the number of elements of `B` for `mean`, and summed over the axes that broadcasting added to or
stretched in `input`, so that `grad_input` has `input`'s shape. For `beta > 0` this is aten's
`smooth_l1_loss_backward`; for `beta = 0` it is what PyTorch's autograd computes, since
`F.smooth_l1_loss` then calls `l1_loss` (aten's kernel called directly with `beta = 0` gives -1 at `d = 0`
and NaN at NaN). `beta` is an ONNX FLOAT attribute: its float32 value is used. float16 and bfloat16 are
computed in float32 and rounded once.
"""

BETA = Attribute("beta", "Where the loss turns from quadratic to linear in |input - target|; 0 gives the L1 "
                 "loss.", 1.0, low=0.0, examples=(0.0, 0.5))


def decompose(b: Builder, g: str, x: str, y: str) -> str:
    d = b.op("Sub", x, y)  # over F: input and target span it
    zero, one, minus_one = b.const(0.0), b.const(1.0), b.const(-1.0)
    known = float(b.attrs["beta"]) if "beta" in b.attrs else None
    if known != 0.0:
        # strict comparisons (CANN's graph mode has no LessOrEqual/GreaterOrEqual), Less alone (OpenVINO's CPU
        # Greater is true where an operand is NaN): at d = +-beta, d / beta is exactly +-1, aten's value there,
        # and a NaN d falls through to d / beta
        beta = b.param("beta")
        low = b.const(-known) if known is not None else b.op("Neg", beta)
        slope = b.op("Where", b.op("Less", d, low), minus_one,
                     b.op("Where", b.op("Less", beta, d), one, b.op("Div", d, beta)))
    if known is None or known == 0.0:
        sign = b.op("Where", b.op("Less", zero, d), one, b.op("Where", b.op("Less", d, zero), minus_one, zero))
        slope = sign if known == 0.0 else b.op("Where", b.op("Equal", beta, zero), sign, slope)
    return b.op("Mul", slope, g)  # g fits F


DEFINITION = OpDef(
    name="SmoothL1LossBackward",
    summary="Gradient of the smooth L1 loss with respect to the input.",
    doc=DOC,
    inputs=(GRAD_OUTPUT, PREDICTIONS, TARGETS),
    output=GRAD_INPUT,
    attributes=(reduction(), BETA),
    decompose=decompose,
    output_shape="input",
    torch=("aten::smooth_l1_loss_backward",),
    aclnn=Aclnn("aclnnSmoothL1LossBackward", ("gradOut", "self", "target"),
                {"910": True, "310P": True, "A2": True, "A3": True, "950": True}),
)
