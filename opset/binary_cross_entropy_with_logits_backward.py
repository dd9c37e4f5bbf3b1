"""BinaryCrossEntropyWithLogitsBackward: gradient of BinaryCrossEntropyWithLogits w.r.t. the logits."""

from __future__ import annotations

from .binary_cross_entropy_with_logits import DEFINITION as FORWARD
from .builder import Builder
from .spec import EXACT, POSITIVE, PRINCIPAL, PROBABILITY, Input, OpDef

DOC = """\
Gradient of `binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)` with respect
to `input`:

    grad_input = grad_output * weight * ((pos_weight * target + 1 - target) * sigmoid(input) - pos_weight * target)

divided by the number of elements of `input` for `mean` (PyTorch's formula; it has no aten operator).
float16 and bfloat16 compute in float32.
"""


def decompose(b: Builder, grad_output: str, input: str, target: str, weight: str, pos_weight: str) -> str:
    g, x, y, w, p = (b.to_compute(n) for n in (grad_output, input, target, weight, pos_weight))
    p_y = b.op("Mul", p, y)
    coefficient = b.op("Add", p_y, b.op("Sub", b.const(1.0), y))
    grad = b.op("Sub", b.op("Mul", coefficient, b.op("Sigmoid", x)), p_y)
    grad = b.op("Mul", b.op("Mul", grad, g), w)
    grad = b.choose("reduction", {
        "none": lambda s: grad,
        "mean": lambda s: s.op("Div", grad, s.numel(x)),
        "sum": lambda s: grad,
    })
    return b.op("Reshape", grad, b.op("Shape", input))  # fails if a broadcast input enlarged the result


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
    output=Input("grad_input", "Gradient with respect to `input`; `input`'s shape."),
    attributes=FORWARD.attributes,
    decompose=decompose,
    output_shape="input",
    torch=("lossops::binary_cross_entropy_with_logits_backward",),  # no aten operator exists for it
)
