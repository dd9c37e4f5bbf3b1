"""SoftMarginLossBackward: gradient of the soft margin loss w.r.t. the input (aclnnSoftMarginLossBackward)."""

from __future__ import annotations

from onnx import TensorProto

from ..builder import Builder
from ..spec import GRAD_INPUT, GRAD_OUTPUT, PREDICTIONS, TARGETS, Aclnn, OpDef, reduction

DOC = """\
Gradient of `soft_margin_loss(input, target, reduction)` with respect to `input`. With `B` the broadcast
shape of `input` and `target`, `g` the `grad_output` broadcast to `B` and `t = -input * target`:

    grad = -target * sigmoid(t) * g

divided by the number of elements of `B` for `mean`, and summed over the axes that broadcasting added to or
stretched in `input`, so that `grad_input` has `input`'s shape. sigmoid(t) is computed from exp(-|t|), as the
forward's, so it is accurate for every t: where exp(t) overflows (t beyond 88.7 in float32, 709.8 in float64,
or infinite) aten's eager kernel computes exp(t) / (1 + exp(t)) = inf / inf and gives NaN, and lossops gives
the limit `-target * g`, as PyTorch's reference decomposition (torch._decomp, which torch.compile runs) does.
A NaN `t` (0 times inf) gives NaN, as PyTorch. float32, float16 and bfloat16 compute in float32 with the
margin's rounding error carried, as the forward's; float16 and bfloat16 are rounded once.
"""


def margin(b: Builder, x: str, y: str) -> tuple[str, str]:
    """p = x * y and e = exp(-|p|), both over B. exp(-|p|) is ill-conditioned in p (|p| ulps of error per ulp
    of p): in float32, e is corrected to first order by the product's rounding error (Dekker's two-product,
    Veltkamp's split into 12-bit halves: Mul, Add and Sub only), so it is that of the exact product, which
    PyTorch float64 computes from float32 inputs; float64 rounds the product as PyTorch float64 does."""
    p = b.op("Mul", x, y)
    e = b.op("Exp", b.op("Neg", b.op("Abs", p)))
    if b.compute != TensorProto.FLOAT:
        return p, e

    def halves(a: str) -> tuple[str, str]:
        c = b.op("Mul", b.const(4097.0), a)
        high = b.op("Sub", c, b.op("Sub", c, a))
        return high, b.op("Sub", a, high)

    (xh, xl), (yh, yl) = halves(x), halves(y)
    err = b.op("Add", b.op("Sub", b.op("Mul", xh, yh), p), b.op("Mul", xh, yl))
    err = b.op("Add", b.op("Add", err, b.op("Mul", xl, yh)), b.op("Mul", xl, yl))
    zero = b.const(0.0)
    # 0 where a half overflowed (NaN), p is not finite or 0: no correction is due there
    err = b.op("Where", b.op("Less", b.op("Abs", err), b.op("Abs", p)), err, zero)
    toward = b.op("Where", b.op("Greater", p, zero), err, b.op("Neg", err))  # |p + err| = |p| + toward
    return p, b.op("Sub", e, b.op("Mul", e, toward))


def decompose(b: Builder, g: str, x: str, y: str) -> str:
    p, e = margin(b, x, y)
    # sigmoid(-p) = where(p > 0, e, 1) / (1 + e): accurate for every p (ONNX Runtime's float32 Sigmoid
    # returns 0 below -17.8); a NaN p stays NaN through e
    one = b.const(1.0)
    sigmoid = b.op("Div", b.op("Where", b.op("Greater", p, b.const(0.0)), e, one), b.op("Add", one, e))
    return b.op("Mul", b.op("Mul", b.op("Neg", y), sigmoid), g)  # g fits F


DEFINITION = OpDef(
    name="SoftMarginLossBackward",
    summary="Gradient of the soft margin loss with respect to the input.",
    doc=DOC,
    inputs=(GRAD_OUTPUT, PREDICTIONS, TARGETS),
    output=GRAD_INPUT,
    attributes=(reduction(),),
    decompose=decompose,
    output_shape="input",
    torch=("aten::soft_margin_loss_backward",),
    aclnn=Aclnn("aclnnSoftMarginLossBackward", ("gradOutput", "self", "target"),
                {"910": True, "310P": False, "A2": True, "A3": True, "950": False}),
)
