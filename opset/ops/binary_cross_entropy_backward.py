"""BinaryCrossEntropyBackward: gradient of BCE w.r.t. the probabilities (aclnnBinaryCrossEntropyBackward)."""

from __future__ import annotations

import numpy as np

from ..builder import Builder
from ..spec import GRAD_INPUT, POSITIVE, PRINCIPAL, PROBABILITY, Aclnn, Input, OpDef, reduction

# The clamp of x * (1 - x): PyTorch's and the Ascend kernel's 1e-12, which PyTorch stores as a C float, so
# in double it is float32(1e-12) = 9.99999996e-13 (measured: torch float64 results match this, not 1e-12).
EPSILON = float(np.float32(1e-12))

DOC = """\
Gradient of `binary_cross_entropy(input, target, weight, reduction)` with respect to `input`:

    grad_input = grad_output * weight * (input - target) / max(input * (1 - input), 1e-12)

divided by the number of elements of `input` for `mean`. The clamp is applied in the compute precision
(its value is float32(1e-12), as in PyTorch, also when computing in double),
so `input` of exactly 0 or 1 gives a large finite value in float and double (about ±1e12) instead of inf
or NaN. Values of `input` outside [0, 1] are not checked (PyTorch does not check them either). float16 and
bfloat16 are computed in float32 and rounded once.
"""


def decompose(b: Builder, g: str, x: str, y: str, weight: str) -> str:
    denominator = b.at_least(b.op("Mul", b.op("Sub", b.const(1.0), x), x), b.const(EPSILON))
    # PyTorch's order; every term has input's shape or fits it, so the gradient has input's shape
    return b.times(b.op("Div", b.op("Mul", b.op("Sub", x, y), g), denominator), weight)


DEFINITION = OpDef(
    name="BinaryCrossEntropyBackward",
    summary="Gradient of binary cross entropy with respect to the probabilities.",
    doc=DOC,
    inputs=(
        Input("grad_output", "Gradient of the loss; broadcastable to `input`'s shape (a scalar for `mean`/`sum`)."),
        Input("input", "Probabilities, any rank.", shape=PRINCIPAL, domain=PROBABILITY),
        Input("target", "Targets, broadcastable to `input`'s shape.", domain=PROBABILITY),
        Input("weight", "Rescaling weight, broadcastable to `input`'s shape.", optional=True, domain=POSITIVE),
    ),
    output=GRAD_INPUT,
    attributes=(reduction(),),
    decompose=decompose,
    output_shape="input",
    torch=("aten::binary_cross_entropy_backward",),
    aclnn=Aclnn("aclnnBinaryCrossEntropyBackward", ("gradOutput", "self", "target", "weightOptional"),
                {"910": True, "310P": True, "A2": True, "A3": True, "950": True}),
)
