"""NLLLoss: negative log-likelihood of class log-probabilities (aclnnNLLLoss, aclnnNLLLoss2d)."""

from __future__ import annotations

from ..builder import Builder
from ..spec import (
    CLASS_INDEX,
    CLASSES,
    IGNORE_INDEX,
    LOG_PROBABILITY,
    LOSS,
    PER_CLASS,
    POSITIVE,
    ROWS,
    Aclnn,
    Gradient,
    Input,
    OpDef,
    class_reduction,
)

DOC = """\
Negative log-likelihood loss of log-probabilities `input`, shape (N, C, d1, ...), for class indices `target`,
shape (N, d1, ...):

    loss[n, d...] = -weight[c] * input[n, c, d...]    where c = target[n, d...]; 0 where c is ignore_index

`mean` divides the sum by the sum of `weight[c]` over the rows not ignored (their number without `weight`;
NaN when every row is ignored, as PyTorch). A target outside [0, C) that is not ignore_index is an error.
Its gradient with respect to `input` is NLLLossBackward. float16 and bfloat16 compute in float32.
"""

TARGET = Input("target", "Class indices, int64, `input`'s shape without its class axis: (N, d1, ...).",
               shape=ROWS, domain=CLASS_INDEX)
WEIGHT = Input("weight", "A weight per class, shape (C,).", optional=True, shape=PER_CLASS, domain=POSITIVE)
GRAD_OUTPUT = Input("grad_output", "Gradient of the loss: `target`'s shape for `none`, a scalar otherwise.",
                    shape=LOSS)


def decompose(b: Builder, x: str, t: str, weight: str) -> str:
    return b.op("Neg", b.times(b.rows.picked(x), b.rows.weight))


DEFINITION = OpDef(
    name="NLLLoss",
    summary="Negative log-likelihood loss of class log-probabilities.",
    doc=DOC,
    inputs=(
        Input("input", "Log-probabilities, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES,
              domain=LOG_PROBABILITY),
        TARGET,
        WEIGHT,
    ),
    output=Input("output", "`target`'s shape for `none`; a scalar otherwise."),
    attributes=(class_reduction(), IGNORE_INDEX),
    decompose=decompose,
    reduces=True,
    torch=("aten::nll_loss", "aten::nll_loss2d", "lossops::nll_loss"),
    # (N, C) only: aclnnNLLLoss2d takes (N, C, H, W); its weight is required (ones where the node has none), and it
    # also returns the total weight, which its backward takes
    aclnn=Aclnn("aclnnNLLLoss", ("self", "target", "weight"),
                {"910": True, "310P": True, "A2": True, "A3": True, "950": True},
                scalars=(("ignoreIndex", "ignore_index"),), ranks=(2,), extra_outputs=("totalWeightOut",)),
    gradient=Gradient("NLLLossBackward", ("grad_output", "input", "target", "weight")),
)
