"""SigmoidFocalLossGrad: gradient of SigmoidFocalLoss w.r.t. the logits (CANN's SigmoidFocalLossGrad)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import EXACT, GRAD_INPUT, POSITIVE, PRINCIPAL, PROBABILITY, Input, OpDef
from .sigmoid_focal_loss import DEFINITION as FORWARD
from .sigmoid_focal_loss import alpha_t, focal_terms

DOC = """\
Gradient of `sigmoid_focal_loss(input, target, weight, reduction, alpha, gamma)` with respect to `input`,
times `grad_output`, divided by the number of elements of `input` for `mean`. In the forward's terms, with
`s = 1` where x > 0 and -1 elsewhere, `q = 1 - p_t` and `r = p * (1 - p) / q`:

    grad_input = grad_output * w * alpha_t * q ** gamma * s * ((a - e / (1 + e)) - gamma * ce * r * (1 - 2a))

which is `alpha_t * w * ((p - y) * q**gamma + gamma * q**(gamma - 1) * p * (1 - p) * (1 - 2y) * ce)` written so
that nothing cancels or overflows for any finite logit (r <= 1 for a target in [0, 1]; a = 0 gives r =
1 / (1 + e)). At an infinite logit the focusing term's limit is 0. CANN's SigmoidFocalLossGrad takes
(`pred`, `target`, `dout`, `weight`) with an int32 target that selects the complement class; lossops' inputs
follow its other backward operators.
"""


def decompose(b: Builder, g: str, x: str, y: str, weight: str) -> str:
    zero, one = b.const(0.0), b.const(1.0)
    a, e, ce, q = focal_terms(b, x, y)
    d = b.op("Add", one, e)
    general = b.op("Div", e, b.op("Mul", d, b.op("Add", a, b.op("Mul", b.op("Sub", one, a), e))))
    r = b.op("Where", b.op("Equal", a, zero), b.op("Div", one, d), general)
    two_a = b.op("Add", a, a)
    focus = b.unless_zero(r, b.op("Mul", b.op("Mul", b.op("Mul", b.param("gamma"), ce), r), b.op("Sub", one, two_a)))
    bracket = b.op("Sub", b.op("Sub", a, b.op("Div", e, d)), focus)
    signed = b.op("Where", b.op("Greater", x, zero), bracket, b.op("Neg", bracket))
    grad = b.op("Mul", b.op("Mul", signed, b.op("Pow", q, b.param("gamma"))), alpha_t(b, y))
    return b.times(b.op("Mul", grad, g), weight)


DEFINITION = OpDef(
    name="SigmoidFocalLossGrad",
    summary="Gradient of SigmoidFocalLoss with respect to the logits.",
    doc=DOC,
    inputs=(
        Input("grad_output", "Gradient of the loss; broadcastable to `input`'s shape (a scalar for `mean`/`sum`)."),
        Input("input", "Logits, any rank.", shape=PRINCIPAL),
        Input("target", "Targets in [0, 1]; exactly the shape of `input`.", shape=EXACT, domain=PROBABILITY),
        Input("weight", "Rescaling weight, broadcastable to `input`'s shape.", optional=True, domain=POSITIVE),
    ),
    output=GRAD_INPUT,
    attributes=FORWARD.attributes,
    decompose=decompose,
    output_shape="input",
    torch=("lossops::sigmoid_focal_loss_backward",),
)
