"""SigmoidFocalLoss: the focal loss of a detector's per-class logits (CANN's SigmoidFocalLoss,
torchvision.ops.sigmoid_focal_loss)."""

from __future__ import annotations

from ..builder import Builder
from ..log1p import log1p_exp_neg_abs
from ..spec import EXACT, POSITIVE, PRINCIPAL, PROBABILITY, Attribute, Gradient, Input, OpDef, reduction

DOC = """\
The focal loss (Lin et al., 2017) of logits `input` against targets `target` in [0, 1]. Per element, with
`x = input`, `y = target`, `p = sigmoid(x)` and `w = weight` (1 when absent):

    ce      = binary_cross_entropy_with_logits(x, y)          = -y log p - (1 - y) log(1 - p)
    p_t     = p * y + (1 - p) * (1 - y)
    alpha_t = alpha * y + (1 - alpha) * (1 - y)               (1 where alpha < 0)
    loss    = w * alpha_t * (1 - p_t) ** gamma * ce

then reduced by `reduction` as BinaryCrossEntropyWithLogits (mean of an empty input NaN, sum 0). This is
torchvision's `sigmoid_focal_loss` (whose `alpha = -1` turns the balancing off, as any negative `alpha` does
here) and the loss of CANN's `SigmoidFocalLoss` (`pred`, `target`, `weight`; CANN takes an int32 `target`,
rank 2 and no broadcasting, and clamps p and 1 - p at FLT_MIN inside the logarithms).

Computed without cancellation for every finite logit: with `e = exp(-|x|)` and `a` the coefficient of |x| in
`ce` (`1 - y` where x > 0, `y` elsewhere), `ce = a * |x| + log1p(e)` and `1 - p_t = (a + (1 - a) * e) / (1 + e)`,
whose terms are non-negative for y in [0, 1]. torchvision computes `1 - p_t` as written above, which loses
the digits of a confident prediction (x = -20, y = 0: about 1e-7 relative in float64, all of them in float32,
where sigmoid(-20) + 1 rounds to 1), and CANN's clamp makes the loss of a logit past about ±87 in float32 a
constant. float16 and bfloat16 compute in float32. A target outside [0, 1] is outside the loss's domain: it
can make `1 - p_t` negative, whose power is a real number for a whole `gamma` and NaN for a fractional one.
`alpha` and `gamma` are ONNX FLOAT attributes, so the operator uses their float32 values.

An infinite logit gives the loss's limit: 0 where its side's coefficient `a` or `alpha_t` is 0, else +inf
(PyTorch gives NaN at every infinite logit).
"""


def focal_terms(b: Builder, x: str, y: str) -> tuple[str, str, str, str]:
    """(a, e, ce, q) of the doc's formulas, in the compute type."""
    zero, one = b.const(0.0), b.const(1.0)
    e = b.op("Exp", b.op("Neg", b.op("Abs", x)))
    a = b.op("Where", b.op("Greater", x, zero), b.op("Sub", one, y), y)
    ce = b.op("Add", b.unless_zero(a, b.op("Mul", a, b.op("Abs", x))), log1p_exp_neg_abs(b, x))
    q = b.op("Div", b.op("Add", a, b.op("Mul", b.op("Sub", one, a), e)), b.op("Add", one, e))
    return a, e, ce, q


def alpha_t(b: Builder, y: str) -> str:
    """alpha * y + (1 - alpha) * (1 - y), or 1 where alpha < 0; where the node is known, 1 - alpha and the choice
    are made here (CANN's graph mode claims no node whose inputs are all constants)."""
    one = b.const(1.0)
    if "alpha" in b.attrs:
        alpha = float(b.attrs["alpha"])
        if alpha < 0:
            return one
        return b.op("Add", b.op("Mul", b.const(alpha), y), b.op("Mul", b.const(1.0 - alpha), b.op("Sub", one, y)))
    alpha = b.param("alpha")
    balanced = b.op("Add", b.op("Mul", alpha, y), b.op("Mul", b.op("Sub", one, alpha), b.op("Sub", one, y)))
    return b.op("Where", b.op("Less", alpha, b.const(0.0)), one, balanced)


def decompose(b: Builder, x: str, y: str, weight: str) -> str:
    _, _, ce, q = focal_terms(b, x, y)
    inf = b.const(float("inf"))
    # at an infinite logit (ce = inf) the limit inf, also where q**gamma underflows to 0; 0 where alpha_t is 0
    loss = b.op("Where", b.op("Equal", ce, inf), inf, b.op("Mul", ce, b.op("Pow", q, b.param("gamma"))))
    balance = alpha_t(b, y)
    loss = b.op("Mul", loss, balance)
    if not ("alpha" in b.attrs and float(b.attrs["alpha"]) < 0):  # else alpha_t is the constant 1
        loss = b.unless_zero(balance, loss)
    return b.unless_zero(weight, b.op("Mul", loss, weight)) if weight else loss


FOCAL_ATTRIBUTES = (
    reduction(),
    Attribute("alpha", "Weight of the positive class, `1 - alpha` that of the negative; a negative value turns "
              "the balancing off (torchvision's -1).", 0.25, low=-1.0, high=1.0, examples=(-1.0,)),
    # a whole gamma up to 15 is computed as products in the kernels, any other as a power
    Attribute("gamma", "Focusing exponent: 0 gives the (balanced) binary cross entropy.", 2.0, low=0.0,
              examples=(1.5, 0.0)),
)

DEFINITION = OpDef(
    name="SigmoidFocalLoss",
    summary="Focal loss on logits, with alpha balancing, gamma focusing and an optional weight.",
    doc=DOC,
    inputs=(
        Input("input", "Logits, any rank (0 included).", shape=PRINCIPAL),
        Input("target", "Targets in [0, 1] (hard labels or soft ones); exactly the shape of `input`.", shape=EXACT,
              domain=PROBABILITY),
        Input("weight", "Per-element rescaling weight, broadcastable to `input`'s shape.", optional=True,
              domain=POSITIVE),
    ),
    output=Input("output", "`input`'s shape for `none`; a scalar (rank 0) for `mean` and `sum`."),
    attributes=FOCAL_ATTRIBUTES,
    decompose=decompose,
    reduces=True,
    # torchvision's function is Python over aten ops: the exporter sees the custom op, fusion the pattern
    torch=("lossops::sigmoid_focal_loss",),
    gradient=Gradient("SigmoidFocalLossGrad", ("grad_output", "input", "target", "weight")),
)
