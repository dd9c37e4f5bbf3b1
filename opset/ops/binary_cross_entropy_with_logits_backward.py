"""BinaryCrossEntropyWithLogitsBackward: gradient of BinaryCrossEntropyWithLogits w.r.t. the logits."""

from __future__ import annotations

from ..builder import Builder
from ..spec import EXACT, GRAD_INPUT, POSITIVE, PRINCIPAL, PROBABILITY, Input, OpDef
from .binary_cross_entropy_with_logits import DEFINITION as FORWARD

DOC = """\
Gradient of `binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)` with respect
to `input`:

    grad_input = grad_output * weight * ((pos_weight * target + 1 - target) * sigmoid(input) - pos_weight * target)

divided by the number of elements of `input` for `mean` (PyTorch's formula; it has no aten operator).
float16 and bfloat16 compute in float32. `pos_weight * target + 1 - target` is computed as
`1 + (pos_weight - 1) * target`, so an infinite target gives -inf or +inf as in PyTorch, not NaN.
"""


def decompose(b: Builder, g: str, x: str, y: str, weight: str, pos_weight: str) -> str:
    # sigmoid(x) from e = exp(-|x|), as the forward's softplus: where(x < 0, e, 1) / (1 + e) is accurate for
    # every logit (ONNX Runtime's float32 Sigmoid returns 0 at x = -17.8, where it is 1.9e-8)
    e = b.op("Exp", b.op("Neg", b.op("Abs", x)))
    one = b.const(1.0)
    sigmoid = b.op("Div", b.op("Where", b.op("Less", x, b.const(0.0)), e, one), b.op("Add", one, e))
    p_y = b.times(y, pos_weight)
    s = one  # p * y + 1 - y, as 1 + (p - 1) * y: no inf - inf at p = 1 with an infinite target
    if pos_weight:
        p_minus_1 = b.op("Sub", pos_weight, one)
        s = b.op("Add", one, b.unless_zero(p_minus_1, b.op("Mul", p_minus_1, y)))
    grad = b.op("Sub", b.op("Mul", s, sigmoid), p_y)
    return b.times(b.op("Mul", grad, g), weight)


DEFINITION = OpDef(
    name="BinaryCrossEntropyWithLogitsBackward",
    summary="Gradient of BinaryCrossEntropyWithLogits with respect to the logits.",
    doc=DOC,
    inputs=(
        Input("grad_output", "Gradient of the loss; broadcastable to `input`'s shape (a scalar for `mean`/`sum`)."),
        Input("input", "Logits, any rank.", shape=PRINCIPAL),
        Input("target", "Targets; exactly the shape of `input`.", shape=EXACT, domain=PROBABILITY),
        Input("weight", "Rescaling weight, broadcastable to `input`'s shape.", optional=True, domain=POSITIVE),
        Input("pos_weight", "Weight of positive examples, broadcastable to `input`'s shape.", optional=True,
              domain=POSITIVE),
    ),
    output=GRAD_INPUT,
    attributes=FORWARD.attributes,
    decompose=decompose,
    output_shape="input",
    torch=("lossops::binary_cross_entropy_with_logits_backward",),  # no aten operator exists for it
)
