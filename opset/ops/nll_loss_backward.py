"""NLLLossBackward: gradient of NLLLoss with respect to its log-probabilities (aclnnNLLLossBackward,
aclnnNLLLoss2dBackward)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import CLASSES, GRAD_INPUT, LOG_PROBABILITY, Aclnn, Input, OpDef
from .nll_loss import DEFINITION as FORWARD
from .nll_loss import GRAD_OUTPUT, TARGET, WEIGHT

DOC = """\
Gradient of `NLLLoss(input, target, weight)` with respect to `input`, shape (N, C, d1, ...):

    grad_input[n, c, d...] = -weight[c] * grad_output[n, d...]    at c = target[n, d...], 0 elsewhere

and 0 in the rows whose target is ignore_index. For `mean`, `grad_output` (a scalar) is divided by the sum of
the weights of the rows not ignored; for `sum` it is a scalar too; for `none` it has `target`'s shape.
"""


def decompose(b: Builder, g: str, x: str, t: str, weight: str) -> str:
    return b.op("Where", b.rows.one_hot, b.op("Neg", b.times(b.rows.fed, b.rows.weight)), b.const(0.0))


DEFINITION = OpDef(
    name="NLLLossBackward",
    summary="Gradient of the negative log-likelihood loss with respect to the log-probabilities.",
    doc=DOC,
    inputs=(
        GRAD_OUTPUT,
        Input("input", "Log-probabilities, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES,
              domain=LOG_PROBABILITY),
        TARGET,
        WEIGHT,
    ),
    output=GRAD_INPUT,
    attributes=FORWARD.attributes,
    decompose=decompose,
    output_shape="input",
    torch=("lossops::nll_loss_backward",),  # aten's takes the forward's total weight: no node input holds it
    # aclnn's weight is not optional (a caller without one passes ones of (C,)); its totalWeight is the forward's
    aclnn=Aclnn("aclnnNLLLossBackward", ("gradOutput", "self", "target", "weight"),
                {"910": True, "310P": False, "A2": True, "A3": True, "950": True},
                scalars=(("ignoreIndex", "ignore_index"),), ranks=(2,), forward_outputs=("totalWeight",)),
)
