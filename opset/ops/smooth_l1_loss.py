"""SmoothL1Loss: the smooth L1 (Huber-like) loss, the forward of SmoothL1LossBackward (aclnnSmoothL1Loss)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import PREDICTIONS, REDUCED_OUTPUT, TARGETS, Aclnn, Gradient, OpDef
from .smooth_l1_loss_backward import DEFINITION as BACKWARD

DOC = """\
The smooth L1 loss between `input` and `target`, over their broadcast shape, with `z = |input - target|`:

    loss = 0.5 * z^2 / beta     where z < beta
    loss = z - 0.5 * beta       elsewhere (all of it for beta = 0: the L1 loss)

`mean` divides the sum by its number of elements (NaN for an empty one, as PyTorch), `sum` of an empty one is
0. A NaN or infinite difference gives NaN or +inf, as PyTorch. `beta` is an ONNX FLOAT attribute: its float32
value is used. Its gradient with respect to `input` is SmoothL1LossBackward. float16 and bfloat16 compute in
float32.
"""


def decompose(b: Builder, x: str, y: str) -> str:
    z = b.op("Abs", b.op("Sub", x, y))
    if "beta" in b.attrs and float(b.attrs["beta"]) == 0.0:  # known 0: no division by a constant 0 to fold
        return z
    beta, half = b.param("beta"), b.const(0.5)
    # half of a known beta as a constant: CANN's graph mode claims no node of constants alone
    half_beta = b.const(0.5 * float(b.attrs["beta"])) if "beta" in b.attrs else b.op("Mul", half, beta)
    # 0.5 * z * (z / beta): below beta z / beta < 1, so nothing overflows or underflows before the result does
    quadratic = b.op("Mul", b.op("Mul", half, z), b.op("Div", z, beta))
    linear = b.op("Sub", z, half_beta)
    return b.op("Where", b.op("Less", z, beta), quadratic, linear)


DEFINITION = OpDef(
    name="SmoothL1Loss",
    summary="Smooth L1 loss: quadratic below beta, linear above (the forward of SmoothL1LossBackward).",
    doc=DOC,
    inputs=(PREDICTIONS, TARGETS),
    output=REDUCED_OUTPUT,
    attributes=BACKWARD.attributes,
    decompose=decompose,
    reduces=True,
    torch=("aten::smooth_l1_loss",),
    aclnn=Aclnn("aclnnSmoothL1Loss", ("self", "target"), {"910": True, "310P": True, "A2": True, "A3": True,
                                                          "950": True}),
    gradient=Gradient("SmoothL1LossBackward", ("grad_output", "input", "target")),
)
