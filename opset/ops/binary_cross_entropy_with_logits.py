"""BinaryCrossEntropyWithLogits: the logits loss fused with the sigmoid (aclnnBinaryCrossEntropyWithLogits)."""

from __future__ import annotations

from ..builder import Builder
from ..log1p import log1p_exp_neg_abs
from ..spec import EXACT, POSITIVE, PRINCIPAL, PROBABILITY, Aclnn, Gradient, Input, OpDef, reduction

DOC = """\
Binary cross entropy between `target` and `sigmoid(input)`, computed from the logits directly. Per element,
with `x = input`, `y = target`, `w = weight` (1 when absent) and `p = pos_weight` (1 when absent):

    loss = w * ((1 - y) * softplus(x) + p * y * softplus(-x))

which equals `-w * (p * y * log(sigmoid(x)) + (1 - y) * log(1 - sigmoid(x)))` and PyTorch's
`binary_cross_entropy_with_logits`, but is finite and accurate for every finite `x`: both terms are
non-negative, so nothing cancels, and `softplus(x) = max(x, 0) + log1p(exp(-|x|))` never overflows.
`mean` divides the sum by the number of elements of `input` (NaN for an empty `input`, as PyTorch);
`sum` of an empty `input` is 0. float16 and bfloat16 are computed in float32 and rounded once.
The coefficient `(1 - y) + p * y` is computed as `1 + (p - 1) * y`, so a target far outside [0, 1] does
not cancel it (x = 0, y = 3.4e38 gives log 2, as PyTorch).

Infinities and overflow, decided against PyTorch:
- An infinite logit gives the loss's limit: +inf where its term's coefficient is positive, 0 where that
  coefficient is 0 (a zero weight, `1 - y` or `p * y` times an infinite softplus is 0). PyTorch returns NaN
  at every infinite logit with a finite target (its formula computes 0 * inf or inf - inf there; the aclnn
  kernel uses the same formula): at x = -inf, y = 0 lossops gives 0, at y > 0 +inf.
- An infinite `target` gives what PyTorch gives: the loss is linear in `y`, so -inf or +inf by the sign of
  its slope, and NaN where that slope is 0 (x = 0 with no `pos_weight`).
- A loss that is finite is returned even where PyTorch overflows in an intermediate (x = -1.7e308,
  y = 0.5, p = 2 in float64 is 1.7e308; PyTorch: inf).
"""


def decompose(b: Builder, x: str, y: str, weight: str, pos_weight: str) -> str:
    # softplus(x) = relu(x) + e and softplus(-x) = relu(-x) + e, e = log1p(exp(-|x|)): the loss is the
    # coefficient of the side x is on times |x|, plus (1 - y + p * y) * e, that sum written 1 + (p - 1) * y
    # so that it does not cancel for a large target
    e = log1p_exp_neg_abs(b, x)
    one_minus_y, p_y = b.op("Sub", b.const(1.0), y), b.times(y, pos_weight)
    side = b.op("Where", b.op("Greater", x, b.const(0.0)), one_minus_y, p_y)
    # a term is 0 where a factor is, also where the other is inf: the limit at x = +-inf, and no NaN from
    # (p - 1) * y at p = 1 with an infinite target
    linear = b.unless_zero(side, b.op("Mul", side, b.op("Abs", x)))
    if pos_weight:
        p_minus_1 = b.op("Sub", pos_weight, b.const(1.0))
        s = b.op("Add", b.const(1.0), b.unless_zero(p_minus_1, b.op("Mul", p_minus_1, y)))
        e = b.unless_zero(e, b.op("Mul", s, e))
    loss = b.op("Add", linear, e)
    return b.unless_zero(weight, b.op("Mul", loss, weight)) if weight else loss


DEFINITION = OpDef(
    name="BinaryCrossEntropyWithLogits",
    summary="Binary cross entropy on logits, with optional weight and pos_weight.",
    doc=DOC,
    inputs=(
        Input("input", "Logits, any rank (0 included).", shape=PRINCIPAL),
        Input("target", "Targets (usually in [0, 1]); exactly the shape of `input`.", shape=EXACT,
              domain=PROBABILITY),
        Input("weight", "Per-element rescaling weight, broadcastable to `input`'s shape.", optional=True,
              domain=POSITIVE),
        Input("pos_weight", "Weight of positive examples, broadcastable to `input`'s shape (typically `[C]`).",
              optional=True, domain=POSITIVE),
    ),
    output=Input("output", "`input`'s shape for `none`; a scalar (rank 0) for `mean` and `sum`."),
    attributes=(reduction(),),
    decompose=decompose,
    reduces=True,
    # the custom op is what training-step export traces instead (aten has no backward operator for it)
    torch=("aten::binary_cross_entropy_with_logits", "lossops::binary_cross_entropy_with_logits"),
    aclnn=Aclnn("aclnnBinaryCrossEntropyWithLogits", ("self", "target", "weightOptional", "posWeightOptional"),
                {"910": True, "310P": True, "A2": True, "A3": None, "950": None}),
    gradient=Gradient("BinaryCrossEntropyWithLogitsBackward",
                      ("grad_output", "input", "target", "weight", "pos_weight")),
    target_gradient=Gradient("BinaryCrossEntropyWithLogitsTargetBackward",
                             ("grad_output", "input", "target", "weight", "pos_weight")),
)
