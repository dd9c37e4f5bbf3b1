"""BinaryCrossEntropyWithLogitsTargetBackward: gradient of BinaryCrossEntropyWithLogits w.r.t. the target
(aclnnBinaryCrossEntropyWithLogitsTargetBackward)."""

from __future__ import annotations

from ..builder import Builder
from ..log1p import log1p_exp_neg_abs
from ..spec import Aclnn, Input, OpDef
from .binary_cross_entropy_with_logits_backward import DEFINITION as INPUT_BACKWARD

DOC = """\
Gradient of `binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction)` with respect to
`target`, which distillation with a teacher that trains needs. The loss is linear in the target, so the
target's values are not read (its shape is `input`'s):

    grad_target = grad_output * weight * (pos_weight * softplus(-input) - softplus(input))

which is `-grad_output * weight * input` without `pos_weight`, as PyTorch computes it. With `L =
log1p(exp(-|x|))` it is computed as `(p - 1) * L - x` for `x >= 0` and `(p - 1) * L - p * x` below, so it
neither overflows nor cancels at `p = 1`, and an infinite logit gives the limit (-inf at +inf, +inf at -inf for
`p > 0`). It is divided by the number of elements of `input` for `mean`. A zero `weight` at an infinite logit gives
NaN, as PyTorch's product does. float16 and bfloat16 compute in float32.
"""


def decompose(b: Builder, g: str, x: str, _y: str, weight: str, pos_weight: str) -> str:
    slope = b.op("Neg", x)
    if pos_weight:
        side = b.op("Where", b.op("Less", x, b.const(0.0)), b.op("Mul", pos_weight, slope), slope)
        slope = b.op("Add", b.op("Mul", b.op("Sub", pos_weight, b.const(1.0)), log1p_exp_neg_abs(b, x)), side)
    return b.times(b.op("Mul", slope, g), weight)


DEFINITION = OpDef(
    name="BinaryCrossEntropyWithLogitsTargetBackward",
    summary="Gradient of BinaryCrossEntropyWithLogits with respect to the target.",
    doc=DOC,
    inputs=INPUT_BACKWARD.inputs,
    output=Input("grad_target", "Gradient with respect to `target`; `target`'s shape (which is `input`'s)."),
    attributes=INPUT_BACKWARD.attributes,
    decompose=decompose,
    output_shape="target",
    torch=("lossops::binary_cross_entropy_with_logits_target_backward",),  # no aten operator exists for it
    aclnn=Aclnn("aclnnBinaryCrossEntropyWithLogitsTargetBackward",
                ("gradOutput", "self", "target", "weightOptional", "posWeightOptional"),
                {"910": False, "310P": False, "A2": True, "A3": True, "950": False}),
)
