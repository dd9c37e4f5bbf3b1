"""MultilabelMarginLossBackward: gradient of MultilabelMarginLoss with respect to its scores."""

from __future__ import annotations

from ..builder import Builder
from ..spec import CLASSES, GRAD_INPUT, LOSS, Input, OpDef
from .multilabel_margin_loss import DEFINITION as FORWARD
from .multilabel_margin_loss import TARGET, margins

DOC = """\
Gradient of `MultilabelMarginLoss(input, target)` with respect to the scores `input`: each margin
1 - (input[y_j] - input[i]) above 0 adds a / C at class i and takes a / C from class y_j,

    grad_input[n, k, d...] = a / C * (number of the row's margins above 0 with i = k
                                      - number of those with y_j = k)

with a = grad_output[n, d...] for `none`, grad_output for `sum`, and grad_output divided by the number of rows
for `mean` (PyTorch's; at a margin of exactly 0 the loss has no derivative, and, as PyTorch, it adds nothing).
"""

GRAD_OUTPUT = Input("grad_output", "Gradient of the loss: `input`'s shape without its class axis for `none`, a "
                    "scalar otherwise.", shape=LOSS)


def decompose(b: Builder, g: str, x: str, t: str) -> str:
    hit, counts, _ = margins(b, x, t)  # counts: 1 or 0 over (N, K, C, d...)
    at_class = b.op("ReduceSum", counts, b.ints([1]), keepdims=0)  # (N, C, d...)
    per_label = b.op("ReduceSum", counts, b.ints([2]), keepdims=1)  # (N, K, 1, d...)
    at_label = b.op("ReduceSum", b.op("Mul", b.op("Cast", hit, to=b.compute), per_label), b.ints([1]), keepdims=0)
    return b.op("Mul", b.op("Sub", at_class, at_label), b.op("Mul", b.rows.fed, b.rows.per_class()))


DEFINITION = OpDef(
    name="MultilabelMarginLossBackward",
    summary="Gradient of the multi-label hinge loss with respect to the scores.",
    doc=DOC,
    inputs=(
        GRAD_OUTPUT,
        Input("input", "Scores, (N, C, d1, ...): the classes on axis 1.", shape=CLASSES),
        TARGET,
    ),
    output=GRAD_INPUT,
    attributes=FORWARD.attributes,
    decompose=decompose,
    output_shape="input",
    torch=("lossops::multilabel_margin_loss_backward",),
)
